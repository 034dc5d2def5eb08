/**
 * The far end of a call, whatever carries it (Twilio Media Streams today; SIP and the browser
 * next: docs/transports.md). A transport speaks its carrier's protocol and nothing else: it hands
 * the call audio in (in its own format), key presses, playback progress and the hang-up, and it
 * takes audio out, `clear` and progress marks. Neither kind of call knows a carrier's framing,
 * mark echoes or REST API.
 */
import type { ActiveCall } from './active-call.js';
import type { KeyFrame } from './keypad.js';
import type { TurnLatency } from './latency.js';
import type { CallMessage } from './store.js';
import type { OperatorDialOptions, OperatorLeg } from './operator-leg.js';

/** The audio a transport carries, both ways. */
export type AudioFormat =
  /** G.711 μ-law, 8 kHz mono: Twilio Media Streams, SIP PCMU. What the providers take as is. */
  | { encoding: 'mulaw'; sampleRate: 8000 }
  /** 16-bit little-endian linear PCM, mono (the browser, 16 kHz). */
  | { encoding: 'pcm16'; sampleRate: number };

export const MULAW_8K: AudioFormat = { encoding: 'mulaw', sampleRate: 8000 };

/** What a call sends to its far end. */
export interface CallTransport {
  /** The carrier, as the record names it (`twilio`). */
  readonly kind: string;
  /** The format of the audio in both directions. */
  readonly audioFormat: AudioFormat;
  /** One whole frame of assistant audio (20 ms of `audioFormat`), paced by the call. */
  sendAudio(frame: Buffer): void;
  /**
   * Frames of assistant audio the transport puts in one message (Twilio: 2, 40 ms), absent for
   * one. The call then sends speech in groups of that many frames, and calls `flushAudio` at the
   * end of each pacing step that sent audio; a transport may hold frames until the group is whole
   * or that call.
   */
  readonly framesPerMessage?: number;
  /** Sends the frames held for a message now (the transport's own `mark` sends them first; `clear` drops them). */
  flushAudio?(): void;
  /**
   * A transport with its own way to send key presses (SIP: RFC 4733 telephone-events) declares
   * this: each 20 ms frame of a key the model pressed comes here instead of `sendAudio`, in its
   * slot of the paced audio (`frame` is the key's in-band tone, in `audioFormat`, for a far end
   * that takes no events). Without it, keys are their DTMF tones in the audio (docs/keypad.md).
   */
  sendKeyFrame?(key: KeyFrame, frame: Buffer): void;
  /**
   * A progress mark after the audio sent so far: the transport calls `played(name)` on the call
   * once the far end has played that audio (or, if the far end never says, once it must have).
   */
  mark(name: string): void;
  /** Drops audio the far end has buffered and not yet played; its pending marks come back. */
  clear(): void;
  /** Ends the carrier's leg of the call (the far end may still be up though its media is gone). */
  hangUp(): Promise<void>;
  /** Moves the call to `destination` (E.164); the media ends once the carrier has taken it. */
  transfer(destination: string): Promise<void>;
  /**
   * Warm transfers (DECISIONS 16, src/calls/operator-leg.ts): dials `destination` through the
   * call's carrier; resolves with the operator's leg once they answer, rejects with an
   * `OperatorDialError` (`no-answer`, `busy`, `declined`, `failed`) otherwise. Absent: the carrier cannot, and
   * a warm transfer fails `failed`.
   */
  dialOperator?(destination: string, options: OperatorDialOptions): Promise<OperatorLeg>;
  /** Closes the media connection: the call is over on our side. */
  close(): void;
  /**
   * What happens in the call, for a far end that shows it (a web call's browser: the live
   * transcript, the current node, each turn's latency). Optional; it must not throw.
   */
  observe?(event: CallObservation): void;
}

/** What a call tells a transport that observes it (`CallTransport.observe`). */
export type CallObservation =
  /** A line of the transcript, as the record keeps it. */
  | { type: 'message'; message: CallMessage }
  /** The workflow moved to another node. */
  | { type: 'node'; node_id: string; nodes_visited: string[] }
  /** The caller's turn ended: its latency clock starts. */
  | { type: 'turn'; node_id: string | null }
  /** That turn's figures, once its first reply frame left. */
  | { type: 'latency'; latency: TurnLatency }
  /** The call is over (sent before `close`). */
  | { type: 'ended'; ended_reason: string };

/**
 * What a transport hands the call: the call's side of the seam. A transport calls these from its
 * own socket events; what they throw ends that call (`ActiveCall.fail`), never the process.
 */
export type CallInput = Pick<ActiveCall, 'audio' | 'dtmf' | 'played' | 'callerHungUp' | 'farEndGone' | 'fail' | 'isEnded'>;
