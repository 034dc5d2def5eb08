/**
 * Voice-activity detection on the caller's audio (docs/turn-taking.md): μ-law 8 kHz in, whatever
 * the transport's chunking; speech start and end out, with the times of the audio they name.
 *
 * A classifier (./webrtc.ts, ./silero.ts) gives each window of audio a probability of speech;
 * the detector turns those into stretches of speech:
 * - a stretch begins with a window at or above `activation`, and counts as speech once
 *   `minSpeechMs` of it has been voiced (and, where the classifier asks for it, once its loudness
 *   has risen by `modulationDb` from a dip within the stretch: speech rises and falls with its
 *   syllables, a fan or a line's hiss does not, and a steady sound that stops only falls); its
 *   start is the first window of the run of voiced audio that confirmed it;
 * - it ends once `hangoverMs` have passed with every window below `deactivation` (or, where the
 *   classifier asks for it, no louder than the line's recent floor by `aboveFloorDb`: noise that
 *   goes on after the words is not more speech; or with no audio at all: a line that stops sending
 *   is silent); its end is the end of its last voiced window.
 * Times are the call's clock (`now()` when each chunk came), a window's start being when the chunk
 * holding its first sample came.
 */
import { MULAW_DECODE_TABLE } from '../../audio/mulaw.js';

/** What classifies audio: one per call; the heavy part (a model, a WASM module) is the process's. */
export interface FrameClassifier {
  /** Samples (8 kHz) in each window it classifies. */
  readonly windowSamples: number;
  /** How likely the window holds speech, 0 to 1; `pcm` is exactly `windowSamples` long. */
  classify(pcm: Int16Array): number;
  close(): void;
}

export interface DetectorSettings {
  activation: number;
  deactivation: number;
  minSpeechMs: number;
  hangoverMs: number;
  /** A gap longer than this inside a stretch not yet confirmed begins a new run (the start moves to it). */
  runGapMs: number;
  /** A rise in loudness (dB, within the last `modulationWindowMs` of the stretch) that confirms it; null: none needed. */
  modulationDb: number | null;
  modulationWindowMs: number;
  /**
   * Speech goes on only while the loudness stays this far (dB) above the quietest of the last
   * `floorWindowMs` (the line's noise between words); null: the classifier alone decides.
   */
  aboveFloorDb: number | null;
  floorWindowMs: number;
}

export interface SpeechEvents {
  /** Speech began at `at` (the call's clock: its first voiced audio). */
  onSpeechStart(at: number): void;
  /** The speech that began at `startedAt` ended at `at` (the end of its last voiced audio). */
  onSpeechEnd(at: number, startedAt: number): void;
}

export interface DetectorClock {
  now(): number;
}

const SAMPLES_PER_MS = 8;
/** dB of a window with no sound at all (the log of zero). */
const FLOOR_DB = -100;

type State = 'quiet' | 'candidate' | 'speech';

export class SpeechDetector {
  private readonly window: Int16Array;
  private fill = 0;
  /** The sum of the squares of the window's samples so far (its loudness, made as it is decoded). */
  private energy = 0;
  /** Clock time of the window's first sample. */
  private windowAt = 0;
  private readonly windowMs: number;
  private state: State = 'quiet';
  /** The start of the run of voice that confirms (or confirmed) the stretch. */
  private runAt = 0;
  /** Voiced ms in the current run, and ms since the last voiced window. */
  private runVoicedMs = 0;
  private quietMs = 0;
  /** End of the last voiced window (the stretch's end if it ends now). */
  private voicedUntil = 0;
  /** Loudness of the stretch's recent windows (a ring), for the modulation check. */
  private readonly levels: Float64Array;
  private levelCount = 0;
  private levelNext = 0;
  /** Loudness of every recent window (a ring), for the floor. */
  private readonly floor: Float64Array;
  private floorCount = 0;
  private floorNext = 0;
  private previousPower = 0;
  private lastAudioAt = 0;
  private silenceTimer: NodeJS.Timeout | null = null;
  private closed = false;

  constructor(
    private readonly classifier: FrameClassifier,
    private readonly settings: DetectorSettings,
    private readonly events: SpeechEvents,
    private readonly clock: DetectorClock,
  ) {
    this.window = new Int16Array(classifier.windowSamples);
    this.windowMs = classifier.windowSamples / SAMPLES_PER_MS;
    this.levels = new Float64Array(Math.max(1, Math.round(settings.modulationWindowMs / this.windowMs)));
    this.floor = new Float64Array(Math.max(1, Math.round(settings.floorWindowMs / this.windowMs)));
  }

  /** The caller is speaking now (a stretch confirmed and not yet ended). */
  get speaking(): boolean {
    return this.state === 'speech';
  }

  /** End of the voiced audio heard last (the call's clock). */
  get heardUntil(): number {
    return this.voicedUntil;
  }

  /** μ-law audio from the caller, as it comes. */
  push(mulaw: Uint8Array): void {
    if (this.closed || mulaw.length === 0) return;
    const now = this.clock.now();
    // audio that stopped for longer than a window: what was left of it is not continued
    if (this.fill > 0 && now - this.lastAudioAt > this.windowMs) this.fill = 0;
    this.lastAudioAt = now;
    if (this.fill === 0) {
      this.windowAt = now;
      this.energy = 0;
    }
    const window = this.window;
    const size = window.length;
    let energy = this.energy;
    for (let i = 0; i < mulaw.length; i++) {
      const sample = MULAW_DECODE_TABLE[mulaw[i]!]!;
      window[this.fill++] = sample;
      energy += sample * sample;
      if (this.fill === size) {
        this.fill = 0;
        const at = this.windowAt;
        this.windowAt = at + this.windowMs;
        this.onWindow(at, energy);
        energy = 0;
        if (this.closed) return;
      }
    }
    this.energy = energy;
  }

