/**
 * Two RTP sessions relayed to each other, as a warm transfer's join relays the caller's leg and
 * the operator's (src/telephony/sip/bridge.ts), against real UDP peers on 127.0.0.1: payloads go
 * on byte for byte between two legs of one codec, mapped by table between PCMU and PCMA, at once
 * (in order: no frame held), each leg with its own sequence; and an offer can put the caller's
 * codec first.
 */
import dgram from 'node:dgram';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { ALAW_TO_MULAW, MULAW_TO_ALAW, parseRtp, RtpPorts, RtpSession, type RtpPacket } from '../../src/telephony/sip/rtp.js';
import { negotiate, offer, type G711 } from '../../src/telephony/sip/sdp.js';

const open: { close(): void }[] = [];
afterEach(() => {
  for (const o of open.splice(0)) o.close();
});
const ports = new RtpPorts(32_200, 32_300);

async function leg(codec: G711) {
  const peer = dgram.createSocket('udp4');
  await new Promise<void>((r) => peer.bind(0, '127.0.0.1', () => r()));
  open.push(peer);
  const media = await ports.allocate('127.0.0.1');
  const rtp = new RtpSession({
    ...media,
    codec,
    payload: codec === 'PCMU' ? 0 : 8,
    dtmfPayload: 101,
    remote: { address: '127.0.0.1', port: (peer.address() as { port: number }).port },
    signallingAddress: '127.0.0.1',
    logger: pino({ level: 'silent' }),
    onAudio: () => undefined,
    onDtmf: () => undefined,
  });
  open.push(rtp, { close: () => ports.release(media.port) });
  const received: Array<RtpPacket & { at: number }> = [];
  peer.on('message', (b) => {
    const p = parseRtp(b);
    if (p) received.push({ ...p, payload: Buffer.from(p.payload), at: performance.now() });
  });
  const sent: number[] = [];
  let seq = 100;
  const send = async (payload: Buffer) => {
    const b = Buffer.alloc(12 + payload.length);
    b[0] = 0x80;
    b[1] = codec === 'PCMU' ? 0 : 8;
    b.writeUInt16BE(seq, 2);
    b.writeUInt32BE(seq * 160, 4);
    b.writeUInt32BE(0x4242, 8);
    seq++;
    payload.copy(b, 12);
    sent.push(performance.now());
    await new Promise<void>((r) => peer.send(b, media.port, '127.0.0.1', () => r()));
  };
  return { rtp, received, send, sent };
}

function relay(a: RtpSession, b: RtpSession): void {
  a.relay = (payload, codec) => b.sendPayload(payload, codec);
  b.relay = (payload, codec) => a.sendPayload(payload, codec);
}

/** Until `done()` holds (packets over loopback under load), at most 2 s. */
async function settle(done: () => boolean = () => false): Promise<void> {
  for (let t = 0; t < 2_000 && !done(); t += 10) await new Promise((r) => setTimeout(r, 10));
  await new Promise((r) => setTimeout(r, 30));
}
const payloads = (n: number) => Array.from({ length: n }, (_, i) => Buffer.from(Array.from({ length: 160 }, (_, k) => (i * 37 + k * 11) & 0xff)));

describe('RTP relayed between two legs', () => {
  it.each(['PCMU', 'PCMA'] as const)('two %s legs: every payload goes on byte for byte, both ways, each leg with its own SSRC and sequence', async (codec) => {
    const caller = await leg(codec);
    const operator = await leg(codec);
    relay(caller.rtp, operator.rtp);
    const said = payloads(20);
    for (const p of said) await caller.send(p);
    const answered = payloads(5).reverse();
    for (const p of answered) await operator.send(p);
    await settle(() => operator.received.length >= 20 && caller.received.length >= 5);
    expect(operator.received.map((p) => p.payload)).toEqual(said);
    expect(caller.received.map((p) => p.payload)).toEqual(answered);
    expect(operator.received.every((p) => p.payloadType === (codec === 'PCMU' ? 0 : 8))).toBe(true);
    const seqs = operator.received.map((p) => p.seq);
    expect(seqs.slice(1).map((s, i) => (s - seqs[i]!) & 0xffff)).toEqual(Array(19).fill(1));
    expect(new Set(operator.received.map((p) => p.ssrc)).size).toBe(1);
    expect(operator.received[0]!.ssrc).not.toBe(0x4242);
  });

  it('a PCMU leg and a PCMA leg: mapped by table each way', async () => {
    const caller = await leg('PCMU');
    const operator = await leg('PCMA');
    relay(caller.rtp, operator.rtp);
    const said = payloads(3);
    for (const p of said) await caller.send(p);
    for (const p of said) await operator.send(p);
    await settle(() => operator.received.length >= 3 && caller.received.length >= 3);
    expect(operator.received.map((p) => p.payload)).toEqual(said.map((p) => Buffer.from(p.map((b) => MULAW_TO_ALAW[b]!))));
    expect(caller.received.map((p) => p.payload)).toEqual(said.map((p) => Buffer.from(p.map((b) => ALAW_TO_MULAW[b]!))));
  });

  it('in order, nothing is held: a packet goes on as it arrives, well within a frame', async () => {
    const caller = await leg('PCMU');
    const operator = await leg('PCMU');
    relay(caller.rtp, operator.rtp);
    for (const p of payloads(50)) {
      await caller.send(p);
      await new Promise((r) => setTimeout(r, 2));
    }
    await settle(() => operator.received.length >= 50);
    expect(operator.received).toHaveLength(50);
    // a frame held for the next would show as 20 ms or more (loopback under a loaded machine: the median)
    const delays = operator.received.map((p, i) => p.at - caller.sent[i]!);
    const sorted = [...delays].sort((a, b) => a - b);
    expect(sorted[Math.floor(sorted.length / 2)]).toBeLessThan(20);
  });

  it('relay off: audio goes to the call again', async () => {
    const caller = await leg('PCMU');
    const operator = await leg('PCMU');
    relay(caller.rtp, operator.rtp);
    caller.rtp.relay = null;
    await caller.send(payloads(1)[0]!);
    await settle();
    expect(operator.received).toHaveLength(0);
  });

  it('an operator\'s offer can put the caller\'s codec first', () => {
    const local = { address: '127.0.0.1', port: 40_000, sessionId: 1 };
    expect(offer(local)).toMatch(/m=audio 40000 RTP\/AVP 0 8 101/);
    expect(offer(local, 'PCMA')).toMatch(/m=audio 40000 RTP\/AVP 8 0 101/);
    expect(negotiate(offer(local, 'PCMA'))).toMatchObject({ codec: 'PCMA', payload: 8, dtmfPayload: 101 });
  });
});
