/**
 * A streamed model answer over HTTP with Server-Sent Events, as the Anthropic and Gemini adapters
 * ask for it: one POST, the events read as they arrive and handed to the vendor's reader, which
 * turns them into `LlmEvent`s. Everything that is not the vendor's format is here, the same for
 * both: the timers (no first byte within `firstTokenMs`, a started stream silent for `idleMs`),
 * the caller's abort, non-2xx answers, a 2xx answer that is not an event stream, dropped and
 * refused connections, and the connection's release (drained back to the pool after a complete
 * answer, destroyed otherwise). Each failure is a `ProviderError` naming the provider.
 */
import { request, type Dispatcher } from 'undici';
import { ProviderError, type LlmEvent, type ProviderErrorCode } from '../types.js';

export interface SseMessage {
  /** The `event:` field, or null when the message had none. */
  event: string | null;
  data: string;
}

/** A vendor's format: its messages in, our events out. */
export interface SseReader {
  /** The events one message gives; throws a `ProviderError` for an error the vendor sent in the stream. */
  read(message: SseMessage): Iterable<LlmEvent>;
  /** True once the answer is complete: what follows is drained, not read. */
  complete(): boolean;
  /**
   * The events that close the answer (tool calls, `done`), once it is complete or at the end of
   * the body; throws `PROVIDER_DISCONNECTED` when the body ended before the answer did.
   */
  finish(): Iterable<LlmEvent>;
}

export interface SseExchange {
  /** Catalog provider id, for the errors. */
  provider: string;
  url: string;
  headers: Record<string, string>;
  body: string;
  signal?: AbortSignal | undefined;
  firstTokenMs: number;
  idleMs: number;
  dispatcher?: Dispatcher | undefined;
  /** A non-2xx answer as an error: the vendor's message, and whether the key is at fault. */
  httpError(status: number, body: string): ProviderError;
}

/** How long the rest of a complete answer may take to arrive before the connection is dropped. */
const DRAIN_MS = 1_000;
const MAX_ERROR_BODY = 64 * 1024;

export async function* streamSse(x: SseExchange, reader: SseReader): AsyncGenerator<LlmEvent, void, undefined> {
  const err = (code: ProviderErrorCode, message: string, cause?: unknown) =>
    new ProviderError(code, x.provider, message, undefined, cause === undefined ? undefined : { cause });
  if (x.signal?.aborted) throw err('PROVIDER_ABORTED', 'the request was cancelled');

  // One controller for undici, aborted by the caller's signal or by our timers.
  const controller = new AbortController();
  let stopReason: 'aborted' | 'first-token' | 'idle' | 'drained' | undefined;
  const stop = (reason: NonNullable<typeof stopReason>) => {
    stopReason ??= reason;
    controller.abort();
  };
  const onAbort = () => stop('aborted');
  x.signal?.addEventListener('abort', onAbort, { once: true });
  let timer: NodeJS.Timeout | undefined = setTimeout(() => stop('first-token'), x.firstTokenMs);

  const failure = (cause: unknown): ProviderError => {
    if (cause instanceof ProviderError) return cause;
    if (stopReason === 'aborted') return err('PROVIDER_ABORTED', 'the request was cancelled');
    if (stopReason === 'first-token') return err('PROVIDER_TIMEOUT', `no answer within ${x.firstTokenMs} ms`, cause);
    if (stopReason === 'idle') return err('PROVIDER_TIMEOUT', `the stream stalled for ${x.idleMs} ms`, cause);
    const code = (cause as { code?: string } | undefined)?.code;
    const message = cause instanceof Error ? cause.message : String(cause);
    if (code === 'UND_ERR_CONNECT_TIMEOUT' || code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT') {
      return err('PROVIDER_TIMEOUT', message, cause);
    }
    return err('PROVIDER_DISCONNECTED', `connection lost: ${message}`, cause);
  };

  let body: Dispatcher.ResponseData['body'] | undefined;
  try {
    let res: Dispatcher.ResponseData;
    try {
      res = await request(x.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'text/event-stream', ...x.headers },
        body: x.body,
        signal: controller.signal,
        // Our own timers bound the wait; undici's would only give vaguer errors.
        headersTimeout: 0,
        bodyTimeout: 0,
        ...(x.dispatcher ? { dispatcher: x.dispatcher } : {}),
      });
    } catch (cause) {
      throw failure(cause);
    }
    body = res.body;
    if (res.statusCode < 200 || res.statusCode >= 300) {
      const text = await readLimited(res.body).catch((cause: unknown) => {
        throw failure(cause);
      });
      throw x.httpError(res.statusCode, text);
    }
    const contentType = String(res.headers['content-type'] ?? '');
    if (!contentType.includes('text/event-stream')) {
      const text = await readLimited(res.body).catch((cause: unknown) => {
        throw failure(cause);
      });
      throw err('PROVIDER_PROTOCOL', `answered ${res.statusCode} with ${contentType || 'no content type'}, not an event stream: ${text.slice(0, 200)}`);
    }

    const decoder = new TextDecoder();
    let buffer = '';
    let event: string | null = null;
    let data: string[] = [];
    let started = false;
    let finished = false;
    try {
      for await (const raw of res.body) {
        if (finished) continue; // the rest of a complete answer: drained so the connection is kept
        if (started) timer?.refresh();
        else {
          started = true;
          clearTimeout(timer);
          timer = setTimeout(() => stop('idle'), x.idleMs);
        }
        buffer += decoder.decode(raw as Buffer, { stream: true });
        let newline: number;
        while (!finished && (newline = buffer.search(/\r\n|\r|\n/)) !== -1) {
          const line = buffer.slice(0, newline);
          buffer = buffer.slice(newline + (buffer.startsWith('\r\n', newline) ? 2 : 1));
          if (line === '') {
            if (data.length === 0) {
              event = null;
              continue;
            }
            const message = { event, data: data.join('\n') };
            event = null;
            data = [];
            yield* reader.read(message);
            if (reader.complete()) {
              finished = true;
              clearTimeout(timer);
              timer = setTimeout(() => stop('drained'), DRAIN_MS);
              yield* reader.finish();
            }
          } else if (line.startsWith('data:')) {
            data.push(line.slice(line.startsWith('data: ') ? 6 : 5));
          } else if (line.startsWith('event:')) {
            event = line.slice(6).trim();
          }
          // `id:`, `retry:` and `:` comments carry nothing we use.
        }
      }
    } catch (cause) {
      if (finished && stopReason !== 'aborted') return; // the answer was whole; only its tail was lost
      throw failure(cause);
    }
    if (finished) return;
    if (data.length > 0) yield* reader.read({ event, data: data.join('\n') });
    yield* reader.finish();
  } finally {
    if (timer) clearTimeout(timer);
    x.signal?.removeEventListener('abort', onAbort);
    // Releases the socket when we stop early (abort, error, consumer stopped iterating).
    if (body && !body.readableEnded && !body.destroyed) body.destroy();
  }
}

async function readLimited(body: Dispatcher.ResponseData['body']): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    const buf = chunk as Buffer;
    if (size < MAX_ERROR_BODY) chunks.push(buf);
    size += buf.length;
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** A message's JSON, or `PROVIDER_PROTOCOL` naming what could not be read. */
export function parseJson(provider: string, data: string): unknown {
  try {
    return JSON.parse(data);
  } catch {
    throw new ProviderError('PROVIDER_PROTOCOL', provider, `unreadable stream event: ${data.slice(0, 200)}`);
  }
}
