/**
 * A local stand-in for OpenAI's chat completions API (`POST /v1/chat/completions`), faithful
 * enough that the official `openai` SDK (v6) works against it.
 *
 * Streaming requests get Server-Sent Events of `chat.completion.chunk` objects shaped like
 * OpenAI's (a first chunk with `role`, content deltas, tool-call deltas split by `index` with
 * `id`/`name` in the first delta and the arguments spread over several, a last chunk with
 * `finish_reason`, a usage chunk with empty `choices` when `stream_options.include_usage`, then
 * `data: [DONE]`). Non-streaming requests get one `chat.completion` object. Errors use OpenAI's
 * body `{"error":{"message","type","param","code"}}`. A script may choose each request's answer from
 * the request itself (`completionFor`, which may answer asynchronously), so that one fake serves a
 * healthy call and a faulty one side by side. `record: false` keeps no request (a long-running fake).
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { fakeTimers, listenLocal, readBody, shutDown, trackConnections } from './http.js';

export interface FakeToolCall {
  id?: string;
  name: string;
  /** JSON text; sent over `argumentChunks` deltas (default 3). */
  arguments: string;
  argumentChunks?: number;
}

export interface FakeCompletion {
  /** Answer with this HTTP status and OpenAI's error body instead of a completion. */
  status?: number;
  error?: { message: string; type?: string; code?: string | null; param?: string | null };
  /** Content deltas, in order. */
  text?: string[];
  toolCalls?: FakeToolCall[];
  /** Default `tool_calls` when there are tool calls, else `stop`. */
  finishReason?: string;
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
  /** End the response cleanly (no `[DONE]`) after this many SSE events. */
  endAfter?: number;
  /** After this many SSE events, send `data: {"error":{...}}` and end (OpenAI's mid-stream error). */
  streamErrorAfter?: number;
  /** Extra raw text written after this many events (e.g. malformed JSON `data: {oops\n\n`). */
  raw?: { after: number; text: string };
  /** Omit `data: [DONE]` (and end the response right after the last chunk). */
  omitDone?: boolean;
  /** Answer this instead of a completion (e.g. an HTML page with 200: a proxy in the way). */
  garbage?: { status?: number; contentType: string; body: string };
}

export interface FakeOpenAiChatScript {
  /** The Bearer key required (default `sk-test`); `null` accepts any or none (custom servers). */
  apiKey?: string | null;
  /** One per request, in order; the last one repeats. */
  completions?: FakeCompletion[];
  /** The model name reported in chunks (default: the request's). */
  model?: string;
  /**
   * Chooses a request's answer from the request (e.g. by a marker in its system prompt);
   * `undefined` falls back to `completions`. `index` counts every request the fake saw.
   */
  completionFor?: (request: { index: number; body: Record<string, unknown>; headers: IncomingMessage['headers'] }) =>
    | FakeCompletion
    | undefined
    | Promise<FakeCompletion | undefined>;
  /** Keep every request in `requests` (default true). */
  record?: boolean;
}

export interface FakeChatRequest {
  method: string;
  path: string;
  headers: IncomingMessage['headers'];
  body: Record<string, unknown>;
  /** True once the server finished writing the response. */
  finished: boolean;
  /** True once the connection (or the response) closed; before `finished` = client gave up. */
  closed: boolean;
  whenClosed: Promise<void>;
}

export interface FakeOpenAiChat {
  /** `http://127.0.0.1:<port>` (the SDK wants `url + '/v1'`). */
  url: string;
  apiKey: string | null;
  requests: FakeChatRequest[];
  openSockets(): number;
  close(): Promise<void>;
}

