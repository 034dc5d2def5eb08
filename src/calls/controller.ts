/**
 * THE call: one controller for every conversation, a phone call (pipeline or realtime), a web call
 * or a chat. It owns the engine session and the one switch over its commands, the timers (silence
 * checks, max duration), tool nodes, transfers, voicemail and the end sequence. What talks with the
 * caller is a backend (src/calls/backend.ts) it composes; what it writes goes to the conversation's
 * log (src/calls/conversation.ts); a call's audio path is `CallAudio`. See docs/controller.md.
 */
import type { Logger } from 'pino';
import { createCallSession, restoreCallSession, type CallSession, type Command } from '../../engine/session.js';
import type { CallEvent } from '../../engine/compile.js';
import type { EffectiveAssistant } from '../../engine/assistant.js';
import type { WorkflowDefinition } from '../../engine/schema.js';
import { buildModelContext } from '../../engine/prompt.js';
import type { ProviderError } from '../providers/types.js';
import { callError, callErrorFrom, endedReasonFor, ErrorCodes, type CallError } from '../errors.js';
import type { BackendContext, BackendEvents, CommandHint, ConversationBackend, Heard, LineRequest, NodeView, ToolCaller } from './backend.js';
import type { CallAudio } from './call-audio.js';
import type { Conversation, ConversationLog } from './conversation.js';
import { applyControl, type ControlOutcome, type LiveControl } from './live-control.js';
import type { TurnEndDetail } from './turn-clock.js';
import { toolOutput } from './model-turn.js';
import { keysNotSent, keysSent, keysSentLine, playKeys } from './keypad.js';
import { silencePolicy } from './silence.js';
import { shielded } from './shield.js';
import type { AnsweredBy } from './store.js';
import type { CallObservation, CallTransport } from './transport.js';
import { coldTransfer, startWarmTransfer, warmTransferLost, type WarmTransfer, type WarmTransferHost, type WarmTransferKit } from './warm-transfer.js';

/** What a controller runs: made by `createCall` (src/calls/call.ts) or a chat's turn. */
export interface ConversationSpec<R> {
  record: R;
  /** The assistant and workflow, `{{variables}}` substituted. */
  assistant: EffectiveAssistant;
  definition: WorkflowDefinition;
  log: Logger;
  conversation: ConversationLog;
  /** Lines said before the workflow starts, none of them interruptible. */
  openingLines: readonly string[];
  /** The far end; null for a chat (nothing to hang up, transfer or close). */
  transport: CallTransport | null;
  /** A call's audio path; null for a chat. */
  audio: CallAudio | null;
  /** Silence checks and `max_duration_seconds` (a call's; a chat has neither). */
  timed: boolean;
  callTools: ToolCaller;
  /** A defect fails the turn (`idle()` rejects with it: a chat's request answers the error) instead of ending the conversation. */
  rejectOnDefect?: boolean;
  /** The caller's turn ended in `nodeId` (the turn clock starts). */
  onTurnEnded?(nodeId: string | null, detail: TurnEndDetail): void;
  /** What the transport is told of the call (`observed`), for its listeners too (src/calls/listen.ts). */
  onObserved?(event: CallObservation): void;
  /** Makes the backend, given what the controller offers it. */
  backend(context: BackendContext): ConversationBackend;
  /** What a warm transfer needs of the call's providers (a phone or web call's). */
  warmTransfer?: WarmTransferKit;
}

