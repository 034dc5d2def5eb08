/**
 * A DTMF receiver for the tests (ITU-T Q.24-style): Goertzel filters on the eight Q.23
 * frequencies over sliding 205-sample windows (the classic N for 8 kHz), a key where one low and
 * one high frequency hold nearly all the window's energy, each clearly above the others of its
 * group. Runs of one key are a key press, with when its tone started and stopped.
 *
 * Independent of src/calls/keypad.ts on purpose: it decodes what any sender made.
 */
import { mulawDecode } from '../../src/audio/mulaw.js';

const LOWS = [697, 770, 852, 941];
const HIGHS = [1209, 1336, 1477, 1633];
const KEYS = ['123A', '456B', '789C', '*0#D'];
/** The classic N at 8 kHz (25.6 ms); scaled for other rates. */
const WINDOW_MS = 205 / 8;
const STEP_MS = 5;

export interface DetectedKey {
  key: string;
  /** When its tone started and stopped, in ms from the first sample (±5 ms). */
  startMs: number;
  endMs: number;
}

/** The share (0..1) of the window's energy at `freq` (Goertzel). */
function share(x: ArrayLike<number>, from: number, n: number, freq: number, energy: number, rate: number): number {
  const coeff = 2 * Math.cos((2 * Math.PI * freq) / rate);
  let s1 = 0;
  let s2 = 0;
  for (let i = from; i < from + n; i++) {
    const s0 = x[i]! + coeff * s1 - s2;
    s2 = s1;
    s1 = s0;
  }
  return (2 * (s1 * s1 + s2 * s2 - coeff * s1 * s2)) / n / energy;
}

/** The key in the window of `n` samples at `from`, or null. */
function keyAt(x: ArrayLike<number>, from: number, n: number, rate: number): string | null {
  let energy = 0;
  for (let i = from; i < from + n; i++) energy += x[i]! * x[i]!;
  // quieter than about −45 dBFS: no tone
  if (energy / n < (32768 * 0.0056) ** 2) return null;
  const best = (freqs: number[]) => {
    const shares = freqs.map((f) => share(x, from, n, f, energy, rate));
    const order = shares.map((s, i) => [s, i] as const).sort((a, b) => b[0] - a[0]);
    return { index: order[0]![1], share: order[0]![0], next: order[1]![0] };
  };
  const low = best(LOWS);
  const high = best(HIGHS);
  if (low.share + high.share < 0.8 || low.share < 0.1 || high.share < 0.1) return null;
  if (low.next > low.share / 8 || high.next > high.share / 8) return null;
  return KEYS[low.index]![high.index]!;
}

/** The key presses in 16-bit linear samples (8 kHz unless `rate` says otherwise). */
export function detectKeys(samples: ArrayLike<number>, rate = 8000): DetectedKey[] {
  const window = Math.round((WINDOW_MS * rate) / 1000);
  const step = Math.round((STEP_MS * rate) / 1000);
  const ms = (samples: number) => (samples * 1000) / rate;
  const found: DetectedKey[] = [];
  let run: { key: string; first: number; last: number } | null = null;
  const close = () => {
    if (!run) return;
    // a window holds the tone only when (nearly) all of it is inside: the run's first window
    // starts at the tone's start, its last one ends at the tone's end
    found.push({ key: run.key, startMs: ms(run.first), endMs: ms(run.last + window) });
    run = null;
  };
  for (let from = 0; from + window <= samples.length; from += step) {
    const key = keyAt(samples, from, window, rate);
    if (run && key === run.key) {
      run.last = from;
      continue;
    }
    close();
    if (key) run = { key, first: from, last: from };
  }
  close();
  // a run shorter than 40 ms is not a key (Q.24 asks for at least 40 ms)
  return found.filter((k) => k.endMs - k.startMs >= 40);
}

/** The key presses in μ-law audio. */
export function detectKeysMulaw(mulaw: Buffer): DetectedKey[] {
  return detectKeys(mulawDecode(mulaw));
}
