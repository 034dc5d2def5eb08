/**
 * Outbound calls end to end (DECISIONS 11): `POST /calls` against the real app, dialled through
 * the Twilio stand-in (src/sim/twilio.ts: Twilio's REST API, signed status and AMD callbacks,
 * the TwiML request and the Media Streams socket with a simulated callee). Every path: a person,
 * a machine with and without a message, busy, no answer, a refused dial, cancel before the answer,
 * end after it, a campaign under its concurrency cap, forged callbacks, and bad input.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { twilioSignature } from '../../src/telephony/twilio/signature.js';
import type { TwilioStandIn, StandInCall } from '../../src/sim/twilio.js';
import {
  AUTH_TOKEN,
  eventually,
  realtimeSandboxAssistant,
  receivedMessages,
  sandboxAssistant,
  startCallingServer,
  type CallingServer,
} from '../helpers/calls.js';

let s: CallingServer;
let twilio: TwilioStandIn;

beforeAll(async () => {
  s = await startCallingServer();
  twilio = s.twilio as unknown as TwilioStandIn;
}, 120_000);
afterAll(async () => {
  await s?.close();
});

let customerSeq = 0;
/** A fresh customer number (the stand-in picks the callee's behaviour by it). */
const customerNumber = () => `+1415600${String(++customerSeq).padStart(4, '0')}`;

const messagesFor = (callId: string, type: string) => receivedMessages(s.receiver, type).filter((m) => m.call?.id === callId);
const reportOf = (callId: string, timeoutMs = 20_000) =>
  eventually(`the report of ${callId}`, () => messagesFor(callId, 'end-of-call-report')[0], timeoutMs);
const statusesOf = (callId: string) => messagesFor(callId, 'status-update').map((m) => m.status);

const OUTBOUND = {
  first_message: 'Hello, this is the inbound greeting.',
  speech_config: { first_message_outbound: 'Hi {{customer.name}}, this is Acme calling about {{topic}}.' },
};

async function placeCall(numberId: string, customer: { number: string; name?: string }, extra: Record<string, unknown> = {}) {
  const res = await s.api('POST', '/calls', { number_id: numberId, customer, ...extra });
  expect(res.status, JSON.stringify(res.json)).toBe(201);
  return res.json.call;
}

const standInCallTo = (to: string) => twilio.waitForCall(to, 15_000);
const ended = (callId: string, timeoutMs = 20_000) =>
  eventually(
    `call ${callId} to end`,
    async () => {
      const r = await s.api('GET', `/calls/${callId}`);
      return r.json.call?.status === 'ended' ? r.json.call : null;
    },
    timeoutMs,
  );

