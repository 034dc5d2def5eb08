/**
 * A warm transfer (DECISIONS 16, docs/transfers.md), as the controller runs it on the engine's
 * `warm_transfer` command (a warm transfer node's, or a live control's): the operator is dialled through the call's transport
 * (`CallTransport.dialOperator`) while the caller hears the node's lines; the model's summary of
 * the conversation fills `{{summary}}`; the operator hears `operator_message` in the assistant's
 * voice on their own leg (and, with `require_acceptance`, "Press 1 to take the call": 1 accepts,
 * any other key, 10 s of silence or a hang-up declines); then the legs are joined. The outcome is
 * the engine's `transfer.result`; the record's `transfer` follows each step. A transfer node's
 * cold transfer (`coldTransfer`) is here too.
 */
import type { Logger } from 'pino';
import type { EffectiveAssistant } from '../../engine/assistant.js';
import { TRANSFER_SUMMARY_INSTRUCTION } from '../../engine/prompt.js';
import type { HistoryMessage, TransferResult, WarmTransferCommand } from '../../engine/types.js';
import type { CallAudio } from './call-audio.js';
import type { ConversationLog } from './conversation.js';
import { AudioBridge } from '../audio/bridge.js';
import { callError, callErrorFrom, endedReasonFor, ErrorCodes, type CallError } from '../errors.js';
import type { Providers, TtsSession } from '../providers/types.js';
import { OperatorDialError, type JoinedLegs, type JoinTap, type OperatorLeg } from './operator-leg.js';
import { applyPronunciations } from './text.js';
import { transcriptText } from './transcript.js';
import type { CallTransport } from './transport.js';

/** What the record (`GET /calls/{id}`, the report) says of a call's transfer; null when it had none. */
export interface CallTransfer {
  mode: 'cold' | 'warm';
  destination: string;
  /** null while a warm transfer is under way. */
  result: TransferResult | null;
  /** The model's summary the operator heard (warm only). */
  summary: string | null;
  operator_answered_at: string | null;
  joined_at: string | null;
}

/** Said to the operator after `operator_message` with `require_acceptance`. */
export const ACCEPTANCE_PROMPT = 'Press 1 to take the call.';
/** How long the operator has to press a key after the message, with `require_acceptance`. */
export const ACCEPTANCE_WAIT_MS = 10_000;
/** The longest the operator waits for the summary after answering; then they hear the fixed one. */
export const SUMMARY_WAIT_MS = 10_000;
/** What the operator hears for `{{summary}}` when the model could not write one. */
export const FALLBACK_SUMMARY = 'A caller is waiting to be transferred.';
/** The longest the assistant's voice takes to say the operator's message before the transfer fails. */
const VOICE_TIMEOUT_MS = 15_000;
const FRAME_MS = 20;

/** What a warm transfer needs of the call's providers, made once a call (`warmTransferKit`). */
export interface WarmTransferKit {
  /** The call's number, which the operator sees. */
  callerId: string | null;
  /** The model's summary of `transcript` (one to three sentences); rejects when it cannot. */
  summarize(transcript: string, signal: AbortSignal): Promise<string>;
  /** `text` in the assistant's voice: μ-law 8 kHz. */
  voice(text: string, signal: AbortSignal): Promise<Buffer>;
}

/**
 * The kit of a call: its assistant's model writes the summary and its voice says the operator's
 * message (a realtime assistant: the text model of its vendor, and its own voice, "say exactly").
 */
export function warmTransferKit(assistant: EffectiveAssistant, providers: Providers, callerId: string | null): WarmTransferKit {
  return {
    callerId,
    summarize: (transcript, signal) => summarize(assistant, providers, transcript, signal),
    voice: (text, signal) => {
      const spoken = applyPronunciations(text, assistant.speech_config.pronunciation);
      return assistant.realtime ? realtimeVoice(assistant, providers, spoken, signal) : ttsVoice(assistant, providers, spoken, signal);
    },
  };
}

