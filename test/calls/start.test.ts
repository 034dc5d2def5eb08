/**
 * Call start, end to end against the real server: the voice webhook's checks (signature, number,
 * credentials), the call-start checks rejecting before pickup, every kind of assistant-request
 * answer, inactive and edited workflows, and GET /calls.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { twilioSignature } from '../../src/telephony/twilio/signature.js';
import { verifyWebhook } from '../../src/webhooks/verify.js';
import {
  ACCOUNT_SID,
  AUTH_TOKEN,
  receivedMessages,
  sandboxAssistant,
  startCallingServer,
  type CallingServer,
  eventually,
} from '../helpers/calls.js';
import { startReceiver, type Receiver, type ReceiverAnswer, type RecordedRequest } from '../helpers/receiver.js';

let s: CallingServer;
/** The webhook of the numbers that resolve their assistant at call time. */
let hook: Receiver;
/** What `hook` answers to the next assistant-request (every other event gets a plain 200). */
let assistantAnswer: ReceiverAnswer = { status: 204 };

beforeAll(async () => {
  s = await startCallingServer();
  hook = await startReceiver({
    default: (r) => (typeof r.body === 'string' && r.body.includes('"assistant-request"') ? assistantAnswer : { status: 200 }),
  });
}, 120_000);
afterAll(async () => {
  await s?.close();
  await hook?.close();
});

// ---------------------------------------------------------------------------------------------
// helpers

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const messagesFor = (receiver: Receiver, callId: string, type?: string) =>
  receivedMessages(receiver, type).filter((m) => m.call?.id === callId);

/** The status-update `ended` of a call, once it has arrived. */
const endedUpdate = (receiver: Receiver, callId: string) =>
  eventually(`status-update ended of ${callId}`, () =>
    messagesFor(receiver, callId, 'status-update').find((m) => m.status === 'ended'),
  );

const reportOf = (receiver: Receiver, callId: string) =>
  eventually(`end-of-call-report of ${callId}`, () => messagesFor(receiver, callId, 'end-of-call-report')[0]);

/** The call id of a rejected call: the newest call of the organization. */
async function newestCall(api: CallingServer['api'] = s.api) {
  const list = await api('GET', '/calls');
  expect(list.status).toBe(200);
  return list.json.calls[0];
}

let seq = 0;
const freshNumber = () => `+1777${String(process.pid % 1000).padStart(3, '0')}${String(++seq).padStart(4, '0')}`;

/** A number with no assistant: its webhook (`hook`) answers assistant-request. */
async function numberResolvedAtCallTime(extra: Record<string, unknown> = {}) {
  const number = freshNumber();
  const res = await s.api('POST', '/numbers', { number, webhook: { url: hook.url }, ...extra });
  expect(res.status).toBe(201);
  return { number, numberId: res.json.number.id as string, secret: res.json.number.webhook.secret as string };
}

async function createAssistant(body: Record<string, unknown>) {
  const res = await s.api('POST', '/assistants', body);
  expect(res.status, JSON.stringify(res.json)).toBe(201);
  return res.json.assistant.id as string;
}

async function createWorkflow(definition: unknown, isActive = true) {
  const res = await s.api('POST', '/workflows', { name: 'Start tests', definition, is_active: isActive });
  expect(res.status, JSON.stringify(res.json)).toBe(201);
  return res.json.workflow.id as string;
}

const twoLineFlow = (greeting: string, other = 'Let us book your appointment.') => ({
  version: 1,
  entry_node: 'greeting',
  global_prompt: 'You are the front desk of Acme Dental.',
  nodes: [
    { id: 'greeting', type: 'conversation', first_line: greeting, instructions: 'Find out what the caller needs.' },
    { id: 'booking', type: 'conversation', first_line: other, instructions: 'Book it.' },
    { id: 'bye', type: 'end', first_line: 'Goodbye.' },
  ],
  edges: [
    { from: 'greeting', to: 'booking', description: 'the caller wants to book an appointment', message: 'Sure thing.' },
    { from: 'booking', to: 'bye', description: 'the caller is finished' },
  ],
});