describe('a person answers', () => {
  it('hears first_message_outbound (with its variables) at once, and the call is a call like any other', async () => {
    const { numberId } = await s.setUpNumber({ assistant: sandboxAssistant(OUTBOUND) });
    const to = customerNumber();
    const call = await placeCall(numberId, { number: to, name: 'Ada' }, { variables: { topic: 'your order' } });
    expect(call).toMatchObject({ type: 'outbound_phone_call', status: 'queued', customer: { number: to, name: 'Ada' }, answered_by: null });

    const placed = await standInCallTo(to);
    const create = twilio.requests.find((r) => r.method === 'POST' && r.path.endsWith('/Calls.json') && r.form.get('To') === to)!;
    expect(create.form.get('From')).toMatch(/^\+1555/);
    expect(create.form.get('Url')).toBe(`${s.baseUrl}/telephony/twilio/outbound?call_id=${call.id}`);
    expect(create.form.get('StatusCallback')).toBe(`${s.baseUrl}/telephony/twilio/status?call_id=${call.id}`);
    expect(create.form.getAll('StatusCallbackEvent')).toEqual(['initiated', 'ringing', 'answered', 'completed']);
    // detection is off: Twilio is not asked for it
    expect(create.form.get('MachineDetection')).toBeNull();

    await eventually('the media leg', () => placed.leg);
    await placed.leg!.hear('Hi Ada, this is Acme calling about your order');
    const live = (await s.api('GET', `/calls/${call.id}`)).json.call;
    expect(live).toMatchObject({ status: 'in-progress', transport: 'twilio' });
    await placed.leg!.hangUp();

    const report = await reportOf(call.id);
    expect(report).toMatchObject({
      ended_reason: 'customer-ended-call',
      call: { id: call.id, type: 'outbound_phone_call' },
      customer: { number: to, name: 'Ada' },
      answered_by: null,
    });
    expect(report.transcript).toContain('Assistant: Hi Ada, this is Acme calling about your order.');
    expect(statusesOf(call.id)).toEqual(['queued', 'ringing', 'in-progress', 'ended']);
    // every callback the stand-in sent was taken
    await eventually('the completed callback', () => placed.final);
    expect(placed.callbacks.filter((c) => c.status !== 204 && c.status !== 200)).toEqual([]);
  });

  it('with voicemail detection on, the greeting is not held for it, and answered_by says human', async () => {
    const { numberId } = await s.setUpNumber({
      assistant: sandboxAssistant({ ...OUTBOUND, voicemail_detection: true, voicemail_message: 'Please call us back.' }),
    });
    const to = customerNumber();
    twilio.setCallee(to, { kind: 'person', amdMs: 4_000 });
    const call = await placeCall(numberId, { number: to, name: 'Bo' }, { variables: { topic: 'a refund' } });
    const placed = await standInCallTo(to);
    const create = twilio.requests.find((r) => r.method === 'POST' && r.form.get('To') === to)!;
    expect(create.form.get('MachineDetection')).toBe('DetectMessageEnd');
    expect(create.form.get('AsyncAmd')).toBe('true');
    expect(create.form.get('AsyncAmdStatusCallback')).toBe(`${s.baseUrl}/telephony/twilio/amd?call_id=${call.id}`);

    await eventually('the media leg', () => placed.leg);
    const heard = await placed.leg!.hear('calling about a refund');
    const amd = await eventually('the AMD callback answered', () => placed.callbacks.find((c) => c.kind === 'amd' && c.status !== null));
    // the person heard the greeting before detection had decided
    expect(heard.at).toBeLessThan(amd.at);
    expect(amd.status).toBe(204);
    await eventually('answered_by human', async () => (await s.api('GET', `/calls/${call.id}`)).json.call.answered_by === 'human');
    await placed.leg!.hangUp();
    const report = await reportOf(call.id);
    expect(report).toMatchObject({ ended_reason: 'customer-ended-call', answered_by: 'human' });
    expect(report.transcript).not.toContain('Please call us back');
  });
});

// Over the stand-in on a pipeline call; what each kind of call does with the verdict (the message
// heard whole, then the hang-up; none at once): test/fast-calls/voicemail.test.ts on both kinds.
describe.each([{ kind: 'pipeline', assistant: sandboxAssistant }])('a machine answers ($kind)', ({ assistant }) => {
  it('gets voicemail_message after the beep, then the call hangs up (voicemail)', async () => {
    const { numberId } = await s.setUpNumber({
      assistant: assistant({
        ...OUTBOUND,
        voicemail_detection: true,
        voicemail_message: 'Hi {{customer.name}}, Acme here, please call us back.',
      }),
    });
    const to = customerNumber();
    twilio.setCallee(to, { kind: 'voicemail', greeting: 'You have reached Cy. Leave a message after the tone.' });
    const call = await placeCall(numberId, { number: to, name: 'Cy' }, { variables: { topic: 'a delivery' } });
    const placed = await standInCallTo(to);
    const report = await reportOf(call.id, 40_000);
    expect(report).toMatchObject({ ended_reason: 'voicemail', answered_by: 'machine' });
    expect(report.transcript).toContain('Hi Cy, Acme here, please call us back.');
    // the machine recorded the message after its beep, whole
    expect(placed.voicemail?.beepEndedAt).not.toBeNull();
    const recorded = placed.voicemail!.recorded.map((l) => l.text).join(' ');
    expect(recorded).toContain('Hi Cy, Acme here, please call us back.');
    for (const line of placed.voicemail!.recorded) expect(line.at).toBeGreaterThan(placed.voicemail!.beepEndedAt!);
    // and Switchboard hung up through the REST API
    await eventually('the REST hang-up', () =>
      twilio.requests.find((r) => r.path.endsWith(`/Calls/${placed.sid}.json`) && r.form.get('Status') === 'completed'),
    );
    expect((await ended(call.id)).answered_by).toBe('machine');
  });

  it('with no voicemail_message, hangs up at once (voicemail)', async () => {
    const { numberId } = await s.setUpNumber({ assistant: assistant({ ...OUTBOUND, voicemail_detection: true }) });
    const to = customerNumber();
    twilio.setCallee(to, { kind: 'voicemail' });
    const call = await placeCall(numberId, { number: to }, { variables: { topic: 'x' } });
    const placed = await standInCallTo(to);
    const report = await reportOf(call.id, 40_000);
    expect(report).toMatchObject({ ended_reason: 'voicemail', answered_by: 'machine' });
    await eventually('the stand-in call to end', () => placed.final);
    expect(placed.voicemail!.recorded).toEqual([]);
  });
});

