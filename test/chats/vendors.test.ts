/**
 * Chats on the Anthropic and Gemini chat models, end to end: a real listening server whose
 * ANTHROPIC_API_BASE and GOOGLE_API_BASE point at the vendors' fakes, assistants with
 * `llm_config.provider` "anthropic" and "google", a workflow whose transitions the model calls, the
 * assistant's own tool answered by a real tool server and read back by the model, and a vendor
 * failure that ends its own chat only.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { frontDeskWorkflow, startCallingServer, type CallingServer } from '../helpers/calls.js';
import { startReceiver, type Receiver, type RecordedRequest } from '../helpers/receiver.js';
import { startFakeAnthropic, type FakeAnthropic, type FakeAnthropicAnswer } from '../fakes/anthropic.js';
import { startFakeGoogle, type FakeGeminiAnswer, type FakeGoogle } from '../fakes/google.js';
import type { FakeStreamRequest } from '../fakes/sse.js';

/** What the model answers to a request, in either vendor's words. */
interface Decision {
  text?: string[];
  call?: { name: string; args: Record<string, unknown> };
  status?: number;
}

/** The scripted model: it reads the last thing said and the functions offered, as a model would. */
function decide(said: string, functions: string[], toolResult: string | null): Decision {
  if (toolResult !== null) return { text: ['It is ', `${JSON.parse(toolResult) === 'sunny and warm' ? 'sunny and warm' : '?'} in Paris.`] };
  if (/rate limit/.test(said)) return { status: 429 };
  if (/book/.test(said) && functions.includes('go_to_booking')) return { call: { name: 'go_to_booking', args: {} } };
  if (/goodbye/.test(said) && functions.includes('go_to_bye')) return { call: { name: 'go_to_bye', args: {} } };
  if (/weather/.test(said) && functions.includes('weather_lookup')) return { call: { name: 'weather_lookup', args: { city: 'Paris' } } };
  return { text: ['Happy ', 'to help.'] };
}

type Block = { type: string; text?: string; content?: string };
type Part = { text?: string; functionResponse?: { name: string; response: { output?: unknown } } };

function anthropicAnswer({ body }: { body: Record<string, unknown> }): FakeAnthropicAnswer {
  const last = (body.messages as Array<{ content: Block[] }>).at(-1)!.content;
  const result = last.find((b) => b.type === 'tool_result');
  const said = last.filter((b) => b.type === 'text').map((b) => b.text).join(' ');
  const d = decide(said, ((body.tools ?? []) as Array<{ name: string }>).map((t) => t.name), result ? JSON.stringify(result.content) : null);
  if (d.status) return { status: d.status, error: { message: 'Number of request tokens has exceeded your per-minute rate limit' } };
  return { text: d.text ?? [], ...(d.call ? { toolUses: [{ name: d.call.name, arguments: JSON.stringify(d.call.args) }] } : {}) };
}

function geminiAnswer({ body }: { body: Record<string, unknown> }): FakeGeminiAnswer {
  const last = (body.contents as Array<{ parts: Part[] }>).at(-1)!.parts;
  const response = last.find((p) => p.functionResponse)?.functionResponse;
  const said = last.map((p) => p.text ?? '').join(' ');
  const declared = ((body.tools ?? []) as Array<{ functionDeclarations: Array<{ name: string }> }>).flatMap((t) => t.functionDeclarations.map((d) => d.name));
  const d = decide(said, declared, response ? JSON.stringify(response.response.output) : null);
  if (d.status) return { status: d.status, error: { message: 'You exceeded your current quota.', status: 'RESOURCE_EXHAUSTED' } };
  return { text: d.text ?? [], ...(d.call ? { functionCalls: [d.call] } : {}) };
}

let s: CallingServer;
let tools: Receiver;
let anthropic: FakeAnthropic;
let google: FakeGoogle;

beforeAll(async () => {
  tools = await startReceiver();
  anthropic = await startFakeAnthropic({ answerFor: anthropicAnswer });
  google = await startFakeGoogle({ answerFor: geminiAnswer });
  s = await startCallingServer({
    ANTHROPIC_API_BASE: anthropic.url,
    ANTHROPIC_API_KEY: anthropic.apiKey,
    GOOGLE_API_BASE: google.url,
    GOOGLE_API_KEY: google.apiKey,
  });
}, 120_000);
afterAll(async () => {
  await s?.close();
  await tools?.close();
  await anthropic?.close();
  await google?.close();
});

