/**
 * Outbound calls through the organization's SIP trunk (DECISIONS 11 and 15): `POST /calls` from a
 * `sip` number sends an INVITE to `sip.outbound.proxy`, here a real SIP phone (baresip) standing
 * in for the carrier and the callee at once. Answered, busy, canceled through the API.
 */
import { createHash } from 'node:crypto';
import dgram from 'node:dgram';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { header, parseMessage, responseTo, serialize, type SipRequest } from '../../src/telephony/sip/message.js';
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

  it('a trunk that asks for credentials gets them: a 407, then the INVITE again with a digest it checks', async () => {
    // a carrier's proxy on UDP: it challenges, then checks the answer by RFC 2617 (computed here,
    // not by our own digest code), and says busy to a good one, forbidden to a bad one
    const md5 = (x: string) => createHash('md5').update(x).digest('hex');
    const proxy = dgram.createSocket('udp4');
    await new Promise<void>((r) => proxy.bind(0, '127.0.0.1', () => r()));
    const invites: SipRequest[] = [];
    const acks: SipRequest[] = [];
    proxy.on('message', (data, rinfo) => {
      const parsed = parseMessage(data);
      if (!parsed.ok || parsed.message.kind !== 'request') return;
      const req = parsed.message;
      if (req.method === 'ACK') return void acks.push(req);
      if (req.method !== 'INVITE') return;
      invites.push(req);
      const auth = header(req, 'proxy-authorization');
      let answer;
      if (!auth) {
        answer = responseTo(req, 407, 'Proxy Authentication Required', 'px1', [
          ['proxy-authenticate', 'Digest realm="carrier.example", nonce="abc123", qop="auth", algorithm=MD5'],
        ]);
      } else {
        const p = Object.fromEntries([...auth.matchAll(/(\w+)="?([^",]*)"?/g)].map((m) => [m[1], m[2]]));
        const ha1 = md5('acme:carrier.example:trunk-secret');
        const ha2 = md5(`INVITE:${p.uri}`);
        const ok = p.username === 'acme' && p.response === md5(`${ha1}:abc123:${p.nc}:${p.cnonce}:auth:${ha2}`);
        answer = ok ? responseTo(req, 486, 'Busy Here', 'px2') : responseTo(req, 403, 'Forbidden', 'px2');
      }
      proxy.send(serialize(answer), rinfo.port, rinfo.address);
    });
    try {
      const port = (proxy.address() as { port: number }).port;
      await s.api('PATCH', '/account', { sip: { outbound: { proxy: `sip:127.0.0.1:${port}`, username: 'acme', password: 'trunk-secret' } } });
      const callId = await place();
      expect((await reportOf(callId)).ended_reason).toBe('customer-busy');
      expect(invites).toHaveLength(2);
      expect(header(invites[0]!, 'proxy-authorization')).toBeUndefined();
      expect(header(invites[1]!, 'proxy-authorization')).toMatch(/^Digest username="acme", realm="carrier.example"/);
      expect(header(invites[1]!, 'cseq')).toBe('2 INVITE');
      expect(header(invites[1]!, 'from')).toMatch(/^<sip:\+14155550100@|^<sip:\+1555/);
      // each failure was ACKed, on its own transaction
      await eventually('the ACKs', () => acks.length >= 2);
    } finally {
      proxy.close();
    }
  }, 30_000);
});
