import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { verifyWebhook } from '../../src/index.js';
import { assistantRequestMessage, toolCallsMessage, type CallContext } from '../../src/webhooks/envelope.js';
import {
  callTools,
  parseAssistantRequestAnswer,
  parseToolCallsAnswer,
  requestAssistant,
  sendAsyncToolCalls,
  type ExchangeOptions,
} from '../../src/webhooks/exchanges.js';
import { WebhookHttpClient, type PostOptions } from '../../src/webhooks/http.js';
import type { DeliveryAttemptRecord } from '../../src/store/deliveries.js';
import { generateWebhookSecret } from '../../src/webhooks/secrets.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';

const ctx: CallContext = {
  call: { id: randomUUID(), type: 'inbound_phone_call', status: 'ringing' },
  phone_number: { number: '+14155550100', name: 'Main line' },
  customer: { number: '+14155550199' },
};
const validInline = {
  name: 'Night desk',
  llm_config: { provider: 'sandbox' },
  stt_config: { provider: 'sandbox' },
  tts_config: { provider: 'sandbox', voice_id: 'sandbox' },
};
const assistantId = randomUUID();
const workflowId = randomUUID();

/** A pino logger whose lines land in an array. */
function capturingLogger() {
  const lines: { level: number; msg: string; [k: string]: unknown }[] = [];
  const logger = pino({ level: 'debug' }, { write: (line: string) => void lines.push(JSON.parse(line)) });
  return { logger, lines };
}

describe('parseAssistantRequestAnswer: every answer form of DECISIONS 7', () => {
  const failed = (...errors: string[]) => ({ kind: 'rejected', ended_reason: 'assistant-request-failed', errors });
  it.each<[string, number, string, unknown]>([
    ['assistant_id', 200, JSON.stringify({ assistant_id: assistantId }), { kind: 'assistant-id', assistant_id: assistantId }],
    [
      'assistant_id with variables',
      200,
      JSON.stringify({ assistant_id: assistantId, variables: { name: 'Eve', vip: true, visits: 3 } }),
      { kind: 'assistant-id', assistant_id: assistantId, variables: { name: 'Eve', vip: true, visits: 3 } },
    ],
    [
      'assistant_id with workflow_id',
      200,
      JSON.stringify({ assistant_id: assistantId, workflow_id: workflowId }),
      { kind: 'assistant-id', assistant_id: assistantId, workflow_id: workflowId },
    ],
    [
      'assistant_id with workflow_id null (no workflow)',
      200,
      JSON.stringify({ assistant_id: assistantId, workflow_id: null }),
      { kind: 'assistant-id', assistant_id: assistantId, workflow_id: null },
    ],
    ['inline assistant', 200, JSON.stringify({ assistant: validInline }), { kind: 'inline', assistant: validInline }],
    [
      'inline assistant with workflow_id',
      201,
      JSON.stringify({ assistant: validInline, workflow_id: workflowId }),
      { kind: 'inline', assistant: validInline, workflow_id: workflowId },
    ],
    ['error', 200, JSON.stringify({ error: 'We are closed' }), { kind: 'rejected', ended_reason: 'rejected-at-start', errors: ['assistant-request: We are closed'] }],
    ['204', 204, '', { kind: 'number-settings' }],
    ['200 with an empty body', 200, '', { kind: 'number-settings' }],
    ['200 with whitespace', 200, ' \n', { kind: 'number-settings' }],
    ['{}', 200, '{}', { kind: 'number-settings' }],
    ['HTTP 500', 500, '{"assistant_id":"x"}', failed('HTTP 500: the answer must have a 2xx status')],
    ['HTTP 404', 404, '', failed('HTTP 404: the answer must have a 2xx status')],
    ['HTTP 302', 302, '', failed('HTTP 302: redirects are not followed; answer with a 2xx')],
    ['not JSON', 200, '<html>', failed('the answer is not JSON (send {"assistant_id": "..."}, {"assistant": {...}}, {"error": "..."} or an empty body)')],
    ['a JSON array', 200, '[]', failed('the answer must be a JSON object')],
    ['a non-UUID assistant_id', 200, '{"assistant_id":"asst_1"}', failed('assistant_id: must be an assistant id (UUID)')],
    ['a misspelt field', 200, JSON.stringify({ assistantId }), failed('assistantId: unknown field (expected assistant_id, assistant, workflow_id, variables or error)', 'the answer needs assistant_id or assistant (workflow_id alone does not choose an assistant)')],
    ['both forms', 200, JSON.stringify({ assistant_id: assistantId, assistant: validInline }), failed('assistant_id, assistant: send one of them, not both')],
    ['a bad workflow_id', 200, JSON.stringify({ assistant_id: assistantId, workflow_id: 7 }), failed('workflow_id: must be a workflow id (UUID) or null')],
    ['workflow_id alone', 200, JSON.stringify({ workflow_id: workflowId }), failed('the answer needs assistant_id or assistant (workflow_id alone does not choose an assistant)')],
    ['an empty error', 200, '{"error":""}', failed('error: must be a non-empty string')],
    ['bad variables', 200, JSON.stringify({ assistant_id: assistantId, variables: { n: [1] } }), failed('variables.n: must be a string, a number or a boolean, not an array')],
    ['an answer over the cap', 200, '{}', failed('the answer is larger than 64 KiB')],
  ])('%s', (name, status, body, expected) => {
    expect(parseAssistantRequestAnswer(status, body, name === 'an answer over the cap')).toEqual(expected);
  });

  it('validates an inline assistant like a create: types, unknown fields, create rules', () => {
    const out = parseAssistantRequestAnswer(
      200,
      JSON.stringify({ assistant: { name: 'X', llm_config: { provider: 'sandbox' }, colour: 'red' } }),
    );
    expect(out).toEqual({
      kind: 'rejected',
      ended_reason: 'assistant-request-failed',
      errors: ['assistant.colour: unknown field'],
    });
    const rules = parseAssistantRequestAnswer(200, JSON.stringify({ assistant: { name: 'X', llm_config: { provider: 'sandbox' } } }));
    expect(rules.kind === 'rejected' && rules.errors).toEqual([expect.stringMatching(/^assistant\.tts_config: required for a pipeline assistant/)]);
    const types = parseAssistantRequestAnswer(200, JSON.stringify({ assistant: { name: 5 } }));
    expect(types.kind === 'rejected' && types.errors[0]).toMatch(/^assistant\.name: /);
  });
});