describe('nobody answers', () => {
  it.each([
    { callee: { kind: 'busy' as const }, reason: 'customer-busy' },
    { callee: { kind: 'no-answer' as const, ringMs: 300 }, reason: 'customer-did-not-answer' },
    { callee: { kind: 'failed' as const }, reason: 'dial-failed' },
  ])('$callee.kind: ends $reason with its status-updates and report', async ({ callee, reason }) => {
    const { numberId } = await s.setUpNumber({ assistant: sandboxAssistant(OUTBOUND) });
    const to = customerNumber();
    twilio.setCallee(to, callee);
    const call = await placeCall(numberId, { number: to });
    const report = await reportOf(call.id);
    expect(report).toMatchObject({ ended_reason: reason, answered_by: null, started_at: null, duration_seconds: 0 });
    expect(statusesOf(call.id)).toEqual(['queued', 'ringing', 'ended']);
    const final = await ended(call.id);
    expect(final).toMatchObject({ ended_reason: reason, started_at: null });
  });

  it('a dial Twilio refuses (4xx) ends dial-failed with its message', async () => {
    const { numberId } = await s.setUpNumber({ assistant: sandboxAssistant(OUTBOUND) });
    const to = customerNumber();
    twilio.setCallee(to, { kind: 'reject', code: 21215, message: 'Account not authorized to call this number.' });
    const call = await placeCall(numberId, { number: to });
    const report = await reportOf(call.id);
    expect(report.ended_reason).toBe('dial-failed');
    expect(report.errors.map((e: { message: string }) => e.message).join(' ')).toContain('Account not authorized to call this number.');
    expect((await ended(call.id)).errors.map((e: { message: string }) => e.message).join(' ')).toContain('Twilio answered 400');
  });
});

