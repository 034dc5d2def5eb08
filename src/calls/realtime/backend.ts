/**
 * The realtime backend: caller audio → a realtime speech-to-speech model → caller. The model hears
 * the caller and answers by itself (server VAD creates its replies); the controller's lines (first
 * lines, edge messages, closing lines) are spoken by asking the model to say them verbatim;
 * transition functions and the assistant's tools are offered to the model as functions, and its
 * choices go to the controller. See docs/realtime.md.
 */
import type { RunModelCommand } from '../../../engine/session.js';
import type { ModelContext } from '../../../engine/prompt.js';
import type { Tool } from '../../../engine/schema.js';
import { ProviderError, type LlmFunction, type Providers, type RealtimeEvents, type RealtimeFunctionCall, type RealtimeSession } from '../../providers/types.js';
import type { BackendContext, CommandHint, ConversationBackend, Heard, LineRequest, NodeView } from '../backend.js';
import type { ToolCallOutcome } from '../notifier.js';
import { FRAME_BYTES } from '../outbound.js';
import type { Playout } from '../playout.js';
import { applyPronunciations } from '../text.js';
import { functionOffer, toolOutput } from '../model-turn.js';
import { keysFrom, keysNotSent } from '../keypad.js';
import { heardMsOf, heardOf, newSpoken, type OutputItem, type Spoken } from './responses.js';
import { CallerTurns } from './caller-turns.js';

/** A mark goes out after at least this much audio: the resolution of "what the caller heard". */
const MARK_SPACING_MS = 100;
/** A requested response that has not started after this long (nothing else running) was lost. */
const RESPONSE_STALL_MS = 8_000;
const MULAW_SILENCE = 0xff;
const SILENT_FRAME = Buffer.alloc(FRAME_BYTES, MULAW_SILENCE);

/** What the model is offered in the current node. */
interface Offer {
  key: string;
  nodeId: string;
  instructions: string;
  functions: LlmFunction[];
  transitions: Set<string>;
  tools: Map<string, Tool>;
  builtins: Set<string>;
}

export interface RealtimeOptions {
  providers: Providers;
  playout: Playout;
  /** The workflow's global prompt: the instructions where no model turn is offered. */
  globalPrompt: string;
}

export class RealtimeBackend implements ConversationBackend {
  private rt: RealtimeSession | null = null;
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
  private toolsInFlight = 0;
  /** Key presses of the model under way (`press_keys` until the keys have played): nothing cuts them. */
  private keys = 0;
  private stallTimer: NodeJS.Timeout | null = null;
  /** When the model last sent anything at all (performance.now()). */
  private lastModelEventAt = 0;
  private closed = false;
  /** Our detector and the caller's words: what cuts the assistant, which replies answered a noise. */
  private turns: CallerTurns | null = null;
  private voiceError: Error | null = null;
  readonly ownLinesRecordedWhenAsked = false;
  private readonly playout: Playout;
  /** A failure that names no provider is the realtime model's. */
  private readonly provider: string;

  constructor(
    private readonly ctx: BackendContext,
    private readonly o: RealtimeOptions,
  ) {
    this.playout = o.playout;
    this.provider = ctx.assistant.llm_config.provider;
    const tt = ctx.assistant.speech_config.turn_taking;
    try {
      this.turns = new CallerTurns(
        { vad: tt.vad, minDurationMs: tt.interruption_min_duration * 1000, minWords: tt.interruption_min_words, shield: ctx.shield },
        ctx.shield({
          interruptible: () => this.interruptible(),
          cut: () => this.bargeIn(),
          release: (s: Spoken) => this.release(s),
          drop: (s: Spoken) => this.dropNoiseReply(s),
          answer: () => this.answerTurn(),
        }, 'caller turns'),
      );
    } catch (err) {
      this.voiceError = new Error(`the ${tt.vad} voice-activity detector could not start: ${(err as Error).message}`, { cause: err });
    }
  }

  // ------------------------------------------------------------------------------------------
  // what the controller asks

