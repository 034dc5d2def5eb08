/**
 * One live call: caller audio → STT → turn-taking → engine → model (streaming) → TTS (sentence by
 * sentence) → caller. The engine decides; this carries out its commands and feeds it events.
 */
import type { RunModelCommand } from '../../engine/session.js';
import type { ProviderOverrides, SayCommand } from '../../engine/compile.js';
import type { LlmConfig, SttConfig, TtsConfig } from '../../engine/schema.js';
import { findProvider, defaultCatalog } from '../../engine/catalog.js';
import type { SttSession, TtsProvider } from '../providers/types.js';
import type { CallRecord } from './store.js';
import type { CallTransport } from './transport.js';
import { Speaker, type Utterance, type UtteranceOutcome } from './speaker.js';
import { SentenceSplitter } from './text.js';
import { TurnTaking } from './turn-taking.js';
import { BaseCall, type LiveCallDeps, type OwnCommand } from './base-call.js';
import { runModelTurn } from './model-turn.js';

export { assistantOnlyDefinition, type LiveCallDeps } from './base-call.js';

interface ModelRun {
  abort: AbortController;
  utterance: Utterance | null;
  /** A tool node's choice of its way out: nothing stops it but the end of the call (the engine waits for it). */
  choice: boolean;
}

export class LiveCall extends BaseCall {
  private readonly speaker: Speaker;
  private readonly turns: TurnTaking;
  private stt: SttSession | null = null;
  private sttConfigKey = '';
  private overrides: ProviderOverrides = {};
  private modelRun: ModelRun | null = null;
  /** The model's reply not yet over (being written, or written and playing): settled before caller input. */
  private reply: Utterance | null = null;
  /** Caller input that came while a written reply played uncut: it reaches the engine once that reply is over. */
  private afterReply: Array<() => void> = [];
  /**
   * The engine's utterances (its `say`s and the model's replies) still to be heard or cut: what
   * to do once each is over (the record and the engine get what the caller heard of it).
   */
  private readonly playing = new Map<Utterance, (outcome: UtteranceOutcome) => void>();
  /** The engine has started (after the recording consent): events before that are not for it. */
  private engineStarted = false;

  constructor(record: CallRecord, transport: CallTransport, deps: LiveCallDeps) {
    super(record, transport, deps);
    this.speaker = new Speaker({
      pacer: this.pacer,
      tts: () => this.timedTts(this.ttsInUse()),
      pronunciations: () => this.assistant.speech_config.pronunciation,
      ...this.shielded({
        onError: (err: Error) => this.providerFailed(err),
        onFirstAudio: () => this.firstAudioOut(),
      }, 'speaker'),
    });
    const tt = this.assistant.speech_config.turn_taking;
    // turn-taking runs these from its timers
    this.turns = new TurnTaking(tt, this.shielded({
      onEndOfTurn: (text: string) => this.callerTurn(text),
      onInterruptionStart: () => this.speaker.pause(),
      onInterruptionConfirmed: () => this.interrupted(),
      onFalseInterruption: () => this.speaker.resume(),
    }, 'turn-taking'), {
      assistantSpeaking: () => this.speaker.speakingInterruptible(),
      now: () => performance.now(),
    });
  }

  // ------------------------------------------------------------------------------------------
  // lifecycle

  /** The media stream started: open the STT, start (or resume) the engine, speak. */
  override async start(resumeFrom?: Record<string, unknown>): Promise<void> {
    this.startSession(resumeFrom);
    try {
      await this.openStt();
    } catch (err) {
      this.providerFailed(err as Error);
      return;
    }
    // a machine answered before the media connected: only the voicemail message is said
    if (this.leavingVoicemail) return;
    for (const line of this.openingLines()) {
      const said = this.speaker.say(line, false);
      this.ledger.recordMessage('assistant', line, null);
      await said.played;
      if (this.ended || this.leavingVoicemail) return;
    }
    this.engineStarted = true;
    this.carryOut(this.session.start());
    this.armSilence();
  }