export async function startFakeOpenAiChat(script: FakeOpenAiChatScript = {}): Promise<FakeOpenAiChat> {
  const apiKey = script.apiKey === undefined ? 'sk-test' : script.apiKey;
  const requests: FakeChatRequest[] = [];
  const keep = script.record !== false;
  let seen = 0;
  const { pending: timers, sleep } = fakeTimers();

  const server = createServer((req, res) => {
    void handle(req, res).catch(() => res.destroy());
  });
  const sockets = trackConnections(server);

  const sendError = (res: ServerResponse, status: number, error: FakeCompletion['error']) => {
    const body = {
      error: {
        message: error?.message ?? 'error',
        type: error?.type ?? (status >= 500 ? 'server_error' : 'invalid_request_error'),
        param: error?.param ?? null,
        code: error?.code ?? null,
      },
    };
    res.writeHead(status, { 'content-type': 'application/json', 'x-request-id': `req_${randomUUID()}` });
    res.end(JSON.stringify(body));
  };

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const raw = await readBody(req);
    const path = new URL(req.url ?? '/', 'http://localhost').pathname;
    let body: Record<string, unknown> = {};
    try {
      body = raw ? (JSON.parse(raw) as Record<string, unknown>) : {};
    } catch {
      // recorded as empty; answered below
    }
    let resolveClosed!: () => void;
    const record: FakeChatRequest = {
      method: req.method ?? '',
      path,
      headers: req.headers,
      body,
      finished: false,
      closed: false,
      whenClosed: new Promise((resolve) => (resolveClosed = resolve)),
    };
    // the request's index: as `requests` has it (a test may empty it), or counted
    const index = keep ? requests.push(record) - 1 : seen++;
    res.on('finish', () => (record.finished = true));
    res.on('close', () => {
      record.closed = true;
      resolveClosed();
    });

    if (req.method !== 'POST' || path !== '/v1/chat/completions') {
      return sendError(res, 404, { message: `Invalid URL (${req.method} ${path})`, code: null });
    }
    if (apiKey !== null && req.headers.authorization !== `Bearer ${apiKey}`) {
      return sendError(res, 401, {
        message: 'Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys.',
        type: 'invalid_request_error',
        code: 'invalid_api_key',
      });
    }
    if (!raw || Object.keys(body).length === 0) {
      return sendError(res, 400, { message: 'We could not parse the JSON body of your request.' });
    }
    if (!Array.isArray(body.messages)) {
      return sendError(res, 400, { message: "Missing required parameter: 'messages'.", param: 'messages', code: 'missing_required_parameter' });
    }

    const all = script.completions ?? [{ text: ['Hello', '!'] }];
    const chosen = script.completionFor?.({ index, body, headers: req.headers });
    const completion =
      (chosen instanceof Promise ? await chosen : chosen) ?? all[Math.min(index, all.length - 1)] ?? {};
    if (completion.hang) return; // the client's timeout or abort ends it
    if (completion.headersDelayMs) await sleep(completion.headersDelayMs);
    if (record.closed) return;
    if (completion.garbage) {
      res.writeHead(completion.garbage.status ?? 200, { 'content-type': completion.garbage.contentType });
      res.end(completion.garbage.body);
      return;
    }
    if (completion.status && completion.status >= 400) {
      return sendError(res, completion.status, completion.error ?? { message: 'The server had an error while processing your request.' });
    }

    const id = `chatcmpl-${randomUUID().replace(/-/g, '').slice(0, 24)}`;
    const created = Math.floor(Date.now() / 1000);
    const model = script.model ?? (typeof body.model === 'string' ? body.model : 'gpt-4o-mini');
    const toolCalls = completion.toolCalls ?? [];
    const finishReason = completion.finishReason ?? (toolCalls.length ? 'tool_calls' : 'stop');
    const text = completion.text ?? [];
    const usage = {
      prompt_tokens: 12,
      completion_tokens: text.length + toolCalls.length,
      total_tokens: 12 + text.length + toolCalls.length,
      prompt_tokens_details: { cached_tokens: 0, audio_tokens: 0 },
      completion_tokens_details: { reasoning_tokens: 0, audio_tokens: 0, accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 },
    };
    const callIds = toolCalls.map((c) => c.id ?? `call_${randomUUID().replace(/-/g, '').slice(0, 24)}`);

    if (body.stream !== true) {
      const message: Record<string, unknown> = {
        role: 'assistant',
        content: text.length ? text.join('') : null,
        refusal: null,
        annotations: [],
      };
      if (toolCalls.length) {
        message.tool_calls = toolCalls.map((c, i) => ({
          id: callIds[i],
          type: 'function',
          function: { name: c.name, arguments: c.arguments },
        }));
      }
      res.writeHead(200, { 'content-type': 'application/json', 'x-request-id': `req_${randomUUID()}` });
      res.end(
        JSON.stringify({
          id,
          object: 'chat.completion',
          created,
          model,
          choices: [{ index: 0, message, logprobs: null, finish_reason: finishReason }],
          usage,
          service_tier: 'default',
          system_fingerprint: 'fp_fake',
        }),
      );
      return;
    }

    const includeUsage =
      typeof body.stream_options === 'object' &&
      body.stream_options !== null &&
      (body.stream_options as { include_usage?: unknown }).include_usage === true;
    const chunk = (delta: Record<string, unknown>, finish: string | null = null) => ({
      id,
      object: 'chat.completion.chunk',
      created,
      model,
      service_tier: 'default',
      system_fingerprint: 'fp_fake',
      choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
      ...(includeUsage ? { usage: null } : {}),
    });

    const events: string[] = [];
    events.push(JSON.stringify(chunk(toolCalls.length && !text.length
      ? { role: 'assistant', content: null, refusal: null }
      : { role: 'assistant', content: '', refusal: null })));
    for (const t of text) events.push(JSON.stringify(chunk({ content: t })));
    toolCalls.forEach((call, index) => {
      events.push(
        JSON.stringify(
          chunk({
            tool_calls: [{ index, id: callIds[index], type: 'function', function: { name: call.name, arguments: '' } }],
          }),
        ),
      );
      for (const part of split(call.arguments, call.argumentChunks ?? 3)) {
        events.push(JSON.stringify(chunk({ tool_calls: [{ index, function: { arguments: part } }] })));
      }
    });
    events.push(JSON.stringify(chunk({}, finishReason)));
    if (includeUsage) {
      events.push(
        JSON.stringify({ id, object: 'chat.completion.chunk', created, model, service_tier: 'default', system_fingerprint: 'fp_fake', choices: [], usage }),
      );
    }
    if (!completion.omitDone) events.push('[DONE]');

    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      'x-request-id': `req_${randomUUID()}`,
      'openai-processing-ms': '42',
    });
    res.flushHeaders();
    if (completion.hangAfterHeaders) return;

    for (let i = 0; i < events.length; i++) {
      if (record.closed) return;
      if (completion.raw && completion.raw.after === i) res.write(completion.raw.text);
      if (completion.disconnectAfter === i) {
        res.socket?.destroy();
        return;
      }
      if (completion.endAfter === i) break;
      if (completion.streamErrorAfter === i) {
        res.write(`data: ${JSON.stringify({ error: { message: completion.error?.message ?? 'The server had an error while processing your request.', type: completion.error?.type ?? 'server_error', param: null, code: completion.error?.code ?? null } })}\n\n`);
        res.end();
        return;
      }
      if (i > 0 && completion.delayMs) await sleep(completion.delayMs);
      if (record.closed) return;
      // Wait for each event to reach the socket, so that a scripted drop comes after it.
      await new Promise<void>((resolve) => res.write(`data: ${events[i]}\n\n`, () => resolve()));
    }
    res.end();
  }

  const { url } = await listenLocal(server);
  return {
    url,
    apiKey,
    requests,
    openSockets: () => sockets.size,
    close: () => shutDown(server, { timers, connections: sockets }),
  };
}

function split(text: string, parts: number): string[] {
  if (text === '') return [];
  const n = Math.max(1, Math.min(parts, text.length));
  const size = Math.ceil(text.length / n);
  const out: string[] = [];
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size));
  return out;
}
