/**
 * What the assistant says, in order: utterances (a `say`, or a model reply streamed sentence by
 * sentence), each sentence synthesized by its own TTS session as soon as it is known (so the
 * first audio leaves as soon as the first sentence is ready), played strictly in order through
 * the playout (src/calls/playout.ts), with a mark after every sentence. The playout tells how far
 * the caller has played each utterance; a sentence whose end was played was heard.
 *
 * A `clear` drops what the far end buffered, so a paused or cleared sentence is sent again from
 * its start when output goes on: a sentence is heard whole or not at all.
 */
import type { TtsConfig } from '../../engine/schema.js';
import type { ProviderError, TtsProvider, TtsSession } from '../providers/types.js';
import { heardText, type Playout, type PlayoutUtterance } from './playout.js';
import { applyPronunciations, SentenceSplitter, type Pronunciation } from './text.js';

interface Sentence {
  index: number;
  text: string;
  /** Audio not yet given to the playout. */
  audio: Buffer[];
  /** Audio given to the playout and not yet heard: sent again if the far end is cleared. */
  pushed: Buffer[];
  synthesized: boolean;
  session: TtsSession | null;
  /** Where its audio ends on the utterance's playout timeline (set as its mark goes out). */
  endMs: number;
  /** Its mark went to the playout: every byte of it did. */
  sent: boolean;
  /** The caller played it to its end. */
  heard: boolean;
}

export interface UtteranceOutcome {
  /** Every sentence was played (no interruption). */
  complete: boolean;
  /** What the caller heard, sentence by sentence. */
  heardText: string;
  fullText: string;
}

export class Utterance {
  readonly sentences: Sentence[] = [];
  /** Its audio in the playout; set by the speaker that begins it. */
  playout!: PlayoutUtterance;
  finished = false;
  cancelled = false;
  private settle!: (outcome: UtteranceOutcome) => void;
  readonly played: Promise<UtteranceOutcome>;
  private settled = false;

  constructor(
    readonly id: string,
    readonly interruptible: boolean,
    /** Set when the engine asked for it (`say`): `assistant.done_speaking` names it. */
    readonly sayId: string | null,
  ) {
    this.played = new Promise((resolve) => (this.settle = resolve));
  }

  outcome(): UtteranceOutcome {
    const heard = this.sentences.filter((s) => s.heard).map((s) => ({ text: s.text, endMs: s.endMs }));
    return {
      complete: !this.cancelled && this.sentences.every((s) => s.heard),
      heardText: heardText(heard, this.playout.playedMs),
      fullText: this.sentences.map((s) => s.text).join(' '),
    };
  }

  resolve() {
    if (this.settled) return;
    this.settled = true;
    this.settle(this.outcome());
  }
}

export interface SpeakerOptions {
  playout: Playout;
  /** The TTS adapter and config in effect (node overrides are applied by the caller). */
  tts: () => { provider: TtsProvider; config: TtsConfig };
  pronunciations: () => readonly Pronunciation[];
  onError(err: ProviderError | Error): void;
}

export class Speaker {
  private readonly queue: Utterance[] = [];
  private seq = 0;
  private closed = false;
  /** Output is held (barge-in pending): nothing goes out until resume or interrupt. */
  private paused = false;
  /** `whenHeard` waiting: each utterance's sentences as they were then. */
  private readonly heardWaiters: Array<{ u: Utterance; sentences: Sentence[]; resolve: (heard: boolean) => void }> = [];

  constructor(private readonly options: SpeakerOptions) {}

  /** A new utterance at the end of the queue; add text with `addSentence`, then `finish`. */
  begin(interruptible: boolean, sayId: string | null = null): Utterance {
    const u = new Utterance(`u${++this.seq}`, interruptible, sayId);
    u.playout = this.options.playout.begin({
      progress: (positionMs) => this.played(u, positionMs),
      finished: () => this.playedOut(u),
    });
    this.queue.push(u);
    return u;
  }

  /** A whole text as one utterance, sentence by sentence (each its own mark: heard accounting). */
  say(text: string, interruptible: boolean, sayId: string | null = null): Utterance {
    const u = this.begin(interruptible, sayId);
    const splitter = new SentenceSplitter();
    for (const sentence of splitter.push(text)) this.addSentence(u, sentence);
    const rest = splitter.flush();
    if (rest) this.addSentence(u, rest);
    this.finish(u);
    return u;
  }

  addSentence(u: Utterance, text: string): void {
    if (u.cancelled || this.closed) return;
    const sentence: Sentence = {
      index: u.sentences.length,
      text,
      audio: [],
      pushed: [],
      synthesized: false,
      session: null,
      endMs: 0,
      sent: false,
      heard: false,
    };
    u.sentences.push(sentence);
    this.synthesize(u, sentence).catch((err: Error) => this.options.onError(err));
  }

  finish(u: Utterance): void {
    u.finished = true;
    this.pump();
  }

  /**
   * Resolves true once every sentence of `u` added so far has been heard (at once when it has
   * none), false if `u` is cut, dropped or the speaker closed first.
   */
  whenHeard(u: Utterance): Promise<boolean> {
    return new Promise((resolve) => {
      this.heardWaiters.push({ u, sentences: [...u.sentences], resolve });
      this.checkHeard();
    });
  }

  /** Interruptible audio is queued or playing. */
  speakingInterruptible(): boolean {
    const head = this.queue[0];
    return head !== undefined && head.interruptible && !head.cancelled;
  }

  /**
   * Something is still to be heard: an utterance whose marks have not all come back. (Not the
   * pacer's clock: the far end may play ahead of it, and its mark is what says it was played.)
   */
  speaking(): boolean {
    return this.queue.length > 0;
  }