/** The voice webhook as Twilio would call it; `sign: false` leaves the signature out. */
async function voiceWebhook(params: Record<string, string>, options: { sign?: boolean | string; token?: string } = {}) {
  const url = `${s.baseUrl}/telephony/twilio/voice`;
  const headers: Record<string, string> = { 'content-type': 'application/x-www-form-urlencoded' };
  if (typeof options.sign === 'string') headers['x-twilio-signature'] = options.sign;
  else if (options.sign !== false) headers['x-twilio-signature'] = twilioSignature(options.token ?? AUTH_TOKEN, url, params);
  const res = await request(url, { method: 'POST', headers, body: new URLSearchParams(params).toString() });
  return { status: res.statusCode, text: await res.body.text() };
}

const twilioParams = (to: string, extra: Record<string, string> = {}) => ({
  AccountSid: ACCOUNT_SID,
  // a fresh CallSid each time: a CallSid already taken (this run or, with REDIS_URL, an earlier one) is a replay
  CallSid: `CA${randomBytes(16).toString('hex')}`,
  CallStatus: 'ringing',
  Direction: 'inbound',
  From: '+15005550006',
  To: to,
  ...extra,
});

/** A call that must be refused before pickup: `<Reject`, no stream, nothing live. */
async function dialRejected(number: string) {
  const call = s.caller(number);
  const outcome = await call.dial();
  expect(outcome.kind).toBe('rejected');
  expect(call.twiml).toContain('<Reject');
  expect(call.twiml).not.toContain('<Stream');
  expect(call.twiml).not.toContain('<Connect');
  const record = await newestCall();
  expect(record).toMatchObject({ status: 'ended', started_at: null, current_node: null, messages: [] });
  return record as { id: string; ended_reason: string; errors: { code: string; message: string }[]; assistant_id: string | null; workflow_id: string | null };
}

/** The webhook requests of one call as the receiver saw them (no ringing, no in-progress). */
async function expectRejectedWebhooks(receiver: Receiver, callId: string, reason: string) {
  const ended = await endedUpdate(receiver, callId);
  expect(ended.ended_reason).toBe(reason);
  const report = await reportOf(receiver, callId);
  expect(report).toMatchObject({ ended_reason: reason, started_at: null, duration_seconds: 0, messages: [], nodes_visited: [] });
  await sleep(200);
  const statuses = messagesFor(receiver, callId, 'status-update').map((m) => m.status);
  expect(statuses).toEqual(['ended']);
  return { ended, report };
}

async function talkBriefly(number: string, expected: string | RegExp) {
  const call = s.caller(number);
  const outcome = await call.dial();
  expect(outcome.kind, call.twiml).toBe('connected');
  await call.hear(expected);
  await call.hangUp();
  return outcome.kind === 'connected' ? outcome.callId : '';
}

// ---------------------------------------------------------------------------------------------

