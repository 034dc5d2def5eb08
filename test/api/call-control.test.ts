/**
 * `POST /calls/{id}/control` (DECISIONS 16) on the real server, with live web calls (a simulated
 * browser on the call's WebSocket, sandbox providers): every bad body is a 400 with details,
 * another organization's or an unknown call a 404, a call not in progress a 409 `Call not live`,
 * and each control on a live call a 202 with the call, applied before the answer. What each
 * control does to the call in detail: test/fast-calls/control.test.ts; across processes and a
 * Redis restart: test/calls/control.test.ts.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { TRANSFER_FAILED_LINE } from '../../engine/machine.js';
import { ControlBody } from '../../src/api/call-control.js';
import { WebCaller } from '../../src/sim/web-caller.js';
import { eventually, frontDesk, sandboxAssistant, startCallingServer, type CallingServer } from '../helpers/calls.js';

let s: CallingServer;
let assistantId: string;
let workflowId: string;
let otherKey: string;
const callers: WebCaller[] = [];
const keptCallers: WebCaller[] = [];

beforeAll(async () => {
  s = await startCallingServer({ REDIS_URL: '' });
  assistantId = await s.createAssistant(sandboxAssistant());
  workflowId = await s.createWorkflow(frontDesk);
  otherKey = (await s.store.keys.createKey('Another organization')).key;
}, 120_000);
afterEach(async () => {
  for (const c of callers.splice(0)) await c.close().catch(() => undefined);
});
afterAll(async () => {
  for (const c of keptCallers) await c.close().catch(() => undefined);
  await s?.close();
});

const control = (id: string, body: unknown) => s.api('POST', `/calls/${id}/control`, body);

/** A web call in progress, its greeting under way; its browser hangs up after the test (`kept`: after the file). */
async function liveCall(kept = false): Promise<string> {
  const browser = new WebCaller({ baseUrl: s.baseUrl, apiKey: s.key });
  (kept ? keptCallers : callers).push(browser);
  const id = await browser.start({ assistant_id: assistantId, workflow_id: workflowId });
  await eventually('the call in progress', async () => (await s.api('GET', `/calls/${id}`)).json.call.status === 'in-progress');
  return id;
}

describe('POST /calls/{id}/control: bad bodies are 400 with details', () => {
  let id: string;
  beforeAll(async () => {
    id = await liveCall(true);
  });

  const cases: Array<[string, unknown, string]> = [
    ['no body', undefined, '(root)'],
    ['no type', { text: 'Hi' }, 'type'],
    ['an unknown type', { type: 'shout', text: 'Hi' }, 'type'],
    ['say without text', { type: 'say' }, 'text'],
    ['say with empty text', { type: 'say', text: '   ' }, 'text: must not be empty'],
    ['say with interrupt not a boolean', { type: 'say', text: 'Hi', interrupt: 'yes' }, 'interrupt'],
    ['say with an unpaired surrogate', { type: 'say', text: 'Hi \ud800' }, 'text'],
    ['say with a field of another control', { type: 'say', text: 'Hi', node_id: 'greeting' }, 'node_id: unknown field'],
    ['add-message with role assistant', { type: 'add-message', role: 'assistant', content: 'x' }, 'role'],
    ['add-message without content', { type: 'add-message', role: 'system' }, 'content'],
    ['goto without node_id', { type: 'goto' }, 'node_id'],
    ['transfer to a number that is not E.164', { type: 'transfer', destination: '555-0100' }, 'destination'],
    ['transfer with an unknown mode', { type: 'transfer', destination: '+14155550123', mode: 'hot' }, 'mode'],
    ['operator_message on a cold transfer', { type: 'transfer', destination: '+14155550123', operator_message: 'Hi' }, 'operator_message: only allowed on a warm transfer ("mode": "warm")'],
    ['hold_message on a transfer without a mode', { type: 'transfer', destination: '+14155550123', hold_message: 'Hold.' }, 'hold_message: only allowed on a warm transfer ("mode": "warm")'],
    ['a warm transfer ringing under 5 s', { type: 'transfer', destination: '+14155550123', mode: 'warm', ring_timeout_seconds: 4 }, 'ring_timeout_seconds: must be at least 5'],
    ['a warm transfer ringing a fraction of a second', { type: 'transfer', destination: '+14155550123', mode: 'warm', ring_timeout_seconds: 7.5 }, 'ring_timeout_seconds: must be an integer, not 7.5'],
    ['a warm transfer with require_acceptance not a boolean', { type: 'transfer', destination: '+14155550123', mode: 'warm', require_acceptance: 'yes' }, 'require_acceptance: must be a boolean'],
    ['end with an empty message', { type: 'end', message: '' }, 'message'],
  ];
  for (const [what, body, detail] of cases) {
    it(what, async () => {
      const res = await control(id, body);
      expect(res.status, JSON.stringify(res.json)).toBe(400);
      expect(res.json).toMatchObject({ error: 'Invalid request', details: expect.any(Array) });
      expect(res.json.details.some((d: string) => d.startsWith(detail)), JSON.stringify(res.json.details)).toBe(true);
    });
  }

  it('goto a node the call\'s workflow does not have: 400 naming the nodes it has; nothing moves', async () => {
    const res = await control(id, { type: 'goto', node_id: 'nowhere' });
    expect(res.status).toBe(400);
    expect(res.json.details).toEqual(['node_id: the workflow has no node "nowhere" (it has: greeting, booking, bye)']);
    expect((await s.api('GET', `/calls/${id}`)).json.call.current_node).toBe('greeting');
  });

  it('a cold transfer with warm fields, one out of bounds: 400 with each problem, in a transfer node\'s words; nothing is done', async () => {
    const res = await control(id, { type: 'transfer', destination: '+14155550123', mode: 'cold', operator_message: 'Hi', hold_message: 'Hold.', ring_timeout_seconds: 200, require_acceptance: true });
    expect(res.status).toBe(400);
    expect(res.json.details).toEqual([
      'ring_timeout_seconds: must be at most 120',
      'operator_message: only allowed on a warm transfer ("mode": "warm")',
      'hold_message: only allowed on a warm transfer ("mode": "warm")',
      'ring_timeout_seconds: only allowed on a warm transfer ("mode": "warm")',
      'require_acceptance: only allowed on a warm transfer ("mode": "warm")',
    ]);
    expect((await s.api('GET', `/calls/${id}`)).json.call).toMatchObject({ status: 'in-progress', transfer: null });
  });
});