describe('parseToolCallsAnswer', () => {
  it('one result per requested call, in the order asked; result may be any JSON', () => {
    const body = JSON.stringify({
      results: [
        { tool_call_id: 'b', error: 'no such customer' },
        { tool_call_id: 'a', result: { slots: ['10:00'] } },
        { tool_call_id: 'c', result: null },
      ],
    });
    expect(parseToolCallsAnswer(['a', 'b', 'c'], 200, body)).toEqual({
      results: [
        { tool_call_id: 'a', result: { slots: ['10:00'] } },
        { tool_call_id: 'b', error: 'no such customer' },
        { tool_call_id: 'c', result: null },
      ],
      problems: [],
    });
  });

  it('a missing result is an error result; unknown ids, duplicates and stray fields are problems', () => {
    const body = JSON.stringify({
      results: [
        { tool_call_id: 'a', result: 1, extra: true },
        { tool_call_id: 'a', result: 2 },
        { tool_call_id: 'zzz', result: 3 },
        { result: 4 },
        'nope',
        { tool_call_id: 'c' },
      ],
    });
    const out = parseToolCallsAnswer(['a', 'b', 'c'], 200, body);
    expect(out.results).toEqual([
      { tool_call_id: 'a', result: 1 },
      { tool_call_id: 'b', error: 'the tool answer has no result for this call' },
      { tool_call_id: 'c', error: 'the tool answer has no result for this call' },
    ]);
    expect(out.problems).toEqual([
      'results[0].extra: unknown field (ignored)',
      'results[1].tool_call_id: "a" answered twice; the first answer is used',
      'results[2].tool_call_id: "zzz" was not asked for',
      'results[3].tool_call_id: required (one of "a", "b", "c")',
      'results[4]: must be an object with tool_call_id and result or error',
      'results[5]: needs result or error',
      'no result for tool call "b"',
      'no result for tool call "c"',
    ]);
  });

  it.each<[string, number, string, string]>([
    ['no results array', 200, '{"result":"x"}', 'the tool answer has no "results" array (expected {"results": [{"tool_call_id": "...", "result": ...}]})'],
    ['not JSON', 200, 'ok', 'the tool answer is not JSON (expected {"results": [{"tool_call_id": "...", "result": ...}]})'],
    ['HTTP 500', 500, '', 'the tool endpoint answered HTTP 500'],
    ['HTTP 301', 301, '', 'the tool endpoint answered HTTP 301 (redirects are not followed)'],
  ])('%s: every call gets the error', (_n, status, body, reason) => {
    expect(parseToolCallsAnswer(['a', 'b'], status, body)).toEqual({
      results: [
        { tool_call_id: 'a', error: reason },
        { tool_call_id: 'b', error: reason },
      ],
      problems: [reason],
    });
  });
});

