import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { mulawDecode } from '../../src/audio/mulaw.js';
import {
  FskReceiver,
  MODEM,
  completeUtf8Length,
  crc16,
  crc32,
  frameBody,
  frameSamples,
  modulateFrame,
  modulateText,
  splitPayloads,
  type ReceiverEvents,
} from '../../src/providers/sandbox/modem.js';

const utf8 = new TextEncoder();
const ascii = (s: string) => utf8.encode(s);

function receive(audio: Uint8Array, chunk = 160) {
  const log: string[] = [];
  const frames: string[] = [];
  const events: ReceiverEvents = {
    onSync: (at) => log.push(`sync@${at}`),
    onVerified: (b, complete) => log.push(`verified ${b.length}${complete ? ' complete' : ''}`),
    onFrame: (p, start, end) => {
      frames.push(new TextDecoder().decode(p));
      log.push(`frame ${start}..${end}`);
    },
    onReject: (why) => log.push(`reject ${why}`),
  };
  const r = new FskReceiver(events);
  for (let i = 0; i < audio.length; i += chunk) r.push(audio.subarray(i, i + chunk));
  return { log, frames };
}

/** Amplitude of `hz` in 8 kHz samples (Goertzel). */
function amplitudeAt(x: Int16Array, hz: number): number {
  let re = 0;
  let im = 0;
  for (let i = 0; i < x.length; i++) {
    re += x[i]! * Math.cos((2 * Math.PI * hz * i) / 8000);
    im -= x[i]! * Math.sin((2 * Math.PI * hz * i) / 8000);
  }
  return (2 * Math.hypot(re, im)) / x.length;
}