describe('POST /calls/{id}/control: whose call, and which', () => {
  it('an unknown call, a malformed id, another organization\'s call: 404', async () => {
    const id = await liveCall();
    expect((await control('00000000-0000-4000-8000-000000000000', { type: 'say', text: 'Hi' })).status).toBe(404);
    expect((await control('not-an-id', { type: 'say', text: 'Hi' })).status).toBe(404);
    const other = await s.app.inject({
      method: 'POST',
      url: `/calls/${id}/control`,
      headers: { authorization: `Bearer ${otherKey}` },
      payload: { type: 'end' },
    });
    expect(other.statusCode).toBe(404);
    expect(other.json()).toMatchObject({ error: 'Not found' });
    // and nothing happened to the call
    expect((await s.api('GET', `/calls/${id}`)).json.call.status).toBe('in-progress');
  });

  it('a call not in progress: 409 Call not live (ringing, ended)', async () => {
    const browser = new WebCaller({ baseUrl: s.baseUrl, apiKey: s.key });
    callers.push(browser);
    const { call } = await browser.create({ assistant_id: assistantId });
    const ringing = await control(call.id, { type: 'say', text: 'Hi' });
    expect(ringing.status).toBe(409);
    expect(ringing.json).toMatchObject({ error: 'Call not live', message: expect.stringContaining('ringing') });

    const id = await liveCall();
    expect((await s.api('POST', `/calls/${id}/end`)).status).toBe(202);
    await eventually('the call ended', async () => (await s.api('GET', `/calls/${id}`)).json.call.status === 'ended');
    const ended = await control(id, { type: 'say', text: 'Hi' });
    expect(ended.status).toBe(409);
    expect(ended.json).toMatchObject({ error: 'Call not live' });
    // the body is checked first: a bad one is a 400 whatever the call
    expect((await control(id, { type: 'say' })).status).toBe(400);
  });
});

