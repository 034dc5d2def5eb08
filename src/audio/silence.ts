/**
 * Energy-based voice activity detection on μ-law 8 kHz audio: a frame is loud when its RMS level
 * (dBFS) reaches the threshold; speech ends only after `minSilenceMs` of quiet (hangover), so
 * short gaps between words do not end an utterance.
 */
import { MULAW_DECODE_TABLE } from './mulaw.js';

export interface SilenceDetectorOptions {
  /** RMS level (dBFS, full scale = 32768) at or above which a frame counts as sound. Default −45. */
  thresholdDb?: number;
  /** Quiet needed before `speaking` turns false (hangover). Default 300 ms. */
  minSilenceMs?: number;
  /** Sample rate of the μ-law audio. Default 8,000. */
  sampleRate?: number;
}

export interface SilenceState {
  /** Inside an utterance: sound was heard and the quiet since is shorter than `minSilenceMs`. */
  speaking: boolean;
  /** Quiet since the last loud frame or the start (0 while loud; keeps counting after `speaking` ends). */
  silenceMs: number;
  /** RMS level of the frame just pushed, dBFS (−∞ for digital silence). */
  levelDb: number;
  /** This frame started an utterance. */
  started: boolean;
  /** This frame ended an utterance (the hangover ran out). */
  ended: boolean;
}

/** RMS level of μ-law audio in dBFS (−Infinity when every sample is zero or the buffer is empty). */
export function mulawLevelDb(mulaw: Uint8Array): number {
  let sum = 0;
  for (let i = 0; i < mulaw.length; i++) {
    const s = MULAW_DECODE_TABLE[mulaw[i]!]!;
    sum += s * s;
  }
  return levelDb(sum, mulaw.length);
}

/** RMS level in dBFS of `samples` samples (16-bit scale) whose squares sum to `sumSquares`; −Infinity for none. */
function levelDb(sumSquares: number, samples: number): number {
  if (samples === 0) return Number.NEGATIVE_INFINITY;
  return 10 * Math.log10(sumSquares / samples / (32768 * 32768));
}

export class SilenceDetector {
  readonly thresholdDb: number;
  readonly minSilenceMs: number;
  private readonly sampleRate: number;
  private speaking = false;
  private silenceMs = 0;

  constructor(options: SilenceDetectorOptions = {}) {
    this.thresholdDb = options.thresholdDb ?? -45;
    this.minSilenceMs = options.minSilenceMs ?? 300;
    this.sampleRate = options.sampleRate ?? 8000;
  }

  /** One frame of μ-law audio (any length; 20 ms / 160 bytes is typical). */
  push(mulaw: Uint8Array): SilenceState {
    return this.pushLevel(mulaw.length, mulawLevelDb(mulaw));
  }

  /**
   * One frame of `samples` samples whose squares (linear, 16-bit scale) sum to `sumSquares`, as a
   * demodulator that decoded them already has it: the same as `push` on those samples.
   */
  pushSumOfSquares(samples: number, sumSquares: number): SilenceState {
    return this.pushLevel(samples, levelDb(sumSquares, samples));
  }

  private pushLevel(samples: number, levelDb: number): SilenceState {
    const ms = (samples * 1000) / this.sampleRate;
    let started = false;
    let ended = false;
    if (samples > 0 && levelDb >= this.thresholdDb) {
      started = !this.speaking;
      this.speaking = true;
      this.silenceMs = 0;
    } else {
      this.silenceMs += ms;
      if (this.speaking && this.silenceMs >= this.minSilenceMs) {
        this.speaking = false;
        ended = true;
      }
    }
    return { speaking: this.speaking, silenceMs: this.silenceMs, levelDb, started, ended };
  }

  reset(): void {
    this.speaking = false;
    this.silenceMs = 0;
  }
}