describe('sandbox modem', () => {
  it('checksums match their standard check values', () => {
    expect(crc32(ascii('123456789'))).toBe(0xcbf43926);
    expect(crc32(ascii('56789'), crc32(ascii('1234')))).toBe(0xcbf43926);
    expect(crc16(ascii('123456789'))).toBe(0x29b1);
  });

  it('lays a frame out as length + CRC-16, then 16-byte blocks each followed by the running CRC-32', () => {
    const payload = ascii('The quick brown fox jumps over the lazy dog'); // 43 bytes: 3 blocks
    const body = frameBody(payload);
    expect(body.length).toBe(4 + 43 + 3 * 4);
    expect([...body.subarray(0, 2)]).toEqual([0, 43]);
    expect((body[2]! << 8) | body[3]!).toBe(crc16(Uint8Array.of(0, 43)));
    const be32 = (at: number) => ((body[at]! << 24) | (body[at + 1]! << 16) | (body[at + 2]! << 8) | body[at + 3]!) >>> 0;
    expect(be32(4 + 16)).toBe(crc32(Uint8Array.of(0, 43, ...payload.subarray(0, 16))));
    expect(be32(body.length - 4)).toBe(crc32(Uint8Array.of(0, 43, ...payload)));
    expect(() => frameBody(new Uint8Array(0))).toThrow(RangeError);
    expect(() => frameBody(new Uint8Array(MODEM.maxFrameBytes + 1))).toThrow(RangeError);
  });

  it('modulates 1,000 baud FSK: 8 samples per bit, mark 1 kHz, space 2 kHz, then 160 ms of silence', () => {
    const audio = modulateFrame(ascii('hi'));
    const bits = MODEM.preambleBits + 32 + 8 * (4 + 2 + 4) + MODEM.postambleBits;
    expect(frameSamples(2)).toBe(bits * 8);
    expect(audio.length).toBe(bits * 8 + 1280);
    expect(audio.subarray(bits * 8).every((b) => b === 0xff)).toBe(true);
    const pcm = mulawDecode(audio);
    const mark = pcm.subarray(0, 8); // preamble starts with a 1
    const space = pcm.subarray(8, 16);
    expect(amplitudeAt(mark, 1000)).toBeGreaterThan(11000);
    expect(amplitudeAt(mark, 2000)).toBeLessThan(300);
    expect(amplitudeAt(space, 2000)).toBeGreaterThan(11000);
    expect(amplitudeAt(space, 1000)).toBeLessThan(300);
  });

  it('the sync word cannot be seen one or more bits early inside preamble + sync', () => {
    let bits = 0n;
    const stream: number[] = [];
    for (let i = 0; i < MODEM.preambleBits; i++) stream.push(i % 2 === 0 ? 1 : 0);
    for (let i = 31; i >= 0; i--) stream.push((MODEM.sync >>> i) & 1);
    const matches: number[] = [];
    stream.forEach((b, i) => {
      bits = ((bits << 1n) | BigInt(b)) & 0xffffffffn;
      if (i >= 31 && bits === BigInt(MODEM.sync)) matches.push(i);
    });
    expect(matches).toEqual([stream.length - 1]);
  });

  it('receives frames at any sample offset and chunking, reporting verified prefixes, then the frame', () => {
    const audio = Buffer.concat([Buffer.alloc(13, 0xff), modulateText('Grüße, 世界! 🎉 and a few more words to pass 16 bytes')]);
    const { log, frames } = receive(audio, 1);
    expect(frames).toEqual(['Grüße, 世界! 🎉 and a few more words to pass 16 bytes']);
    expect(log[0]).toBe('sync@13');
    expect(log.filter((l) => l.startsWith('verified'))).toEqual(['verified 16', 'verified 32', 'verified 48', 'verified 59 complete']);
    for (const chunk of [7, 160, 1000, audio.length]) expect(receive(audio, chunk).log, `chunk ${chunk}`).toEqual(log);
    for (let lead = 0; lead < 8; lead++) {
      expect(receive(Buffer.concat([Buffer.alloc(lead, 0xff), modulateText('x')])).frames).toEqual(['x']);
    }
  });

  it('splits long text into frames of at most 1,024 bytes, never inside a character', () => {
    const text = 'é'.repeat(600) + '🎉'.repeat(300); // 1,200 + 1,200 bytes
    const parts = splitPayloads(utf8.encode(text));
    expect(parts.map((p) => p.length)).toEqual([1024, 1024, 352]);
    expect(parts.map((p) => new TextDecoder('utf-8', { fatal: true }).decode(p)).join('')).toBe(text);
    expect(receive(modulateText(text)).frames.join('')).toBe(text);
  });

  it('rejects a frame with a bad header, a bad block, or a cut-off carrier — and reports nothing of it', () => {
    const frame = modulateFrame(ascii('Hello there, this is the sandbox speaking.'));
    const mark = frame.subarray(0, 8); // the preamble starts with a 1…
    const space = frame.subarray(8, 16); // …then a 0
    /** A copy of the frame with bit `i` (counted from the first preamble bit) inverted. */
    const flip = (i: number) => {
      const out = Buffer.from(frame);
      (out.subarray(i * 8, i * 8 + 8).equals(mark) ? space : mark).copy(out, i * 8);
      return out;
    };
    const headerBit = MODEM.preambleBits + 32;
    const h = receive(flip(headerBit + 9));
    expect(h.frames).toEqual([]);
    expect(h.log.filter((l) => !l.startsWith('sync'))).toEqual(['reject header']);

    const b = receive(flip(headerBit + 32 + (16 + 4 + 3) * 8 + 5)); // inside the second block
    expect(b.frames).toEqual([]);
    expect(b.log.filter((l) => !l.startsWith('sync'))).toEqual(['verified 16', 'reject checksum']);

    const crc = receive(flip(headerBit + 32 + 16 * 8 + 2)); // inside the first block's CRC
    expect(crc.log.filter((l) => !l.startsWith('sync'))).toEqual(['reject checksum']);

    const headerAt = headerBit * 8;
    const cut = Buffer.concat([frame.subarray(0, headerAt + 100 * 8), Buffer.alloc(800, 0xff)]);
    const c = receive(cut);
    expect(c.frames).toEqual([]);
    expect(c.log.at(-1)).toBe('reject carrier');
  });

  it('property: silence read whole (the fast path) hears what it hears one sample at a time', () => {
    // frames, digital silence (both μ-law zeros), quiet and loud noise, cut-off frames, in any order and chunking
    const piece = fc.oneof(
      fc.string({ minLength: 1, maxLength: 40 }).map((t) => modulateText(t)),
      fc.tuple(fc.string({ minLength: 1, maxLength: 40 }), fc.nat()).map(([t, cut]) => {
        const a = modulateText(t);
        return a.subarray(0, cut % a.length);
      }),
      fc.tuple(fc.integer({ min: 1, max: 800 }), fc.constantFrom(0xff, 0x7f)).map(([n, b]) => Buffer.alloc(n, b)),
      fc.uint8Array({ minLength: 1, maxLength: 400 }),
      fc.uint8Array({ minLength: 1, maxLength: 400 }).map((b) => b.map((x) => (x & 1 ? 0xfe : 0x7e))),
    );
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 8 }), fc.integer({ min: 1, max: 400 }), (pieces, chunk) => {
        const audio = Buffer.concat(pieces);
        expect(receive(audio, chunk).log).toEqual(receive(audio, 1).log);
      }),
      { numRuns: 300 },
    );
  });

  it('property: silence and noise never produce a frame', () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 0, maxLength: 4000 }), (noise) => {
        expect(receive(noise).frames).toEqual([]);
      }),
      { numRuns: 200 },
    );
  });

  it('completeUtf8Length cuts an incomplete trailing character only', () => {
    const e = utf8.encode('a€🎉');
    expect(completeUtf8Length(e)).toBe(8);
    expect(completeUtf8Length(e.subarray(0, 7))).toBe(4);
    expect(completeUtf8Length(e.subarray(0, 5))).toBe(4);
    expect(completeUtf8Length(e.subarray(0, 3))).toBe(1);
    expect(completeUtf8Length(e.subarray(0, 1))).toBe(1);
    expect(completeUtf8Length(new Uint8Array(0))).toBe(0);
  });
});