  protected override async leaveVoicemail(text: string): Promise<void> {
    this.modelRun?.abort.abort();
    // what plays is cut (`clear`) and settled as heard; lines that cannot be cut play out first
    for (const u of this.speaker.interrupt()) this.over(u, u.outcome());
    const message = this.speaker.say(text, false);
    this.ledger.recordMessage('assistant', text, null);
    await message.played;
  }

  /** Caller audio (μ-law 8 kHz). */
  protected override callerAudio(mulaw: Buffer): void {
    if (this.ended || mulaw.length === 0) return;
    this.stt?.sendAudio(mulaw);
  }

  /**
   * A key press is caller input, and it cuts interruptible speech at once (as a confirmed barge-in
   * would): a keypad menu stops when the caller has chosen.
   */
  override dtmf(digit: string): void {
    if (this.ended || !this.engineStarted) return;
    this.silencePrompts = 0;
    this.turns.reset();
    if (this.speaker.speakingInterruptible()) this.interrupted();
    // a cut line arms the silence checks as it settles; the key press is the caller's answer
    this.disarmSilence();
    this.callerInput(() => {
      this.ledger.recordMessage('user', `DTMF: ${digit}`, this.session.state().node_id);
      this.dispatch({ type: 'dtmf', digits: digit });
    });
  }

  override played(name: string): void {
    this.speaker.onMark(name);
  }

  // ------------------------------------------------------------------------------------------
  // engine

  protected override perform(command: OwnCommand): void {
    switch (command.type) {
      case 'say': {
        const u = this.speaker.say(command.text, command.interruptible, command.say_id);
        this.whenOver(u, (outcome) => this.sayOver(command, outcome));
        break;
      }
      case 'set_provider_overrides': {
        const { type: _t, node_id: _n, ...blocks } = command;
        this.overrides = blocks;
        this.guard(this.openStt().catch((err: Error) => this.providerFailed(err)), 'stt switch');
        break;
      }
      case 'run_model':
        this.guard(this.runModel(command), 'model run');
        break;
      case 'transfer':
        this.transferring = this.transfer(command.destination);
        break;
    }
  }

  /** Before the engine has started (the recording consent playing) it has no session to save. */
  protected override engineSession() {
    return this.engineStarted ? this.session : null;
  }

  protected override maxDurationReached(): void {
    if (this.engineStarted) this.dispatch({ type: 'timer.max_duration' });
    else void this.end('exceeded-max-duration', { hangUp: true });
  }

  // ------------------------------------------------------------------------------------------
  // the caller's turn and barge-in

  /**
   * Caller input (a finished turn, a key press) goes to the engine after the model's reply before
   * it is settled, so the history keeps the call's order and the next model request sees that
   * reply as the caller heard it. A reply still being written is superseded: what was heard of it
   * is settled now. A reply written whole and still playing uncut (the caller's words were too few
   * to cut it) plays on, and the input waits until it is over.
   */
  private callerInput(apply: () => void): void {
    const reply = this.reply;
    if (this.afterReply.length > 0) {
      // earlier input still waits (its reply is over, and what follows it is a moment away)
      this.afterReply.push(apply);
      return;
    }
    if (!reply) {
      apply();
      return;
    }
    const run = this.modelRun;
    if (run?.utterance === reply) {
      this.supersede(run);
      this.over(reply, reply.outcome());
      apply();
      return;
    }
    this.log.debug('caller input waits for the reply playing');
    this.afterReply.push(apply);
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
    while (this.afterReply.length > 0) this.afterReply.shift()!();
  }

  private callerTurn(text: string): void {
    // words over the recording consent come before the conversation has begun
    if (this.ended || !this.engineStarted) return;
    this.silencePrompts = 0;
    this.disarmSilence();
    this.callerInput(() => this.takeTurn(text));
  }