describe('POST /calls/{id}/end', () => {
  it('cancels a ringing call at Twilio (canceled)', async () => {
    const { numberId } = await s.setUpNumber({ assistant: sandboxAssistant(OUTBOUND) });
    const to = customerNumber();
    twilio.setCallee(to, { kind: 'no-answer', ringMs: 20_000 });
    const call = await placeCall(numberId, { number: to });
    const placed = await standInCallTo(to);
    await eventually('ringing', () => placed.status === 'ringing');
    await eventually('ringing at Switchboard', async () => (await s.api('GET', `/calls/${call.id}`)).json.call.status === 'ringing');
    const res = await s.api('POST', `/calls/${call.id}/end`);
    expect(res.status).toBe(202);
    expect(res.json.call).toMatchObject({ status: 'ended', ended_reason: 'canceled' });
    await eventually('Twilio canceled it', () => placed.final);
    expect(placed.status).toBe('canceled');
    const report = await reportOf(call.id);
    expect(report.ended_reason).toBe('canceled');
    // once over, it is over
    expect((await s.api('POST', `/calls/${call.id}/end`)).json).toMatchObject({ error: 'Call ended' });
  });

  it('cancels a queued call before it is dialled: nothing reaches Twilio', async () => {
    const { numberId } = await s.setUpNumber({ assistant: sandboxAssistant(OUTBOUND) });
    // one call at a time: the second waits in the queue behind a call that rings on
    await s.api('PATCH', '/account', { outbound: { max_concurrent_calls: 1, calls_per_second: 10 } });
    try {
      const first = customerNumber();
      const second = customerNumber();
      twilio.setCallee(first, { kind: 'no-answer', ringMs: 20_000 });
      twilio.setCallee(second, { kind: 'no-answer', ringMs: 20_000 });
      const res = await s.api('POST', '/calls', { number_id: numberId, customers: [{ number: first }, { number: second }] });
      expect(res.status).toBe(201);
      // one is dialled (the queue keeps rough order, not strict order across processes); the other waits
      const dialled = await twilio.waitForCall((c) => c.to === first || c.to === second, 15_000);
      const [ringing, waiting] =
        dialled.to === first ? [res.json.calls[0], res.json.calls[1]] : [res.json.calls[1], res.json.calls[0]];
      const waitingNumber = dialled.to === first ? second : first;
      expect((await s.api('GET', `/calls/${waiting.id}`)).json.call.status).toBe('queued');
      const canceled = await s.api('POST', `/calls/${waiting.id}/end`);
      expect(canceled.status).toBe(202);
      expect(canceled.json.call).toMatchObject({ status: 'ended', ended_reason: 'canceled' });
      // the slot frees: a canceled call would be dialled now if it were still queued
      await s.api('POST', `/calls/${ringing.id}/end`);
      await reportOf(ringing.id);
      await new Promise((r) => setTimeout(r, 1_500));
      expect(twilio.calls.some((c) => c.to === waitingNumber)).toBe(false);
      expect((await reportOf(waiting.id)).ended_reason).toBe('canceled');
    } finally {
      await s.api('PATCH', '/account', { outbound: null });
    }
  });

  it('ends a live call (api-ended-call) and Twilio hangs up', async () => {
    const { numberId } = await s.setUpNumber({ assistant: sandboxAssistant(OUTBOUND) });
    const to = customerNumber();
    const call = await placeCall(numberId, { number: to, name: 'Di' }, { variables: { topic: 'z' } });
    const placed = await standInCallTo(to);
    await eventually('the media leg', () => placed.leg);
    await placed.leg!.hear('Hi Di');
    const res = await s.api('POST', `/calls/${call.id}/end`);
    expect(res.status).toBe(202);
    const report = await reportOf(call.id);
    expect(report.ended_reason).toBe('api-ended-call');
    await eventually('Twilio completed it', () => placed.final);
    expect(placed.status).toBe('completed');
  });

  it('404 for another organization\'s call and an unknown one', async () => {
    const { key } = await s.store.keys.createKey('Another org');
    const { numberId } = await s.setUpNumber({ assistant: sandboxAssistant(OUTBOUND) });
    const to = customerNumber();
    twilio.setCallee(to, { kind: 'busy' });
    const call = await placeCall(numberId, { number: to });
    const foreign = await s.app.inject({ method: 'POST', url: `/calls/${call.id}/end`, headers: { authorization: `Bearer ${key}` } });
    expect(foreign.statusCode).toBe(404);
    expect((await s.api('POST', '/calls/00000000-0000-4000-8000-000000000000/end')).status).toBe(404);
    await reportOf(call.id);
  });
});

