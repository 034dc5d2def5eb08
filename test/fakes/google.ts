/**
 * A local stand-in for the Gemini API's `models/{model}:streamGenerateContent` (and
 * `:generateContent`), faithful enough that the official `@google/genai` SDK works against it.
 *
 * It checks the key as Google does (`x-goog-api-key` or `?key=`: none is 403
 * `PERMISSION_DENIED`, a wrong one 400 `INVALID_ARGUMENT` with reason `API_KEY_INVALID`), and
 * what our adapter must get right: non-empty `contents` of `user` and `model` turns with
 * non-empty parts, function declarations with valid names whose `parameters` (the OpenAPI
 * subset) is not an object without properties, `functionResponse.response` an object, and for
 * `gemini-3*` models the first `functionCall` of each model turn of the current turn (after the
 * last user text) sent back with the `thoughtSignature` the fake gave it (all 400 `INVALID_ARGUMENT`, Google's body).
 *
 * With `alt=sse` the answer is Server-Sent Events, one `GenerateContentResponse` a `data:` line
 * (ended by `\r\n\r\n`, as Google sends them): one chunk per text piece, the function calls
 * whole in one chunk (a `thoughtSignature` on the first), `finishReason` and `usageMetadata` on
 * the last. Without it, the same chunks as one JSON array; `:generateContent` answers one
 * response. A mid-stream error is `data: {"error":{...}}`. Per request (the last script repeats,
 * or `answerFor` chooses from the request): text and function calls, and every fault of
 * test/fakes/sse.ts.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { fakeTimers, listenLocal, readBody, shutDown, trackConnections } from './http.js';
import { recordRequest, writeEvents, type FakeStreamRequest, type StreamFaults } from './sse.js';

export interface FakeFunctionCall {
  name: string;
  args: Record<string, unknown>;
  /** Gemini gives ids in some APIs only; none by default. */
  id?: string;
}

export interface FakeGeminiAnswer extends StreamFaults {
  /** Answer with this HTTP status and Google's error body instead of a response. */
  status?: number;
  error?: { message: string; status?: string };
  /** Text pieces, one chunk each. */
  text?: string[];
  functionCalls?: FakeFunctionCall[];
  /** Default `STOP`. */
  finishReason?: string;
  /** A blocked prompt: no candidates, `promptFeedback.blockReason`. */
  blockReason?: string;
}

export interface FakeGoogleScript {
  /** The key required (default `AIza-test`). */
  apiKey?: string;
  answers?: FakeGeminiAnswer[];
  answerFor?: (request: { index: number; model: string; body: Record<string, unknown> }) => FakeGeminiAnswer | undefined;
  record?: boolean;
}

export interface FakeGoogle {
  /** `http://127.0.0.1:<port>` (the SDK's `httpOptions.baseUrl`, and `GOOGLE_API_BASE`). */
  url: string;
  apiKey: string;
  requests: FakeStreamRequest[];
  /** The thought signatures handed out, which must come back with their calls (gemini-3*). */
  signatures: Set<string>;
  openSockets(): number;
  close(): Promise<void>;
}

const STATUS_NAMES: Record<number, string> = {
  400: 'INVALID_ARGUMENT',
  401: 'UNAUTHENTICATED',
  403: 'PERMISSION_DENIED',
  404: 'NOT_FOUND',
  429: 'RESOURCE_EXHAUSTED',
  500: 'INTERNAL',
  503: 'UNAVAILABLE',
  504: 'DEADLINE_EXCEEDED',
};

const ROUTE = /^\/v1beta\/models\/([^/:]+):(streamGenerateContent|generateContent)$/;

