/**
 * One bad call never harms another: a realtime vendor that cannot be reached ends its own call
 * (never the process); a replayed voice webhook makes no second call; a media stream that goes
 * dead, or never echoes marks, does not hold its call. (A realtime model that goes silent after
 * being asked for a response: test/fast-calls/failures.test.ts, exact to the millisecond.)
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { twilioSignature } from '../../src/telephony/twilio/signature.js';
import {
  ACCOUNT_SID,
  AUTH_TOKEN,
  callIdOf,
  eventually,
  frontDesk,
  receivedMessages,
  sandboxAssistant,
  silenceReminders,
  startCallingServer,
  type CallingServer,
} from '../helpers/calls.js';
import { SimulatedCall } from '../../src/sim/caller.js';
import { REFUSED_PORT } from '../helpers/faults.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let s: CallingServer;
let unreachable: string;

beforeAll(async () => {
  // nothing listens there: every connection to the "vendor" is refused
  unreachable = `http://127.0.0.1:${REFUSED_PORT}`;
  // pings every second: a far end that stops answering them is found in two; no media for 2 s,
  // or a mark 1 s overdue, is found as soon (the defaults, 5 s and 3 s, only make the wait longer)
  s = await startCallingServer(
    { OPENAI_API_BASE: unreachable, OPENAI_API_KEY: 'sk-test' },
    { mediaLiveness: { pingMs: 1_000, idleMs: 2_000, markGraceMs: 1_000, checkMs: 100 } },
  );
}, 120_000);
afterAll(async () => {
  await s?.close();
});

const messagesOf = (callId: string, type: string) =>
  receivedMessages(s.receiver, type).filter((m) => m.call?.id === callId);

async function endedCall(callId: string, timeoutMs = 15_000) {
  const report = await eventually('the end-of-call-report', () => messagesOf(callId, 'end-of-call-report')[0], timeoutMs);
  const ended = messagesOf(callId, 'status-update').find((m) => m.status === 'ended');
  expect(ended?.ended_reason).toBe(report.ended_reason);
  return report;
}

/** A healthy sandbox call through the front desk, kept live while `during` runs. */
async function healthyCallAround(during: () => Promise<void>) {
  const { number } = await s.setUpNumber({ definition: frontDesk });
  const call = s.caller(number);
  callIdOf(await call.dial());
  await call.hear('Acme Dental');
  await during();
  await call.say('I would like to book an appointment.');
  await call.hear('book your appointment');
  await call.hangUp();
}

describe('a realtime vendor that cannot be reached', () => {
  it('ends its own call pipeline-error-openai-realtime with its report; the server and a call beside it go on', async () => {
    await healthyCallAround(async () => {
      const { number } = await s.setUpNumber({ assistant: { name: 'Realtime', llm_config: { provider: 'openai-realtime' } } });
      const bad = s.caller(number);
      const callId = callIdOf(await bad.dial());
      const report = await endedCall(callId);
      expect(report.ended_reason).toBe('pipeline-error-openai-realtime');
      expect(report.errors.map((e: { message: string }) => e.message).join(' ')).toMatch(/openai-realtime/);
    });
    expect((await request(`${s.baseUrl}/healthz`)).statusCode).toBe(200);
  });

  // (without an API key, refused before pickup and the server still takes calls: vendor-faults.test.ts, every vendor)

});

