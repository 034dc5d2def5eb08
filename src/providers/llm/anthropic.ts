/**
 * Anthropic's Messages API (`POST /v1/messages`), streamed (SSE), with tools.
 *
 * Text deltas are yielded as they arrive; a `tool_use` block's `input_json_delta`s are joined and
 * its call yielded once, complete, with the others at `message_stop`. The conversation is sent as
 * `turns.ts` writes it (system prompt apart, user and assistant turns alternating, tool results as
 * `tool_result` blocks of the next user turn). Failures are `ProviderError`s of provider
 * `anthropic`, so only the call or chat that asked ends.
 */
import type { Dispatcher } from 'undici';
import { declareProvider, vendorEndpoint, type VendorAccount } from '../declare.js';
import {
  ProviderError,
  type LlmEvent,
  type LlmProvider,
  type LlmRequest,
  type LlmToolCall,
  type ProviderErrorCode,
  type ProviderSettings,
  type VendorEndpoint,
} from '../types.js';
import { parseJson, streamSse, type SseMessage, type SseReader } from './sse.js';
import { argumentsObject, toTurns, type TurnPart } from './turns.js';

declare module '../types.js' {
  interface ProviderSettings {
    anthropic?: VendorEndpoint;
  }
}

const PROVIDER = 'anthropic';
/** Anthropic's account: `ANTHROPIC_API_KEY`, `ANTHROPIC_API_BASE`. */
export const ANTHROPIC: VendorAccount = { name: 'anthropic', label: 'Anthropic', baseUrl: 'https://api.anthropic.com' };
/** The API version every request names (`anthropic-version`). */
export const ANTHROPIC_VERSION = '2023-06-01';
/** `max_tokens` is required by the API; a spoken reply is far shorter. */
export const DEFAULT_MAX_TOKENS = 1024;

export const provider = declareProvider({
  catalog: {
    id: PROVIDER,
    kind: 'llm',
    description: 'Anthropic Claude, Messages API (streaming, tools).',
    // the Messages API models the official SDK (@anthropic-ai/sdk) lists, newest first, less the deprecated
    models: [
      'claude-opus-5-5', 'claude-sonnet-5-5', 'claude-haiku-5-5', 'claude-opus-5', 'claude-sonnet-5',
      'claude-fable-5-2', 'claude-fable-5-1', 'claude-fable-5', 'claude-mythos-5-2', 'claude-mythos-5-1',
      'claude-mythos-5', 'claude-opus-4-8', 'claude-opus-4-7', 'claude-opus-4-6', 'claude-sonnet-4-6',
      'claude-opus-4-5', 'claude-sonnet-4-5', 'claude-haiku-4-5',
    ],
    default_model: 'claude-haiku-4-5',
  },
  account: ANTHROPIC,
  create: (settings) => createAnthropicLlm(settings),
});

export interface AnthropicLlmOptions {
  /** undici dispatcher (connection pool); the global one by default. */
  dispatcher?: Dispatcher;
  /** Longest silence between two chunks of a started stream (default 30 s). */
  idleTimeoutMs?: number;
}

const DEFAULT_FIRST_TOKEN_MS = 10_000;
const DEFAULT_IDLE_MS = 30_000;

export function createAnthropicLlm(settings: ProviderSettings, options: AnthropicLlmOptions = {}): LlmProvider {
  return { id: PROVIDER, stream: (req) => streamMessages(settings, options, req) };
}

/** `<base>/v1/messages`, whether or not `base` already ends in `/v1`. */
export function messagesUrl(base: string): string {
  const trimmed = base.replace(/\/+$/, '');
  return /\/v1$/.test(trimmed) ? `${trimmed}/messages` : `${trimmed}/v1/messages`;
}

