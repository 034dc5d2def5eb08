/**
 * A local stand-in for Anthropic's Messages API (`POST /v1/messages`), faithful enough that the
 * official `@anthropic-ai/sdk` works against it.
 *
 * It checks what the API checks and our adapter must get right: the key, in `x-api-key` or as
 * `Authorization: Bearer` (the SDK's way; 401 `authentication_error`), `anthropic-version` (400), `model`, `max_tokens`, a non-empty
 * `messages`, non-empty text blocks, each `tool_result` answering a
 * `tool_use` of the turn before and each `tool_use` answered in the turn after, tools with an
 * object `input_schema`, `temperature` from 0 to 1 and only where it is still taken (API version
 * 2023-06-01, not Claude Opus 4.7, 4.8 nor the fifth generation; the SDK's 2026-10-21 takes none)
 * (all 400 `invalid_request_error`).
 *
 * Streaming requests get the API's events: `message_start`, `ping`, per content block
 * `content_block_start`, its deltas (`text_delta`, `input_json_delta` with the arguments spread
 * over several) and `content_block_stop`, then `message_delta` (stop reason, usage) and
 * `message_stop`, each as `event: <type>` + `data: <json>`. Non-streaming requests get one
 * `message` object. Errors use the API's body `{"type":"error","error":{"type","message"},
 * "request_id"}`; a mid-stream error is an `error` event. Per request (the last script repeats,
 * or `answerFor` chooses from the request) it can: stream text and tool calls, and every fault of
 * test/fakes/sse.ts (hang, drop, garbage, delays, truncation, malformed JSON).
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { fakeTimers, listenLocal, readBody, shutDown, trackConnections } from './http.js';
import { recordRequest, split, writeEvents, type FakeStreamRequest, type StreamFaults } from './sse.js';

export interface FakeToolUse {
  id?: string;
  name: string;
  /** The call's input, as JSON text; sent over `argumentChunks` `input_json_delta`s (default 3). */
  arguments: string;
  argumentChunks?: number;
}

export interface FakeAnthropicAnswer extends StreamFaults {
  /** Answer with this HTTP status and the API's error body instead of a message. */
  status?: number;
  error?: { type?: string; message: string };
  /** Text deltas of one text block, in order. */
  text?: string[];
  toolUses?: FakeToolUse[];
  /** Default `tool_use` when there are tool uses, else `end_turn`. */
  stopReason?: string;
}

export interface FakeAnthropicScript {
  /** The key required (default `sk-ant-test`). */
  apiKey?: string;
  /** One per request, in order; the last one repeats. */
  answers?: FakeAnthropicAnswer[];
  /** Chooses a request's answer from the request; `undefined` falls back to `answers`. */
  answerFor?: (request: { index: number; body: Record<string, unknown> }) => FakeAnthropicAnswer | undefined;
  /** Keep every request in `requests` (default true). */
  record?: boolean;
}

export interface FakeAnthropic {
  /** `http://127.0.0.1:<port>` (the SDK's `baseURL`, and `ANTHROPIC_API_BASE`). */
  url: string;
  apiKey: string;
  requests: FakeStreamRequest[];
  openSockets(): number;
  close(): Promise<void>;
}

const ERROR_TYPES: Record<number, string> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  403: 'permission_error',
  404: 'not_found_error',
  413: 'request_too_large',
  429: 'rate_limit_error',
  500: 'api_error',
  529: 'overloaded_error',
};

