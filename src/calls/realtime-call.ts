/**
 * One realtime call: caller audio → realtime speech-to-speech model → caller, with the same
 * workflow engine as the pipeline deciding. The model hears the caller and answers by itself
 * (server VAD creates its replies); the engine's lines (first lines, edge messages, closing
 * lines) are spoken by asking the model to say them verbatim; transition functions and the
 * assistant's tools are offered to the model as functions. See docs/realtime.md.
 */
import type { Command, RunModelCommand } from '../../engine/session.js';
import { buildModelContext, type ModelContext } from '../../engine/prompt.js';
import type { Tool } from '../../engine/schema.js';
import { ProviderError, type LlmFunction, type RealtimeEvents, type RealtimeFunctionCall, type RealtimeSession } from '../providers/types.js';
import { BaseCall, toolOutput, type CommandHint, type LiveCallDeps, type OwnCommand } from './base-call.js';
import type { ToolCallOutcome } from './notifier.js';
import { FRAME_BYTES } from './outbound.js';
import type { CallRecord } from './store.js';
import type { CallTransport } from './transport.js';
import { applyPronunciations } from './text.js';
import { functionOffer } from './model-turn.js';

/** A mark goes out after at least this much audio: the resolution of "what the caller heard". */
const MARK_SPACING_MS = 100;
/** A requested response that has not started after this long (nothing else running) was lost. */
const RESPONSE_STALL_MS = 8_000;
const MULAW_SILENCE = 0xff;
const SILENT_FRAME = Buffer.alloc(FRAME_BYTES, MULAW_SILENCE);

/** One output item of the model (audio), as far as it has gone out and been heard. */
interface OutputItem {
  id: string;
  /** Audio (ms) handed to the pacer. */
  pushedMs: number;
  /** Audio (ms) the caller has heard (from echoed marks). */
  heardMs: number;
}

/** One model response as the caller hears it: a line the engine asked for, or the model's reply. */
interface Spoken {
  kind: 'say' | 'reply';
  /** `say`: the engine's `say_id` (null for the recording-consent message). */
  sayId: string | null;
  /** `say`: the line as the engine gave it. */
  text: string;
  /** The model's transcript of its audio (whole text so far). */
  transcript: string;
  nodeId: string | null;
  interruptible: boolean;
  /** When it was asked for (performance.now()). */
  requestedAt: number;
  /** Started by server VAD (the caller's turn), not by us. */
  vad: boolean;
  state: 'requested' | 'streaming' | 'streamed';
  items: OutputItem[];
  /** Marks sent and not yet echoed. */
  marks: Set<string>;
  /** Audio short of a whole frame, waiting for more. */
  remainder: Buffer;
  sinceMarkMs: number;
  /** Cut by barge-in (or never said); its remaining events are dropped. */
  cut: boolean;
  /** A model's silence check-in: the line said instead when it says nothing (null: not one, or cut by the caller). */
  fallback: string | null;
  /** A check-in the vendor failed (noted in the record when the fallback is said). */
  failure: Error | null;
  settled: boolean;
  done: Promise<void>;
  resolve: () => void;
}

/** What the model is offered in the current node. */
interface Offer {
  key: string;
  nodeId: string;
  instructions: string;
  functions: LlmFunction[];
  transitions: Set<string>;
  tools: Map<string, Tool>;
}

export class RealtimeCall extends BaseCall {
  private rt: RealtimeSession | null = null;
  /** Settles once the model is connected, or its connection failed (the call is then ending). */
  private rtSettled!: () => void;
  private readonly rtReady = new Promise<void>((resolve) => (this.rtSettled = resolve));
  private readonly abort = new AbortController();
  private offer: Offer | null = null;
  /** Every response not yet settled, in the order it was requested or started. */
  private spoken: Spoken[] = [];
  /** Responses we asked for and that have not started: the adapter sends them in this order. */
  private requested: Spoken[] = [];
  /** The response streaming now (until its `onResponseDone`). */
  private current: Spoken | null = null;
  /** The caller's turn ended: server VAD is creating the next response. */
  private vadExpected = false;
  private callerSpeaking = false;
  private readonly marks = new Map<string, { spoken: Spoken; item: OutputItem; ms: number }>();
  private markSeq = 0;
  private toolsInFlight = 0;
  private stallTimer: NodeJS.Timeout | null = null;
  /** When the model last sent anything at all (performance.now()). */
  private lastModelEventAt = 0;