describe('a campaign', () => {
  it('dials every customer, never more live at once than max_concurrent_calls', async () => {
    const { numberId } = await s.setUpNumber({ assistant: sandboxAssistant(OUTBOUND) });
    await s.api('PATCH', '/account', { outbound: { max_concurrent_calls: 2, calls_per_second: 20 } });
    try {
      const numbers = Array.from({ length: 6 }, () => customerNumber());
      // each person listens to the greeting, stays on a little, and hangs up
      const hungUpAt = new Map<string, number>();
      for (const n of numbers) {
        twilio.setCallee(n, {
          kind: 'person',
          onAnswer: async (leg) => {
            await leg.hear('this is Acme');
            await new Promise((r) => setTimeout(r, 1_500));
            hungUpAt.set(n, Date.now());
            await leg.hangUp();
          },
        });
      }
      const res = await s.api('POST', '/calls', {
        number_id: numberId,
        customers: numbers.map((number) => ({ number })),
        variables: { topic: 'the campaign' },
      });
      expect(res.status).toBe(201);
      expect(res.json.calls).toHaveLength(6);
      for (const c of res.json.calls) expect(c.status).toBe('queued');
      const reports = await Promise.all(res.json.calls.map((c: { id: string }) => reportOf(c.id, 60_000)));
      for (const r of reports) expect(r.ended_reason).toBe('customer-ended-call');
      // each customer dialled once
      const placed: StandInCall[] = numbers.map((n) => {
        const calls = twilio.calls.filter((c) => c.to === n);
        expect(calls).toHaveLength(1);
        return calls[0]!;
      });
      // At no moment were more than two of them placed and not yet hung up. Each call holds its
      // slot from before its REST create until after its callee's hang-up reached Switchboard, so
      // these spans lie inside the slots' and overlap no more than they do.
      const edges = placed.flatMap((c) => [
        { at: c.createdAt, d: 1 },
        { at: hungUpAt.get(c.to)!, d: -1 },
      ]);
      edges.sort((x, y) => x.at - y.at || x.d - y.d);
      let live = 0;
      let most = 0;
      for (const e of edges) most = Math.max(most, (live += e.d));
      expect(most).toBeLessThanOrEqual(2);
      expect(most).toBe(2);
    } finally {
      await s.api('PATCH', '/account', { outbound: null });
    }
  }, 90_000);
});

describe('Twilio callbacks are verified', () => {
  it('a forged status, AMD or answer callback is 403 and changes nothing', async () => {
    const { numberId } = await s.setUpNumber({ assistant: sandboxAssistant(OUTBOUND) });
    const to = customerNumber();
    twilio.setCallee(to, { kind: 'no-answer', ringMs: 20_000 });
    const call = await placeCall(numberId, { number: to });
    const placed = await standInCallTo(to);
    await eventually('ringing at Switchboard', async () => (await s.api('GET', `/calls/${call.id}`)).json.call.status === 'ringing');
    const post = (path: string, params: Record<string, string>, signature: string) =>
      s.app.inject({
        method: 'POST',
        url: `${path}?call_id=${call.id}`,
        headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-twilio-signature': signature },
        payload: new URLSearchParams(params).toString(),
      });
    const params = { AccountSid: placed.accountSid, CallSid: placed.sid, CallStatus: 'busy', AnsweredBy: 'machine_end_beep' };
    const url = (path: string) => `${s.baseUrl}${path}?call_id=${call.id}`;
    for (const path of ['/telephony/twilio/status', '/telephony/twilio/amd', '/telephony/twilio/outbound']) {
      // signed with another token, signed for another URL, and not signed
      for (const signature of [
        twilioSignature('not-the-auth-token', url(path), params),
        twilioSignature(AUTH_TOKEN, `${s.baseUrl}${path}?call_id=00000000-0000-4000-8000-000000000000`, params),
        '',
      ]) {
        const res = await post(path, params, signature);
        expect(res.statusCode, `${path} ${signature}`).toBe(403);
      }
    }
    const after = (await s.api('GET', `/calls/${call.id}`)).json.call;
    expect(after).toMatchObject({ status: 'ringing', answered_by: null });
    // the same request, signed as Twilio signs it, is taken
    const genuine = await post('/telephony/twilio/status', params, twilioSignature(AUTH_TOKEN, url('/telephony/twilio/status'), params));
    expect(genuine.statusCode).toBe(204);
    expect((await ended(call.id)).ended_reason).toBe('customer-busy');
  });
});

