/**
 * The pipeline backend: caller audio → STT → turn-taking → (the controller, the engine) → the
 * model's turn, streamed → TTS sentence by sentence → the speaker → the caller. It decides what a
 * caller's turn is and when the caller interrupts; the controller decides what happens next.
 */
import type { RunModelCommand } from '../../../engine/session.js';
import type { ProviderOverrides } from '../../../engine/compile.js';
import type { LlmConfig, SttConfig, TtsConfig } from '../../../engine/schema.js';
import { findProvider, defaultCatalog } from '../../../engine/catalog.js';
import type { LlmProvider, Providers, SttSession } from '../../providers/types.js';
import type { BackendContext, ConversationBackend, Heard, LineRequest, NodeView } from '../backend.js';
import type { Playout } from '../playout.js';
import { Speaker, type Utterance, type UtteranceOutcome } from '../speaker.js';
import { SentenceSplitter } from '../text.js';
import { TurnTaking } from '../turn-taking.js';
import { createSpeechDetector, type SpeechDetector } from '../vad/index.js';
import { runModelTurn } from '../model-turn.js';
import { keysFrom, keysNotSent } from '../keypad.js';

interface ModelRun {
  abort: AbortController;
  utterance: Utterance | null;
  /** A tool node's choice of its way out: nothing stops it but the end of the call (the engine waits for it). */
  choice: boolean;
}

export interface PipelineOptions {
  providers: Providers;
  playout: Playout;
}

/** A failure that names no provider is put down to `unknown` (`pipeline-error-unknown`). */
const UNNAMED = 'unknown';

export class PipelineBackend implements ConversationBackend {
  private readonly speaker: Speaker;
  private readonly turns: TurnTaking;
  /** The caller's voice activity (null: the detector could not be made; `start` reports it). */
  private readonly voice: SpeechDetector | null = null;
  private voiceError: Error | null = null;
  private stt: SttSession | null = null;
  /** When the STT session's first audio was sent: its word timings count from there. */
  private sttAudioFrom: number | null = null;
  /** The end of the caller's last words (by the STT's timings) and when they were transcribed. */
  private lastWords: { speechEndedAt: number | null; transcribedAt: number } | null = null;
  private sttConfigKey = '';
  private overrides: ProviderOverrides = {};
  private modelRun: ModelRun | null = null;
  /** The model's reply not yet over (being written, or written and playing): settled before caller input. */
  private replying: Utterance | null = null;
  /** Caller input that came while a written reply played uncut: it reaches the engine once that reply is over. */
  private afterReplyQueue: Array<() => void> = [];
  /**
   * Utterances (lines and the model's replies) still to be heard or cut: what to do once each is
   * over (the controller gets what the caller heard of it).
   */
  private readonly playing = new Map<Utterance, (outcome: UtteranceOutcome) => void>();
  private closed = false;
  /**
   * Key presses of the model under way (from its `press_keys` until the keys have played):
   * nothing cuts them, and caller input waits for the reply they are part of.
   */
  private keys = 0;
  readonly ownLinesRecordedWhenAsked = true;

  constructor(
    private readonly ctx: BackendContext,
    private readonly o: PipelineOptions,
  ) {
    this.speaker = new Speaker({
      playout: o.playout,
      tts: () => this.ttsInUse(),
      pronunciations: () => ctx.assistant.speech_config.pronunciation,
      ...ctx.shield({ onError: (err: Error) => ctx.events.failed(err, UNNAMED) }, 'speaker'),
    });
    const tt = ctx.assistant.speech_config.turn_taking;
    // turn-taking runs these from its timers
    this.turns = new TurnTaking(tt, ctx.shield({
      onEndOfTurn: (text: string) => this.endOfTurn(text),
      onInterruptionStart: () => this.speaker.pause(),
      onInterruptionConfirmed: () => this.interrupted(),
      onFalseInterruption: () => this.speaker.resume(),
    }, 'turn-taking'), {
      assistantSpeaking: () => this.keys === 0 && this.speaker.speakingInterruptible(),
      now: () => performance.now(),
      voiceHeardUntil: () => this.voice?.heardUntil ?? 0,
    });
    try {
      this.voice = createSpeechDetector(tt.vad, ctx.shield({
        onSpeechStart: (at: number) => {
          ctx.log.debug('caller speech started');
          ctx.events.silenceBroken();
          this.turns.voiceStarted(at);
        },
        onSpeechEnd: (at: number) => {
          // the vendor transcribes what it has now (Deepgram's Finalize): the final text comes sooner
          this.stt?.finalize();
          this.turns.voiceEnded(at);
        },
      }, 'voice activity'), { now: () => performance.now() });
    } catch (err) {
      this.voiceError = new Error(`the ${tt.vad} voice-activity detector could not start: ${(err as Error).message}`, { cause: err });
    }
  }