/** The text model that writes a realtime assistant's summary: its vendor's. */
const REALTIME_TEXT_MODELS: Record<string, { provider: string; model: string }> = {
  'openai-realtime': { provider: 'openai', model: 'gpt-4o-mini' },
  'google-live': { provider: 'google', model: 'gemini-2.5-flash' },
  'sandbox-realtime': { provider: 'sandbox', model: 'sandbox' },
};

async function summarize(assistant: EffectiveAssistant, providers: Providers, transcript: string, signal: AbortSignal): Promise<string> {
  const text = assistant.realtime ? REALTIME_TEXT_MODELS[assistant.llm_config.provider] : null;
  const config = text ? { provider: text.provider, model: text.model } : assistant.llm_config;
  const llm = providers.llm.get(config.provider);
  if (!llm) throw new Error(`no text model for ${assistant.llm_config.provider}`);
  let out = '';
  const messages = [
    { role: 'system' as const, content: TRANSFER_SUMMARY_INSTRUCTION },
    { role: 'user' as const, content: `The conversation so far:\n${transcript || '(nothing was said yet)'}` },
  ];
  for await (const event of llm.stream({ config: { ...config, max_completion_tokens: 200 }, messages, tools: [], signal })) {
    if (event.type === 'text') out += event.text;
  }
  out = out.trim();
  if (out === '') throw new Error('the model wrote no summary');
  return out;
}

async function ttsVoice(assistant: EffectiveAssistant, providers: Providers, text: string, signal: AbortSignal): Promise<Buffer> {
  const config = assistant.tts_config;
  const tts = config ? providers.tts.get(config.provider) : undefined;
  if (!config || !tts) throw new Error('the assistant has no voice');
  const chunks: Buffer[] = [];
  let session: TtsSession | null = null;
  const opened = (s: TtsSession) => {
    session = s;
    s.sendText(text);
    s.end();
  };
  try {
    await new Promise<void>((resolve, reject) => {
      signal.addEventListener('abort', () => reject(new Error('aborted')), { once: true });
      tts
        .open(config, { onAudio: (b) => chunks.push(Buffer.from(b)), onDone: () => resolve(), onError: (err) => reject(err) }, signal)
        .then(opened, reject);
    });
  } finally {
    (session as TtsSession | null)?.cancel();
  }
  return Buffer.concat(chunks);
}

async function realtimeVoice(assistant: EffectiveAssistant, providers: Providers, text: string, signal: AbortSignal): Promise<Buffer> {
  const realtime = providers.realtime.get(assistant.llm_config.provider);
  if (!realtime) throw new Error(`no realtime model ${assistant.llm_config.provider}`);
  const chunks: Buffer[] = [];
  let done: () => void = () => undefined;
  let failed: (err: Error) => void = () => undefined;
  const over = new Promise<void>((resolve, reject) => {
    done = resolve;
    failed = reject;
  });
  signal.addEventListener('abort', () => failed(new Error('aborted')), { once: true });
  const session = await realtime.connect(
    assistant.llm_config,
    { instructions: '', tools: [] },
    {
      onAudio: (b) => chunks.push(Buffer.from(b)),
      onSpeechStarted: () => undefined,
      onFunctionCall: () => undefined,
      onResponseDone: () => done(),
      onError: (err) => failed(err),
    },
    signal,
  );
  try {
    session.createResponse(`Say exactly: "${text}"`, { tools: [] });
    await over;
  } finally {
    await session.close().catch(() => undefined);
  }
  return Buffer.concat(chunks);
}

/** `operator_message` with `{{summary}}` filled (spaces allowed inside the braces, as every placeholder). */
export function operatorText(template: string, summary: string, requireAcceptance: boolean): string {
  const message = template.replace(/\{\{[ \t]*summary[ \t]*\}\}/g, summary).trim();
  return requireAcceptance ? `${message}${message === '' || /[.!?…]$/.test(message) ? '' : '.'} ${ACCEPTANCE_PROMPT}`.trim() : message;
}

