/**
 * Google Gemini, `models/{model}:streamGenerateContent?alt=sse` of the Gemini API, with function
 * calling.
 *
 * Each event is a `GenerateContentResponse`: its first candidate's `text` parts are yielded as
 * they arrive (thought summaries skipped), its `functionCall` parts (whole, never split) are
 * gathered and yielded once at the end, with `done` after the `finishReason`. The conversation
 * is sent as `turns.ts` writes it (`systemInstruction` apart, `user` and `model` turns, tool
 * answers as `functionResponse` parts). A call's `thoughtSignature` (Gemini 3 refuses a history
 * whose function calls lack theirs) rides on the call as `vendorData` and is sent back with it.
 * Failures are `ProviderError`s of provider `google`, so only the call or chat that asked ends.
 */
import { randomBytes } from 'node:crypto';
import type { Dispatcher } from 'undici';
import { declareProvider, vendorEndpoint, type VendorAccount } from '../declare.js';
import {
  ProviderError,
  type LlmEvent,
  type LlmFunction,
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
    google?: VendorEndpoint;
  }
}

const PROVIDER = 'google';
/** Google's account (the Gemini API): `GOOGLE_API_KEY`, `GOOGLE_API_BASE`. */
export const GOOGLE: VendorAccount = { name: 'google', label: 'Google', baseUrl: 'https://generativelanguage.googleapis.com' };

export const provider = declareProvider({
  catalog: {
    id: PROVIDER,
    kind: 'llm',
    description: 'Google Gemini, Gemini API streamGenerateContent (streaming, function calling).',
    // the text models with function calling the official SDK (@google/genai) names, newest first
    models: [
      'gemini-3.8-flash', 'gemini-3.7-flash', 'gemini-3.6-flash', 'gemini-3.5-flash', 'gemini-3.5-flash-lite',
      'gemini-3.1-pro-preview', 'gemini-3.1-flash-lite', 'gemini-3-flash-preview', 'gemini-2.5-pro',
      'gemini-2.5-flash', 'gemini-2.5-flash-lite', 'gemini-pro-latest', 'gemini-flash-latest',
      'gemini-flash-lite-latest',
    ],
    default_model: 'gemini-2.5-flash',
  },
  account: GOOGLE,
  create: (settings) => createGoogleLlm(settings),
});

export interface GoogleLlmOptions {
  /** undici dispatcher (connection pool); the global one by default. */
  dispatcher?: Dispatcher;
  /** Longest silence between two chunks of a started stream (default 30 s). */
  idleTimeoutMs?: number;
}

const DEFAULT_FIRST_TOKEN_MS = 10_000;
const DEFAULT_IDLE_MS = 30_000;

export function createGoogleLlm(settings: ProviderSettings, options: GoogleLlmOptions = {}): LlmProvider {
  return { id: PROVIDER, stream: (req) => streamGenerate(settings, options, req) };
}

/** `<base>/v1beta/models/<model>:streamGenerateContent?alt=sse` (a base with its version is kept). */
export function streamGenerateUrl(base: string, model: string): string {
  const trimmed = base.replace(/\/+$/, '');
  const root = /\/v1(beta|alpha)?$/.test(trimmed) ? trimmed : `${trimmed}/v1beta`;
  return `${root}/models/${encodeURIComponent(model)}:streamGenerateContent?alt=sse`;
}

/** The request body `streamGenerateContent` expects for our request. */
export function generateBody(req: LlmRequest): Record<string, unknown> {
  const { config } = req;
  const { system, turns } = toTurns(req.messages);
  const body: Record<string, unknown> = {
    contents: turns.map((t) => ({ role: t.role === 'assistant' ? 'model' : 'user', parts: t.parts.map(toPart) })),
  };
  if (system.length) body.systemInstruction = { parts: [{ text: system.join('\n\n') }] };
  if (req.tools.length > 0) body.tools = [{ functionDeclarations: req.tools.map(toDeclaration) }];
  const generation: Record<string, unknown> = {};
  if (config.temperature !== undefined) generation.temperature = config.temperature;
  if (config.max_completion_tokens !== undefined) generation.maxOutputTokens = config.max_completion_tokens;
  if (Object.keys(generation).length) body.generationConfig = generation;
  return body;
}

