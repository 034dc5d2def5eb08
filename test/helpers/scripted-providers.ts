/**
 * Providers a fast call test drives (test/fast-calls/, docs/testing.md): they implement the
 * interfaces of src/providers/types.ts and run on the process's timers, so under fake timers a
 * whole call plays in milliseconds.
 *
 * - `SyntheticVoice`: audio that carries which line it is, one frame per `msPerChar` × character,
 *   so the far end can tell which lines the caller heard whole, and a test knows how long a line plays.
 * - `ScriptedStt`: the test says when the caller started speaking, what the interim and final
 *   transcripts are, and when the vendor's utterance end comes.
 * - `ScriptedLlm`: answers each request from a script (text chunks, function calls, delays,
 *   errors) and records every request (what the model saw).
 * - `ScriptedTts`: the voice's audio for each text, after an optional first-audio delay.
 * - `ScriptedRealtime`: a speech-to-speech model with server VAD on the caller's audio (speech is
 *   any frame that is not μ-law silence), speaking its lines in the voice and its replies from the
 *   same kind of script as the LLM.
 */
import type { LlmConfig, SttConfig, TtsConfig } from '../../engine/schema.js';
import { FRAME_BYTES, FRAME_MS } from '../../src/calls/outbound.js';
import {
  ProviderError,
  type LlmEvent,
  type LlmFunction,
  type LlmMessage,
  type LlmProvider,
  type LlmRequest,
  type LlmToolCall,
  type RealtimeEvents,
  type RealtimeProvider,
  type RealtimeSession,
  type RealtimeSessionOptions,
  type SttEvents,
  type SttProvider,
  type SttSession,
  type TtsEvents,
  type TtsProvider,
  type TtsSession,
} from '../../src/providers/types.js';

const MULAW_SILENCE = 0xff;
/** First byte of every frame of the synthetic voice. */
const VOICE_TAG = 0xa5;
const VOICE_FILL = 0x55;

// ---------------------------------------------------------------------------------------------
// the voice

export interface VoiceFrame {
  line: number;
  text: string;
  index: number;
  count: number;
}

/**
 * Speech whose every 20 ms frame says which line it belongs to (line id, frame index, frame
 * count): `ceil(characters × msPerChar / 20)` frames, at least one. Both the assistant's TTS and
 * the caller (realtime calls hear the caller's audio) speak with it.
 */
export class SyntheticVoice {
  private readonly lines: string[] = [];

  constructor(readonly msPerChar = 20) {}

  /** How long `text` plays, in ms (whole frames). */
  msOf(text: string): number {
    return this.frameCount(text) * FRAME_MS;
  }

  /** The audio of `text`, a new line. */
  speak(text: string): Buffer {
    const line = this.lines.push(text);
    const count = this.frameCount(text);
    const audio = Buffer.alloc(count * FRAME_BYTES, VOICE_FILL);
    for (let i = 0; i < count; i++) {
      const at = i * FRAME_BYTES;
      audio[at] = VOICE_TAG;
      audio.writeUInt16BE(line, at + 1);
      audio.writeUInt16BE(i, at + 3);
      audio.writeUInt16BE(count, at + 5);
    }
    return audio;
  }

  /** Which line a frame carries; null for silence, noise or padding. */
  decode(frame: Buffer): VoiceFrame | null {
    if (frame.length < 7 || frame[0] !== VOICE_TAG) return null;
    const line = frame.readUInt16BE(1);
    const text = this.lines[line - 1];
    if (text === undefined) return null;
    return { line, text, index: frame.readUInt16BE(3), count: frame.readUInt16BE(5) };
  }

  private frameCount(text: string): number {
    return Math.max(1, Math.ceil((text.length * this.msPerChar) / FRAME_MS));
  }
}