export interface WarmTransferOptions {
  command: WarmTransferCommand;
  transport: CallTransport;
  kit: WarmTransferKit;
  /** The conversation so far, for the summary. */
  history(): readonly HistoryMessage[];
  /** The node's lines to the caller are over: the join waits for them. */
  linesOver: Promise<void>;
  /** Relayed audio, for the call's recording. */
  tap?: JoinTap;
  log: Logger;
  /** The record's `transfer`, at each step. */
  note(transfer: CallTransfer): void;
  error(entry: CallError): void;
}

/** What the controller lends a warm transfer. */
export interface WarmTransferHost {
  /** Null for a chat: nothing to dial. */
  transport: CallTransport | null;
  kit: WarmTransferKit | undefined;
  audio: CallAudio | null;
  log: Logger;
  conversation: ConversationLog;
  history(): readonly HistoryMessage[];
  /** Where the warm transfer under way dials (the engine's `transfer_destination`). */
  destination(): string;
  ended(): boolean;
  /** The outcome, to the engine (`transfer.result`). */
  outcome(result: TransferResult): void;
  /** The legs are joined: the call ends when they do. */
  joined(legs: JoinedLegs): void;
  /** Work the call does not wait for: a rejection ends the call. */
  guard(work: Promise<unknown>, where: string): void;
}

/**
 * Runs the engine's `warm_transfer` while the caller hears `linesOver`'s lines; its outcome goes
 * back to the engine. Joined, the conversation ends `call-transferred` once the legs are over.
 * A chat has no phone to dial: it ends as with a cold transfer (null).
 */
export function startWarmTransfer(host: WarmTransferHost, command: WarmTransferCommand, linesOver: Promise<void>): WarmTransfer | null {
  const { transport, kit, conversation } = host;
  if (!transport || !kit) {
    host.guard(Promise.resolve().then(() => host.outcome('completed')), 'transfer');
    return null;
  }
  conversation.forwarding(command.destination);
  const warm = new WarmTransfer({
    command,
    transport,
    kit,
    history: host.history,
    linesOver,
    ...(host.audio ? { tap: host.audio.relayTap() } : {}),
    log: host.log.child({ warmTransfer: command.destination }),
    note: (transfer) => conversation.transfer?.(transfer),
    error: (entry) => conversation.error(entry),
  });
  const outcome = warm.run().then((result) => {
    const legs = warm.legs;
    if (host.ended()) {
      // the call ended as the legs were joined: nobody is left on the line
      if (legs) void legs.hangUp();
      return;
    }
    if (legs) host.joined(legs);
    host.outcome(result);
  });
  host.guard(outcome, 'warm transfer');
  return warm;
}

/** A warm transfer under way in the process that had the call did not come with it (a call resumed elsewhere): it failed. */
export function warmTransferLost(host: WarmTransferHost): void {
  const destination = host.destination();
  host.conversation.error(callError(ErrorCodes.TRANSFER_FAILED, 'warm transfer: the call moved to another process while the operator was dialled'));
  host.conversation.transfer?.({ mode: 'warm', destination, result: 'failed', summary: null, operator_answered_at: null, joined_at: null });
  host.outcome('failed');
}

/** One warm transfer: `run()` once; `stop()` when the call ends before its outcome. */
export class WarmTransfer {
  /** Aborted when the dial must stop (the ring limit, the call's end). */
  private readonly abort = new AbortController();
  /** Aborted once the outcome is known: the summary and the voice stop. */
  private readonly work = new AbortController();
  private readonly state: CallTransfer;
  private leg: OperatorLeg | null = null;
  private joined: JoinedLegs | null = null;
  private stopped = false;
  private operatorGone = false;
  private readonly keys: string[] = [];
  private wake: (() => void) | null = null;

