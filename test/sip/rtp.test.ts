/**
 * One call's RTP session against a real UDP peer on 127.0.0.1: order restored by the jitter
 * buffer, loss and lateness counted, key presses counted once, A-law mapped, symmetric RTP,
 * packets from another address dropped, the port range shared and given back.
 */
import dgram from 'node:dgram';
import { afterEach, describe, expect, it } from 'vitest';
import pino from 'pino';
import { RtpPorts, RtpSession, MULAW_TO_ALAW, parseRtp } from '../../src/telephony/sip/rtp.js';
import type { G711 } from '../../src/telephony/sip/sdp.js';

const open: { close(): void }[] = [];
afterEach(() => {
  for (const o of open.splice(0)) o.close();
});

async function socket(address = '127.0.0.1'): Promise<dgram.Socket> {
  const s = dgram.createSocket('udp4');
  await new Promise<void>((r) => s.bind(0, address, () => r()));
  open.push(s);
  return s;
}

function packet(seq: number, payloadType: number, payload: Buffer, timestamp = seq * 160): Buffer {
  const b = Buffer.alloc(12 + payload.length);
  b[0] = 0x80;
  b[1] = payloadType;
  b.writeUInt16BE(seq & 0xffff, 2);
  b.writeUInt32BE(timestamp >>> 0, 4);
  b.writeUInt32BE(0x1234, 8);
  payload.copy(b, 12);
  return b;
}

async function session(codec: G711 = 'PCMU', ports = new RtpPorts(32_000, 32_100)) {
  const peer = await socket();
  const media = await ports.allocate('127.0.0.1');
  const frames: Buffer[] = [];
  const digits: string[] = [];
  const rtp = new RtpSession({
    ...media,
    codec,
    payload: codec === 'PCMU' ? 0 : 8,
    dtmfPayload: 101,
    remote: { address: '127.0.0.1', port: (peer.address() as { port: number }).port },
    signallingAddress: '127.0.0.1',
    logger: pino({ level: 'silent' }),
    onAudio: (f) => frames.push(Buffer.from(f)),
    onDtmf: (d) => digits.push(d),
  });
  open.push(rtp);
  const send = (b: Buffer, from = peer) => new Promise<void>((r) => from.send(b, media.port, '127.0.0.1', () => r()));
  const settle = () => new Promise((r) => setTimeout(r, 50));
  return { peer, rtp, frames, digits, send, settle, port: media.port, ports };
}

const frame = (byte: number) => Buffer.alloc(160, byte);

