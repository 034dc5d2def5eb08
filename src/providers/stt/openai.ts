/**
 * OpenAI live speech-to-text: a Realtime transcription session over WebSocket (GA protocol,
 * `wss://api.openai.com/v1/realtime?intent=transcription`), `gpt-4o-transcribe` or
 * `gpt-4o-mini-transcribe`.
 *
 * μ-law 8 kHz goes in untouched (`audio/pcmu`) as `input_audio_buffer.append`, gathered into
 * chunks of about `audioChunkMs`. OpenAI's server VAD cuts the caller's turns (its
 * `silence_duration_ms` from `stt_config.endpointing`); with `endpointing: 0` it is off
 * (`turn_detection: null`) and the audio is committed at each `finalize()`, the end of speech our
 * own detector heard. Transcription deltas are interim results; each item's `completed`
 * transcript is a final result followed by the end of speech, delivered in the order the items
 * were committed (OpenAI does not promise to complete them in order).
 */
import type { ClientRequest, IncomingMessage } from 'node:http';
import WebSocket from 'ws';
import { defaultCatalog, findProvider } from '../../../engine/catalog.js';
import type { SttConfig } from '../../../engine/schema.js';
import { declareProvider, vendorEndpoint } from '../declare.js';
import { OPENAI } from '../llm/openai.js';
import {
  ProviderError,
  type ProviderErrorCode,
  type ProviderSettings,
  type SttEvents,
  type SttProvider,
  type SttSession,
} from '../types.js';
import { readSmallBody } from '../refused-upgrade.js';

const PROVIDER = 'openai';
/** The provider named in errors and `ended_reason` (`pipeline-error-openai-stt`): not the chat model's `openai`. */
export const OPENAI_STT_ERROR_ID = 'openai-stt';

/** The languages gpt-4o-transcribe is documented for (ISO-639-1), as Whisper's list. */
const OPENAI_TRANSCRIBE_LANGUAGES = [
  'af', 'ar', 'hy', 'az', 'be', 'bs', 'bg', 'ca', 'zh', 'hr', 'cs', 'da', 'nl', 'en', 'et', 'fi',
  'fr', 'gl', 'de', 'el', 'he', 'hi', 'hu', 'is', 'id', 'it', 'ja', 'kn', 'kk', 'ko', 'lv', 'lt',
  'mk', 'ms', 'mr', 'mi', 'ne', 'no', 'fa', 'pl', 'pt', 'ro', 'ru', 'sr', 'sk', 'sl', 'es', 'sw',
  'sv', 'tl', 'ta', 'th', 'tr', 'uk', 'ur', 'vi', 'cy',
];

export const provider = declareProvider({
  catalog: {
    id: PROVIDER,
    kind: 'stt',
    description: 'OpenAI Realtime transcription over WebSocket (audio/pcmu: μ-law 8 kHz in).',
    models: ['gpt-4o-transcribe', 'gpt-4o-mini-transcribe'],
    default_model: 'gpt-4o-transcribe',
    languages: { 'gpt-4o-transcribe': OPENAI_TRANSCRIBE_LANGUAGES, 'gpt-4o-mini-transcribe': OPENAI_TRANSCRIBE_LANGUAGES },
    default_language: 'en',
  },
  account: OPENAI,
  create: (settings) => createOpenAiStt(settings),
});

const BYTES_PER_MS = 8;
/** OpenAI refuses to commit less than 100 ms of audio. */
const MIN_COMMIT_BYTES = 100 * BYTES_PER_MS;

export interface OpenAiSttOptions {
  /** Audio is sent once this many ms of it wait, or this long after the first came (default 100; 0: each frame). */
  audioChunkMs?: number;
  /** How long a committed turn may wait for its transcript (default 15 s): a silent vendor is a timeout. */
  transcriptTimeoutMs?: number;
  /** How long `close()` waits for the server's close frame before cutting (default 2 s). */
  closeTimeoutMs?: number;
}

const DEFAULTS = { audioChunkMs: 100, transcriptTimeoutMs: 15_000, closeTimeoutMs: 2_000, connectMs: 10_000 };

