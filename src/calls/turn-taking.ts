/**
 * Turn-taking with `speech_config.turn_taking` (DECISIONS §17, docs/turn-taking.md), from the
 * call's own voice-activity detector (./vad/) and the STT's words:
 * - **interruptions**: a sound shorter than `interruption_min_duration` neither stops nor pauses
 *   the assistant. A longer one pauses it (its audio cleared at the far end) and is cut once the
 *   caller's words reach `interruption_min_words` (0, the default: at once); with too few words it
 *   resumes within `false_interruption_timeout` of the sound's end;
 * - **the end of a turn**: `endpointing_min_delay` after the detected end of speech when the STT's
 *   final text is in, at most `endpointing_max_delay` after it otherwise. The vendor's endpointing
 *   (`speechFinal`, utterance end) is a hint, never a requirement.
 * Words the detector did not hear (a sound it does not take for speech, such as the sandbox modem
 * under the `webrtc` check) still make a turn: the turn then ends from the transcripts' timing
 * (the vendor's endpointing as the hint it is), and they interrupt once the caller has spoken for
 * `interruption_min_duration` (counted from the vendor's speech start) with enough words.
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
  /** A sound long enough to interrupt: pause the assistant's audio now. */
  onInterruptionStart(): void;
  /** The caller said words: the interrupted reply is abandoned. */
  onInterruptionConfirmed(): void;
  /** Too few words came: the paused reply goes on. */
  onFalseInterruption(): void;
}

export interface TurnTakingEnvironment {
  /** Interruptible assistant audio is queued or playing. */
  assistantSpeaking(): boolean;
  now(): number;
  /** The end of the caller's voiced audio the detector heard last (the call's clock). */
  voiceHeardUntil(): number;
}

export const countWords = (text: string) => (text.trim() === '' ? 0 : text.trim().split(/\s+/).length);

/** How often a sound at its duration, whose last audio the detector has not placed yet, is looked at again. */
const RECHECK_MS = 20;
/** Speech that starts again this soon after it stopped is the same sound ("Yes, … that is right"). */
const SAME_SOUND_GAP_MS = 300;

export class TurnTaking {
  private finals: string[] = [];
  private interim = '';
  /** When the last transcript with words came, and the first of the turn. */
  private lastWordsAt: number | null = null;
  private firstWordsAt: number | null = null;
  /** The last final transcript: when it came, and whether the vendor marked it the end of speech. */
  private lastFinal: { at: number; speechFinal: boolean } | null = null;
  /** The detector's current (or last) stretch of the caller's speech in this turn. */
  private voice: { startedAt: number; endedAt: number | null } | null = null;
  /** The vendor's last speech start in this turn (only for words the detector did not hear). */
  private vendorSpeechAt: number | null = null;
  private endTimer: NodeJS.Timeout | null = null;
  /** The assistant paused by a sound: resumed at `resumeTimer`, or cut by words. */
  private interruption: { resumeTimer: NodeJS.Timeout | null } | null = null;
  private durationTimer: NodeJS.Timeout | null = null;
  private closed = false;

  constructor(
    private readonly settings: TurnTakingSettings,
    private readonly handlers: TurnTakingHandlers,
    private readonly env: TurnTakingEnvironment,
  ) {}

  /** The detector: the caller's speech began at `at`. */
  voiceStarted(at: number): void {
    if (this.closed) return;
    this.cancelEndOfTurn();
    const previous = this.voice;
    const goesOn = previous !== null && previous.endedAt !== null && at - previous.endedAt <= SAME_SOUND_GAP_MS;
    this.voice = { startedAt: goesOn ? previous.startedAt : at, endedAt: null };
    // paused and speaking again: no resume while the caller goes on
    if (this.interruption?.resumeTimer) clearTimeout(this.interruption.resumeTimer);
    if (this.interruption) this.interruption.resumeTimer = null;
    this.clearDurationTimer();
    if (!this.interruption && this.env.assistantSpeaking()) {
      this.checkDurationIn(Math.max(0, this.voice.startedAt + this.minDurationMs() - this.env.now()));
    }
  }