describe('POST /calls/{id}/control: each control on a live call is a 202 with the call, applied before the answer', () => {
  it('say, add-message, goto: in the call\'s messages (source "control") and its node', async () => {
    const id = await liveCall();
    const said = await control(id, { type: 'say', text: 'A specialist will join you shortly.', interrupt: true });
    expect(said.status, JSON.stringify(said.json)).toBe(202);
    expect(said.json.call).toMatchObject({ id, status: 'in-progress' });

    const added = await control(id, { type: 'add-message', role: 'system', content: 'The caller is a premium customer.' });
    expect(added.status).toBe(202);
    // applied before the answer: the message is in the call the answer shows
    expect(added.json.call.messages).toContainEqual(expect.objectContaining({ role: 'system', content: 'The caller is a premium customer.', source: 'control' }));
    expect(added.json.call.transcript).not.toContain('premium');

    const moved = await control(id, { type: 'goto', node_id: 'booking' });
    expect(moved.status).toBe(202);
    expect(moved.json.call.current_node).toBe('booking');

    const call = await eventually('the said line and the node\'s first line in the record', async () => {
      const c = (await s.api('GET', `/calls/${id}`)).json.call;
      const contents = c.messages.map((m: { content: string }) => m.content);
      return contents.includes('A specialist will join you shortly.') && contents.includes('Let us book your appointment.') ? c : null;
    });
    expect(call.messages.find((m: { content: string }) => m.content === 'A specialist will join you shortly.')).toMatchObject({ role: 'assistant', source: 'control' });
    expect(call.transcript).toContain('Assistant: A specialist will join you shortly.');
    expect(call.nodes_visited).toEqual(['greeting', 'booking']);
  });

  it('end with a message: said, then the call ends api-ended-call', async () => {
    const id = await liveCall();
    const res = await control(id, { type: 'end', message: 'We are closing now, goodbye.' });
    expect(res.status).toBe(202);
    const call = await eventually('the end', async () => {
      const c = (await s.api('GET', `/calls/${id}`)).json.call;
      return c.status === 'ended' ? c : null;
    });
    expect(call.ended_reason).toBe('api-ended-call');
    expect(call.messages.at(-1)).toMatchObject({ role: 'assistant', content: 'We are closing now, goodbye.', source: 'control' });
  });

  it('transfer (cold): the call is transferred (a web call: its browser is told)', async () => {
    const id = await liveCall();
    const res = await control(id, { type: 'transfer', destination: '+14155550123', mode: 'cold' });
    expect(res.status).toBe(202);
    const call = await eventually('the transfer', async () => {
      const c = (await s.api('GET', `/calls/${id}`)).json.call;
      return c.status === 'ended' ? c : null;
    });
    expect(call.ended_reason).toBe('call-transferred');
    await callers.at(-1)!.ended(20_000);
    expect(callers.at(-1)!.events).toContainEqual(expect.objectContaining({ type: 'transfer', destination: '+14155550123' }));
  });
});

describe('POST /calls/{id}/control: a warm transfer', () => {
  it('202 with the call forwarding to the operator; a web call without a SIP trunk cannot dial one: failed, the caller told, the call goes on in its node', async () => {
    const id = await liveCall();
    const res = await control(id, { type: 'transfer', destination: '+14155550123', mode: 'warm', hold_message: 'Please hold.', ring_timeout_seconds: 20 });
    expect(res.status, JSON.stringify(res.json)).toBe(202);
    expect(res.json.call).toMatchObject({ id, current_node: 'greeting', transfer: { mode: 'warm', destination: '+14155550123' } });
    const call = await eventually('the transfer\'s outcome', async () => {
      const c = (await s.api('GET', `/calls/${id}`)).json.call;
      return c.transfer?.result && c.messages.some((m: { content: string }) => m.content === TRANSFER_FAILED_LINE) ? c : null;
    });
    expect(call).toMatchObject({ status: 'in-progress', current_node: 'greeting', transfer: { mode: 'warm', destination: '+14155550123', result: 'failed', joined_at: null } });
    expect(call.errors).toEqual([expect.objectContaining({ code: 'TRANSFER_FAILED' })]);
    expect(call.messages.filter((m: { source?: string }) => m.source === 'control').map((m: { content: string }) => m.content)).toEqual(['Please hold.', TRANSFER_FAILED_LINE]);
    // the call takes controls again
    expect((await control(id, { type: 'goto', node_id: 'booking' })).status).toBe(202);
  });
});

describe('POST /calls/{id}/control in the OpenAPI document', () => {
  it('is documented with its body (one of five controls, its example valid), its answers, and source on call messages', async () => {
    const doc = (await s.app.inject({ method: 'GET', url: '/openapi.json' })).json();
    const op = doc.paths['/calls/{id}/control'].post;
    expect(op).toMatchObject({ operationId: 'controlCall', tags: ['calls'] });
    expect(Object.keys(op.responses)).toEqual(expect.arrayContaining(['202', '400', '401', '404', '409', '503']));
    const ref = op.requestBody.content['application/json'].schema.$ref as string;
    const body = doc.components.schemas[ref.split('/').pop()!];
    const variants = (body.oneOf ?? body.anyOf) as Array<{ properties: { type: { const?: string; enum?: string[] } } }>;
    expect(variants.map((v) => v.properties.type.const ?? v.properties.type.enum?.[0])).toEqual(['say', 'add-message', 'goto', 'transfer', 'end']);
    expect(ControlBody.safeParse(body.example).success).toBe(true);
    const transfer = variants[3] as unknown as { properties: Record<string, unknown> };
    expect(Object.keys(transfer.properties)).toEqual(['type', 'destination', 'mode', 'operator_message', 'hold_message', 'ring_timeout_seconds', 'require_acceptance']);
    expect(transfer.properties.ring_timeout_seconds).toMatchObject({ minimum: 5, maximum: 120 });
    const message = doc.components.schemas.Call.properties.messages.items;
    expect(message.properties.source).toMatchObject({ description: expect.stringContaining('control') });
  });
});