describe('the voice webhook', () => {
  it('refuses a bad, tampered or missing X-Twilio-Signature with 403, and nothing else happens', async () => {
    const { number } = await numberResolvedAtCallTime();
    const callsBefore = (await s.api('GET', '/calls')).json.calls.length;
    const hookBefore = hook.requests.length;
    const accountBefore = s.receiver.requests.length;
    const params = twilioParams(number);

    expect((await voiceWebhook(params, { sign: false })).status).toBe(403);
    expect((await voiceWebhook(params, { sign: 'bm90IGEgc2lnbmF0dXJl' })).status).toBe(403);
    expect((await voiceWebhook(params, { token: 'some-other-auth-token' })).status).toBe(403);
    // signed, then a parameter changed on the way
    const signed = twilioSignature(AUTH_TOKEN, `${s.baseUrl}/telephony/twilio/voice`, params);
    expect((await voiceWebhook({ ...params, From: '+15005550009' }, { sign: signed })).status).toBe(403);
    const refused = await voiceWebhook(params, { sign: false });
    expect(refused.text).not.toContain('<Response');

    await sleep(500);
    expect((await s.api('GET', '/calls')).json.calls.length).toBe(callsBefore);
    // no assistant-request, no status-update: the webhooks heard nothing
    expect(hook.requests.length).toBe(hookBefore);
    expect(s.receiver.requests.length).toBe(accountBefore);
    // the same request, signed, is a call
    const ok = await voiceWebhook(params);
    expect(ok.status).toBe(200);
    expect(ok.text).toContain('<Reject'); // the hook answers 204 and the number has no assistant
  });

  it('answers 404 for a number nobody registered', async () => {
    const res = await voiceWebhook(twilioParams('+19995550000'));
    expect(res.status).toBe(404);
    expect((await voiceWebhook(twilioParams(''))).status).toBe(404);
  });

  it("answers 403 when the number's organization has no Twilio credentials", async () => {
    const other = await s.store.keys.createKey('No telephony yet');
    const api = async (method: 'POST' | 'GET', url: string, body?: Record<string, unknown>) => {
      const res = await s.app.inject({ method, url, headers: { authorization: `Bearer ${other.key}` }, ...(body ? { payload: body } : {}) });
      return { status: res.statusCode, json: res.json() };
    };
    const assistant = await api('POST', '/assistants', sandboxAssistant());
    const number = freshNumber();
    expect((await api('POST', '/numbers', { number, assistant_id: assistant.json.assistant.id })).status).toBe(201);
    const res = await voiceWebhook(twilioParams(number));
    expect(res.status).toBe(403);
    expect((await api('GET', '/calls')).json.calls).toEqual([]);
  });
});

