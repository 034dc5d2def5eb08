/**
 * What the assistant says, in order: utterances (a `say`, or a model reply streamed sentence by
 * sentence), each sentence synthesized by its own TTS session as soon as it is known (so the
 * first audio leaves as soon as the first sentence is ready), played strictly in order through
 * the pacer, with a mark after every sentence. Marks echoed by the far end tell what the caller
 * actually heard; marks echoed after a `clear` were dropped, not heard.
 *
 * A `clear` drops what the far end buffered, so a paused or cleared sentence is sent again from
 * its start (under a new mark name) when output goes on: a sentence is heard whole or not at all.
 */
import type { TtsConfig } from '../../engine/schema.js';
import type { ProviderError, TtsProvider, TtsSession } from '../providers/types.js';
import type { OutboundPacer } from './outbound.js';
import { applyPronunciations, SentenceSplitter, type Pronunciation } from './text.js';

interface Sentence {
  index: number;
  text: string;
  /** Audio not yet given to the pacer. */
  audio: Buffer[];
  /** Audio given to the pacer and not yet heard: sent again if the far end is cleared. */
  pushed: Buffer[];
  synthesized: boolean;
  session: TtsSession | null;
  markName: string;
  /** How many times the sentence was sent again after a clear (gives each send its own mark). */
  resends: number;
  /** Its mark went to the pacer: every byte of it did. */
  sent: boolean;
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
  finished = false;
  cancelled = false;
  startedAudio = false;
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
    const heard = this.sentences.filter((s) => s.heard).map((s) => s.text);
    return {
      complete: !this.cancelled && this.sentences.every((s) => s.heard),
      heardText: heard.join(' '),
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
  pacer: OutboundPacer;
  /** The TTS adapter and config in effect (node overrides are applied by the caller). */
  tts: () => { provider: TtsProvider; config: TtsConfig };
  pronunciations: () => readonly Pronunciation[];
  onError(err: ProviderError | Error): void;
  /** First audio of an utterance went to the pacer (latency instrumentation). */
  onFirstAudio?(utterance: Utterance): void;
}

export class Speaker {
  private readonly queue: Utterance[] = [];
  private readonly marks = new Map<string, { utterance: Utterance; sentence: Sentence }>();
  private seq = 0;
  private closed = false;
  /** Output is held (barge-in pending): nothing goes to the pacer until resume or interrupt. */
  private paused = false;

  constructor(private readonly options: SpeakerOptions) {}

  /** A new utterance at the end of the queue; add text with `addSentence`, then `finish`. */
  begin(interruptible: boolean, sayId: string | null = null): Utterance {
    const u = new Utterance(`u${++this.seq}`, interruptible, sayId);
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
      markName: `${u.id}.${u.sentences.length}`,
      resends: 0,
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

  /**
   * The far end echoed a mark: that sentence was played. Marks out when the far end was cleared
   * are no longer known (their sentences wait under new names), so their echoes count for nothing.
   */
  onMark(name: string): void {
    this.markHeard(name);
  }

  close(): void {
    this.closed = true;
    for (const u of this.queue) {
      this.cancel(u);
      u.resolve();
    }
    this.queue.length = 0;
    this.marks.clear();
    this.options.pacer.close();
  }

  private markHeard(name: string) {
    const m = this.marks.get(name);
    if (!m) return;
    this.marks.delete(name);
    m.sentence.heard = true;
    m.sentence.pushed = [];
    this.afterMark(m.utterance);
  }

  /**
   * Drops everything queued in the pacer and at the far end. Marks still out are now echoes of a
   * clear (not heard); each unheard sentence goes back to waiting, to be sent again whole.
   */
  private clearFarEnd() {
    this.options.pacer.clear();
    this.marks.clear();
    for (const u of this.queue) {
      for (const s of u.sentences) {
        if (s.heard || (!s.sent && s.pushed.length === 0)) continue;
        s.audio = [...s.pushed, ...s.audio];
        s.pushed = [];
        s.sent = false;
        s.markName = `${u.id}.${s.index}.${++s.resends}`;
      }
    }
  }

  private afterMark(u: Utterance) {
    const waiting = u.sentences.some((s) => !s.sent || this.marks.has(s.markName));
    if (u.finished && !waiting) {
      const i = this.queue.indexOf(u);
      if (i >= 0) this.queue.splice(i, 1);
      u.resolve();
    }
  }

  private cancel(u: Utterance) {
    u.cancelled = true;
    for (const s of u.sentences) {
      s.session?.cancel();
      s.session = null;
      this.marks.delete(s.markName);
    }
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

  /** Moves synthesized audio into the pacer, strictly in utterance and sentence order. */
  private pump() {
    if (this.closed || this.paused) return;
    const pacer = this.options.pacer;
    for (let i = 0; i < this.queue.length; i++) {
      const u = this.queue[i]!;
      if (u.cancelled) continue;
      for (const s of u.sentences) {
        if (s.sent) continue;
        if (s.audio.length > 0) {
          if (!u.startedAudio) {
            u.startedAudio = true;
            this.options.onFirstAudio?.(u);
          }
          for (const chunk of s.audio) pacer.push(chunk);
          s.pushed.push(...s.audio);
          s.audio = [];
        }
        if (!s.synthesized) return;
        s.sent = true;
        this.marks.set(s.markName, { utterance: u, sentence: s });
        pacer.mark(s.markName);
      }
      if (!u.finished) return;
      if (u.sentences.length === 0) {
        this.queue.splice(i--, 1);
        u.resolve();
      }
    }
  }
}
