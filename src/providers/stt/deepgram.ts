/**
 * Deepgram live speech-to-text over its WebSocket API (`/v1/listen`).
 *
 * μ-law 8 kHz audio goes in as binary frames, `Results` / `SpeechStarted` / `UtteranceEnd` come
 * back as JSON text frames. The caller's 20 ms frames go out in chunks of about 50 ms
 * (`audioChunkMs`; Deepgram recommends 20 to 250 ms a message): a WebSocket message, so a write to
 * the socket, per frame was the largest cost of a call on this path (docs/benchmarks.md, "Vendor
 * adapters"). No audio waits longer than that, and what waits goes before a `Finalize` or
 * `CloseStream`. Control messages: `KeepAlive` while no audio flows (Deepgram closes an idle
 * stream after 10 s), `Finalize` at the end of the caller's turn, `CloseStream` to end.
 * An unexpected close mid-call is survived once: a new stream is opened and the audio sent
 * meanwhile (bounded) is replayed; a second drop is reported as `PROVIDER_DISCONNECTED`.
 */
import WebSocket from 'ws';
import { defaultCatalog } from '../../../engine/catalog.js';
import type { SttConfig } from '../../../engine/schema.js';
import { declareProvider, vendorEndpoint, type VendorAccount } from '../declare.js';
import {
  ProviderError,
  type ProviderErrorCode,
  type ProviderSettings,
  type SttEvents,
  type SttProvider,
  type SttSession,
  type VendorEndpoint,
} from '../types.js';
import { readSmallBody } from '../refused-upgrade.js';

declare module '../types.js' {
  interface ProviderSettings {
    deepgram?: VendorEndpoint;
  }
}

const PROVIDER = 'deepgram';
/** Deepgram's account: `DEEPGRAM_API_KEY`, `DEEPGRAM_API_BASE`. */
export const DEEPGRAM: VendorAccount = { name: 'deepgram', label: 'Deepgram', baseUrl: 'https://api.deepgram.com' };

const DEEPGRAM_NOVA3_LANGUAGES = [
  'multi', 'en', 'en-US', 'en-AU', 'en-GB', 'en-IN', 'en-NZ', 'es', 'es-419', 'fr', 'fr-CA', 'de',
  'de-CH', 'hi', 'it', 'ja', 'nl', 'nl-BE', 'pt', 'pt-BR', 'pt-PT', 'ru', 'sv', 'sv-SE', 'da',
  'da-DK', 'no', 'fi', 'pl', 'tr', 'uk', 'cs', 'ro', 'ko', 'ko-KR', 'id', 'vi', 'bg', 'ca', 'el',
  'et', 'hu', 'lt', 'lv', 'ms', 'sk',
];

const DEEPGRAM_NOVA2_LANGUAGES = [
  'multi', 'en', 'en-US', 'en-AU', 'en-GB', 'en-IN', 'en-NZ', 'es', 'es-419', 'fr', 'fr-CA', 'de',
  'de-CH', 'hi', 'hi-Latn', 'it', 'ja', 'nl', 'nl-BE', 'pt', 'pt-BR', 'pt-PT', 'ru', 'sv', 'sv-SE',
  'da', 'da-DK', 'no', 'fi', 'pl', 'tr', 'uk', 'cs', 'ro', 'ko', 'ko-KR', 'id', 'vi', 'bg', 'ca',
  'el', 'et', 'hu', 'lt', 'lv', 'ms', 'sk', 'th', 'th-TH', 'zh', 'zh-CN', 'zh-Hans', 'zh-TW',
  'zh-Hant', 'zh-HK',
];

export const provider = declareProvider({
  catalog: {
    id: PROVIDER,
    kind: 'stt',
    description: 'Deepgram live streaming speech-to-text (μ-law 8 kHz in).',
    models: ['nova-3', 'nova-2'],
    default_model: 'nova-3',
    languages: { 'nova-3': DEEPGRAM_NOVA3_LANGUAGES, 'nova-2': DEEPGRAM_NOVA2_LANGUAGES },
    default_language: 'en',
  },
  account: DEEPGRAM,
  create: (settings) => createDeepgramStt(settings),
});
const BYTES_PER_SECOND = 8000; // μ-law 8 kHz mono: one byte per sample