  async start(_node: NodeView, overrides: ProviderOverrides): Promise<void> {
    this.overrides = overrides;
    // the detector is ours: a call that cannot have it ends pipeline-error-switchboard
    if (this.voiceError) return this.ctx.events.defect(this.voiceError, 'voice activity');
    try {
      await this.openStt();
    } catch (err) {
      this.ctx.events.failed(err as Error, UNNAMED);
    }
  }

  say(line: LineRequest, over: (heard: Heard) => void): void {
    const u = this.speaker.say(line.text, line.interruptible, line.sayId);
    this.whenOver(u, (outcome) => over({ text: outcome.heardText, complete: outcome.complete }));
  }

  setOverrides(overrides: ProviderOverrides): void {
    this.overrides = overrides;
    this.ctx.guard(this.openStt().catch((err: Error) => this.ctx.events.failed(err, UNNAMED)), 'stt switch');
  }

  /** The pipeline's model is told its node with each `run_model`. */
  setNode(): void {}

  reply(command: RunModelCommand): void {
    this.ctx.guard(this.runModel(command), 'model run');
  }

  keyPressed(): void {
    this.turns.reset();
    if (this.keys === 0 && this.speaker.speakingInterruptible()) this.interrupted();
  }

  /** A live control's `say` with `interrupt`: what may be cut is cut, as a confirmed barge-in cuts it. */
  cut(): void {
    this.interrupted();
  }

  interrupt(): void {
    this.modelRun?.abort.abort();
    // what plays is cut (`clear`) and settled as heard; lines that cannot be cut play out first
    for (const u of this.speaker.interrupt()) this.over(u, u.outcome());
  }

  callerAudio(mulaw: Buffer): void {
    if (this.closed || mulaw.length === 0) return;
    if (this.stt) {
      this.sttAudioFrom ??= performance.now();
      this.stt.sendAudio(mulaw);
    }
    this.voice?.push(mulaw);
  }

  /** Silence counts once everything said has been heard (its marks came back). */
  busy(): boolean {
    return this.speaker.speaking() || this.keys > 0;
  }

  async close(): Promise<void> {
    this.closed = true;
    this.modelRun?.abort.abort();
    this.turns.close();
    this.voice?.close();
    this.speaker.close();
    // The record keeps what was heard of each line and reply, then the caller's input that waited
    // for a reply, in that order (the engine has stopped: only the record takes them now).
    for (const u of [...this.playing.keys()]) this.over(u, u.outcome());
    this.applyWaitingInput();
    const stt = this.stt;
    this.stt = null;
    await stt?.close().catch(() => undefined);
  }

  // ------------------------------------------------------------------------------------------
  // the caller's turn and barge-in

  private endOfTurn(text: string): void {
    // words over the opening lines come before the conversation has begun
    if (this.closed || !this.ctx.engineStarted()) return;
    this.ctx.events.callerInput();
    const words = this.lastWords;
    this.lastWords = null;
    this.afterReply(() => {
      this.ctx.events.turnEnded(words ?? {});
      this.ctx.events.callerTurn(text);
    });
  }

  /**
   * Caller input (a finished turn, a key press) goes to the engine after the model's reply before
   * it is settled, so the history keeps the call's order and the next model request sees that
   * reply as the caller heard it. A reply still being written is superseded: what was heard of it
   * is settled now. A reply written whole and still playing uncut (the caller's words were too few
   * to cut it), or one that is pressing keys, plays on, and the input waits until it is over.
   */
  afterReply(apply: () => void): void {
    const reply = this.replying;
    if (this.afterReplyQueue.length > 0) {
      // earlier input still waits (its reply is over, and what follows it is a moment away)
      this.afterReplyQueue.push(apply);
      return;
    }
    if (!reply) {
      apply();
      return;
    }
    const run = this.modelRun;
    if (run?.utterance === reply && this.keys === 0) {
      this.supersede(run);
      this.over(reply, reply.outcome());
      apply();
      return;
    }
    this.ctx.log.debug('caller input waits for the reply playing');
    this.afterReplyQueue.push(apply);
  }