  /** The detector: the caller's speech that began at `voiceStarted` ended at `at`. */
  voiceEnded(at: number): void {
    if (this.closed || !this.voice || this.voice.endedAt !== null) return;
    this.voice.endedAt = at;
    // a sound shorter than interruption_min_duration neither stops nor pauses the assistant
    this.clearDurationTimer();
    if (this.interruption) {
      const interruption = this.interruption;
      interruption.resumeTimer = setTimeout(
        () => {
          interruption.resumeTimer = null;
          this.falseInterruption();
        },
        Math.max(0, at + this.settings.false_interruption_timeout * 1000 - this.env.now()),
      );
    }
    this.scheduleEndOfTurn(null);
  }

  /** The vendor's own voice activity: a hint for words the detector does not hear. */
  vendorSpeechStarted(): void {
    if (this.closed) return;
    this.vendorSpeechAt = this.env.now();
    // words the detector did not hear, and the caller goes on: the turn waits for what comes next
    if (this.voice === null && this.endTimer && this.lastWordsAt !== null) this.scheduleFromWords({ text: '', isFinal: false, speechFinal: false }, true);
  }

  transcript(t: Transcript): void {
    if (this.closed) return;
    const text = t.text.trim();
    if (text !== '') {
      this.lastWordsAt = this.env.now();
      this.firstWordsAt ??= this.lastWordsAt;
    }
    if (t.isFinal) {
      if (text !== '') this.finals.push(text);
      this.interim = '';
      this.lastFinal = { at: this.env.now(), speechFinal: t.speechFinal };
    } else {
      this.interim = text;
    }
    const words = countWords(this.currentText());
    if (this.interruption) {
      if (words >= this.wordsToCut()) this.confirmInterruption();
    } else if (this.voice === null && text !== '') {
      this.considerWordsInterruption();
    }
    if (text !== '' || t.isFinal) this.scheduleEndOfTurn(t);
  }

  /** The vendor's utterance end: a hint for words the detector did not hear. */
  utteranceEnd(): void {
    if (this.closed || this.finals.length === 0 || this.voice !== null) return;
    this.scheduleFromWords({ text: '', isFinal: true, speechFinal: true }, false);
  }

  /** Drops any pending turn (DTMF arrives): a pending interruption is the caller taking the turn. */
  reset(): void {
    this.cancelEndOfTurn();
    if (this.interruption) this.confirmInterruption();
    this.clearInterruption();
    this.clearTurn();
  }

  close(): void {
    this.closed = true;
    this.cancelEndOfTurn();
    this.clearInterruption();
  }

  private currentText() {
    return [...this.finals, this.interim].filter((s) => s !== '').join(' ');
  }

  private minDurationMs() {
    return this.settings.interruption_min_duration * 1000;
  }

  /** Words that cut a paused reply: `interruption_min_words`; 0 cuts at once (DECISIONS §17, "0: at once"). */
  private wordsToCut() {
    return this.settings.interruption_min_words;
  }

  private clearTurn() {
    this.finals = [];
    this.interim = '';
    this.lastWordsAt = null;
    this.firstWordsAt = null;
    this.lastFinal = null;
    this.voice = null;
    this.vendorSpeechAt = null;
  }

  // ------------------------------------------------------------------------------------------
  // interruptions

  /**
   * Looks at the sound once it may have lasted `interruption_min_duration`: it interrupts if the
   * detector heard voiced audio that far. Node's timers count whole milliseconds on the event
   * loop's clock, so one may fire up to a millisecond or so before its delay has passed on
   * `env.now()`; and the detector places the end of a sound only after its hangover. Either way it
   * looks again, until the sound is long enough or has ended (`voiceEnded` clears the timer).
   */
  private checkDurationIn(waitMs: number) {
    this.durationTimer = setTimeout(() => {
      this.durationTimer = null;
      const voice = this.voice;
      if (!voice || voice.endedAt !== null || this.interruption || !this.env.assistantSpeaking()) return;
      const due = voice.startedAt + this.minDurationMs();
      if (this.env.voiceHeardUntil() >= due) return this.interrupt();
      const left = due - this.env.now();
      this.checkDurationIn(left > 0 ? Math.ceil(left) : RECHECK_MS);
    }, waitMs);
  }

  /** Words the detector did not hear interrupt once the caller has spoken long enough (from the vendor's speech start). */
  private considerWordsInterruption() {
    if (this.interruption || !this.env.assistantSpeaking()) return;
    if (countWords(this.currentText()) < this.wordsToCut()) return;
    const startedAt = this.vendorSpeechAt ?? this.firstWordsAt ?? this.env.now();
    const left = startedAt + this.minDurationMs() - this.env.now();
    if (left <= 0) {
      this.interrupt();
      return;
    }
    if (this.durationTimer) return;
    this.durationTimer = setTimeout(() => {
      this.durationTimer = null;
      if (this.voice === null && !this.closed) this.considerWordsInterruption();
    }, Math.ceil(left));
  }