export interface DeepgramSttOptions {
  /** Send `KeepAlive` after this long without audio (Deepgram closes idle streams at 10 s). */
  keepAliveMs?: number;
  /** How long `close()` waits for Deepgram to close after `CloseStream` before cutting. */
  closeTimeoutMs?: number;
  /** Audio kept while reconnecting (oldest dropped first); default 5 s of audio. */
  maxBufferedBytes?: number;
  /** Reconnect once after an unexpected close (default true). */
  reconnect?: boolean;
  /**
   * Audio is sent once this many ms of it are waiting (μ-law: 8 bytes a ms), or this long after
   * the first of it arrived (default 50; 0 sends each frame as it comes).
   */
  audioChunkMs?: number;
}

const DEFAULTS = {
  keepAliveMs: 5_000,
  closeTimeoutMs: 3_000,
  maxBufferedBytes: 5 * BYTES_PER_SECOND,
  connectMs: 10_000,
  audioChunkMs: 50,
};

/** Close codes after which a new stream would fail the same way (bad audio, bad request). */
const FATAL_CLOSE_CODES = new Set([1002, 1003, 1007, 1008]);

export function createDeepgramStt(
  settings: ProviderSettings,
  options: DeepgramSttOptions = {},
): SttProvider {
  return {
    id: PROVIDER,
    async connect(config, events, signal) {
      const { baseUrl, apiKey } = vendorEndpoint(settings, DEEPGRAM);
      if (!apiKey) {
        throw new ProviderError('PROVIDER_AUTH', PROVIDER, 'no Deepgram API key configured (DEEPGRAM_API_KEY)');
      }
      const url = deepgramListenUrl(baseUrl, config);
      const session = new DeepgramSession(url, apiKey, events, {
        keepAliveMs: options.keepAliveMs ?? DEFAULTS.keepAliveMs,
        closeTimeoutMs: options.closeTimeoutMs ?? DEFAULTS.closeTimeoutMs,
        maxBufferedBytes: options.maxBufferedBytes ?? DEFAULTS.maxBufferedBytes,
        reconnect: options.reconnect ?? true,
        connectMs: settings.timeouts?.connectMs ?? DEFAULTS.connectMs,
        audioChunkMs: options.audioChunkMs ?? DEFAULTS.audioChunkMs,
      });
      await session.start(signal);
      return session;
    },
  };
}

/** The `/v1/listen` URL (ws/wss) with the query that `stt_config` asks for. */
export function deepgramListenUrl(baseUrl: string, config: SttConfig): string {
  const catalog = defaultCatalog.providers.find((p) => p.kind === 'stt' && p.id === PROVIDER);
  const model = config.model ?? catalog?.default_model ?? 'nova-3';
  const language = config.language ?? catalog?.default_language ?? 'en';

  const q = new URLSearchParams();
  q.set('model', model);
  q.set('language', language);
  q.set('encoding', 'mulaw');
  q.set('sample_rate', '8000');
  q.set('channels', '1');
  // Interim results drive barge-in, and `utterance_end_ms` requires them.
  q.set('interim_results', 'true');
  q.set('vad_events', 'true');
  if (config.smart_format !== undefined) q.set('smart_format', String(config.smart_format));
  if (config.endpointing !== undefined) {
    q.set('endpointing', config.endpointing === 0 ? 'false' : String(config.endpointing));
  }
  if (config.numerals !== undefined) q.set('numerals', String(config.numerals));
  if (config.filler_words !== undefined) q.set('filler_words', String(config.filler_words));
  if (config.utterance_end_ms !== undefined && config.utterance_end_ms > 0) {
    q.set('utterance_end_ms', String(config.utterance_end_ms));
  }
  if (config.no_delay !== undefined) q.set('no_delay', String(config.no_delay));
  // Keyterm prompting exists for Nova-3 only; older models take `keywords`.
  const termParam = model.startsWith('nova-3') ? 'keyterm' : 'keywords';
  for (const term of config.keyterms ?? []) q.append(termParam, term);

  const base = new URL(baseUrl);
  if (base.protocol === 'http:') base.protocol = 'ws:';
  else if (base.protocol === 'https:') base.protocol = 'wss:';
  const path = base.pathname.replace(/\/+$/, '');
  return `${base.protocol}//${base.host}${path}/v1/listen?${q.toString()}`;
}

