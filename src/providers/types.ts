/**
 * One small streaming interface per provider kind, so that the call pipeline never knows which
 * vendor it talks to. A vendor file implements one of these and knows nothing about calls.
 *
 * Audio at these interfaces is always G.711 μ-law, 8 kHz, mono (what Twilio sends and takes).
 */
import type { LlmConfig, SttConfig, TtsConfig } from '../../engine/schema.js';

// ---------------------------------------------------------------------------------------------
// Errors: a stable code per failure (undici-style), so logs, metrics and `ended_reason`
// (`pipeline-error-<provider>`) can name them.

import { ErrorCodes, SwitchboardError } from '../../engine/errors.js';

export type ProviderErrorCode =
  | 'PROVIDER_AUTH' // 401/403 from the vendor, or no API key configured
  | 'PROVIDER_HTTP_ERROR' // another non-2xx answer
  | 'PROVIDER_TIMEOUT' // no answer in time
  | 'PROVIDER_DISCONNECTED' // the connection dropped mid-stream
  | 'PROVIDER_PROTOCOL' // the vendor sent something we cannot read
  | 'PROVIDER_ABORTED' // we cancelled (barge-in, hang-up); not a failure of the vendor
  | 'PROVIDER_NO_ADAPTER'; // the call names a provider this server has no adapter for

export class ProviderError extends SwitchboardError {
  static override readonly codes = [
    ErrorCodes.PROVIDER_AUTH,
    ErrorCodes.PROVIDER_HTTP_ERROR,
    ErrorCodes.PROVIDER_TIMEOUT,
    ErrorCodes.PROVIDER_DISCONNECTED,
    ErrorCodes.PROVIDER_PROTOCOL,
    ErrorCodes.PROVIDER_ABORTED,
    ErrorCodes.PROVIDER_NO_ADAPTER,
  ] as const;
  override name = 'ProviderError';
  declare readonly code: ProviderErrorCode;
  constructor(
    code: ProviderErrorCode,
    /** Catalog provider id, e.g. `deepgram`. */
    readonly provider: string,
    message: string,
    readonly status?: number,
    options?: { cause?: unknown },
  ) {
    super(code, message, options);
  }
}

/** Where one vendor account is and its key: `<VENDOR>_API_BASE` and `<VENDOR>_API_KEY`. */
export interface VendorEndpoint {
  baseUrl: string;
  apiKey?: string | undefined;
}

/**
 * Where vendors are and how we authenticate to them (`providerSettings(config)`): one
 * `VendorEndpoint` per vendor account, by the account's name. Each vendor's file adds its field
 * to this interface (`declare module '../types.js'`), optional so that settings built by hand for
 * one vendor's tests need not name the others; adapters read it with `vendorEndpoint`.
 */
export interface ProviderSettings {
  /** Request timeouts in ms (connect + first byte). */
  timeouts?: { connectMs?: number; firstTokenMs?: number };
}

// ---------------------------------------------------------------------------------------------
// Speech-to-text: audio in, transcripts out.

export interface Transcript {
  text: string;
  /** Deepgram `is_final`: this span of audio will not be transcribed again. */
  isFinal: boolean;
  /** Deepgram `speech_final`: the vendor's endpointing says the speaker paused. */
  speechFinal: boolean;
  confidence?: number;
  /** Seconds from the start of the stream. */
  start?: number;
  duration?: number;
}

export interface SttEvents {
  onTranscript(t: Transcript): void;
  onSpeechStarted?(): void;
  onUtteranceEnd?(): void;
  /** A failure after connect; the session is unusable afterwards. */
  onError(err: ProviderError): void;
  onClose?(): void;
}

export interface SttSession {
  /** μ-law 8 kHz frames; empty buffers are ignored. */
  sendAudio(mulaw: Buffer): void;
  /** Flush: transcribe what was sent so far now (end of the caller's turn). */
  finalize(): void;
  /** Close gracefully (CloseStream); resolves once every socket and timer is gone. */
  close(): Promise<void>;
}

export interface SttProvider {
  readonly id: string;
  connect(config: SttConfig, events: SttEvents, signal?: AbortSignal): Promise<SttSession>;
}

// ---------------------------------------------------------------------------------------------
// Language model: messages and tools in, streamed text and tool calls out.

export interface LlmToolCall {
  id: string;
  name: string;
  /** JSON text as the model produced it. */
  arguments: string;
  /**
   * What the vendor wants back with this call when the history is sent again (Gemini's
   * `thoughtSignature`); only the adapter that made it reads it.
   */
  vendorData?: Record<string, unknown>;
}

export type LlmMessage =
  | { role: 'system'; content: string }
  | { role: 'user'; content: string }
  | { role: 'assistant'; content: string | null; tool_calls?: LlmToolCall[] }
  | { role: 'tool'; tool_call_id: string; content: string };

export interface LlmFunction {
  name: string;
  description?: string;
  /** JSON Schema of the arguments (`{type:'object', properties, required}`). */
  parameters?: Record<string, unknown>;
}

export interface LlmRequest {
  config: LlmConfig;
  messages: LlmMessage[];
  tools: LlmFunction[];
  /** Aborting ends the stream at once (barge-in) and releases the connection. */
  signal?: AbortSignal;
}

