/**
 * What the streaming model fakes (Anthropic, Gemini) share: the faults a test can script on one
 * answer (the same flags as test/fakes/openai-chat.ts), the request's record, and an event stream
 * written with those faults.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';

export interface StreamFaults {
  /** Wait before the response headers. */
  headersDelayMs?: number;
  /** Wait between two SSE events. */
  delayMs?: number;
  /** Never answer (not even headers). */
  hang?: boolean;
  /** Send the headers, then nothing. */
  hangAfterHeaders?: boolean;
  /** Destroy the TCP connection after this many SSE events. */
  disconnectAfter?: number;
  /** End the response cleanly after this many SSE events (a truncated answer). */
  endAfter?: number;
  /** After this many SSE events, send the vendor's error event and end. */
  streamErrorAfter?: number;
  /** Extra raw text written after this many events (e.g. malformed JSON). */
  raw?: { after: number; text: string };
  /** Answer this instead (e.g. an HTML page with 200: a proxy in the way). */
  garbage?: { status?: number; contentType: string; body: string };
}

export interface FakeStreamRequest {
  method: string;
  /** Path and query, as sent. */
  url: string;
  path: string;
  headers: IncomingMessage['headers'];
  body: Record<string, unknown>;
  /** The client's port: two requests with the same one came over one kept-alive connection. */
  remotePort: number | undefined;
  /** True once the server finished writing the response. */
  finished: boolean;
  /** True once the connection (or the response) closed; before `finished` = client gave up. */
  closed: boolean;
  whenClosed: Promise<void>;
}

/** The record of one request, kept up to date as its response finishes and closes. */
export function recordRequest(req: IncomingMessage, res: ServerResponse, raw: string): FakeStreamRequest {
  let body: Record<string, unknown> = {};
  try {
    const parsed: unknown = raw ? JSON.parse(raw) : {};
    if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) body = parsed as Record<string, unknown>;
  } catch {
    // recorded as empty; the fake answers it
  }
  let resolveClosed!: () => void;
  const record: FakeStreamRequest = {
    method: req.method ?? '',
    url: req.url ?? '/',
    path: new URL(req.url ?? '/', 'http://localhost').pathname,
    headers: req.headers,
    body,
    remotePort: req.socket.remotePort,
    finished: false,
    closed: false,
    whenClosed: new Promise((resolve) => (resolveClosed = resolve)),
  };
  res.on('finish', () => (record.finished = true));
  res.on('close', () => {
    record.closed = true;
    resolveClosed();
  });
  return record;
}

/**
 * Writes `events` (each a whole SSE message, blank line included) with the answer's faults;
 * `errorEvent` is the vendor's mid-stream error message. The headers must have been sent.
 */
export async function writeEvents(
  res: ServerResponse,
  record: FakeStreamRequest,
  events: readonly string[],
  faults: StreamFaults,
  errorEvent: string,
  sleep: (ms: number) => Promise<void>,
): Promise<void> {
  for (let i = 0; i < events.length; i++) {
    if (record.closed) return;
    if (faults.raw && faults.raw.after === i) res.write(faults.raw.text);
    if (faults.disconnectAfter === i) {
      res.socket?.destroy();
      return;
    }
    if (faults.endAfter === i) break;
    if (faults.streamErrorAfter === i) {
      res.write(errorEvent);
      res.end();
      return;
    }
    if (i > 0 && faults.delayMs) await sleep(faults.delayMs);
    if (record.closed) return;
    // Wait for each event to reach the socket, so that a scripted drop comes after it.
    await new Promise<void>((resolve) => res.write(events[i], () => resolve()));
  }
  res.end();
}

/** `text` cut into `parts` pieces of about one size (none for empty text). */
export function split(text: string, parts: number): string[] {
  if (text === '') return [];
  const n = Math.max(1, Math.min(parts, text.length));
  const size = Math.ceil(text.length / n);
  const out: string[] = [];
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size));
  return out;
}
