/**
 * Outbound calls through the organization's SIP trunk (DECISIONS 11 and 15): `POST /calls` from a
 * `sip` number sends an INVITE to `sip.outbound.proxy`, here a real SIP phone (baresip) standing
 * in for the carrier and the callee at once. Answered, busy, canceled through the API.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Baresip, baresipAvailable, stopAllBaresip } from '../helpers/baresip.js';
import { eventually, frontDesk, receivedMessages, startCallingServer, type CallingServer } from '../helpers/calls.js';

const available = baresipAvailable();
const CALLEE = '+15557654321';

let s: CallingServer;
let numberId: string;

beforeAll(async () => {
  if (!available) return;
  s = await startCallingServer({}, { sip: { port: 0 } });
  ({ numberId } = await s.setUpNumber({ provider: 'sip', definition: frontDesk }));
});
afterEach(async () => {
  await stopAllBaresip();
});
afterAll(async () => {
  await s?.close();
});

const callRecord = async (id: string) => (await s.api('GET', `/calls/${id}`)).json.call;
const reportOf = (callId: string) =>
  eventually(`the report of ${callId}`, () => receivedMessages(s.receiver, 'end-of-call-report').find((m) => m.call.id === callId));
const statusesOf = (callId: string) =>
  receivedMessages(s.receiver, 'status-update')
    .filter((m) => m.call.id === callId)
    .map((m) => m.status);

async function trunkTo(phone: Baresip) {
  const res = await s.api('PATCH', '/account', { sip: { outbound: { proxy: `sip:127.0.0.1:${phone.sipPort}`, caller_id: '+15550100200' } } });
  expect(res.status).toBe(200);
}

async function place(): Promise<string> {
  const res = await s.api('POST', '/calls', { number_id: numberId, customer: { number: CALLEE } });
  expect(res.status, JSON.stringify(res.json)).toBe(201);
  expect(res.json.call.transport).toBe('sip');
  return res.json.call.id as string;
}

describe.skipIf(!available)('outbound SIP calls', () => {
  it('answered: the assistant speaks first, the callee hangs up, the statuses and the report', async () => {
    const phone = await Baresip.start({ name: 'callee', user: CALLEE, autoAnswer: true });
    await trunkTo(phone);
    const callId = await place();
    const incoming = await phone.waitFor('CALL_ESTABLISHED', 15_000);
    expect(incoming.direction).toBe('incoming');
    expect(incoming.peerUri).toMatch(/^sip:\+15550100200@/);
    await eventually('the greeting', async () => (await callRecord(callId)).messages.length >= 1);
    await new Promise((r) => setTimeout(r, 800));
    await phone.hangup();
    const report = await reportOf(callId);
    expect(report.ended_reason).toBe('customer-ended-call');
    expect(report.call.type).toBe('outbound_phone_call');
    const record = await callRecord(callId);
    expect(record.transport).toBe('sip');
    expect(record.messages[0]).toMatchObject({ role: 'assistant', content: 'Hello, this is Acme Dental.' });
    expect(statusesOf(callId)).toEqual(['queued', 'ringing', 'in-progress', 'ended']);
  }, 45_000);

  it('busy: the callee refuses (486), the call ends customer-busy', async () => {
    const phone = await Baresip.start({ name: 'busy', user: CALLEE });
    await trunkTo(phone);
    const callId = await place();
    await phone.waitFor('CALL_INCOMING', 15_000);
    await phone.hangup();
    const report = await reportOf(callId);
    expect(report.ended_reason).toBe('customer-busy');
    expect(statusesOf(callId)).toEqual(['queued', 'ringing', 'ended']);
  }, 45_000);

  it('ended through the API while it rings: a CANCEL, the call ends canceled', async () => {
    const phone = await Baresip.start({ name: 'ringing', user: CALLEE });
    await trunkTo(phone);
    const callId = await place();
    await phone.waitFor('CALL_INCOMING', 15_000);
    const end = await s.api('POST', `/calls/${callId}/end`);
    expect(end.status).toBe(202);
    await phone.waitFor('CALL_CLOSED', 10_000);
    expect(phone.events.some((e) => e.type === 'CALL_ESTABLISHED')).toBe(false);
    expect((await reportOf(callId)).ended_reason).toBe('canceled');
  }, 45_000);

  it('a sip number without a trunk for outbound calls is a 400 that says so', async () => {
    await s.api('PATCH', '/account', { sip: { outbound: null } });
    const res = await s.api('POST', '/calls', { number_id: numberId, customer: { number: CALLEE } });
    expect(res.status).toBe(400);
    expect(res.json.details.join(' ')).toMatch(/sip\.outbound/);
  });
});
