/**
 * What a pipeline call (`LiveCall`) and a realtime call (`RealtimeCall`) do alike, beside the
 * ledger's bookkeeping: their set-up (the assistant and workflow of the record, the ledger, the
 * pacer timed for turn latency), the engine session and the commands both carry out the same way
 * (tool nodes, hang-up), the silence timers, a provider failure, the end of the call, and the
 * clock of a caller's turn (`TurnClock`: each kind marks it, the first frame out closes it). Each
 * subclass talks to the caller its own way.
 */
import type { Logger } from 'pino';
import { conversationLogger } from '../logger.js';
import { createCallSession, restoreCallSession, type CallSession, type Command } from '../../engine/session.js';
import type { CallEvent, SilencePolicy } from '../../engine/compile.js';
import type { EffectiveAssistant } from '../../engine/assistant.js';
import { applyVariablesToAssistant, applyVariablesToDefinition } from '../../engine/variables.js';
import type { WorkflowDefinition } from '../../engine/schema.js';
import type { Providers, ProviderError } from '../providers/types.js';
import type { ActiveCall } from './active-call.js';
import type { CallObservation, CallTransport } from './transport.js';
import { AudioBridge } from '../audio/bridge.js';
import { CallLedger } from './ledger.js';
import type { CallNotifier, ToolCallOutcome } from './notifier.js';
import { OutboundPacer, type OutboundSink } from './outbound.js';
import type { AnsweredBy, CallRecord, CallStore } from './store.js';
import type { TurnLatency } from './latency.js';
import { TurnClock } from './turn-clock.js';
import type { BackgroundAudio } from '../audio/background.js';
import { CallRecorder } from '../recordings/recorder.js';
import { recordingKey, recordingPath, type RecordingStore } from '../recordings/storage.js';
import { callError, callErrorFrom, endedReasonFor, ErrorCodes, type CallError } from '../errors.js';

/** The ended reason of a call that failed inside Switchboard itself (not a provider, not the caller). */
export const INTERNAL_FAILURE = 'pipeline-error-switchboard';

export interface LiveCallDeps {
  providers: Providers;
  notifier: CallNotifier;
  store: CallStore;
  logger: Logger;
  onTurnLatency?(latency: TurnLatency): void;
  /** Called once the call has ended and everything is released. */
  onEnded?(call: CallRecord): void;
  /** What a call plays and keeps beside the conversation (DECISIONS 13); absent: neither. */
  media?: CallMedia;
}

/** Background clips and recordings, shared by every call of the process. */
export interface CallMedia {
  background?: BackgroundAudio;
  recordings?: RecordingStore;
  /** PUBLIC_URL: `recording_url` is `GET /calls/{id}/recording` on it. */
  publicUrl?: string;
}

/**
 * A call with no workflow runs the assistant alone: one conversation node, `first_message` first
 * (an outbound call: `speech_config.first_message_outbound`, or `first_message` when that is unset).
 */
export function assistantOnlyDefinition(assistant: EffectiveAssistant, outbound = false): WorkflowDefinition {
  const first = (outbound ? assistant.speech_config.first_message_outbound : null) ?? assistant.first_message;
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
        ...(first ? { first_line: first } : {}),
      },
    ],
    edges: [],
  };
}

/** What the event behind a batch of commands tells about them (the key pressed). */
export interface CommandHint {
  dtmf?: string;
}

/** The commands each kind of call carries out its own way (the others are carried out here). */
export type OwnCommand = Exclude<Command, { type: 'call_tool' | 'hang_up' | 'event_rejected' }>;

export abstract class BaseCall implements ActiveCall {
  readonly record: CallRecord;
  protected readonly log: Logger;
  protected readonly assistant: EffectiveAssistant;
  protected readonly definition: WorkflowDefinition;
  protected session!: CallSession;
  protected readonly ledger: CallLedger;
  /** Every frame to the caller; the first one of a reply closes the latency of its turn. */
  protected readonly pacer: OutboundPacer;
  /** The latency of the caller's turn whose first reply frame has not left yet. */
  protected readonly turnClock: TurnClock;
  protected ended = false;
  /** A machine answered: the voicemail message is being left, the conversation is over. */
  protected leavingVoicemail = false;
  /** Silence prompts since the caller last gave input: after the first, `interval_seconds` apply. */
  protected silencePrompts = 0;
  /** The transfer under way: `null` once it succeeded, else the ended reason its failure gives. */
  protected transferring: Promise<string | null> | null = null;
  private silenceTimer: NodeJS.Timeout | null = null;
  private silenceHardTimer: NodeJS.Timeout | null = null;