  private takeTurn(text: string): void {
    this.turnClock.begin(this.session.state().node_id);
    this.log.debug({ text }, 'caller turn');
    this.ledger.recordMessage('user', text, this.session.state().node_id);
    this.disarmSilence();
    this.dispatch({ type: 'caller.said', text });
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
    this.guard(u.played.then((outcome) => this.over(u, outcome)), 'utterance played');
  }

  /** `u` is over (once per utterance; later calls do nothing). */
  private over(u: Utterance, outcome: UtteranceOutcome): void {
    const then = this.playing.get(u);
    if (!then) return;
    this.playing.delete(u);
    then(outcome);
  }

  /**
   * A `say` is over, played whole or cut: the record gets what the caller heard of it, and so does
   * the engine's history (what the model sees next), through `heard` when cut.
   */
  private sayOver(command: SayCommand, outcome: UtteranceOutcome): void {
    if (outcome.heardText) this.ledger.recordMessage('assistant', outcome.heardText, command.node_id);
    this.dispatch({
      type: 'assistant.done_speaking',
      say_id: command.say_id,
      ...(outcome.complete ? {} : { heard: outcome.heardText }),
    });
    this.armSilence();
  }

  // ------------------------------------------------------------------------------------------
  // the model

  private async runModel(command: RunModelCommand): Promise<void> {
    // a newer turn supersedes a reply still being written: stop it, say no more of it
    if (this.modelRun) this.supersede(this.modelRun);
    const abort = new AbortController();
    const run: ModelRun = { abort, utterance: null, choice: command.mode === 'tool_choice' };
    this.modelRun = run;
    const { provider, config } = this.llmInUse();
    const utterance = this.speaker.begin(true);
    run.utterance = utterance;
    // caller input waits for (or supersedes) a reply; during a tool node's choice the engine only records it
    if (!run.choice) this.reply = utterance;
    const splitter = new SentenceSplitter();
    let text = '';
    // whatever ends the reply (played out, barge-in, superseded, hang-up), what the caller heard
    // of it is history: in the call record, and for the engine (a barge-in settles it at once,
    // before the turn or key press that confirmed it)
    let streamed = false;
    const heardRecorded = new Promise<void>((resolve) =>
      this.whenOver(utterance, (outcome) => {
        if (this.reply === utterance) this.reply = null;
        const heard = outcome.complete && streamed ? text.trim() : outcome.heardText;
        if (heard) {
          this.ledger.recordMessage('assistant', heard, command.node_id);
          if (!this.ended) this.dispatch({ type: 'model.replied', text: heard });
        }
        resolve();
      }),
    );
    let transition: string | null = null;
    let failure: Error | null = null;
    // the turn's first model request (not a later one, nor one that no caller turn started)
    const turn = this.turnClock.modelRequested();
    try {
      ({ transition } = await runModelTurn({
        provider,
        config,
        command,
        signal: abort.signal,
        callTools: (calls, options) => this.deps.notifier.toolCalls(this.record, calls, options),
        onText: (piece) => {
          this.turnClock.firstToken(turn);
          text += piece;
          for (const sentence of splitter.push(piece)) {
            this.turnClock.modelReady(turn);
            this.speaker.addSentence(utterance, sentence);
          }
        },
        onToolCalls: () => this.turnClock.firstToken(turn),
      }));
    } catch (err) {
      if (abort.signal.aborted) return;
      // a silence check-in that fails is not the call's failure: its fallback line is said instead
      if (command.fallback === undefined) {
        this.speaker.abandon(utterance);
        this.providerFailed(err as Error);
        return;
      }
      failure = err as Error;
    } finally {
      if (this.modelRun === run) this.modelRun = null;
    }
    if (abort.signal.aborted) return;
    this.turnClock.modelReady(turn);
    const rest = splitter.flush();
    if (rest) this.speaker.addSentence(utterance, rest);
    if (command.fallback !== undefined && text.trim() === '') {
      text = this.checkInFallback(command.fallback, failure);
      this.speaker.addSentence(utterance, text);
    } else if (failure) {
      this.log.warn({ err: failure }, 'the silence check-in failed after its first words; they stand');
    }
    streamed = true;
    this.speaker.finish(utterance);
    await heardRecorded;
    if (this.ended) return;
    if (transition) {
      this.dispatch({ type: 'model.chose_transition', function_name: transition, node_id: command.node_id });
    }
    // the caller's input that waited for this reply goes on now, or the silence checks start
    if (this.afterReply.length > 0) this.applyWaitingInput();
    else this.armSilence();
  }