export function createOpenAiStt(settings: ProviderSettings, options: OpenAiSttOptions = {}): SttProvider {
  return {
    id: PROVIDER,
    async connect(config, events, signal) {
      const { baseUrl, apiKey } = vendorEndpoint(settings, OPENAI);
      if (!apiKey) throw sttError('PROVIDER_AUTH', 'no OpenAI API key configured (OPENAI_API_KEY)');
      if (signal?.aborted) throw sttError('PROVIDER_ABORTED', 'the stream was cancelled');
      const session = new TranscriptionSession(transcriptionUrl(baseUrl), apiKey, config, events, {
        audioChunkMs: options.audioChunkMs ?? DEFAULTS.audioChunkMs,
        transcriptTimeoutMs: options.transcriptTimeoutMs ?? DEFAULTS.transcriptTimeoutMs,
        closeTimeoutMs: options.closeTimeoutMs ?? DEFAULTS.closeTimeoutMs,
        connectMs: settings.timeouts?.connectMs ?? DEFAULTS.connectMs,
      });
      await session.start(signal);
      return session;
    },
  };
}

/** `https://api.openai.com` (or `.../v1`) → `wss://api.openai.com/v1/realtime?intent=transcription`. */
export function transcriptionUrl(baseUrl: string): string {
  const url = new URL(baseUrl);
  if (url.protocol === 'http:') url.protocol = 'ws:';
  else if (url.protocol === 'https:') url.protocol = 'wss:';
  const path = url.pathname.replace(/\/+$/, '');
  url.pathname = `${path.endsWith('/v1') ? path : `${path}/v1`}/realtime`;
  url.search = '';
  url.searchParams.set('intent', 'transcription');
  return url.toString();
}

/** The `session` of the GA `session.update` for `stt_config`. */
export function transcriptionSession(config: SttConfig): Record<string, unknown> {
  const model = config.model ?? findProvider(defaultCatalog, 'stt', PROVIDER)?.default_model ?? 'gpt-4o-transcribe';
  const transcription: Record<string, unknown> = { model };
  if (config.language && config.language !== 'multi') transcription.language = config.language.split('-')[0]!.toLowerCase();
  if (config.keyterms?.length) transcription.prompt = config.keyterms.join(', ');
  const turnDetection =
    config.endpointing === 0
      ? null
      : { type: 'server_vad', ...(config.endpointing !== undefined ? { silence_duration_ms: config.endpointing } : {}) };
  return {
    type: 'transcription',
    audio: { input: { format: { type: 'audio/pcmu' }, transcription, turn_detection: turnDetection } },
  };
}

function sttError(code: ProviderErrorCode, message: string, status?: number, cause?: unknown): ProviderError {
  return new ProviderError(code, OPENAI_STT_ERROR_ID, message, status, cause === undefined ? undefined : { cause });
}

interface ServerErrorBody {
  type?: string;
  code?: string | null;
  message?: string;
}

/** Server `error` codes about a request of ours that harms nothing: an empty or too short commit. */
const BENIGN_ERROR_CODES = new Set(['input_audio_buffer_commit_empty']);

/** A server `error` event → our code, with an HTTP-like status. */
function serverError(body: ServerErrorBody | undefined): ProviderError {
  const type = body?.type ?? 'unknown_error';
  const code = body?.code ?? null;
  const message = `OpenAI transcription ${type}${code ? ` (${code})` : ''}: ${body?.message ?? 'no message'}`;
  if (type === 'authentication_error' || code === 'invalid_api_key') return sttError('PROVIDER_AUTH', message, 401);
  const status =
    type === 'invalid_request_error' ? 400
    : type === 'rate_limit_error' || code === 'rate_limit_exceeded' ? 429
    : 500;
  return sttError('PROVIDER_HTTP_ERROR', message, status);
}

interface SessionOptions {
  audioChunkMs: number;
  transcriptTimeoutMs: number;
  closeTimeoutMs: number;
  connectMs: number;
}

