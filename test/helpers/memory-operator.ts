/**
 * The operator's side of a warm transfer in memory (`MemoryTransport.dialOperator`, for the fast
 * call tests): a phone that answers after a while, is busy, fails, or rings until the dial gives
 * up; once answered, a leg that records what the operator heard (frames with their fake-clock
 * times), presses keys and hangs up; and the join, after which the caller and the operator hear
 * each other (what each says is kept) until either hangs up, and the other is hung up.
 */
import { OperatorDialError, type JoinedLegs, type JoinTap, type OperatorDialOptions, type OperatorLeg, type OperatorLegEvents } from '../../src/calls/operator-leg.js';
import { MULAW_8K } from '../../src/calls/transport.js';

export type OperatorPhone =
  /** Answers after `afterMs` (default 1,000). */
  | { answer: 'yes'; afterMs?: number }
  /** Busy, or the carrier fails the dial, after `afterMs` (default 200). */
  | { answer: 'busy' | 'failed'; afterMs?: number }
  /** Rings until the dial gives up. */
  | { answer: 'never' };

export interface OperatorDial {
  destination: string;
  ringTimeoutMs: number;
  callerId: string | null;
  at: number;
  /** When the dial was given up while ringing (the signal), or null. */
  canceledAt: number | null;
  leg: MemoryOperatorLeg | null;
}

/** Dials as the memory transport's carrier would: `phone` says how the operator's phone behaves. */
export function dialMemoryOperator(
  phone: OperatorPhone,
  destination: string,
  options: OperatorDialOptions,
  bridge: MemoryBridgeHost,
  dials: OperatorDial[],
): Promise<OperatorLeg> {
  const dial: OperatorDial = { destination, ringTimeoutMs: options.ringTimeoutMs, callerId: options.callerId, at: performance.now(), canceledAt: null, leg: null };
  dials.push(dial);
  return new Promise<OperatorLeg>((resolve, reject) => {
    let timer: NodeJS.Timeout | null = null;
    const cancel = () => {
      if (timer) clearTimeout(timer);
      dial.canceledAt = performance.now();
      reject(new OperatorDialError('no-answer', 'the dial was given up'));
    };
    if (options.signal.aborted) return cancel();
    options.signal.addEventListener('abort', cancel, { once: true });
    if (phone.answer === 'never') return;
    const afterMs = phone.afterMs ?? (phone.answer === 'yes' ? 1_000 : 200);
    timer = setTimeout(() => {
      options.signal.removeEventListener('abort', cancel);
      if (phone.answer === 'yes') {
        dial.leg = new MemoryOperatorLeg(bridge);
        resolve(dial.leg);
      } else reject(new OperatorDialError(phone.answer, phone.answer === 'busy' ? 'the operator is busy (486)' : 'the carrier failed the dial (503)'));
    }, afterMs);
  });
}

/** What the bridge needs of the caller's transport. */
export interface MemoryBridgeHost {
  /** The caller's leg is joined to `leg` (or no longer, with null). */
  joinedTo(leg: MemoryOperatorLeg | null): void;
  /** The caller's leg is hung up by the bridge. */
  hangUpCaller(): void;
}

export class MemoryOperatorLeg implements OperatorLeg {
  readonly audioFormat = MULAW_8K;
  readonly answeredAt = performance.now();
  /** Frames the operator heard (from the call before the join), with when they arrived. */
  readonly heard: Array<{ frame: Buffer; at: number }> = [];
  /** What the caller said to the operator after the join. */
  readonly fromCaller: Buffer[] = [];
  hungUpAt: number | null = null;
  /** Who hung the leg up: the operator, or the call (declined, the call ended, the other leg). */
  hungUpBy: 'operator' | 'call' | null = null;
  joinedAt: number | null = null;
  private events: OperatorLegEvents | null = null;
  private tap: JoinTap | undefined;
  private over: (() => void) | null = null;
  private legs: JoinedLegs | null = null;

  constructor(private readonly host: MemoryBridgeHost) {}

  // ---------------------------------------------------------------------------------------------
  // the call's side

  sendAudio(frame: Buffer): void {
    if (this.hungUpAt === null) this.heard.push({ frame: Buffer.from(frame), at: performance.now() });
  }

  listen(events: OperatorLegEvents): void {
    this.events = events;
    if (this.hungUpAt !== null) events.hungUp();
  }

  async hangUp(): Promise<void> {
    this.end('call');
  }

  async join(tap?: JoinTap): Promise<JoinedLegs> {
    if (this.hungUpAt !== null) throw new Error('the operator hung up');
    this.tap = tap;
    this.joinedAt = performance.now();
    const ended = new Promise<void>((resolve) => (this.over = resolve));
    this.host.joinedTo(this);
    this.legs = {
      ended,
      hangUp: async () => {
        this.end('call');
        this.host.hangUpCaller();
      },
    };
    return this.legs;
  }

  // ---------------------------------------------------------------------------------------------
  // the operator

  press(digit: string): void {
    if (this.hungUpAt === null && this.joinedAt === null) this.events?.key(digit);
  }

  /** The operator speaks (after the join: the caller hears it). */
  speak(frame: Buffer): void {
    if (this.hungUpAt !== null) return;
    if (this.joinedAt === null) this.events?.audio?.(frame);
    else this.tap?.operator(frame);
  }

  /** The operator hangs up: before the join the call is told; after it, the caller is hung up. */
  hangUpByOperator(): void {
    if (this.hungUpAt !== null) return;
    this.end('operator');
    if (this.joinedAt !== null) this.host.hangUpCaller();
    else this.events?.hungUp();
  }

  // ---------------------------------------------------------------------------------------------
  // the bridge

  /** The caller spoke while joined. */
  callerAudio(frame: Buffer): void {
    if (this.hungUpAt !== null) return;
    this.fromCaller.push(Buffer.from(frame));
    this.tap?.caller(frame);
  }

  /** The caller hung up while joined: the operator is hung up. */
  callerHungUp(): void {
    this.end('call');
  }

  private end(by: 'operator' | 'call'): void {
    if (this.hungUpAt !== null) return;
    this.hungUpAt = performance.now();
    this.hungUpBy = by;
    if (this.joinedAt !== null) {
      this.host.joinedTo(null);
      this.over?.();
    }
  }
}
