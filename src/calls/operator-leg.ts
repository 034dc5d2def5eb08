/**
 * A transport's ability to dial an operator for a warm transfer (DECISIONS 16,
 * `CallTransport.dialOperator`): the operator's own leg, which the call speaks to and hears keys
 * from before the join, and the join itself, after which the carrier (a Twilio `<Conference>`) or
 * the transport (SIP and web calls: Switchboard relays the audio) carries the two legs until
 * either hangs up. docs/transfers.md.
 */
import { ErrorCodes, SwitchboardError } from '../../engine/errors.js';
import type { AudioFormat } from './transport.js';

/** Why an operator's leg was not had: the transfer's result (`declined`: their phone refused it, SIP 603). */
export type DialOutcome = 'no-answer' | 'busy' | 'declined' | 'failed';

/** `dialOperator` refused or ended without an answer: `result` says how, the message why. */
export class OperatorDialError extends SwitchboardError {
  static override readonly codes = [ErrorCodes.TRANSFER_FAILED] as const;
  override name = 'OperatorDialError';
  constructor(
    readonly result: DialOutcome,
    message: string,
  ) {
    super(ErrorCodes.TRANSFER_FAILED, message);
  }
}

export interface OperatorDialOptions {
  /** How long the operator's phone rings before the dial gives up (`no-answer`). */
  ringTimeoutMs: number;
  /** The number the operator sees: the call's number (null: the carrier's default). */
  callerId: string | null;
  /** Aborted: stop ringing (CANCEL), or hang up an answer that comes after. */
  signal: AbortSignal;
}

/** What the operator's leg tells, before the join. */
export interface OperatorLegEvents {
  /** The operator's audio, 20 ms frames of the leg's `audioFormat`. */
  audio?(frame: Buffer): void;
  key(digit: string): void;
  /** The operator hung up (told once; at once if they had already). */
  hungUp(): void;
}

/** Audio relayed between the legs after the join, for the call's recording (μ-law 8 kHz). */
export interface JoinTap {
  /** What the caller said (to the operator). */
  caller(mulaw: Buffer): void;
  /** What the operator said (to the caller). */
  operator(mulaw: Buffer): void;
}

/** The two legs joined. */
export interface JoinedLegs {
  /** Resolves once both legs are over (either hung up, and the other was hung up). */
  readonly ended: Promise<void>;
  /** Ends both legs now (the process is going away, or the call is ended from outside). */
  hangUp(): Promise<void>;
}

/** The operator's leg of a warm transfer, answered. */
export interface OperatorLeg {
  readonly audioFormat: AudioFormat;
  /** One 20 ms frame of audio to the operator, paced by the call. */
  sendAudio(frame: Buffer): void;
  listen(events: OperatorLegEvents): void;
  /** Hangs the operator's leg up (declined, or the call ended before the join). */
  hangUp(): Promise<void>;
  /**
   * Joins the caller's leg and this one: resolves once they hear each other. From then on the
   * call's own audio no longer reaches the caller, and the call hears nothing of either leg but
   * through `tap`.
   */
  join(tap?: JoinTap): Promise<JoinedLegs>;
}
