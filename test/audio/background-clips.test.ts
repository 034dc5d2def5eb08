import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLIP_NAMES, CLIP_SAMPLES, type ClipReport, makeBackgroundClips } from '../../scripts/make-background-clips.js';

/**
 * The background clips in assets/background/ are what scripts/make-background-clips.ts makes, byte
 * for byte, and are usable as a looped bed under a call: telephone format, a sensible level, never
 * silent, no click at the loop point, their energy in the telephone band.
 */

const SHIPPED = fileURLToPath(new URL('../../assets/background/', import.meta.url));
const RATE = 8000;

interface Wav {
  format: number;
  channels: number;
  rate: number;
  byteRate: number;
  blockAlign: number;
  bits: number;
  samples: Int16Array;
}

/** Reads the chunks of a RIFF WAV file (no dependency on the code under development). */
function readWav(file: Buffer): Wav {
  expect(file.toString('latin1', 0, 4)).toBe('RIFF');
  expect(file.readUInt32LE(4)).toBe(file.length - 8);
  expect(file.toString('latin1', 8, 12)).toBe('WAVE');
  let fmt: Omit<Wav, 'samples'> | null = null;
  let samples: Int16Array | null = null;
  for (let at = 12; at + 8 <= file.length; ) {
    const id = file.toString('latin1', at, at + 4);
    const size = file.readUInt32LE(at + 4);
    const body = file.subarray(at + 8, at + 8 + size);
    if (id === 'fmt ') {
      fmt = {
        format: body.readUInt16LE(0),
        channels: body.readUInt16LE(2),
        rate: body.readUInt32LE(4),
        byteRate: body.readUInt32LE(8),
        blockAlign: body.readUInt16LE(12),
        bits: body.readUInt16LE(14),
      };
    } else if (id === 'data') {
      samples = new Int16Array(size / 2);
      for (let i = 0; i < samples.length; i++) samples[i] = body.readInt16LE(i * 2);
    }
    at += 8 + size + (size & 1);
  }
  if (!fmt || !samples) throw new Error('no fmt or data chunk');
  return { ...fmt, samples };
}

const dbfs = (value: number) => 20 * Math.log10(value / 32768);

function rms(x: Int16Array, from = 0, to = x.length, removeMean = false): number {
  let mean = 0;
  if (removeMean) {
    for (let i = from; i < to; i++) mean += x[i]!;
    mean /= to - from;
  }
  let sum = 0;
  for (let i = from; i < to; i++) sum += (x[i]! - mean) ** 2;
  return Math.sqrt(sum / (to - from));
}

/** In-place radix-2 FFT. */
function fft(re: Float64Array, im: Float64Array): void {
  const n = re.length;
  for (let i = 1, j = 0; i < n; i++) {
    let bit = n >> 1;
    for (; j & bit; bit >>= 1) j ^= bit;
    j ^= bit;
    if (i < j) {
      [re[i], re[j]] = [re[j]!, re[i]!];
      [im[i], im[j]] = [im[j]!, im[i]!];
    }
  }
  for (let size = 2; size <= n; size <<= 1) {
    const step = (-2 * Math.PI) / size;
    for (let start = 0; start < n; start += size) {
      for (let k = 0; k < size / 2; k++) {
        const wr = Math.cos(step * k);
        const wi = Math.sin(step * k);
        const a = start + k;
        const b = a + size / 2;
        const tr = re[b]! * wr - im[b]! * wi;
        const ti = re[b]! * wi + im[b]! * wr;
        re[b] = re[a]! - tr;
        im[b] = im[a]! - ti;
        re[a] = re[a]! + tr;
        im[a] = im[a]! + ti;
      }
    }
  }
}

/** Energy below 300 Hz, in 300–3400 Hz and above 3400 Hz (Welch: 1024-point Hann windows, half overlapping). */
function bandEnergies(x: Int16Array): { low: number; band: number; high: number } {
  const n = 1024;
  const out = { low: 0, band: 0, high: 0 };
  for (let start = 0; start + n <= x.length; start += n / 2) {
    const re = new Float64Array(n);
    const im = new Float64Array(n);
    for (let i = 0; i < n; i++) re[i] = x[start + i]! * (0.5 - 0.5 * Math.cos((2 * Math.PI * i) / n));
    fft(re, im);
    for (let k = 1; k <= n / 2; k++) {
      const hz = (k * RATE) / n;
      const power = re[k]! ** 2 + im[k]! ** 2;
      if (hz < 300) out.low += power;
      else if (hz <= 3400) out.band += power;
      else out.high += power;
    }
  }
  return out;
}