interface SessionOptions {
  keepAliveMs: number;
  closeTimeoutMs: number;
  maxBufferedBytes: number;
  reconnect: boolean;
  connectMs: number;
  audioChunkMs: number;
}

type State = 'connecting' | 'open' | 'reconnecting' | 'closing' | 'closed';

class DeepgramSession implements SttSession {
  private state: State = 'connecting';
  private ws: WebSocket | undefined;
  private reconnectsLeft: number;
  private keepAliveTimer: NodeJS.Timeout | undefined;
  private closeTimer: NodeJS.Timeout | undefined;
  private lastSentAt = 0;
  /** Audio waiting to go out as one message (`audioChunkMs`), copied in: `chunk[0, chunkFill)`. */
  private chunk: Buffer | undefined;
  private chunkFill = 0;
  private readonly chunkBytes: number;
  /** Sends what is waiting `audioChunkMs` after its first frame came (a stream may pause). */
  private chunkTimer: NodeJS.Timeout | undefined;
  /** `close()` came while reconnecting: the new stream gets the kept audio, then `CloseStream`. */
  private closeOnOpen = false;
  /** Audio sent while reconnecting, replayed on the new stream. */
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  private pendingFinalize = false;
  /** Seconds of audio sent on earlier streams: Deepgram's timestamps restart on a new stream. */
  private timeOffset = 0;
  private streamBytes = 0;
  private lastServerError: string | undefined;
  private signal: AbortSignal | undefined;
  /** Cancels a connection attempt in flight (the first one or a reconnect). */
  private cancelOpen: (() => void) | undefined;
  private closed: Promise<void>;
  private resolveClosed!: () => void;

  constructor(
    private readonly url: string,
    private readonly apiKey: string,
    private readonly events: SttEvents,
    private readonly opts: SessionOptions,
  ) {
    this.reconnectsLeft = opts.reconnect ? 1 : 0;
    this.chunkBytes = Math.max(0, Math.round((opts.audioChunkMs * BYTES_PER_SECOND) / 1000));
    this.closed = new Promise((resolve) => (this.resolveClosed = resolve));
  }

  async start(signal?: AbortSignal): Promise<void> {
    if (signal?.aborted) throw aborted();
    this.signal = signal;
    try {
      await this.open();
    } catch (err) {
      this.state = 'closed';
      this.resolveClosed();
      throw err;
    }
    // A failure right after the upgrade has already gone to onError/onClose.
    if (this.state === 'closed') return;
    signal?.addEventListener('abort', this.onAbort, { once: true });
    if (signal?.aborted) this.shutdown();
  }

  sendAudio(mulaw: Buffer): void {
    if (mulaw.length === 0) return; // an empty binary frame would tell Deepgram to end the stream
    if (this.state === 'open' && this.ws?.readyState === WebSocket.OPEN) {
      if (this.chunkFill + mulaw.length < this.chunkBytes) {
        this.holdAudio(mulaw);
        return;
      }
      if (this.chunkFill === 0) {
        this.transmit(mulaw);
        return;
      }
      this.holdAudio(mulaw);
      this.sendHeldAudio();
    } else if (this.state === 'reconnecting' || this.state === 'open') {
      // The stream is going away (its close event is on its way): keep the audio for the next one,
      // after what was held for a chunk.
      this.keepHeldAudio();
      this.keepForNextStream(mulaw);
    }
  }

  finalize(): void {
    if (this.state === 'open' && this.ws?.readyState === WebSocket.OPEN) {
      this.sendHeldAudio();
      this.sendControl('Finalize');
    } else if (this.state === 'open' || this.state === 'reconnecting') this.pendingFinalize = true;
  }