describe('bad input: 4xx with details, nothing dialled', () => {
  it('refuses every bad request before anything is queued', async () => {
    const { numberId } = await s.setUpNumber({ assistant: sandboxAssistant(OUTBOUND) });
    const before = twilio.requests.length;
    const cases: Array<[unknown, RegExp]> = [
      [{ number_id: numberId, customer: { number: '4155550123' } }, /customer\.number: must be an E\.164 number/],
      [{ number_id: numberId, customers: [{ number: '+14155550123' }, { number: 'nope' }] }, /customers\[1\]\.number: must be an E\.164/],
      [{ number_id: '00000000-0000-4000-8000-000000000000', customer: { number: '+14155550123' } }, /number_id: no number with id/],
      [{ number_id: numberId, customer: { number: '+14155550123' }, assistant_id: '00000000-0000-4000-8000-000000000000' }, /assistant_id: no assistant with id/],
      [{ number_id: numberId, customer: { number: '+14155550123' }, workflow_id: '00000000-0000-4000-8000-000000000000' }, /workflow_id: no workflow with id/],
      [{ number_id: numberId, customers: Array.from({ length: 1001 }, () => ({ number: '+14155550123' })) }, /customers: .*1000/],
      [{ number_id: numberId }, /customer: required/],
      [{ number_id: numberId, customer: { number: '+14155550123' }, customers: [{ number: '+14155550123' }] }, /customers: give customer or customers, not both/],
      [{ number_id: numberId, customer: { number: '+14155550123' }, variables: { 'bad name': 1 } }, /variables/],
      [{ number_id: numberId, customer: { number: '+14155550123' }, colour: 'red' }, /colour/],
    ];
    for (const [body, detail] of cases) {
      const res = await s.api('POST', '/calls', body);
      expect(res.status, JSON.stringify(body).slice(0, 200)).toBe(400);
      expect(res.json.error).toBe('Invalid request');
      expect(res.json.details.join('\n')).toMatch(detail);
    }
    expect(twilio.requests.length).toBe(before);
  });

  it("another organization's number or assistant does not exist for the caller", async () => {
    const other = await s.store.keys.createKey('Other org');
    const asOther = (method: 'POST', url: string, body: unknown) =>
      s.app.inject({ method, url, headers: { authorization: `Bearer ${other.key}` }, payload: body as Record<string, unknown> });
    const { numberId, assistantId } = await s.setUpNumber({ assistant: sandboxAssistant(OUTBOUND) });
    const res = await asOther('POST', '/calls', { number_id: numberId, customer: { number: '+14155550123' } });
    expect(res.statusCode).toBe(400);
    expect(res.json().details.join(' ')).toMatch(/number_id: no number with id/);
    // and a number of ours with their assistant
    const { numberId: ours } = await s.setUpNumber({ assistant: sandboxAssistant(OUTBOUND) });
    const theirs = await asOther('POST', '/assistants', sandboxAssistant());
    const mixed = await s.api('POST', '/calls', { number_id: ours, customer: { number: '+14155550123' }, assistant_id: theirs.json().assistant.id });
    expect(mixed.status).toBe(400);
    expect(mixed.json.details.join(' ')).toMatch(/assistant_id: no assistant with id/);
    expect(assistantId).toBeTruthy();
  });

  it('an account with no Twilio credentials is a 400 that says so', async () => {
    const { numberId } = await s.setUpNumber({ assistant: sandboxAssistant(OUTBOUND) });
    await s.api('PATCH', '/account', { telephony: { twilio: null } });
    try {
      const res = await s.api('POST', '/calls', { number_id: numberId, customer: { number: '+14155550123' } });
      expect(res.status).toBe(400);
      expect(res.json.details.join(' ')).toMatch(/no Twilio credentials/);
    } finally {
      const { ACCOUNT_SID } = await import('../helpers/calls.js');
      await s.api('PATCH', '/account', { telephony: { twilio: { account_sid: ACCOUNT_SID, auth_token: AUTH_TOKEN } } });
    }
  });

  it('the call-start checks refuse before dialling: 400 Call rejected with every reason', async () => {
    const before = twilio.requests.length;
    // a realtime assistant whose workflow overrides the model, the voice and the transcriber per node
    const definition = {
      version: 1,
      entry_node: 'greeting',
      nodes: [
        { id: 'greeting', type: 'conversation', first_line: 'Hello.', llm_config: { provider: 'sandbox' } },
        { id: 'booking', type: 'conversation', first_line: 'Booking.', tts_config: { provider: 'sandbox', voice_id: 'sandbox' }, stt_config: { provider: 'sandbox' } },
        { id: 'bye', type: 'end' },
      ],
      edges: [
        { from: 'greeting', to: 'booking', description: 'the caller wants to book' },
        { from: 'booking', to: 'bye', description: 'the caller is done' },
      ],
    };
    const { numberId } = await s.setUpNumber({ assistant: realtimeSandboxAssistant(), definition });
    const listed = (await s.api('GET', '/calls?limit=100')).json.calls.length;
    const res = await s.api('POST', '/calls', { number_id: numberId, customer: { number: '+14155550123' } });
    expect(res.status).toBe(400);
    expect(res.json.error).toBe('Call rejected');
    expect(res.json.details).toHaveLength(3);
    expect(res.json.details.join('\n')).toMatch(/nodes\[0\] \(greeting\)\.llm_config: /);
    expect(res.json.details.join('\n')).toMatch(/nodes\[1\] \(booking\)\.tts_config: /);
    expect(res.json.details.join('\n')).toMatch(/nodes\[1\] \(booking\)\.stt_config: /);
    expect(twilio.requests.length).toBe(before);
    // nothing was made: no call in the log
    expect((await s.api('GET', '/calls?limit=100')).json.calls.length).toBe(listed);
  });

  it('a number with no assistant needs assistant_id', async () => {
    const { numberId, assistantId } = await s.setUpNumber({ assistant: sandboxAssistant(OUTBOUND) });
    await s.api('PATCH', `/numbers/${numberId}`, { assistant_id: null });
    const res = await s.api('POST', '/calls', { number_id: numberId, customer: { number: '+14155550123' } });
    expect(res.status).toBe(400);
    expect(res.json.details.join(' ')).toMatch(/assistant_id: required/);
    const to = customerNumber();
    twilio.setCallee(to, { kind: 'busy' });
    const ok = await s.api('POST', '/calls', { number_id: numberId, customer: { number: to }, assistant_id: assistantId });
    expect(ok.status).toBe(201);
    await reportOf(ok.json.call.id);
  });
});