describe('background clips', () => {
  let dir: string;
  let reports: ClipReport[];
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'switchboard-clips-'));
    reports = makeBackgroundClips(dir);
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('ships office and cafe', () => {
    expect(CLIP_NAMES).toEqual(expect.arrayContaining(['office', 'cafe']));
    expect(reports.map((r) => r.name)).toEqual([...CLIP_NAMES]);
  });

  describe.each(CLIP_NAMES)('%s', (name) => {
    const shipped = () => readFileSync(join(SHIPPED, `${name}.wav`));

    it('is exactly what scripts/make-background-clips.ts makes', () => {
      const made = readFileSync(join(dir, `${name}.wav`));
      const file = shipped();
      expect(made.length).toBe(file.length);
      // (not toEqual on 320 kB: say where they part, if they do)
      const first = made.findIndex((byte, i) => byte !== file[i]);
      expect(first, 'first differing byte: re-run `node --import tsx scripts/make-background-clips.ts`').toBe(-1);
    });

    it('is 20 s of 8 kHz mono 16-bit PCM, whole 20 ms frames', () => {
      const wav = readWav(shipped());
      expect(wav).toMatchObject({ format: 1, channels: 1, rate: 8000, byteRate: 16_000, blockAlign: 2, bits: 16 });
      expect(wav.samples.length).toBe(CLIP_SAMPLES);
      expect(wav.samples.length).toBe(160_000);
      expect(wav.samples.length % 160).toBe(0);
    });

    it('sits at about −20 dBFS RMS, peaks under −3 dBFS', () => {
      const { samples } = readWav(shipped());
      let peak = 0;
      for (const s of samples) peak = Math.max(peak, Math.abs(s));
      const level = dbfs(rms(samples));
      console.log(`${name}: RMS ${level.toFixed(2)} dBFS, peak ${dbfs(peak).toFixed(2)} dBFS`);
      expect(level).toBeGreaterThan(-21);
      expect(level).toBeLessThan(-19);
      expect(dbfs(peak)).toBeLessThan(-3);
      const report = reports.find((r) => r.name === name)!;
      expect(report.seconds).toBe(20);
      expect(report.rmsDbfs).toBeCloseTo(level, 6);
      expect(report.peakDbfs).toBeCloseTo(dbfs(peak), 6);
    });

    it('is never silent or still: every second above −45 dBFS, every 100 ms moving', () => {
      const { samples } = readWav(shipped());
      const seconds: number[] = [];
      for (let at = 0; at < samples.length; at += RATE) seconds.push(dbfs(rms(samples, at, at + RATE)));
      expect(Math.min(...seconds)).toBeGreaterThan(-45);
      let quietest = Number.POSITIVE_INFINITY;
      for (let at = 0; at < samples.length; at += 800) quietest = Math.min(quietest, dbfs(rms(samples, at, at + 800, true)));
      expect(quietest).toBeGreaterThan(-50);
      // and not one level throughout: something happens (voices, keys, clinks) over the room tone
      expect(Math.max(...seconds) - Math.min(...seconds)).toBeGreaterThan(2);
    });

    it('loops without a click: the step from the last sample to the first is an ordinary one', () => {
      const { samples } = readWav(shipped());
      const steps = new Float64Array(samples.length - 1);
      for (let i = 1; i < samples.length; i++) steps[i - 1] = Math.abs(samples[i]! - samples[i - 1]!);
      steps.sort();
      const p999 = steps[Math.floor(steps.length * 0.999)]!;
      const wrap = Math.abs(samples[0]! - samples[samples.length - 1]!);
      console.log(`${name}: step across the loop ${wrap}, median step ${steps[steps.length >> 1]}, 99.9th percentile ${p999}`);
      expect(wrap).toBeLessThanOrEqual(p999);
      // nor a jump in level: the 50 ms either side of the loop point are alike
      const before = dbfs(rms(samples, samples.length - 400));
      const after = dbfs(rms(samples, 0, 400));
      expect(Math.abs(before - after)).toBeLessThan(10);
    });

    it('keeps its energy in the telephone band, 300–3400 Hz', () => {
      const { samples } = readWav(shipped());
      const { low, band, high } = bandEnergies(samples);
      const lowDb = 10 * Math.log10(low / band);
      const highDb = 10 * Math.log10(high / band);
      console.log(`${name}: energy below 300 Hz ${lowDb.toFixed(1)} dB, above 3400 Hz ${highDb.toFixed(1)} dB, relative to the band`);
      expect(lowDb).toBeLessThan(-10);
      expect(highDb).toBeLessThan(-10);
    });
  });
});