/** `ms` of sound with no words in it (a cough, a door): not silence, not the voice. */
export function noiseFrames(ms: number): Buffer[] {
  const frames: Buffer[] = [];
  for (let f = 0; f < Math.ceil(ms / FRAME_MS); f++) {
    const frame = Buffer.alloc(FRAME_BYTES);
    for (let i = 0; i < FRAME_BYTES; i++) frame[i] = (i * 37 + f * 11) % 2 === 0 ? 0x10 : 0x90;
    frames.push(frame);
  }
  return frames;
}

/** `audio` cut into whole frames (the last one padded with silence). */
export function framesOf(audio: Buffer): Buffer[] {
  const frames: Buffer[] = [];
  for (let i = 0; i < audio.length; i += FRAME_BYTES) {
    const frame = Buffer.alloc(FRAME_BYTES, MULAW_SILENCE);
    audio.copy(frame, 0, i, Math.min(i + FRAME_BYTES, audio.length));
    frames.push(frame);
  }
  return frames;
}

const isSilence = (frame: Buffer) => frame.every((b) => b === MULAW_SILENCE);

/** A timer-based wait that an abort ends at once (its timer cleared: nothing is left behind). */
function sleep(ms: number, signal: AbortSignal | undefined, onAbort: () => Error): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(onAbort());
    const abort = () => {
      clearTimeout(timer);
      reject(onAbort());
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', abort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', abort, { once: true });
  });
}

// ---------------------------------------------------------------------------------------------
// speech-to-text

export class ScriptedSttSession implements SttSession {
  audioFrames = 0;
  finalized = 0;
  closed = false;

  constructor(
    readonly config: SttConfig,
    readonly events: SttEvents,
  ) {}

  sendAudio(mulaw: Buffer): void {
    if (!this.closed && mulaw.length > 0) this.audioFrames++;
  }

  finalize(): void {
    this.finalized++;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.events.onClose?.();
  }
}

/**
 * Speech-to-text the test speaks through: each method delivers one vendor event to the open
 * session, at the fake time the test calls it (as a socket message would).
 */
export class ScriptedStt implements SttProvider {
  readonly sessions: ScriptedSttSession[] = [];
  /** `connect` throws this (a vendor refusing the call). */
  connectError: ProviderError | null = null;

  constructor(readonly id = 'sandbox') {}

  async connect(config: SttConfig, events: SttEvents, signal?: AbortSignal): Promise<SttSession> {
    if (signal?.aborted) throw new ProviderError('PROVIDER_ABORTED', this.id, 'connect aborted');
    if (this.connectError) throw this.connectError;
    const session = new ScriptedSttSession(config, events);
    this.sessions.push(session);
    return session;
  }

  /** The session the call has open now. */
  get session(): ScriptedSttSession | null {
    const last = this.sessions.at(-1);
    return last && !last.closed ? last : null;
  }

  speechStarted(): void {
    this.session?.events.onSpeechStarted?.();
  }

  interim(text: string): void {
    this.session?.events.onTranscript({ text, isFinal: false, speechFinal: false, confidence: 1 });
  }

  /** A final transcript; `speechFinal`: the vendor's endpointing says the caller paused. */
  final(text: string, speechFinal = true): void {
    this.session?.events.onTranscript({ text, isFinal: true, speechFinal, confidence: 1 });
  }

  utteranceEnd(): void {
    this.session?.events.onUtteranceEnd?.();
  }

  /** The vendor fails mid-call (the session is unusable afterwards). */
  fail(error: ProviderError): void {
    this.session?.events.onError(error);
  }
}

// ---------------------------------------------------------------------------------------------
// the model's script (pipeline LLM and realtime model alike)

export interface ModelReply {
  /** Text streamed in order: one chunk, or several. */
  text?: string | string[];
  /** Function calls after the text: transition functions (`go_to_<node>`) or the assistant's tools. */
  calls?: Array<{ name: string; arguments?: Record<string, unknown> }>;
  /** Fake ms before the first event. */
  firstTokenMs?: number;
  /** Fake ms between chunks (and before the calls). */
  chunkMs?: number;
  /** Thrown after the text (before any call): the vendor failing mid-reply. */
  error?: ProviderError;
}

