/**
 * Text that is not well-formed Unicode (an unpaired UTF-16 surrogate, `"\ud800"` in JSON) is a 400
 * naming its field wherever it enters (DECISIONS 22): every request schema, property-tested, and
 * the real app's answers. Well-formed text, astral characters and emoji included, is taken.
 */
import fc from 'fast-check';
import type { z } from 'zod';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formatZodIssues } from '../../engine/validate.js';
import { formatPath } from '../../engine/paths.js';
import { isWellFormed, UNPAIRED_SURROGATE_PROBLEM } from '../../engine/text.js';
import { CallListQuery, PlaceCallBody, WebCallBody } from '../../src/api/calls.js';
import { ChatCreateBody, ChatMessageBody } from '../../src/api/chats.js';
import { AccountPatchBody, AssistantCreateBody, AssistantPatchBody, NumberCreateBody, WorkflowCreateBody } from '../../src/api/schemas.js';
import { parseAssistantRequestAnswer } from '../../src/webhooks/exchanges.js';
import { build, pipelineAssistant, sampleDefinition, type TestApp } from '../helpers/app.js';

const UUID = '00000000-0000-4000-8000-000000000000';

type Path = (string | number)[];
interface Field {
  schema: z.ZodType;
  body: () => Record<string, unknown>;
  path: Path;
  /** The most UTF-16 units the field takes. */
  max: number;
  /** Any well-formed text (within max, not empty) is taken; false where a pattern narrows it too. */
  anyText: boolean;
}

const call = () => ({ number_id: UUID, customer: { number: '+14155550123', name: 'Ada' }, variables: { topic: 'an order' } });
const campaign = () => ({ number_id: UUID, customers: [{ number: '+14155550123' }, { number: '+14155550124', name: 'Bo' }] });
const assistant = () => ({
  name: 'Desk',
  first_message: 'Hello!',
  llm_config: { provider: 'openai', messages: [{ role: 'system', content: 'Be brief.' }], tools: [{ name: 'lookup', description: 'Finds it.' }] },
  speech_config: { pronunciation: [{ from: 'SQL', to: 'sequel' }], silence: { messages: ['Still there?'] } },
  analysis_plan: { structured_data_plan: { schema: { type: 'object', description: 'the outcome' } } },
});
const workflow = () => ({ name: 'Flow', definition: { ...sampleDefinition(), global_prompt: 'Be kind.' } });
const account = () => ({
  webhook: { url: 'https://example.com/hooks', secret: 'whsec_0123456789' },
  sip: { inbound: { allowed_addresses: [], username: 'desk', password: 'secret-1' } },
});

const FIELDS: Field[] = [
  { schema: PlaceCallBody, body: call, path: ['customer', 'name'], max: 200, anyText: true },
  { schema: PlaceCallBody, body: call, path: ['variables', 'topic'], max: 2000, anyText: true },
  { schema: PlaceCallBody, body: campaign, path: ['customers', 1, 'name'], max: 200, anyText: true },
  { schema: WebCallBody, body: () => ({ assistant_id: UUID, variables: { topic: 'x' } }), path: ['variables', 'topic'], max: 2000, anyText: true },
  { schema: ChatCreateBody, body: () => ({ assistant_id: UUID, variables: { who: 'x' } }), path: ['variables', 'who'], max: 2000, anyText: true },
  { schema: ChatMessageBody, body: () => ({ text: 'hi' }), path: ['text'], max: 4000, anyText: false },
  { schema: AssistantCreateBody, body: assistant, path: ['name'], max: 200, anyText: true },
  { schema: AssistantCreateBody, body: assistant, path: ['first_message'], max: 20_000, anyText: true },
  { schema: AssistantPatchBody, body: assistant, path: ['llm_config', 'messages', 0, 'content'], max: 20_000, anyText: true },
  { schema: AssistantCreateBody, body: assistant, path: ['llm_config', 'tools', 0, 'description'], max: 20_000, anyText: true },
  { schema: AssistantCreateBody, body: assistant, path: ['speech_config', 'pronunciation', 0, 'to'], max: 200, anyText: true },
  { schema: AssistantCreateBody, body: assistant, path: ['speech_config', 'silence', 'messages', 0], max: 20_000, anyText: true },
  // free JSON (a JSON-Schema): only the body-wide check sees into it
  { schema: AssistantCreateBody, body: assistant, path: ['analysis_plan', 'structured_data_plan', 'schema', 'description'], max: 20_000, anyText: true },
  { schema: WorkflowCreateBody, body: workflow, path: ['name'], max: 200, anyText: true },
  { schema: WorkflowCreateBody, body: workflow, path: ['definition', 'global_prompt'], max: 20_000, anyText: true },
  { schema: WorkflowCreateBody, body: workflow, path: ['definition', 'nodes', 1, 'instructions'], max: 20_000, anyText: true },
  { schema: NumberCreateBody, body: () => ({ number: '+14155550100', name: 'Front desk' }), path: ['name'], max: 200, anyText: true },
  { schema: AccountPatchBody, body: account, path: ['webhook', 'secret'], max: 512, anyText: false },
  { schema: AccountPatchBody, body: account, path: ['sip', 'inbound', 'password'], max: 128, anyText: false },
];