  constructor(record: CallRecord, transport: CallTransport, deps: LiveCallDeps) {
    super(record, transport, deps, { realtime: true });
  }

  // ------------------------------------------------------------------------------------------
  // lifecycle

  override async start(resumeFrom?: Record<string, unknown>): Promise<void> {
    const options = this.startSession(resumeFrom);

    const nodeId = resumeFrom ? this.session.state().node_id : this.definition.entry_node;
    const entry = this.definition.nodes.find((n) => n.id === nodeId);
    const offer = this.offerFor(
      nodeId,
      resumeFrom
        ? this.session.modelContext()
        : entry?.type === 'conversation'
          ? buildModelContext(this.session.workflow, nodeId, { tools: options.tools })
          : null,
    );
    const config = this.assistant.llm_config;
    const provider = this.deps.providers.realtime.get(config.provider);
    if (!provider) {
      this.rtSettled();
      this.providerFailed(new Error(`no realtime adapter for "${config.provider}"`));
      return;
    }
    try {
      const rt = await provider.connect(
        config,
        {
          instructions: offer.instructions,
          tools: offer.functions,
          turnDetection: { silenceDurationMs: this.assistant.speech_config.turn_taking.endpointing_min_delay * 1000 },
        },
        this.realtimeEvents(),
        this.abort.signal,
      );
      if (this.ended) {
        this.rtSettled();
        void rt.close();
        return;
      }
      this.rt = rt;
      this.offer = offer;
      this.rtSettled();
    } catch (err) {
      this.rtSettled();
      this.providerFailed(err as Error);
      return;
    }
    // a machine answered before the media connected: only the voicemail message is said
    if (this.leavingVoicemail) return;
    for (const line of this.openingLines()) {
      const said = this.sayLine(line, false, null, null);
      await said.done;
      if (this.ended || this.leavingVoicemail) return;
    }
    this.carryOut(this.session.start());
    this.armSilence();
  }

  protected override async leaveVoicemail(text: string): Promise<void> {
    // a machine known before the model connected: the message waits for the model that says it
    await this.rtReady;
    if (this.ended) return;
    // the model stops (what it was saying is cut), and the message is a line it cannot be talked over in
    this.bargeIn();
    await this.sayLine(text, false, null, null).done;
  }

  protected override callerAudio(mulaw: Buffer): void {
    if (this.ended || !this.rt || mulaw.length === 0) return;
    // While a line that cannot be interrupted plays, the model hears silence: its server VAD
    // would otherwise cut the line (it interrupts on its own).
    if (this.spoken.some((s) => !s.interruptible)) {
      this.rt.sendAudio(mulaw.length === FRAME_BYTES ? SILENT_FRAME : Buffer.alloc(mulaw.length, MULAW_SILENCE));
      return;
    }
    this.rt.sendAudio(mulaw);
  }

  /** A key press is caller input, and it cuts interruptible speech at once, as in a pipeline call. */
  override dtmf(digit: string): void {
    if (this.ended || !this.session) return;
    this.silencePrompts = 0;
    // a tool node's choice is not cut: the engine waits for it, and a key press asks for no other
    if (this.interruptible() && this.session.state().awaiting !== 'model_choice') this.bargeIn();
    this.ledger.recordMessage('user', `DTMF: ${digit}`, this.session.state().node_id);
    this.disarmSilence();
    this.carryOut(this.session.send({ type: 'dtmf', digits: digit }), { dtmf: digit });
  }

  override played(name: string): void {
    const m = this.marks.get(name);
    if (!m) return;
    this.marks.delete(name);
    m.spoken.marks.delete(name);
    m.item.heardMs = Math.max(m.item.heardMs, m.ms);
    this.settleIfPlayed(m.spoken);
  }