type ServerEvent = { type: string; [key: string]: unknown };

class TranscriptionSession implements SttSession {
  private state: 'connecting' | 'open' | 'closing' | 'closed' = 'connecting';
  private ws: WebSocket | undefined;
  private readonly manualCommit: boolean;
  /** Audio waiting to go out as one append. */
  private held: Buffer[] = [];
  private heldBytes = 0;
  private heldTimer: NodeJS.Timeout | undefined;
  private readonly chunkBytes: number;
  /** Bytes appended since the last commit (ours or the server VAD's). */
  private uncommitted = 0;
  /** Items committed, in order, whose transcript has not been delivered yet. */
  private readonly order: string[] = [];
  /** Completed transcripts waiting for an earlier item. */
  private readonly completed = new Map<string, string>();
  /** Interim text per item, as the deltas build it. */
  private readonly partial = new Map<string, string>();
  /** Our commits not yet acknowledged by `input_audio_buffer.committed`. */
  private commitsOut = 0;
  /** Runs while a transcript is owed; re-armed at each one that comes. */
  private owedTimer: NodeJS.Timeout | undefined;
  private closeTimer: NodeJS.Timeout | undefined;
  private signal: AbortSignal | undefined;
  private eventSeq = 0;
  private readonly closed: Promise<void>;
  private resolveClosed!: () => void;

  constructor(
    private readonly url: string,
    private readonly apiKey: string,
    private readonly config: SttConfig,
    private readonly events: SttEvents,
    private readonly opts: SessionOptions,
  ) {
    this.manualCommit = config.endpointing === 0;
    this.chunkBytes = Math.max(0, Math.round(opts.audioChunkMs * BYTES_PER_MS));
    this.closed = new Promise((resolve) => (this.resolveClosed = resolve));
  }