export class CallController<R extends { id: string }> {
  readonly record: R;
  private readonly log: Logger;
  private readonly assistant: EffectiveAssistant;
  private readonly definition: WorkflowDefinition;
  private readonly conversation: ConversationLog;
  /** The conversation's one list: the engine's history, and the record's lines (conversation.ts). */
  private readonly lines: Conversation;
  private readonly transport: CallTransport | null;
  private readonly audioPath: CallAudio | null;
  private readonly backend: ConversationBackend;
  private session!: CallSession;
  private ended = false;
  private ending: Promise<void> | null = null;
  /** The engine has started (after the opening lines): events before that are not for it. */
  private engineStarted = false;
  /** A machine answered: the voicemail message is being left, the conversation is over. */
  private leavingVoicemail = false;
  /** Silence prompts since the caller last gave input: after the first, `interval_seconds` apply. */
  private silencePrompts = 0;
  /** The transfer under way: `null` once it succeeded, else the ended reason its failure gives. */
  private transferring: Promise<string | null> | null = null;
  /** The warm transfer under way (src/calls/warm-transfer.ts). */
  private warm: WarmTransfer | null = null;
  private silenceTimer: NodeJS.Timeout | null = null;
  private silenceHardTimer: NodeJS.Timeout | null = null;
  /** Settles once the backend has started (or failed to): a voicemail line waits for it. */
  private backendSettled!: () => void;
  private readonly backendReady = new Promise<void>((resolve) => (this.backendSettled = resolve));
  /** Work started and not yet over (tool nodes, voicemail): a chat's turn waits for none. */
  private running = 0;
  private idleWaiters: Array<() => void> = [];
  /** The defect that failed a turn (`rejectOnDefect`). */
  private defect: { err: unknown } | null = null;

  constructor(private readonly spec: ConversationSpec<R>) {
    this.record = spec.record;
    this.log = spec.log;
    this.assistant = spec.assistant;
    this.definition = spec.definition;
    this.conversation = spec.conversation;
    this.lines = spec.conversation.conversation;
    this.transport = spec.transport;
    this.audioPath = spec.audio;
    this.backend = spec.backend({
      events: this.events(),
      assistant: this.assistant,
      log: this.log,
      nodeId: () => (this.session ? this.session.state().node_id : null),
      engineStarted: () => this.engineStarted,
      shield: (callbacks, where) => this.shielded(callbacks, where),
      guard: (work, where) => this.guard(work, where),
      ...(this.audioPath ? { pressKeys: (keys: string, nodeId: string | null, signal?: AbortSignal) => this.pressKeys(keys, nodeId, signal) } : {}),
    });
    this.audioPath?.startBackground(() => this.ended);
  }

  // ------------------------------------------------------------------------------------------
  // what the transport and the service call

  /** The media stream started (a chat: its turn): connect the backend, start (or resume) the engine, speak. */
  async start(resumeFrom?: Record<string, unknown>): Promise<void> {
    this.startSession(resumeFrom);
    try {
      const resumed = resumeFrom !== undefined;
      await this.backend.start(this.startNode(resumed), resumed ? this.session.state().provider_overrides : {});
    } finally {
      this.backendSettled();
    }
    // a machine answered before the media connected: only the voicemail message is said
    if (this.ended || this.leavingVoicemail) return;
    for (const line of this.spec.openingLines) {
      await this.sayOwn(line);
      if (this.ended || this.leavingVoicemail) return;
    }
    this.engineStarted = true;
    this.carryOut(this.session.start());
    if (resumeFrom !== undefined && this.session.state().awaiting === 'transfer') warmTransferLost(this.warmHost());
    this.armSilence();
  }

  /** Caller audio in the transport's format. */
  audio(frame: Buffer): void {
    if (this.ended || frame.length === 0 || !this.audioPath) return;
    this.backend.callerAudio(this.audioPath.fromCaller(frame));
  }

  /**
   * A key press is caller input, and it cuts interruptible speech at once (as a confirmed barge-in
   * would): a keypad menu stops when the caller has chosen.
   */
  dtmf(digit: string): void {
    if (this.ended || !this.engineStarted) return;
    this.silencePrompts = 0;
    this.backend.keyPressed(this.session.state().awaiting === 'model_choice');
    // a cut line arms the silence checks as it settles; the key press is the caller's answer
    this.disarmSilence();
    this.backend.afterReply(() => {
      const line = { role: 'user' as const, content: `DTMF: ${digit}`, nodeId: this.session.state().node_id };
      this.lines.through(line, () => this.dispatch({ type: 'dtmf', digits: digit }, { dtmf: digit }));
    });
  }