describe('RTP session', () => {
  it('puts packets back in order, counts a gap that never fills as lost, drops late and duplicate ones', async () => {
    const { send, settle, frames, rtp } = await session();
    for (const seq of [100, 102, 101, 103]) await send(packet(seq, 0, frame(seq & 0xff)));
    await settle();
    expect(frames.map((f) => f[0])).toEqual([100, 101, 102, 103]);
    // 104 never comes: once three later packets wait, it is given up
    for (const seq of [105, 106, 107]) await send(packet(seq, 0, frame(seq & 0xff)));
    await send(packet(104, 0, frame(104))); // too late now
    await send(packet(107, 0, frame(107))); // twice
    await settle();
    expect(frames.map((f) => f[0])).toEqual([100, 101, 102, 103, 105, 106, 107]);
    expect(rtp.stats).toMatchObject({ lost: 1, late: 2 });
  });

  it('a new stream (another SSRC) starts the buffer again instead of counting its packets late', async () => {
    const { send, settle, frames, rtp } = await session();
    for (const seq of [5000, 5001, 5002]) await send(packet(seq, 0, frame(1)));
    const other = (seq: number) => {
      const b = packet(seq, 0, frame(2));
      b.writeUInt32BE(0x9999, 8);
      return b;
    };
    for (const seq of [10, 11, 12, 13]) await send(other(seq));
    await settle();
    expect(frames.map((f) => f[0])).toEqual([1, 1, 1, 2, 2, 2, 2]);
    expect(rtp.stats).toMatchObject({ lost: 0, late: 0 });
  });

  it('key presses take sequence numbers without counting as lost audio', async () => {
    const { send, settle, frames, rtp, digits } = await session();
    await send(packet(1, 0, frame(1)));
    for (let seq = 2; seq <= 9; seq++) await send(packet(seq, 101, Buffer.from([5, seq === 9 ? 0x80 : 0, 0, 160]), 999));
    await send(packet(10, 0, frame(10)));
    await settle();
    expect(frames.map((f) => f[0])).toEqual([1, 10]);
    expect(digits).toEqual(['5']);
    expect(rtp.stats.lost).toBe(0);
  });

  it('never sends to a port past the last (a peer at 65535 has no RTCP port): no throw', async () => {
    const { rtp } = await session();
    rtp.retarget({ address: '127.0.0.1', port: 65_535 });
    expect(() => rtp.send(frame(1))).not.toThrow();
    // as after the peer's first packet came from port 65535
    const inside = rtp as unknown as { senderReport(): void; latched: boolean; target: { address: string; port: number } };
    inside.latched = true;
    expect(inside.target.port).toBe(65_535);
    expect(() => inside.senderReport()).not.toThrow();
  });

  it('timestamps follow the clock: a burst goes 160 apart, the first frame after a pause jumps over it with the marker', async () => {
    const { rtp, peer } = await session();
    const got: Buffer[] = [];
    peer.on('message', (m) => got.push(m));
    for (let i = 0; i < 3; i++) rtp.send(frame(1));
    await new Promise((r) => setTimeout(r, 300));
    rtp.send(frame(2));
    rtp.send(frame(2));
    await new Promise((r) => setTimeout(r, 50));
    const packets = got.map((b) => parseRtp(b)!);
    expect(packets.map((p) => p.marker)).toEqual([true, false, false, true, false]);
    const steps = packets.slice(1).map((p, i) => (p.timestamp - packets[i]!.timestamp) >>> 0);
    expect(steps.slice(0, 2)).toEqual([160, 160]);
    // 300 ms after the first frame is 2,400 samples; the burst's frames were ahead of the clock
    expect(steps[2]).toBeGreaterThanOrEqual(2400 - 2 * 160 - 160);
    expect(steps[2]).toBeLessThanOrEqual(2400 + 4 * 160);
    expect(steps[2]! % 160).toBe(0);
    expect(steps[3]).toBe(160);
  });

  it('goes on across the sequence number wrap', async () => {
    const { send, settle, frames, rtp } = await session();
    for (const seq of [65534, 65535, 0, 1]) await send(packet(seq, 0, frame(seq & 0xff)));
    await settle();
    expect(frames).toHaveLength(4);
    expect(rtp.stats.lost).toBe(0);
  });

  it('counts a key press once however many packets carry it, and a second press again', async () => {
    const { send, settle, digits } = await session();
    const event = (digit: number, end: boolean, duration: number) => Buffer.from([digit, end ? 0x80 : 0, duration >> 8, duration & 0xff]);
    let seq = 10;
    for (const [d, ts] of [[1, 8000], [11, 16000]] as const) {
      for (let i = 1; i <= 5; i++) await send(packet(seq++, 101, event(d, false, i * 160), ts));
      for (let i = 0; i < 3; i++) await send(packet(seq++, 101, event(d, true, 960), ts));
    }
    await settle();
    expect(digits).toEqual(['1', '#']);
  });

  it('hears PCMA as μ-law and speaks μ-law as PCMA; answers to where the peer sends from', async () => {
    const { send, settle, frames, rtp, peer } = await session('PCMA');
    const alaw = Buffer.alloc(160, MULAW_TO_ALAW[0x80]!);
    await send(packet(1, 8, alaw));
    await settle();
    expect(frames[0]![0]).toBe(0x80);
    const got = new Promise<Buffer>((resolve) => peer.once('message', (m) => resolve(m)));
    rtp.send(frame(0x80));
    const p = parseRtp(await got)!;
    expect(p.payloadType).toBe(8);
    expect(p.marker).toBe(true);
    expect(p.payload[0]).toBe(MULAW_TO_ALAW[0x80]);
  });

  it('drops packets from another address, and counts them', async () => {
    const { send, settle, frames, rtp } = await session();
    const stranger = await socket('127.0.0.2');
    await send(packet(1, 0, frame(1)), stranger);
    await settle();
    expect(frames).toHaveLength(0);
    expect(rtp.stats.wrongSource).toBe(1);
    await send(packet(2, 0, frame(2)));
    await settle();
    expect(frames).toHaveLength(1);
  });

  it('a re-INVITE that moves the peer: our audio goes to the new port only, though the old stream goes on 100 ms more', async () => {
    const { send, settle, frames, rtp, peer: old } = await session();
    const oldGot: Buffer[] = [];
    old.on('message', (m) => oldGot.push(m));
    for (const seq of [1, 2, 3]) await send(packet(seq, 0, frame(1)), old);
    await settle();
    rtp.send(frame(0x10)); // latched: to the old port
    await settle();
    expect(oldGot).toHaveLength(1);

    const moved = await socket();
    const newGot: Buffer[] = [];
    moved.on('message', (m) => newGot.push(m));
    rtp.retarget({ address: '127.0.0.1', port: (moved.address() as { port: number }).port });
    // 100 ms of both streams, as a phone's old media stops late: ours goes out every 20 ms
    const other = (seq: number) => {
      const b = packet(seq, 0, frame(2));
      b.writeUInt32BE(0x9999, 8);
      return b;
    };
    for (let i = 0; i < 5; i++) {
      await send(packet(4 + i, 0, frame(1)), old);
      await send(other(500 + i), moved);
      rtp.send(frame(0x20));
      await new Promise((r) => setTimeout(r, 20));
    }
    for (let i = 5; i < 10; i++) {
      await send(other(500 + i), moved);
      rtp.send(frame(0x20));
    }
    await settle();
    expect(oldGot).toHaveLength(1);
    expect(newGot.filter((b) => parseRtp(b)?.payload[0] === 0x20)).toHaveLength(10);
    // what played after the move is the new stream's only; the old one's packets were dropped
    expect(frames.slice(3).map((f) => f[0])).toEqual(Array(10).fill(2));
    expect(rtp.stats.wrongSource).toBe(5);
  });

  it('a re-INVITE back to the address it sends from (a hold taken back) is no move: that stream is heard and latched', async () => {
    const { send, settle, frames, rtp, peer } = await session();
    const got: Buffer[] = [];
    peer.on('message', (m) => got.push(m));
    await send(packet(1, 0, frame(1)));
    await settle();
    rtp.retarget({ address: '0.0.0.0', port: 9 });
    await send(packet(2, 0, frame(1)));
    rtp.retarget({ address: '127.0.0.1', port: (peer.address() as { port: number }).port });
    await send(packet(3, 0, frame(1)));
    await settle();
    rtp.send(frame(0x30));
    await settle();
    expect(frames).toHaveLength(3);
    expect(got).toHaveLength(1);
    expect(rtp.stats.wrongSource).toBe(0);
  });

  it('the old stream alone for over a second after a move is the peer\'s stream after all: heard again', async () => {
    const { send, settle, frames, rtp, peer: old } = await session();
    await send(packet(1, 0, frame(1)), old);
    await settle();
    const moved = await socket();
    rtp.retarget({ address: '127.0.0.1', port: (moved.address() as { port: number }).port });
    await send(packet(2, 0, frame(1)), old);
    await settle();
    expect(frames).toHaveLength(1);
    await new Promise((r) => setTimeout(r, 1_050));
    for (const seq of [3, 4, 5]) await send(packet(seq, 0, frame(1)), old);
    await settle();
    expect(frames).toHaveLength(4);
  });

  it('never throws on garbage; what is not RTP is ignored', async () => {
    const { send, settle, frames } = await session();
    for (const b of [Buffer.alloc(0), Buffer.alloc(5), Buffer.from([0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]), Buffer.alloc(1500, 0xbf)]) await send(b);
    await settle();
    expect(frames).toHaveLength(0);
  });

  it('the port range: even RTP ports, RTCP next to them, given back; full is an error', async () => {
    const ports = new RtpPorts(32_200, 32_204);
    const a = await ports.allocate('127.0.0.1');
    const b = await ports.allocate('127.0.0.1');
    expect([a.port % 2, b.port % 2]).toEqual([0, 0]);
    expect(a.port).not.toBe(b.port);
    await expect(ports.allocate('127.0.0.1')).rejects.toThrow(/no free RTP port pair in 32200–32204/);
    for (const m of [a]) {
      m.rtp.close();
      m.rtcp.close();
      ports.release(m.port);
    }
    const c = await ports.allocate('127.0.0.1');
    expect(c.port).toBe(a.port);
    for (const m of [b, c]) {
      m.rtp.close();
      m.rtcp.close();
    }
  });
});
