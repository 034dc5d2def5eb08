import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Resampler, resample } from '../../src/audio/resample.js';

function tone(hz: number, rate: number, n: number, amplitude = 16000, phase = 0): Int16Array {
  return Int16Array.from({ length: n }, (_, i) => Math.round(amplitude * Math.sin((2 * Math.PI * hz * i) / rate + phase)));
}

/** RMS of the middle of a signal (the filter's edges excluded). */
function rms(x: Int16Array, edge = 0.1): number {
  const from = Math.floor(x.length * edge);
  const to = x.length - from;
  let s = 0;
  for (let i = from; i < to; i++) s += x[i]! * x[i]!;
  return Math.sqrt(s / (to - from));
}

/** Amplitude of the `hz` component (Goertzel), middle of the signal. */
function amplitudeAt(x: Int16Array, hz: number, rate: number): number {
  const from = Math.floor(x.length * 0.1);
  const to = x.length - from;
  let re = 0;
  let im = 0;
  for (let i = from; i < to; i++) {
    re += x[i]! * Math.cos((2 * Math.PI * hz * i) / rate);
    im -= x[i]! * Math.sin((2 * Math.PI * hz * i) / rate);
  }
  return (2 * Math.hypot(re, im)) / (to - from);
}

const db = (a: number, b: number) => 20 * Math.log10(a / b);
const RATES = [8000, 16000, 24000] as const;
const PAIRS = RATES.flatMap((from) => RATES.filter((to) => to !== from).map((to) => [from, to] as const));

describe('resample', () => {
  it('a 1 kHz tone survives 24 kHz → 8 kHz within 1 dB (and every other pair within 0.1 dB)', () => {
    const x = tone(1000, 24000, 24000);
    const y = resample(x, 24000, 8000);
    expect(Math.abs(db(rms(y), rms(x)))).toBeLessThan(1);
    for (const [from, to] of PAIRS) {
      const a = tone(1000, from, from);
      expect(Math.abs(db(rms(resample(a, from, to)), rms(a))), `${from}→${to}`).toBeLessThan(0.1);
    }
  });

  it('suppresses aliasing: a 6 kHz tone at 24 kHz loses ≥ 30 dB going to 8 kHz (and 5 kHz, 7.5 kHz, 11 kHz too)', () => {
    for (const hz of [6000, 5000, 7500, 11000]) {
      const x = tone(hz, 24000, 24000);
      const y = resample(x, 24000, 8000);
      // Where the alias would land (6 kHz → 2 kHz), and everything else.
      const alias = Math.abs(((hz + 4000) % 8000) - 4000);
      expect(db(amplitudeAt(y, alias, 8000) + 1e-9, 16000), `${hz} Hz alias`).toBeLessThan(-30);
      expect(db(rms(y) + 1e-9, rms(x)), `${hz} Hz total`).toBeLessThan(-30);
    }
    // 16 kHz → 8 kHz as well: 5 kHz would fold to 3 kHz.
    const y = resample(tone(5000, 16000, 16000), 16000, 8000);
    expect(db(rms(y) + 1e-9, 16000 / Math.SQRT2)).toBeLessThan(-30);
  });

  it('interpolation leaves no images: 8 kHz → 16/24 kHz of a 1 kHz tone has ≤ −40 dB at 7 kHz and 9 kHz', () => {
    for (const to of [16000, 24000]) {
      const y = resample(tone(1000, 8000, 8000), 8000, to);
      expect(db(amplitudeAt(y, 1000, to), 16000)).toBeGreaterThan(-0.1);
      for (const image of [7000, 9000]) {
        if (image < to / 2) expect(db(amplitudeAt(y, image, to) + 1e-9, 16000), `${to}: ${image} Hz`).toBeLessThan(-40);
      }
    }
  });

  it('keeps time: no delay, the output lines up with the same tone generated at the new rate', () => {
    for (const [from, to] of PAIRS) {
      const y = resample(tone(440, from, from, 16000, 0.3), from, to);
      const want = tone(440, to, to, 16000, 0.3);
      let worst = 0;
      for (let i = Math.floor(to * 0.1); i < to * 0.9; i++) worst = Math.max(worst, Math.abs(y[i]! - want[i]!));
      expect(worst, `${from}→${to}`).toBeLessThan(40);
    }
  });

  it('output length is ⌈n × to / from⌉, DC passes at unit gain', () => {
    for (const [from, to] of PAIRS) {
      for (const n of [0, 1, 2, 3, 5, 160, 480, 1001]) {
        expect(resample(new Int16Array(n), from, to), `${from}→${to} n=${n}`).toHaveLength(Math.ceil((n * to) / from));
      }
      const y = resample(new Int16Array(from).fill(12345), from, to);
      expect(y[Math.floor(y.length / 2)]).toBe(12345);
    }
    expect(resample(Int16Array.of(1, 2, 3), 8000, 8000)).toEqual(Int16Array.of(1, 2, 3));
    expect(resample(new Int16Array(480), 24000, 8000)).toHaveLength(160); // one 20 ms frame
  });

  it('clips instead of wrapping around (a full-scale square wave overshoots)', () => {
    // 100 Hz square at 24 kHz: 120 samples per half period, edges at multiples of 40 output samples.
    const square = Int16Array.from({ length: 4800 }, (_, i) => (Math.floor(i / 120) % 2 ? -32768 : 32767));
    const y = resample(square, 24000, 8000);
    expect(Math.max(...y)).toBe(32767); // the overshoot was there, and was clipped
    for (let i = 4; i < y.length - 4; i++) {
      const fromEdge = Math.min(i % 40, 40 - (i % 40));
      if (fromEdge < 4) continue;
      const want = Math.floor(i / 40) % 2 ? -1 : 1;
      if (Math.sign(y[i]!) !== want) expect.fail(`sample ${i} = ${y[i]} wrapped around`);
    }
  });

  it('refuses rates that are not positive integers', () => {
    expect(() => resample(new Int16Array(1), 0, 8000)).toThrow(RangeError);
    expect(() => new Resampler(8000, 44100.5)).toThrow(RangeError);
  });

  it('property: chunked streaming output equals the one-shot output exactly, and flush resets', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...PAIRS),
        fc.array(fc.integer({ min: -32768, max: 32767 }), { maxLength: 700 }),
        // Chunk sizes, empty chunks included; the final 17 guarantees progress.
        fc.array(fc.integer({ min: 0, max: 200 }), { maxLength: 20 }).map((cuts) => [...cuts, 17]),
        ([from, to], samples, cuts) => {
          const x = Int16Array.from(samples);
          const oneShot = resample(x, from, to);
          const r = new Resampler(from, to);
          for (let round = 0; round < 2; round++) {
            const out: number[] = [];
            let at = 0;
            for (let i = 0; at < x.length; i++) {
              const n = cuts[i % cuts.length]!;
              out.push(...r.process(x.subarray(at, at + n)));
              at += n;
            }
            out.push(...r.flush());
            expect(out).toEqual([...oneShot]);
          }
        },
      ),
      { numRuns: 300 },
    );
  });
});