  /** Between the transport's audio format and the providers' μ-law 8 kHz; null when they are the same. */
  private readonly bridge: AudioBridge | null;
  /** The call's recording, when its assistant asks for consent (DECISIONS 13). */
  private readonly recorder: CallRecorder | null;

  constructor(
    record: CallRecord,
    protected readonly transport: CallTransport,
    protected readonly deps: LiveCallDeps,
    logBindings: Record<string, unknown> = {},
  ) {
    this.record = record;
    // {{variables}} (DECISIONS 12): the record keeps the templates, the call says the values
    const values = record.variable_values ?? {};
    this.assistant = applyVariablesToAssistant(record.assistant as unknown as EffectiveAssistant, values);
    const template = record.definition as unknown as WorkflowDefinition | null;
    this.definition = template
      ? applyVariablesToDefinition(template, values)
      : assistantOnlyDefinition(this.assistant, record.type === 'outbound_phone_call');
    // with gdpr_mode the conversation fields of every line are censored (src/logger.ts)
    this.log = conversationLogger(deps.logger.child({ callId: record.id, workflowId: record.workflow_id, ...logBindings }), this.assistant.gdpr_mode);
    this.ledger = new CallLedger(record, {
      store: deps.store,
      notifier: deps.notifier,
      log: this.log,
      ...(deps.onEnded ? { onEnded: deps.onEnded } : {}),
      onFailure: (err, where) => this.fail(err, where),
      ...(transport.observe
        ? {
            onMessage: (message) => this.observed({ type: 'message', message }),
            onNode: (nodeId, visited) => this.observed({ type: 'node', node_id: nodeId, nodes_visited: visited }),
          }
        : {}),
    });
    // a far end that shows the call (a browser) gets each turn's figures as well
    const onTurnLatency = transport.observe
      ? (latency: TurnLatency) => {
          deps.onTurnLatency?.(latency);
          this.observed({ type: 'latency', latency });
        }
      : deps.onTurnLatency;
    this.turnClock = new TurnClock({
      callId: record.id,
      onTurnLatency,
      onTurnBegin: transport.observe ? (nodeId) => this.observed({ type: 'turn', node_id: nodeId }) : undefined,
      outbound: () => this.pacer.stats,
    });
    this.bridge = AudioBridge.for(transport.audioFormat);
    const bridge = this.bridge;
    const send = bridge ? (frame: Buffer) => transport.sendAudio(bridge.fromProviders(frame)) : (frame: Buffer) => transport.sendAudio(frame);
    this.recorder = this.startRecording();
    const recorder = this.recorder;
    const reporting = this.turnClock.reporting;
    this.pacer = new OutboundPacer(
      this.shielded<OutboundSink>(
        {
          sendFrame: (frame, speech) => {
            send(frame);
            recorder?.heard(frame, this.pacer.slot);
            // the background alone is not the reply: the first frame of speech closes the turn
            if (speech && reporting) this.turnClock.frameSent();
          },
          flush: () => transport.flushAudio?.(),
          sendMark: (name) => transport.mark(name),
          sendClear: () => {
            transport.clear();
            recorder?.cleared();
          },
        },
        'media out',
      ),
      undefined,
      undefined,
      transport.framesPerMessage,
    );
    this.startBackground();
  }

  /**
   * Records the call when its assistant tells the caller so (`recording_consent.enabled`), never
   * with `gdpr_mode`, and only where recordings can be kept.
   */
  private startRecording(): CallRecorder | null {
    const store = this.deps.media?.recordings;
    if (!store || !this.assistant.recording_consent.enabled || this.assistant.gdpr_mode) return null;
    try {
      const upload = store.begin(recordingKey(this.record.organization_id, this.record.id));
      return new CallRecorder(upload, { log: this.log });
    } catch (err) {
      // a recording that cannot start never stops the call
      this.log.error({ err }, 'the call recording could not start');
      this.record.errors.push(callError(ErrorCodes.RECORDING_START_FAILED, 'recording: the recording could not start; the server log has the details under this call id'));
      return null;
    }
  }