  // ------------------------------------------------------------------------------------------
  // engine

  /** After the engine's commands, the model is offered the (maybe new) node's prompt and functions. */
  protected override carryOut(commands: Command[], hint: CommandHint = {}): void {
    super.carryOut(commands, hint);
    this.syncModel();
  }

  protected override perform(command: OwnCommand, hint: CommandHint): void {
    switch (command.type) {
      case 'say':
        this.sayLine(command.text, command.interruptible, command.say_id, command.node_id);
        break;
      case 'set_provider_overrides':
        // Call-start checks refuse node overrides for realtime assistants; nothing to switch.
        this.log.debug({ node: command.node_id }, 'provider overrides ignored by a realtime call');
        break;
      case 'run_model':
        this.runModel(command, hint);
        break;
      case 'transfer':
        // the `hang_up` that follows waits for it (BaseCall.end): the stream stays open until
        // Twilio has taken the new TwiML, and a refused transfer ends with its failure's reason
        this.transferring = this.transfer(command.destination);
        break;
    }
  }

  /**
   * `run_model`: the node's prompt and functions are on the session already (`syncModel`). A
   * caller's spoken turn was answered by server VAD; other reasons need a response from us.
   */
  private runModel(command: RunModelCommand, hint: CommandHint): void {
    this.syncModel();
    if (command.reason === 'node_entered') {
      this.requestReply(undefined, command.node_id);
    } else if (command.reason === 'tool_result') {
      const result = [...command.messages].reverse().find((m) => m.role === 'tool');
      this.requestReply(`${command.system}\n\nThe tool's result: ${result?.content ?? '(none)'}`, command.node_id);
    } else if (command.reason === 'silence_check') {
      this.requestReply(`${command.system}\n\n${command.instruction}`, command.node_id, command.fallback);
    } else if (hint.dtmf !== undefined) {
      this.requestReply(`${command.system}\n\nThe caller pressed ${hint.dtmf} on the keypad.`, command.node_id);
    }
  }

  /** Keeps the session's instructions and functions those of the current node. */
  private syncModel(): void {
    if (this.ended || !this.rt) return;
    const offer = this.offerFor(this.session.state().node_id, this.session.modelContext());
    if (offer.key === this.offer?.key) return;
    this.offer = offer;
    this.rt.update({ instructions: offer.instructions, tools: offer.functions });
  }

  private offerFor(nodeId: string, context: ModelContext | null): Offer {
    if (!context) {
      // No model turn here (a tool running, a closing line): no way out to offer.
      return {
        key: `${nodeId}:none`,
        nodeId,
        instructions: this.definition.global_prompt ?? '',
        functions: [],
        transitions: new Set(),
        tools: new Map(),
      };
    }
    return {
      key: `${nodeId}:${context.mode}`,
      nodeId,
      instructions: context.system,
      ...functionOffer(context.transitionFunctions, context.tools),
    };
  }

  // ------------------------------------------------------------------------------------------
  // responses: what we ask for, what the model streams, what the caller hears

  private newSpoken(kind: Spoken['kind'], text: string, interruptible: boolean, sayId: string | null, nodeId: string | null): Spoken {
    let resolve!: () => void;
    const done = new Promise<void>((r) => (resolve = r));
    return {
      kind,
      sayId,
      text,
      transcript: '',
      nodeId,
      interruptible,
      requestedAt: performance.now(),
      vad: false,
      state: 'requested',
      items: [],
      marks: new Set(),
      remainder: Buffer.alloc(0),
      sinceMarkMs: 0,
      cut: false,
      fallback: null,
      failure: null,
      settled: false,
      done,
      resolve,
    };
  }

  /** An engine line: the model is asked to say exactly this text. */
  private sayLine(text: string, interruptible: boolean, sayId: string | null, nodeId: string | null): Spoken {
    const s = this.newSpoken('say', text, interruptible, sayId, nodeId);
    this.spoken.push(s);
    if (!this.rt) {
      this.settle(s, false);
      return s;
    }
    this.requested.push(s);
    this.disarmSilence();
    this.rt.createResponse(this.sayExactly(text));
    this.armStall();
    return s;
  }