export type LlmEvent =
  | { type: 'text'; text: string }
  /** Emitted once, complete, when the model has finished its tool calls (deltas merged). */
  | { type: 'tool_calls'; calls: LlmToolCall[] }
  /** `usage`: the request's tokens, as the vendor's usage fields count them (when it sends them). */
  | { type: 'done'; finishReason: string | null; usage?: LlmTokenUsage };

/** A model request's tokens, from the vendor's own usage fields. */
export interface LlmTokenUsage {
  inputTokens: number;
  outputTokens: number;
}

export interface LlmProvider {
  readonly id: string;
  /** Throws (or the iterator throws) `ProviderError`; an abort throws code `PROVIDER_ABORTED`. */
  stream(request: LlmRequest): AsyncIterable<LlmEvent>;
}

// ---------------------------------------------------------------------------------------------
// Text-to-speech: text in (streamed), audio out.

export interface TtsEvents {
  onAudio(mulaw: Buffer): void;
  /** All audio for the text given before `end()` has been delivered. */
  onDone(): void;
  onError(err: ProviderError): void;
}

/** One session per assistant reply: text is streamed in as the model produces it. */
export interface TtsSession {
  sendText(text: string): void;
  /** Synthesize what was sent so far now (a sentence ended). */
  flush(): void;
  /** No more text; `onDone` follows when the audio is all out. */
  end(): void;
  /** Stop at once (barge-in): no more `onAudio`, sockets closed, nothing leaks. */
  cancel(): void;
}

export interface TtsProvider {
  readonly id: string;
  open(config: TtsConfig, events: TtsEvents, signal?: AbortSignal): Promise<TtsSession>;
}

// ---------------------------------------------------------------------------------------------
// Realtime speech-to-speech: audio both ways, plus functions.

export interface RealtimeSessionOptions {
  instructions: string;
  tools: LlmFunction[];
  voice?: string;
  /** Server VAD settings derived from `speech_config.turn_taking`. */
  turnDetection?: { silenceDurationMs?: number; prefixPaddingMs?: number; threshold?: number };
}

export interface RealtimeFunctionCall {
  callId: string;
  name: string;
  arguments: string;
}

export interface RealtimeEvents {
  /** Assistant audio (μ-law), tagged with the output item it belongs to (for truncation). */
  onAudio(mulaw: Buffer, itemId: string): void;
  /** The caller started speaking (server VAD): the call decides about barge-in (docs/turn-taking.md, Realtime calls). */
  onSpeechStarted(): void;
  /** The caller's turn ended (server VAD): the vendor creates its reply by itself. */
  onSpeechStopped?(): void;
  /** Transcripts of either side, when the vendor provides them. */
  onTranscript?(role: 'user' | 'assistant', text: string, final: boolean): void;
  onFunctionCall(call: RealtimeFunctionCall): void;
  /** A response finished (all its audio has been sent). */
  onResponseDone?(): void;
  onError(err: ProviderError): void;
  onClose?(): void;
}

export interface RealtimeSession {
  sendAudio(mulaw: Buffer): void;
  /** Change instructions/tools (a workflow node changed). */
  update(options: Partial<RealtimeSessionOptions>): void;
  /**
   * Ask for a response now (optionally with extra instructions, e.g. "say exactly: ..."); `tools`
   * replaces the session's functions for this response only (`[]`: none offered).
   */
  createResponse(instructions?: string, options?: { tools?: LlmFunction[] }): void;
  cancelResponse(): void;
  /** Keep in the model's history only what the caller heard of an item. */
  truncate(itemId: string, audioEndMs: number): void;
  /** Answer a function call; `respond` asks for a response afterwards (default true). */
  sendFunctionResult(callId: string, output: string, respond?: boolean): void;
  /** A message in the model's conversation, not spoken (a live control's `add-message`); no response is asked for. */
  addMessage?(role: 'system' | 'user', text: string): void;
  /**
   * The caller's last turn was a noise: its input and the reply to it (`itemIds`, the reply's
   * output items) leave the model's conversation, where the vendor allows it.
   */
  forgetTurn?(itemIds: string[]): void;
  /**
   * Whether the vendor stops its own response when its VAD hears the caller start (true, or
   * absent: the call then cuts at once, as the model's audio has stopped anyway); false: it goes
   * on, and the call cuts from its own voice-activity detector and the caller's words.
   */
  readonly interruptsOnSpeech?: boolean;
  /** A response is under way at the vendor (its VAD will not start another at the end of a turn); absent: unknown. */
  readonly responding?: boolean;
  close(): Promise<void>;
}

export interface RealtimeProvider {
  readonly id: string;
  connect(
    config: LlmConfig,
    options: RealtimeSessionOptions,
    events: RealtimeEvents,
    signal?: AbortSignal,
  ): Promise<RealtimeSession>;
}

// ---------------------------------------------------------------------------------------------

/** Every adapter, by catalog provider id; built once per process by `createProviders`. */
export interface Providers {
  stt: Map<string, SttProvider>;
  llm: Map<string, LlmProvider>;
  tts: Map<string, TtsProvider>;
  realtime: Map<string, RealtimeProvider>;
}