  /**
   * `speech_config.background_audio`: the clip plays under the assistant from now (pickup) to
   * hang-up. A clip that cannot be used (a URL that stopped answering) leaves the call without it,
   * said in `errors`. A URL clip not yet loaded by this process starts a moment late.
   */
  private startBackground(): void {
    const setting = this.assistant.speech_config.background_audio;
    const clips = this.deps.media?.background;
    if (!setting.enabled || !setting.clip || !clips) return;
    const start = Math.floor(Math.random() * 1_000);
    clips.bed(setting.clip, setting.volume, start).then(
      (bed) => {
        if (!this.ended) this.pacer.setBackground(bed);
      },
      (err: Error) => {
        this.log.warn({ err }, 'background audio could not be played');
        if (!this.ended) this.record.errors.push(callError(ErrorCodes.BACKGROUND_AUDIO_FAILED, `background_audio: ${err.message}; the call ran without it`));
      },
    );
  }

  abstract start(resumeFrom?: Record<string, unknown>): Promise<void>;
  /**
   * Stops the conversation (what is being said or written is cut) and says `text`, which cannot
   * be interrupted; resolves once it has been played.
   */
  protected abstract leaveVoicemail(text: string): Promise<void>;
  abstract dtmf(digit: string): void;
  /** The far end has played the audio before this progress mark. */
  abstract played(name: string): void;
  /** Caller audio as the providers take it (μ-law 8 kHz). */
  protected abstract callerAudio(mulaw: Buffer): void;

  /** Tells the transport what happened, if it observes the call; what it throws is logged, never more. */
  protected observed(event: CallObservation): void {
    if (!this.transport.observe) return;
    try {
      this.transport.observe(event);
    } catch (err) {
      this.log.warn({ err, event: event.type }, 'the transport could not take a call event');
    }
  }

  /** Caller audio in the transport's format. */
  audio(frame: Buffer): void {
    if (this.ended || frame.length === 0) return;
    const mulaw = this.bridge ? this.bridge.toProviders(frame) : frame;
    this.recorder?.caller(mulaw);
    this.callerAudio(mulaw);
  }

  /**
   * Lines said before the workflow starts, none of them interruptible: the recording consent, and
   * on an outbound call with a workflow, `speech_config.first_message_outbound` (the assistant
   * speaks first; without a workflow it is the conversation's own first line).
   */
  protected openingLines(): string[] {
    const lines: string[] = [];
    if (this.assistant.recording_consent.enabled) lines.push(this.assistant.recording_consent.message);
    const outboundFirst = this.assistant.speech_config.first_message_outbound;
    if (this.record.type === 'outbound_phone_call' && this.record.definition !== null && outboundFirst) lines.push(outboundFirst);
    return lines;
  }

  /**
   * Answering-machine detection said who answered (outbound calls). A machine gets
   * `voicemail_message` (the beep is over: detection waited for it) and the call hangs up
   * `voicemail`; with no message it hangs up at once. A person goes on with the conversation.
   */
  answeredBy(who: AnsweredBy): void {
    if (this.ended || this.leavingVoicemail) return;
    this.record.answered_by = who;
    this.log.info({ answeredBy: who }, 'answering-machine detection');
    if (who !== 'machine') {
      this.ledger.persistSoon(() => this.engineSession());
      return;
    }
    this.leavingVoicemail = true;
    this.disarmSilence();
    const message = this.assistant.voicemail_message;
    if (!message) {
      void this.end('voicemail', { hangUp: true });
      return;
    }
    this.guard(
      this.leaveVoicemail(message).then(() => this.end('voicemail', { hangUp: true })),
      'voicemail',
    );
  }

  /** The transport lost its far end without a hang-up (no media, no answer to pings). */
  farEndGone(why: string): void {
    if (this.ended) return;
    this.log.warn({ why }, 'media stream gone; ending the call');
    void this.terminate('customer-ended-call', callError(ErrorCodes.CALL_STREAM_LOST, `the media stream went away: ${why}`));
  }