  private sayExactly(text: string): string {
    return `Say exactly: "${applyPronunciations(text, this.assistant.speech_config.pronunciation)}"`;
  }

  /**
   * A model reply we ask for (a node entered without a line, a tool result, keypad input, a
   * silence check-in: offered no function, with the line said instead if it says nothing).
   */
  private requestReply(instructions: string | undefined, nodeId: string, fallback?: string): void {
    if (!this.rt) return;
    const s = this.expectReply(nodeId);
    if (fallback === undefined) {
      this.rt.createResponse(instructions);
      return;
    }
    s.fallback = fallback;
    this.rt.createResponse(instructions, { tools: [] });
  }

  /** Registers the response that a createResponse / sendFunctionResult(respond) will start. */
  private expectReply(nodeId: string | null): Spoken {
    const s = this.newSpoken('reply', '', true, null, nodeId);
    this.spoken.push(s);
    this.requested.push(s);
    this.disarmSilence();
    this.armStall();
    return s;
  }

  /** A check-in that said nothing (failed, empty, never started): its fallback, as the model's reply. */
  private sayFallback(checkIn: Spoken, fallback: string): void {
    if (this.ended || !this.rt) return;
    const text = this.checkInFallback(fallback, checkIn.failure);
    this.expectReply(checkIn.nodeId);
    this.rt.createResponse(this.sayExactly(text), { tools: [] });
  }

  /** The first event of a response: which of ours it is, or a reply started by server VAD. */
  private responseStarted(): Spoken {
    let s: Spoken;
    if (this.vadExpected) {
      this.vadExpected = false;
      s = this.newSpoken('reply', '', true, null, this.session.state().node_id);
      s.vad = true;
      this.spoken.push(s);
    } else if (this.requested.length > 0) {
      s = this.requested.shift()!;
    } else {
      s = this.newSpoken('reply', '', true, null, this.session.state().node_id);
      this.spoken.push(s);
    }
    s.state = 'streaming';
    this.current = s;
    if (s.vad) this.turnClock.firstToken();
    this.disarmSilence();
    this.clearStall();
    return s;
  }

  private modelAudio(mulaw: Buffer, itemId: string): void {
    if (this.ended) return;
    const s = this.current ?? this.responseStarted();
    if (s.cut || mulaw.length === 0) return;
    let item = s.items.at(-1);
    if (!item || item.id !== itemId) {
      if (item) this.markAfter(s, item, true);
      item = { id: itemId, pushedMs: 0, heardMs: 0 };
      s.items.push(item);
    }
    if (s.vad) {
      // a reply to the caller's turn: its first audio is what the model had to deliver
      this.turnClock.modelReady();
      this.turnClock.audioStarted();
    }
    // Whole frames only, so that a mark never pads the middle of the audio with silence.
    const data = s.remainder.length > 0 ? Buffer.concat([s.remainder, mulaw]) : mulaw;
    const whole = data.length - (data.length % FRAME_BYTES);
    if (whole > 0) {
      this.pacer.push(data.subarray(0, whole));
      item.pushedMs += whole / 8;
      s.sinceMarkMs += whole / 8;
    }
    s.remainder = Buffer.from(data.subarray(whole));
    if (s.sinceMarkMs >= MARK_SPACING_MS) this.markAfter(s, item, false);
  }

  /** A mark after the audio pushed so far; `flush` also sends the short last frame (padded). */
  private markAfter(s: Spoken, item: OutputItem, flush: boolean): void {
    if (flush && s.remainder.length > 0) {
      this.pacer.push(s.remainder);
      item.pushedMs += s.remainder.length / 8;
      s.remainder = Buffer.alloc(0);
    }
    const name = `rt${++this.markSeq}`;
    this.marks.set(name, { spoken: s, item, ms: item.pushedMs });
    s.marks.add(name);
    s.sinceMarkMs = 0;
    this.pacer.mark(name);
  }