/** The request body the Messages API expects for our request. */
export function messagesBody(req: LlmRequest): Record<string, unknown> {
  const { config } = req;
  const { system, turns } = toTurns(req.messages);
  const body: Record<string, unknown> = {
    model: config.model ?? provider.catalog.default_model,
    max_tokens: config.max_completion_tokens ?? DEFAULT_MAX_TOKENS,
    stream: true,
    ...(system.length ? { system: system.join('\n\n') } : {}),
    messages: turns.map((t) => ({
      role: t.role,
      // tool results must open the user turn that answers the calls
      content: [...t.parts].sort((a, b) => rank(a) - rank(b)).map(toBlock),
    })),
  };
  if (req.tools.length > 0) {
    body.tools = req.tools.map((t) => ({
      name: t.name,
      ...(t.description !== undefined ? { description: t.description } : {}),
      input_schema: t.parameters ?? { type: 'object', properties: {} },
    }));
  }
  // Anthropic's range is 0 to 1; ours (OpenAI's) goes to 2. Newer models refuse any temperature.
  if (config.temperature !== undefined && takesTemperature(String(body.model))) body.temperature = Math.min(config.temperature, 1);
  return body;
}

/**
 * Whether the model takes `temperature`: Claude Opus 4.7 and 4.8 and every model of the fifth
 * generation on answer 400 "`temperature` is deprecated for this model", so it is left out there.
 */
export function takesTemperature(model: string): boolean {
  return !/^claude-(?:opus-4-[78]|[a-z]+-(?:[5-9]|\d{2,}))(?:-|$)/.test(model);
}

const rank = (part: TurnPart) => (part.type === 'tool_result' ? 0 : 1);

function toBlock(part: TurnPart): Record<string, unknown> {
  switch (part.type) {
    case 'text':
      return { type: 'text', text: part.text };
    case 'tool_call':
      return { type: 'tool_use', id: part.call.id, name: part.call.name, input: argumentsObject(part.call) };
    case 'tool_result':
      return { type: 'tool_result', tool_use_id: part.callId, content: part.content };
  }
}

async function* streamMessages(
  settings: ProviderSettings,
  options: AnthropicLlmOptions,
  req: LlmRequest,
): AsyncGenerator<LlmEvent, void, undefined> {
  const { baseUrl, apiKey } = vendorEndpoint(settings, ANTHROPIC);
  if (!apiKey) throw new ProviderError('PROVIDER_AUTH', PROVIDER, 'no Anthropic API key configured (ANTHROPIC_API_KEY)');
  yield* streamSse(
    {
      provider: PROVIDER,
      url: messagesUrl(baseUrl),
      headers: { 'x-api-key': apiKey, 'anthropic-version': ANTHROPIC_VERSION },
      body: JSON.stringify(messagesBody(req)),
      signal: req.signal,
      firstTokenMs: settings.timeouts?.firstTokenMs ?? DEFAULT_FIRST_TOKEN_MS,
      idleMs: options.idleTimeoutMs ?? DEFAULT_IDLE_MS,
      dispatcher: options.dispatcher,
      httpError: anthropicHttpError,
    },
    new MessageReader(),
  );
}

/** `{"type":"error","error":{"type","message"}}` with its status; 401/403 are the key's fault. */
export function anthropicHttpError(status: number, text: string): ProviderError {
  const detail = errorMessage(text) ?? `HTTP ${status}`;
  const code: ProviderErrorCode = status === 401 || status === 403 ? 'PROVIDER_AUTH' : 'PROVIDER_HTTP_ERROR';
  return new ProviderError(code, PROVIDER, `anthropic answered ${status}: ${detail}`, status);
}

function errorMessage(text: string): string | undefined {
  try {
    const parsed = JSON.parse(text) as { error?: { type?: unknown; message?: unknown } };
    const e = parsed.error;
    if (e && typeof e.message === 'string') return typeof e.type === 'string' ? `${e.type}: ${e.message}` : e.message;
  } catch {
    // not JSON
  }
  const trimmed = text.trim();
  return trimmed ? trimmed.slice(0, 300) : undefined;
}

interface StreamEvent {
  type?: string;
  index?: number;
  content_block?: { type?: string; text?: string; id?: string; name?: string; input?: unknown };
  delta?: { type?: string; text?: string; partial_json?: string; stop_reason?: string | null };
  error?: { type?: string; message?: string };
  /** `message_start`: the message's usage so far (input tokens); `message_delta`: its output tokens. */
  message?: { usage?: AnthropicUsage };
  usage?: AnthropicUsage;
}