  /** The caller hung up (stream `stop` or the socket closed). */
  callerHungUp(): void {
    if (this.ended) return;
    if (this.session?.isStarted()) this.session.send({ type: 'hangup' });
    void this.end('customer-ended-call', { hangUp: false });
  }

  /**
   * A defect inside the call (its own code threw or rejected): the call ends
   * `pipeline-error-switchboard`, with its report; never the process, never another call.
   */
  fail(err: unknown, where: string): void {
    this.log.error({ err, where }, 'the call failed inside Switchboard; ending it');
    if (this.ended) return;
    const error = callError(ErrorCodes.CALL_INTERNAL_ERROR, `switchboard: internal error (${where}); the server log has the details under this call id`);
    this.record.errors.push(error);
    void this.end(endedReasonFor(error), { hangUp: true });
  }

  /**
   * Callbacks handed to code that runs them from the event loop (a provider's socket, a timer):
   * one that throws ends this call instead of reaching the process.
   */
  protected shielded<T extends object>(callbacks: T, where: string): T {
    const out: Record<string, unknown> = {};
    for (const [name, fn] of Object.entries(callbacks)) {
      out[name] =
        typeof fn === 'function'
          ? (...args: unknown[]) => {
              try {
                return (fn as (...a: unknown[]) => unknown)(...args);
              } catch (err) {
                this.fail(err, `${where}.${name}`);
                return undefined;
              }
            }
          : fn;
    }
    return out as T;
  }

  /** Work the call starts and does not wait for: a rejection ends the call, never reaches the process. */
  protected guard(work: Promise<unknown>, where: string): void {
    work.catch((err: unknown) => this.fail(err, where));
  }

  /** Ends the call from outside (shutdown grace over, worker decisions). */
  async terminate(reason: string, note?: CallError): Promise<void> {
    if (note && !this.ended) this.ledger.record.errors.push(note);
    await this.end(reason, { hangUp: true });
  }

  isEnded(): boolean {
    return this.ended;
  }

  // ------------------------------------------------------------------------------------------
  // what each kind of call does its own way

  /** Carries out `say`, `set_provider_overrides`, `run_model` and `transfer`. */
  protected abstract perform(command: OwnCommand, hint: CommandHint): void;

  /** Nothing of ours is still to be heard and the caller is not speaking: silence counts. */
  protected abstract silenceCounts(): boolean;

  /** Stops what the call runs (model, speech, its own timers) and closes its providers. */
  protected abstract release(): Promise<void>;

  /** The engine's session for the record (saved as it goes and at the end), once it counts. */
  protected engineSession(): CallSession | null {
    return this.session?.isStarted() ? this.session : null;
  }

  /** `max_duration_seconds` has passed. */
  protected maxDurationReached(): void {
    this.dispatch({ type: 'timer.max_duration' });
  }

  /** The provider a failure that names none is put down to (`pipeline-error-<provider>`). */
  protected unnamedProvider(): string {
    return 'unknown';
  }

  /** How long the first silence check waits once armed. */
  protected firstSilenceCheckSeconds(): number {
    const policy = this.assistant.speech_config.silence;
    return this.silencePrompts === 0 ? policy.first_check_seconds : policy.interval_seconds;
  }

  // ------------------------------------------------------------------------------------------
  // engine

  /** Creates (or restores) the engine session and arms `max_duration_seconds`. */
  protected startSession(resumeFrom?: Record<string, unknown>) {
    const options = {
      tools: this.assistant.llm_config.tools ?? [],
      end_call_message: this.assistant.speech_config.end_call_message,
      silence: this.silencePolicy(),
    };
    this.session = resumeFrom
      ? restoreCallSession(this.definition, resumeFrom as never, options)
      : createCallSession(this.definition, options);
    this.ledger.timer(this.assistant.max_duration_seconds * 1000, () => this.maxDurationReached());
    return options;
  }

  protected dispatch(event: CallEvent): void {
    // leaving a voicemail, the conversation is over: nothing more is said or asked of the model
    if (this.ended || this.leavingVoicemail) return;
    this.carryOut(this.session.send(event));
  }