  /** Stops a reply still being written: no more of it is asked for or said. */
  private supersede(run: ModelRun): void {
    run.abort.abort();
    if (run.utterance) this.speaker.abandon(run.utterance);
  }

  /**
   * The reply is over and its consequences carried out (its transition taken, so the input goes to
   * the node the reply moved to): the caller input that waited for it goes on, in order. After the
   * end of the call the engine ignores it, and the record still takes it.
   */
  private applyWaitingInput(): void {
    while (this.afterReplyQueue.length > 0) this.afterReplyQueue.shift()!();
  }

  private interrupted(): void {
    const run = this.modelRun;
    // what a tool node's choice says may be cut, but the choice itself still comes
    if (run && !run.choice) run.abort.abort();
    // The cut lines and replies are over now, not a microtask later: the caller's turn or key
    // press that confirmed the interruption goes to the engine (and the record) right after, and
    // its model request must see what was heard of them, before it and only that.
    for (const u of this.speaker.interrupt()) this.over(u, u.outcome());
  }

  /** Runs `then` once `u` is over: when it has played out, or at once when `over` is called (cut). */
  private whenOver(u: Utterance, then: (outcome: UtteranceOutcome) => void): void {
    this.playing.set(u, then);
    this.ctx.guard(u.played.then((outcome) => this.over(u, outcome)), 'utterance played');
  }

  /** `u` is over (once per utterance; later calls do nothing). */
  private over(u: Utterance, outcome: UtteranceOutcome): void {
    const then = this.playing.get(u);
    if (!then) return;
    this.playing.delete(u);
    then(outcome);
  }

  // ------------------------------------------------------------------------------------------
  // the model

  private async runModel(command: RunModelCommand): Promise<void> {
    const events = this.ctx.events;
    // a newer turn supersedes a reply still being written: stop it, say no more of it
    if (this.modelRun) this.supersede(this.modelRun);
    const abort = new AbortController();
    const run: ModelRun = { abort, utterance: null, choice: command.mode === 'tool_choice' };
    this.modelRun = run;
    const { provider, config } = this.llmInUse();
    const utterance = this.speaker.begin(true);
    run.utterance = utterance;
    // caller input waits for (or supersedes) a reply; during a tool node's choice the engine only records it
    if (!run.choice) this.replying = utterance;
    const splitter = new SentenceSplitter();
    let text = '';
    // whatever ends the reply (played out, barge-in, superseded, hang-up), what the caller heard
    // of it is history: in the call record, and for the engine (a barge-in settles it at once,
    // before the turn or key press that confirmed it)
    let streamed = false;
    /** What was heard of the reply before the keys it pressed: in the history already, before them. */
    let beforeKeys = '';
    const heardRecorded = new Promise<void>((resolve) =>
      this.whenOver(utterance, (outcome) => {
        if (this.replying === utterance) this.replying = null;
        let heard = outcome.complete && streamed && !beforeKeys ? text.trim() : outcome.heardText;
        if (beforeKeys) heard = heard.startsWith(beforeKeys) ? heard.slice(beforeKeys.length).trim() : heard;
        if (heard) events.replied(heard, command.node_id);
        resolve();
      }),
    );
    /**
     * The model pressed keys: they go once what it said before them has been heard (from the
     * press on, nothing cuts the reply), and that part of the reply is history before them.
     */
    const pressKeys = async (args: string): Promise<string> => {
      const checked = keysFrom(args);
      if ('error' in checked) return keysNotSent(checked.error);
      if (!this.ctx.pressKeys) return keysNotSent('there is no keypad here');
      this.keys++;
      try {
        const rest = splitter.flush();
        if (rest) this.speaker.addSentence(utterance, rest);
        if (!(await this.speaker.whenHeard(utterance)) || abort.signal.aborted || this.closed) {
          return keysNotSent('the reply was interrupted before the keys; no key was sent');
        }
        const heard = utterance.outcome().heardText;
        if (heard.length > beforeKeys.length) events.replied(heard.slice(beforeKeys.length).trim(), command.node_id);
        beforeKeys = heard;
        return (await this.ctx.pressKeys(checked.keys, command.node_id, abort.signal)).output;
      } finally {
        this.keys--;
      }
    };
    let transition: string | null = null;
    let failure: Error | null = null;
    try {
      ({ transition } = await runModelTurn({
        provider,
        config,
        command,
        signal: abort.signal,
        callTools: events.callTools,
        ...(this.ctx.pressKeys ? { pressKeys } : {}),
        onText: (piece) => {
          text += piece;
          for (const sentence of splitter.push(piece)) this.speaker.addSentence(utterance, sentence);
        },
      }));
    } catch (err) {
      if (abort.signal.aborted) return;
      // a silence check-in that fails is not the call's failure: its fallback line is said instead
      if (command.fallback === undefined) {
        this.speaker.abandon(utterance);
        events.failed(err as Error, UNNAMED);
        return;
      }
      failure = err as Error;
    } finally {
      if (this.modelRun === run) this.modelRun = null;
    }
    if (abort.signal.aborted) return;
    const rest = splitter.flush();
    if (rest) this.speaker.addSentence(utterance, rest);
    if (command.fallback !== undefined && text.trim() === '') {
      text = events.checkInFallback(command.fallback, failure, UNNAMED);
      this.speaker.addSentence(utterance, text);
    } else if (failure) {
      this.ctx.log.warn({ err: failure }, 'the silence check-in failed after its first words; they stand');
    }
    streamed = true;
    this.speaker.finish(utterance);
    await heardRecorded;
    if (this.closed) return;
    if (transition) events.choseTransition(transition, command.node_id);
    // the caller's input that waited for this reply goes on now, or the silence checks start
    if (this.afterReplyQueue.length > 0) this.applyWaitingInput();
    else events.settled();
  }

