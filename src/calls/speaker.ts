/**
 * What the assistant says, in order: utterances (a `say`, or a model reply streamed sentence by
 * sentence), each sentence synthesized by its own TTS session as soon as it is known (so the
 * first audio leaves as soon as the first sentence is ready), played strictly in order through
 * the pacer, with a mark after every sentence. Marks echoed by the far end tell what the caller
 * actually heard; marks echoed after a `clear` were dropped, not heard.
 */
import type { TtsConfig } from '../../engine/schema.js';
import type { ProviderError, TtsProvider, TtsSession } from '../providers/types.js';
import type { OutboundPacer } from './outbound.js';
import { applyPronunciations, type Pronunciation } from './text.js';

interface Sentence {
  index: number;
  text: string;
  audio: Buffer[];
  synthesized: boolean;
  session: TtsSession | null;
  markName: string;
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
  /** Marks outstanding when the far end was cleared: their echo means dropped. */
  private readonly cleared = new Set<string>();
  private seq = 0;
  private closed = false;

  constructor(private readonly options: SpeakerOptions) {}

  /** A new utterance at the end of the queue; add text with `addSentence`, then `finish`. */
  begin(interruptible: boolean, sayId: string | null = null): Utterance {
    const u = new Utterance(`u${++this.seq}`, interruptible, sayId);
    this.queue.push(u);
    return u;
  }

  /** Convenience: a whole text as one utterance. */
  say(text: string, interruptible: boolean, sayId: string | null = null): Utterance {
    const u = this.begin(interruptible, sayId);
    if (text.trim() !== '') this.addSentence(u, text.trim());
    this.finish(u);
    return u;
  }

  addSentence(u: Utterance, text: string): void {
    if (u.cancelled || this.closed) return;
    const sentence: Sentence = {
      index: u.sentences.length,
      text,
      audio: [],
      synthesized: false,
      session: null,
      markName: `${u.id}.${u.sentences.length}`,
      sent: false,
      heard: false,
    };
    u.sentences.push(sentence);
    void this.synthesize(u, sentence);
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

  speaking(): boolean {
    return this.queue.length > 0 || this.options.pacer.isSpeaking();
  }

  /** Barge-in: stop output now, keep the rest for a possible resume. */
  pause(): void {
    for (const name of this.marks.keys()) {
      const m = this.marks.get(name)!;
      if (m.sentence.sent) this.cleared.add(name);
    }
    this.options.pacer.pause();
  }

  /** False interruption: the reply goes on; what was cleared counts as heard again. */
  resume(): void {
    for (const name of this.cleared) {
      const m = this.marks.get(name);
      if (m) this.markHeard(name);
    }
    this.cleared.clear();
    this.options.pacer.resume();
  }

  /** Confirmed interruption: drop every interruptible utterance; returns what was cut. */
  interrupt(): Utterance[] {
    const cut: Utterance[] = [];
    for (const u of this.queue) {
      if (!u.interruptible) continue;
      this.cancel(u);
      cut.push(u);
    }
    this.options.pacer.clear();
    this.queue.splice(0, this.queue.length, ...this.queue.filter((u) => !u.cancelled));
    for (const u of cut) u.resolve();
    this.cleared.clear();
    this.pump();
    return cut;
  }

  /** The far end echoed a mark: that sentence was played (unless it was cleared). */
  onMark(name: string): void {
    if (this.cleared.delete(name)) {
      const m = this.marks.get(name);
      this.marks.delete(name);
      if (m) this.afterMark(m.utterance);
      return;
    }
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
    this.afterMark(m.utterance);
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
      this.cleared.delete(s.markName);
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
    if (this.closed) return;
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
