/**
 * Thousands of generated bodies against every write endpoint (fast-check): any JSON value,
 * valid bodies with random mutations, and raw garbage. Whatever comes in, the answer is never a
 * 5xx, every 4xx names its `error`, and every 400 lists its problems in `details`.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LightMyRequestResponse } from 'fastify';
import { build, pipelineAssistant, sampleDefinition, type TestApp } from '../helpers/app.js';

/** Runs per endpoint; seven endpoints, so about 2,800 requests in all (plus the raw-garbage runs). */
const RUNS = Number(process.env.FUZZ_RUNS ?? 400);
const TIMEOUT = 120_000;

let t: TestApp;
let ids: { workflow: string; assistant: string; number: string };

// ---------------------------------------------------------------------------------------------
// Valid bodies to start from

/** A definition that uses every node type and every config block (valid per DECISIONS 3). */
function richDefinition() {
  return {
    version: 1,
    entry_node: 'greet',
    global_prompt: 'You are the front desk of a small clinic.',
    nodes: [
      {
        id: 'greet',
        type: 'conversation',
        first_line: 'Hello, how can I help?',
        instructions: 'Find out what the caller needs.',
        llm_config: { provider: 'openai', model: 'gpt-4o', temperature: 0.3 },
        tts_config: { provider: 'openai', voice_id: 'alloy' },
        stt_config: { provider: 'deepgram', model: 'nova-3', language: 'en' },
      },
      {
        id: 'lookup',
        type: 'tool',
        tool_name: 'lookup_order',
        url: 'https://example.com/tools/lookup',
        arguments: { source: 'phone', priority: 2, rush: true, note: null },
      },
      { id: 'human', type: 'transfer', first_line: 'Transferring you now.', destination: '+14155550123' },
      {
        id: 'help',
        type: 'conversation',
        global: true,
        global_description: 'The caller asks what this service can do.',
        instructions: 'Explain the options.',
      },
      { id: 'bye', type: 'end', first_line: 'Goodbye!' },
    ],
    edges: [
      { from: 'greet', to: 'lookup', description: 'The caller gives an order number.', message: 'One moment.' },
      { from: 'greet', to: 'human', description: 'The caller wants a person.' },
      { from: 'lookup', to: 'bye' },
      { from: 'help', to: 'greet', description: 'The caller is ready to continue.' },
      { from: 'help', to: 'bye', description: 'The caller is done.' },
    ],
  };
}

const richAssistant = {
  name: 'Clinic desk',
  business_name: 'Clinic',
  notification_email: 'ops@example.com',
  notification_emails: ['a@example.com', 'b@example.com'],
  recording_consent: { enabled: true, message: 'This call is recorded.' },
  first_message: 'Hello!',
  is_active: true,
  autonomous_silence_handling: true,
  silence_timeout_seconds: 20,
  max_duration_seconds: 900,
  voicemail_detection: true,
  voicemail_message: 'Please call back.',
  gdpr_mode: false,
  webhook_url: 'https://example.com/hooks',
  webhook_secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
  webhook_events: ['status-update', 'end-of-call-report'],
  analysis_plan: {
    structured_data_plan: {
      enabled: true,
      schema: { type: 'object', properties: { reason: { type: 'string' } } },
      messages: [{ role: 'system', content: 'Extract: {{schema}}' }],
    },
    min_messages_threshold: 2,
  },
  stt_config: { provider: 'deepgram', model: 'nova-3', language: 'en', keyterms: ['clinic'], endpointing: 300 },
  llm_config: {
    provider: 'openai',
    model: 'gpt-4o-mini',
    max_completion_tokens: 500,
    temperature: 0.5,
    messages: [{ role: 'system', content: 'Be brief.' }],
    tools: [
      {
        name: 'book',
        description: 'Book a visit',
        url: 'https://example.com/tools/book',
        async: false,
        parameters: { type: 'object', properties: { day: { type: 'string' } }, required: ['day'] },
      },
    ],
  },
  tts_config: { provider: 'elevenlabs', voice_id: 'voice-123', stability: 0.5, speed: 1.1, apply_text_normalization: 'auto' },
  speech_config: {
    turn_taking: { endpointing_min_delay: 0.4, endpointing_max_delay: 2.5, interruption_min_words: 1 },
    pronunciation: [{ from: 'SQL', to: 'sequel' }],
    background_audio: { enabled: false, clip: 'office', volume: 0.3 },
    silence: { messages: ['Still there?'], final_message: 'Bye.', first_check_seconds: 8, interval_seconds: 8, max_attempts: 2 },
    end_call_message: 'Thanks for calling.',
    first_message_outbound: 'Hi, this is the clinic.',
  },
};