  protected carryOut(commands: Command[], hint: CommandHint = {}): void {
    if (this.leavingVoicemail) return;
    for (const command of commands) {
      this.log.debug({ command: command.type, node: 'node_id' in command ? command.node_id : undefined }, 'engine command');
      if (this.ended) return;
      switch (command.type) {
        case 'call_tool':
          this.guard(this.callToolNode(command.tool_call_id, command.tool_name, command.url, command.arguments, command.node_id), 'tool node');
          break;
        case 'hang_up':
          void this.end(command.reason, { hangUp: command.reason !== 'call-transferred' });
          break;
        case 'event_rejected':
          this.log.debug({ rejected: command }, 'engine ignored an event');
          break;
        default:
          this.perform(command, hint);
      }
    }
    this.ledger.persistSoon(() => this.engineSession());
  }

  private async callToolNode(
    toolCallId: string,
    name: string,
    url: string,
    args: Record<string, unknown>,
    nodeId: string,
  ): Promise<void> {
    const [outcome] = await this.deps.notifier.toolCalls(this.record, [{ id: toolCallId, name, arguments: args }], { url, nodeId });
    if (this.ended) return;
    if (outcome && 'result' in outcome) this.dispatch({ type: 'tool.result', tool_call_id: toolCallId, result: outcome.result });
    else this.dispatch({ type: 'tool.failed', tool_call_id: toolCallId, error: outcome?.error ?? 'no result' });
  }

  // ------------------------------------------------------------------------------------------
  // silence (DECISIONS 13)

  /**
   * What the engine does on `timer.silence`. `autonomous_silence_handling`: the checks of
   * `speech_config.silence` (the model writes each check-in when `messages` is empty). Without it
   * there are no check-ins: the first check is the last, and says `end_call_message`.
   */
  private silencePolicy(): SilencePolicy {
    const speech = this.assistant.speech_config;
    if (!this.assistant.autonomous_silence_handling) {
      return { messages: [], final_message: speech.end_call_message || null, max_attempts: 0 };
    }
    const { messages, final_message, max_attempts } = speech.silence;
    return { messages, final_message, max_attempts };
  }

  /**
   * Silence checks (`speech_config.silence`) and the hard `silence_timeout_seconds`, while the
   * engine waits for the caller; without `autonomous_silence_handling`, one check after
   * `silence_timeout_seconds`, which ends the call.
   */
  protected armSilence(): void {
    if (this.ended || this.leavingVoicemail || !this.session || !this.silenceCounts() || this.session.state().awaiting !== 'caller') return;
    this.disarmSilence();
    const policy = this.assistant.speech_config.silence;
    const autonomous = this.assistant.autonomous_silence_handling;
    const fire = (nextMs: number) => {
      this.silenceTimer = setTimeout(() => {
        this.silenceTimer = null;
        try {
          if (!this.silenceCounts()) return;
          this.silencePrompts++;
          this.dispatch({ type: 'timer.silence' });
          if (!this.ended && autonomous) fire(policy.interval_seconds * 1000);
        } catch (err) {
          this.fail(err, 'silence check');
        }
      }, nextMs);
    };
    if (!autonomous) {
      fire(this.assistant.silence_timeout_seconds * 1000);
      return;
    }
    fire(this.firstSilenceCheckSeconds() * 1000);
    this.silenceHardTimer = setTimeout(() => {
      this.silenceHardTimer = null;
      void this.end('silence-timed-out', { hangUp: true });
    }, this.assistant.silence_timeout_seconds * 1000 + policy.max_attempts * policy.interval_seconds * 1000);
  }

  protected disarmSilence(): void {
    if (this.silenceTimer) clearTimeout(this.silenceTimer);
    if (this.silenceHardTimer) clearTimeout(this.silenceHardTimer);
    this.silenceTimer = null;
    this.silenceHardTimer = null;
  }

