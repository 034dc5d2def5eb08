/**
 * A call's far end in memory (a `CallTransport`, docs/transports.md), for the fast call tests:
 * it records everything the call sends (frames with the fake-clock time they left and when they
 * play, marks, clears, hang-ups, transfers, the close) and plays it as Twilio does (and as the
 * simulated caller of src/sim/caller.ts, which the real-time tests rely on, does):
 *
 * - frames play one after another in real (fake) time, each 20 ms, from when it arrived or when
 *   the one before it ended;
 * - a mark is answered with `played(name)` once the audio sent before it has played (on a later
 *   turn of the loop, as an echo over a socket, never inside the call's own `mark()`);
 * - `clear()` drops the audio not yet played (the frame playing is cut where it is) and answers
 *   the marks still pending at once, as echoes of a clear (the call tells them from real ones by
 *   what it sent after);
 * - the caller's side: `audio(frame)`, `dtmf(digit)`, `callerHangsUp()`, `farEndGone(why)`, each
 *   called inside a `try` that ends the call on a throw (as the Twilio transport's `toCall`);
 * - warm transfers: `dialOperator` rings the operator's phone of `options.operator` (./memory-operator.ts);
 *   once joined, the caller's audio and hang-up go to the operator's leg, not to the call.
 */
import type { KeyFrame } from '../../src/calls/keypad.js';
import { FRAME_MS } from '../../src/calls/outbound.js';
import { MULAW_8K, type AudioFormat, type CallInput, type CallTransport } from '../../src/calls/transport.js';
import type { OperatorDialOptions, OperatorLeg } from '../../src/calls/operator-leg.js';
import { dialMemoryOperator, type MemoryOperatorLeg, type OperatorDial, type OperatorPhone } from './memory-operator.js';

export interface SentFrame {
  frame: Buffer;
  /** Fake performance.now() when the call sent it. */
  sentAt: number;
  /** When it starts and stops playing at the far end, unless a clear dropped or cut it. */
  startsAt: number;
  endsAt: number;
  /** A clear came before it started playing: the caller never heard any of it. */
  dropped: boolean;
  /** A clear (or the close) came while it played: heard up to then. */
  cutAt: number | null;
}

export interface SentMark {
  name: string;
  sentAt: number;
  /** When the far end answered it (`played(name)` reached the call), or null. */
  answeredAt: number | null;
  /** It was pending when a clear came: its answer is a clear's echo, not "played". */
  cleared: boolean;
}

export interface MemoryTransportOptions {
  /** Answer marks (default true); false is a far end that never does. */
  echoMarks?: boolean;
  /** Fake ms from a mark's audio having played to the call getting its answer (default 0). */
  markLatencyMs?: number;
  /** How the carrier takes a transfer: after `delayMs`, or refused with `error`. */
  transfer?: { delayMs?: number; error?: Error };
  /** How the carrier takes a hang-up. */
  hangUp?: { delayMs?: number; error?: Error };
  audioFormat?: AudioFormat;
  /** The operator's phone of a warm transfer (default: answers after 1 s). */
  operator?: OperatorPhone;
  /** The transport sends keys its own way (as SIP sends RFC 4733 events): it declares `sendKeyFrame`. */
  sendsKeys?: boolean;
}

export interface SentKeyFrame {
  key: KeyFrame;
  sentAt: number;
  /** When its slot plays at the far end. */
  startsAt: number;
}

export class MemoryTransport implements CallTransport {
  readonly kind = 'memory';
  readonly audioFormat: AudioFormat;
  readonly frames: SentFrame[] = [];
  readonly marks: SentMark[] = [];
  /** When each `clear()` came. */
  readonly clears: number[] = [];
  readonly hangUps: number[] = [];
  readonly transfers: Array<{ destination: string; at: number }> = [];
  closedAt: number | null = null;
  /** Frames or marks sent after `close()` (a call must send none). */
  sentAfterClose = 0;
  /** Warm transfers' dials, in order. */
  readonly operatorDials: OperatorDial[] = [];
  /** The operator's leg the caller is joined to, while joined. */
  joined: MemoryOperatorLeg | null = null;
  /** Frames the call sent while the caller was joined to an operator (it must send none). */
  sentWhileJoined = 0;
  /** Key frames, when the transport sends keys its own way (`sendsKeys`). */
  readonly keyFrames: SentKeyFrame[] = [];
  sendKeyFrame?: (key: KeyFrame, frame: Buffer) => void;

  private call: CallInput | null = null;
  /** When the audio sent so far will have played. */
  private playEnd = 0;
  private readonly pending = new Map<SentMark, NodeJS.Timeout>();
  private readonly echoes = new Set<NodeJS.Timeout>();

  constructor(private readonly options: MemoryTransportOptions = {}) {
    this.audioFormat = options.audioFormat ?? MULAW_8K;
    if (options.sendsKeys) {
      this.sendKeyFrame = (key) => {
        const now = performance.now();
        if (this.closedAt !== null) {
          this.sentAfterClose++;
          return;
        }
        const startsAt = Math.max(now, this.playEnd);
        this.playEnd = startsAt + FRAME_MS;
        this.keyFrames.push({ key, sentAt: now, startsAt });
      };
    }
  }