export async function startFakeGoogle(script: FakeGoogleScript = {}): Promise<FakeGoogle> {
  const apiKey = script.apiKey ?? 'AIza-test';
  const requests: FakeStreamRequest[] = [];
  const signatures = new Set<string>();
  const keep = script.record !== false;
  let seen = 0;
  const { pending: timers, sleep } = fakeTimers();

  const server = createServer((req, res) => {
    void handle(req, res).catch(() => res.destroy());
  });
  const sockets = trackConnections(server);

  const errorBody = (status: number, message: string, name = STATUS_NAMES[status] ?? 'UNKNOWN', details?: unknown[]) =>
    ({ error: { code: status, message, status: name, ...(details ? { details } : {}) } });
  const sendError = (res: ServerResponse, status: number, message: string, name?: string, details?: unknown[]) => {
    res.writeHead(status, { 'content-type': 'application/json; charset=UTF-8' });
    res.end(JSON.stringify(errorBody(status, message, name, details), null, 2));
  };

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const raw = await readBody(req);
    const record = recordRequest(req, res, raw);
    const index = keep ? requests.push(record) - 1 : seen++;
    const url = new URL(req.url ?? '/', 'http://localhost');
    const route = ROUTE.exec(url.pathname);
    if (req.method !== 'POST' || !route) return sendError(res, 404, `Method not found: ${req.method} ${url.pathname}`);
    const key = req.headers['x-goog-api-key'] ?? url.searchParams.get('key');
    if (!key) {
      return sendError(res, 403, "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API.");
    }
    if (key !== apiKey) {
      return sendError(res, 400, 'API key not valid. Please pass a valid API key.', 'INVALID_ARGUMENT', [
        { '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason: 'API_KEY_INVALID', domain: 'googleapis.com', metadata: { service: 'generativelanguage.googleapis.com' } },
      ]);
    }
    const model = decodeURIComponent(route[1]!);
    const problem = requestProblem(raw, record.body, model, signatures);
    if (problem) return sendError(res, 400, problem);

    const all = script.answers ?? [{ text: ['Hello', '!'] }];
    const answer = script.answerFor?.({ index, model, body: record.body }) ?? all[Math.min(index, all.length - 1)] ?? {};
    if (answer.hang) return;
    if (answer.headersDelayMs) await sleep(answer.headersDelayMs);
    if (record.closed) return;
    if (answer.garbage) {
      res.writeHead(answer.garbage.status ?? 200, { 'content-type': answer.garbage.contentType });
      res.end(answer.garbage.body);
      return;
    }
    if (answer.status && answer.status >= 400) {
      return sendError(res, answer.status, answer.error?.message ?? 'Internal error encountered.', answer.error?.status);
    }

    const chunks = responseChunks(answer, model, signatures);
    const streaming = route[2] === 'streamGenerateContent';
    if (!streaming) {
      const merged = { ...chunks.at(-1), candidates: chunks.at(-1)?.candidates?.map((c) => ({ ...c, content: { role: 'model', parts: chunks.flatMap((k) => k.candidates?.[0]?.content.parts ?? []) } })) };
      res.writeHead(200, { 'content-type': 'application/json; charset=UTF-8' });
      res.end(JSON.stringify(merged));
      return;
    }
    if (url.searchParams.get('alt') !== 'sse') {
      res.writeHead(200, { 'content-type': 'application/json; charset=UTF-8' });
      res.end(JSON.stringify(chunks));
      return;
    }
    res.writeHead(200, { 'content-type': 'text/event-stream', 'x-content-type-options': 'nosniff' });
    res.flushHeaders();
    if (answer.hangAfterHeaders) return;
    const events = chunks.map((c) => `data: ${JSON.stringify(c)}\r\n\r\n`);
    const errorEvent = `data: ${JSON.stringify(errorBody(answer.error?.status === 'UNAVAILABLE' ? 503 : 500, answer.error?.message ?? 'Internal error encountered.', answer.error?.status))}\r\n\r\n`;
    await writeEvents(res, record, events, answer, errorEvent, sleep);
  }

  const { url } = await listenLocal(server);
  return {
    url,
    apiKey,
    requests,
    signatures,
    openSockets: () => sockets.size,
    close: () => shutDown(server, { timers, connections: sockets }),
  };
}

interface Chunk {
  candidates?: Array<{ content: { role: string; parts: Array<Record<string, unknown>> }; finishReason?: string; index: number }>;
  promptFeedback?: { blockReason: string };
  usageMetadata?: Record<string, number>;
  modelVersion: string;
  responseId: string;
}

function responseChunks(answer: FakeGeminiAnswer, model: string, signatures: Set<string>): Chunk[] {
  const responseId = randomUUID().replace(/-/g, '').slice(0, 20);
  const base = { modelVersion: model, responseId };
  const usage = { promptTokenCount: 20, candidatesTokenCount: 5, totalTokenCount: 25 };
  if (answer.blockReason) return [{ ...base, promptFeedback: { blockReason: answer.blockReason }, usageMetadata: usage }];
  const partsList: Array<Array<Record<string, unknown>>> = (answer.text ?? []).map((t) => [{ text: t }]);
  const calls = answer.functionCalls ?? [];
  if (calls.length) {
    partsList.push(
      calls.map((c, i) => {
        const part: Record<string, unknown> = { functionCall: { name: c.name, args: c.args, ...(c.id ? { id: c.id } : {}) } };
        if (i === 0) {
          const signature = Buffer.from(`sig-${randomUUID()}`).toString('base64');
          signatures.add(signature);
          part.thoughtSignature = signature;
        }
        return part;
      }),
    );
  }
  if (partsList.length === 0) partsList.push([{ text: '' }]);
  return partsList.map((parts, i) => ({
    ...base,
    candidates: [{ content: { role: 'model', parts }, ...(i === partsList.length - 1 ? { finishReason: answer.finishReason ?? 'STOP' } : {}), index: 0 }],
    ...(i === partsList.length - 1 ? { usageMetadata: usage } : {}),
  }));
}

