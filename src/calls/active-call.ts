/** What the call service needs of one live call, whichever way it talks to the caller. */
import type { AnsweredBy, CallRecord } from './store.js';
import type { CallError } from '../errors.js';
import type { ControlOutcome, LiveControl } from './live-control.js';

/**
 * A running call: the call controller with the pipeline backend (STT → model → TTS) or the realtime backend (one realtime
 * speech-to-speech model). Its transport and the service drive both through these methods.
 */
export interface ActiveCall {
  readonly record: CallRecord;
  /** The media stream started: connect the providers, start (or resume) the engine, speak. */
  start(resumeFrom?: Record<string, unknown>): Promise<void>;
  /** Caller audio, in the transport's format. */
  audio(frame: Buffer): void;
  dtmf(digit: string): void;
  /** The far end has played the audio before this progress mark (`CallTransport.mark`). */
  played(name: string): void;
  /** The caller hung up (the carrier said so, or the media connection closed). */
  callerHungUp(): void;
  /** The transport lost its far end without a hang-up: ends the call `customer-ended-call`, saying why. */
  farEndGone(why: string): void;
  /**
   * Ends the call from outside (shutdown grace over, worker decisions). `note` goes to the
   * record's `errors` (and so to the end-of-call-report), saying why.
   */
  terminate(reason: string, note?: CallError): Promise<void>;
  isEnded(): boolean;
  /** Answering-machine detection said who answered (outbound calls): a machine gets the voicemail message. */
  answeredBy(who: AnsweredBy): void;
  /** A defect inside the call (its code threw): it ends `pipeline-error-switchboard`, never the process. */
  fail(err: unknown, where: string): void;
  /** A live control (`POST /calls/{id}/control`): applied now, or why not (src/calls/live-control.ts). */
  control(control: LiveControl): ControlOutcome;
}
