/**
 * One live call: caller audio → STT → turn-taking → engine → model (streaming) → TTS (sentence by
 * sentence) → caller. The engine decides; this carries out its commands and feeds it events.
 */
import type { Logger } from 'pino';
import {
  createCallSession,
  restoreCallSession,
  type CallSession,
  type Command,
  type RunModelCommand,
} from '../../engine/session.js';
import type { CallEvent, ProviderOverrides } from '../../engine/compile.js';
import type { EffectiveAssistant } from '../../engine/assistant.js';
import type { LlmConfig, SttConfig, Tool, TtsConfig, WorkflowDefinition } from '../../engine/schema.js';
import { findProvider, defaultCatalog } from '../../engine/catalog.js';
import type {
  LlmFunction,
  LlmMessage,
  LlmToolCall,
  Providers,
  ProviderError,
  SttSession,
  TtsProvider,
} from '../providers/types.js';
import type { CallRecord, CallStore } from './store.js';
import { OutboundPacer, type OutboundSink } from './outbound.js';
import { Speaker, type Utterance } from './speaker.js';
import { SentenceSplitter } from './text.js';
import { TurnTaking } from './turn-taking.js';
import { CallLedger } from './ledger.js';
import type { CallNotifier, ToolCallOutcome } from './notifier.js';
import { splitTurnLatency, type TurnLatency, type TurnMarks } from './latency.js';

export interface LiveCallDeps {
  providers: Providers;
  notifier: CallNotifier;
  store: CallStore;
  logger: Logger;
  /** Ends the telephony leg (hang-up) or moves it (transfer). */
  telephony: {
    hangUp(call: CallRecord): Promise<void>;
    transfer(call: CallRecord, destination: string): Promise<void>;
  };
  onTurnLatency?(latency: TurnLatency): void;
  /** Called once the call has ended and everything is released. */
  onEnded?(call: CallRecord): void;
}

export interface MediaChannel extends OutboundSink {
  /** Closes the media connection (the call is over on our side). */
  close(): void;
}

const MAX_TOOL_ROUNDS = 5;

/** A call with no workflow runs the assistant alone: one conversation node, first_message first. */
export function assistantOnlyDefinition(assistant: EffectiveAssistant): WorkflowDefinition {
  const system = (assistant.llm_config.messages ?? [])
    .filter((m) => m.role === 'system')
    .map((m) => m.content)
    .join('\n\n');
  return {
    version: 1,
    entry_node: 'assistant',
    global_prompt: system,
    nodes: [
      {
        id: 'assistant',
        type: 'conversation',
        ...(assistant.first_message ? { first_line: assistant.first_message } : {}),
      },
    ],
    edges: [],
  };
}

export class LiveCall {
  readonly record: CallRecord;
  private readonly log: Logger;
  private readonly assistant: EffectiveAssistant;
  private readonly definition: WorkflowDefinition;
  private session!: CallSession;
  private readonly pacer: OutboundPacer;
  private readonly speaker: Speaker;
  private readonly turns: TurnTaking;
  private stt: SttSession | null = null;
  private sttConfigKey = '';
  private overrides: ProviderOverrides = {};
  private modelRun: { abort: AbortController; utterance: Utterance | null } | null = null;
  private silenceTimer: NodeJS.Timeout | null = null;
  private silenceHardTimer: NodeJS.Timeout | null = null;
  /** Silence prompts since the caller last gave input: after the first, `interval_seconds` apply. */
  private silencePrompts = 0;
  /** The engine has started (after the recording consent): events before that are not for it. */
  private engineStarted = false;
  private ended = false;
  private readonly ledger: CallLedger;
  /** Latency marks of the caller's turn whose first reply frame has not left yet. */
  private turn: (Omit<TurnMarks, 'firstFrameAt'> & { nodeId: string | null; audioStarted: boolean }) | null = null;

