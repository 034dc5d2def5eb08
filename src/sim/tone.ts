/** A pure tone in μ-law 8 kHz: an answering machine's beep. */
import { linearToMulaw } from '../audio/mulaw.js';

export interface ToneOptions {
  /** Frequency; the default (1,400 Hz) is neither of the sandbox modem's tones (1,000 and 2,000 Hz). */
  hz?: number;
  ms?: number;
  /** Peak amplitude (16-bit linear). */
  amplitude?: number;
}

/** A tone with 5 ms fades at both ends, so it starts and stops without a click. */
export function tone({ hz = 1400, ms = 500, amplitude = 10_000 }: ToneOptions = {}): Buffer {
  const samples = Math.round((ms * 8000) / 1000);
  const fade = 40;
  const out = Buffer.alloc(samples);
  for (let i = 0; i < samples; i++) {
    const gain = Math.min(1, i / fade, (samples - 1 - i) / fade);
    out[i] = linearToMulaw(amplitude * gain * Math.sin((2 * Math.PI * hz * i) / 8000));
  }
  return out;
}