export interface ModelRequest {
  /** Fake performance.now() when it was asked. */
  at: number;
  messages: LlmMessage[];
  /** Names of the functions offered. */
  functions: string[];
  /** The call stopped it (barge-in, supersede, hang-up) before it had all of it. */
  aborted: boolean;
  /** A realtime response: the extra instructions it was created with, if any. */
  instructions?: string;
}

export type ModelScriptEntry = ModelReply | ((request: ModelRequest) => ModelReply);

/** The words of the last user message, to answer with when the script has run out. */
const lastUserText = (messages: readonly LlmMessage[]) =>
  [...messages].reverse().find((m): m is Extract<LlmMessage, { role: 'user' }> => m.role === 'user')?.content ?? '';

const chunksOf = (reply: ModelReply) => (reply.text === undefined ? [] : typeof reply.text === 'string' ? [reply.text] : reply.text);

class ModelScript {
  private readonly entries: ModelScriptEntry[] = [];
  readonly requests: ModelRequest[] = [];
  /** The answer once the script has run out: the caller's last words acknowledged. */
  fallback: (request: ModelRequest) => ModelReply = (r) => ({ text: `You said: ${lastUserText(r.messages).replace(/[.!?]+$/, '')}.` });

  push(entries: ModelScriptEntry[]): void {
    this.entries.push(...entries);
  }

  next(request: ModelRequest): ModelReply {
    this.requests.push(request);
    const entry = this.entries.shift();
    if (!entry) return this.fallback(request);
    return typeof entry === 'function' ? entry(request) : entry;
  }
}

/**
 * A language model that answers from a script, one entry per request, and records what it was
 * asked. Delays run on the (fake) timers; an abort ends the stream with `PROVIDER_ABORTED`.
 */
export class ScriptedLlm implements LlmProvider {
  private readonly script = new ModelScript();
  private callSeq = 0;

  constructor(readonly id = 'sandbox') {}

  /** Queues answers, one per coming request. */
  reply(...entries: ModelScriptEntry[]): this {
    this.script.push(entries);
    return this;
  }

  get requests(): ModelRequest[] {
    return this.script.requests;
  }

  set fallback(fn: (request: ModelRequest) => ModelReply) {
    this.script.fallback = fn;
  }

  /** The messages of request `i` as `[role, content]`, the system prompt left out. */
  asked(i: number): Array<[string, string | null]> {
    const r = this.requests[i];
    if (!r) throw new Error(`no model request #${i} (${this.requests.length} made)`);
    return r.messages.filter((m) => m.role !== 'system').map((m) => [m.role, m.content]);
  }

  stream(request: LlmRequest): AsyncIterable<LlmEvent> {
    return this.run(request);
  }

  private async *run(request: LlmRequest): AsyncGenerator<LlmEvent> {
    const record: ModelRequest = {
      at: performance.now(),
      messages: structuredClone(request.messages),
      functions: request.tools.map((t) => t.name),
      aborted: false,
    };
    const reply = this.script.next(record);
    const { signal } = request;
    const aborted = () => {
      record.aborted = true;
      return new ProviderError('PROVIDER_ABORTED', this.id, 'request aborted');
    };
    const wait = async (ms: number | undefined) => {
      if (ms && ms > 0) await sleep(ms, signal, aborted);
      else await Promise.resolve(); // a model never answers synchronously
      if (signal?.aborted) throw aborted();
    };
    await wait(reply.firstTokenMs);
    let first = true;
    for (const text of chunksOf(reply)) {
      if (!first) await wait(reply.chunkMs);
      first = false;
      yield { type: 'text', text };
      if (signal?.aborted) throw aborted();
    }
    if (reply.error) throw reply.error;
    if (reply.calls && reply.calls.length > 0) {
      if (!first) await wait(reply.chunkMs);
      const calls: LlmToolCall[] = reply.calls.map((c) => ({
        id: `call_${++this.callSeq}`,
        name: c.name,
        arguments: JSON.stringify(c.arguments ?? {}),
      }));
      yield { type: 'tool_calls', calls };
      yield { type: 'done', finishReason: 'tool_calls' };
      return;
    }
    yield { type: 'done', finishReason: 'stop' };
  }
}

