/**
 * ElevenLabs text-to-speech over the stream-input WebSocket
 * (`/v1/text-to-speech/{voice_id}/stream-input`), one socket per TTS session (one per reply).
 *
 * We ask for `output_format=ulaw_8000`, which is already what the call's media stream carries:
 * the audio is passed through untouched, only re-cut into whole 160-byte (20 ms) frames.
 */
import WebSocket from 'ws';
import { defaultCatalog, findProvider } from '../../../engine/catalog.js';
import type { TtsConfig } from '../../../engine/schema.js';
import {
  ProviderError,
  type ProviderErrorCode,
  type ProviderSettings,
  type TtsEvents,
  type TtsProvider,
  type TtsSession,
} from '../types.js';
import { DEFAULT_CONNECT_MS, DEFAULT_FIRST_AUDIO_MS, httpError, requireKeyAndVoice, TtsSessionBase, type TtsVendor } from './common.js';

export { FRAME_BYTES } from './common.js';

const PROVIDER = 'elevenlabs';
const VENDOR: TtsVendor = { provider: PROVIDER, name: 'ElevenLabs', keyEnv: 'ELEVENLABS_API_KEY', voiceHint: 'ElevenLabs has no default voice' };
/**
 * Seconds the vendor keeps a quiet socket open (its default is 20): a reply may pause for a
 * tool call; our own cancel/end closes the socket long before.
 */
const INACTIVITY_TIMEOUT_S = 60;
/**
 * Characters ElevenLabs buffers before generating (its default is [120, 160, 250, 290]): smaller
 * first chunks for a quicker first word on the phone; sentence-end flushes do the rest.
 */
const CHUNK_LENGTH_SCHEDULE = [50, 120, 160, 250];
/** Text without whitespace longer than this (CJK) is sent without waiting for a word end. */
const MAX_WORD_CHARS = 100;

export interface ElevenLabsTtsOptions {
  /** Overrides for tests; the defaults suit production. */
  inactivityTimeoutSeconds?: number;
  chunkLengthSchedule?: number[];
}

export function createElevenLabsTts(
  settings: ProviderSettings,
  options: ElevenLabsTtsOptions = {},
): TtsProvider {
  const defaultModel = findProvider(defaultCatalog, 'tts', PROVIDER)?.default_model ?? 'eleven_flash_v2_5';
  return {
    id: PROVIDER,
    async open(config, events, signal) {
      const apiKey = requireKeyAndVoice(VENDOR, settings.elevenlabs.apiKey, config.voice_id);
      if (signal?.aborted) throw aborted();
      const url = streamInputUrl(settings.elevenlabs.baseUrl, config, config.model ?? defaultModel, options);
      const session = new ElevenLabsSession(events, {
        url,
        apiKey,
        connectMs: settings.timeouts?.connectMs ?? DEFAULT_CONNECT_MS,
        firstAudioMs: settings.timeouts?.firstTokenMs ?? DEFAULT_FIRST_AUDIO_MS,
        init: initMessage(config, options),
      });
      await session.connect(signal);
      return session;
    },
  };
}

/** The socket address, with every setting that the vendor takes as a query parameter. */
export function streamInputUrl(
  baseUrl: string,
  config: TtsConfig,
  model: string,
  options: ElevenLabsTtsOptions = {},
): string {
  const url = new URL(baseUrl);
  url.protocol = url.protocol === 'http:' ? 'ws:' : url.protocol === 'https:' ? 'wss:' : url.protocol;
  const base = url.pathname.replace(/\/+$/, '');
  url.pathname = `${base}/v1/text-to-speech/${encodeURIComponent(config.voice_id ?? '')}/stream-input`;
  const q = url.searchParams;
  q.set('model_id', model);
  q.set('output_format', 'ulaw_8000');
  q.set('inactivity_timeout', String(options.inactivityTimeoutSeconds ?? INACTIVITY_TIMEOUT_S));
  if (config.language) q.set('language_code', config.language);
  if (config.apply_text_normalization) q.set('apply_text_normalization', config.apply_text_normalization);
  if (config.apply_language_text_normalization !== undefined) {
    q.set('apply_language_text_normalization', String(config.apply_language_text_normalization));
  }
  return url.toString();
}

/** The first message: a single space, the voice settings and the generation schedule. */
export function initMessage(config: TtsConfig, options: ElevenLabsTtsOptions = {}): Record<string, unknown> {
  const voiceSettings: Record<string, unknown> = {};
  if (config.stability !== undefined) voiceSettings.stability = config.stability;
  if (config.similarity_boost !== undefined) voiceSettings.similarity_boost = config.similarity_boost;
  if (config.style !== undefined) voiceSettings.style = config.style;
  if (config.use_speaker_boost !== undefined) voiceSettings.use_speaker_boost = config.use_speaker_boost;
  if (config.speed !== undefined) voiceSettings.speed = config.speed;
  return {
    text: ' ',
    ...(Object.keys(voiceSettings).length > 0 ? { voice_settings: voiceSettings } : {}),
    generation_config: { chunk_length_schedule: options.chunkLengthSchedule ?? CHUNK_LENGTH_SCHEDULE },
  };
}