type Part = { text?: unknown; functionCall?: { name?: unknown }; functionResponse?: { name?: unknown; response?: unknown }; thoughtSignature?: unknown };

/** What the API would refuse in the body (400 INVALID_ARGUMENT), or null. */
function requestProblem(raw: string, body: Record<string, unknown>, model: string, signatures: Set<string>): string | null {
  if (!raw || Object.keys(body).length === 0) return 'Invalid JSON payload received. Unexpected end of string.';
  if (!Array.isArray(body.contents) || body.contents.length === 0) return '* GenerateContentRequest.contents: contents is not specified';
  const contents = body.contents as Array<{ role?: unknown; parts?: unknown }>;
  // signatures are checked in the current turn: after the last user turn with text in it
  const turnStart = contents.findLastIndex((c) => c.role === 'user' && Array.isArray(c.parts) && (c.parts as Part[]).some((p) => typeof p.text === 'string'));
  for (const [i, c] of contents.entries()) {
    if (c.role !== 'user' && c.role !== 'model') return `Please use a valid role: user, model. (contents[${i}].role)`;
    if (!Array.isArray(c.parts) || c.parts.length === 0) return `* GenerateContentRequest.contents[${i}].parts: contents.parts must not be empty.`;
    for (const [j, p] of (c.parts as Part[]).entries()) {
      const at = `contents[${i}].parts[${j}]`;
      if (p.functionCall) {
        if (c.role !== 'model') return `* GenerateContentRequest.${at}.function_call: function calls must be in a model turn`;
        const first = j === 0 || !(c.parts as Part[])[j - 1]?.functionCall;
        if (first && i > turnStart && model.startsWith('gemini-3') && !(typeof p.thoughtSignature === 'string' && signatures.has(p.thoughtSignature))) {
          return `Function call is missing a thought_signature in functionCall parts. This is required for tools to work correctly, and missing thought_signature may lead to degraded model performance. Additional data, function call \`default_api:${String(p.functionCall.name)}\` , position ${i + 1}. Please refer to https://ai.google.dev/gemini-api/docs/thought-signatures for more details.`;
        }
      } else if (p.functionResponse) {
        const r = p.functionResponse.response;
        if (typeof p.functionResponse.name !== 'string') return `* GenerateContentRequest.${at}.function_response.name: Name cannot be empty.`;
        if (!r || typeof r !== 'object' || Array.isArray(r)) return `Invalid value at '${at}.function_response.response' (type.googleapis.com/google.protobuf.Struct)`;
      } else if (typeof p.text !== 'string') {
        return `* GenerateContentRequest.${at}.data: required oneof field 'data' must have one initialized field`;
      }
    }
  }
  for (const [i, tool] of ((body.tools ?? []) as Array<{ functionDeclarations?: Array<{ name?: unknown; parameters?: { type?: unknown; properties?: Record<string, unknown> } }> }>).entries()) {
    for (const [j, d] of (tool.functionDeclarations ?? []).entries()) {
      const at = `tools[${i}].function_declarations[${j}]`;
      if (typeof d.name !== 'string' || !/^[a-zA-Z_][a-zA-Z0-9_.:-]{0,63}$/.test(d.name)) {
        return `* GenerateContentRequest.${at}.name: Invalid function name. Must start with a letter or an underscore. Must be alphameric (a-z, A-Z, 0-9), underscores (_), dots (.), colons (:), or dashes (-), with a maximum length of 64.`;
      }
      const p = d.parameters;
      if (p && String(p.type).toUpperCase() === 'OBJECT' && (!p.properties || Object.keys(p.properties).length === 0)) {
        return `* GenerateContentRequest.${at}.parameters.properties: should be non-empty for OBJECT type`;
      }
    }
  }
  return null;
}