export async function startFakeAnthropic(script: FakeAnthropicScript = {}): Promise<FakeAnthropic> {
  const apiKey = script.apiKey ?? 'sk-ant-test';
  const requests: FakeStreamRequest[] = [];
  const keep = script.record !== false;
  let seen = 0;
  const { pending: timers, sleep } = fakeTimers();

  const server = createServer((req, res) => {
    void handle(req, res).catch(() => res.destroy());
  });
  const sockets = trackConnections(server);

  const sendError = (res: ServerResponse, status: number, message: string, type = ERROR_TYPES[status] ?? 'api_error') => {
    const requestId = `req_${randomUUID().replace(/-/g, '')}`;
    res.writeHead(status, { 'content-type': 'application/json', 'request-id': requestId });
    res.end(JSON.stringify({ type: 'error', error: { type, message }, request_id: requestId }));
  };

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const raw = await readBody(req);
    const record = recordRequest(req, res, raw);
    const index = keep ? requests.push(record) - 1 : seen++;
    if (req.method !== 'POST' || record.path !== '/v1/messages') return sendError(res, 404, 'Not found');
    // the API takes the key in `x-api-key` (its reference) or as a Bearer token (the SDK's way)
    const bearer = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1];
    const key = req.headers['x-api-key'] ?? bearer;
    if (!key) return sendError(res, 401, 'x-api-key header is required');
    if (key !== apiKey) return sendError(res, 401, 'invalid x-api-key');
    if (!req.headers['anthropic-version']) return sendError(res, 400, 'anthropic-version: header is required');
    const body = record.body;
    const problem = requestProblem(raw, body, String(req.headers['anthropic-version']));
    if (problem) return sendError(res, 400, problem);

    const all = script.answers ?? [{ text: ['Hello', '!'] }];
    const answer = script.answerFor?.({ index, body }) ?? all[Math.min(index, all.length - 1)] ?? {};
    if (answer.hang) return; // the client's timeout or abort ends it
    if (answer.headersDelayMs) await sleep(answer.headersDelayMs);
    if (record.closed) return;
    if (answer.garbage) {
      res.writeHead(answer.garbage.status ?? 200, { 'content-type': answer.garbage.contentType });
      res.end(answer.garbage.body);
      return;
    }
    if (answer.status && answer.status >= 400) {
      return sendError(res, answer.status, answer.error?.message ?? 'Internal server error', answer.error?.type);
    }

    const id = `msg_${randomUUID().replace(/-/g, '').slice(0, 24)}`;
    const model = String(body.model);
    const text = answer.text ?? [];
    const toolUses = (answer.toolUses ?? []).map((t) => ({ ...t, id: t.id ?? `toolu_${randomUUID().replace(/-/g, '').slice(0, 24)}` }));
    const stopReason = answer.stopReason ?? (toolUses.length ? 'tool_use' : 'end_turn');
    const usage = { input_tokens: 25, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: text.length + toolUses.length * 5 };

    if (body.stream !== true) {
      const content = [
        ...(text.length ? [{ type: 'text', text: text.join('') }] : []),
        ...toolUses.map((t) => ({ type: 'tool_use', id: t.id, name: t.name, input: JSON.parse(t.arguments || '{}') as unknown })),
      ];
      res.writeHead(200, { 'content-type': 'application/json', 'request-id': `req_${randomUUID()}` });
      res.end(JSON.stringify({ id, type: 'message', role: 'assistant', model, content, stop_reason: stopReason, stop_sequence: null, usage }));
      return;
    }

    const event = (data: Record<string, unknown>) => `event: ${String(data.type)}\ndata: ${JSON.stringify(data)}\n\n`;
    const events: string[] = [
      event({
        type: 'message_start',
        message: { id, type: 'message', role: 'assistant', model, content: [], stop_reason: null, stop_sequence: null, usage: { ...usage, output_tokens: 1 } },
      }),
      event({ type: 'ping' }),
    ];
    let block = 0;
    if (text.length) {
      events.push(event({ type: 'content_block_start', index: block, content_block: { type: 'text', text: '' } }));
      for (const t of text) events.push(event({ type: 'content_block_delta', index: block, delta: { type: 'text_delta', text: t } }));
      events.push(event({ type: 'content_block_stop', index: block }));
      block++;
    }
    for (const t of toolUses) {
      events.push(event({ type: 'content_block_start', index: block, content_block: { type: 'tool_use', id: t.id, name: t.name, input: {} } }));
      events.push(event({ type: 'content_block_delta', index: block, delta: { type: 'input_json_delta', partial_json: '' } }));
      for (const part of split(t.arguments, t.argumentChunks ?? 3)) {
        events.push(event({ type: 'content_block_delta', index: block, delta: { type: 'input_json_delta', partial_json: part } }));
      }
      events.push(event({ type: 'content_block_stop', index: block }));
      block++;
    }
    events.push(event({ type: 'message_delta', delta: { stop_reason: stopReason, stop_sequence: null }, usage: { output_tokens: usage.output_tokens } }));
    events.push(event({ type: 'message_stop' }));

    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      'request-id': `req_${randomUUID()}`,
    });
    res.flushHeaders();
    if (answer.hangAfterHeaders) return;
    const errorEvent = event({ type: 'error', error: { type: answer.error?.type ?? 'overloaded_error', message: answer.error?.message ?? 'Overloaded' } });
    await writeEvents(res, record, events, answer, errorEvent, sleep);
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