interface SessionOptions {
  url: string;
  apiKey: string;
  connectMs: number;
  firstAudioMs: number;
  init: Record<string, unknown>;
}

class ElevenLabsSession extends TtsSessionBase<'connecting'> implements TtsSession {
  private ws: WebSocket | undefined;
  private connectTimer: NodeJS.Timeout | undefined;
  /** Armed while we wait for the vendor (after a flush or the end); any message re-arms or clears it. */
  private audioTimer: NodeJS.Timeout | undefined;
  /** Text not yet sent: we send whole words, each message ending with whitespace. */
  private pendingText = '';
  /** Spoken text was sent since the vendor last answered (so an answer is due after a flush). */
  private awaitingAudio = false;

  constructor(
    events: TtsEvents,
    private readonly options: SessionOptions,
  ) {
    super(events, 'connecting');
  }

  connect(signal: AbortSignal | undefined): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      let settled = false;
      const settle = (err?: ProviderError) => {
        if (settled) return;
        settled = true;
        clearTimeout(this.connectTimer);
        this.connectTimer = undefined;
        signal?.removeEventListener('abort', abortConnect);
        if (err) {
          this.state = 'failed';
          this.closeSocket();
          reject(err);
        } else {
          resolve();
        }
      };
      const abortConnect = () => settle(aborted());
      signal?.addEventListener('abort', abortConnect, { once: true });

      const ws = new WebSocket(this.options.url, {
        headers: { 'xi-api-key': this.options.apiKey },
        perMessageDeflate: false,
      });
      this.ws = ws;
      this.connectTimer = setTimeout(
        () => settle(new ProviderError('PROVIDER_TIMEOUT', PROVIDER, `no connection within ${this.options.connectMs} ms`)),
        this.options.connectMs,
      );

      ws.on('unexpected-response', (_req, res) => {
        const status = res.statusCode ?? 0;
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          if (body.length < 4096) body += chunk;
        });
        res.on('error', () => {});
        res.on('end', () => settle(httpError(PROVIDER, status, httpDetail(body))));
        res.on('close', () => settle(httpError(PROVIDER, status, httpDetail(body))));
      });
      ws.on('error', (err) => {
        if (this.state === 'connecting') {
          settle(new ProviderError('PROVIDER_DISCONNECTED', PROVIDER, `connection failed: ${err.message}`, undefined, { cause: err }));
        }
        // After open an error is always followed by 'close', which decides.
      });
      ws.on('close', (code, reason) => {
        if (this.state === 'connecting') {
          settle(new ProviderError('PROVIDER_DISCONNECTED', PROVIDER, `connection closed during the handshake (${code})`));
          return;
        }
        this.onClose(code, reason.toString());
      });
      ws.on('message', (data, isBinary) => this.onMessage(data, isBinary));
      ws.once('open', () => {
        if (settled) return;
        this.state = 'open';
        this.send(this.options.init);
        if (signal) this.bindSignal(signal);
        settle();
      });
    });
  }

  sendText(text: string): void {
    if (this.state !== 'open' || text.length === 0) return;
    this.pendingText += text;
    // Send up to the last whitespace: a word is never split across two messages.
    const cut = lastWhitespace(this.pendingText);
    if (cut >= 0) {
      this.sendChunk(this.pendingText.slice(0, cut + 1), false);
      this.pendingText = this.pendingText.slice(cut + 1);
    } else if (this.pendingText.length > MAX_WORD_CHARS) {
      this.sendChunk(this.pendingText, false);
      this.pendingText = '';
    }
  }

  flush(): void {
    if (this.state !== 'open') return;
    this.sendChunk(`${this.pendingText} `, true);
    this.pendingText = '';
    if (this.awaitingAudio) this.armAudioTimer();
  }

  end(): void {
    if (this.state !== 'open') return;
    if (this.pendingText.length > 0) this.sendChunk(`${this.pendingText} `, false);
    this.pendingText = '';
    // The empty text closes the input; the vendor then generates the rest and says isFinal.
    this.send({ text: '' });
    this.state = 'ending';
    this.armAudioTimer();
  }

  private sendChunk(text: string, flush: boolean): void {
    if (/\S/.test(text)) this.awaitingAudio = true;
    this.send(flush ? { text, flush: true } : { text });
  }

  private send(message: Record<string, unknown>): void {
    const ws = this.ws;
    if (!ws || ws.readyState !== WebSocket.OPEN) return;
    ws.send(JSON.stringify(message));
  }

  private onMessage(data: WebSocket.RawData, isBinary: boolean): void {
    if (this.state !== 'open' && this.state !== 'ending') return;
    if (isBinary) {
      this.fail(new ProviderError('PROVIDER_PROTOCOL', PROVIDER, 'unexpected binary message'));
      return;
    }
    let message: Record<string, unknown>;
    try {
      const parsed: unknown = JSON.parse(rawToString(data));
      if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new Error('not an object');
      message = parsed as Record<string, unknown>;
    } catch {
      this.fail(new ProviderError('PROVIDER_PROTOCOL', PROVIDER, 'unreadable message (not a JSON object)'));
      return;
    }
    const serverError = errorFromMessage(message);
    if (serverError) {
      this.fail(serverError);
      return;
    }
    this.clearAudioTimer();
    this.awaitingAudio = false;
    const audio = message.audio;
    if (typeof audio === 'string' && audio.length > 0) {
      this.emitAudio(Buffer.from(audio, 'base64'));
    } else if (audio !== undefined && audio !== null && typeof audio !== 'string') {
      this.fail(new ProviderError('PROVIDER_PROTOCOL', PROVIDER, '`audio` is not a base64 string'));
      return;
    }
    if (this.state === 'ending') {
      if (message.isFinal === true) this.finish();
      else this.armAudioTimer();
    }
  }

  private onClose(code: number, reason: string): void {
    if (this.state !== 'open' && this.state !== 'ending') return;
    if (this.state === 'ending' && code === 1000) {
      this.finish();
      return;
    }
    this.fail(closeError(code, reason, this.state === 'ending'));
  }

  private armAudioTimer(): void {
    this.clearAudioTimer();
    this.audioTimer = setTimeout(() => {
      this.audioTimer = undefined;
      this.fail(new ProviderError('PROVIDER_TIMEOUT', PROVIDER, `no audio within ${this.options.firstAudioMs} ms`));
    }, this.options.firstAudioMs);
  }

  private clearAudioTimer(): void {
    if (this.audioTimer) clearTimeout(this.audioTimer);
    this.audioTimer = undefined;
  }

  protected override cleanup(): void {
    this.clearAudioTimer();
    clearTimeout(this.connectTimer);
    this.connectTimer = undefined;
    super.cleanup();
    this.closeSocket();
  }

  /** Close at once: a close frame if the socket is open (the vendor stops generating), then gone. */
  private closeSocket(): void {
    const ws = this.ws;
    if (!ws) return;
    this.ws = undefined;
    ws.removeAllListeners();
    ws.on('error', () => {}); // a late socket error must not become an uncaught exception
    if (ws.readyState === WebSocket.OPEN) ws.close(1000);
    ws.terminate();
  }
}

