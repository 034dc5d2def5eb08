/**
 * What the WebSocket text-to-speech adapters (ElevenLabs, Cartesia, Deepgram Aura) share: one
 * socket per session, opened with a connect timeout and the caller's abort signal, an HTTP
 * refusal of the upgrade or a socket that closes early mapped to a `ProviderError`, a timer for
 * the vendor's next answer, and the socket closed at once when the session is over.
 */
import WebSocket from 'ws';
import { ProviderError, type ProviderErrorCode, type TtsEvents } from '../types.js';
import { httpError, TtsSessionBase } from './common.js';

export interface SocketSessionOptions {
  /** Catalog provider id as errors name it (`cartesia`, `deepgram-tts`). */
  provider: string;
  url: string;
  headers: Record<string, string>;
  connectMs: number;
  firstAudioMs: number;
  /** What the vendor said in the body of an HTTP refusal of the upgrade. */
  httpDetail(body: string): string;
}

/** `baseUrl` with `path` appended and `http` → `ws`, `https` → `wss`. */
export function socketUrl(baseUrl: string, path: string): URL {
  const url = new URL(baseUrl);
  url.protocol = url.protocol === 'http:' ? 'ws:' : url.protocol === 'https:' ? 'wss:' : url.protocol;
  url.pathname = `${url.pathname.replace(/\/+$/, '')}${path}`;
  return url;
}

export function abortedBeforeOpen(provider: string): ProviderError {
  return new ProviderError('PROVIDER_ABORTED', provider, 'cancelled before the connection was open');
}

export function rawToString(data: WebSocket.RawData): string {
  if (Array.isArray(data)) return Buffer.concat(data).toString('utf8');
  if (data instanceof ArrayBuffer) return Buffer.from(data).toString('utf8');
  return data.toString('utf8');
}

export function rawToBuffer(data: WebSocket.RawData): Buffer {
  if (Array.isArray(data)) return Buffer.concat(data);
  if (data instanceof ArrayBuffer) return Buffer.from(data);
  return data;
}

/** A text message as a JSON object, or undefined when it is not one. */
export function jsonObject(data: WebSocket.RawData): Record<string, unknown> | undefined {
  try {
    const parsed: unknown = JSON.parse(rawToString(data));
    if (typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)) return parsed as Record<string, unknown>;
  } catch {
    // not JSON
  }
  return undefined;
}

export function looksLikeAuth(text: string): boolean {
  return /invalid_api_key|api[ _-]?key|unauthori[sz]ed|authenticat|forbidden|permission/i.test(text);
}

/** The index of the last whitespace character of `text`, or -1. */
export function lastWhitespace(text: string): number {
  for (let i = text.length - 1; i >= 0; i--) {
    if (/\s/.test(text[i]!)) return i;
  }
  return -1;
}

/** An error the vendor reported in a message: a key problem is PROVIDER_AUTH, anything else an HTTP error. */
export function serverError(provider: string, summary: string, status?: number): ProviderError {
  const code: ProviderErrorCode =
    status === 401 || status === 403 || (status === undefined && looksLikeAuth(summary)) ? 'PROVIDER_AUTH' : 'PROVIDER_HTTP_ERROR';
  return new ProviderError(code, provider, `server error: ${summary.slice(0, 300)}`, status);
}

/** The socket closed before the reply was complete. */
export function closeError(provider: string, code: number, reason: string, ending: boolean): ProviderError {
  const what = `connection closed (${code}${reason ? ` ${reason.slice(0, 200)}` : ''})`;
  // 1008 policy violation, 1011 server error and application codes carry the vendor's refusal.
  if (code === 1008 || code === 1011 || code >= 4000) {
    return new ProviderError(looksLikeAuth(reason) ? 'PROVIDER_AUTH' : 'PROVIDER_HTTP_ERROR', provider, what);
  }
  return new ProviderError('PROVIDER_DISCONNECTED', provider, ending ? `${what} before the final audio` : `${what} mid-stream`);
}

/**
 * A TTS session on one WebSocket. A vendor says what goes out when the socket opens (`onOpen`),
 * reads what comes in (`onMessage`) and may say how a close ends the session (`onClose`).
 */
export abstract class SocketTtsSession extends TtsSessionBase<'connecting'> {
  private ws: WebSocket | undefined;
  private connectTimer: NodeJS.Timeout | undefined;
  /** Armed while we wait for the vendor (after a flush or the end); a vendor's message re-arms or clears it. */
  private audioTimer: NodeJS.Timeout | undefined;

  constructor(
    events: TtsEvents,
    protected readonly socketOptions: SocketSessionOptions,
  ) {
    super(events, 'connecting');
  }

  protected get provider(): string {
    return this.socketOptions.provider;
  }

  protected get live(): boolean {
    return this.state === 'open' || this.state === 'ending';
  }

  /** What goes out first, once the socket is open. */
  protected abstract onOpen(): void;
  protected abstract onMessage(data: WebSocket.RawData, isBinary: boolean): void;

  /** A close before the end: a failure; a clean close once ending: the reply is over. */
  protected onClose(code: number, reason: string): void {
    if (!this.live) return;
    if (this.state === 'ending' && code === 1000) {
      this.finish();
      return;
    }
    this.fail(closeError(this.provider, code, reason, this.state === 'ending'));
  }

  connect(signal: AbortSignal | undefined): Promise<void> {
    const { provider, url, headers, connectMs, httpDetail } = this.socketOptions;
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
      const abortConnect = () => settle(abortedBeforeOpen(provider));
      signal?.addEventListener('abort', abortConnect, { once: true });

      const ws = new WebSocket(url, { headers, perMessageDeflate: false });
      this.ws = ws;
      this.connectTimer = setTimeout(
        () => settle(new ProviderError('PROVIDER_TIMEOUT', provider, `no connection within ${connectMs} ms`)),
        connectMs,
      );

      ws.on('unexpected-response', (_req, res) => {
        const status = res.statusCode ?? 0;
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          if (body.length < 4096) body += chunk;
        });
        res.on('error', () => {});
        res.on('end', () => settle(httpError(provider, status, httpDetail(body))));
        res.on('close', () => settle(httpError(provider, status, httpDetail(body))));
      });
      ws.on('error', (err) => {
        if (this.state === 'connecting') {
          settle(new ProviderError('PROVIDER_DISCONNECTED', provider, `connection failed: ${err.message}`, undefined, { cause: err }));
        }
        // After open an error is always followed by 'close', which decides.
      });
      ws.on('close', (code, reason) => {
        if (this.state === 'connecting') {
          settle(new ProviderError('PROVIDER_DISCONNECTED', provider, `connection closed during the handshake (${code})`));
          return;
        }
        this.onClose(code, reason.toString());
      });
      ws.on('message', (data, isBinary) => {
        if (this.live) this.onMessage(data, isBinary);
      });
      ws.once('open', () => {
        if (settled) return;
        this.state = 'open';
        this.onOpen();
        if (signal) this.bindSignal(signal);
        settle();
      });
    });
  }

  protected send(message: Record<string, unknown>): void {
    const ws = this.ws;
    if (!ws || ws.readyState !== WebSocket.OPEN) return;
    ws.send(JSON.stringify(message));
  }

  protected armAudioTimer(): void {
    this.clearAudioTimer();
    const ms = this.socketOptions.firstAudioMs;
    this.audioTimer = setTimeout(() => {
      this.audioTimer = undefined;
      this.fail(new ProviderError('PROVIDER_TIMEOUT', this.provider, `no audio within ${ms} ms`));
    }, ms);
  }

  protected clearAudioTimer(): void {
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