type Block = { type?: unknown; text?: unknown; id?: unknown; tool_use_id?: unknown };

/** What the API would refuse in the body (400), or null. */
function requestProblem(raw: string, body: Record<string, unknown>, version: string): string | null {
  if (!raw || Object.keys(body).length === 0) return 'There was an issue with the request body: invalid JSON';
  if (typeof body.model !== 'string' || body.model === '') return 'model: Field required';
  if (!Number.isInteger(body.max_tokens) || (body.max_tokens as number) < 1) return 'max_tokens: Field required';
  if (body.temperature !== undefined) {
    if (version !== '2023-06-01') return 'temperature: Extra inputs are not permitted';
    if (/^claude-(?:opus-4-[78]|[a-z]+-[5-9])/.test(body.model)) return '`temperature` is deprecated for this model.';
    if (typeof body.temperature !== 'number' || body.temperature < 0 || body.temperature > 1) return 'temperature: Input should be less than or equal to 1';
  }
  if (body.system !== undefined && typeof body.system !== 'string' && !Array.isArray(body.system)) return 'system: Input should be a valid list';
  if (!Array.isArray(body.messages) || body.messages.length === 0) return 'messages: at least one message is required';
  const messages = body.messages as Array<{ role?: unknown; content?: unknown }>;
  let pendingToolUses: string[] = [];
  for (const [i, m] of messages.entries()) {
    if (m.role !== 'user' && m.role !== 'assistant') return `messages.${i}.role: Input should be 'user' or 'assistant'`;
    const blocks: Block[] = typeof m.content === 'string' ? [{ type: 'text', text: m.content }] : Array.isArray(m.content) ? (m.content as Block[]) : [];
    if (blocks.length === 0) return `messages.${i}: all messages must have non-empty content except for the optional final assistant message`;
    const results = blocks.filter((b) => b.type === 'tool_result').map((b) => String(b.tool_use_id));
    for (const id of results) {
      if (!pendingToolUses.includes(id)) {
        return `messages.${i}.content: unexpected \`tool_use_id\` found in \`tool_result\` blocks: ${id}. Each \`tool_result\` block must have a corresponding \`tool_use\` block in the previous message.`;
      }
    }
    const unanswered = pendingToolUses.filter((id) => !results.includes(id));
    if (unanswered.length) {
      return `messages.${i}: \`tool_use\` ids were found without \`tool_result\` blocks immediately after: ${unanswered.join(', ')}. Each \`tool_use\` block must have a corresponding \`tool_result\` block in the next message.`;
    }
    const firstOther = blocks.findIndex((b) => b.type !== 'tool_result');
    if (results.length && firstOther !== -1 && blocks.slice(firstOther).some((b) => b.type === 'tool_result')) {
      return `messages.${i}.content: tool_result blocks must come first in the content`;
    }
    for (const [j, b] of blocks.entries()) {
      if (b.type === 'text' && (typeof b.text !== 'string' || b.text.trim() === '')) return `messages.${i}.content.${j}.text: text content blocks must be non-empty`;
      if (b.type === 'tool_use' && m.role !== 'assistant') return `messages.${i}.content.${j}: tool_use blocks are only allowed in assistant messages`;
    }
    pendingToolUses = m.role === 'assistant' ? blocks.filter((b) => b.type === 'tool_use').map((b) => String(b.id)) : [];
  }
  if (pendingToolUses.length) return `messages: the last \`tool_use\` ids have no \`tool_result\` after them: ${pendingToolUses.join(', ')}`;
  if (body.tools !== undefined) {
    if (!Array.isArray(body.tools)) return 'tools: Input should be a valid list';
    for (const [i, t] of (body.tools as Array<{ name?: unknown; input_schema?: { type?: unknown } }>).entries()) {
      if (typeof t.name !== 'string' || !/^[a-zA-Z0-9_-]{1,128}$/.test(t.name)) return `tools.${i}.name: String should match pattern '^[a-zA-Z0-9_-]{1,128}$'`;
      if (t.input_schema?.type !== 'object') return `tools.${i}.input_schema.type: Input should be 'object'`;
    }
  }
  return null;
}