  // ------------------------------------------------------------------------------------------
  // providers in use (node overrides replace the assistant's blocks)

  private llmInUse(): { provider: import('../providers/types.js').LlmProvider; config: LlmConfig } {
    const config = withDefaults('llm', this.overrides.llm_config ?? this.assistant.llm_config);
    const provider = this.deps.providers.llm.get(config.provider);
    if (!provider) throw new Error(`no llm adapter for "${config.provider}"`);
    return { provider, config };
  }

  private ttsInUse() {
    const config = withDefaults('tts', (this.overrides.tts_config ?? this.assistant.tts_config) as TtsConfig);
    const provider = this.deps.providers.tts.get(config.provider);
    if (!provider) throw new Error(`no tts adapter for "${config.provider}"`);
    return { provider, config };
  }

  private async openStt(): Promise<void> {
    const config = withDefaults('stt', (this.overrides.stt_config ?? this.assistant.stt_config) as SttConfig);
    const key = JSON.stringify(config);
    if (key === this.sttConfigKey && this.stt) return;
    this.sttConfigKey = key;
    const provider = this.deps.providers.stt.get(config.provider);
    if (!provider) throw new Error(`no stt adapter for "${config.provider}"`);
    const previous = this.stt;
    this.stt = null;
    const session = await provider.connect(config, this.shielded<Parameters<typeof provider.connect>[1]>({
      onTranscript: (t) => {
        if (t.text.trim() !== '') this.disarmSilence();
        this.turns.transcript(t);
      },
      onSpeechStarted: () => {
        this.log.debug('caller speech started');
        this.disarmSilence();
        this.turns.speechStarted();
      },
      onUtteranceEnd: () => this.turns.utteranceEnd(),
      onError: (err) => this.providerFailed(err),
    }, 'stt'));
    if (this.ended) {
      void session.close();
      return;
    }
    this.stt = session;
    if (previous) void previous.close();
  }

  // ------------------------------------------------------------------------------------------
  // silence and end

  /** Silence counts once everything said has been heard (its marks came back). */
  protected override silenceCounts(): boolean {
    return !this.speaker.speaking();
  }

  protected override async release(): Promise<void> {
    this.modelRun?.abort.abort();
    this.turns.close();
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
  // bookkeeping

  /** The TTS of the turn's first sentence: when it was asked, and when its first audio came. */
  private timedTts<T extends { provider: TtsProvider; config: TtsConfig }>(inUse: T): T {
    const turn = this.turnClock.ttsRequested();
    if (!turn) return inUse;
    const { provider } = inUse;
    const timed: TtsProvider = {
      id: provider.id,
      open: (config, events, signal) =>
        provider.open(
          config,
          {
            onAudio: (mulaw) => {
              this.turnClock.ttsFirstAudio(turn);
              events.onAudio(mulaw);
            },
            onDone: () => events.onDone(),
            onError: (err) => events.onError(err),
          },
          signal,
        ),
    };
    return { ...inUse, provider: timed };
  }

  /** The first audio of the reply went to the pacer: its first frame to the caller ends the turn. */
  private firstAudioOut(): void {
    this.turnClock.audioStarted();
  }
}

function withDefaults<T extends { provider: string; model?: string }>(kind: 'llm' | 'stt' | 'tts', block: T): T {
  if (block.model !== undefined) return block;
  const p = findProvider(defaultCatalog, kind, block.provider) ?? findProvider(defaultCatalog, 'realtime', block.provider);
  return p?.default_model ? { ...block, model: p.default_model } : block;
}
