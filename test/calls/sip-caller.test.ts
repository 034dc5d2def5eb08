/**
 * The simulated SIP phone (src/sim/sip-caller.ts) against a real server with SIP on: a hand-built
 * INVITE over UDP, the 100/180/200 and the ACK, the conversation over RTP heard through the
 * sandbox STT, and a BYE either way; what `bench:calls --sip` runs by the hundred.
 */
import dgram from 'node:dgram';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SipCaller, SipSignalling } from '../../src/sim/sip-caller.js';
import { eventually, frontDesk, frontDeskWorkflow, longGreeting, receivedMessages, startCallingServer, type CallingServer } from '../helpers/calls.js';

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

  it('moves its media mid-call (a re-INVITE to a new port while the old stream sends 100 ms more): the reply is heard on the new port', async () => {
    const { number } = await s.setUpNumber({ provider: 'sip', definition: frontDesk });
    const phone = new SipCaller({ port: sipPort, to: number, from: '+15005550114', signalling });
    try {
      expect((await phone.dial()).kind).toBe('connected');
      await phone.hear('Hello, this is Acme Dental.');
      await phone.quiet();
      await phone.moveMedia(100);
      await phone.say('I would like to book an appointment.');
      // the old socket is closed: the server's reply reaches the phone only at its new port
      await phone.hear('book your appointment', 15_000);
      await phone.hangUp();
      const callId = await eventually('the call record', () => callFrom('+15005550114'));
      expect((await reportOf(callId)).ended_reason).toBe('customer-ended-call');
      // the old stream's last packets were dropped, not played or latched on (counted as the dialog goes)
      await eventually('the old stream counted', async () => /switchboard_rtp_wrong_source_total [1-9]/.test(await (await fetch(`${s.baseUrl}/metrics`)).text()));
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

  it('keeps its frames on time while garbage and a flood of INVITEs hit the SIP port', async () => {
    const { number } = await s.setUpNumber({ provider: 'sip', definition: longGreeting });
    const phone = new SipCaller({ port: sipPort, to: number, from: '+15005550113', signalling });
    const flood = dgram.createSocket('udp4');
    await new Promise<void>((r) => flood.bind(0, '127.0.0.4', () => r()));
    try {
      expect((await phone.dial()).kind).toBe('connected');
      await phone.hear('Let me tell you');
      // while the long greeting plays: 2,000 datagrams, half garbage, half INVITEs to nobody
      const started = phone.frameTimes.length;
      for (let i = 0; i < 2000; i++) {
        const invite = `INVITE sip:+1555000${i % 1000}@127.0.0.1 SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.4:9;branch=z9hG4bKf${i}\r\nFrom: <sip:x@y>;tag=${i}\r\nTo: <sip:z@y>\r\nCall-ID: f${i}\r\nCSeq: 1 INVITE\r\nContent-Length: 0\r\n\r\n`;
        flood.send(i % 2 ? Buffer.from(invite) : Buffer.alloc(200 + (i % 700), i & 0xff), sipPort, '127.0.0.1');
        if (i % 100 === 99) await new Promise((r) => setTimeout(r, 5));
      }
      await phone.hear('Parking is free');
      const times = phone.frameTimes.slice(started);
      expect(times.length).toBeGreaterThan(50);
      const gaps = times.slice(1).map((t, i) => t - times[i]!);
      // a frame every 20 ms (the pacer's lead sends some early): never a hole a caller would hear
      expect(Math.max(...gaps)).toBeLessThan(100);
      await phone.hangUp();
      expect((await fetch(`${s.baseUrl}/readyz`)).status).toBe(200);
    } finally {
      flood.close();
      await phone.close();
    }
  }, 60_000);
});