  constructor(
    record: CallRecord,
    private readonly media: MediaChannel,
    private readonly deps: LiveCallDeps,
  ) {
    this.record = record;
    this.assistant = record.assistant as unknown as EffectiveAssistant;
    this.definition = (record.definition as unknown as WorkflowDefinition | null) ?? assistantOnlyDefinition(this.assistant);
    this.log = deps.logger.child({ callId: record.id, workflowId: record.workflow_id });
    this.ledger = new CallLedger(record, {
      store: deps.store,
      notifier: deps.notifier,
      log: this.log,
      gdprMode: this.assistant.gdpr_mode,
      ...(deps.onEnded ? { onEnded: deps.onEnded } : {}),
    });
    this.pacer = new OutboundPacer(
      deps.onTurnLatency
        ? {
            sendFrame: (frame) => {
              media.sendFrame(frame);
              if (this.turn?.audioStarted) this.turnDone();
            },
            sendMark: (name) => media.sendMark(name),
            sendClear: () => media.sendClear(),
          }
        : media,
    );
    this.speaker = new Speaker({
      pacer: this.pacer,
      tts: () => this.timedTts(this.ttsInUse()),
      pronunciations: () => this.assistant.speech_config.pronunciation,
      onError: (err) => this.providerFailed(err),
      onFirstAudio: () => this.firstAudioOut(),
    });
    const tt = this.assistant.speech_config.turn_taking;
    this.turns = new TurnTaking(tt, {
      onEndOfTurn: (text) => this.callerTurn(text),
      onInterruptionStart: () => this.speaker.pause(),
      onInterruptionConfirmed: () => this.interrupted(),
      onFalseInterruption: () => this.speaker.resume(),
    }, {
      assistantSpeaking: () => this.speaker.speakingInterruptible(),
      now: () => performance.now(),
    });
  }

  // ------------------------------------------------------------------------------------------
  // lifecycle

  /** The media stream started: open the STT, start (or resume) the engine, speak. */
  async start(resumeFrom?: Record<string, unknown>): Promise<void> {
    const options = {
      tools: this.assistant.llm_config.tools ?? [],
      end_call_message: this.assistant.speech_config.end_call_message,
      silence: {
        messages: this.assistant.speech_config.silence.messages,
        final_message: this.assistant.speech_config.silence.final_message,
        max_attempts: this.assistant.speech_config.silence.max_attempts,
      },
    };
    this.session = resumeFrom
      ? restoreCallSession(this.definition, resumeFrom as never, options)
      : createCallSession(this.definition, options);
    this.ledger.timer(this.assistant.max_duration_seconds * 1000, () =>
      this.engineStarted ? this.dispatch({ type: 'timer.max_duration' }) : void this.end('exceeded-max-duration', { hangUp: true }),
    );
    try {
      await this.openStt();
    } catch (err) {
      this.providerFailed(err as Error);
      return;
    }
    if (this.assistant.recording_consent.enabled) {
      const consent = this.speaker.say(this.assistant.recording_consent.message, false);
      this.ledger.recordMessage('assistant', this.assistant.recording_consent.message, null);
      await consent.played;
      if (this.ended) return;
    }
    this.engineStarted = true;
    this.carryOut(this.session.start());
    this.armSilence();
  }

  /** Caller audio (μ-law 8 kHz). */
  audio(mulaw: Buffer): void {
    if (this.ended || mulaw.length === 0) return;
    this.stt?.sendAudio(mulaw);
  }

  dtmf(digit: string): void {
    if (this.ended || !this.engineStarted) return;
    this.silencePrompts = 0;
    this.turns.reset();
    this.ledger.recordMessage('user', `DTMF: ${digit}`, this.session.state().node_id);
    this.dispatch({ type: 'dtmf', digits: digit });
  }

  mark(name: string): void {
    this.speaker.onMark(name);
  }

  /** The caller hung up (stream `stop` or the socket closed). */
  callerHungUp(): void {
    if (this.ended) return;
    this.session.send({ type: 'hangup' });
    void this.end('customer-ended-call', { hangUp: false });
  }

  /** Ends the call from outside (shutdown grace over, worker decisions). */
  async terminate(reason: string): Promise<void> {
    await this.end(reason, { hangUp: true });
  }

  isEnded(): boolean {
    return this.ended;
  }

  // ------------------------------------------------------------------------------------------
  // engine

  private dispatch(event: CallEvent): void {
    if (this.ended) return;
    this.carryOut(this.session.send(event));
  }