function aborted(): ProviderError {
  return new ProviderError('PROVIDER_ABORTED', PROVIDER, 'cancelled before the connection was open');
}

function lastWhitespace(text: string): number {
  for (let i = text.length - 1; i >= 0; i--) {
    if (/\s/.test(text[i]!)) return i;
  }
  return -1;
}

function rawToString(data: WebSocket.RawData): string {
  if (Array.isArray(data)) return Buffer.concat(data).toString('utf8');
  if (data instanceof ArrayBuffer) return Buffer.from(data).toString('utf8');
  return data.toString('utf8');
}

function looksLikeAuth(text: string): boolean {
  return /invalid_api_key|api[ _-]?key|unauthori[sz]ed|authenticat|forbidden|permission/i.test(text);
}

/** What the vendor said when the upgrade was answered with an HTTP status instead of 101. */
function httpDetail(body: string): string {
  let detail = body.trim();
  try {
    const parsed = JSON.parse(body) as { detail?: { message?: string } | string; message?: string };
    const d = parsed.detail;
    detail = (typeof d === 'string' ? d : d?.message) ?? parsed.message ?? detail;
  } catch {
    // not JSON: keep the text
  }
  return detail.slice(0, 300);
}

/** An error the vendor reported in a message (`{message, error, code}`), or undefined. */
function errorFromMessage(message: Record<string, unknown>): ProviderError | undefined {
  const hasAudioFields = 'audio' in message || 'isFinal' in message;
  const error = message.error;
  const text = typeof message.message === 'string' ? message.message : undefined;
  if (error === undefined && (hasAudioFields || text === undefined)) return undefined;
  if (error === null && hasAudioFields) return undefined;
  const errorText = typeof error === 'string' ? error : error === undefined || error === null ? '' : JSON.stringify(error);
  const summary = [errorText, text].filter(Boolean).join(': ') || 'error';
  const code: ProviderErrorCode = looksLikeAuth(summary) ? 'PROVIDER_AUTH' : 'PROVIDER_HTTP_ERROR';
  return new ProviderError(code, PROVIDER, `server error: ${summary.slice(0, 300)}`);
}

/** The socket closed before the reply was complete. */
function closeError(code: number, reason: string, ending: boolean): ProviderError {
  const what = `connection closed (${code}${reason ? ` ${reason.slice(0, 200)}` : ''})`;
  // 1008 policy violation, 1011 server error and application codes carry the vendor's refusal.
  if (code === 1008 || code === 1011 || code >= 4000) {
    return new ProviderError(looksLikeAuth(reason) ? 'PROVIDER_AUTH' : 'PROVIDER_HTTP_ERROR', PROVIDER, what);
  }
  return new ProviderError(
    'PROVIDER_DISCONNECTED',
    PROVIDER,
    ending ? `${what} before the final audio` : `${what} mid-stream`,
  );
}
