/**
 * OpenAI chat completions, streamed (SSE), with tools. Serves provider `openai` and provider
 * `custom-llm` (any OpenAI-compatible server — Ollama, vLLM, llama.cpp — at `llm_config.url`).
 *
 * Text deltas are yielded as they arrive; tool-call deltas are merged by `index` and yielded once,
 * complete, at the end. Aborting the request's signal (barge-in) destroys the response body at
 * once, so the connection is released, and the iterator throws `PROVIDER_ABORTED`.
 */
import { request, type Dispatcher } from 'undici';
import { defaultCatalog } from '../../../engine/catalog.js';
import { declareProvider, vendorEndpoint, type VendorAccount } from '../declare.js';
import {
  ProviderError,
  type LlmEvent,
  type LlmMessage,
  type LlmProvider,
  type LlmRequest,
  type LlmToolCall,
  type LlmTokenUsage,
  type ProviderErrorCode,
  type ProviderSettings,
  type VendorEndpoint,
} from '../types.js';

declare module '../types.js' {
  interface ProviderSettings {
    openai?: VendorEndpoint;
  }
}

/** OpenAI's account: `OPENAI_API_KEY`, `OPENAI_API_BASE` (also read by its TTS and realtime model). */
export const OPENAI: VendorAccount = { name: 'openai', label: 'OpenAI', baseUrl: 'https://api.openai.com' };

export const provider = declareProvider({
  catalog: {
    id: 'openai',
    kind: 'llm',
    description: 'OpenAI chat completions (streaming, tools).',
    models: [
      'gpt-4o', 'gpt-4o-mini', 'gpt-4.1', 'gpt-4.1-mini', 'gpt-4.1-nano', 'gpt-5', 'gpt-5-mini',
      'gpt-5-nano',
    ],
    default_model: 'gpt-4o-mini',
  },
  account: OPENAI,
  create: (settings) => createOpenAiLlm(settings, 'openai'),
});

export type OpenAiLlmId = 'openai' | 'custom-llm';

export interface OpenAiLlmOptions {
  /** Bearer key for `custom-llm` servers (the OpenAI key is never sent to them). */
  customApiKey?: string;
  /** undici dispatcher (connection pool); the global one by default. */
  dispatcher?: Dispatcher;
  /** Longest silence between two chunks of a started stream (default 30 s). */
  idleTimeoutMs?: number;
}

const DEFAULT_FIRST_TOKEN_MS = 10_000;
const DEFAULT_IDLE_MS = 30_000;
const MAX_ERROR_BODY = 64 * 1024;

export function createOpenAiLlm(
  settings: ProviderSettings,
  id: OpenAiLlmId = 'openai',
  options: OpenAiLlmOptions = {},
): LlmProvider {
  return {
    id,
    stream: (req) => streamChat(settings, id, options, req),
  };
}

/** `<base>/v1/chat/completions`, whether or not `base` already ends in `/v1`. */
export function chatCompletionsUrl(base: string): string {
  const trimmed = base.replace(/\/+$/, '');
  return /\/v1$/.test(trimmed) ? `${trimmed}/chat/completions` : `${trimmed}/v1/chat/completions`;
}

/** The request body OpenAI expects for our request. */
export function chatCompletionsBody(id: OpenAiLlmId, req: LlmRequest): Record<string, unknown> {
  const { config } = req;
  const model = config.model ?? defaultModel(id);
  const body: Record<string, unknown> = {
    ...(model ? { model } : {}),
    stream: true,
    stream_options: { include_usage: true },
    messages: req.messages.map(toOpenAiMessage),
  };
  if (req.tools.length > 0) {
    body.tools = req.tools.map((t) => ({
      type: 'function',
      function: {
        name: t.name,
        ...(t.description !== undefined ? { description: t.description } : {}),
        parameters: t.parameters ?? { type: 'object', properties: {} },
      },
    }));
  }
  if (config.max_completion_tokens !== undefined) {
    body.max_completion_tokens = config.max_completion_tokens;
    // Many OpenAI-compatible servers only know the older name.
    if (id === 'custom-llm') body.max_tokens = config.max_completion_tokens;
  }
  if (config.temperature !== undefined) body.temperature = config.temperature;
  return body;
}

function defaultModel(id: OpenAiLlmId): string | null {
  return defaultCatalog.providers.find((p) => p.kind === 'llm' && p.id === id)?.default_model ?? null;
}

function toOpenAiMessage(m: LlmMessage): Record<string, unknown> {
  switch (m.role) {
    case 'system':
    case 'user':
      return { role: m.role, content: m.content };
    case 'assistant':
      return {
        role: 'assistant',
        content: m.content,
        ...(m.tool_calls?.length
          ? {
              tool_calls: m.tool_calls.map((c) => ({
                id: c.id,
                type: 'function',
                function: { name: c.name, arguments: c.arguments },
              })),
            }
          : {}),
      };
    case 'tool':
      return { role: 'tool', tool_call_id: m.tool_call_id, content: m.content };
  }
}