  // ------------------------------------------------------------------------------------------
  // providers in use (node overrides replace the assistant's blocks)

  private llmInUse(): { provider: LlmProvider; config: LlmConfig } {
    const config = withDefaults('llm', this.overrides.llm_config ?? this.ctx.assistant.llm_config);
    const provider = this.o.providers.llm.get(config.provider);
    if (!provider) throw new Error(`no llm adapter for "${config.provider}"`);
    return { provider, config };
  }

  private ttsInUse() {
    const config = withDefaults('tts', (this.overrides.tts_config ?? this.ctx.assistant.tts_config) as TtsConfig);
    const provider = this.o.providers.tts.get(config.provider);
    if (!provider) throw new Error(`no tts adapter for "${config.provider}"`);
    return { provider, config };
  }

  private async openStt(): Promise<void> {
    const config = withDefaults('stt', (this.overrides.stt_config ?? this.ctx.assistant.stt_config) as SttConfig);
    const key = JSON.stringify(config);
    if (key === this.sttConfigKey && this.stt) return;
    this.sttConfigKey = key;
    const provider = this.o.providers.stt.get(config.provider);
    if (!provider) throw new Error(`no stt adapter for "${config.provider}"`);
    const previous = this.stt;
    this.stt = null;
    const events = this.ctx.events;
    const session = await provider.connect(config, this.ctx.shield<Parameters<typeof provider.connect>[1]>({
      onTranscript: (t) => {
        if (t.text.trim() !== '') {
          events.silenceBroken();
          if (t.isFinal) this.noteWords(t.start, t.duration);
        }
        this.turns.transcript(t);
      },
      onSpeechStarted: () => {
        events.silenceBroken();
        this.turns.vendorSpeechStarted();
      },
      onUtteranceEnd: () => this.turns.utteranceEnd(),
      onError: (err) => events.failed(err, UNNAMED),
    }, 'stt'));
    if (this.closed) {
      void session.close();
      return;
    }
    this.stt = session;
    this.sttAudioFrom = null;
    if (previous) void previous.close();
  }

  /** Final words came: when the caller finished saying them (the STT's timings from its first audio), and now. */
  private noteWords(start: number | undefined, duration: number | undefined): void {
    const from = this.sttAudioFrom;
    const end = typeof start === 'number' && typeof duration === 'number' && from !== null ? from + (start + duration) * 1000 : null;
    this.lastWords = { speechEndedAt: end, transcribedAt: performance.now() };
  }
}

function withDefaults<T extends { provider: string; model?: string }>(kind: 'llm' | 'stt' | 'tts', block: T): T {
  if (block.model !== undefined) return block;
  const p = findProvider(defaultCatalog, kind, block.provider) ?? findProvider(defaultCatalog, 'realtime', block.provider);
  return p?.default_model ? { ...block, model: p.default_model } : block;
}
