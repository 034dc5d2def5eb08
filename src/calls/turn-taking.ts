/**
 * Turn-taking with `speech_config.turn_taking` (the LiveKit Agents settings):
 * - end of the caller's turn between `endpointing_min_delay` and `endpointing_max_delay` after the
 *   caller's last words: the short delay when the transcript is final and ends a sentence (later
 *   results, such as the vendor's utterance end, never push the end of the turn further out);
 * - barge-in when the caller speaks for `interruption_min_duration` and says
 *   `interruption_min_words` while interruptible assistant audio plays: the audio is paused (and the
 *   far end cleared) at once; words confirm the interruption; no words within
 *   `false_interruption_timeout` make it a false one, and the reply resumes.
 */
import type { Transcript } from '../providers/types.js';

export interface TurnTakingSettings {
  endpointing_min_delay: number;
  endpointing_max_delay: number;
  interruption_min_duration: number;
  interruption_min_words: number;
  false_interruption_timeout: number;
}

export interface TurnTakingHandlers {
  /** The caller finished a turn. */
  onEndOfTurn(text: string): void;
  /** Barge-in threshold reached: stop assistant audio now. */
  onInterruptionStart(): void;
  /** The caller said words: the interrupted reply is abandoned. */
  onInterruptionConfirmed(): void;
  /** No words came: the interrupted reply goes on. */
  onFalseInterruption(): void;
}

export interface TurnTakingEnvironment {
  /** Interruptible assistant audio is queued or playing. */
  assistantSpeaking(): boolean;
  now(): number;
}

