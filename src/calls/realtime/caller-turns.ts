/**
 * A realtime call's protection against short noises (docs/turn-taking.md, Realtime calls): the
 * vendor's VAD still takes the turns, and our voice-activity detector, run on the same audio,
 * decides what may cut the assistant and whether a reply the vendor started is one to a noise.
 *
 * - A sound our detector hears for `interruption_min_duration` cuts what plays (at that moment),
 *   as do the caller's words (`interruption_min_words`, at least one) before the reply to them
 *   has begun; a shorter sound with no words cuts nothing.
 * - The vendor's reply to a turn our detector did not hear as long speech waits (its audio is
 *   held) until the turn's transcript says whether it had words: with words it plays, with none
 *   it is dropped and forgotten; with no transcript after `HOLD_MS` it plays, and is cut if an
 *   empty transcript comes later.
 * - A turn with words that the vendor did not answer (a response of its own was under way) is
 *   asked for by the call.
 */
import { createSpeechDetector, type SpeechDetector } from '../vad/index.js';
import type { VadKind } from '../../../engine/schema.js';

/** The longest a reply to a short sound waits for its transcript before it plays anyway. */
export const HOLD_MS = 1_000;

export interface TurnReply {
  /** The reply's audio is held until the turn's words are known. */
  held: boolean;
}

interface Turn {
  /** Our detector heard speech of `interruption_min_duration` in it. */
  long: boolean;
  /** The caller's words: null until the vendor's final transcript of the turn (or words before it). */
  words: boolean | null;
  /** The reply the vendor started for it. */
  reply: TurnReply | null;
  /** The vendor answers it (false: a response of its own was under way, and it refuses to start another). */
  vendorAnswers: boolean;
  /** The call asked for its reply instead. */
  asked: boolean;
  holdTimer: NodeJS.Timeout | null;
}

const newTurn = (long: boolean): Turn => ({ long, words: null, reply: null, vendorAnswers: true, asked: false, holdTimer: null });

export interface CallerTurnsEvents {
  /** Assistant audio is out that the caller may cut. */
  interruptible(): boolean;
  /** The caller spoke over the assistant: cut what plays. */
  cut(): void;
  /** The held reply plays. */
  release(reply: TurnReply): void;
  /** The reply answered a noise: stop it and forget the turn. */
  drop(reply: TurnReply): void;
  /** A turn with words the vendor did not answer: ask for its reply. */
  answer(): void;
}

export interface CallerTurnsOptions {
  vad: VadKind;
  minDurationMs: number;
  minWords: number;
  shield: <T extends object>(handlers: T, what: string) => T;
}

export class CallerTurns {
  private readonly detector: SpeechDetector;
  private soundTimer: NodeJS.Timeout | null = null;
  /** The detector's current (or last) stretch lasted `minDurationMs`. */
  private soundLong = false;
  /** Vendor speech started and not stopped. */
  private open: Turn | null = null;
  /** Stopped turns whose final transcript has not come, oldest first. */
  private awaiting: Turn[] = [];
  /** The turn stopped last: the vendor's next reply answers it. */
  private lastStopped: Turn | null = null;
  private closed = false;

  constructor(
    private readonly o: CallerTurnsOptions,
    private readonly events: CallerTurnsEvents,
  ) {
    this.detector = createSpeechDetector(o.vad, o.shield({
      onSpeechStart: (at: number) => this.soundStarted(at),
      onSpeechEnd: () => undefined,
    }, 'voice activity'), { now: () => performance.now() });
  }

  /** The caller's audio as it came (not what the vendor was sent instead over a closing line). */
  audio(mulaw: Buffer): void {
    this.detector.push(mulaw);
  }

  /** The vendor heard the caller start. */
  vendorStarted(): void {
    this.open = newTurn(this.soundLong && this.detector.speaking);
  }

  /** The vendor ended the caller's turn; `vendorAnswers`: nothing of its own was under way, so it answers it. */
  vendorStopped(vendorAnswers: boolean): void {
    const t = this.open ?? newTurn(false);
    this.open = null;
    t.vendorAnswers = vendorAnswers;
    this.awaiting.push(t);
    this.lastStopped = vendorAnswers ? t : null;
  }

  /** The caller's words (`final`: the vendor's transcript of a whole turn, empty for a noise). */
  words(text: string, final: boolean): void {
    const count = text.trim() === '' ? 0 : text.trim().split(/\s+/).length;
    const t = final ? (this.awaiting.shift() ?? this.open) : (this.open ?? this.awaiting[0] ?? null);
    // words are never a noise; they cut only what was out before the reply to them began
    if (count >= Math.max(1, this.o.minWords) && !t?.reply && this.events.interruptible()) this.events.cut();
    if (!t) return;
    if (count > 0) t.words = true;
    else if (final && t.words === null) t.words = false;
    if (final && t.words && !t.vendorAnswers && !t.asked) {
      t.asked = true;
      this.events.answer();
    }
    if (!t.reply || t.words === null) return;
    this.clearHold(t);
    if (t.words) {
      if (t.reply.held) this.events.release(t.reply);
    } else {
      this.events.drop(t.reply);
    }
  }

  /** The vendor began its reply to the last turn: `held` is whether its audio waits for the words. */
  replyStarted(reply: TurnReply): void {
    const t = this.lastStopped;
    this.lastStopped = null;
    reply.held = false;
    if (!t || t.long || t.words === true) {
      if (t) t.reply = reply;
      return;
    }
    t.reply = reply;
    if (t.words === false) {
      this.events.drop(reply);
      return;
    }
    reply.held = true;
    t.holdTimer = setTimeout(() => {
      t.holdTimer = null;
      if (!this.closed && reply.held) this.events.release(reply);
    }, HOLD_MS);
  }

  close(): void {
    this.closed = true;
    this.detector.close();
    if (this.soundTimer) clearTimeout(this.soundTimer);
    this.soundTimer = null;
    for (const t of [this.open, ...this.awaiting, this.lastStopped]) if (t) this.clearHold(t);
    this.awaiting = [];
  }

  /** Our detector heard speech begin at `at` (the audio's time): is it still speech `minDurationMs` later? */
  private soundStarted(at: number): void {
    this.soundLong = false;
    if (this.soundTimer) clearTimeout(this.soundTimer);
    const due = at + this.o.minDurationMs;
    this.soundTimer = setTimeout(() => {
      this.soundTimer = null;
      if (this.closed || !(this.detector.speaking || this.detector.heardUntil >= due)) return;
      this.soundLong = true;
      if (this.open) this.open.long = true;
      if (this.events.interruptible()) this.events.cut();
    }, Math.max(0, Math.ceil(due - performance.now())));
  }

  private clearHold(t: Turn): void {
    if (t.holdTimer) clearTimeout(t.holdTimer);
    t.holdTimer = null;
  }
}