  private carryOut(commands: Command[]): void {
    for (const command of commands) {
      this.log.debug({ command: command.type, node: 'node_id' in command ? command.node_id : undefined }, 'engine command');
      if (this.ended) return;
      switch (command.type) {
        case 'say': {
          const u = this.speaker.say(command.text, command.interruptible, command.say_id);
          void u.played.then((outcome) => {
            if (outcome.heardText) this.ledger.recordMessage('assistant', outcome.heardText, command.node_id);
            this.dispatch({ type: 'assistant.done_speaking', say_id: command.say_id });
            this.armSilence();
          });
          break;
        }
        case 'set_provider_overrides': {
          const { type: _t, node_id: _n, ...blocks } = command;
          this.overrides = blocks;
          void this.openStt().catch((err: Error) => this.providerFailed(err));
          break;
        }
        case 'run_model':
          void this.runModel(command);
          break;
        case 'call_tool':
          void this.callToolNode(command.tool_call_id, command.tool_name, command.url, command.arguments, command.node_id);
          break;
        case 'transfer':
          this.transferring = this.transfer(command.destination);
          break;
        case 'hang_up':
          void this.end(command.reason, { hangUp: command.reason !== 'call-transferred' });
          break;
        case 'event_rejected':
          this.log.debug({ rejected: command }, 'engine ignored an event');
          break;
      }
    }
    this.ledger.persistSoon(() => (this.engineStarted ? this.session : null));
  }

  // ------------------------------------------------------------------------------------------
  // the caller's turn and barge-in

  private callerTurn(text: string): void {
    // words over the recording consent come before the conversation has begun
    if (this.ended || !this.engineStarted) return;
    this.silencePrompts = 0;
    this.turn = {
      endOfTurnAt: performance.now(),
      nodeId: this.session.state().node_id,
      modelRequestedAt: null,
      firstTokenAt: null,
      modelReadyAt: null,
      ttsRequestedAt: null,
      ttsFirstAudioAt: null,
      audioStarted: false,
    };
    this.log.debug({ text }, 'caller turn');
    this.ledger.recordMessage('user', text, this.session.state().node_id);
    this.disarmSilence();
    this.dispatch({ type: 'caller.said', text });
  }

  private interrupted(): void {
    const run = this.modelRun;
    if (run) run.abort.abort();
    this.speaker.interrupt();
  }

  // ------------------------------------------------------------------------------------------
  // the model

  private async runModel(command: RunModelCommand): Promise<void> {
    // a newer turn supersedes a reply still being written: stop it, say no more of it
    const previous = this.modelRun;
    previous?.abort.abort();
    if (previous?.utterance) this.speaker.abandon(previous.utterance);
    const abort = new AbortController();
    const run: { abort: AbortController; utterance: Utterance | null } = { abort, utterance: null };
    this.modelRun = run;
    const { provider, config } = this.llmInUse();
    const transitionNames = new Set(command.transition_functions.map((f) => f.name));
    const tools: LlmFunction[] = [
      ...command.transition_functions.map((f) => ({
        name: f.name,
        description: f.description,
        parameters: { type: 'object', properties: {} },
      })),
      ...command.tools.map((t: Tool) => ({
        name: t.name,
        ...(t.description ? { description: t.description } : {}),
        ...(t.parameters ? { parameters: t.parameters as Record<string, unknown> } : {}),
      })),
    ];
    const messages: LlmMessage[] = [
      { role: 'system', content: command.system },
      ...(config.messages ?? []).filter((m) => m.role !== 'system').map((m) => ({ role: m.role, content: m.content }) as LlmMessage),
      ...command.messages.map((m): LlmMessage =>
        m.role === 'tool'
          ? { role: 'user', content: `[${m.tool_name ?? 'tool'} result] ${m.content}` }
          : { role: m.role, content: m.content },
      ),
    ];
    const utterance = this.speaker.begin(true);
    run.utterance = utterance;
    const splitter = new SentenceSplitter();
    let text = '';
    // whatever ends the reply (played out, barge-in, superseded, hang-up), what the caller heard
    // of it is history: in the call record, and for the engine
    let streamed = false;
    const heardRecorded = utterance.played.then((outcome) => {
      const heard = outcome.complete && streamed ? text.trim() : outcome.heardText;
      if (!heard) return;
      this.ledger.recordMessage('assistant', heard, command.node_id);
      if (!this.ended) this.dispatch({ type: 'model.replied', text: heard });
    });
    let transition: string | null = null;
    // the turn's first model request (not a later one, nor one that no caller turn started)
    const turn = this.turn?.modelRequestedAt === null ? this.turn : null;
    if (turn) turn.modelRequestedAt = performance.now();
    try {
      for (let round = 0; round < MAX_TOOL_ROUNDS; round++) {
        const toolCalls: LlmToolCall[] = [];
        for await (const event of provider.stream({ config, messages, tools, signal: abort.signal })) {
          if (event.type === 'text') {
            if (turn) turn.firstTokenAt ??= performance.now();
            text += event.text;
            for (const sentence of splitter.push(event.text)) {
              if (turn) turn.modelReadyAt ??= performance.now();
              this.speaker.addSentence(utterance, sentence);
            }
          } else if (event.type === 'tool_calls') {
            if (turn) turn.firstTokenAt ??= performance.now();
            toolCalls.push(...event.calls);
          }
        }
        const chosen = toolCalls.find((c) => transitionNames.has(c.name));
        if (chosen) {
          transition = chosen.name;
          break;
        }
        const own = toolCalls.filter((c) => !transitionNames.has(c.name));
        if (own.length === 0) break;
        messages.push({ role: 'assistant', content: text || null, tool_calls: own });
        const results = await this.callAssistantTools(own, command.tools);
        if (abort.signal.aborted) return;
        for (const r of results) messages.push({ role: 'tool', tool_call_id: r.tool_call_id, content: r.content });
      }
    } catch (err) {
      if (!abort.signal.aborted) {
        this.speaker.abandon(utterance);
        this.providerFailed(err as Error);
      }
      return;
    } finally {
      if (this.modelRun === run) this.modelRun = null;
    }
    if (abort.signal.aborted) return;
    if (turn) turn.modelReadyAt ??= performance.now();
    const rest = splitter.flush();
    if (rest) this.speaker.addSentence(utterance, rest);
    streamed = true;
    this.speaker.finish(utterance);
    await heardRecorded;
    if (this.ended) return;
    if (transition) {
      this.dispatch({ type: 'model.chose_transition', function_name: transition, node_id: command.node_id });
    }
    this.armSilence();
  }