async function http(method: string, path: string, body?: unknown): Promise<{ status: number; json: any }> {
  const res = await fetch(`${s.baseUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${s.key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  return { status: res.status, json: text ? JSON.parse(text) : null };
}

async function created(path: string, body: unknown, key: string): Promise<any> {
  const r = await http('POST', path, body);
  expect(r.status, JSON.stringify(r.json)).toBe(201);
  return r.json[key];
}

async function say(chatId: string, text: string) {
  const r = await http('POST', `/chats/${chatId}/messages`, { text });
  expect(r.status, JSON.stringify(r.json)).toBe(200);
  return r.json as { chat: any; reply: { content: string }[] };
}

const lines = (reply: { content: string }[]) => reply.map((m) => m.content);
const sinceNow = (requests: FakeStreamRequest[]) => {
  const from = requests.length;
  return () => requests.slice(from);
};

const VENDORS = [
  { provider: 'anthropic', model: 'claude-sonnet-4-5', toolModel: 'claude-haiku-4-5', requests: () => anthropic.requests },
  // a Gemini 3 model for the tool round: the call goes back with its thought signature or is refused
  { provider: 'google', model: 'gemini-2.5-flash', toolModel: 'gemini-3-flash-preview', requests: () => google.requests },
] as const;

describe.each(VENDORS)('a chat on $provider', (v) => {
  const assistant = (llm: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({
    name: `${v.provider} receptionist`,
    llm_config: { provider: v.provider, ...llm },
    stt_config: { provider: 'sandbox' },
    tts_config: { provider: 'sandbox', voice_id: 'sandbox' },
    ...extra,
  });

  it('is saved without warnings: the server has the key', async () => {
    const r = await http('POST', '/assistants', assistant({ model: v.model }));
    expect(r.status).toBe(201);
    expect(r.json.warnings).toEqual([]);
  });

  it('moves through a workflow by the transition functions the model calls, and ends at its end node', async () => {
    const assistantId = (await created('/assistants', assistant({ model: v.model }), 'assistant')).id;
    const workflowId = (await created('/workflows', { name: 'Front desk', definition: frontDeskWorkflow(), is_active: true }, 'workflow')).id;
    const sent = sinceNow(v.requests());
    const chat = await created('/chats', { assistant_id: assistantId, workflow_id: workflowId }, 'chat');
    expect(chat.messages.map((m: any) => m.content)).toEqual(['Hello, this is Acme Dental.']);

    const booking = await say(chat.id, 'I would like to book an appointment');
    expect(lines(booking.reply)).toEqual(['Sure thing.', 'Let us book your appointment.']);
    expect(booking.chat).toMatchObject({ status: 'active', node_id: 'booking' });
    const small = await say(chat.id, 'Is Tuesday fine?');
    expect(lines(small.reply)).toEqual(['Happy to help.']);
    const bye = await say(chat.id, 'That is all, goodbye');
    expect(bye.chat).toMatchObject({ status: 'ended', ended_reason: 'assistant-ended-call', errors: [] });

    // what the vendor was sent: the model named, the prompt apart, the history in order
    const requests = sent();
    expect(requests).toHaveLength(3);
    const first = JSON.stringify(requests[0]!.body);
    expect(`${requests[0]!.url} ${first}`).toContain(v.model); // Gemini names it in the URL
    expect(first).toContain('You are the front desk of Acme Dental.');
    expect(first).toContain('go_to_booking');
    expect(first.indexOf('Hello, this is Acme Dental.')).toBeLessThan(first.indexOf('I would like to book an appointment'));
    expect(JSON.stringify(requests[2]!.body)).toContain('go_to_bye');
  });

  it('runs the assistant\'s own tool: tool-calls to the tool server, its result back to the model, the answer in the reply', async () => {
    const assistantId = (
      await created(
        '/assistants',
        assistant(
          {
            model: v.toolModel,
            tools: [
              {
                name: 'weather_lookup',
                description: 'the weather forecast for a city',
                url: tools.url,
                parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
              },
            ],
          },
          { first_message: 'Weather desk, go ahead.' },
        ),
        'assistant',
      )
    ).id;
    tools.script((r: RecordedRequest) => {
      const message = JSON.parse(r.body).message;
      return { status: 200, body: { results: [{ tool_call_id: message.tool_calls[0].id, result: 'sunny and warm' }] } };
    });
    const before = tools.requests.length;
    const sent = sinceNow(v.requests());
    const chat = await created('/chats', { assistant_id: assistantId }, 'chat');
    const turn = await say(chat.id, 'What is the weather forecast for Paris?');
    expect(lines(turn.reply)).toEqual(['It is sunny and warm in Paris.']);
    const message = JSON.parse(tools.requests[before]!.body).message;
    expect(message).toMatchObject({ type: 'tool-calls', call: { id: chat.id, type: 'chat' } });
    expect(message.tool_calls).toEqual([{ id: expect.any(String), name: 'weather_lookup', arguments: { city: 'Paris' } }]);
    expect(turn.chat.messages.map((m: any) => m.role)).toEqual(['assistant', 'user', 'tool', 'assistant']);
    const requests = sent();
    expect(requests).toHaveLength(2);
    // the second round carries the call and its answer, in the vendor's own blocks
    const second = JSON.stringify(requests[1]!.body);
    expect(second).toContain(v.provider === 'anthropic' ? '"tool_result"' : '"functionResponse"');
    expect(second).toContain('sunny and warm');
  });

  it('a vendor failure ends that chat with pipeline-error-<provider>; a chat beside it goes on', async () => {
    const assistantId = (await created('/assistants', assistant({ model: v.model }), 'assistant')).id;
    const failing = await created('/chats', { assistant_id: assistantId }, 'chat');
    const healthy = await created('/chats', { assistant_id: assistantId }, 'chat');
    const [bad, good] = await Promise.all([say(failing.id, 'Please hit the rate limit'), say(healthy.id, 'Hello there')]);
    expect(bad.reply).toEqual([]);
    expect(bad.chat).toMatchObject({
      status: 'ended',
      ended_reason: `pipeline-error-${v.provider}`,
      errors: [expect.objectContaining({ code: 'PROVIDER_HTTP_ERROR', provider: v.provider, message: expect.stringContaining('429') })],
    });
    expect(lines(good.reply)).toEqual(['Happy to help.']);
    expect(good.chat.status).toBe('active');
  });
});