  /** Opens the socket and configures the session; resolves at `session.updated`. */
  start(signal?: AbortSignal): Promise<void> {
    this.signal = signal;
    return new Promise<void>((resolve, reject) => {
      const ws = new WebSocket(this.url, { headers: { Authorization: `Bearer ${this.apiKey}` }, perMessageDeflate: false });
      this.ws = ws;
      let settled = false;
      const fail = (err: ProviderError) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        this.state = 'closed';
        ws.removeAllListeners();
        ws.on('error', () => {}); // terminate() during the handshake reports an error: ignore it
        ws.terminate();
        this.ws = undefined;
        this.resolveClosed();
        reject(err);
      };
      const timer = setTimeout(() => fail(sttError('PROVIDER_TIMEOUT', `no session within ${this.opts.connectMs} ms`)), this.opts.connectMs);
      const onAbort = () => fail(sttError('PROVIDER_ABORTED', 'the stream was cancelled'));
      signal?.addEventListener('abort', onAbort, { once: true });

      let refused = false; // the upgrade was answered with an HTTP error: its body says why
      ws.on('unexpected-response', (req: ClientRequest, res: IncomingMessage) => {
        refused = true;
        const status = res.statusCode ?? 0;
        readSmallBody(res).then((body) => {
          const text = `OpenAI refused the transcription session (${status}): ${vendorMessage(body)}`.trim();
          fail(sttError(status === 401 || status === 403 ? 'PROVIDER_AUTH' : 'PROVIDER_HTTP_ERROR', text, status));
          req.destroy();
        });
      });
      ws.on('error', (err) => {
        if (!settled && !refused) fail(sttError('PROVIDER_DISCONNECTED', `could not connect: ${err.message}`, undefined, err));
      });
      ws.on('open', () => this.send({ type: 'session.update', session: transcriptionSession(this.config) }));
      ws.on('close', (code, reason) => {
        if (refused) return;
        if (!settled) fail(sttError('PROVIDER_DISCONNECTED', `the connection closed before the session was ready (${code}) ${reason.toString()}`.trim()));
        else this.onSocketClose(code, reason.toString());
      });
      ws.on('message', (data, isBinary) => {
        const event = parseEvent(data, isBinary);
        if (!settled) {
          if (!event) return fail(sttError('PROVIDER_PROTOCOL', `unreadable message from OpenAI: ${String(data).slice(0, 200)}`));
          if (event.type === 'error') return fail(serverError(event.error as ServerErrorBody | undefined));
          if (event.type !== 'session.updated') return; // session.created comes first
          settled = true;
          clearTimeout(timer);
          signal?.removeEventListener('abort', onAbort);
          this.state = 'open';
          signal?.addEventListener('abort', this.onAbort, { once: true });
          resolve();
          return;
        }
        if (!event) return this.fail('PROVIDER_PROTOCOL', `unreadable message from OpenAI: ${String(data).slice(0, 200)}`);
        this.onEvent(event);
      });
    });
  }

  sendAudio(mulaw: Buffer): void {
    if (this.state !== 'open' || mulaw.length === 0) return;
    // copied: the caller may reuse its buffer
    this.held.push(Buffer.from(mulaw));
    this.heldBytes += mulaw.length;
    if (this.heldBytes >= this.chunkBytes) this.sendHeld();
    else this.heldTimer ??= setTimeout(() => this.sendHeld(), Math.max(1, this.opts.audioChunkMs));
  }

  finalize(): void {
    if (this.state !== 'open' || !this.manualCommit) return;
    this.sendHeld();
    if (this.uncommitted < MIN_COMMIT_BYTES) return;
    this.uncommitted = 0;
    this.commitsOut += 1;
    this.send({ type: 'input_audio_buffer.commit' });
    this.armOwed();
  }

  close(): Promise<void> {
    if (this.state === 'open' && this.ws) {
      this.state = 'closing';
      this.sendHeld();
      this.clearOwed();
      this.ws.close(1000);
      this.closeTimer = setTimeout(() => this.shutdown(), this.opts.closeTimeoutMs);
    } else if (this.state !== 'closing') {
      this.shutdown();
    }
    return this.closed;
  }

  // ------------------------------------------------------------------------------------------

  private send(event: Record<string, unknown>): void {
    if (this.ws?.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify({ event_id: `evt_sb_${++this.eventSeq}`, ...event }));
  }

  private sendHeld(): void {
    if (this.heldTimer) clearTimeout(this.heldTimer);
    this.heldTimer = undefined;
    if (this.heldBytes === 0) return;
    const audio = this.held.length === 1 ? this.held[0]! : Buffer.concat(this.held, this.heldBytes);
    this.uncommitted += this.heldBytes;
    this.held = [];
    this.heldBytes = 0;
    this.send({ type: 'input_audio_buffer.append', audio: audio.toString('base64') });
  }

  private onEvent(event: ServerEvent): void {
    if (this.state !== 'open') return;
    switch (event.type) {
      case 'input_audio_buffer.speech_started':
        this.events.onSpeechStarted?.();
        return;
      case 'input_audio_buffer.committed': {
        if (this.commitsOut > 0) this.commitsOut -= 1;
        else this.uncommitted = 0; // the server VAD committed what it had
        const itemId = typeof event.item_id === 'string' ? event.item_id : null;
        if (itemId && !this.order.includes(itemId) && !this.completed.has(itemId)) this.order.push(itemId);
        this.armOwed();
        return;
      }
      case 'conversation.item.input_audio_transcription.delta': {
        const itemId = String(event.item_id ?? '');
        const text = (this.partial.get(itemId) ?? '') + (typeof event.delta === 'string' ? event.delta : '');
        this.partial.set(itemId, text);
        if (text.trim() !== '') this.events.onTranscript({ text: text.trim(), isFinal: false, speechFinal: false });
        return;
      }
      case 'conversation.item.input_audio_transcription.completed': {
        const itemId = String(event.item_id ?? '');
        this.partial.delete(itemId);
        const transcript = typeof event.transcript === 'string' ? event.transcript.trim() : '';
        if (!this.order.includes(itemId)) this.deliver(transcript); // never announced: as it comes
        else {
          this.completed.set(itemId, transcript);
          this.deliverInOrder();
        }
        this.armOwed();
        return;
      }
      case 'conversation.item.input_audio_transcription.failed': {
        const err = event.error as ServerErrorBody | undefined;
        this.shutdown(sttError('PROVIDER_HTTP_ERROR', `OpenAI could not transcribe the caller's turn: ${err?.message ?? err?.code ?? 'no reason given'}`, 500));
        return;
      }
      case 'error': {
        const body = event.error as ServerErrorBody | undefined;
        if (body?.code && BENIGN_ERROR_CODES.has(body.code)) {
          if (this.commitsOut > 0) this.commitsOut -= 1;
          this.armOwed();
          return;
        }
        this.shutdown(serverError(body));
        return;
      }
      default:
        return; // session.*, conversation.item.*, speech_stopped, rate_limits.updated: nothing to say
    }
  }

  private deliverInOrder(): void {
    while (this.order.length > 0 && this.completed.has(this.order[0]!)) {
      const itemId = this.order.shift()!;
      const text = this.completed.get(itemId)!;
      this.completed.delete(itemId);
      this.deliver(text);
      if (this.state !== 'open') return;
    }
  }

  private deliver(text: string): void {
    this.events.onTranscript({ text, isFinal: true, speechFinal: true });
    if (this.state === 'open') this.events.onUtteranceEnd?.();
  }

  /** A transcript is owed while a commit is out or an item is not delivered: it must come in time. */
  private armOwed(): void {
    this.clearOwed();
    if (this.state !== 'open' || (this.commitsOut === 0 && this.order.length === 0)) return;
    this.owedTimer = setTimeout(() => {
      this.owedTimer = undefined;
      this.fail('PROVIDER_TIMEOUT', `no transcript within ${this.opts.transcriptTimeoutMs} ms of the caller's turn`);
    }, this.opts.transcriptTimeoutMs);
  }

  private clearOwed(): void {
    if (this.owedTimer) clearTimeout(this.owedTimer);
    this.owedTimer = undefined;
  }

  private onSocketClose(code: number, reason: string): void {
    if (this.state === 'closing' || this.state === 'closed') return this.shutdown();
    this.shutdown(sttError('PROVIDER_DISCONNECTED', `OpenAI closed the transcription session (${code})${reason ? `: ${reason}` : ''}`));
  }

  private readonly onAbort = (): void => this.shutdown();

  private fail(code: ProviderErrorCode, message: string): void {
    this.shutdown(sttError(code, message));
  }

  /** Releases everything now; idempotent. Reports `err` (if any), then `onClose`. */
  private shutdown(err?: ProviderError): void {
    if (this.state === 'closed') return;
    this.state = 'closed';
    this.clearOwed();
    if (this.heldTimer) clearTimeout(this.heldTimer);
    this.heldTimer = undefined;
    if (this.closeTimer) clearTimeout(this.closeTimer);
    this.closeTimer = undefined;
    this.held = [];
    this.heldBytes = 0;
    this.signal?.removeEventListener('abort', this.onAbort);
    const ws = this.ws;
    this.ws = undefined;
    if (ws) {
      ws.removeAllListeners();
      ws.on('error', () => {});
      ws.terminate();
    }
    if (err) this.events.onError(err);
    this.events.onClose?.();
    this.resolveClosed();
  }
}

function parseEvent(data: WebSocket.RawData, isBinary: boolean): ServerEvent | null {
  if (isBinary) return null;
  try {
    const parsed: unknown = JSON.parse(data.toString());
    if (typeof parsed === 'object' && parsed !== null && typeof (parsed as { type?: unknown }).type === 'string') return parsed as ServerEvent;
  } catch {
    // not JSON
  }
  return null;
}

/** OpenAI's `{"error":{"message"}}`, or the body's start. */
function vendorMessage(body: string): string {
  try {
    const parsed = JSON.parse(body) as { error?: { message?: unknown } };
    if (typeof parsed.error?.message === 'string') return parsed.error.message;
  } catch {
    // not JSON
  }
  return body.trim().slice(0, 300);
}
