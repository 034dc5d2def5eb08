/**
 * The simulated SIP phone (src/sim/sip-caller.ts) against a real server with SIP on: a hand-built
 * INVITE over UDP, the 100/180/200 and the ACK, the conversation over RTP heard through the
 * sandbox STT, and a BYE either way; what `bench:calls --sip` runs by the hundred.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SipCaller, SipSignalling } from '../../src/sim/sip-caller.js';
import { eventually, frontDesk, frontDeskWorkflow, receivedMessages, startCallingServer, type CallingServer } from '../helpers/calls.js';

let s: CallingServer;
let sipPort: number;
let signalling: SipSignalling;

beforeAll(async () => {
  s = await startCallingServer({ RTP_PORT_MIN: '32000', RTP_PORT_MAX: '32400' }, { sip: { port: 0 } });
  sipPort = s.runtime.sip!.port;
  const account = await s.api('PATCH', '/account', { sip: { inbound: { allowed_addresses: ['127.0.0.1'] } } });
  expect(account.status).toBe(200);
  signalling = await SipSignalling.open();
});
afterAll(async () => {
  signalling?.close();
  await s?.close();
});

/** The call a phone placed, by its caller number (the API does not show the SIP Call-ID). */
const callFrom = async (from: string) => {
  const calls = (await s.api('GET', '/calls')).json.calls as { id: string; transport: string; customer?: { number: string } }[];
  return calls.find((c) => c.transport === 'sip' && c.customer?.number === from)?.id;
};
const reportOf = (callId: string) =>
  eventually(`the report of ${callId}`, () => receivedMessages(s.receiver, 'end-of-call-report').find((m) => m.call.id === callId), 15_000);

describe('the simulated SIP phone', () => {
  it('calls over UDP, hears the greeting and the reply over RTP, is understood, and hangs up with a BYE', async () => {
    const { number } = await s.setUpNumber({ provider: 'sip', definition: frontDesk });
    const phone = new SipCaller({ port: sipPort, to: number, from: '+15005550111', signalling });
    try {
      const outcome = await phone.dial();
      expect(outcome).toEqual({ kind: 'connected', sipCallId: phone.sipCallId });
      expect(phone.provisional).toEqual([100, 180]);
      expect(phone.final?.status).toBe(200);

      await phone.hear('Hello, this is Acme Dental.');
      await phone.quiet();
      await phone.say('I would like to book an appointment.');
      await phone.hear('book your appointment');
      await phone.quiet();
      await phone.hangUp();
      expect(phone.closed).toBe(true);
      expect(phone.byeAnswer?.status).toBe(200);

      const callId = await eventually('the call record', () => callFrom('+15005550111'));
      const report = await reportOf(callId);
      expect(report.ended_reason).toBe('customer-ended-call');
      expect(report.call.type).toBe('inbound_phone_call');
      const record = (await s.api('GET', `/calls/${callId}`)).json.call;
      expect(record.transport).toBe('sip');
      expect(record.customer.number).toBe('+15005550111');
      expect(record.messages.map((m: { role: string; content: string }) => [m.role, m.content])).toEqual([
        ['assistant', 'Hello, this is Acme Dental.'],
        ['user', 'I would like to book an appointment.'],
        ['assistant', 'Sure thing.'],
        ['assistant', 'Let us book your appointment.'],
      ]);
      // the phone's RTP: a packet every 20 ms from the answer to the hang-up; the server's while
      // the assistant speaks (it sends no silence); none lost on loopback
      const rtp = phone.rtpStats!;
      expect(rtp.sent).toBeGreaterThan(100);
      expect(rtp.received).toBeGreaterThan(50);
      expect(rtp.lost).toBe(0);
      expect(phone.frameTimes.length).toBe(rtp.received);
      // the server's dialog and RTP ports are released
      await eventually('the dialog released', () => s.runtime.sip!.dialogCount === 0);
    } finally {
      await phone.close();
    }
  }, 60_000);

  it('answers the BYE of an assistant that hangs up', async () => {
    const { number } = await s.setUpNumber({ provider: 'sip', definition: frontDeskWorkflow({ goodbyeFromGreeting: true }) });
    const phone = new SipCaller({ port: sipPort, to: number, from: '+15005550112', signalling });
    try {
      expect((await phone.dial()).kind).toBe('connected');
      await phone.hear('Acme Dental');
      await phone.quiet();
      await phone.say('That is all, I am finished, goodbye.');
      await phone.hear('goodbye');
      await phone.ended(15_000);
      expect(phone.byeReceived).toBe(true);
      expect(phone.byeAnswer).toBeNull();
      const callId = await eventually('the call record', () => callFrom('+15005550112'));
      expect((await reportOf(callId)).ended_reason).toBe('assistant-ended-call');
    } finally {
      await phone.close();
    }
  }, 60_000);

  it('is refused with 404 for a number that is not a SIP number', async () => {
    const { number } = await s.setUpNumber({ definition: frontDesk });
    const phone = new SipCaller({ port: sipPort, to: number, signalling });
    try {
      expect(await phone.dial()).toEqual({ kind: 'refused', status: 404, reason: 'Not Found' });
      expect(phone.provisional).toEqual([100]);
    } finally {
      await phone.close();
    }
  });
});