  async start(node: NodeView): Promise<void> {
    // the detector is ours: a call that cannot have it ends pipeline-error-switchboard
    if (this.voiceError) return this.ctx.events.defect(this.voiceError, 'voice activity');
    const offer = this.offerFor(node.nodeId, node.context());
    const config = this.ctx.assistant.llm_config;
    const provider = this.o.providers.realtime.get(config.provider);
    if (!provider) {
      this.ctx.events.failed(new ProviderError('PROVIDER_NO_ADAPTER', config.provider, `no realtime adapter for "${config.provider}"`), this.provider);
      return;
    }
    try {
      const rt = await provider.connect(
        config,
        {
          instructions: offer.instructions,
          tools: offer.functions,
          turnDetection: { silenceDurationMs: this.ctx.assistant.speech_config.turn_taking.endpointing_min_delay * 1000 },
        },
        this.realtimeEvents(),
        this.abort.signal,
      );
      if (this.closed) {
        void rt.close();
        return;
      }
      this.rt = rt;
      this.offer = offer;
    } catch (err) {
      this.ctx.events.failed(err as Error, this.provider);
    }
  }

  /** A line: the model is asked to say exactly this text. */
  say(line: LineRequest, over: (heard: Heard) => void): void {
    const s = this.newSpoken('say', line.text, line.interruptible, line.nodeId);
    s.over = (text, complete) => over({ text, complete });
    this.spoken.push(s);
    if (!this.rt) {
      this.settle(s, false);
      return;
    }
    this.requested.push(s);
    this.ctx.events.silenceBroken();
    this.rt.createResponse(this.sayExactly(line.text));
    this.armStall();
  }

  /** Call-start checks refuse node overrides for realtime assistants; nothing to switch. */
  setOverrides(): void {
    this.ctx.log.debug('provider overrides ignored by a realtime call');
  }

  /** Keeps the session's instructions and functions those of the current node. */
  setNode(node: NodeView): void {
    if (this.closed || !this.rt) return;
    const offer = this.offerFor(node.nodeId, node.context());
    if (offer.key === this.offer?.key) return;
    this.offer = offer;
    this.rt.update({ instructions: offer.instructions, tools: offer.functions });
  }