  private async callAssistantTools(calls: LlmToolCall[], tools: readonly Tool[]) {
    const byName = new Map(tools.map((t) => [t.name, t]));
    const waited: { tool_call_id: string; content: string }[] = [];
    const outcomes = await Promise.all(
      calls.map(async (call) => {
        const tool = byName.get(call.name);
        let args: Record<string, unknown> = {};
        try {
          args = JSON.parse(call.arguments || '{}') as Record<string, unknown>;
        } catch {
          return { tool_call_id: call.id, content: JSON.stringify({ error: 'arguments were not valid JSON' }) };
        }
        const request = { id: call.id, name: call.name, arguments: args };
        if (tool?.async) {
          void this.deps.notifier.toolCalls(this.record, [request], { url: tool.url, async: true });
          return { tool_call_id: call.id, content: JSON.stringify({ status: 'started' }) };
        }
        const [outcome] = await this.deps.notifier.toolCalls(this.record, [request], { url: tool?.url });
        return { tool_call_id: call.id, content: toolContent(outcome) };
      }),
    );
    waited.push(...outcomes);
    return waited;
  }

  private async callToolNode(
    toolCallId: string,
    name: string,
    url: string,
    args: Record<string, unknown>,
    nodeId: string,
  ): Promise<void> {
    const [outcome] = await this.deps.notifier.toolCalls(
      this.record,
      [{ id: toolCallId, name, arguments: args }],
      { url, nodeId },
    );
    if (this.ended) return;
    if (outcome && 'result' in outcome) this.dispatch({ type: 'tool.result', tool_call_id: toolCallId, result: outcome.result });
    else this.dispatch({ type: 'tool.failed', tool_call_id: toolCallId, error: outcome?.error ?? 'no result' });
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
    const session = await provider.connect(config, {
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
    });
    if (this.ended) {
      void session.close();
      return;
    }
    this.stt = session;
    if (previous) void previous.close();
  }

  private providerFailed(err: ProviderError | Error): void {
    if (this.ended) return;
    const provider = (err as ProviderError).provider ?? 'unknown';
    this.log.error({ err, code: (err as ProviderError).code }, 'provider failed; ending the call');
    this.record.errors.push(`${provider}: ${err.message}`);
    void this.end(`pipeline-error-${provider}`, { hangUp: true });
  }

  // ------------------------------------------------------------------------------------------
  // silence