  close(): Promise<void> {
    if (this.state === 'reconnecting') {
      // the audio kept for the next stream still goes out: the new stream takes it, then closes
      // (a reconnect that fails reports it and ends, as without a close)
      this.closeOnOpen = true;
      return this.closed;
    }
    if (this.state === 'open' && this.ws) {
      this.state = 'closing';
      this.clearKeepAlive();
      this.sendHeldAudio();
      this.sendControl('CloseStream');
      // Deepgram flushes its last results, sends Metadata and closes; we wait, but not forever.
      this.closeTimer = setTimeout(() => this.shutdown(), this.opts.closeTimeoutMs);
    } else if (this.state !== 'closing') {
      this.shutdown();
    }
    return this.closed;
  }

  // ------------------------------------------------------------------------------------------

  /** Opens one stream and makes it current; rejects with a ProviderError (auth, HTTP, timeout, aborted). */
  private open(): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const ws = new WebSocket(this.url, {
        headers: { Authorization: `Token ${this.apiKey}` },
        perMessageDeflate: false,
      });
      let settled = false;
      const fail = (err: ProviderError) => {
        if (settled) return;
        settled = true;
        cleanup();
        ws.removeAllListeners();
        ws.on('error', () => {}); // terminate() during the handshake reports an error: ignore it
        ws.terminate();
        reject(err);
      };
      const timer = setTimeout(
        () => fail(new ProviderError('PROVIDER_TIMEOUT', PROVIDER, `no connection within ${this.opts.connectMs} ms`)),
        this.opts.connectMs,
      );
      const onAbort = () => fail(aborted());
      this.signal?.addEventListener('abort', onAbort, { once: true });
      this.cancelOpen = onAbort;
      const cleanup = () => {
        clearTimeout(timer);
        this.signal?.removeEventListener('abort', onAbort);
        this.cancelOpen = undefined;
      };