const webhook = { url: 'https://example.com/number-hook', secret: 'a-long-enough-secret', events: ['tool-calls'] };
const twilio = { account_sid: `AC${'0123456789abcdef'.repeat(2)}`, auth_token: 'an-auth-token-value' };

/** Valid bodies per endpoint; the number ones get a fresh E.164 number from the generator. */
const validBodies = (n: number): Record<string, unknown[]> => {
  const e164 = `+1415${String(n).padStart(7, '0')}`;
  return {
    'POST /workflows': [
      { name: 'Rich', definition: richDefinition() },
      { name: 'Small', definition: sampleDefinition(2), is_active: false },
    ],
    'PATCH /workflows/{id}': [
      { name: 'Renamed' },
      { is_active: false },
      { definition: richDefinition() },
      { name: 'Both', is_active: true, definition: sampleDefinition(3) },
    ],
    'POST /assistants': [pipelineAssistant, richAssistant, { name: 'Realtime', llm_config: { provider: 'openai-realtime' } }],
    'PATCH /assistants/{id}': [
      { first_message: 'Hi again' },
      { silence_timeout_seconds: null, speech_config: richAssistant.speech_config },
      { ...richAssistant, name: 'Patched' },
      { webhook_url: 'https://example.com/other', webhook_secret: null },
    ],
    'POST /numbers': [
      { number: e164 },
      { number: e164, name: 'Line', provider: 'twilio', workflow_id: ids.workflow, assistant_id: ids.assistant, webhook },
      { number: e164, webhook: { url: 'https://example.com/h' } },
    ],
    'PATCH /numbers/{id}': [
      { name: 'Renamed line' },
      { workflow_id: ids.workflow },
      { workflow_id: null, assistant_id: null },
      { webhook: null },
      { webhook, assistant_id: ids.assistant },
    ],
    'PATCH /account': [
      { webhook: { url: 'https://example.com/account-hook' } },
      { webhook: null, telephony: { twilio } },
      { telephony: { twilio: null } },
      {},
    ],
  };
};

// ---------------------------------------------------------------------------------------------
// Generators

/** Values that tend to break things: wrong types, edge numbers, odd strings. */
const nasty = fc.oneof(
  fc.constantFrom<unknown>(
    null, '', ' ', 0, -1, 1.5, -0, 1e308, -1e308, 2 ** 53, true, false, [], {}, [null], { '': '' },
    'x'.repeat(201), 'x'.repeat(20_001), '\u0000', 'a\u0000b', '\ud800', 'emoji 😀', '__proto__', 'constructor',
    'not-a-uuid', '00000000-0000-4000-8000-000000000000', '+14155550123', '555-1234', 'https://example.com',
    'ftp://example.com', 'javascript:alert(1)', 'sandbox', 'openai', 'openai-realtime', 'conversation', 'end',
    'tool', 'transfer', '{{schema}}', 'status-update', "'; DROP TABLE workflows; --", '%00', '../../etc/passwd',
  ),
  fc.string({ maxLength: 30 }),
  fc.string({ unit: 'binary', maxLength: 20 }),
  fc.integer(),
  fc.double(),
  fc.jsonValue({ maxDepth: 3 }),
);

type Path = (string | number)[];

/** Every path to a value inside a JSON body (objects and arrays included). */
function pathsOf(value: unknown, prefix: Path = [], out: Path[] = []): Path[] {
  if (prefix.length > 0) out.push(prefix);
  if (Array.isArray(value)) value.forEach((v, i) => pathsOf(v, [...prefix, i], out));
  else if (value && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) pathsOf(v, [...prefix, k], out);
  }
  return out;
}

type Mutation =
  | { kind: 'set'; at: number; value: unknown }
  | { kind: 'delete'; at: number }
  | { kind: 'add'; at: number; key: string; value: unknown }
  | { kind: 'duplicate'; at: number };