  private armSilence(): void {
    if (this.ended || this.speaker.speaking() || this.session.state().awaiting !== 'caller') return;
    this.disarmSilence();
    const policy = this.assistant.speech_config.silence;
    const fire = (nextMs: number) => {
      this.silenceTimer = setTimeout(() => {
        this.silenceTimer = null;
        if (this.speaker.speaking()) return;
        this.silencePrompts++;
        this.dispatch({ type: 'timer.silence' });
        if (!this.ended) fire(policy.interval_seconds * 1000);
      }, nextMs);
    };
    fire((this.silencePrompts === 0 ? policy.first_check_seconds : policy.interval_seconds) * 1000);
    this.silenceHardTimer = setTimeout(() => {
      this.silenceHardTimer = null;
      void this.end('silence-timed-out', { hangUp: true });
    }, this.assistant.silence_timeout_seconds * 1000 + policy.max_attempts * policy.interval_seconds * 1000);
  }

  private disarmSilence(): void {
    if (this.silenceTimer) clearTimeout(this.silenceTimer);
    if (this.silenceHardTimer) clearTimeout(this.silenceHardTimer);
    this.silenceTimer = null;
    this.silenceHardTimer = null;
  }

  // ------------------------------------------------------------------------------------------
  // transfer and end

  /** The transfer under way: `null` once it succeeded, else the ended reason its failure gives. */
  private transferring: Promise<string | null> | null = null;

  private async transfer(destination: string): Promise<string | null> {
    this.record.status = 'forwarding';
    void this.deps.notifier.statusUpdate(this.record, 'forwarding', { destination });
    try {
      await this.deps.telephony.transfer(this.record, destination);
      return null;
    } catch (err) {
      this.log.error({ err }, 'transfer failed');
      this.record.errors.push(`transfer: ${(err as Error).message}`);
      return `pipeline-error-${(err as { provider?: string }).provider ?? 'telephony'}`;
    }
  }

  private async end(reason: string, options: { hangUp: boolean }): Promise<void> {
    if (this.ended) return;
    this.ended = true;
    this.modelRun?.abort.abort();
    this.disarmSilence();
    this.ledger.clearTimers();
    this.turns.close();
    this.speaker.close();
    const stt = this.stt;
    this.stt = null;
    await stt?.close().catch(() => undefined);
    this.session?.stop();
    if (reason === 'call-transferred' && this.transferring) {
      // closing the stream before the telephony provider took the transfer would drop the caller
      const failure = await this.transferring;
      if (failure) [reason, options] = [failure, { hangUp: true }];
    }
    if (options.hangUp) {
      await this.deps.telephony.hangUp(this.record).catch((err: Error) => {
        this.log.warn({ err }, 'hang-up through the telephony API failed');
      });
    }
    this.media.close();
    await this.ledger.close(reason, this.engineStarted ? this.session : null);
  }

  // ------------------------------------------------------------------------------------------
  // bookkeeping

  /** The TTS of the turn's first sentence: when it was asked, and when its first audio came. */
  private timedTts<T extends { provider: TtsProvider; config: TtsConfig }>(inUse: T): T {
    const turn = this.turn;
    if (!turn || turn.ttsRequestedAt !== null || !this.deps.onTurnLatency) return inUse;
    turn.ttsRequestedAt = performance.now();
    const { provider } = inUse;
    const timed: TtsProvider = {
      id: provider.id,
      open: (config, events, signal) =>
        provider.open(
          config,
          {
            onAudio: (mulaw) => {
              turn.ttsFirstAudioAt ??= performance.now();
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
    if (this.turn) this.turn.audioStarted = true;
  }

  private turnDone(): void {
    const turn = this.turn;
    this.turn = null;
    if (!turn || !this.deps.onTurnLatency) return;
    const { nodeId, audioStarted: _a, ...marks } = turn;
    const complete: TurnMarks = { ...marks, firstFrameAt: performance.now() };
    this.deps.onTurnLatency({
      callId: this.record.id,
      nodeId,
      ...complete,
      ...splitTurnLatency(complete),
      outbound: { ...this.pacer.stats },
    });
  }
}

function toolContent(outcome: ToolCallOutcome | undefined): string {
  if (!outcome) return JSON.stringify({ error: 'no result' });
  if ('result' in outcome) return typeof outcome.result === 'string' ? outcome.result : JSON.stringify(outcome.result);
  return JSON.stringify({ error: outcome.error });
}

function withDefaults<T extends { provider: string; model?: string }>(kind: 'llm' | 'stt' | 'tts', block: T): T {
  if (block.model !== undefined) return block;
  const p = findProvider(defaultCatalog, kind, block.provider) ?? findProvider(defaultCatalog, 'realtime', block.provider);
  return p?.default_model ? { ...block, model: p.default_model } : block;
}
