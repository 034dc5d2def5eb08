/**
 * The keys the model presses on a SIP call, as RFC 4733 telephone-events in the RTP stream, read
 * by a real UDP peer on 127.0.0.1: one event per key, every packet of it with the event's start
 * timestamp and the duration so far, the marker on its first packet, the end bit on its last,
 * sent three times; the audio after it keeps the clock's timestamps and the sequence has no
 * hole. Our own receiving side (another RtpSession) hears each key once. A peer that negotiated
 * no telephone-event gets the keys' tones as audio.
 */
import dgram from 'node:dgram';
import { afterEach, describe, expect, it } from 'vitest';
import pino from 'pino';
import { keypadAudio } from '../../src/calls/keypad.js';
import { FRAME_BYTES } from '../../src/calls/outbound.js';
import { parseRtp, RtpPorts, RtpSession, type RtpPacket } from '../../src/telephony/sip/rtp.js';
import { detectKeysMulaw } from '../helpers/dtmf.js';

const open: { close(): void }[] = [];
afterEach(() => {
  for (const o of open.splice(0)) o.close();
});

const ports = new RtpPorts(33_800, 33_900);

/** Our session, sending to a peer socket that keeps every packet. */
async function sender(dtmfPayload: number | null, peer?: { port: number }) {
  const received: RtpPacket[] = [];
  let socket: dgram.Socket | null = null;
  if (!peer) {
    socket = dgram.createSocket('udp4');
    await new Promise<void>((r) => socket!.bind(0, '127.0.0.1', () => r()));
    socket.on('message', (b) => {
      const p = parseRtp(b);
      if (p) received.push({ ...p, payload: Buffer.from(p.payload) });
    });
    open.push(socket);
  }
  const media = await ports.allocate('127.0.0.1');
  const rtp = new RtpSession({
    ...media,
    codec: 'PCMU',
    payload: 0,
    dtmfPayload,
    remote: { address: '127.0.0.1', port: peer?.port ?? (socket!.address() as { port: number }).port },
    signallingAddress: '127.0.0.1',
    logger: pino({ level: 'silent' }),
    onAudio: () => undefined,
    onDtmf: () => undefined,
  });
  open.push(rtp);
  return { rtp, received, port: media.port };
}

/** Sends keys as the SIP transport does: tagged frames as events, the others as audio. */
function sendKeys(rtp: RtpSession, keys: string): void {
  const { audio, frames } = keypadAudio(keys);
  for (const [i, key] of frames.entries()) {
    const frame = audio.subarray(i * FRAME_BYTES, (i + 1) * FRAME_BYTES);
    if (key) rtp.sendKey(key, frame);
    else rtp.send(frame);
  }
}

const settle = () => new Promise((r) => setTimeout(r, 60));

describe('keys as RFC 4733 telephone-events', () => {
  it('one event per key: start timestamp, growing duration, marker first, the end three times; audio and sequence carry on', async () => {
    const { rtp, received } = await sender(101);
    rtp.send(Buffer.alloc(FRAME_BYTES, 0xff)); // a frame of speech before
    sendKeys(rtp, '1#');
    rtp.send(Buffer.alloc(FRAME_BYTES, 0xff)); // and after
    await settle();
    expect(received).toHaveLength(1 + 20 + 1);
    const seqs = received.map((p) => p.seq);
    for (let i = 1; i < seqs.length; i++) expect(seqs[i]).toBe((seqs[i - 1]! + 1) & 0xffff);
    const t0 = received[0]!.timestamp;
    const frameTs = (i: number) => (t0 + i * 160) >>> 0;
    for (const [n, key] of [[0, 1], [1, 11]] as const) {
      // the key's ten slots: five of tone, the end twice more, three of silence
      const slots = received.slice(1 + n * 10, 1 + n * 10 + 10);
      const events = slots.slice(0, 7);
      expect(events.map((p) => p.payloadType)).toEqual(new Array(7).fill(101));
      expect(events.map((p) => p.timestamp)).toEqual(new Array(7).fill(frameTs(1 + n * 10)));
      expect(events.map((p) => p.marker)).toEqual([true, false, false, false, false, false, false]);
      expect(events.map((p) => p.payload[0])).toEqual(new Array(7).fill(key));
      expect(events.map((p) => (p.payload[1]! & 0x80) !== 0)).toEqual([false, false, false, false, true, true, true]);
      expect(events.map((p) => p.payload[1]! & 0x3f)).toEqual(new Array(7).fill(10));
      expect(events.map((p) => p.payload.readUInt16BE(2))).toEqual([160, 320, 480, 640, 800, 800, 800]);
      expect(events.every((p) => p.payload.length === 4)).toBe(true);
      // the silence after: audio again, in the clock's timestamps, a new talkspurt
      const silence = slots.slice(7);
      expect(silence.map((p) => p.payloadType)).toEqual([0, 0, 0]);
      expect(silence.map((p) => p.timestamp)).toEqual([8, 9, 10].map((i) => frameTs(i + n * 10)));
      expect(silence[0]!.marker).toBe(true);
    }
    expect(received.at(-1)!.timestamp).toBe(frameTs(21));
  });

  it('our own receiving side hears each key once, in order', async () => {
    const heard: string[] = [];
    const media = await ports.allocate('127.0.0.1');
    const receiver = new RtpSession({
      ...media,
      codec: 'PCMU',
      payload: 0,
      dtmfPayload: 101,
      remote: { address: '127.0.0.1', port: 9 },
      signallingAddress: '127.0.0.1',
      logger: pino({ level: 'silent' }),
      onAudio: () => undefined,
      onDtmf: (d) => heard.push(d),
    });
    open.push(receiver);
    const { rtp } = await sender(101, { port: media.port });
    sendKeys(rtp, '90*w#');
    await settle();
    expect(heard).toEqual(['9', '0', '*', '#']);
  });

  it('a peer that negotiated no telephone-event gets the tones as audio', async () => {
    const { rtp, received } = await sender(null);
    sendKeys(rtp, '47');
    await settle();
    expect(received.every((p) => p.payloadType === 0)).toBe(true);
    const audio = Buffer.concat(received.map((p) => p.payload));
    expect(detectKeysMulaw(audio).map((k) => k.key)).toEqual(['4', '7']);
  });
});