  /**
   * Barge-in: stop output now and clear the far end; the unheard rest waits for `resume` (a false
   * interruption) or `interrupt`.
   */
  pause(): void {
    if (this.paused || this.closed) return;
    this.paused = true;
    this.clearFarEnd();
  }

  /** False interruption: the reply goes on from the start of the sentence the pause cut. */
  resume(): void {
    if (!this.paused) return;
    this.paused = false;
    this.pump();
  }

  /**
   * Confirmed interruption: drop every interruptible utterance; returns what was cut. What was not
   * cut (a closing line queued behind) is sent again from its first unheard sentence.
   */
  interrupt(): Utterance[] {
    const cut: Utterance[] = [];
    for (const u of this.queue) {
      if (!u.interruptible) continue;
      this.cancel(u);
      cut.push(u);
    }
    if (!this.paused) this.clearFarEnd();
    this.paused = false;
    this.queue.splice(0, this.queue.length, ...this.queue.filter((u) => !u.cancelled));
    for (const u of cut) u.resolve();
    this.pump();
    return cut;
  }

  /**
   * Drops one utterance (its reply was superseded or failed): nothing more of it is said. If part
   * of it was already on its way to the caller, the far end is cleared and what follows is sent
   * again from its first unheard sentence.
   */
  abandon(u: Utterance): void {
    const i = this.queue.indexOf(u);
    if (i < 0 || u.cancelled) {
      u.resolve();
      return;
    }
    const onAir = u.sentences.some((s) => (s.sent || s.pushed.length > 0) && !s.heard);
    this.cancel(u);
    this.queue.splice(i, 1);
    if (onAir && !this.paused) this.clearFarEnd();
    u.resolve();
    this.pump();
  }

  close(): void {
    this.closed = true;
    for (const u of this.queue) {
      this.cancel(u);
      u.resolve();
    }
    this.queue.length = 0;
    this.options.playout.close();
  }

  /** The caller played `u` up to `positionMs`: every sentence that ends there or before was heard. */
  private played(u: Utterance, positionMs: number) {
    for (const s of u.sentences) {
      if (!s.sent || s.heard || s.endMs > positionMs) continue;
      s.heard = true;
      s.pushed = [];
    }
    this.checkHeard();
  }

  private checkHeard() {
    for (const w of [...this.heardWaiters]) {
      const { u } = w;
      const over = u.cancelled || this.closed;
      // a sentence with no audio at the start is heard as soon as it is out
      const heard = w.sentences.every((s) => s.heard || (s.sent && s.endMs <= u.playout.playedMs));
      if (!over && !heard) continue;
      this.heardWaiters.splice(this.heardWaiters.indexOf(w), 1);
      w.resolve(!over && heard);
    }
  }

  /** `u` played to its end: it leaves the queue, over. (One cut or dropped is taken out by who cut it.) */
  private playedOut(u: Utterance) {
    if (u.cancelled) return;
    const i = this.queue.indexOf(u);
    if (i >= 0) this.queue.splice(i, 1);
    u.resolve();
  }

  /**
   * Drops everything queued and at the far end (the playout is back at what was played of each
   * utterance); each unheard sentence goes back to waiting, to be sent again whole.
   */
  private clearFarEnd() {
    this.options.playout.clear();
    for (const u of this.queue) {
      for (const s of u.sentences) {
        if (s.heard || (!s.sent && s.pushed.length === 0)) continue;
        s.audio = [...s.pushed, ...s.audio];
        s.pushed = [];
        s.sent = false;
      }
    }
  }

  private cancel(u: Utterance) {
    u.cancelled = true;
    for (const s of u.sentences) {
      s.session?.cancel();
      s.session = null;
    }
    this.options.playout.stop(u.playout);
    this.checkHeard();
  }

  private async synthesize(u: Utterance, sentence: Sentence) {
    const { provider, config } = this.options.tts();
    const text = applyPronunciations(sentence.text, this.options.pronunciations());
    try {
      const session = await provider.open(config, {
        onAudio: (mulaw) => {
          if (u.cancelled) return;
          sentence.audio.push(mulaw);
          this.pump();
        },
        onDone: () => {
          sentence.synthesized = true;
          sentence.session = null;
          this.pump();
        },
        onError: (err) => {
          sentence.synthesized = true;
          sentence.session = null;
          if (!u.cancelled) this.options.onError(err);
          this.pump();
        },
      });
      if (u.cancelled || this.closed) {
        session.cancel();
        return;
      }
      sentence.session = session;
      session.sendText(text);
      session.flush();
      session.end();
    } catch (err) {
      sentence.synthesized = true;
      if (!u.cancelled) this.options.onError(err as Error);
      this.pump();
    }
  }

  /** Moves synthesized audio into the playout, strictly in utterance and sentence order. */
  private pump() {
    if (this.closed || this.paused) return;
    const playout = this.options.playout;
    // an utterance played out leaves the queue as this runs: walk a copy
    for (const u of [...this.queue]) {
      if (u.cancelled) continue;
      for (const s of u.sentences) {
        if (s.sent) continue;
        if (s.audio.length > 0) {
          for (const chunk of s.audio) playout.push(u.playout, chunk);
          s.pushed.push(...s.audio);
          s.audio = [];
        }
        if (!s.synthesized) return;
        s.sent = true;
        s.endMs = u.playout.pushedMs;
        playout.mark(u.playout);
      }
      if (!u.finished) return;
      // everything of it is out: it is over once played (at once when it said nothing)
      playout.end(u.playout);
    }
  }
}