describe('exchanges against a local endpoint', () => {
  let receiver: Receiver;
  let http: WebhookHttpClient;
  let records: DeliveryAttemptRecord[];
  let lines: ReturnType<typeof capturingLogger>['lines'];
  let options: ExchangeOptions;
  const secret = generateWebhookSecret();
  const orgId = randomUUID();

  beforeAll(async () => {
    receiver = await startReceiver();
    http = new WebhookHttpClient({ allowPrivate: true });
  });
  afterAll(async () => {
    await http.close();
    await receiver.close();
  });
  beforeEach(() => {
    records = [];
    const captured = capturingLogger();
    lines = captured.lines;
    options = { http, logger: captured.logger, organizationId: orgId, recorder: { record: async (r) => void records.push(r) } };
  });

  const target = () => ({ url: receiver.url, secret, level: 'number' as const });
  const ask = (timeoutMs?: number) =>
    requestAssistant(options, { target: target(), body: assistantRequestMessage(ctx), ...(timeoutMs ? { timeoutMs } : {}) });

  it('assistant-request: a signed request; the assistant_id answer is returned and recorded', async () => {
    receiver.script({ status: 200, body: { assistant_id: assistantId, workflow_id: workflowId } });
    const before = receiver.requests.length;
    expect(await ask()).toEqual({ kind: 'assistant-id', assistant_id: assistantId, workflow_id: workflowId });
    const got = receiver.requests[before]!;
    const verified = verifyWebhook(got.body, got.headers, secret);
    expect(verified.event).toBe('assistant-request');
    expect(verified.payload.message).toMatchObject({ type: 'assistant-request', call: { id: ctx.call.id, status: 'ringing' } });
    expect(records).toEqual([
      expect.objectContaining({ event: 'assistant-request', attempt: 1, outcome: 'delivered', status_code: 200, error: null, call_id: ctx.call.id }),
    ]);
    expect(records[0]!.message_id).toBe(got.headers['x-webhook-id']);
  });

  it('assistant-request: an inline assistant; a 204; an error answer', async () => {
    receiver.script({ status: 200, body: { assistant: validInline } }, { status: 204 }, { status: 200, body: { error: 'Closed on Sundays' } });
    expect(await ask()).toEqual({ kind: 'inline', assistant: validInline });
    expect(await ask()).toEqual({ kind: 'number-settings' });
    expect(await ask()).toEqual({ kind: 'rejected', ended_reason: 'rejected-at-start', errors: ['assistant-request: Closed on Sundays'] });
  });

  it('assistant-request: a wrong answer refuses the call and the log says what was wrong', async () => {
    receiver.script({ status: 200, body: { assistant: { name: 'No voice', llm_config: { provider: 'sandbox' } } } });
    const out = await ask();
    expect(out).toMatchObject({ kind: 'rejected', ended_reason: 'assistant-request-failed' });
    expect(out.kind === 'rejected' && out.errors[0]).toMatch(/^assistant-request answer: assistant\.tts_config: required for a pipeline assistant/);
    const line = lines.find((l) => l.msg.startsWith('assistant-request answer rejected'))!;
    expect(line.level).toBe(40);
    expect(line.msg).toContain('assistant.tts_config: required for a pipeline assistant');
    expect(line.url).toBe(receiver.url);
    expect(JSON.stringify(lines)).not.toContain(secret);
    expect(records[0]).toMatchObject({ outcome: 'failed', status_code: 200, error: expect.stringContaining('assistant.tts_config') });
  });

  it('assistant-request: a 500 is not retried', async () => {
    receiver.script({ status: 500 });
    const before = receiver.requests.length;
    expect(await ask()).toEqual({
      kind: 'rejected',
      ended_reason: 'assistant-request-failed',
      errors: ['assistant-request answer: HTTP 500: the answer must have a 2xx status'],
    });
    await new Promise((r) => setTimeout(r, 100));
    expect(receiver.requests.length - before).toBe(1);
  });

  it('assistant-request: no answer by the deadline is assistant-request-failed, once', async () => {
    receiver.script({ status: 200, delayMs: 1_000, body: { assistant_id: assistantId } });
    const before = receiver.requests.length;
    const started = Date.now();
    const out = await ask(200);
    expect(Date.now() - started).toBeLessThan(800);
    expect(out).toEqual({ kind: 'rejected', ended_reason: 'assistant-request-failed', errors: ['assistant-request: no answer within 0.2 s'] });
    expect(lines.some((l) => l.msg === 'assistant-request failed, the call is refused: no answer within 0.2 s')).toBe(true);
    expect(receiver.requests.length - before).toBe(1);
  });

  it('assistant-request: an unreachable endpoint is assistant-request-failed', async () => {
    const out = await requestAssistant(options, {
      target: { url: 'http://127.0.0.1:1/hook', secret, level: 'account' },
      body: assistantRequestMessage(ctx),
    });
    expect(out).toMatchObject({ kind: 'rejected', ended_reason: 'assistant-request-failed', errors: [expect.stringContaining('connection failed')] });
  });

  const calls = [
    { id: 'call_a', name: 'lookup', arguments: { day: 'tue' } },
    { id: 'call_b', name: 'book', arguments: {} },
  ];
  const toolBody = () => toolCallsMessage({ ...ctx, call: { ...ctx.call, status: 'in-progress' } }, { tool_calls: calls, node_id: 'lookup_node' });
  const tools = (timeoutMs?: number) =>
    callTools(options, { target: { url: receiver.url, secret, level: 'tool' }, body: toolBody(), ...(timeoutMs ? { timeoutMs } : {}) });

  it('tool-calls: results by id; a missing one becomes an error result and a log line', async () => {
    receiver.script({ status: 200, body: { results: [{ tool_call_id: 'call_a', result: { slots: ['10:00'] } }] } });
    const before = receiver.requests.length;
    expect(await tools()).toEqual([
      { tool_call_id: 'call_a', result: { slots: ['10:00'] } },
      { tool_call_id: 'call_b', error: 'the tool answer has no result for this call' },
    ]);
    const got = receiver.requests[before]!;
    expect(verifyWebhook(got.body, got.headers, secret).payload.message).toMatchObject({ type: 'tool-calls', tool_calls: calls, node_id: 'lookup_node' });
    expect(lines.find((l) => l.msg.startsWith('tool-calls answer is wrong'))!.msg).toBe('tool-calls answer is wrong: no result for tool call "call_b"');
  });

  it('tool-calls: no answer by the deadline gives error results (the call goes on)', async () => {
    receiver.script({ status: 200, delayMs: 1_000, body: { results: [] } });
    const started = Date.now();
    const out = await tools(200);
    expect(Date.now() - started).toBeLessThan(800);
    expect(out).toEqual([
      { tool_call_id: 'call_a', error: 'the tool did not answer within 0.2 s' },
      { tool_call_id: 'call_b', error: 'the tool did not answer within 0.2 s' },
    ]);
    expect(records[0]).toMatchObject({ event: 'tool-calls', outcome: 'failed', status_code: null });
  });

  it('tool-calls: a 503 gives error results and is not retried', async () => {
    receiver.script({ status: 503 });
    const before = receiver.requests.length;
    expect((await tools()).map((r) => 'error' in r && r.error)).toEqual([
      'the tool endpoint answered HTTP 503',
      'the tool endpoint answered HTTP 503',
    ]);
    await new Promise((r) => setTimeout(r, 100));
    expect(receiver.requests.length - before).toBe(1);
  });

  it('async tools are not waited for', async () => {
    receiver.script({ status: 200, delayMs: 400, body: { results: [] } });
    const started = Date.now();
    const { done } = sendAsyncToolCalls(options, { target: { url: receiver.url, secret, level: 'tool' }, body: toolBody() });
    expect(Date.now() - started).toBeLessThan(50);
    await done;
    expect(Date.now() - started).toBeGreaterThanOrEqual(350);
  });

  it('the real deadlines: assistant-request gives up at 5 s, tool-calls at 10 s', async () => {
    // the client keeps a deadline to the millisecond and says so (the 0.2 s cases above): one
    // default is waited for in real time, the other is read where it is handed to the client
    const deadlines: number[] = [];
    const watched: WebhookHttpClient = Object.create(http, {
      post: { value: (url: string, o: PostOptions) => (deadlines.push(o.timeoutMs), http.post(url, o)) },
    });
    options = { ...options, http: watched };
    receiver.script({ status: 200, delayMs: 12_000 });
    const t0 = Date.now();
    const assistant = await ask();
    const ms = Date.now() - t0;
    expect(assistant).toMatchObject({ kind: 'rejected', errors: ['assistant-request: no answer within 5 s'] });
    expect(ms).toBeGreaterThanOrEqual(4_900);
    expect(ms).toBeLessThan(6_500);
    receiver.script({ status: 200, body: { results: calls.map((c) => ({ tool_call_id: c.id, result: 'ok' })) } });
    expect(await tools()).toEqual(calls.map((c) => ({ tool_call_id: c.id, result: 'ok' })));
    expect(deadlines).toEqual([5_000, 10_000]);
  }, 20_000);
});