async function* streamChat(
  settings: ProviderSettings,
  id: OpenAiLlmId,
  options: OpenAiLlmOptions,
  req: LlmRequest,
): AsyncGenerator<LlmEvent, void, undefined> {
  const err = (code: ProviderErrorCode, message: string, status?: number, cause?: unknown) =>
    new ProviderError(code, id, message, status, cause === undefined ? undefined : { cause });

  let base: string;
  let apiKey: string | undefined;
  if (id === 'custom-llm') {
    if (!req.config.url) throw err('PROVIDER_HTTP_ERROR', 'llm_config.url is required for custom-llm');
    base = req.config.url;
    apiKey = options.customApiKey;
  } else {
    ({ baseUrl: base, apiKey } = vendorEndpoint(settings, OPENAI));
    if (!apiKey) throw err('PROVIDER_AUTH', 'no OpenAI API key configured (OPENAI_API_KEY)');
  }
  if (req.signal?.aborted) throw err('PROVIDER_ABORTED', 'the request was cancelled');

  // One controller for undici, aborted by the caller's signal or by our timers.
  const controller = new AbortController();
  let stopReason: 'aborted' | 'first-token' | 'idle' | undefined;
  const stop = (reason: NonNullable<typeof stopReason>) => {
    stopReason ??= reason;
    controller.abort();
  };
  const onAbort = () => stop('aborted');
  req.signal?.addEventListener('abort', onAbort, { once: true });
  const firstTokenMs = settings.timeouts?.firstTokenMs ?? DEFAULT_FIRST_TOKEN_MS;
  const idleMs = options.idleTimeoutMs ?? DEFAULT_IDLE_MS;
  let timer: NodeJS.Timeout | undefined = setTimeout(() => stop('first-token'), firstTokenMs);

  const failure = (cause: unknown): ProviderError => {
    if (cause instanceof ProviderError) return cause;
    if (stopReason === 'aborted') return err('PROVIDER_ABORTED', 'the request was cancelled');
    if (stopReason === 'first-token') {
      return err('PROVIDER_TIMEOUT', `no answer within ${firstTokenMs} ms`, undefined, cause);
    }
    if (stopReason === 'idle') {
      return err('PROVIDER_TIMEOUT', `the stream stalled for ${idleMs} ms`, undefined, cause);
    }
    const code = (cause as { code?: string } | undefined)?.code;
    const message = cause instanceof Error ? cause.message : String(cause);
    if (code === 'UND_ERR_CONNECT_TIMEOUT' || code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT') {
      return err('PROVIDER_TIMEOUT', message, undefined, cause);
    }
    return err('PROVIDER_DISCONNECTED', `connection lost: ${message}`, undefined, cause);
  };

  let body: Dispatcher.ResponseData['body'] | undefined;
  try {
    let res: Dispatcher.ResponseData;
    try {
      res = await request(chatCompletionsUrl(base), {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'text/event-stream',
          ...(apiKey ? { authorization: `Bearer ${apiKey}` } : {}),
        },
        body: JSON.stringify(chatCompletionsBody(id, req)),
        signal: controller.signal,
        // Our own timers bound the wait; undici's would only give vaguer errors.
        headersTimeout: 0,
        bodyTimeout: 0,
        ...(options.dispatcher ? { dispatcher: options.dispatcher } : {}),
      });
    } catch (cause) {
      throw failure(cause);
    }
    body = res.body;

    if (res.statusCode < 200 || res.statusCode >= 300) {
      const text = await readErrorBody(res.body).catch((cause: unknown) => {
        throw failure(cause);
      });
      const detail = vendorErrorMessage(text) ?? `HTTP ${res.statusCode}`;
      const code = res.statusCode === 401 || res.statusCode === 403 ? 'PROVIDER_AUTH' : 'PROVIDER_HTTP_ERROR';
      throw err(code, `${id} answered ${res.statusCode}: ${detail}`, res.statusCode);
    }

    const toolCalls = new Map<number, LlmToolCall>();
    let finishReason: string | null = null;
    let usage: LlmTokenUsage | undefined;
    let finished = false;
    let sawDone = false;
    const decoder = new TextDecoder();
    let buffer = '';
    let data: string[] = [];

    const finish = function* (): Generator<LlmEvent> {
      if (toolCalls.size > 0) {
        const calls = [...toolCalls.entries()]
          .sort(([a], [b]) => a - b)
          .map(([index, c]) => ({ ...c, id: c.id || `call_${index}` }));
        yield { type: 'tool_calls', calls };
      }
      yield { type: 'done', finishReason, ...(usage ? { usage } : {}) };
    };

    /** One SSE event's data: a chunk, `[DONE]`, or an error object. */
    const handle = function* (payload: string): Generator<LlmEvent> {
      if (payload === '[DONE]') {
        sawDone = true;
        return;
      }
      let chunk: ChatCompletionChunk;
      try {
        chunk = JSON.parse(payload) as ChatCompletionChunk;
      } catch {
        throw err('PROVIDER_PROTOCOL', `unreadable stream chunk: ${payload.slice(0, 200)}`);
      }
      if (chunk.error) {
        const message = vendorErrorMessage(JSON.stringify(chunk)) ?? 'error in stream';
        throw err('PROVIDER_HTTP_ERROR', `${id} stream error: ${message}`);
      }
      if (chunk.usage && typeof chunk.usage.prompt_tokens === 'number') {
        usage = { inputTokens: chunk.usage.prompt_tokens, outputTokens: chunk.usage.completion_tokens ?? 0 };
      }
      for (const choice of chunk.choices ?? []) {
        if (choice.index !== undefined && choice.index !== 0) continue;
        const delta = choice.delta;
        if (typeof delta?.content === 'string' && delta.content !== '') {
          yield { type: 'text', text: delta.content };
        }
        for (const [position, d] of (delta?.tool_calls ?? []).entries()) {
          const index = typeof d.index === 'number' ? d.index : position;
          let call = toolCalls.get(index);
          if (!call) {
            call = { id: '', name: '', arguments: '' };
            toolCalls.set(index, call);
          }
          if (d.id && !call.id) call.id = d.id;
          if (d.function?.name && !call.name) call.name = d.function.name;
          if (d.function?.arguments) call.arguments += d.function.arguments;
        }
        if (choice.finish_reason) {
          finishReason = choice.finish_reason;
          finished = true;
        }
      }
    };

    let completed = false;
    let started = false;
    try {
      for await (const raw of res.body) {
        if (started) timer?.refresh();
        else {
          started = true;
          clearTimeout(timer);
          timer = setTimeout(() => stop('idle'), idleMs);
        }
        if (completed) continue; // drain what follows `[DONE]` so the connection can be reused
        buffer += decoder.decode(raw as Buffer, { stream: true });
        let newline: number;
        while (!completed && (newline = buffer.search(/\r\n|\r|\n/)) !== -1) {
          const line = buffer.slice(0, newline);
          buffer = buffer.slice(newline + (buffer.startsWith('\r\n', newline) ? 2 : 1));
          if (line === '') {
            if (data.length === 0) continue;
            const payload = data.join('\n');
            data = [];
            yield* handle(payload);
            if (sawDone) {
              completed = true;
              yield* finish();
            }
          } else if (line.startsWith('data:')) {
            data.push(line.slice(line.startsWith('data: ') ? 6 : 5));
          }
          // `event:`, `id:`, `retry:` and `:` comments carry nothing we use.
        }
      }
    } catch (cause) {
      throw failure(cause);
    }
    if (completed) return;
    if (data.length > 0) yield* handle(data.join('\n'));
    if (!sawDone && !finished) {
      throw err('PROVIDER_DISCONNECTED', `${id} ended the stream before it was complete`);
    }
    yield* finish();
  } finally {
    if (timer) clearTimeout(timer);
    req.signal?.removeEventListener('abort', onAbort);
    // Releases the socket when we stop early (abort, error, consumer stopped iterating).
    if (body && !body.readableEnded && !body.destroyed) body.destroy();
  }
}