describe('{{variables}} on an inbound call', () => {
  it('built-ins and an assistant-request answer\'s variables are said; unknown names stay as written', async () => {
    const { numberId, number, assistantId } = await s.setUpNumber({
      assistant: sandboxAssistant({
        first_message: 'Hello {{name}}, you called {{phone_number.number}} from {{customer.number}} about {{missing}}.',
      }),
    });
    // the number asks its webhook for the assistant: the answer names it and gives a variable
    await s.api('PATCH', `/numbers/${numberId}`, { assistant_id: null });
    s.receiver.setDefault((r) =>
      r.body.includes('"assistant-request"')
        ? { status: 200, body: { assistant_id: assistantId, variables: { name: 'Eve', 'customer.number': 'your phone' } } }
        : { status: 200 },
    );
    try {
      const caller = s.caller(number);
      const outcome = await caller.dial();
      expect(outcome.kind).toBe('connected');
      // a given value wins over the built-in of the same name
      await caller.hear(`Hello Eve, you called ${number} from your phone about {{missing}}.`);
      await caller.hangUp();
    } finally {
      s.receiver.setDefault({ status: 200 });
    }
  });

  it('an assistant-request answer with bad variables refuses the call, saying why', async () => {
    const { numberId, number, assistantId } = await s.setUpNumber({ assistant: sandboxAssistant() });
    await s.api('PATCH', `/numbers/${numberId}`, { assistant_id: null });
    s.receiver.setDefault((r) =>
      r.body.includes('"assistant-request"') ? { status: 200, body: { assistant_id: assistantId, variables: { n: { deep: 1 } } } } : { status: 200 },
    );
    try {
      const outcome = await s.caller(number).dial();
      expect(outcome.kind).toBe('rejected');
      const report = (await eventually('the report', () =>
        receivedMessages(s.receiver, 'end-of-call-report').find((m) => m.phone_number?.number === number),
      )) as { ended_reason: string; errors: { message: string }[] };
      expect(report.ended_reason).toBe('assistant-request-failed');
      expect(report.errors.map((e: { message: string }) => e.message).join(' ')).toMatch(/variables\.n: must be a string, a number or a boolean/);
    } finally {
      s.receiver.setDefault({ status: 200 });
    }
  });
});