function setAt(body: Record<string, unknown>, path: Path, value: unknown): Record<string, unknown> {
  let at: any = body;
  for (const key of path.slice(0, -1)) at = at[key];
  at[path[path.length - 1]!] = value;
  return body;
}

const high = fc.integer({ min: 0xd800, max: 0xdbff }).map((c) => String.fromCharCode(c));
const low = fc.integer({ min: 0xdc00, max: 0xdfff }).map((c) => String.fromCharCode(c));
/** Well-formed text of any code points (astral ones as pairs), at most 80 UTF-16 units; NUL is refused too (storable.ts). */
const wellFormedText = fc.string({ unit: 'binary', maxLength: 40 }).map((t) => t.replaceAll('\u0000', ''));
/** Well-formed text around one unpaired surrogate: a high one before no low, or a low one after no high. */
const withLoneSurrogate = fc
  .tuple(wellFormedText, fc.oneof(high, low), wellFormedText)
  .map(([before, lone, after]) => before + lone + after);

const detailsOf = (schema: z.ZodType, body: unknown): string[] | null => {
  const result = schema.safeParse(body);
  return result.success ? null : formatZodIssues(result.error.issues, '', body);
};

describe('every string of every request body', () => {
  it.each(FIELDS.map((f) => [formatPath(f.path), f] as const))('%s: a lone surrogate anywhere is a 400 naming the field', (_, field) => {
    fc.assert(
      fc.property(withLoneSurrogate, (text) => {
        expect(isWellFormed(text)).toBe(false);
        const body = setAt(field.body(), field.path, text);
        const details = detailsOf(field.schema, body);
        expect(details).toContain(`${formatPath(field.path, body)}: ${UNPAIRED_SURROGATE_PROBLEM}`);
      }),
      { numRuns: 150 },
    );
  });

  it.each(FIELDS.filter((f) => f.anyText).map((f) => [formatPath(f.path), f] as const))('%s: any well-formed text is taken', (_, field) => {
    fc.assert(
      fc.property(wellFormedText.filter((t) => t.length > 0 && t.length <= field.max), (text) => {
        expect(isWellFormed(text)).toBe(true);
        expect(detailsOf(field.schema, setAt(field.body(), field.path, text))).toBeNull();
      }),
      { numRuns: 150 },
    );
  });

  it('astral characters and emoji are well-formed; a pair split either way is not', () => {
    for (const ok of ['Zoë 🎉', '𝄞 clef', '👩‍👩‍👧 family', '\ud83d\ude00']) expect(isWellFormed(ok)).toBe(true);
    for (const bad of ['\ud800', 'Mon\udc00', '\ude00\ud83d', 'a\ud83db', '😀'.slice(0, 1)]) expect(isWellFormed(bad)).toBe(false);
  });

  it('a field name with a lone surrogate is refused as one (variables, free JSON)', () => {
    const vars = { ...call(), variables: { ['top\ud800ic']: 'x' } };
    expect(detailsOf(PlaceCallBody, vars)).toContain(`variables["top\\ud800ic"]: field name ${UNPAIRED_SURROGATE_PROBLEM}`);
    const free = assistant();
    free.analysis_plan.structured_data_plan.schema = { type: 'object', ['\udc00']: 1 } as never;
    expect(detailsOf(AssistantCreateBody, free)?.join('\n')).toContain(`field name ${UNPAIRED_SURROGATE_PROBLEM}`);
  });

  it('a query string cursor with a lone surrogate is refused naming it', () => {
    expect(detailsOf(CallListQuery, { cursor: 'abc\ud800' })).toContain(`cursor: ${UNPAIRED_SURROGATE_PROBLEM}`);
  });
});