describe('call-start checks reject before pickup', () => {
  it('a realtime assistant with node model, voice and transcriber overrides: every reason listed', async () => {
    const definition = {
      version: 1,
      entry_node: 'greeting',
      nodes: [
        { id: 'greeting', type: 'conversation', first_line: 'Hello.', llm_config: { provider: 'sandbox' } },
        {
          id: 'booking',
          type: 'conversation',
          first_line: 'Booking.',
          tts_config: { provider: 'sandbox', voice_id: 'sandbox' },
          stt_config: { provider: 'sandbox' },
        },
        { id: 'bye', type: 'end' },
      ],
      edges: [
        { from: 'greeting', to: 'booking', description: 'the caller wants to book' },
        { from: 'booking', to: 'bye', description: 'the caller is done' },
      ],
    };
    const { number, assistantId, workflowId } = await s.setUpNumber({
      assistant: { name: 'Realtime receptionist', llm_config: { provider: 'sandbox-realtime' } },
      definition,
    });
    const record = await dialRejected(number);
    expect(record).toMatchObject({ ended_reason: 'rejected-at-start', assistant_id: assistantId, workflow_id: workflowId });
    expect(record.errors).toHaveLength(3);
    expect(record.errors.map((e) => e.code)).toEqual(Array(3).fill('CALL_REJECTED_REALTIME_OVERRIDE'));
    expect(record.errors[0]!.message).toMatch(/^CALL_REJECTED_REALTIME_OVERRIDE: nodes\[0\] \(greeting\)\.llm_config/);
    expect(record.errors[1]!.message).toMatch(/^CALL_REJECTED_REALTIME_OVERRIDE: nodes\[1\] \(booking\)\.tts_config/);
    expect(record.errors[2]!.message).toMatch(/^CALL_REJECTED_REALTIME_OVERRIDE: nodes\[1\] \(booking\)\.stt_config/);
    const { ended, report } = await expectRejectedWebhooks(s.receiver, record.id, 'rejected-at-start');
    expect(ended.errors).toEqual(record.errors);
    expect(report.errors).toEqual(record.errors);
    expect(report.assistant_id).toBe(assistantId);
  });

  it("a node voice not of the assistant's TTS provider, a node block without provider: every reason", async () => {
    // Write-time validation needs `provider` on node blocks, so such a definition can only come
    // from an older catalog or rules; it is stored directly here, as if it had been.
    const { number, numberId } = await s.setUpNumber();
    const stored = await s.store.workflows.create(s.orgId, {
      name: 'Saved under older rules',
      is_active: true,
      definition: {
        version: 1,
        entry_node: 'greeting',
        nodes: [
          { id: 'greeting', type: 'conversation', first_line: 'Hello.', tts_config: { voice_id: 'alloy' } as never },
          { id: 'bye', type: 'end', tts_config: { provider: 'openai', voice_id: 'not-a-voice' } },
        ],
        edges: [{ from: 'greeting', to: 'bye', description: 'the caller is done' }],
      },
    });
    expect((await s.api('PATCH', `/numbers/${numberId}`, { workflow_id: stored.id })).status).toBe(200);
    const record = await dialRejected(number);
    expect(record.ended_reason).toBe('rejected-at-start');
    // nodes[0]'s block also lacks a provider (SPEC 7.3 check 3): both reasons are listed
    expect(record.errors).toEqual([
      { code: 'CALL_REJECTED_MISSING_PROVIDER', message: 'CALL_REJECTED_MISSING_PROVIDER: nodes[0] (greeting).tts_config.provider: required; a config block without a provider cannot run' },
      {
        code: 'CALL_REJECTED_VOICE_PROVIDER_MISMATCH',
        message: expect.stringMatching(/^CALL_REJECTED_VOICE_PROVIDER_MISMATCH: nodes\[0\] \(greeting\)\.tts_config\.voice_id: voice "alloy" does not belong to the assistant's TTS provider "sandbox"/),
      },
      {
        code: 'CALL_REJECTED_VOICE_PROVIDER_MISMATCH',
        message: expect.stringMatching(/^CALL_REJECTED_VOICE_PROVIDER_MISMATCH: nodes\[1\] \(bye\)\.tts_config\.voice_id: unknown voice "not-a-voice" for provider "openai"/),
      },
    ]);
    const { ended } = await expectRejectedWebhooks(s.receiver, record.id, 'rejected-at-start');
    expect(ended.errors).toEqual(record.errors);
  });

  it('an inline assistant from assistant-request is checked with the workflow like a stored one', async () => {
    const workflowId = await createWorkflow({
      version: 1,
      entry_node: 'greeting',
      nodes: [
        { id: 'greeting', type: 'conversation', first_line: 'Hello.', tts_config: { provider: 'sandbox', voice_id: 'sandbox' } },
        { id: 'bye', type: 'end' },
      ],
      edges: [{ from: 'greeting', to: 'bye', description: 'the caller is done' }],
    });
    const { number } = await numberResolvedAtCallTime();
    assistantAnswer = { body: { assistant: { name: 'Inline realtime', llm_config: { provider: 'sandbox-realtime' } }, workflow_id: workflowId } };
    const record = await dialRejected(number);
    expect(record).toMatchObject({ ended_reason: 'rejected-at-start', assistant_id: null, workflow_id: workflowId });
    expect(record.errors).toEqual([{ code: 'CALL_REJECTED_REALTIME_OVERRIDE', message: expect.stringMatching(/^CALL_REJECTED_REALTIME_OVERRIDE: nodes\[0\] \(greeting\)\.tts_config: per-node voice overrides/) }]);
    const { ended } = await expectRejectedWebhooks(hook, record.id, 'rejected-at-start');
    expect(ended.errors).toEqual(record.errors);
  });

  it('an inline config block without a provider is refused like a create: assistant-request-failed', async () => {
    const { number } = await numberResolvedAtCallTime();
    assistantAnswer = {
      body: { assistant: { name: 'Inline', llm_config: { provider: 'sandbox' }, stt_config: { provider: 'sandbox' }, tts_config: { voice_id: 'sandbox' } } },
    };
    const record = await dialRejected(number);
    expect(record.ended_reason).toBe('assistant-request-failed');
    expect(record.errors).toEqual([{ code: 'ASSISTANT_REQUEST_FAILED', message: expect.stringContaining('assistant.tts_config.provider') }]);
    const { ended } = await expectRejectedWebhooks(hook, record.id, 'assistant-request-failed');
    expect(ended.errors).toEqual(record.errors);
  });
});

describe('assistant-request answers', () => {
  it('is sent to the number webhook, signed with its secret, with the call and the numbers', async () => {
    const assistantId = await createAssistant(sandboxAssistant({ first_message: 'This is assistant Alpha.' }));
    const { number, secret } = await numberResolvedAtCallTime();
    assistantAnswer = { body: { assistant_id: assistantId } };
    const before = hook.requests.length;
    const callId = await talkBriefly(number, 'assistant Alpha');
    const sent = hook.requests.slice(before).find((r) => r.body.includes('"assistant-request"')) as RecordedRequest;
    expect(sent.headers['x-webhook-event']).toBe('assistant-request');
    const verified = verifyWebhook<{ message: any }>(sent.body, sent.headers, secret);
    expect(verified.payload.message).toMatchObject({
      type: 'assistant-request',
      call: { id: callId, type: 'inbound_phone_call', status: 'ringing' },
      phone_number: { number },
      customer: { number: '+15005550006' },
    });
    const report = await reportOf(hook, callId);
    expect(report).toMatchObject({ assistant_id: assistantId, workflow_id: null });
  }, 60_000);

  it('{assistant_id, workflow_id}: that assistant runs that workflow', async () => {
    const assistantId = await createAssistant(sandboxAssistant({ first_message: 'never said: a workflow runs' }));
    const workflowId = await createWorkflow(twoLineFlow('Hello, this is the Bravo workflow.'));
    const { number } = await numberResolvedAtCallTime();
    assistantAnswer = { body: { assistant_id: assistantId, workflow_id: workflowId } };
    const callId = await talkBriefly(number, 'Bravo workflow');
    const report = await reportOf(hook, callId);
    expect(report).toMatchObject({ assistant_id: assistantId, workflow_id: workflowId, nodes_visited: ['greeting'] });
  }, 60_000);

  it("{assistant: inline}: runs it with no stored assistant; with workflow_id, runs that workflow", async () => {
    const { number } = await numberResolvedAtCallTime();
    assistantAnswer = { body: { assistant: sandboxAssistant({ name: 'Inline', first_message: 'Inline Charlie speaking.' }) } };
    const first = await talkBriefly(number, 'Inline Charlie');
    expect(await reportOf(hook, first)).toMatchObject({ assistant_id: null, workflow_id: null });
    expect((await s.api('GET', `/calls/${first}`)).json.call.assistant_id).toBeNull();

    const workflowId = await createWorkflow(twoLineFlow('Hello from the Delta workflow.'));
    assistantAnswer = { body: { assistant: sandboxAssistant({ name: 'Inline' }), workflow_id: workflowId } };
    const second = await talkBriefly(number, 'Delta workflow');
    expect(await reportOf(hook, second)).toMatchObject({ assistant_id: null, workflow_id: workflowId });
  }, 60_000);

  it("without workflow_id the number's workflow runs; workflow_id null runs the assistant alone", async () => {
    const assistantId = await createAssistant(sandboxAssistant({ first_message: 'Echo assistant alone.' }));
    const workflowId = await createWorkflow(twoLineFlow("Hello from the number's Foxtrot workflow."));
    const { number } = await numberResolvedAtCallTime({ workflow_id: workflowId });
    assistantAnswer = { body: { assistant_id: assistantId } };
    const withFlow = await talkBriefly(number, 'Foxtrot workflow');
    expect(await reportOf(hook, withFlow)).toMatchObject({ assistant_id: assistantId, workflow_id: workflowId });

    assistantAnswer = { body: { assistant_id: assistantId, workflow_id: null } };
    const alone = await talkBriefly(number, 'Echo assistant alone');
    const report = await reportOf(hook, alone);
    expect(report).toMatchObject({ assistant_id: assistantId, workflow_id: null });
    expect(report.workflow_note).toBeUndefined();
  }, 60_000);

  it('{error}: the customer refuses the call, rejected-at-start with their reason', async () => {
    const { number } = await numberResolvedAtCallTime();
    assistantAnswer = { body: { error: 'We are closed on Sundays' } };
    const record = await dialRejected(number);
    expect(record).toMatchObject({ ended_reason: 'rejected-at-start', errors: [{ code: 'ASSISTANT_REQUEST_REJECTED', message: 'assistant-request: We are closed on Sundays' }] });
    const { ended } = await expectRejectedWebhooks(hook, record.id, 'rejected-at-start');
    expect(ended.errors).toEqual([{ code: 'ASSISTANT_REQUEST_REJECTED', message: 'assistant-request: We are closed on Sundays' }]);
  });

  it.each([
    ['204', { status: 204 }],
    ['an empty body', { status: 200, body: '' }],
    ['{}', { status: 200, body: {} }],
  ] as const)("an empty answer (%s) uses the number's own settings: with no assistant, rejected", async (_name, answer) => {
    const workflowId = await createWorkflow(twoLineFlow('never said: no assistant'));
    const { number } = await numberResolvedAtCallTime({ workflow_id: workflowId });
    assistantAnswer = answer;
    const record = await dialRejected(number);
    expect(record.ended_reason).toBe('assistant-request-failed');
    expect(record.errors).toEqual([{ code: 'ASSISTANT_REQUEST_FAILED', message: expect.stringContaining('the number has no assistant') }]);
    await expectRejectedWebhooks(hook, record.id, 'assistant-request-failed');
  });

  it.each([
    ['a non-2xx', { status: 500, body: { assistant_id: '00000000-0000-4000-8000-000000000000' } }, /HTTP 500/],
    ['an unreadable body', { status: 200, body: 'assistant: the nice one' }, /not JSON/],
    ['a closed connection', { destroy: true }, /assistant-request/],
    ['an unknown assistant_id', { body: { assistant_id: '00000000-0000-4000-8000-000000000000' } }, /assistant_id: no assistant with id/],
    ['an unknown workflow_id', { body: { assistant: { name: 'Inline', tts_config: { provider: 'sandbox', voice_id: 'sandbox' } }, workflow_id: '00000000-0000-4000-8000-000000000000' } }, /workflow_id: no workflow with id/],
  ] as const)('%s: rejected, assistant-request-failed', async (_name, answer, error) => {
    const { number } = await numberResolvedAtCallTime();
    assistantAnswer = answer as ReceiverAnswer;
    const record = await dialRejected(number);
    expect(record.ended_reason).toBe('assistant-request-failed');
    expect(record.errors).toEqual([{ code: 'ASSISTANT_REQUEST_FAILED', message: expect.stringMatching(error) }]);
    await expectRejectedWebhooks(hook, record.id, 'assistant-request-failed');
  });

  it('no answer within 5 s: rejected, assistant-request-failed, and Twilio gets its answer by then', async () => {
    const { number } = await numberResolvedAtCallTime();
    assistantAnswer = { delayMs: 9_000, body: { error: 'too late' } };
    const startedAt = Date.now();
    const record = await dialRejected(number);
    const took = Date.now() - startedAt;
    expect(took).toBeGreaterThanOrEqual(4_900);
    expect(took).toBeLessThan(8_500);
    expect(record).toMatchObject({ ended_reason: 'assistant-request-failed', errors: [{ code: 'ASSISTANT_REQUEST_FAILED', message: 'assistant-request: no answer within 5 s' }] });
    await expectRejectedWebhooks(hook, record.id, 'assistant-request-failed');
  }, 30_000);

  it('the account webhook answers for a number with neither assistant nor webhook', async () => {
    const assistantId = await createAssistant(sandboxAssistant({ first_message: 'Golf from the account webhook.' }));
    const number = freshNumber();
    expect((await s.api('POST', '/numbers', { number })).status).toBe(201);
    s.receiver.setDefault((r) =>
      r.body.includes('"assistant-request"') ? { body: { assistant_id: assistantId } } : { status: 200 },
    );
    try {
      const callId = await talkBriefly(number, 'Golf from the account');
      expect(receivedMessages(s.receiver, 'assistant-request').some((m) => m.call.id === callId)).toBe(true);
      expect(await reportOf(s.receiver, callId)).toMatchObject({ assistant_id: assistantId });
    } finally {
      s.receiver.setDefault({ status: 200, body: '' });
    }
  }, 60_000);
});

describe('workflows at call start', () => {
  it('an inactive workflow: the assistant runs alone, and the report says workflow_id null and why', async () => {
    const { number, workflowId } = await s.setUpNumber({
      assistant: sandboxAssistant({ first_message: 'Hotel assistant, on its own.' }),
      definition: twoLineFlow('never said: the workflow is inactive'),
    });
    expect((await s.api('PATCH', `/workflows/${workflowId}`, { is_active: false })).status).toBe(200);
    const callId = await talkBriefly(number, 'Hotel assistant');
    const report = await reportOf(s.receiver, callId);
    expect(report.workflow_id).toBeNull();
    expect(report.workflow_note).toContain(workflowId);
    expect(report.workflow_note).toContain('inactive');
    const view = (await s.api('GET', `/calls/${callId}`)).json.call;
    expect(view).toMatchObject({ workflow_id: null, workflow_note: report.workflow_note });
  }, 60_000);

  it('a workflow edited mid-call: the running call keeps its snapshot, the next call gets the new one', async () => {
    const { number, workflowId } = await s.setUpNumber({ definition: twoLineFlow('Hello, this is the old India desk.', 'Old booking line here.') });
    const call = s.caller(number);
    const outcome = await call.dial();
    expect(outcome.kind).toBe('connected');
    await call.hear('old India desk');
    const edited = await s.api('PATCH', `/workflows/${workflowId}`, {
      definition: twoLineFlow('Hello, this is the new Juliet desk.', 'New booking line here.'),
    });
    expect(edited.status).toBe(200);
    await call.quiet();
    await call.say('I would like to book an appointment please.');
    await call.hear('Old booking line');
    expect(call.heardText()).not.toContain('New booking');
    await call.hangUp();

    const next = s.caller(number);
    await next.dial();
    await next.hear('new Juliet desk');
    await next.hangUp();
    expect(next.heardText()).not.toContain('old India');

    const callId = outcome.kind === 'connected' ? outcome.callId : '';
    const report = await reportOf(s.receiver, callId);
    expect(report.nodes_visited).toEqual(['greeting', 'booking']);
    expect(report.transcript).toContain('Old booking line');
  }, 90_000);
});

describe('GET /calls', () => {
  it("lists the organization's calls newest first and shows a live one's status, node and transcript", async () => {
    const { number } = await s.setUpNumber({ definition: twoLineFlow('Hello, this is the Kilo line.') });
    const call = s.caller(number);
    const outcome = await call.dial();
    const callId = outcome.kind === 'connected' ? outcome.callId : '';
    await call.hear('Kilo line');
    const live = await eventually('the first line in the live transcript', async () => {
      const got = await s.api('GET', `/calls/${callId}`);
      return got.json.call?.transcript.includes('Kilo line') ? got.json.call : null;
    });
    expect(live).toMatchObject({
      id: callId,
      status: 'in-progress',
      current_node: 'greeting',
      phone_number: { number },
      customer: { number: '+15005550006' },
      ended_reason: null,
    });
    expect(live.started_at).not.toBeNull();

    const list = (await s.api('GET', '/calls')).json.calls as { id: string; created_at: string }[];
    expect(list[0]!.id).toBe(callId);
    const times = list.map((c) => Date.parse(c.created_at));
    expect([...times].sort((a, b) => b - a)).toEqual(times);

    await call.hangUp();
    const ended = await eventually('the call to be ended', async () => {
      const got = await s.api('GET', `/calls/${callId}`);
      return got.json.call.status === 'ended' ? got.json.call : null;
    });
    expect(ended).toMatchObject({ ended_reason: 'customer-ended-call', current_node: 'greeting' });

    const other = await s.store.keys.createKey('Somebody else');
    const asOther = (url: string) => s.app.inject({ method: 'GET', url, headers: { authorization: `Bearer ${other.key}` } });
    expect((await asOther(`/calls/${callId}`)).statusCode).toBe(404);
    expect((await asOther('/calls')).json().calls).toEqual([]);
    expect((await s.api('GET', '/calls/00000000-0000-4000-8000-000000000000')).status).toBe(404);
  }, 60_000);
});