describe('a replayed voice webhook', () => {
  /** The same signed request, posted as Twilio (or someone who caught it) would. */
  async function post(params: Record<string, string>) {
    const url = `${s.baseUrl}/telephony/twilio/voice`;
    const res = await request(url, {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        'x-twilio-signature': twilioSignature(AUTH_TOKEN, url, params),
      },
      body: new URLSearchParams(params).toString(),
    });
    return { status: res.statusCode, text: await res.body.text() };
  }

  it('makes one call per AccountSid + CallSid: replays create nothing and send nothing', async () => {
    const { number } = await s.setUpNumber({ definition: frontDesk });
    // a fresh CallSid each run: with REDIS_URL the claim of an earlier run is still there
    const callSid = () => `CA${randomBytes(16).toString('hex')}`;
    const params = { AccountSid: ACCOUNT_SID, CallSid: callSid(), CallStatus: 'ringing', Direction: 'inbound', From: '+15005550006', To: number };
    const callsBefore = (await s.api('GET', '/calls?limit=100')).json.calls.length;
    const first = await post(params);
    expect(first.text).toContain('<Stream');
    const callId = /name="call_id" value="([^"]+)"/.exec(first.text)![1]!;
    const replies = await Promise.all(Array.from({ length: 20 }, () => post(params)));
    for (const r of replies) {
      expect(r.status).toBe(200);
      expect(r.text).toContain('<Reject');
      expect(r.text).not.toContain('<Stream');
    }
    await sleep(500);
    expect((await s.api('GET', '/calls?limit=100')).json.calls.length).toBe(callsBefore + 1);
    const updates = receivedMessages(s.receiver, 'status-update').filter((m) => m.phone_number?.number === number);
    expect(updates.map((m) => [m.call.id, m.status])).toEqual([[callId, 'ringing']]);
    expect(receivedMessages(s.receiver, 'end-of-call-report').filter((m) => m.phone_number?.number === number)).toEqual([]);
    // another CallSid is another call
    const other = await post({ ...params, CallSid: callSid() });
    expect(other.text).toContain('<Stream');
  });

  it('a call refused before pickup keeps no workflow snapshot', async () => {
    const definition = {
      ...frontDesk,
      nodes: frontDesk.nodes.map((n) => (n.id === 'booking' ? { ...n, llm_config: { provider: 'sandbox' } } : n)),
    };
    // a realtime assistant may not run node overrides: refused at call start
    const { number } = await s.setUpNumber({ assistant: { name: 'Realtime', llm_config: { provider: 'sandbox-realtime' } }, definition });
    const call = s.caller(number);
    expect((await call.dial()).kind).toBe('rejected');
    const record = await eventually('the refused call', async () => (await s.api('GET', '/calls?limit=1')).json.calls[0]);
    expect(record.ended_reason).toBe('rejected-at-start');
    const session = await s.runtime.callStore.get(record.id);
    expect(session?.definition).toBeNull();
  });
});

// The transport finds a dead stream the same way under both kinds of call; what a call does when
// told (customer-ended-call, the note, the hang-up) is in test/fast-calls/failures.test.ts on both.
describe('a media stream that goes dead (pipeline call)', () => {
  const assistant = sandboxAssistant;
  it('no media for a few seconds: ended customer-ended-call with a note, and hung up', async () => {
    const { number } = await s.setUpNumber({ assistant: assistant(), definition: frontDesk });
    const call = s.caller(number);
    const callId = callIdOf(await call.dial());
    await call.hear('Acme Dental');
    const hangUpsBefore = s.twilio.requests.filter((r) => r.path.includes(call.callSid)).length;
    call.goSilent();
    const report = await endedCall(callId, 12_000);
    expect(report.ended_reason).toBe('customer-ended-call');
    expect(report.errors.map((e: { message: string }) => e.message).join(' ')).toMatch(/no media from the far end/);
    // the carrier's leg may still be up: it is hung up
    const hangUps = s.twilio.requests.filter((r) => r.path.includes(call.callSid) && r.form.get('Status') === 'completed');
    expect(hangUps.length).toBeGreaterThan(hangUpsBefore);
  });

  it('pings unanswered: ended customer-ended-call with a note', async () => {
    const { number } = await s.setUpNumber({ assistant: assistant(), definition: frontDesk });
    const call = new SimulatedCall({ baseUrl: s.baseUrl, to: number, authToken: AUTH_TOKEN, accountSid: ACCOUNT_SID, faults: { noPong: true } });
    try {
      const callId = callIdOf(await call.dial());
      const report = await endedCall(callId, 10_000);
      expect(report.ended_reason).toBe('customer-ended-call');
      expect(report.errors.map((e: { message: string }) => e.message).join(' ')).toMatch(/stopped answering WebSocket pings/);
    } finally {
      await call.close();
    }
  });

  it('marks never echoed: silence checks still come', async () => {
    const { number } = await s.setUpNumber({
      assistant: assistant({ speech_config: { silence: silenceReminders(1) } }),
      definition: frontDesk,
    });
    const call = new SimulatedCall({ baseUrl: s.baseUrl, to: number, authToken: AUTH_TOKEN, accountSid: ACCOUNT_SID, faults: { noMarkEcho: true } });
    try {
      callIdOf(await call.dial());
      await call.hear('Acme Dental');
      await call.hear('Are you still there', 15_000);
      expect(call.marksEchoed).toEqual([]);
    } finally {
      await call.close();
    }
  });
});

describe('the sandbox pipeline beside them', () => {
  it('still answers', async () => {
    const { number } = await s.setUpNumber({ assistant: sandboxAssistant(), definition: frontDesk });
    const call = s.caller(number);
    callIdOf(await call.dial());
    await call.hear('Acme Dental');
    await call.hangUp();
  });
});