describe('what a failure tells the tenant and the model (the detail stays in the server log)', () => {
  let http: WebhookHttpClient;
  let records: DeliveryAttemptRecord[];
  let lines: ReturnType<typeof capturingLogger>['lines'];
  let options: ExchangeOptions;
  const secret = generateWebhookSecret();
  // an internal name: its DNS answer is the server's business, not the tenant's
  const resolve = async (host: string) => {
    if (host === 'tools.corp.internal') return [{ address: '10.20.30.40', family: 4 }];
    throw Object.assign(new Error('not found'), { code: 'ENOTFOUND' });
  };

  beforeAll(() => {
    http = new WebhookHttpClient({ allowPrivate: false, resolve });
  });
  afterAll(async () => {
    await http.close();
  });
  beforeEach(() => {
    records = [];
    const captured = capturingLogger();
    lines = captured.lines;
    options = { http, logger: captured.logger, organizationId: randomUUID(), recorder: { record: async (r) => void records.push(r) } };
  });

  const toolBody = () =>
    toolCallsMessage({ ...ctx, call: { ...ctx.call, status: 'in-progress' } }, { tool_calls: [{ id: 'call_a', name: 'lookup', arguments: {} }], node_id: null });

  it('tool-calls to a name that resolves to a private address: the model hears "blocked address", not the address', async () => {
    const out = await callTools(options, { target: { url: 'https://bot:hunter22@tools.corp.internal/lookup', secret, level: 'tool' }, body: toolBody() });
    expect(out).toEqual([{ tool_call_id: 'call_a', error: 'the tool could not be reached: blocked address (only public addresses are allowed)' }]);
    expect(records).toHaveLength(1);
    expect(records[0]).toMatchObject({
      url: 'https://bot:****@tools.corp.internal/lookup',
      error: 'the tool could not be reached: blocked address (only public addresses are allowed)',
    });
    const shown = JSON.stringify([out, records]);
    expect(shown).not.toContain('10.20.30.40');
    expect(shown).not.toContain('hunter22');
    // the operator still sees what happened
    const line = lines.find((l) => l.msg.startsWith('tool-calls failed'))!;
    expect(line.detail).toMatch(/^tools\.corp\.internal resolves to 10\.20\.30\.40; refused to connect to 10\.20\.30\.40: private address/);
    expect(JSON.stringify(lines)).not.toContain('hunter22');
  });

  it('tool-calls to a closed port: "connection failed", no socket error code', async () => {
    const open = new WebhookHttpClient({ allowPrivate: true });
    try {
      const out = await callTools({ ...options, http: open }, { target: { url: 'http://127.0.0.1:1/hook', secret, level: 'tool' }, body: toolBody() });
      expect(out).toEqual([{ tool_call_id: 'call_a', error: 'the tool could not be reached: connection failed' }]);
      expect(records[0]!.error).toBe('the tool could not be reached: connection failed');
      expect(lines.find((l) => l.msg.startsWith('tool-calls failed'))!.detail).toMatch(/ECONNREFUSED/);
    } finally {
      await open.close();
    }
  });

  it('assistant-request: the call\'s errors and the attempt log say "blocked address" or "could not resolve the host name"', async () => {
    const blocked = await requestAssistant(options, { target: { url: 'https://tools.corp.internal/assistant', secret, level: 'number' }, body: assistantRequestMessage(ctx) });
    expect(blocked).toEqual({
      kind: 'rejected',
      ended_reason: 'assistant-request-failed',
      errors: ['assistant-request: blocked address (only public addresses are allowed)'],
    });
    const unknown = await requestAssistant(options, { target: { url: 'https://nowhere.example/assistant', secret, level: 'number' }, body: assistantRequestMessage(ctx) });
    expect(unknown).toMatchObject({ errors: ['assistant-request: could not resolve the host name'] });
    expect(records.map((r) => r.error)).toEqual(['blocked address (only public addresses are allowed)', 'could not resolve the host name']);
    expect(JSON.stringify([blocked, unknown, records])).not.toMatch(/10\.20\.30\.40|ENOTFOUND/);
    expect(lines.map((l) => l.detail)).toEqual([expect.stringContaining('10.20.30.40'), 'could not resolve nowhere.example: ENOTFOUND']);
  });
});