/**
 * A function as Gemini declares one: its JSON Schema as `parametersJsonSchema`, none at all for
 * a function without arguments (Gemini refuses an object schema with no properties).
 */
export function toDeclaration(t: LlmFunction): Record<string, unknown> {
  const properties = t.parameters?.properties;
  const hasArguments = !!properties && typeof properties === 'object' && Object.keys(properties).length > 0;
  return {
    name: t.name,
    ...(t.description !== undefined ? { description: t.description } : {}),
    ...(hasArguments ? { parametersJsonSchema: t.parameters } : {}),
  };
}

interface GeminiCallData {
  thoughtSignature?: string;
  /** The call's own `id`, when Gemini gave one (ours are made up otherwise). */
  functionCallId?: string;
}

const callData = (call: LlmToolCall | undefined): GeminiCallData => (call?.vendorData ?? {}) as GeminiCallData;

function toPart(part: TurnPart): Record<string, unknown> {
  switch (part.type) {
    case 'text':
      return { text: part.text };
    case 'tool_call': {
      const data = callData(part.call);
      return {
        functionCall: { name: part.call.name, args: argumentsObject(part.call), ...(data.functionCallId ? { id: data.functionCallId } : {}) },
        ...(data.thoughtSignature ? { thoughtSignature: data.thoughtSignature } : {}),
      };
    }
    case 'tool_result': {
      const id = callData(part.call).functionCallId;
      return { functionResponse: { name: part.name, response: responseObject(part.content), ...(id ? { id } : {}) } };
    }
  }
}

/** A tool's answer as the object `functionResponse.response` must be: a JSON object as it is, anything else as `{output}`. */
export function responseObject(content: string): Record<string, unknown> {
  try {
    const parsed: unknown = JSON.parse(content);
    if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) return parsed as Record<string, unknown>;
    return { output: parsed };
  } catch {
    return { output: content };
  }
}

async function* streamGenerate(
  settings: ProviderSettings,
  options: GoogleLlmOptions,
  req: LlmRequest,
): AsyncGenerator<LlmEvent, void, undefined> {
  const { baseUrl, apiKey } = vendorEndpoint(settings, GOOGLE);
  if (!apiKey) throw new ProviderError('PROVIDER_AUTH', PROVIDER, 'no Google API key configured (GOOGLE_API_KEY)');
  const model = req.config.model ?? provider.catalog.default_model ?? 'gemini-2.5-flash';
  yield* streamSse(
    {
      provider: PROVIDER,
      url: streamGenerateUrl(baseUrl, model),
      headers: { 'x-goog-api-key': apiKey },
      body: JSON.stringify(generateBody(req)),
      signal: req.signal,
      firstTokenMs: settings.timeouts?.firstTokenMs ?? DEFAULT_FIRST_TOKEN_MS,
      idleMs: options.idleTimeoutMs ?? DEFAULT_IDLE_MS,
      dispatcher: options.dispatcher,
      httpError: googleHttpError,
    },
    new GenerateReader(),
  );
}

interface GoogleErrorBody {
  error?: { code?: number; message?: string; status?: string; details?: Array<{ reason?: string }> };
}

/**
 * Google's `{"error":{"code","message","status","details"}}` with its status. 401 and 403 are the
 * key's fault, and so is a 400 whose reason is `API_KEY_INVALID` (how a wrong key is refused).
 */
export function googleHttpError(status: number, text: string): ProviderError {
  let body: GoogleErrorBody | undefined;
  try {
    const parsed = JSON.parse(text) as GoogleErrorBody | GoogleErrorBody[];
    body = Array.isArray(parsed) ? parsed[0] : parsed;
  } catch {
    // not JSON
  }
  const e = body?.error;
  const detail = e?.message ? `${e.status ? `${e.status}: ` : ''}${e.message}` : text.trim().slice(0, 300) || `HTTP ${status}`;
  const keyRefused = e?.details?.some((d) => d.reason === 'API_KEY_INVALID') ?? false;
  const code: ProviderErrorCode = status === 401 || status === 403 || keyRefused ? 'PROVIDER_AUTH' : 'PROVIDER_HTTP_ERROR';
  return new ProviderError(code, PROVIDER, `google answered ${status}: ${detail}`, status);
}

