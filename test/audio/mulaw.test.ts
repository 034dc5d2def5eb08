import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MULAW_SILENCE, linearToMulaw, mulawDecode, mulawEncode, mulawToLinear } from '../../src/audio/mulaw.js';

/**
 * Reference values from the classic Sun `g711.c` as implemented independently by CPython's
 * `audioop` (`lin2ulaw` / `ulaw2lin`), computed with Python 3.11.
 */
const ENCODE_VECTORS: [number, number][] = [
  [0, 0xff], [1, 0xff], [-1, 0x7e], [2, 0xff], [-2, 0x7e], [3, 0xff], [-3, 0x7e], [4, 0xfe],
  [-4, 0x7e], [5, 0xfe], [-5, 0x7e], [7, 0xfe], [8, 0xfe], [-8, 0x7e], [31, 0xfb], [32, 0xfb],
  [33, 0xfb], [-33, 0x7a], [100, 0xf2], [-100, 0x72], [1000, 0xce], [-1000, 0x4e], [4095, 0xaf],
  [4096, 0xaf], [8158, 0x9f], [8159, 0x9f], [8160, 0x9f], [16383, 0x8f], [16384, 0x8f],
  [-16384, 0x0f], [32000, 0x80], [32124, 0x80], [32125, 0x80], [32635, 0x80], [32636, 0x80],
  [32767, 0x80], [-32124, 0x00], [-32635, 0x00], [-32636, 0x00], [-32767, 0x00], [-32768, 0x00],
];
const DECODE_VECTORS: [number, number][] = [
  [0x00, -32124], [0x01, -31100], [0x0f, -16764], [0x10, -15996], [0x3f, -1980], [0x40, -1884],
  [0x70, -120], [0x7e, -8], [0x7f, 0], [0x80, 32124], [0x8f, 16764], [0xc0, 1884], [0xef, 132],
  [0xf0, 120], [0xfe, 8], [0xff, 0],
];
/** sha256 of audioop.lin2ulaw(every int16 from -32768 to 32767) and of ulaw2lin(bytes 0..255) (LE). */
const ENCODE_ALL_SHA256 = '81d633c9e6972a18c74a58720b96cb8ca0bdd096d4060b646dd708c3b846019a';
const DECODE_ALL_SHA256 = '3dab54339e520bb2c924826e3b72a917a2b612e9fd12fc867500f1d983a75827';

const allSamples = Int16Array.from({ length: 65536 }, (_, i) => i - 32768);

describe('G.711 μ-law', () => {
  it('encodes the reference vectors', () => {
    for (const [pcm, byte] of ENCODE_VECTORS) {
      expect(linearToMulaw(pcm), `encode ${pcm}`).toBe(byte);
    }
    expect([...mulawEncode(Int16Array.from(ENCODE_VECTORS.map(([p]) => p)))]).toEqual(ENCODE_VECTORS.map(([, b]) => b));
  });

  it('decodes the reference vectors: endpoints ±32124, 0xFF and 0x7F are both zero', () => {
    for (const [byte, pcm] of DECODE_VECTORS) expect(mulawToLinear(byte), `decode 0x${byte.toString(16)}`).toBe(pcm);
    expect(MULAW_SILENCE).toBe(0xff);
    expect(mulawToLinear(MULAW_SILENCE)).toBe(0);
  });

  it('matches the reference implementation on every 16-bit sample and every byte', () => {
    expect(createHash('sha256').update(mulawEncode(allSamples)).digest('hex')).toBe(ENCODE_ALL_SHA256);
    const decoded = mulawDecode(Buffer.from(Array.from({ length: 256 }, (_, i) => i)));
    expect(createHash('sha256').update(Buffer.from(decoded.buffer)).digest('hex')).toBe(DECODE_ALL_SHA256);
  });

  it('is monotonic, and decode(encode(x)) is within the quantization step of x (all x)', () => {
    const round = mulawDecode(mulawEncode(allSamples));
    for (let i = 0; i < allSamples.length; i++) {
      const x = allSamples[i]!;
      const err = Math.abs(round[i]! - x);
      // Half a step (1/32 of the value at worst, 4 near zero) plus the 2 bits G.711 drops; clip
      // at ±32124 (+ the half step of the top segment).
      const bound = Math.abs(x) > 32124 ? Math.abs(x) - 32124 + 512 : Math.abs(x) / 32 + 8;
      if (err > bound) expect.fail(`x=${x}: decoded ${round[i]}, error ${err} > ${bound}`);
      if (i > 0 && round[i]! < round[i - 1]!) expect.fail(`not monotonic at ${x}`);
    }
  });

  it('property: encoding is idempotent through decode, and the table paths equal the scalar ones', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: -32768, max: 32767 }), { maxLength: 400 }), (xs) => {
        const pcm = Int16Array.from(xs);
        const enc = mulawEncode(pcm);
        expect([...enc]).toEqual(xs.map(linearToMulaw));
        expect([...mulawEncode(mulawDecode(enc))]).toEqual([...enc]);
        expect([...mulawDecode(enc)]).toEqual([...enc].map(mulawToLinear));
      }),
      { numRuns: 300 },
    );
    // Every byte but 0x7F (negative zero) survives decode → encode.
    for (let b = 0; b < 256; b++) if (b !== 0x7f) expect(linearToMulaw(mulawToLinear(b))).toBe(b);
  });

  it('clamps and truncates out-of-range input in the scalar encoder', () => {
    expect(linearToMulaw(1e9)).toBe(0x80);
    expect(linearToMulaw(-1e9)).toBe(0x00);
    expect(linearToMulaw(Number.NaN)).toBe(0xff);
    expect(linearToMulaw(1000.9)).toBe(linearToMulaw(1000));
    expect(mulawDecode(Buffer.alloc(0))).toHaveLength(0);
  });
});
