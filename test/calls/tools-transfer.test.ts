/**
 * Tools and transfer during a call, end to end with the sandbox providers: a tool node's signed
 * tool-calls request to a real tool server that answers, fails with HTTP 500 or never answers
 * (10 s), and a transfer node moving the call through the (fake) Twilio REST API. How the model
 * chooses a tool node's way out, the assistant's own tools and a transfer on a realtime call are
 * checked exactly in test/fast-calls (see docs/testing.md); test/calls/realtime.test.ts runs a
 * tool node, an assistant tool and a transfer on realtime calls over a socket.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyWebhook } from '../../src/webhooks/verify.js';
import { ACCOUNT_SID, AUTH_TOKEN, receivedMessages, sandboxAssistant, startCallingServer, transferFlow, type CallingServer, eventually } from '../helpers/calls.js';
import { startReceiver, type Receiver, type ReceiverScript, type RecordedRequest } from '../helpers/receiver.js';

/** The account webhook's secret as `startCallingServer` sets it. */
const ACCOUNT_SECRET = 'whsec_dGVzdC1zZWNyZXQtdGVzdC1zZWNyZXQtdGVzdA==';

let s: CallingServer;
/** The tool server (tool node `url`, assistant tool `url`). */
let tools: Receiver;
/** Twilio's REST API, scriptable (slow or failing answers). */
let twilioApi: Receiver;
const TWILIO_OK = { status: 200, body: { sid: 'CA0', status: 'in-progress' } };

beforeAll(async () => {
  tools = await startReceiver();
  twilioApi = await startReceiver({ default: TWILIO_OK });
  s = await startCallingServer({ TWILIO_API_BASE: `http://127.0.0.1:${twilioApi.port}` });
}, 120_000);
afterAll(async () => {
  await s?.close();
  await tools?.close();
  await twilioApi?.close();
});

const messagesFor = (callId: string, type: string) => receivedMessages(s.receiver, type).filter((m) => m.call?.id === callId);
const reportOf = (callId: string) => eventually(`the report of ${callId}`, () => messagesFor(callId, 'end-of-call-report')[0]);

const toolCallId = (r: RecordedRequest) => JSON.parse(r.body).message.tool_calls[0].id as string;
const answerWith = (outcome: { result: unknown } | { error: string }): ReceiverScript => (r) => ({
  body: { results: [{ tool_call_id: toolCallId(r), ...outcome }] },
});

const TOOL_ARGUMENTS = { order: 'A-1234', priority: 2, rush: false, note: null };

/** Tool node first; one way out (`shipped`), or two the model chooses from (`shipped`, `problem`). */
function lookupFlow(ways: 'one' | 'two') {
  const nodes: Record<string, unknown>[] = [
    {
      id: 'lookup',
      type: 'tool',
      first_line: 'One moment while I check that.',
      tool_name: 'crm_fetch',
      url: tools.url,
      arguments: TOOL_ARGUMENTS,
    },
    { id: 'shipped', type: 'conversation', first_line: 'Good news, your parcel shipped already.', instructions: 'Answer questions.' },
    { id: 'bye', type: 'end', first_line: 'Goodbye.' },
  ];
  const edges: Record<string, unknown>[] = [
    { from: 'lookup', to: 'shipped', ...(ways === 'two' ? { description: 'the parcel shipped already' } : {}) },
    { from: 'shipped', to: 'bye', description: 'the caller is finished' },
  ];
  if (ways === 'two') {
    nodes.push({ id: 'problem', type: 'conversation', first_line: 'Sorry, I could not check your parcel right now.' });
    edges.push(
      { from: 'lookup', to: 'problem', description: 'the tool reported an error or did not answer' },
      { from: 'problem', to: 'bye', description: 'the caller is finished' },
    );
  }
  return { version: 1, entry_node: 'lookup', global_prompt: 'You are the order desk of Acme Parts.', nodes, edges };
}

/** Dials a number whose workflow starts with the tool node; returns the call and its tool request. */
async function callTheToolNode(ways: 'one' | 'two', answer: ReceiverScript) {
  const { number, workflowId } = await s.setUpNumber({ definition: lookupFlow(ways) });
  tools.script(answer);
  const before = tools.requests.length;
  const call = s.caller(number);
  const outcome = await call.dial();
  expect(outcome.kind).toBe('connected');
  const callId = outcome.kind === 'connected' ? outcome.callId : '';
  await tools.waitForRequests(before + 1, 15_000);
  const request = tools.requests[before]!;
  return { call, callId, request, workflowId };
}

describe('a tool node', () => {
  it('sends a signed tool-calls request with the node and its arguments; one edge: follows it with the result', async () => {
    const { call, callId, request } = await callTheToolNode('one', answerWith({ result: { parcel: 'shipped', carrier: 'UPS' } }));
    await call.hear('One moment');
    await call.hear('parcel shipped already');
    await call.hangUp();

    expect(request.method).toBe('POST');
    expect(request.headers['content-type']).toContain('application/json');
    expect(request.headers['x-webhook-event']).toBe('tool-calls');
    const verified = verifyWebhook<{ message: any }>(request.body, request.headers, ACCOUNT_SECRET);
    const message = verified.payload.message;
    expect(message).toMatchObject({
      type: 'tool-calls',
      call: { id: callId, type: 'inbound_phone_call', status: 'in-progress' },
      node_id: 'lookup',
      tool_calls: [{ id: expect.stringMatching(/^tool_/), name: 'crm_fetch', arguments: TOOL_ARGUMENTS }],
    });
    expect(message.tool_calls).toHaveLength(1);
    expect(Object.keys(message.tool_calls[0]).sort()).toEqual(['arguments', 'id', 'name']);

    const report = await reportOf(callId);
    expect(report).toMatchObject({ ended_reason: 'customer-ended-call', nodes_visited: ['lookup', 'shipped'] });
    expect(report.transcript).toContain('parcel shipped already');
  }, 60_000);

  it('an HTTP 500: tool.failed is handled (the model takes the error edge) and the call goes on', async () => {
    const { call, callId } = await callTheToolNode('two', { status: 500, body: { message: 'boom' } });
    await call.hear('could not check your parcel');
    // the call goes on: the caller is still connected and the assistant still answers
    await call.quiet();
    expect(call.closed).toBe(false);
    await call.hangUp();
    const report = await reportOf(callId);
    expect(report).toMatchObject({ ended_reason: 'customer-ended-call', nodes_visited: ['lookup', 'problem'] });
  }, 60_000);

  // (a tool that never answers: the 10 s deadline and its error result, test/webhooks/exchanges.test.ts;
  // what the call does with it, test/fast-calls/tool-choice.test.ts on both kinds)

});