      ws.on('unexpected-response', (_req, res) => {
        const status = res.statusCode ?? 0;
        readSmallBody(res).then((body) => {
          const detail = deepgramErrorMessage(body) ?? res.statusMessage ?? '';
          const code: ProviderErrorCode =
            status === 401 || status === 403 ? 'PROVIDER_AUTH' : 'PROVIDER_HTTP_ERROR';
          fail(new ProviderError(code, PROVIDER, `Deepgram refused the stream (${status}): ${detail}`.trim(), status));
        });
      });
      ws.on('error', (err) => {
        fail(new ProviderError('PROVIDER_DISCONNECTED', PROVIDER, `could not connect: ${err.message}`, undefined, { cause: err }));
      });
      ws.on('open', () => {
        if (settled) return;
        settled = true;
        cleanup();
        ws.removeAllListeners();
        this.onStreamOpen(ws);
        resolve();
      });
    });
  }

  private attach(ws: WebSocket): void {
    ws.on('message', (data, isBinary) => {
      if (!isBinary) this.onServerMessage(data.toString());
    });
    ws.on('error', () => {}); // always followed by 'close', handled there
    ws.on('close', (code, reason) => this.onSocketClose(ws, code, reason.toString()));
  }

  private onServerMessage(text: string): void {
    let msg: DeepgramMessage;
    try {
      msg = JSON.parse(text) as DeepgramMessage;
    } catch {
      this.fail('PROVIDER_PROTOCOL', `unreadable message from Deepgram: ${text.slice(0, 200)}`);
      return;
    }
    switch (msg.type) {
      case 'Results': {
        const alt = msg.channel?.alternatives?.[0];
        const text = alt?.transcript ?? '';
        const isFinal = msg.is_final === true;
        // Empty interim results carry nothing; empty finals still carry `speech_final`.
        if (text === '' && !isFinal) return;
        this.events.onTranscript({
          text,
          isFinal,
          speechFinal: msg.speech_final === true,
          ...(typeof alt?.confidence === 'number' ? { confidence: alt.confidence } : {}),
          ...(typeof msg.start === 'number' ? { start: msg.start + this.timeOffset } : {}),
          ...(typeof msg.duration === 'number' ? { duration: msg.duration } : {}),
        });
        return;
      }
      case 'SpeechStarted':
        this.events.onSpeechStarted?.();
        return;
      case 'UtteranceEnd':
        this.events.onUtteranceEnd?.();
        return;
      case 'Metadata':
        return;
      case 'Error':
        // Sent by some Deepgram-compatible servers before they close; the close reports it.
        this.lastServerError = msg.description ?? msg.message ?? msg.err_msg ?? 'error';
        return;
      default:
        return;
    }
  }

  private onSocketClose(ws: WebSocket, code: number, reason: string): void {
    if (ws !== this.ws) return;
    this.ws = undefined;
    // audio held for a chunk never went out: it goes to the next stream, before what comes next
    this.keepHeldAudio();
    if (this.state === 'closing' || this.state === 'closed') {
      this.shutdown();
      return;
    }
    // Unexpected: Deepgram (or the network) ended the stream mid-call.
    const why = this.lastServerError ?? (reason || `close code ${code}`);
    this.lastServerError = undefined;
    if (FATAL_CLOSE_CODES.has(code)) {
      this.fail('PROVIDER_PROTOCOL', `Deepgram closed the stream (${code}): ${why}`);
      return;
    }
    if (this.reconnectsLeft > 0) {
      this.reconnectsLeft -= 1;
      void this.reconnect(why);
      return;
    }
    this.fail('PROVIDER_DISCONNECTED', `Deepgram stream dropped (${code}): ${why}`);
  }

  private async reconnect(why: string): Promise<void> {
    this.state = 'reconnecting';
    this.clearKeepAlive();
    this.timeOffset += this.streamBytes / BYTES_PER_SECOND;
    this.streamBytes = 0;
    try {
      await this.open();
    } catch (err) {
      if (this.state !== 'reconnecting') return; // closed or aborted meanwhile
      const message = err instanceof Error ? err.message : String(err);
      this.fail('PROVIDER_DISCONNECTED', `Deepgram stream dropped (${why}); reconnect failed: ${message}`);
    }
  }

  /** Runs synchronously in the socket's `open` event, before any message can arrive. */
  private onStreamOpen(ws: WebSocket): void {
    this.ws = ws;
    this.state = 'open';
    this.attach(ws);
    const replay = this.pending;
    this.pending = [];
    this.pendingBytes = 0;
    for (const chunk of replay) this.sendAudio(chunk);
    if (this.pendingFinalize) {
      this.pendingFinalize = false;
      this.sendControl('Finalize');
    }
    this.lastSentAt = Date.now();
    if (this.closeOnOpen) {
      this.closeOnOpen = false;
      void this.close();
      return;
    }
    this.scheduleKeepAlive(this.opts.keepAliveMs);
  }

  /** Copies a frame into the chunk being gathered (the caller may reuse its buffer). */
  private holdAudio(mulaw: Buffer): void {
    const need = this.chunkFill + mulaw.length;
    if (!this.chunk || need > this.chunk.length) {
      const grown = Buffer.allocUnsafe(Math.max(need, this.chunkBytes + 320));
      if (this.chunk) this.chunk.copy(grown, 0, 0, this.chunkFill);
      this.chunk = grown;
    }
    const first = this.chunkFill === 0;
    mulaw.copy(this.chunk, this.chunkFill);
    this.chunkFill = need;
    if (first) this.chunkTimer = setTimeout(this.onChunkTimer, Math.max(1, this.opts.audioChunkMs));
  }

  private readonly onChunkTimer = (): void => {
    this.chunkTimer = undefined;
    if (this.state === 'open') this.sendHeldAudio();
  };

  /** The chunk gathered so far, as one message; a fresh buffer for the next (ws keeps none of it). */
  private sendHeldAudio(): void {
    if (this.ws?.readyState !== WebSocket.OPEN) {
      this.keepHeldAudio();
      return;
    }
    if (this.chunkTimer) clearTimeout(this.chunkTimer);
    this.chunkTimer = undefined;
    if (this.chunkFill === 0 || !this.chunk) return;
    const out = this.chunk.subarray(0, this.chunkFill);
    this.chunk = undefined;
    this.chunkFill = 0;
    this.transmit(out);
  }

  private transmit(mulaw: Buffer): void {
    this.ws!.send(mulaw, { binary: true });
    this.lastSentAt = Date.now();
    this.streamBytes += mulaw.length;
  }

  /** The held chunk (not sent) joins the audio kept for the next stream. */
  private keepHeldAudio(): void {
    if (this.chunkTimer) clearTimeout(this.chunkTimer);
    this.chunkTimer = undefined;
    if (this.chunkFill === 0 || !this.chunk) return;
    const held = this.chunk.subarray(0, this.chunkFill);
    this.chunk = undefined;
    this.chunkFill = 0;
    this.keepForNextStream(held);
  }

  private keepForNextStream(mulaw: Buffer): void {
    this.pending.push(mulaw);
    this.pendingBytes += mulaw.length;
    while (this.pendingBytes > this.opts.maxBufferedBytes && this.pending.length > 1) {
      this.pendingBytes -= this.pending.shift()!.length;
    }
  }

  private sendControl(type: 'KeepAlive' | 'Finalize' | 'CloseStream'): void {
    if (this.ws?.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify({ type }));
  }

  /** One timer for the whole stream, re-armed from the last send: no per-frame timer work. */
  private scheduleKeepAlive(delay: number): void {
    this.keepAliveTimer = setTimeout(() => {
      this.keepAliveTimer = undefined;
      if (this.state !== 'open') return;
      const idle = Date.now() - this.lastSentAt;
      if (idle >= this.opts.keepAliveMs) {
        this.sendControl('KeepAlive');
        this.lastSentAt = Date.now();
        this.scheduleKeepAlive(this.opts.keepAliveMs);
      } else {
        this.scheduleKeepAlive(this.opts.keepAliveMs - idle);
      }
    }, Math.max(1, delay));
  }

  private clearKeepAlive(): void {
    if (this.keepAliveTimer) clearTimeout(this.keepAliveTimer);
    this.keepAliveTimer = undefined;
  }

  private readonly onAbort = (): void => this.shutdown();

  private fail(code: ProviderErrorCode, message: string): void {
    if (this.state === 'closed') return;
    const err = new ProviderError(code, PROVIDER, message);
    this.shutdown(err);
  }

  /** Releases everything now; idempotent. Reports `err` (if any), then `onClose`. */
  private shutdown(err?: ProviderError): void {
    if (this.state === 'closed') return;
    this.state = 'closed';
    this.clearKeepAlive();
    if (this.closeTimer) clearTimeout(this.closeTimer);
    this.closeTimer = undefined;
    this.signal?.removeEventListener('abort', this.onAbort);
    this.cancelOpen?.();
    this.pending = [];
    this.pendingBytes = 0;
    if (this.chunkTimer) clearTimeout(this.chunkTimer);
    this.chunkTimer = undefined;
    this.chunk = undefined;
    this.chunkFill = 0;
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

interface DeepgramMessage {
  type?: string;
  is_final?: boolean;
  speech_final?: boolean;
  start?: number;
  duration?: number;
  channel?: { alternatives?: Array<{ transcript?: string; confidence?: number }> };
  description?: string;
  message?: string;
  err_msg?: string;
}

function aborted(): ProviderError {
  return new ProviderError('PROVIDER_ABORTED', PROVIDER, 'the stream was cancelled');
}

/** Deepgram answers a refused upgrade with `{"err_code","err_msg","request_id"}`. */
export function deepgramErrorMessage(body: string): string | undefined {
  try {
    const parsed = JSON.parse(body) as { err_msg?: unknown; message?: unknown };
    if (typeof parsed.err_msg === 'string') return parsed.err_msg;
    if (typeof parsed.message === 'string') return parsed.message;
  } catch {
    // not JSON
  }
  return body.trim() ? body.trim().slice(0, 300) : undefined;
}