  /**
   * `run_model`: the node's prompt and functions are on the session already (`setNode`). A
   * caller's spoken turn was answered by server VAD; other reasons need a response from us.
   */
  reply(command: RunModelCommand, hint: CommandHint): void {
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

  /** A key cuts interruptible speech, as in a pipeline call; a tool node's choice is not cut (the engine waits for it). */
  keyPressed(choosing: boolean): void {
    if (this.interruptible() && !choosing) this.bargeIn();
  }

  /** The model answers a key itself: nothing waits. */
  afterReply(apply: () => void): void {
    apply();
  }

  /** The model stops (what it was saying is cut); lines that cannot be cut are not queued behind anything. */
  interrupt(): void {
    this.bargeIn();
  }

  /** A live control's `say` with `interrupt`: cut as a key press cuts. */
  cut(choosing: boolean): void {
    this.keyPressed(choosing);
  }

  /** A live control's `add-message`: the model's own conversation takes it (its next response sees it). */
  contextAdded(role: 'system' | 'user', content: string): void {
    if (!this.closed) this.rt?.addMessage?.(role, content);
  }

  callerAudio(mulaw: Buffer): void {
    if (this.closed || !this.rt || mulaw.length === 0) return;
    this.turns?.audio(mulaw);
    // While a line that cannot be interrupted plays, the model hears silence: its server VAD
    // would otherwise cut the line (it interrupts on its own).
    if (this.spoken.some((s) => !s.interruptible)) {
      this.rt.sendAudio(mulaw.length === FRAME_BYTES ? SILENT_FRAME : Buffer.alloc(mulaw.length, MULAW_SILENCE));
      return;
    }
    this.rt.sendAudio(mulaw);
  }

  /**
   * A response is pending, running or still to be heard (its marks have not all come back), a
   * tool runs, or the caller speaks. Not the pacer's clock: the far end may play ahead of it, and a
   * last mark that came back before the clock's end of the audio left silence unarmed.
   */
  busy(): boolean {
    return this.spoken.length > 0 || this.current !== null || this.toolsInFlight > 0 || this.callerSpeaking;
  }

  async close(): Promise<void> {
    this.closed = true;
    this.abort.abort();
    this.clearStall();
    this.turns?.close();
    this.playout.close();
    // what the caller heard of each response still playing is kept (the engine has stopped:
    // only the record takes it), and a line the controller waits for is over
    for (const s of [...this.spoken]) this.settle(s, false);
    this.spoken = [];
    this.requested = [];
    this.current = null;
    const rt = this.rt;
    this.rt = null;
    await rt?.close().catch(() => undefined);
  }

  // ------------------------------------------------------------------------------------------
  // responses: what we ask for, what the model streams, what the caller hears

  private offerFor(nodeId: string, context: ModelContext | null): Offer {
    if (!context) {
      // No model turn here (a tool running, a closing line): no way out to offer.
      return { key: `${nodeId}:none`, nodeId, instructions: this.o.globalPrompt, functions: [], transitions: new Set(), tools: new Map(), builtins: new Set() };
    }
    // a realtime assistant has no node overrides: its own block says which builtins it has
    const builtins = context.mode === 'conversation' && this.ctx.pressKeys ? (this.ctx.assistant.llm_config.builtin_tools ?? []) : [];
    return { key: `${nodeId}:${context.mode}`, nodeId, instructions: context.system, ...functionOffer(context.transitionFunctions, context.tools, builtins) };
  }

  /** A response, with its utterance in the playout: over once the caller has played it (or cut). */
  private newSpoken(kind: Spoken['kind'], text: string, interruptible: boolean, nodeId: string | null): Spoken {
    const s: Spoken = newSpoken(kind, text, interruptible, nodeId, this.playout.begin({
      finished: ({ interrupted }) => {
        if (!interrupted) this.settle(s, true);
      },
    }));
    return s;
  }

  private sayExactly(text: string): string {
    return `Say exactly: "${applyPronunciations(text, this.ctx.assistant.speech_config.pronunciation)}"`;
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
    const s = this.newSpoken('reply', '', true, nodeId);
    this.spoken.push(s);
    this.requested.push(s);
    this.ctx.events.silenceBroken();
    this.armStall();
    return s;
  }

  /** A caller's turn with words that server VAD did not answer (a response was under way): asked for now, after it. */
  private answerTurn(): void {
    if (this.closed || !this.rt) return;
    this.expectReply(this.ctx.nodeId());
    this.rt.createResponse();
  }

  /** A check-in that said nothing (failed, empty, never started): its fallback, as the model's reply. */
  private sayFallback(checkIn: Spoken, fallback: string): void {
    if (this.closed || !this.rt) return;
    const text = this.ctx.events.checkInFallback(fallback, checkIn.failure, this.provider);
    this.expectReply(checkIn.nodeId);
    this.rt.createResponse(this.sayExactly(text), { tools: [] });
  }

  /** The first event of a response: which of ours it is, or a reply started by server VAD. */
  private responseStarted(): Spoken {
    let s: Spoken;
    if (this.vadExpected) {
      this.vadExpected = false;
      s = this.newSpoken('reply', '', true, this.ctx.nodeId());
      s.vad = true;
      this.spoken.push(s);
    } else if (this.requested.length > 0) {
      s = this.requested.shift()!;
    } else {
      s = this.newSpoken('reply', '', true, this.ctx.nodeId());
      this.spoken.push(s);
    }
    s.state = 'streaming';
    this.current = s;
    this.ctx.events.silenceBroken();
    this.clearStall();
    if (s.vad) this.turns?.replyStarted(s);
    return s;
  }

  private modelAudio(mulaw: Buffer, itemId: string): void {
    if (this.closed) return;
    const s = this.current ?? this.responseStarted();
    if (s.cut && s.forget && itemId && !s.forget.includes(itemId)) {
      // a dropped reply's items that come after the drop leave the model's conversation too
      s.forget.push(itemId);
      this.rt?.forgetTurn?.([itemId]);
    }
    if (s.cut || mulaw.length === 0) return;
    if (s.held) {
      s.heldAudio.push([mulaw, itemId]);
      return;
    }
    this.pushAudio(s, mulaw, itemId);
  }

  private pushAudio(s: Spoken, mulaw: Buffer, itemId: string): void {
    let item = s.items.at(-1);
    if (!item || item.id !== itemId) {
      if (item) this.markAfter(s, item, true);
      item = { id: itemId, startMs: s.playout.pushedMs, pushedMs: 0 };
      s.items.push(item);
    }
    // Whole frames only, so that a mark never pads the middle of the audio with silence.
    const data = s.remainder.length > 0 ? Buffer.concat([s.remainder, mulaw]) : mulaw;
    const whole = data.length - (data.length % FRAME_BYTES);
    if (whole > 0) {
      this.playout.push(s.playout, data.subarray(0, whole));
      item.pushedMs += whole / 8;
      s.sinceMarkMs += whole / 8;
    }
    s.remainder = Buffer.from(data.subarray(whole));
    if (s.sinceMarkMs >= MARK_SPACING_MS) this.markAfter(s, item, false);
  }

  /** A mark after the audio pushed so far; `flush` also sends the short last frame (padded). */
  private markAfter(s: Spoken, item: OutputItem, flush: boolean): void {
    if (flush && s.remainder.length > 0) {
      this.playout.push(s.playout, s.remainder);
      item.pushedMs += s.remainder.length / 8;
      s.remainder = Buffer.alloc(0);
    }
    s.sinceMarkMs = 0;
    this.playout.mark(s.playout);
  }

  private responseDone(): void {
    if (this.closed) return;
    // A response with no event before its end: empty, or one of ours that said nothing.
    const s = this.current ?? (this.vadExpected || this.requested.length > 0 ? this.responseStarted() : null);
    this.current = null;
    if (s && !s.cut) {
      s.state = 'streamed';
      if (s.held) s.heldDone = true;
      else this.streamed(s);
    }
    // the next response we asked for starts now: its wait counts from here
    this.clearStall();
    this.armStall();
    this.ctx.events.settled();
  }

  /** All of a response's audio is pushed: a last mark, and it is over once the caller has played it. */
  private streamed(s: Spoken): void {
    const last = s.items.at(-1);
    if (last && (s.remainder.length > 0 || s.sinceMarkMs > 0)) this.markAfter(s, last, true);
    // over once the caller has played it all (at once when it said nothing)
    this.playout.end(s.playout);
  }

  /** A held reply plays: the caller's turn had words (or none were known in time). */
  private release(s: Spoken): void {
    if (!s.held || s.cut || this.closed) return;
    s.held = false;
    for (const [mulaw, itemId] of s.heldAudio) this.pushAudio(s, mulaw, itemId);
    s.heldAudio = [];
    if (s.heldDone) this.streamed(s);
  }

  /**
   * A reply the vendor started for a noise: held, it stops unheard (nothing is cleared, what
   * played before it goes on) and leaves the model's conversation with the noise, where the
   * vendor allows it; already playing, it is cut as a barge-in cuts (what was heard of it stays,
   * as of any cut reply), and only the noise is forgotten.
   */
  private dropNoiseReply(s: Spoken): void {
    if (s.settled || this.closed) return;
    this.ctx.log.debug('a reply to a noise dropped');
    if (!s.held && s.items.some((i) => i.pushedMs > 0)) {
      this.bargeIn();
      this.rt?.forgetTurn?.([]);
      return;
    }
    const itemIds = [...new Set(s.items.map((i) => i.id).concat(s.heldAudio.map(([, id]) => id)))];
    s.held = false;
    s.heldAudio = [];
    s.forget = itemIds;
    // the vendor's cancel drops what we asked for after it too: only while nothing of ours waits
    if (this.current === s && this.requested.length === 0) this.rt?.cancelResponse();
    this.settle(s, false);
    this.rt?.forgetTurn?.(itemIds);
  }

  /** The response is over for the caller: played whole (`complete`), cut, or never said. */
  private settle(s: Spoken, complete: boolean): void {
    if (s.settled) return;
    s.settled = true;
    if (!complete) s.cut = true;
    this.spoken = this.spoken.filter((x) => x !== s);
    this.requested = this.requested.filter((x) => x !== s);
    this.playout.stop(s.playout);
    const heard = heardOf(s, complete);
    if (s.kind === 'say') {
      // a line not heard whole (cut, or never said): the engine's history keeps what was heard
      s.over?.(heard, heard === s.text.trim());
    } else if (heard) {
      this.ctx.events.replied(heard, s.nodeId);
    } else if (s.fallback !== null) {
      this.sayFallback(s, s.fallback);
    }
    this.ctx.events.settled();
  }

  /** A requested response that never starts (refused by the vendor in a race) must not block the call. */
  private armStall(): void {
    if (this.stallTimer || this.requested.length === 0 || this.closed) return;
    this.stallTimer = setTimeout(() => {
      this.stallTimer = null;
      if (this.closed || this.current || this.requested.length === 0) return;
      try {
        this.stalled();
      } catch (err) {
        this.ctx.events.defect(err, 'response stall');
      }
    }, RESPONSE_STALL_MS);
  }

  private stalled(): void {
    const lost = this.requested[0]!;
    if (this.lastModelEventAt < lost.requestedAt) {
      // not one event since we asked: the model has gone silent, not merely refused one response
      const err = new ProviderError('PROVIDER_TIMEOUT', this.provider, `no answer from the realtime model for ${RESPONSE_STALL_MS / 1000} s`);
      this.ctx.events.failed(err, this.provider);
      return;
    }
    this.ctx.log.warn({ kind: lost.kind }, 'a requested realtime response never started');
    this.settle(lost, false);
    this.armStall();
  }

  private clearStall(): void {
    if (this.stallTimer) clearTimeout(this.stallTimer);
    this.stallTimer = null;
  }

  // ------------------------------------------------------------------------------------------
  // the model's events

  private realtimeEvents(): RealtimeEvents {
    const heard = <A extends unknown[]>(fn: (...args: A) => void) => (...args: A) => {
      this.lastModelEventAt = performance.now();
      fn(...args);
    };
    return this.ctx.shield<RealtimeEvents>({
      onAudio: heard((mulaw: Buffer, itemId: string) => this.modelAudio(mulaw, itemId)),
      onSpeechStarted: heard(() => this.callerStarted()),
      onSpeechStopped: heard(() => this.callerStopped()),
      onTranscript: heard((role: 'user' | 'assistant', text: string, final: boolean) => this.transcript(role, text, final)),
      onFunctionCall: heard((call: RealtimeFunctionCall) => this.ctx.guard(this.functionCall(call), 'function call')),
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
    if (this.closed || err.code !== 'PROVIDER_HTTP_ERROR' || !outstanding || outstanding.fallback === null) {
      this.ctx.events.failed(err, this.provider);
      return;
    }
    outstanding.failure = err;
    // OpenAI's `response.done` (failed) follows at once and settles it; a refused create has none
    this.ctx.guard(
      Promise.resolve().then(() => {
        if (!outstanding.settled && outstanding.state === 'requested' && !this.closed) this.settle(outstanding, false);
      }),
      'check-in failure',
    );
  }

  private callerStarted(): void {
    if (this.closed) return;
    this.ctx.log.debug('caller speech started');
    this.callerSpeaking = true;
    this.vadExpected = false;
    this.ctx.events.silenceBroken();
    this.turns?.vendorStarted();
    // a vendor that stops its own response: nothing to protect, the rest is cut at once
    if (this.rt?.interruptsOnSpeech !== false && this.interruptible()) this.bargeIn();
  }

  /** Assistant audio is out, and all of it may be cut: closing lines and the consent message may not (nor what is queued before them). */
  private interruptible(): boolean {
    return this.keys === 0 && this.spoken.length > 0 && !this.spoken.some((s) => !s.interruptible);
  }

  private callerStopped(): void {
    if (this.closed) return;
    this.callerSpeaking = false;
    // Server VAD asks for the reply, unless a response of its own is under way (it refuses to start another).
    this.vadExpected = !(this.rt?.responding ?? (this.current !== null && !this.current.cut));
    this.turns?.vendorStopped(this.vadExpected);
    this.ctx.events.turnEnded();
    this.ctx.events.settled();
  }

  /**
   * Barge-in: the far end drops what it buffered (`clear`), the model stops (its queued
   * responses are dropped too), and its history keeps only what the caller heard (truncate).
   */
  private bargeIn(): void {
    const cut = [...this.spoken];
    this.ctx.log.debug({ responses: cut.length }, 'barge-in');
    this.playout.clear();
    this.rt?.cancelResponse();
    for (const s of cut) {
      for (const item of s.items) {
        // whole ms, never past the audio the vendor sent (a short last piece can end mid-ms)
        const heardMs = heardMsOf(s, item);
        if (heardMs < item.pushedMs) this.rt?.truncate(item.id, Math.floor(heardMs));
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
    if (this.closed) return;
    if (role === 'assistant') {
      const s = this.current;
      if (s && !s.cut) s.transcript = text;
      return;
    }
    const said = text.trim();
    this.turns?.words(said, final);
    if (said === '') return;
    this.ctx.events.silenceBroken();
    if (!final) return;
    // the caller's turn, as in a pipeline call: the next silence check waits first_check_seconds;
    // the engine's history and state follow the caller (the reply was created by server VAD)
    this.ctx.events.callerInput();
    this.ctx.events.callerTurn(said);
    // A transcript can come after the reply has played (OpenAI): silence counts again from here.
    this.ctx.events.settled();
  }

  private async functionCall(call: RealtimeFunctionCall): Promise<void> {
    if (this.closed || !this.offer) return;
    if (!this.current) this.responseStarted();
    if (this.current && this.current.fallback !== null) {
      // a silence check-in is offered no function: a call is refused, the check-in said nothing
      this.answer(call.callId, JSON.stringify({ error: 'no function is available now' }), false);
      return;
    }
    const offer = this.offer;
    if (offer.transitions.has(call.name)) {
      // The controller's lines follow a transition, so the model is not asked to respond to it; a
      // refused one is answered with why, and the model tries again (unless the call is closing).
      this.ctx.events.choseTransition(call.name, offer.nodeId, (rejected, active) => {
        if (rejected !== null) this.answer(call.callId, JSON.stringify({ error: rejected }), active);
        else this.answer(call.callId, JSON.stringify({ ok: true }), false);
      });
      return;
    }
    if (offer.builtins.has(call.name)) {
      await this.pressKeys(call, offer.nodeId);
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
      void this.ctx.events.callTools([request], { url: tool.url, async: true });
      this.answer(call.callId, JSON.stringify({ status: 'started' }), true);
      return;
    }
    this.toolsInFlight++;
    let outcome: ToolCallOutcome | undefined;
    try {
      [outcome] = await this.ctx.events.callTools([request], { url: tool.url });
    } finally {
      this.toolsInFlight--;
    }
    if (this.closed) return;
    this.answer(call.callId, toolOutput(outcome), true);
  }

  /**
   * `press_keys`: the keys go after the audio the model sent before the call, and nothing cuts
   * them; the model hears whether they were sent, and answers on (unless they were stopped: the
   * call is leaving a voicemail or ending).
   */
  private async pressKeys(call: RealtimeFunctionCall, nodeId: string): Promise<void> {
    const checked = keysFrom(call.arguments);
    if ('error' in checked || !this.ctx.pressKeys) {
      this.answer(call.callId, keysNotSent('error' in checked ? checked.error : 'there is no keypad here'), true);
      return;
    }
    this.keys++;
    this.toolsInFlight++;
    let outcome: { sent: boolean; output: string };
    try {
      outcome = await this.ctx.pressKeys(checked.keys, nodeId, this.abort.signal);
    } finally {
      this.keys--;
      this.toolsInFlight--;
    }
    if (this.closed) return;
    this.answer(call.callId, outcome.output, outcome.sent);
    if (!outcome.sent) this.ctx.events.settled();
  }

  private answer(callId: string, output: string, respond: boolean): void {
    if (!this.rt) return;
    if (respond) this.expectReply(this.offer?.nodeId ?? null);
    this.rt.sendFunctionResult(callId, output, respond);
  }
}