  /**
   * The model's silence check-in failed (`err`) or said nothing (`err` null): the call goes on,
   * the caller hears `fallback` instead, and a failure is noted in the record's `errors`.
   */
  protected checkInFallback(fallback: string, err: Error | null): string {
    if (err) {
      const provider = (err as ProviderError).provider ?? this.unnamedProvider();
      this.log.warn({ err, code: (err as ProviderError).code }, 'the silence check-in failed; saying the fallback line');
      this.record.errors.push(callError(ErrorCodes.SILENCE_CHECK_IN_FAILED, `${provider}: the silence check-in failed (${err.message}); "${fallback}" was said instead`, provider));
    }
    return fallback;
  }

  // ------------------------------------------------------------------------------------------
  // provider failure, transfer and end

  protected providerFailed(err: ProviderError | Error): void {
    if (this.ended) return;
    const provider = (err as ProviderError).provider ?? this.unnamedProvider();
    this.log.error({ err, code: (err as ProviderError).code }, 'provider failed; ending the call');
    const error = callErrorFrom(err, ErrorCodes.PROVIDER_FAILED, { message: `${provider}: ${err.message}`, provider });
    this.record.errors.push(error);
    void this.end(endedReasonFor(error), { hangUp: true });
  }

  /** Moves the call (`forwarding`); resolves to `null` once done, else the ended reason its failure gives. */
  protected async transfer(destination: string): Promise<string | null> {
    this.record.status = 'forwarding';
    void this.deps.notifier.statusUpdate(this.record, 'forwarding', { destination });
    try {
      await this.transport.transfer(destination);
      return null;
    } catch (err) {
      this.log.error({ err }, 'transfer failed');
      const error = callErrorFrom(err, ErrorCodes.TRANSFER_FAILED, { message: `transfer: ${(err as Error).message}`, provider: this.record.transport });
      this.record.errors.push(error);
      return endedReasonFor(error);
    }
  }

  /** The recording is complete: kept in the store, its URL in the record (and the report). */
  private async keepRecording(): Promise<void> {
    if (!this.recorder) return;
    const kept = await this.recorder.finish();
    const base = (this.deps.media?.publicUrl ?? '').replace(/\/+$/, '');
    this.record.recording_url = kept ? `${base}${recordingPath(this.record.id)}` : null;
    if (!kept) this.record.errors.push(callError(ErrorCodes.RECORDING_NOT_KEPT, 'recording: the recording could not be kept; the server log has the details under this call id'));
  }

  /**
   * Ends the call once: releases what it runs, hangs up (or waits for the transfer), closes the
   * media and the record. Never rejects: a step that throws is logged and the others still run,
   * so the call gets its end and its report whatever failed.
   */
  protected async end(reason: string, options: { hangUp: boolean }): Promise<void> {
    if (this.ended) return;
    this.ended = true;
    const step = async (what: string, fn: () => unknown): Promise<void> => {
      try {
        await fn();
      } catch (err) {
        this.log.error({ err, step: what }, 'a step of ending the call failed');
      }
    };
    await step('timers', () => {
      this.disarmSilence();
      this.ledger.clearTimers();
    });
    await step('release', () => this.release());
    await step('engine', () => this.session?.stop());
    if (reason === 'call-transferred' && this.transferring) {
      // closing the stream before the telephony provider took the transfer would drop the caller
      const failure = await this.transferring.catch(() => endedReasonFor(callError(ErrorCodes.TRANSFER_FAILED, 'transfer failed', this.record.transport)));
      if (failure) [reason, options] = [failure, { hangUp: true }];
    }
    if (options.hangUp) {
      await this.transport.hangUp().catch((err: Error) => {
        this.log.warn({ err }, 'hang-up through the carrier failed');
      });
    }
    await step('last node', () => {
      const session = this.engineSession();
      if (session) this.ledger.noteNode(session);
    });
    this.observed({ type: 'ended', ended_reason: reason });
    await step('media', () => this.transport.close());
    await step('recording', () => this.keepRecording());
    await this.ledger.close(reason, this.engineSession());
  }
}

/** A tool's outcome as the model reads it: its result (JSON unless a string), or `{"error": …}`. */
export function toolOutput(outcome: ToolCallOutcome | undefined): string {
  if (!outcome) return JSON.stringify({ error: 'no result' });
  if ('result' in outcome) return typeof outcome.result === 'string' ? outcome.result : JSON.stringify(outcome.result);
  return JSON.stringify({ error: outcome.error });
}