  private responseDone(): void {
    if (this.ended) return;
    // A response with no event before its end: empty, or one of ours that said nothing.
    const s = this.current ?? (this.vadExpected || this.requested.length > 0 ? this.responseStarted() : null);
    this.current = null;
    if (s && !s.cut) {
      s.state = 'streamed';
      const last = s.items.at(-1);
      if (last && (s.remainder.length > 0 || s.sinceMarkMs > 0)) this.markAfter(s, last, true);
      this.settleIfPlayed(s);
    }
    // the next response we asked for starts now: its wait counts from here
    this.clearStall();
    this.armStall();
    this.armSilence();
  }

  private settleIfPlayed(s: Spoken): void {
    if (s.state === 'streamed' && s.marks.size === 0) this.settle(s, true);
  }

  /** The response is over for the caller: played whole (`complete`), cut, or never said. */
  private settle(s: Spoken, complete: boolean): void {
    if (s.settled) return;
    s.settled = true;
    if (!complete) s.cut = true;
    this.spoken = this.spoken.filter((x) => x !== s);
    this.requested = this.requested.filter((x) => x !== s);
    for (const name of s.marks) this.marks.delete(name);
    s.marks.clear();
    const basis = s.kind === 'say' ? s.text : s.transcript;
    const pushed = s.items.reduce((ms, i) => ms + i.pushedMs, 0);
    const heardMs = s.items.reduce((ms, i) => ms + i.heardMs, 0);
    // A response with no audio said nothing, whatever its text.
    const heard = pushed === 0 ? '' : complete ? basis.trim() : heardShare(basis, heardMs, pushed);
    if (heard) this.ledger.recordMessage('assistant', heard, s.nodeId);
    s.resolve();
    if (s.kind === 'say') {
      // a line not heard whole (cut, or never said): the engine's history keeps what was heard
      if (s.sayId !== null) {
        this.dispatch({ type: 'assistant.done_speaking', say_id: s.sayId, ...(heard === s.text.trim() ? {} : { heard }) });
      }
    } else if (heard) {
      this.dispatch({ type: 'model.replied', text: heard });
    } else if (s.fallback !== null) {
      this.sayFallback(s, s.fallback);
    }
    this.armSilence();
  }

  /** A requested response that never starts (refused by the vendor in a race) must not block the call. */
  private armStall(): void {
    if (this.stallTimer || this.requested.length === 0 || this.ended) return;
    this.stallTimer = setTimeout(() => {
      this.stallTimer = null;
      if (this.ended || this.current || this.requested.length === 0) return;
      try {
        this.stalled();
      } catch (err) {
        this.fail(err, 'response stall');
      }
    }, RESPONSE_STALL_MS);
  }

  private stalled(): void {
    const lost = this.requested[0]!;
    if (this.lastModelEventAt < lost.requestedAt) {
      // not one event since we asked: the model has gone silent, not merely refused one response
      const provider = this.assistant.llm_config.provider;
      this.providerFailed(new ProviderError('PROVIDER_TIMEOUT', provider, `no answer from the realtime model for ${RESPONSE_STALL_MS / 1000} s`));
      return;
    }
    this.log.warn({ kind: lost.kind, sayId: lost.sayId }, 'a requested realtime response never started');
    this.settle(lost, false);
    this.armStall();
  }

  private clearStall(): void {
    if (this.stallTimer) clearTimeout(this.stallTimer);
    this.stallTimer = null;
  }

  // ------------------------------------------------------------------------------------------
  // the caller