const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ kind: fc.constant('set' as const), at: fc.nat(), value: nasty }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('delete' as const), at: fc.nat() }) },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('add' as const),
      at: fc.nat(),
      key: fc.oneof(fc.constantFrom('id', 'type', 'extra', 'speech_config', 'global', 'destination', 'url'), fc.string({ maxLength: 8 })),
      value: nasty,
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('duplicate' as const), at: fc.nat() }) },
);

/** Applies mutations to a deep copy; `at` picks a path (or the root for `add`). */
function mutate(body: unknown, mutations: Mutation[]): unknown {
  const copy = structuredClone(body) as Record<string, unknown>;
  for (const m of mutations) {
    const paths = pathsOf(copy);
    if (m.kind === 'add') {
      const containers = [[], ...paths].filter((p) => {
        const v = getAt(copy, p);
        return v !== null && typeof v === 'object' && !Array.isArray(v);
      });
      const target = getAt(copy, containers[m.at % containers.length]!) as Record<string, unknown>;
      // a copy: fast-check may hand the same value to two mutations, and one set inside the other would be a cycle
      Object.defineProperty(target, m.key, { value: structuredClone(m.value), enumerable: true, writable: true, configurable: true });
      continue;
    }
    if (paths.length === 0) continue;
    const path = paths[m.at % paths.length]!;
    const parent = getAt(copy, path.slice(0, -1)) as Record<string | number, unknown> | unknown[];
    const key = path[path.length - 1]!;
    if (m.kind === 'set') (parent as Record<string | number, unknown>)[key] = structuredClone(m.value);
    else if (m.kind === 'delete') {
      if (Array.isArray(parent)) parent.splice(Number(key), 1);
      else delete (parent as Record<string, unknown>)[key];
    } else if (Array.isArray(parent)) parent.push(structuredClone(parent[Number(key)]));
  }
  return copy;
}

function getAt(root: unknown, path: Path): unknown {
  return path.reduce<unknown>((node, key) => (node as Record<string | number, unknown>)?.[key], root);
}

interface Payload {
  kind: string;
  body: string | undefined;
  contentType: string | undefined;
}

const json = (value: unknown) => JSON.stringify(value) ?? 'null';

/** One body for an endpoint: any JSON, a mutated valid body, or garbage bytes. */
const payloadFor = (endpoint: string): fc.Arbitrary<Payload> =>
  fc.oneof(
    {
      weight: 2,
      arbitrary: fc.jsonValue().map((v) => ({ kind: 'json', body: json(v), contentType: 'application/json' })),
    },
    {
      weight: 5,
      arbitrary: fc
        .record({ n: fc.nat({ max: 9_999_999 }), which: fc.nat(), mutations: fc.array(mutation, { minLength: 0, maxLength: 4 }) })
        .map(({ n, which, mutations }) => {
          const choices = validBodies(n)[endpoint]!;
          return { kind: 'mutated', body: json(mutate(choices[which % choices.length], mutations)), contentType: 'application/json' };
        }),
    },
    {
      weight: 2,
      arbitrary: fc
        .record({
          body: fc.oneof(
            fc.string({ unit: 'binary', maxLength: 200 }),
            fc.string({ maxLength: 200 }),
            fc.jsonValue().map((v) => json(v).slice(0, -1)),
            fc.constantFrom('', '{', '}', '[', '{"a":', 'null', '\u0000', '{"__proto__":{}}', '{"a":1}{"b":2}'),
          ),
          contentType: fc.constantFrom<string | undefined>(
            'application/json',
            'application/json',
            'application/json; charset=utf-8',
            'text/plain',
            'application/octet-stream',
            'application/x-www-form-urlencoded',
            undefined,
          ),
        })
        .map(({ body, contentType }) => ({ kind: 'garbage', body, contentType })),
    },
  );

// ---------------------------------------------------------------------------------------------
// The properties

let counts: Record<number, number> = {};