describe('an assistant-request answer', () => {
  it('with a lone surrogate anywhere is a failed answer naming where, never a call', () => {
    for (const [answer, where] of [
      [{ error: 'closed \ud800' }, 'error'],
      [{ assistant_id: UUID, variables: { name: 'Mon\udc00' } }, 'variables.name'],
      [{ assistant: { ...assistant(), first_message: '\ud800' } }, 'assistant.first_message'],
    ] as const) {
      const outcome = parseAssistantRequestAnswer(200, JSON.stringify(answer));
      expect(outcome).toMatchObject({ kind: 'rejected', ended_reason: 'assistant-request-failed' });
      expect((outcome as { errors: string[] }).errors).toContain(`${where}: ${UNPAIRED_SURROGATE_PROBLEM}`);
    }
    expect(parseAssistantRequestAnswer(200, JSON.stringify({ assistant_id: UUID, variables: { name: 'Zoë 🎉' } }))).toMatchObject({
      kind: 'assistant-id',
      variables: { name: 'Zoë 🎉' },
    });
  });
});

describe('the real app', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await build();
  });
  afterAll(async () => {
    await t?.close();
  });

  it('answers 400 naming the field, and keeps the well-formed text as sent', async () => {
    // JSON with the escapes as a client writes them: \ud800 alone is not a character
    const raw = (json: string) =>
      t.app.inject({
        method: 'POST',
        url: '/assistants',
        headers: { authorization: `Bearer ${t.key}`, 'content-type': 'application/json' },
        payload: json,
      });
    const refused = await raw('{"name": "Desk", "first_message": "Hello \\ud800", "business_name": "Mon\\udc00"}');
    expect(refused.statusCode).toBe(400);
    expect(refused.json().details).toEqual(
      expect.arrayContaining([`first_message: ${UNPAIRED_SURROGATE_PROBLEM}`, `business_name: ${UNPAIRED_SURROGATE_PROBLEM}`]),
    );
    const taken = await raw(JSON.stringify({ ...pipelineAssistant, first_message: 'Hi 👩‍👩‍👧' }).replace('"Receptionist"', '"Zo\\u00eb \\ud83c\\udf89"'));
    expect(taken.statusCode, taken.body).toBe(201);
    expect(taken.json().assistant).toMatchObject({ name: 'Zoë 🎉', first_message: 'Hi 👩‍👩‍👧' });

    const workflowRefused = await t.request('POST', '/workflows', { name: 'Flow', definition: { ...sampleDefinition(), global_prompt: 'a\ud800' } });
    expect(workflowRefused.statusCode).toBe(400);
    expect(workflowRefused.json().details).toContain(`definition.global_prompt: ${UNPAIRED_SURROGATE_PROBLEM}`);
    const numberRefused = await t.request('POST', '/numbers', { number: '+14155550100', name: '\udfff' });
    expect(numberRefused.json()).toMatchObject({ error: 'Invalid request', details: [`name: ${UNPAIRED_SURROGATE_PROBLEM}`] });
  });
});