const SENTENCE_END = /[.!?…。？！]["')\]]*\s*$/;
export const countWords = (text: string) => (text.trim() === '' ? 0 : text.trim().split(/\s+/).length);

export class TurnTaking {
  private finals: string[] = [];
  private interim = '';
  private speechStartedAt: number | null = null;
  /** When the last transcript with words came: the end-of-turn delays count from there. */
  private lastWordsAt: number | null = null;
  private endTimer: NodeJS.Timeout | null = null;
  private interruption: { confirmTimer: NodeJS.Timeout | null } | null = null;
  private durationTimer: NodeJS.Timeout | null = null;
  private closed = false;

  constructor(
    private readonly settings: TurnTakingSettings,
    private readonly handlers: TurnTakingHandlers,
    private readonly env: TurnTakingEnvironment,
  ) {}

  /** Voice activity: the caller started speaking. */
  speechStarted(): void {
    if (this.closed) return;
    this.cancelEndOfTurn();
    // the interruption duration counts from the start of this stretch of speech
    this.speechStartedAt = this.env.now();
    if (this.durationTimer) clearTimeout(this.durationTimer);
    this.durationTimer = null;
    if (this.env.assistantSpeaking() && !this.interruption) this.checkDurationIn(this.settings.interruption_min_duration * 1000);
  }

  transcript(t: Transcript): void {
    if (this.closed) return;
    const text = t.text.trim();
    if (this.speechStartedAt === null && text !== '') this.speechStartedAt = this.env.now();
    if (text !== '') this.lastWordsAt = this.env.now();
    if (t.isFinal) {
      if (text !== '') this.finals.push(text);
      this.interim = '';
    } else {
      this.interim = text;
    }
    const heard = this.currentText();
    if (this.interruption && countWords(heard) >= Math.max(1, this.settings.interruption_min_words)) {
      this.confirmInterruption();
    } else if (!this.interruption) {
      this.considerInterruption(heard);
    }
    if (text !== '' || t.isFinal) this.scheduleEndOfTurn(t);
  }

  /** The vendor's utterance end: the caller stopped; decide with what we have. */
  utteranceEnd(): void {
    if (this.closed || this.finals.length === 0) return;
    this.scheduleEndOfTurn({ text: '', isFinal: true, speechFinal: true });
  }

  /** Drops any pending turn (DTMF arrives): a pending interruption is the caller taking the turn. */
  reset(): void {
    this.cancelEndOfTurn();
    if (this.interruption) this.confirmInterruption();
    this.clearInterruption();
    this.finals = [];
    this.interim = '';
    this.speechStartedAt = null;
    this.lastWordsAt = null;
  }

  close(): void {
    this.closed = true;
    this.cancelEndOfTurn();
    this.clearInterruption();
  }

  private currentText() {
    return [...this.finals, this.interim].filter((s) => s !== '').join(' ');
  }

  /**
   * Considers the interruption once the caller has spoken for `interruption_min_duration` (words
   * or not: a noise gives no transcript to consider it again). Node's timers count whole
   * milliseconds on the event loop's clock, so one may fire up to a millisecond or so before its
   * delay has passed on `env.now()`: the rest is then waited for rather than the check lost.
   */
  private checkDurationIn(waitMs: number) {
    this.durationTimer = setTimeout(() => {
      this.durationTimer = null;
      if (this.speechStartedAt === null) return;
      const left = this.settings.interruption_min_duration * 1000 - (this.env.now() - this.speechStartedAt);
      if (left > 0) this.checkDurationIn(Math.ceil(left));
      else this.considerInterruption(this.currentText());
    }, waitMs);
  }

  private considerInterruption(heard: string) {
    if (this.interruption || !this.env.assistantSpeaking() || this.speechStartedAt === null) return;
    const spokenMs = this.env.now() - this.speechStartedAt;
    if (spokenMs < this.settings.interruption_min_duration * 1000) return;
    if (countWords(heard) < this.settings.interruption_min_words) return;
    this.interruption = { confirmTimer: null };
    this.handlers.onInterruptionStart();
    if (countWords(heard) >= 1) {
      this.confirmInterruption();
      return;
    }
    this.interruption.confirmTimer = setTimeout(() => {
      this.interruption = null;
      this.speechStartedAt = null;
      this.handlers.onFalseInterruption();
    }, this.settings.false_interruption_timeout * 1000);
  }

  private confirmInterruption() {
    if (!this.interruption) return;
    this.clearInterruption();
    this.handlers.onInterruptionConfirmed();
  }

  private clearInterruption() {
    if (this.interruption?.confirmTimer) clearTimeout(this.interruption.confirmTimer);
    this.interruption = null;
    if (this.durationTimer) clearTimeout(this.durationTimer);
    this.durationTimer = null;
  }

  private scheduleEndOfTurn(t: Transcript) {
    this.cancelEndOfTurn();
    const now = this.env.now();
    const after = (delaySeconds: number) => Math.max(0, (this.lastWordsAt ?? now) + delaySeconds * 1000 - now);
    if (this.finals.length === 0 && !t.isFinal) {
      // only interim words so far: wait for the final, at most the long delay
      this.endTimer = setTimeout(() => this.endOfTurn(true), after(this.settings.endpointing_max_delay));
      return;
    }
    const all = this.currentText();
    const short = t.isFinal && t.speechFinal && SENTENCE_END.test(all);
    const delay = short ? this.settings.endpointing_min_delay : this.settings.endpointing_max_delay;
    this.endTimer = setTimeout(() => this.endOfTurn(false), after(delay));
  }

  private cancelEndOfTurn() {
    if (this.endTimer) clearTimeout(this.endTimer);
    this.endTimer = null;
  }

  private endOfTurn(includeInterim: boolean) {
    this.endTimer = null;
    const text = (includeInterim ? this.currentText() : this.finals.join(' ')).trim();
    // nothing said (an empty final): a pending interruption still waits for words or its timeout
    if (text === '') return;
    this.finals = [];
    this.interim = '';
    this.speechStartedAt = null;
    this.lastWordsAt = null;
    if (this.interruption) this.confirmInterruption();
    this.clearInterruption();
    this.handlers.onEndOfTurn(text);
  }
}