interface GeminiPart {
  text?: string;
  thought?: boolean;
  functionCall?: { id?: string; name?: string; args?: Record<string, unknown> };
  thoughtSignature?: string;
}

interface GenerateContentChunk extends GoogleErrorBody {
  candidates?: Array<{ content?: { parts?: GeminiPart[] }; finishReason?: string; index?: number }>;
  promptFeedback?: { blockReason?: string };
  /** On the last chunk (or each, cumulative): the request's tokens. */
  usageMetadata?: { promptTokenCount?: number; candidatesTokenCount?: number; thoughtsTokenCount?: number };
}

/** The finish reasons in our (OpenAI's) words; others lower-cased (`safety`, `malformed_function_call`, ...). */
const FINISH_REASONS: Record<string, string> = { STOP: 'stop', MAX_TOKENS: 'length' };

/** The chunks of one answer; the one with a `finishReason` (or a blocked prompt) completes it. */
class GenerateReader implements SseReader {
  private readonly calls: LlmToolCall[] = [];
  private finishReason: string | null = null;
  private usage: { inputTokens: number; outputTokens: number } | null = null;

  *read(message: SseMessage): Iterable<LlmEvent> {
    const chunk = parseJson(PROVIDER, message.data) as GenerateContentChunk | null;
    if (!chunk || typeof chunk !== 'object' || Array.isArray(chunk)) {
      throw new ProviderError('PROVIDER_PROTOCOL', PROVIDER, `unreadable stream event: ${message.data.slice(0, 200)}`);
    }
    if (chunk.error) {
      const e = chunk.error;
      throw new ProviderError('PROVIDER_HTTP_ERROR', PROVIDER, `google stream error: ${e.status ? `${e.status}: ` : ''}${e.message ?? 'error in stream'}`, e.code);
    }
    const u = chunk.usageMetadata;
    // cumulative: the last one counts (thinking tokens are billed as output)
    if (u) this.usage = { inputTokens: u.promptTokenCount ?? 0, outputTokens: (u.candidatesTokenCount ?? 0) + (u.thoughtsTokenCount ?? 0) };
    const candidate = chunk.candidates?.find((c) => (c.index ?? 0) === 0);
    for (const part of candidate?.content?.parts ?? []) {
      if (typeof part.text === 'string' && part.text !== '' && !part.thought) yield { type: 'text', text: part.text };
      const fc = part.functionCall;
      if (fc?.name) {
        const vendorData: GeminiCallData = {
          ...(part.thoughtSignature ? { thoughtSignature: part.thoughtSignature } : {}),
          ...(fc.id ? { functionCallId: fc.id } : {}),
        };
        this.calls.push({
          // unique over the rounds of a turn: tool-calls webhooks and answers go by it
          id: fc.id ?? `call_${randomBytes(9).toString('base64url')}`,
          name: fc.name,
          arguments: JSON.stringify(fc.args ?? {}),
          ...(Object.keys(vendorData).length ? { vendorData: vendorData as Record<string, unknown> } : {}),
        });
      }
    }
    if (candidate?.finishReason) this.finishReason = candidate.finishReason;
    else if (chunk.promptFeedback?.blockReason) this.finishReason = chunk.promptFeedback.blockReason;
  }

  complete(): boolean {
    return this.finishReason !== null;
  }

  *finish(): Iterable<LlmEvent> {
    if (this.finishReason === null) throw new ProviderError('PROVIDER_DISCONNECTED', PROVIDER, 'google ended the stream before a finishReason');
    if (this.calls.length > 0) yield { type: 'tool_calls', calls: this.calls };
    const reason = this.calls.length > 0 && this.finishReason === 'STOP' ? 'tool_calls' : (FINISH_REASONS[this.finishReason] ?? this.finishReason.toLowerCase());
    yield { type: 'done', finishReason: reason, ...(this.usage ? { usage: this.usage } : {}) };
  }
}
