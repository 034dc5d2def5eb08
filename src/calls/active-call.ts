/** What the call service needs of one live call, whichever way it talks to the caller. */
import type { CallRecord } from './store.js';

/**
 * A running call: `LiveCall` (STT → model → TTS pipeline) or `RealtimeCall` (one realtime
 * speech-to-speech model). The media stream and the service drive both through these methods.
 */
export interface ActiveCall {
  readonly record: CallRecord;
  /** The media stream started: connect the providers, start (or resume) the engine, speak. */
  start(resumeFrom?: Record<string, unknown>): Promise<void>;
  /** Caller audio (μ-law 8 kHz). */
  audio(mulaw: Buffer): void;
  dtmf(digit: string): void;
  /** The far end echoed a mark: the audio before it has been played. */
  mark(name: string): void;
  /** The caller hung up (stream `stop` or the socket closed). */
  callerHungUp(): void;
  /**
   * Ends the call from outside (shutdown grace over, worker decisions). `note` goes to the
   * record's `errors` (and so to the end-of-call-report), saying why.
   */
  terminate(reason: string, note?: string): Promise<void>;
  isEnded(): boolean;
  /** A defect inside the call (its code threw): it ends `pipeline-error-switchboard`, never the process. */
  fail(err: unknown, where: string): void;
}