// A transfer on a realtime call: test/fast-calls/in-call.test.ts, and over a socket the tool node
// then transfer of test/calls/realtime.test.ts.
describe('a transfer node (pipeline call)', () => {
  /** Dials, asks for an agent; resolves when the call's Twilio REST request has arrived. */
  async function askForAnAgent() {
    const { number } = await s.setUpNumber({ assistant: sandboxAssistant(), definition: transferFlow });
    const call = s.caller(number);
    const outcome = await call.dial();
    const callId = outcome.kind === 'connected' ? outcome.callId : '';
    await call.hear('Acme support');
    await call.quiet();
    await call.say('I want to speak to a human agent please.');
    await call.hear('Connecting you to an agent');
    const path = `/2010-04-01/Accounts/${ACCOUNT_SID}/Calls/${call.callSid}.json`;
    const update = await eventually('the Twilio call update', () => twilioApi.requests.find((r) => r.path === path));
    return { number, call, callId, path, update };
  }
  const restRequests = (path: string) =>
    twilioApi.requests.filter((r) => r.path === path).map((r) => ({ ...r, form: new URLSearchParams(r.body) }));

  it('says its line, sends forwarding, moves the call with <Dial> over REST, ends with call-transferred, no hang-up', async () => {
    twilioApi.script({ ...TWILIO_OK, delayMs: 1_500 });
    const { number, call, callId, path, update } = await askForAnAgent();
    // Twilio goes on with the TwiML after <Connect> (none: it hangs up) when the stream closes,
    // so the stream stays open until Twilio has taken the new TwiML
    const closedAt = await eventually('the media stream to close', () => call.closeCode !== null && Date.now(), 20_000);
    expect(closedAt - update.at).toBeGreaterThanOrEqual(1_400);
    await call.ended();

    const ended = await eventually('status-update ended', () => messagesFor(callId, 'status-update').find((m) => m.status === 'ended'));
    expect(ended.ended_reason).toBe('call-transferred');
    const statuses = messagesFor(callId, 'status-update').map((m) => m.status);
    expect(statuses).toEqual(['ringing', 'in-progress', 'forwarding', 'ended']);
    const forwarding = messagesFor(callId, 'status-update').find((m) => m.status === 'forwarding');
    expect(forwarding).toMatchObject({ call: { id: callId, status: 'forwarding' }, destination: '+14155550123' });

    const mine = restRequests(path);
    expect(mine).toHaveLength(1);
    expect(mine[0]!.headers.authorization).toBe(`Basic ${Buffer.from(`${ACCOUNT_SID}:${AUTH_TOKEN}`).toString('base64')}`);
    const twiml = mine[0]!.form.get('Twiml') ?? '';
    expect(twiml).toContain('<Dial');
    expect(twiml).toContain('>+14155550123</Dial>');
    expect(twiml).toContain(`callerId="${number}"`);
    // the transferred leg is not hung up
    expect(mine.some((r) => r.form.get('Status') === 'completed')).toBe(false);

    const report = await reportOf(callId);
    expect(report).toMatchObject({ ended_reason: 'call-transferred', nodes_visited: ['greeting', 'agent'] });
    expect(report.errors ?? []).toEqual([]);
    expect(report.transcript).toContain('Connecting you to an agent now.');
    // the call ended once Twilio had answered, not when the transfer was asked for
    expect(Date.parse(report.ended_at) - update.at).toBeGreaterThanOrEqual(1_400);
    const view = (await s.api('GET', `/calls/${callId}`)).json.call;
    expect(view).toMatchObject({ status: 'ended', ended_reason: 'call-transferred', current_node: 'agent' });
  }, 60_000);

  it('a transfer Twilio refuses: the call is hung up and ends with pipeline-error-twilio, saying why', async () => {
    twilioApi.script({ status: 400, body: { code: 21201, message: 'No international permission', status: 400 } });
    const { callId, path } = await askForAnAgent();
    const ended = await eventually('status-update ended', () => messagesFor(callId, 'status-update').find((m) => m.status === 'ended'));
    expect(ended.ended_reason).toBe('pipeline-error-twilio');
    const report = await reportOf(callId);
    expect(report.ended_reason).toBe('pipeline-error-twilio');
    expect(report.errors).toEqual([{ code: 'TWILIO_REST_ERROR', message: expect.stringContaining('No international permission'), provider: 'twilio' }]);
    await eventually('the hang-up', () => restRequests(path).some((r) => r.form.get('Status') === 'completed'));
    const view = (await s.api('GET', `/calls/${callId}`)).json.call;
    expect(view).toMatchObject({ status: 'ended', ended_reason: 'pipeline-error-twilio' });
  }, 60_000);
});