// ---------------------------------------------------------------------------------------------
// text-to-speech

export interface SynthesizedText {
  text: string;
  /** Fake performance.now() when the text was flushed. */
  at: number;
  cancelled: boolean;
}

class ScriptedTtsSession implements TtsSession {
  private text = '';
  private readonly queue: SynthesizedText[] = [];
  private timer: NodeJS.Timeout | null = null;
  private ended = false;
  private finished = false;

  constructor(
    private readonly tts: ScriptedTts,
    private readonly events: TtsEvents,
  ) {}

  sendText(text: string): void {
    if (!this.ended && !this.finished) this.text += text;
  }

  flush(): void {
    if (this.ended || this.finished) return;
    const text = this.text.trim();
    this.text = '';
    if (text === '') return;
    const piece = { text, at: performance.now(), cancelled: false };
    this.tts.synthesized.push(piece);
    this.queue.push(piece);
    this.schedule();
  }

  end(): void {
    if (this.ended || this.finished) return;
    this.flush();
    this.ended = true;
    this.schedule();
  }

  cancel(): void {
    if (this.finished) return;
    this.finished = true;
    for (const piece of this.queue) piece.cancelled = true;
    this.queue.length = 0;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  private schedule(): void {
    if (this.timer || this.finished) return;
    this.timer = setTimeout(() => this.pump(), this.queue.length > 0 ? this.tts.firstAudioMs : 0);
  }

  private pump(): void {
    this.timer = null;
    while (!this.finished && this.queue.length > 0) {
      const piece = this.queue.shift()!;
      const error = this.tts.failOn?.(piece.text) ?? null;
      if (error) {
        this.finished = true;
        this.events.onError(error);
        return;
      }
      this.events.onAudio(this.tts.voice.speak(piece.text));
    }
    if (this.finished || !this.ended) return;
    this.finished = true;
    this.events.onDone();
  }
}

/**
 * Text-to-speech in the synthetic voice: a flushed text's audio comes `firstAudioMs` (fake)
 * after it was flushed, all at once; `failOn` makes a text fail instead.
 */
export class ScriptedTts implements TtsProvider {
  readonly synthesized: SynthesizedText[] = [];
  firstAudioMs = 0;
  failOn: ((text: string) => ProviderError | null) | null = null;
  openError: ProviderError | null = null;

  constructor(
    readonly voice: SyntheticVoice,
    readonly id = 'sandbox',
  ) {}

  async open(_config: TtsConfig, events: TtsEvents, signal?: AbortSignal): Promise<TtsSession> {
    if (signal?.aborted) throw new ProviderError('PROVIDER_ABORTED', this.id, 'open aborted');
    if (this.openError) throw this.openError;
    return new ScriptedTtsSession(this, events);
  }
}

// ---------------------------------------------------------------------------------------------
// realtime speech-to-speech

const SAY_EXACTLY = /^\s*say exactly(?: this)?\s*[:\-–—]?\s*(.+?)\s*$/is;
/** What the scripted model says to a noise (not from the script: it asks nothing of it). */
export const NOISE_REPLY = 'Sorry, I did not catch that.';
/** Audio goes out in 100 ms pieces, as a realtime vendor streams it. */
const REALTIME_CHUNK_BYTES = 5 * FRAME_BYTES;

/** What a response was asked with: its instructions, and functions replacing the session's for it. */
interface RealtimeResponseRequest {
  instructions: string | undefined;
  tools: LlmFunction[] | undefined;
}

interface RealtimeResponse {
  id: string;
  instructions: string | undefined;
  cancelled: boolean;
  timer: NodeJS.Timeout | null;
}

export class ScriptedRealtimeSession implements RealtimeSession {
  options: RealtimeSessionOptions;
  readonly updates: Array<Partial<RealtimeSessionOptions>> = [];
  readonly history: LlmMessage[] = [];
  readonly truncations: Array<{ itemId: string; audioEndMs: number; text: string }> = [];
  readonly functionResults: Array<{ callId: string; output: string; respond: boolean }> = [];
  /** `createResponse` instructions, in order (`undefined` when asked with none). */
  readonly responsesAsked: Array<string | undefined> = [];
  cancels = 0;
  /** Output items the call asked the vendor to forget (a reply to a noise), in order. */
  readonly forgotten: string[][] = [];
  /** Like OpenAI with `interrupt_response: false`: its VAD never cuts a response; the call does. */
  readonly interruptsOnSpeech = false;
  get responding(): boolean {
    return this.active !== null;
  }
  /** Frames of caller audio received, and how many of them were silence. */
  audioFrames = 0;
  silentFrames = 0;
  closed = false;