function checkResponse(res: LightMyRequestResponse, payload: Payload) {
  counts[res.statusCode] = (counts[res.statusCode] ?? 0) + 1;
  const where = `${res.statusCode} for ${payload.kind} body ${JSON.stringify(payload.body?.slice(0, 300))}: ${res.body.slice(0, 500)}`;
  expect(res.statusCode, where).toBeLessThan(500);
  // 409: a number body that names a number registered already (a generated one, or a mutation)
  expect([200, 201, 400, 409], where).toContain(res.statusCode);
  if (res.statusCode === 409) expect(res.json().error, where).toBe('Conflict');
  const body = res.json();
  if (res.statusCode >= 400) {
    expect(typeof body.error, where).toBe('string');
    expect(body.error.length, where).toBeGreaterThan(0);
  }
  if (res.statusCode === 400) {
    expect(['Invalid request', 'Invalid workflow definition'], where).toContain(body.error);
    expect(Array.isArray(body.details), where).toBe(true);
    expect(body.details.length, where).toBeGreaterThan(0);
    for (const d of body.details) {
      expect(typeof d, where).toBe('string');
      expect(d.length, where).toBeGreaterThan(0);
    }
  }
}

beforeAll(async () => {
  t = await build();
  const workflow = await t.request('POST', '/workflows', { name: 'Target', definition: richDefinition() });
  const assistant = await t.request('POST', '/assistants', richAssistant);
  const number = await t.request('POST', '/numbers', { number: '+19995550000' });
  expect([workflow.statusCode, assistant.statusCode, number.statusCode]).toEqual([201, 201, 201]);
  ids = { workflow: workflow.json().workflow.id, assistant: assistant.json().assistant.id, number: number.json().number.id };
  // every starting body is valid as written, so mutations are what the fuzz explores
  for (const [endpoint, bodies] of Object.entries(validBodies(1))) {
    for (const [i, body] of bodies.entries()) {
      const res = await send(endpoint, { kind: 'valid', body: json(body), contentType: 'application/json' });
      expect(res.statusCode, `${endpoint} #${i}: ${res.body}`).toBeLessThan(300);
      if (endpoint === 'POST /numbers') await t.request('DELETE', `/numbers/${res.json().number.id}`);
    }
  }
});
afterAll(async () => {
  await t.close();
});

function send(endpoint: string, payload: Payload) {
  const [method, template] = endpoint.split(' ') as ['POST' | 'PATCH', string];
  const url = template
    .replace('/workflows/{id}', `/workflows/${ids.workflow}`)
    .replace('/assistants/{id}', `/assistants/${ids.assistant}`)
    .replace('/numbers/{id}', `/numbers/${ids.number}`);
  return t.app.inject({
    method,
    url,
    headers: {
      authorization: `Bearer ${t.key}`,
      ...(payload.contentType === undefined ? {} : { 'content-type': payload.contentType }),
    },
    ...(payload.body === undefined ? {} : { payload: payload.body }),
  });
}

const ENDPOINTS = [
  'POST /workflows',
  'PATCH /workflows/{id}',
  'POST /assistants',
  'PATCH /assistants/{id}',
  'POST /numbers',
  'PATCH /numbers/{id}',
  'PATCH /account',
];

describe('fuzzing the write endpoints', () => {
  for (const endpoint of ENDPOINTS) {
    it(
      `${endpoint}: no 5xx, every 4xx has an error, every 400 has details`,
      async () => {
        counts = {};
        await fc.assert(
          fc.asyncProperty(payloadFor(endpoint), async (payload) => {
            checkResponse(await send(endpoint, payload), payload);
          }),
          { numRuns: RUNS },
        );
        // the generators reach both sides: some bodies are accepted, most are refused
        expect(counts[400] ?? 0).toBeGreaterThan(RUNS / 4);
        expect((counts[200] ?? 0) + (counts[201] ?? 0)).toBeGreaterThan(0);
      },
      TIMEOUT,
    );
  }

  it(
    'the app is still whole afterwards: the targets read back, nothing leaked across organizations',
    async () => {
      for (const path of [`/workflows/${ids.workflow}`, `/assistants/${ids.assistant}`, `/numbers/${ids.number}`, '/account']) {
        expect((await t.request('GET', path)).statusCode, path).toBe(200);
      }
      expect((await t.request('GET', '/readyz')).statusCode).toBe(200);
      for (const list of ['/workflows', '/assistants', '/numbers']) {
        const theirs = await t.request('GET', list, undefined, t.otherKey);
        expect(Object.values(theirs.json())[0], list).toEqual([]);
      }
    },
    TIMEOUT,
  );
});