interface AnthropicUsage {
  input_tokens?: number;
  cache_creation_input_tokens?: number;
  cache_read_input_tokens?: number;
  output_tokens?: number;
}

/** The stop reasons in our (OpenAI's) words; others as Anthropic says them. */
const FINISH_REASONS: Record<string, string> = { end_turn: 'stop', stop_sequence: 'stop', tool_use: 'tool_calls', max_tokens: 'length' };

/**
 * One message's events: `message_start`, per content block `content_block_start`, its deltas
 * (`text_delta`, `input_json_delta`; thinking and citations are skipped) and
 * `content_block_stop`, then `message_delta` (the stop reason) and `message_stop`. `ping` is
 * ignored, an `error` event fails the stream, event types we do not know are skipped.
 */
class MessageReader implements SseReader {
  private readonly calls = new Map<number, LlmToolCall & { input: unknown }>();
  private stopReason: string | null = null;
  private stopped = false;
  private inputTokens = 0;
  private outputTokens = 0;
  private counted = false;

  *read(message: SseMessage): Iterable<LlmEvent> {
    const event = parseJson(PROVIDER, message.data) as StreamEvent | null;
    const type = event?.type ?? message.event;
    if (!event || typeof event !== 'object') {
      throw new ProviderError('PROVIDER_PROTOCOL', PROVIDER, `unreadable stream event: ${message.data.slice(0, 200)}`);
    }
    switch (type) {
      case 'error': {
        const e = event.error;
        const detail = e?.message ? `${e.type ?? 'error'}: ${e.message}` : 'error in stream';
        throw new ProviderError('PROVIDER_HTTP_ERROR', PROVIDER, `anthropic stream error: ${detail}`);
      }
      case 'content_block_start': {
        const block = event.content_block;
        const index = event.index ?? this.calls.size;
        if (block?.type === 'text' && block.text) yield { type: 'text', text: block.text };
        if (block?.type === 'tool_use') {
          this.calls.set(index, { id: block.id ?? `toolu_${index}`, name: block.name ?? '', arguments: '', input: block.input });
        }
        break;
      }
      case 'content_block_delta': {
        const delta = event.delta;
        if (delta?.type === 'text_delta' && delta.text) yield { type: 'text', text: delta.text };
        if (delta?.type === 'input_json_delta' && delta.partial_json) {
          const call = this.calls.get(event.index ?? -1);
          if (call) call.arguments += delta.partial_json;
        }
        break;
      }
      case 'message_start': {
        // input tokens are the message's, cached or not; output tokens come with message_delta
        const u = event.message?.usage;
        if (u) {
          this.counted = true;
          this.inputTokens = (u.input_tokens ?? 0) + (u.cache_creation_input_tokens ?? 0) + (u.cache_read_input_tokens ?? 0);
          this.outputTokens = u.output_tokens ?? 0;
        }
        break;
      }
      case 'message_delta':
        if (event.delta?.stop_reason) this.stopReason = event.delta.stop_reason;
        if (typeof event.usage?.output_tokens === 'number') {
          this.counted = true;
          this.outputTokens = event.usage.output_tokens;
        }
        break;
      case 'message_stop':
        this.stopped = true;
        break;
      // content_block_stop, ping and newer events carry nothing we use
    }
  }

  complete(): boolean {
    return this.stopped;
  }

  *finish(): Iterable<LlmEvent> {
    if (!this.stopped) throw new ProviderError('PROVIDER_DISCONNECTED', PROVIDER, 'anthropic ended the stream before message_stop');
    if (this.calls.size > 0) {
      const calls = [...this.calls.entries()]
        .sort(([a], [b]) => a - b)
        .map(([, { input, ...call }]) => ({
          ...call,
          // a block without deltas carries its whole input at its start
          arguments: call.arguments || JSON.stringify(input && typeof input === 'object' ? input : {}),
        }));
      yield { type: 'tool_calls', calls };
    }
    yield {
      type: 'done',
      finishReason: this.stopReason ? (FINISH_REASONS[this.stopReason] ?? this.stopReason) : null,
      ...(this.counted ? { usage: { inputTokens: this.inputTokens, outputTokens: this.outputTokens } } : {}),
    };
  }
}