  private readonly items = new Map<string, { message: { role: 'assistant'; content: string | null }; text: string; audioMs: number }>();
  private active: RealtimeResponse | null = null;
  private readonly waiting: RealtimeResponseRequest[] = [];
  private speaking = false;
  private heardLines: number[] = [];
  private stopTimer: NodeJS.Timeout | null = null;
  private readonly pending = new Set<NodeJS.Timeout>();
  private seq = 0;

  constructor(
    private readonly provider: ScriptedRealtime,
    options: RealtimeSessionOptions,
    private readonly events: RealtimeEvents,
  ) {
    this.options = { ...options, tools: [...options.tools] };
  }

  /** Server VAD: speech is any frame that is not silence; it stops after `silenceDurationMs` without. */
  sendAudio(mulaw: Buffer): void {
    if (this.closed || mulaw.length === 0) return;
    this.audioFrames++;
    if (isSilence(mulaw)) {
      this.silentFrames++;
      return;
    }
    const said = this.provider.voice.decode(mulaw);
    const newLine = said !== null && !this.heardLines.includes(said.line);
    if (newLine) this.heardLines.push(said.line);
    if (!this.speaking) {
      this.speaking = true;
      this.later(() => this.events.onSpeechStarted());
    }
    // words while the caller speaks, as the sandbox's STT gives them (OpenAI gives none before the end)
    if (newLine && !this.provider.transcriptDelayMs) {
      const sofar = this.heardText();
      this.later(() => this.events.onTranscript?.('user', sofar, false));
    }
    if (this.stopTimer) clearTimeout(this.stopTimer);
    this.stopTimer = setTimeout(() => this.speechStopped(), this.options.turnDetection?.silenceDurationMs ?? 500);
  }

  update(options: Partial<RealtimeSessionOptions>): void {
    this.updates.push(options);
    this.options = { ...this.options, ...options, tools: [...(options.tools ?? this.options.tools)] };
  }

  createResponse(instructions?: string, options?: { tools?: LlmFunction[] }): void {
    if (this.closed) return;
    this.responsesAsked.push(instructions);
    const request = { instructions, tools: options?.tools };
    if (this.active) {
      this.waiting.push(request);
      return;
    }
    this.respond(request);
  }

  cancelResponse(): void {
    this.cancels++;
    const r = this.active;
    if (!r) return;
    this.waiting.length = 0;
    this.stop(r);
    // `response.done` (cancelled) comes after the call returns, never re-entrantly
    this.later(() => this.events.onResponseDone?.());
  }

  forgetTurn(itemIds: string[]): void {
    this.forgotten.push([...itemIds]);
    for (const id of itemIds) {
      const item = this.items.get(id);
      const at = item ? this.history.indexOf(item.message) : -1;
      if (at >= 0) this.history.splice(at, 1);
    }
  }

  truncate(itemId: string, audioEndMs: number): void {
    const item = this.items.get(itemId);
    const text = item ? heardWords(item.text, audioEndMs, item.audioMs) : '';
    this.truncations.push({ itemId, audioEndMs, text });
    if (item) {
      item.message.content = text;
      item.text = text;
    }
  }