  /** The call this transport carries (it drives the call through these methods). */
  attach(call: CallInput): void {
    this.call = call;
  }

  // ------------------------------------------------------------------------------------------
  // what the call sends

  sendAudio(frame: Buffer): void {
    const now = performance.now();
    if (this.joined) {
      this.sentWhileJoined++;
      return;
    }
    if (this.closedAt !== null) {
      this.sentAfterClose++;
      return;
    }
    const startsAt = Math.max(now, this.playEnd);
    this.playEnd = startsAt + FRAME_MS;
    this.frames.push({ frame: Buffer.from(frame), sentAt: now, startsAt, endsAt: this.playEnd, dropped: false, cutAt: null });
  }

  mark(name: string): void {
    const now = performance.now();
    if (this.closedAt !== null) {
      this.sentAfterClose++;
      return;
    }
    const mark: SentMark = { name, sentAt: now, answeredAt: null, cleared: false };
    this.marks.push(mark);
    if (this.options.echoMarks === false) return;
    const playedAt = Math.max(now, this.playEnd);
    this.pending.set(
      mark,
      setTimeout(() => {
        this.pending.delete(mark);
        this.answer(mark);
      }, playedAt - now + (this.options.markLatencyMs ?? 0)),
    );
  }

  clear(): void {
    const now = performance.now();
    this.clears.push(now);
    this.stopPlaying(now);
    // Twilio sends back the marks still pending
    for (const [mark, timer] of this.pending) {
      clearTimeout(timer);
      mark.cleared = true;
      this.echo(() => this.answer(mark));
    }
    this.pending.clear();
  }

  async hangUp(): Promise<void> {
    this.hangUps.push(performance.now());
    await this.carrier(this.options.hangUp);
  }

  async transfer(destination: string): Promise<void> {
    this.transfers.push({ destination, at: performance.now() });
    await this.carrier(this.options.transfer);
  }

  dialOperator(destination: string, options: OperatorDialOptions): Promise<OperatorLeg> {
    const host = {
      joinedTo: (leg: MemoryOperatorLeg | null) => {
        this.joined = leg;
      },
      hangUpCaller: () => {
        this.hangUps.push(performance.now());
      },
    };
    return dialMemoryOperator(this.options.operator ?? { answer: 'yes' }, destination, options, host, this.operatorDials);
  }

  close(): void {
    if (this.closedAt !== null) return;
    const now = performance.now();
    this.closedAt = now;
    this.stopPlaying(now);
    for (const timer of this.pending.values()) clearTimeout(timer);
    this.pending.clear();
    for (const timer of this.echoes) clearTimeout(timer);
    this.echoes.clear();
  }

  // ------------------------------------------------------------------------------------------
  // the caller's side

  audio(frame: Buffer): void {
    if (this.joined) return this.joined.callerAudio(frame);
    this.toCall('caller audio', (c) => c.audio(frame));
  }

  dtmf(digit: string): void {
    this.toCall('key press', (c) => c.dtmf(digit));
  }

  callerHangsUp(): void {
    if (this.joined) return this.joined.callerHungUp();
    this.toCall('hang-up', (c) => c.callerHungUp());
  }

  farEndGone(why: string): void {
    this.toCall('far end gone', (c) => c.farEndGone(why));
  }

  // ------------------------------------------------------------------------------------------
  // what the caller heard

  /** The frame played whole by `now` (not dropped, not cut, its 20 ms over). */
  playedWhole(f: SentFrame, now = performance.now()): boolean {
    return !f.dropped && f.cutAt === null && f.endsAt <= now;
  }

  /** True while audio sent is still to play at the far end. */
  playing(now = performance.now()): boolean {
    return this.playEnd > now;
  }

  /** Frames sent after fake time `t`. */
  framesAfter(t: number): SentFrame[] {
    return this.frames.filter((f) => f.sentAt > t);
  }

  // ------------------------------------------------------------------------------------------

  private stopPlaying(now: number): void {
    for (const f of this.frames) {
      if (f.dropped || f.cutAt !== null || f.endsAt <= now) continue;
      if (f.startsAt >= now) f.dropped = true;
      else f.cutAt = now;
    }
    this.playEnd = Math.min(this.playEnd, now);
  }

  private answer(mark: SentMark): void {
    mark.answeredAt = performance.now();
    this.toCall('mark', (c) => c.played(mark.name));
  }

  /** An answer on a later turn of the loop, as over a socket. */
  private echo(fn: () => void): void {
    const timer = setTimeout(() => {
      this.echoes.delete(timer);
      fn();
    }, this.options.markLatencyMs ?? 0);
    this.echoes.add(timer);
  }

  private async carrier(behaviour: { delayMs?: number; error?: Error } | undefined): Promise<void> {
    if (behaviour?.delayMs) await new Promise((r) => setTimeout(r, behaviour.delayMs));
    if (behaviour?.error) throw behaviour.error;
  }

  private toCall(what: string, fn: (call: CallInput) => void): void {
    const call = this.call;
    if (!call || call.isEnded()) return;
    try {
      fn(call);
    } catch (err) {
      call.fail(err, what);
    }
  }
}