  constructor(private readonly o: WarmTransferOptions) {
    this.state = { mode: 'warm', destination: o.command.destination, result: null, summary: null, operator_answered_at: null, joined_at: null };
  }

  /** The legs, once joined: the call is over when they are. */
  get legs(): JoinedLegs | null {
    return this.joined;
  }

  /** Dials, tells, joins; resolves to the outcome (never rejects). */
  async run(): Promise<TransferResult> {
    this.o.note({ ...this.state });
    let result: TransferResult;
    try {
      result = await this.attempt();
    } catch (err) {
      this.o.log.error({ err }, 'warm transfer failed');
      this.o.error(callError(ErrorCodes.TRANSFER_FAILED, `warm transfer: ${(err as Error).message}`, this.o.transport.kind));
      result = 'failed';
    }
    this.work.abort();
    if (result !== 'completed') await this.hangUpLeg();
    this.state.result = result;
    this.o.note({ ...this.state });
    this.o.log.info({ result, destination: this.o.command.destination }, 'warm transfer over');
    return result;
  }

  /** The call ended before the outcome (the caller hung up, a limit, the API): no operator is left ringing or waiting. */
  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    this.abort.abort();
    this.work.abort();
    this.poke();
    if (!this.joined) void this.hangUpLeg();
  }

  private async attempt(): Promise<TransferResult> {
    const { command, transport, kit } = this.o;
    if (!transport.dialOperator) {
      this.o.error(callError(ErrorCodes.TRANSFER_FAILED, `warm transfer: the ${transport.kind} carrier cannot dial an operator`, transport.kind));
      return 'failed';
    }
    // written while the operator's phone rings
    const summary = this.summary();
    // the operator's phone rings at most ring_timeout_seconds: then the dial is given up
    const ringMs = command.ring_timeout_seconds * 1000;
    let rang = false;
    const ringLimit = setTimeout(() => {
      rang = true;
      this.abort.abort();
    }, ringMs);
    try {
      this.leg = await transport.dialOperator(command.destination, { ringTimeoutMs: ringMs, callerId: kit.callerId, signal: this.abort.signal });
    } catch (err) {
      if (rang) return 'no-answer';
      if (this.stopped) return 'failed';
      const result = err instanceof OperatorDialError ? err.result : 'failed';
      if (result === 'failed') this.o.error(callError(ErrorCodes.TRANSFER_FAILED, `warm transfer: ${(err as Error).message}`, transport.kind));
      return result;
    } finally {
      clearTimeout(ringLimit);
    }
    const leg = this.leg;
    leg.listen({
      key: (digit) => {
        this.keys.push(digit);
        this.poke();
      },
      hungUp: () => {
        this.operatorGone = true;
        this.poke();
      },
    });
    if (this.stopped) return 'failed';
    this.state.operator_answered_at = new Date().toISOString();
    this.o.note({ ...this.state });

    // the operator hears the message (the summary waits at most SUMMARY_WAIT_MS more)
    this.state.summary = await summary;
    this.o.note({ ...this.state });
    if (this.operatorGone) return 'declined';
    const asks = command.require_acceptance;
    const audio = await withTimeout(kit.voice(operatorText(command.operator_message, this.state.summary, asks), this.work.signal), VOICE_TIMEOUT_MS, 'the operator\'s message took too long to voice');
    await this.play(leg, audio, () => this.stopped || this.operatorGone || (asks && this.keys.length > 0));
    if (this.stopped) return 'failed';
    if (this.operatorGone) return 'declined';
    if (asks) {
      await this.until(() => this.keys.length > 0 || this.operatorGone || this.stopped, ACCEPTANCE_WAIT_MS);
      if (this.stopped) return 'failed';
      if (this.keys[0] !== '1') return 'declined';
    }
    // the caller hears the node's lines whole before the operator
    await Promise.race([this.o.linesOver, this.until(() => this.operatorGone || this.stopped)]);
    if (this.stopped) return 'failed';
    if (this.operatorGone) return 'declined';
    this.joined = await leg.join(this.o.tap);
    this.state.joined_at = new Date().toISOString();
    return 'completed';
  }

  /** The model's summary, or the fixed one (said in `errors`) when it fails or takes too long. */
  private summary(): Promise<string> {
    const transcript = transcriptText(this.o.history().filter((m) => m.role !== 'tool'));
    return withTimeout(this.o.kit.summarize(transcript, this.work.signal), SUMMARY_WAIT_MS, 'the summary took too long').catch((err: Error) => {
      // once the outcome is known the summary is not needed: its abort is no failure
      if (!this.work.signal.aborted) {
        this.o.log.warn({ err }, 'the transfer summary could not be written; the operator hears a fixed one');
        this.o.error(callError(ErrorCodes.TRANSFER_SUMMARY_FAILED, `warm transfer: the summary could not be written (${err.message}); the operator heard "${FALLBACK_SUMMARY}"`));
      }
      return FALLBACK_SUMMARY;
    });
  }

  /** Plays `audio` (μ-law 8 kHz) to the operator in real time; stops early when `stop()` holds. */
  private async play(leg: OperatorLeg, audio: Buffer, stop: () => boolean): Promise<void> {
    const bridge = AudioBridge.for(leg.audioFormat);
    const frames = Math.ceil(audio.length / 160);
    const t0 = performance.now();
    for (let i = 0; i < frames; i++) {
      if (stop()) return;
      const frame = Buffer.alloc(160, 0xff);
      audio.copy(frame, 0, i * 160, Math.min(audio.length, (i + 1) * 160));
      leg.sendAudio(bridge ? bridge.fromProviders(frame) : frame);
      await sleep(t0 + (i + 1) * FRAME_MS - performance.now());
    }
  }

  /** Resolves once `done()` holds (checked at each of the operator's events) or after `ms`. */
  private async until(done: () => boolean, ms?: number): Promise<void> {
    const deadline = ms === undefined ? null : performance.now() + ms;
    while (!done()) {
      const left = deadline === null ? null : deadline - performance.now();
      if (left !== null && left <= 0) return;
      await new Promise<void>((resolve) => {
        const timer = left === null ? null : setTimeout(resolve, left);
        this.wake = () => {
          if (timer) clearTimeout(timer);
          resolve();
        };
      });
      this.wake = null;
    }
  }

  private poke(): void {
    this.wake?.();
  }

  private async hangUpLeg(): Promise<void> {
    const leg = this.leg;
    if (!leg || this.joined) return;
    this.leg = null;
    await leg.hangUp().catch((err: unknown) => this.o.log.warn({ err }, 'the operator\'s leg could not be hung up'));
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));
}

function withTimeout<T>(work: Promise<T>, ms: number, why: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    work,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(why)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

/**
 * A transfer node's cold transfer: the call is moved (`forwarding`) and the conversation ends;
 * resolves to `null` once done, else the ended reason its failure gives. A chat has nothing to
 * dial: the `hang_up` that follows ends it `call-transferred`.
 */
export async function coldTransfer(destination: string, transport: CallTransport | null, conversation: ConversationLog, log: Logger): Promise<string | null> {
  if (!transport) {
    log.debug({ destination }, 'transfer node reached; the conversation ends');
    return null;
  }
  conversation.forwarding(destination);
  const cold = { mode: 'cold' as const, destination, summary: null, operator_answered_at: null, joined_at: null };
  try {
    await transport.transfer(destination);
    conversation.transfer?.({ ...cold, result: 'completed' });
    return null;
  } catch (err) {
    conversation.transfer?.({ ...cold, result: 'failed' });
    log.error({ err }, 'transfer failed');
    const error = callErrorFrom(err, ErrorCodes.TRANSFER_FAILED, { message: `transfer: ${(err as Error).message}`, provider: transport.kind });
    conversation.error(error);
    return endedReasonFor(error);
  }
}
