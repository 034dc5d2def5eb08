/**
 * What a call of the Twilio stand-in is told and keeps: the callee's behaviour (a person, a
 * voicemail, busy, no answer, failed), Twilio's call statuses, the status callbacks and voicemail
 * it recorded, and what each call runs with (src/sim/twilio-call.ts runs them).
 */
import type { HeardLine, MediaLeg } from './media-leg.js';
import type { StandInCall } from './twilio-call.js';
import type { ToneOptions } from './tone.js';
import type { Conferences } from './conference.js';

export const API_VERSION = '2010-04-01';

/** Rings, then answers: a person on the line (the Media Streams leg is theirs to drive). */
export interface PersonCallee {
  kind: 'person';
  /** How long it rings before the answer (default 300 ms). */
  ringMs?: number;
  /** How long answering-machine detection takes to decide (default 1,000 ms). */
  amdMs?: number;
  /** What detection decides (default `human`). */
  answeredBy?: 'human' | 'unknown' | 'fax';
  /** Runs once the media stream is up (e.g. say something, then hang up). */
  onAnswer?: (leg: MediaLeg, call: StandInCall) => void | Promise<void>;
}

/** Rings, answers, plays its greeting and a beep, then records what it hears. */
export interface VoicemailCallee {
  kind: 'voicemail';
  /** What the greeting says (sandbox speech). */
  greeting?: string;
  /** The beep after the greeting (a tone); `false`: no beep, detection ends on silence. */
  beep?: boolean | ToneOptions;
  ringMs?: number;
  /** With `MachineDetection=Enable`: when `machine_start` is decided (default 1,000 ms). */
  amdMs?: number;
  /** The machine hangs up this long after the beep (default 120,000 ms). */
  maxMessageMs?: number;
}

export type CalleeBehaviour =
  | PersonCallee
  | VoicemailCallee
  /** The line is busy: `initiated`, `ringing`, then `busy` after `ringMs` (default 100). */
  | { kind: 'busy'; ringMs?: number }
  /** Rings until the call's `Timeout` (or `ringMs`, whichever is shorter), then `no-answer`. */
  | { kind: 'no-answer'; ringMs?: number }
  /** The carrier fails the call: `initiated`, then `failed` after `ringMs` (default 50). */
  | { kind: 'failed'; ringMs?: number }
  /** Twilio refuses to place the call at all: the REST create is a 400 (default code 21215). */
  | { kind: 'reject'; code?: number; message?: string };

export const DEFAULT_GREETING = 'Hi, you have reached Sam. Please leave a message after the tone.';

/** Statuses as the call resource shows them. */
export type CallStatus = 'queued' | 'ringing' | 'in-progress' | 'completed' | 'busy' | 'no-answer' | 'failed' | 'canceled';
/** `CallStatus` values of status callbacks: the resource's, and `initiated`. */
export type CallbackStatus = CallStatus | 'initiated';
export type TerminalStatus = 'completed' | 'busy' | 'no-answer' | 'failed' | 'canceled';
export const TERMINAL = new Set<string>(['completed', 'busy', 'no-answer', 'failed', 'canceled']);

/** One request the call made: a status callback, an AMD callback or a TwiML fetch. */
export interface CallbackRecord {
  kind: 'status' | 'amd' | 'twiml';
  /** The URL requested (for GET, with the parameters in its query string). */
  url: string;
  method: 'GET' | 'POST';
  params: Record<string, string>;
  signature: string;
  /** The HTTP status it got; `null` when it got none (refused, timed out). */
  status: number | null;
  /** The body of a TwiML answer. */
  body?: string;
  error?: string;
  at: number;
}

export interface VoicemailRecord {
  /** When the greeting finished playing. */
  greetingEndedAt: number | null;
  /** When the beep finished (the greeting's end with `beep: false`): the recording starts. */
  beepEndedAt: number | null;
  /** What the machine recorded after the beep, as the sandbox STT read it. */
  recorded: HeardLine[];
}

/** What a call needs from the stand-in that holds it. */
export interface CallContext {
  authToken: string;
  /** The stand-in's conferences (`<Dial><Conference>`). */
  conferences: Conferences;
  signal: AbortSignal;
  recordAudio: boolean;
  /** Steps between the REST create and `initiated`, and `initiated` and `ringing`. */
  queueMs: number;
}