  private realtimeEvents(): RealtimeEvents {
    const heard = <A extends unknown[]>(fn: (...args: A) => void) => (...args: A) => {
      this.lastModelEventAt = performance.now();
      fn(...args);
    };
    return this.shielded<RealtimeEvents>({
      onAudio: heard((mulaw: Buffer, itemId: string) => this.modelAudio(mulaw, itemId)),
      onSpeechStarted: heard(() => this.callerStarted()),
      onSpeechStopped: heard(() => this.callerStopped()),
      onTranscript: heard((role: 'user' | 'assistant', text: string, final: boolean) => this.transcript(role, text, final)),
      onFunctionCall: heard((call: RealtimeFunctionCall) => this.guard(this.functionCall(call), 'function call')),
      onResponseDone: heard(() => this.responseDone()),
      onError: (err) => this.modelError(err),
    }, 'realtime');
  }

  /**
   * The vendor failed: the call ends, unless it refused or failed one response (the session is
   * up) and that response is a silence check-in, whose fallback is then said.
   */
  private modelError(err: ProviderError): void {
    const outstanding = this.current ?? this.requested[0];
    if (this.ended || err.code !== 'PROVIDER_HTTP_ERROR' || !outstanding || outstanding.fallback === null) {
      this.providerFailed(err);
      return;
    }
    outstanding.failure = err;
    // OpenAI's `response.done` (failed) follows at once and settles it; a refused create has none
    this.guard(
      Promise.resolve().then(() => {
        if (!outstanding.settled && outstanding.state === 'requested' && !this.ended) this.settle(outstanding, false);
      }),
      'check-in failure',
    );
  }

  private callerStarted(): void {
    if (this.ended) return;
    this.log.debug('caller speech started');
    this.callerSpeaking = true;
    this.vadExpected = false;
    this.turnClock.cancel();
    this.disarmSilence();
    if (this.interruptible()) this.bargeIn();
  }

  /** Assistant audio is out, and all of it may be cut: closing lines and the consent message may not (nor what is queued before them). */
  private interruptible(): boolean {
    return this.spoken.length > 0 && !this.spoken.some((s) => !s.interruptible);
  }

  private callerStopped(): void {
    if (this.ended) return;
    this.callerSpeaking = false;
    this.vadExpected = true;
    // Server VAD asks the model for the reply at the end of the caller's turn.
    const now = performance.now();
    this.turnClock.begin(this.session?.state().node_id ?? null, now);
    this.turnClock.modelRequested(now);
    this.armSilence();
  }

  /**
   * Barge-in: the far end drops what it buffered (`clear`), the model stops (its queued
   * responses are dropped too), and its history keeps only what the caller heard (truncate).
   */
  private bargeIn(): void {
    const cut = [...this.spoken];
    this.log.debug({ responses: cut.length }, 'barge-in');
    this.pacer.clear();
    this.rt?.cancelResponse();
    for (const s of cut) {
      for (const item of s.items) {
        // whole ms, never past the audio the vendor sent (a short last piece can end mid-ms)
        if (item.heardMs < item.pushedMs) this.rt?.truncate(item.id, Math.floor(item.heardMs));
      }
    }
    this.requested = [];
    // The streaming response stays current until its `onResponseDone`; its events are dropped.
    // A check-in cut by the caller needs no fallback: the caller is there.
    for (const s of cut) {
      s.fallback = null;
      this.settle(s, false);
    }
  }

  private transcript(role: 'user' | 'assistant', text: string, final: boolean): void {
    if (this.ended) return;
    if (role === 'assistant') {
      const s = this.current;
      if (s && !s.cut) s.transcript = text;
      return;
    }
    const said = text.trim();
    if (said === '') return;
    this.disarmSilence();
    if (!final) return;
    // the caller's turn, as in a pipeline call: the next silence check waits first_check_seconds
    this.silencePrompts = 0;
    this.ledger.recordMessage('user', said, this.session.state().node_id);
    // The engine's history and state follow the caller; the reply was created by server VAD.
    this.dispatch({ type: 'caller.said', text: said });
    // A transcript can come after the reply has played (OpenAI): silence counts again from here.
    this.armSilence();
  }