  sendFunctionResult(callId: string, output: string, respond = true): void {
    if (this.closed) return;
    this.functionResults.push({ callId, output, respond });
    this.history.push({ role: 'tool', tool_call_id: callId, content: output });
    if (respond) this.createResponse();
  }

  addMessage(role: 'system' | 'user', text: string): void {
    if (!this.closed) this.history.push({ role, content: text });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.waiting.length = 0;
    if (this.active) this.stop(this.active);
    if (this.stopTimer) clearTimeout(this.stopTimer);
    this.stopTimer = null;
    for (const t of this.pending) clearTimeout(t);
    this.pending.clear();
    this.events.onClose?.();
  }

  /** The vendor fails mid-call. */
  fail(error: ProviderError): void {
    if (!this.closed) this.events.onError(error);
  }

  /** A socket event: on a later turn of the loop, never after close. */
  private later(fn: () => void, ms = 0): NodeJS.Timeout {
    const t = setTimeout(() => {
      this.pending.delete(t);
      if (!this.closed) fn();
    }, ms);
    this.pending.add(t);
    return t;
  }

  private speechStopped(): void {
    this.stopTimer = null;
    this.speaking = false;
    if (this.closed) return;
    this.events.onSpeechStopped?.();
    const text = this.heardText() || (this.provider.transcripts.shift() ?? '');
    this.heardLines = [];
    // the transcript of the turn, empty for a noise (at once, or later as OpenAI's can come)
    const transcribed = () => this.events.onTranscript?.('user', text, true);
    if (this.provider.transcriptDelayMs) this.later(transcribed, this.provider.transcriptDelayMs);
    else transcribed();
    // server VAD answers every turn, a noise too, unless a response is active (OpenAI's create_response then fails)
    if (text !== '') {
      this.history.push({ role: 'user', content: text });
      if (!this.active) this.createResponse();
      return;
    }
    if (this.active) return;
    const r: RealtimeResponse = { id: `item_${++this.seq}`, instructions: undefined, cancelled: false, timer: null };
    this.active = r;
    r.timer = this.later(() => this.speak(r, NOISE_REPLY), this.provider.firstAudioMs);
  }

  private heardText(): string {
    return this.heardLines.map((line) => this.provider.voice.decode(this.lineFrame(line))?.text ?? '').join(' ').trim();
  }

  /** A frame of `line` (to read its text back from the voice). */
  private lineFrame(line: number): Buffer {
    const frame = Buffer.alloc(7);
    frame[0] = VOICE_TAG;
    frame.writeUInt16BE(line, 1);
    return frame;
  }

  private stop(r: RealtimeResponse): void {
    r.cancelled = true;
    if (r.timer) {
      clearTimeout(r.timer);
      this.pending.delete(r.timer);
    }
    r.timer = null;
    if (this.active === r) this.active = null;
  }