  /** A chat's message: the customer's turn. */
  said(text: string): void {
    this.callerTurn(text);
  }

  /** The far end has played the audio before this progress mark. */
  played(name: string): void {
    this.audioPath?.playout.echoed(name);
  }

  /**
   * Answering-machine detection said who answered (outbound calls). A machine gets
   * `voicemail_message` (the beep is over: detection waited for it) and the call hangs up
   * `voicemail`; with no message it hangs up at once. A person goes on with the conversation.
   */
  answeredBy(who: AnsweredBy): void {
    if (this.ended || this.leavingVoicemail) return;
    this.conversation.answeredBy(who);
    this.log.info({ answeredBy: who }, 'answering-machine detection');
    if (who !== 'machine') {
      this.conversation.persistSoon(() => this.engineSession());
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
    if (this.spec.rejectOnDefect) {
      // the turn fails as a whole, nothing more is carried out, and the record is not closed
      this.defect = { err };
      this.ended = true;
      this.checkIdle();
      return;
    }
    const error = callError(ErrorCodes.CALL_INTERNAL_ERROR, `switchboard: internal error (${where}); the server log has the details under this call id`);
    this.conversation.error(error);
    void this.end(endedReasonFor(error), { hangUp: true });
  }

  /** Ends the call from outside (shutdown grace over, worker decisions); joined to an operator, both legs are hung up. */
  async terminate(reason: string, note?: CallError): Promise<void> {
    if (note && !this.ended) this.conversation.error(note);
    if (this.ended) void this.warm?.legs?.hangUp();
    await this.end(reason, { hangUp: true });
  }

  isEnded(): boolean {
    return this.ended;
  }

  /** A live control (`POST /calls/{id}/control`), applied now: src/calls/live-control.ts. */
  control(control: LiveControl): ControlOutcome {
    return applyControl(control, {
      state: () => (this.ended || this.leavingVoicemail ? 'ending' : !this.engineStarted ? 'opening' : this.session.state().status === 'active' ? 'live' : 'ending'),
      cut: () => this.backend.cut?.(this.session.state().awaiting === 'model_choice'),
      interrupt: () => this.backend.interrupt(),
      send: (event, stopFirst) => {
        const commands = this.session.send(event);
        const refused = commands.find((c) => c.type === 'event_rejected');
        if (refused?.type === 'event_rejected') return refused;
        if (stopFirst) this.backend.interrupt();
        // the call ends with the control's line: no operator is left ringing or waiting
        if (event.type === 'control.end') this.warm?.stop();
        this.carryOut(commands);
        // the record shows the node at once (the answer to the control reads it)
        if (!this.ended) this.conversation.noteNode(this.session);
        return null;
      },
      contextAdded: (role, content) => this.backend.contextAdded?.(role, content),
      endNow: () => void this.terminate('api-ended-call'),
    });
  }

  /**
   * Something of ours is still under way: a line queued or playing, a response or a tool round of
   * the backend, a tool node (a test suite's voice test waits for it: src/suites/voice-test.ts).
   */
  busy(): boolean {
    return !this.ended && (this.running > 0 || this.backend.busy());
  }

  /** Nothing runs any more: the engine waits for the caller, or the conversation has ended (a chat's turn is over). */
  async idle(): Promise<void> {
    await new Promise<void>((resolve) => {
      this.idleWaiters.push(resolve);
      this.checkIdle();
    });
    await this.ending;
    if (this.defect) throw this.defect.err;
  }

  /** The engine's session, once it counts (for the record: saved as it goes and at the end). */
  engineSession(): CallSession | null {
    return this.engineStarted ? this.session : null;
  }

  // ------------------------------------------------------------------------------------------
  // the backend's events

  private events(): BackendEvents {
    return {
      silenceBroken: () => this.disarmSilence(),
      callerInput: () => {
        this.silencePrompts = 0;
        this.disarmSilence();
      },
      turnEnded: (detail = {}) => this.spec.onTurnEnded?.(this.session ? this.session.state().node_id : null, detail),
      callerTurn: (text) => this.callerTurn(text),
      replied: (text, nodeId, recorded = false) =>
        this.lines.through(recorded ? null : { role: 'assistant', content: text, nodeId }, () => this.dispatch({ type: 'model.replied', text })),
      wrote: (text, nodeId) => this.lines.line({ role: 'assistant', content: text, nodeId }),
      choseTransition: (name, nodeId, answer) => this.choseTransition(name, nodeId, answer),
      toolResult: (name, content, nodeId) => this.lines.line({ role: 'tool', content, nodeId, toolName: name }),
      callTools: this.spec.callTools,
      settled: () => {
        this.armSilence();
        this.checkIdle();
      },
      checkInFallback: (fallback, err, provider) => this.checkInFallback(fallback, err, provider),
      failed: (err, provider) => this.providerFailed(err, provider),
      defect: (err, where) => this.fail(err, where),
    };
  }

  /** After the end the engine ignores a turn (one that waited for a reply), and the record still takes it. */
  private callerTurn(text: string): void {
    // words over the opening lines come before the conversation has begun
    if (!this.engineStarted) return;
    this.log.debug({ text }, 'caller turn');
    this.disarmSilence();
    this.lines.through({ role: 'user', content: text, nodeId: this.session.state().node_id }, () => this.dispatch({ type: 'caller.said', text }));
  }

  private choseTransition(name: string, nodeId: string, answer?: (rejected: string | null, active: boolean) => void): void {
    if (this.ended || this.leavingVoicemail) {
      // the conversation is over: the model's function call is answered, the engine does not move
      answer?.('the call is ending', false);
      return;
    }
    const commands = this.session.send({ type: 'model.chose_transition', function_name: name, node_id: nodeId });
    if (answer) {
      const rejected = commands.find((c) => c.type === 'event_rejected');
      answer(rejected?.type === 'event_rejected' ? rejected.message : null, this.session.state().status === 'active');
    }
    this.carryOut(commands);
  }

  // ------------------------------------------------------------------------------------------
  // engine

  /** Creates (or restores) the engine session and arms `max_duration_seconds`. */
  private startSession(resumeFrom?: Record<string, unknown>): void {
    const options = this.sessionOptions();
    this.session = resumeFrom
      ? restoreCallSession(this.definition, resumeFrom as never, options)
      : createCallSession(this.definition, options);
    if (this.spec.timed) this.conversation.timer(this.assistant.max_duration_seconds * 1000, () => this.maxDurationReached());
  }

  private sessionOptions() {
    return {
      tools: this.assistant.llm_config.tools ?? [],
      end_call_message: this.assistant.speech_config.end_call_message,
      silence: silencePolicy(this.assistant),
      history: this.lines,
    };
  }

  /** The node a backend starts in: the saved one, or the entry (its offer, if a model speaks there). */
  private startNode(resumed: boolean): NodeView {
    if (resumed) return this.nodeView();
    const nodeId = this.definition.entry_node;
    const entry = this.definition.nodes.find((n) => n.id === nodeId);
    return {
      nodeId,
      context: () => (entry?.type === 'conversation' ? buildModelContext(this.session.workflow, nodeId, { tools: this.sessionOptions().tools }) : null),
    };
  }

  private nodeView(): NodeView {
    return { nodeId: this.session.state().node_id, context: () => this.session.modelContext() };
  }

  private maxDurationReached(): void {
    if (this.engineStarted) this.dispatch({ type: 'timer.max_duration' });
    else void this.end('exceeded-max-duration', { hangUp: true });
  }

  private dispatch(event: CallEvent, hint: CommandHint = {}): void {
    // leaving a voicemail, the conversation is over: nothing more is said or asked of the model
    if (this.ended || this.leavingVoicemail) return;
    this.carryOut(this.session.send(event), hint);
  }

  /** The one switch over the engine's commands. */
  private carryOut(commands: Command[], hint: CommandHint = {}): void {
    if (this.leavingVoicemail) return;
    /** The lines of this batch: a warm transfer joins the operator once they are over. */
    const lines: Promise<void>[] = [];
    for (const command of commands) {
      this.log.debug({ command: command.type, node: 'node_id' in command ? command.node_id : undefined }, 'engine command');
      if (this.ended) return;
      switch (command.type) {
        case 'say':
          lines.push(this.say({ text: command.text, interruptible: command.interruptible, sayId: command.say_id, nodeId: command.node_id, ...(command.source ? { source: command.source } : {}) }));
          break;
        case 'set_provider_overrides': {
          const { type: _t, node_id: _n, ...blocks } = command;
          this.backend.setOverrides(blocks);
          break;
        }
        case 'run_model':
          this.backend.setNode(this.nodeView());
          this.backend.reply(command, hint);
          break;
        case 'call_tool':
          this.guard(this.callToolNode(command), 'tool node');
          break;
        case 'transfer':
          this.transferring = coldTransfer(command.destination, this.transport, this.conversation, this.log);
          break;
        case 'warm_transfer':
          this.warm = startWarmTransfer(this.warmHost(), command, Promise.all(lines).then(() => undefined));
          break;
        case 'hang_up':
          void this.end(command.reason, { hangUp: command.reason !== 'call-transferred' });
          break;
        case 'event_rejected':
          this.log.debug({ rejected: command }, 'engine ignored an event');
          break;
      }
    }
    this.conversation.persistSoon(() => this.engineSession());
    if (!this.ended) this.backend.setNode(this.nodeView());
  }

  /** An engine line; once over, the record and the engine's history get what the caller heard of it. */
  private say(line: LineRequest): Promise<void> {
    return new Promise((resolve) =>
      this.backend.say(line, (heard) => {
        resolve();
        this.lineOver(line, heard);
      }),
    );
  }

  /** One of the controller's own lines (consent, the outbound first line, voicemail); resolves once over. */
  private sayOwn(text: string): Promise<void> {
    const asked = this.backend.ownLinesRecordedWhenAsked;
    return new Promise((resolve) => {
      this.backend.say({ text, interruptible: false, sayId: null, nodeId: null }, (heard) => {
        if (!asked && heard.text) this.lines.line({ role: 'assistant', content: heard.text, nodeId: null });
        resolve();
      });
      if (asked) this.lines.line({ role: 'assistant', content: text, nodeId: null });
    });
  }

  private lineOver(line: LineRequest, heard: Heard): void {
    if (line.sayId !== null) this.lines.spoken(line.sayId, heard.text, heard.complete);
    else if (heard.text) this.lines.line({ role: 'assistant', content: heard.text, nodeId: line.nodeId, ...(line.source ? { source: line.source } : {}) });
    if (line.sayId !== null) {
      this.dispatch({ type: 'assistant.done_speaking', say_id: line.sayId, ...(heard.complete ? {} : { heard: heard.text }) });
    }
    this.armSilence();
    this.checkIdle();
  }

  private async callToolNode(command: Extract<Command, { type: 'call_tool' }>): Promise<void> {
    const [outcome] = await this.spec.callTools(
      [{ id: command.tool_call_id, name: command.tool_name, arguments: command.arguments }],
      { url: command.url, nodeId: command.node_id },
    );
    if (this.ended) return;
    const line = { role: 'tool' as const, content: toolOutput(outcome), nodeId: command.node_id, toolName: command.tool_name };
    this.lines.through(line, () => {
      if (outcome && 'result' in outcome) this.dispatch({ type: 'tool.result', tool_call_id: command.tool_call_id, result: outcome.result });
      else this.dispatch({ type: 'tool.failed', tool_call_id: command.tool_call_id, error: outcome?.error ?? 'no result' });
    });
  }

  /** The model's `press_keys`: the keys played whole are a line of the record and of the engine's history. */
  private async pressKeys(keys: string, nodeId: string | null, signal?: AbortSignal): Promise<{ sent: boolean; output: string }> {
    if (this.ended || this.leavingVoicemail || !this.audioPath) return { sent: false, output: keysNotSent('the call is ending; no key was sent') };
    const sent = await playKeys(this.audioPath.playout, keys, signal);
    if (!sent || this.ended) return { sent: false, output: keysNotSent('the keys were stopped before they had all been sent') };
    this.lines.through({ role: 'assistant', content: keysSentLine(keys), nodeId }, () => this.dispatch({ type: 'model.replied', text: keysSentLine(keys) }));
    return { sent: true, output: keysSent(keys) };
  }

  // ------------------------------------------------------------------------------------------
  // silence (DECISIONS 13)

  /**
   * Silence checks (`speech_config.silence`) and the hard `silence_timeout_seconds`, while the
   * engine waits for the caller; without `autonomous_silence_handling`, one check after
   * `silence_timeout_seconds`, which ends the call.
   */
  private armSilence(): void {
    if (!this.spec.timed || this.ended || this.leavingVoicemail || !this.engineStarted) return;
    if (!!this.backend.busy() || this.session.state().awaiting !== 'caller') return;
    this.disarmSilence();
    const policy = this.assistant.speech_config.silence;
    const autonomous = this.assistant.autonomous_silence_handling;
    const fire = (nextMs: number) => {
      this.silenceTimer = setTimeout(() => {
        this.silenceTimer = null;
        try {
          if (!!this.backend.busy()) return;
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

  /**
   * The model's silence check-in failed (`err`) or said nothing (`err` null): the call goes on,
   * the caller hears `fallback` instead, and a failure is noted in the record's `errors`.
   */
  private checkInFallback(fallback: string, err: Error | null, fallbackProvider: string): string {
    if (err) {
      const provider = (err as ProviderError).provider ?? fallbackProvider;
      this.log.warn({ err, code: (err as ProviderError).code }, 'the silence check-in failed; saying the fallback line');
      this.conversation.error(callError(ErrorCodes.SILENCE_CHECK_IN_FAILED, `${provider}: the silence check-in failed (${err.message}); "${fallback}" was said instead`, provider));
    }
    return fallback;
  }

  // ------------------------------------------------------------------------------------------
  // failures, voicemail, transfer and the end

  private providerFailed(err: Error, fallbackProvider: string): void {
    if (this.ended) return;
    const provider = (err as ProviderError).provider ?? fallbackProvider;
    this.log.error({ err, code: (err as ProviderError).code }, 'provider failed; ending the call');
    const error = callErrorFrom(err, ErrorCodes.PROVIDER_FAILED, { message: `${provider}: ${err.message}`, provider });
    this.conversation.error(error);
    void this.end(endedReasonFor(error), { hangUp: true });
  }

  /** Stops the conversation (what is being said is cut) and says `text`, which cannot be interrupted. */
  private async leaveVoicemail(text: string): Promise<void> {
    // a machine known before the backend connected: the message waits for the voice that says it
    await this.backendReady;
    if (this.ended) return;
    this.backend.interrupt();
    await this.sayOwn(text);
  }

  /** What a warm transfer (src/calls/warm-transfer.ts) has of the call. */
  private warmHost(): WarmTransferHost {
    return {
      transport: this.transport,
      kit: this.spec.warmTransfer,
      audio: this.audioPath,
      log: this.log,
      conversation: this.conversation,
      history: () => this.session.history(),
      destination: () => this.session.state().transfer_destination ?? '',
      ended: () => this.ended,
      outcome: (result) => this.dispatch({ type: 'transfer.result', result }),
      joined: (legs) => (this.transferring = legs.ended.then(() => null)),
      guard: (work, where) => this.guard(work, where),
    };
  }

  /** Tells the transport what happened, if it observes the call; what it throws is logged, never more. */
  observed(event: CallObservation): void {
    if (this.spec.onObserved) {
      try {
        this.spec.onObserved(event);
      } catch (err) {
        this.log.warn({ err, event: event.type }, 'the call\'s listeners could not take a call event');
      }
    }
    if (!this.transport?.observe) return;
    try {
      this.transport.observe(event);
    } catch (err) {
      this.log.warn({ err, event: event.type }, 'the transport could not take a call event');
    }
  }

  /**
   * Ends the conversation once: stops the backend, hangs up (or waits for the transfer), closes
   * the media and the record. Never rejects: a step that throws is logged and the others still
   * run, so the call gets its end and its report whatever failed.
   */
  private end(reason: string, options: { hangUp: boolean }): Promise<void> {
    if (this.ended) return this.ending ?? Promise.resolve();
    this.ended = true;
    // a warm transfer not yet joined stops: no operator is left ringing or waiting
    this.warm?.stop();
    this.ending = this.endSequence(reason, options);
    void this.ending.finally(() => this.checkIdle());
    return this.ending;
  }

  private async endSequence(reason: string, options: { hangUp: boolean }): Promise<void> {
    const step = async (what: string, fn: () => unknown): Promise<void> => {
      try {
        await fn();
      } catch (err) {
        this.log.error({ err, step: what }, 'a step of ending the call failed');
      }
    };
    await step('timers', () => {
      this.disarmSilence();
      this.conversation.clearTimers();
    });
    // audio whose time has passed was heard, echoed or not (a far end that hung up, or never echoes)
    await step('played', () => {
      this.audioPath?.playout.settleDue(performance.now());
    });
    await step('release', () => this.backend.close());
    await step('audio', () => this.audioPath?.pacer.close());
    await step('engine', () => this.session?.stop());
    if (reason === 'call-transferred' && this.transferring) {
      // closing the stream before the telephony provider took the transfer would drop the caller
      const carrier = this.transport?.kind ?? 'telephony';
      const failure = await this.transferring.catch(() => endedReasonFor(callError(ErrorCodes.TRANSFER_FAILED, 'transfer failed', carrier)));
      if (failure) [reason, options] = [failure, { hangUp: true }];
    }
    if (options.hangUp && this.transport) {
      await this.transport.hangUp().catch((err: Error) => {
        this.log.warn({ err }, 'hang-up through the carrier failed');
      });
    }
    await step('last node', () => {
      const session = this.engineSession();
      if (session) this.conversation.noteNode(session);
    });
    this.observed({ type: 'ended', ended_reason: reason });
    await step('media', () => this.transport?.close());
    await step('recording', async () => {
      const url = await this.audioPath?.keepRecording();
      if (url !== undefined) this.conversation.recording(url);
    });
    await this.conversation.close(reason, this.engineSession());
  }

  // ------------------------------------------------------------------------------------------
  // guards

  /** Callbacks the event loop runs for this call: one that throws ends this call instead of reaching the process. */
  shielded<T extends object>(callbacks: T, where: string): T {
    return shielded(callbacks, where, (err, at) => this.fail(err, at));
  }

  /** Work the call starts and does not wait for: a rejection ends the call, never reaches the process. */
  private guard(work: Promise<unknown>, where: string): void {
    this.running++;
    work
      .catch((err: unknown) => this.fail(err, where))
      .finally(() => {
        this.running--;
        this.checkIdle();
      });
  }

  private checkIdle(): void {
    if (this.idleWaiters.length === 0) return;
    if (!this.ended && (this.running > 0 || this.backend.busy())) return;
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const resolve of waiters) resolve();
  }
}