  private interrupt() {
    this.clearDurationTimer();
    this.interruption = { resumeTimer: null };
    this.handlers.onInterruptionStart();
    if (countWords(this.currentText()) >= this.wordsToCut()) this.confirmInterruption();
  }

  private confirmInterruption() {
    if (!this.interruption) return;
    this.clearInterruption();
    this.handlers.onInterruptionConfirmed();
  }

  private falseInterruption() {
    if (!this.interruption) return;
    this.clearInterruption();
    this.handlers.onFalseInterruption();
  }

  private clearInterruption() {
    if (this.interruption?.resumeTimer) clearTimeout(this.interruption.resumeTimer);
    this.interruption = null;
    this.clearDurationTimer();
  }

  private clearDurationTimer() {
    if (this.durationTimer) clearTimeout(this.durationTimer);
    this.durationTimer = null;
  }

  // ------------------------------------------------------------------------------------------
  // the end of the turn

  /**
   * After the detector's end of speech: the short delay once the final text is in, else the long
   * one. The final text is in when there are final words and no interim after them, and the vendor
   * has been heard from since the end of speech (a final after it: it has transcribed that far; a
   * final it marked as the end of speech will do too), so the last words are not left out.
   */
  private scheduleEndOfTurn(t: Transcript | null) {
    const voice = this.voice;
    if (voice === null) {
      if (t) this.scheduleFromWords(t, false);
      return;
    }
    // still speaking: the end of speech decides
    if (voice.endedAt === null) return;
    const last = this.lastFinal;
    const finalIn = this.finals.length > 0 && this.interim === '' && last !== null && (last.at >= voice.endedAt || last.speechFinal);
    const delay = finalIn ? this.settings.endpointing_min_delay : this.settings.endpointing_max_delay;
    this.cancelEndOfTurn();
    this.endTimer = setTimeout(() => this.endOfTurn(!finalIn), Math.max(0, voice.endedAt + delay * 1000 - this.env.now()));
  }

  /**
   * Words the detector did not hear: the delays count from the last words, the short one when the
   * vendor marks the final as the end of speech (its endpointing, or its utterance end), the long
   * one otherwise; `goingOn` (the vendor heard more speech): the long one from now.
   */
  private scheduleFromWords(t: Transcript, goingOn: boolean) {
    this.cancelEndOfTurn();
    const now = this.env.now();
    if (goingOn) {
      this.endTimer = setTimeout(() => this.endOfTurn(true), this.settings.endpointing_max_delay * 1000);
      return;
    }
    const after = (delaySeconds: number) => Math.max(0, (this.lastWordsAt ?? now) + delaySeconds * 1000 - now);
    if (this.finals.length === 0 && !t.isFinal) {
      // only interim words so far: wait for the final, at most the long delay
      this.endTimer = setTimeout(() => this.endOfTurn(true), after(this.settings.endpointing_max_delay));
      return;
    }
    const short = t.isFinal && t.speechFinal;
    const delay = short ? this.settings.endpointing_min_delay : this.settings.endpointing_max_delay;
    this.endTimer = setTimeout(() => this.endOfTurn(this.interim !== ''), after(delay));
  }

  private cancelEndOfTurn() {
    if (this.endTimer) clearTimeout(this.endTimer);
    this.endTimer = null;
  }

  private endOfTurn(includeInterim: boolean) {
    this.endTimer = null;
    const text = (includeInterim ? this.currentText() : this.finals.join(' ')).trim();
    if (text === '') {
      // a sound without words (or an empty final): no turn; a pause still ends with its own timer
      if (this.voice?.endedAt !== null) this.clearTurn();
      return;
    }
    const words = countWords(text);
    this.clearTurn();
    if (this.interruption) {
      // the caller's turn is over: enough words cut the reply, fewer let it go on (and the turn waits for it)
      if (words >= this.wordsToCut()) this.confirmInterruption();
      else this.falseInterruption();
    }
    this.clearDurationTimer();
    this.handlers.onEndOfTurn(text);
  }
}