  private respond({ instructions, tools }: RealtimeResponseRequest): void {
    const r: RealtimeResponse = { id: `item_${++this.seq}`, instructions, cancelled: false, timer: null };
    this.active = r;
    const verbatim = instructions === undefined ? null : SAY_EXACTLY.exec(instructions);
    if (verbatim) {
      r.timer = this.later(() => this.speak(r, verbatim[1]!.replace(/^["“'](.*)["”']$/s, '$1')), this.provider.firstAudioMs);
      return;
    }
    const request: ModelRequest = {
      at: performance.now(),
      messages: structuredClone([{ role: 'system', content: this.options.instructions } as LlmMessage, ...this.history]),
      functions: (tools ?? this.options.tools).map((t) => t.name),
      aborted: false,
      ...(instructions !== undefined ? { instructions } : {}),
    };
    const reply = this.provider.next(request);
    r.timer = this.later(() => {
      r.timer = null;
      if (reply.error) {
        this.active = null;
        this.events.onError(reply.error);
        return;
      }
      if (reply.calls && reply.calls.length > 0) {
        const calls = reply.calls.map((c, i) => ({ callId: `call_${r.id}_${i}`, name: c.name, arguments: JSON.stringify(c.arguments ?? {}) }));
        this.history.push({ role: 'assistant', content: null, tool_calls: calls.map((c) => ({ id: c.callId, name: c.name, arguments: c.arguments })) });
        for (const c of calls) {
          if (this.active !== r) return;
          this.events.onFunctionCall(c);
        }
        if (this.active === r) this.finish(r);
        return;
      }
      this.speak(r, chunksOf(reply).join(''));
    }, reply.firstTokenMs ?? this.provider.firstAudioMs);
  }

  /** Speaks `text` as item `r.id`, in 100 ms pieces, then its transcript, then `response.done`. */
  private speak(r: RealtimeResponse, text: string): void {
    r.timer = null;
    if (this.active !== r || this.closed) return;
    const audio = this.provider.voice.speak(text);
    const message = { role: 'assistant' as const, content: text };
    this.history.push(message);
    this.items.set(r.id, { message, text, audioMs: (audio.length / FRAME_BYTES) * FRAME_MS });
    for (let at = 0; at < audio.length && this.active === r; at += REALTIME_CHUNK_BYTES) {
      this.events.onAudio(audio.subarray(at, at + REALTIME_CHUNK_BYTES), r.id);
    }
    if (this.active !== r) return;
    this.events.onTranscript?.('assistant', text, true);
    if (this.active === r) this.finish(r);
  }

  private finish(r: RealtimeResponse): void {
    if (this.active === r) this.active = null;
    this.events.onResponseDone?.();
    if (this.waiting.length > 0 && !this.active && !this.closed) this.respond(this.waiting.shift()!);
  }
}

/** The whole words of `text` heard when `heardMs` of its `totalMs` played. */
function heardWords(text: string, heardMs: number, totalMs: number): string {
  if (totalMs <= 0 || heardMs >= totalMs) return text;
  if (heardMs <= 0) return '';
  const cut = Math.floor((text.length * heardMs) / totalMs);
  const head = text.slice(0, cut);
  return (text[cut] === ' ' ? head : head.slice(0, Math.max(0, head.lastIndexOf(' ')))).trimEnd();
}

/**
 * A realtime speech-to-speech model: lines asked with "Say exactly: …" are spoken verbatim, every
 * other response comes from the script (text spoken in the voice, or function calls), and the
 * caller's turns come from its audio (server VAD). Records its sessions and every scripted request.
 */
export class ScriptedRealtime implements RealtimeProvider {
  readonly sessions: ScriptedRealtimeSession[] = [];
  private readonly script = new ModelScript();
  /** Fake ms from a response's creation to its first audio (or function call). */
  firstAudioMs = 0;
  /** The caller's final transcript comes this long after the turn's end (OpenAI's can come after the reply); 0: at once, with words while speaking. */
  transcriptDelayMs = 0;
  /** Transcripts of turns whose audio carries no voice of the harness (a fixture's speech), in order; none left: no words. */
  readonly transcripts: string[] = [];

  connectError: ProviderError | null = null;

  constructor(
    readonly voice: SyntheticVoice,
    readonly id = 'sandbox-realtime',
  ) {}

  reply(...entries: ModelScriptEntry[]): this {
    this.script.push(entries);
    return this;
  }

  get requests(): ModelRequest[] {
    return this.script.requests;
  }

  set fallback(fn: (request: ModelRequest) => ModelReply) {
    this.script.fallback = fn;
  }

  next(request: ModelRequest): ModelReply {
    return this.script.next(request);
  }

  get session(): ScriptedRealtimeSession | null {
    const last = this.sessions.at(-1);
    return last && !last.closed ? last : null;
  }

  async connect(_config: LlmConfig, options: RealtimeSessionOptions, events: RealtimeEvents, signal?: AbortSignal): Promise<RealtimeSession> {
    if (signal?.aborted) throw new ProviderError('PROVIDER_ABORTED', this.id, 'connect aborted');
    if (this.connectError) throw this.connectError;
    const session = new ScriptedRealtimeSession(this, options, events);
    this.sessions.push(session);
    return session;
  }
}