describe.each([
  { kind: 'pipeline', assistant: sandboxAssistant },
  { kind: 'realtime', assistant: realtimeSandboxAssistant },
])('detection that speaks before the media connects ($kind)', ({ assistant }) => {
  it('a machine verdict while it rings: the answered call says only the voicemail message', async () => {
    const { numberId } = await s.setUpNumber({
      assistant: assistant({ ...OUTBOUND, voicemail_detection: true, voicemail_message: 'Early machine message.' }),
    });
    const to = customerNumber();
    twilio.setCallee(to, { kind: 'person', ringMs: 1_500, amdMs: 60_000 });
    const call = await placeCall(numberId, { number: to, name: 'Flo' }, { variables: { topic: 't' } });
    const placed = await standInCallTo(to);
    await eventually('ringing at Switchboard', async () => (await s.api('GET', `/calls/${call.id}`)).json.call.status === 'ringing');
    // Twilio's verdict, signed as Twilio signs it, before the callee has picked up
    const url = `${s.baseUrl}/telephony/twilio/amd?call_id=${call.id}`;
    const params = { AccountSid: placed.accountSid, CallSid: placed.sid, AnsweredBy: 'machine_end_beep', MachineDetectionDuration: '900' };
    const res = await s.app.inject({
      method: 'POST',
      url: `/telephony/twilio/amd?call_id=${call.id}`,
      headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-twilio-signature': twilioSignature(AUTH_TOKEN, url, params) },
      payload: new URLSearchParams(params).toString(),
    });
    expect(res.statusCode).toBe(204);
    const report = await reportOf(call.id, 40_000);
    expect(report).toMatchObject({ ended_reason: 'voicemail', answered_by: 'machine' });
    expect(report.transcript).toContain('Early machine message.');
    // the greeting for a person was never said
    expect(report.transcript).not.toContain('this is Acme calling');
    expect(placed.leg!.heardText()).toContain('Early machine message');
  });
});

describe('callbacks that do not fit', () => {
  it("a CallSid that is not the call's is a 400; an inbound call's id is a 404; nothing changes", async () => {
    const { numberId, number } = await s.setUpNumber({ assistant: sandboxAssistant(OUTBOUND) });
    const to = customerNumber();
    twilio.setCallee(to, { kind: 'no-answer', ringMs: 20_000 });
    const call = await placeCall(numberId, { number: to });
    const placed = await standInCallTo(to);
    await eventually('its CallSid saved', async () => {
      const r = await s.runtime.callStore.get(call.id);
      return r?.transport_ids.call_sid === placed.sid;
    });
    const post = (callId: string, params: Record<string, string>) => {
      const url = `${s.baseUrl}/telephony/twilio/status?call_id=${callId}`;
      return s.app.inject({
        method: 'POST',
        url: `/telephony/twilio/status?call_id=${callId}`,
        headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-twilio-signature': twilioSignature(AUTH_TOKEN, url, params) },
        payload: new URLSearchParams(params).toString(),
      });
    };
    const other = `CA${'f'.repeat(32)}`;
    const mismatched = await post(call.id, { AccountSid: placed.accountSid, CallSid: other, CallStatus: 'busy' });
    expect(mismatched.statusCode).toBe(400);
    // an inbound call's id on an outbound callback
    const caller = s.caller(number);
    const inbound = await caller.dial();
    expect(inbound.kind).toBe('connected');
    const inboundId = (inbound as { callId: string }).callId;
    await eventually('the inbound call live', async () => (await s.api('GET', `/calls/${inboundId}`)).json.call.status === 'in-progress');
    const wrongKind = await post(inboundId, { AccountSid: placed.accountSid, CallSid: caller.callSid, CallStatus: 'completed' });
    expect(wrongKind.statusCode).toBe(404);
    expect((await s.api('GET', `/calls/${inboundId}`)).json.call.status).toBe('in-progress');
    expect((await s.api('GET', `/calls/${call.id}`)).json.call.status).toBe('ringing');
    await caller.hangUp();
    await s.api('POST', `/calls/${call.id}/end`);
  });
});