  close(): void {
    this.closed = true;
    this.clearSilenceTimer();
    this.classifier.close();
  }

  private onWindow(at: number, energy: number): void {
    const s = this.settings;
    const probability = this.classifier.classify(this.window);
    const measured = s.modulationDb !== null || s.aboveFloorDb !== null;
    const level = measured ? this.levelOf(energy) : 0;
    const aboveFloor = s.aboveFloorDb === null || level >= this.quietest() + s.aboveFloorDb;
    if (s.aboveFloorDb !== null) this.rememberFloor(level);
    const end = at + this.windowMs;
    if (this.state === 'speech') {
      if (probability >= s.deactivation && aboveFloor) {
        this.voicedUntil = end;
        this.quietMs = 0;
      } else if ((this.quietMs += this.windowMs) >= s.hangoverMs) this.endSpeech();
      return;
    }
    if (this.state === 'quiet') {
      if (probability < s.activation) return;
      this.state = 'candidate';
      this.runAt = at;
      this.runVoicedMs = 0;
      this.quietMs = 0;
      this.levelCount = 0;
      this.levelNext = 0;
      this.armSilenceTimer();
    }
    // a stretch not yet confirmed
    this.remember(level);
    if (probability >= s.activation || (this.runVoicedMs > 0 && probability >= s.deactivation)) {
      if (this.quietMs > s.runGapMs) {
        this.runAt = at;
        this.runVoicedMs = 0;
      }
      this.runVoicedMs += this.windowMs;
      this.voicedUntil = end;
      this.quietMs = 0;
      if (this.runVoicedMs >= s.minSpeechMs && this.modulated()) {
        this.state = 'speech';
        this.events.onSpeechStart(this.runAt);
      }
    } else if ((this.quietMs += this.windowMs) >= s.hangoverMs) {
      this.state = 'quiet';
      this.clearSilenceTimer();
    }
  }

  private endSpeech(): void {
    this.state = 'quiet';
    this.quietMs = 0;
    this.clearSilenceTimer();
    this.events.onSpeechEnd(this.voicedUntil, this.runAt);
  }

  /** Loudness in dB (full scale) of a window of `energy`, smoothed with the one before (40 ms at 20 ms windows). */
  private levelOf(energy: number): number {
    const power = energy / this.window.length / (32768 * 32768);
    const smoothed = (power + this.previousPower) / 2;
    this.previousPower = power;
    return smoothed > 0 ? Math.max(FLOOR_DB, 10 * Math.log10(smoothed)) : FLOOR_DB;
  }

  private rememberFloor(level: number): void {
    this.floor[this.floorNext] = level;
    this.floorNext = (this.floorNext + 1) % this.floor.length;
    if (this.floorCount < this.floor.length) this.floorCount++;
  }

  /** The quietest window of the last `floorWindowMs` (before this one). */
  private quietest(): number {
    let min = Infinity;
    for (let i = 0; i < this.floorCount; i++) if (this.floor[i]! < min) min = this.floor[i]!;
    return min === Infinity ? FLOOR_DB : min;
  }

  private remember(level: number): void {
    if (this.settings.modulationDb === null) return;
    this.levels[this.levelNext] = level;
    this.levelNext = (this.levelNext + 1) % this.levels.length;
    if (this.levelCount < this.levels.length) this.levelCount++;
  }

  /** The loudness rose by `modulationDb` from a low point of the window's recent past (a syllable after a dip). */
  private modulated(): boolean {
    const need = this.settings.modulationDb;
    if (need === null) return true;
    const size = this.levels.length;
    const oldest = this.levelCount < size ? 0 : this.levelNext;
    let low = Infinity;
    for (let k = 0; k < this.levelCount; k++) {
      const level = this.levels[(oldest + k) % size]!;
      if (level - low >= need) return true;
      if (level < low) low = level;
    }
    return false;
  }

  /**
   * A line that stops sending audio mid-stretch is silent (a test's caller between lines, a phone
   * that suppresses silence): checked once per hangover while a stretch is open, not per chunk.
   */
  private armSilenceTimer(): void {
    if (this.silenceTimer) return;
    this.silenceTimer = setTimeout(() => this.checkSilence(), this.settings.hangoverMs);
  }

  private checkSilence(): void {
    this.silenceTimer = null;
    if (this.closed || this.state === 'quiet') return;
    const left = this.settings.hangoverMs - (this.clock.now() - this.lastAudioAt);
    if (left > 0) {
      // audio still comes (or stopped less than a hangover ago): look again when it would be one
      this.silenceTimer = setTimeout(() => this.checkSilence(), Math.ceil(left));
      return;
    }
    this.fill = 0;
    if (this.state === 'speech') this.endSpeech();
    else this.state = 'quiet';
  }

  private clearSilenceTimer(): void {
    if (this.silenceTimer) clearTimeout(this.silenceTimer);
    this.silenceTimer = null;
  }
}