interface ChatCompletionChunk {
  /** With `stream_options.include_usage`: the last chunk's (its `choices` empty). */
  usage?: { prompt_tokens?: number; completion_tokens?: number } | null;
  choices?: Array<{
    index?: number;
    delta?: {
      content?: string | null;
      tool_calls?: Array<{
        index?: number;
        id?: string;
        type?: string;
        function?: { name?: string; arguments?: string };
      }>;
    };
    finish_reason?: string | null;
  }>;
  error?: unknown;
}

async function readErrorBody(body: Dispatcher.ResponseData['body']): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    const buf = chunk as Buffer;
    if (size < MAX_ERROR_BODY) chunks.push(buf);
    size += buf.length;
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** OpenAI's `{error:{message,type,code}}`, or the `{error:"..."}` some compatible servers send. */
function vendorErrorMessage(text: string): string | undefined {
  try {
    const parsed = JSON.parse(text) as { error?: unknown; message?: unknown; detail?: unknown };
    const e = parsed.error;
    if (typeof e === 'string') return e;
    if (e && typeof e === 'object' && typeof (e as { message?: unknown }).message === 'string') {
      return (e as { message: string }).message;
    }
    if (typeof parsed.message === 'string') return parsed.message;
    if (typeof parsed.detail === 'string') return parsed.detail;
  } catch {
    // not JSON
  }
  const trimmed = text.trim();
  return trimmed ? trimmed.slice(0, 300) : undefined;
}
