import { describe, expect, it } from 'vitest';
import { mulawEncode } from '../../src/audio/mulaw.js';
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
});
