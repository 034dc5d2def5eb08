/**
 * The line of a voice test (DECISIONS 20): a call's `CallTransport` joined in memory to a
 * simulated caller's `MediaLeg` (src/sim/media-leg.ts) on its RTP-like wire. μ-law 8 kHz frames go
 * both ways as a SIP call's would: the caller's leg sends one every 20 ms (speech or silence), the
 * call's audio goes out paced by the call; marks are played by the clock (the audio before one
 * has played once its time has passed), `clear` drops nothing already sent. A hang-up on either
 * side ends both; a transfer is taken at once (nobody is dialled).
 */
import type { ActiveCall } from '../calls/active-call.js';
import { MULAW_8K, type CallObservation, type CallTransport } from '../calls/transport.js';
import type { RtpLink } from '../sim/media-leg.js';

/** How long after the last frame sent the far end has played it (a jitter buffer's worth). */
const PLAYOUT_MS = 60;

export class TestLine {
  private call: ActiveCall | null = null;
  private leg: { audio(frame: Buffer): void; ended(): void } | null = null;
  private audioEndsAt = 0;
  private readonly marks = new Map<NodeJS.Timeout, string>();
  private over = false;
  private readonly observers: Array<(event: CallObservation) => void> = [];

  /** The call's side of the line. */
  readonly transport: CallTransport = {
    kind: 'test',
    audioFormat: MULAW_8K,
    sendAudio: (frame) => {
      if (this.over) return;
      this.audioEndsAt = Math.max(this.audioEndsAt, performance.now()) + frame.length / 8;
      this.leg?.audio(frame);
    },
    mark: (name) => {
      const timer: NodeJS.Timeout = setTimeout(() => this.played(timer), Math.max(0, this.audioEndsAt - performance.now()) + PLAYOUT_MS);
      this.marks.set(timer, name);
    },
    clear: () => {
      this.audioEndsAt = performance.now();
      for (const timer of [...this.marks.keys()]) {
        clearTimeout(timer);
        this.played(timer);
      }
    },
    hangUp: async () => this.end(),
    transfer: async () => this.end(),
    close: () => this.end(),
    observe: (event) => {
      for (const o of this.observers) o(event);
    },
  };

  /** The caller's side of the line, for `MediaLeg.connectRtp`. */
  readonly link: RtpLink = {
    start: (input) => {
      this.leg = input;
    },
    send: (frame) => {
      if (!this.over) this.call?.audio(frame);
    },
    sendDtmf: (digit) => {
      if (!this.over) this.call?.dtmf(digit);
    },
    hangUp: async () => {
      if (this.over) return;
      this.over = true;
      this.call?.callerHungUp();
    },
    close: () => {
      this.over = true;
    },
  };

  attach(call: ActiveCall): void {
    this.call = call;
  }

  /** What happens in the call (its lines, nodes, turns), as a browser would be told. */
  onObservation(listener: (event: CallObservation) => void): void {
    this.observers.push(listener);
  }

  private played(timer: NodeJS.Timeout): void {
    const name = this.marks.get(timer);
    this.marks.delete(timer);
    if (name !== undefined && this.call && !this.call.isEnded()) this.call.played(name);
  }

  /** The line is over for both sides: pending marks come back, the caller's leg hears the end. */
  private end(): void {
    for (const timer of [...this.marks.keys()]) {
      clearTimeout(timer);
      this.played(timer);
    }
    if (this.over && !this.leg) return;
    const leg = this.leg;
    this.over = true;
    this.leg = null;
    leg?.ended();
  }
}
