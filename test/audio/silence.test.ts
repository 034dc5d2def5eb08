import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MULAW_DECODE_TABLE, mulawEncode } from '../../src/audio/mulaw.js';
import { FskReceiver, modulateText } from '../../src/providers/sandbox/modem.js';
import { SilenceDetector, mulawLevelDb } from '../../src/audio/silence.js';

const silence = () => Buffer.alloc(160, 0xff);
function toneFrame(amplitude: number): Buffer {
  return mulawEncode(Int16Array.from({ length: 160 }, (_, i) => Math.round(amplitude * Math.sin((2 * Math.PI * 440 * i) / 8000))));
}

describe('SilenceDetector', () => {
  it('measures RMS in dBFS', () => {
    expect(mulawLevelDb(silence())).toBe(Number.NEGATIVE_INFINITY);
    expect(mulawLevelDb(Buffer.alloc(0))).toBe(Number.NEGATIVE_INFINITY);
    expect(mulawLevelDb(toneFrame(32000))).toBeCloseTo(-3.2, 0); // full-scale sine: −3 dBFS
    expect(mulawLevelDb(toneFrame(328))).toBeCloseTo(-43, 0);
  });

  it('starts on sound above the threshold, ends after the hangover', () => {
    const d = new SilenceDetector({ thresholdDb: -45, minSilenceMs: 100 });
    expect(d.push(silence())).toMatchObject({ speaking: false, started: false, silenceMs: 20 });
    expect(d.push(toneFrame(200))).toMatchObject({ speaking: false }); // ≈ −47 dBFS: below
    expect(d.push(toneFrame(3000))).toMatchObject({ speaking: true, started: true, silenceMs: 0 });
    expect(d.push(toneFrame(3000))).toMatchObject({ speaking: true, started: false });
    const quiet = [1, 2, 3, 4, 5].map(() => d.push(silence()));
    expect(quiet.map((s) => s.silenceMs)).toEqual([20, 40, 60, 80, 100]);
    expect(quiet.map((s) => s.speaking)).toEqual([true, true, true, true, false]);
    expect(quiet.map((s) => s.ended)).toEqual([false, false, false, false, true]);
    expect(d.push(silence())).toMatchObject({ speaking: false, ended: false, silenceMs: 120 });
  });

  it('a short gap inside speech does not end it', () => {
    const d = new SilenceDetector({ minSilenceMs: 300 });
    d.push(toneFrame(5000));
    for (let i = 0; i < 10; i++) expect(d.push(silence()).speaking).toBe(true);
    const again = d.push(toneFrame(5000));
    expect(again).toMatchObject({ speaking: true, started: false, silenceMs: 0 });
  });

  it('counts time by bytes (8 kHz), and resets', () => {
    const d = new SilenceDetector({ minSilenceMs: 10 });
    d.push(toneFrame(5000));
    expect(d.push(Buffer.alloc(40, 0xff))).toMatchObject({ silenceMs: 5, speaking: true });
    expect(d.push(Buffer.alloc(40, 0xff))).toMatchObject({ silenceMs: 10, speaking: false, ended: true });
    d.reset();
    expect(d.push(toneFrame(5000)).started).toBe(true);
  });

  it('pushSumOfSquares(n, Σx²) is push() on those samples, and the sandbox receiver returns that sum for what it is given', () => {
    const noop = { onSync() {}, onVerified() {}, onFrame() {}, onReject() {} };
    const sumSquares = (b: Uint8Array) => b.reduce((sum, v) => sum + MULAW_DECODE_TABLE[v]! ** 2, 0);
    // speech, then digital silence the receiver skips without decoding, then speech again
    const audio = Buffer.concat([modulateText('Hello there.'), Buffer.alloc(1600, 0xff), modulateText('Again?')]);
    const receiver = new FskReceiver(noop);
    for (let i = 0; i < audio.length; i += 160) {
      const frame = audio.subarray(i, i + 160);
      expect(receiver.push(frame), `frame ${i / 160}`).toBe(sumSquares(frame));
    }
    fc.assert(
      fc.property(fc.array(fc.uint8Array({ minLength: 0, maxLength: 400 }), { maxLength: 20 }), (frames) => {
        const a = new SilenceDetector({ minSilenceMs: 100 });
        const b = new SilenceDetector({ minSilenceMs: 100 });
        for (const f of frames) expect(b.pushSumOfSquares(f.length, sumSquares(f))).toEqual(a.push(f));
      }),
    );
  });
});