  private async functionCall(call: RealtimeFunctionCall): Promise<void> {
    if (this.ended || !this.offer) return;
    if (!this.current) this.responseStarted();
    if (this.current && this.current.fallback !== null) {
      // a silence check-in is offered no function: a call is refused, the check-in said nothing
      this.answer(call.callId, JSON.stringify({ error: 'no function is available now' }), false);
      return;
    }
    const offer = this.offer;
    if (offer.transitions.has(call.name)) {
      const commands = this.session.send({ type: 'model.chose_transition', function_name: call.name, node_id: offer.nodeId });
      const rejected = commands.find((c) => c.type === 'event_rejected');
      // The engine's lines follow a transition, so the model is not asked to respond to it; a
      // refused one is answered with why, and the model tries again (unless the call is closing).
      if (rejected) {
        this.answer(call.callId, JSON.stringify({ error: rejected.message }), this.session.state().status === 'active');
      } else {
        this.answer(call.callId, JSON.stringify({ ok: true }), false);
      }
      this.carryOut(commands);
      return;
    }
    const tool = offer.tools.get(call.name);
    if (!tool) {
      this.answer(call.callId, JSON.stringify({ error: `no function "${call.name}" is available now` }), true);
      return;
    }
    let args: Record<string, unknown>;
    try {
      args = JSON.parse(call.arguments || '{}') as Record<string, unknown>;
    } catch {
      this.answer(call.callId, JSON.stringify({ error: 'arguments were not valid JSON' }), true);
      return;
    }
    const request = { id: call.callId, name: call.name, arguments: args };
    if (tool.async) {
      void this.deps.notifier.toolCalls(this.record, [request], { url: tool.url, async: true });
      this.answer(call.callId, JSON.stringify({ status: 'started' }), true);
      return;
    }
    this.toolsInFlight++;
    let outcome: ToolCallOutcome | undefined;
    try {
      [outcome] = await this.deps.notifier.toolCalls(this.record, [request], { url: tool.url });
    } finally {
      this.toolsInFlight--;
    }
    if (this.ended) return;
    this.answer(call.callId, toolOutput(outcome), true);
  }

  private answer(callId: string, output: string, respond: boolean): void {
    if (!this.rt) return;
    if (respond) this.expectReply(this.offer?.nodeId ?? null);
    this.rt.sendFunctionResult(callId, output, respond);
  }

  // ------------------------------------------------------------------------------------------
  // silence and end (the rest as in LiveCall: BaseCall)

  /**
   * A response is pending, running or still to be heard (its marks have not all come back), or a
   * tool runs. Not the pacer's clock, as in the pipeline's speaker: the far end may play ahead of
   * it, and a last mark that came back before the clock's end of the audio left silence unarmed.
   */
  private busy(): boolean {
    return this.spoken.length > 0 || this.current !== null || this.toolsInFlight > 0;
  }

  /** Silence counts when nothing of ours is pending or playing and the caller is not speaking. */
  protected override silenceCounts(): boolean {
    return !this.busy() && !this.callerSpeaking;
  }

  /** A failure that names no provider is the realtime model's. */
  protected override unnamedProvider(): string {
    return this.assistant.llm_config.provider;
  }

  protected override async release(): Promise<void> {
    this.abort.abort();
    this.clearStall();
    this.pacer.close();
    // what the caller heard of each response still playing is kept (the engine has stopped:
    // only the record takes it), and a start() waiting for the consent line returns
    for (const s of [...this.spoken]) this.settle(s, false);
    this.marks.clear();
    this.spoken = [];
    this.requested = [];
    this.current = null;
    const rt = this.rt;
    this.rt = null;
    await rt?.close().catch(() => undefined);
  }
}

/** The words of `text` the caller heard when `heardMs` of its `totalMs` of audio were played. */
export function heardShare(text: string, heardMs: number, totalMs: number): string {
  const t = text.trim();
  if (totalMs <= 0 || heardMs <= 0) return '';
  if (heardMs >= totalMs) return t;
  const cut = Math.floor((t.length * heardMs) / totalMs);
  const head = t.slice(0, cut);
  const whole = /\s/.test(t[cut] ?? ' ') ? head : head.slice(0, Math.max(0, head.lastIndexOf(' ')));
  return whole.trim();
}

