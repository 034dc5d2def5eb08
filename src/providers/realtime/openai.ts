/**
 * OpenAI Realtime speech-to-speech over WebSocket, GA protocol only (no `OpenAI-Beta` header).
 *
 * G.711 μ-law both ways (`audio/pcmu`), so Twilio audio goes in and out untouched. Server VAD
 * detects the caller's turns and creates the replies, but does not interrupt a response itself
 * (`interrupt_response: false`): the owner cuts (`response.cancel`, then
 * `conversation.item.truncate`) when its own detector or the caller's words say so, and forgets a
 * turn that was a noise (`conversation.item.delete`; docs/turn-taking.md, Realtime calls).
 */
import type { ClientRequest, IncomingMessage } from 'node:http';
import type { Logger } from 'pino';
import WebSocket from 'ws';
import type { LlmConfig } from '../../../engine/schema.js';
import {
  ProviderError,
  type LlmFunction,
  type ProviderErrorCode,
  type ProviderSettings,
  type RealtimeEvents,
  type RealtimeFunctionCall,
  type RealtimeProvider,
  type RealtimeSession,
  type RealtimeSessionOptions,
} from '../types.js';
import { declareProvider, vendorEndpoint } from '../declare.js';
import { OPENAI } from '../llm/openai.js';

export const OPENAI_REALTIME_PROVIDER_ID = 'openai-realtime';
export const OPENAI_REALTIME_DEFAULT_MODEL = 'gpt-realtime';
/** The catalog's default voice for `openai-realtime`. */
export const OPENAI_REALTIME_DEFAULT_VOICE = 'marin';

const OPENAI_REALTIME_VOICES = [
  'alloy', 'ash', 'ballad', 'cedar', 'coral', 'echo', 'marin', 'sage', 'shimmer', 'verse',
];

export const provider = declareProvider({
  catalog: {
    id: OPENAI_REALTIME_PROVIDER_ID,
    kind: 'realtime',
    description: 'OpenAI Realtime speech-to-speech (GA protocol, audio/pcmu).',
    models: ['gpt-realtime', 'gpt-realtime-mini'],
    default_model: OPENAI_REALTIME_DEFAULT_MODEL,
    voices: OPENAI_REALTIME_VOICES,
    default_voice: OPENAI_REALTIME_DEFAULT_VOICE,
  },
  account: OPENAI,
  create: (settings) => createOpenAiRealtime(settings),
});
/** Transcribes the caller's audio so the call has a transcript (runs beside the model). */
export const OPENAI_REALTIME_DEFAULT_TRANSCRIPTION_MODEL = 'gpt-4o-mini-transcribe';

const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;
/** How long close() waits for the server's close frame before dropping the socket. */
const CLOSE_GRACE_MS = 2_000;
/** Client events remembered by event_id, to know which request a server `error` is about. */
const SENT_EVENTS_REMEMBERED = 256;

/**
 * Server `error` codes that do not harm the session: they are logged, never reported.
 * - `response_cancel_not_active`: we cancelled after the response ended.
 * - `conversation_already_has_active_response`: server VAD started a response just before we
 *   asked for one; the one in progress answers.
 */
const BENIGN_ERROR_CODES = new Set([
  'response_cancel_not_active',
  'conversation_already_has_active_response',
]);
/** Client events that are best effort: an error about one of them is logged, never reported. */
const BEST_EFFORT_EVENTS = new Set(['response.cancel', 'conversation.item.truncate', 'conversation.item.delete']);

export interface OpenAiRealtimeOptions {
  /** Receives benign server errors (`debug`) and ignored oddities (`warn`). No secrets. */
  logger?: Pick<Logger, 'debug' | 'warn'>;
  /**
   * Model that transcribes the caller's audio (`audio.input.transcription`), or `null` for no
   * caller transcripts. Default `gpt-4o-mini-transcribe`.
   */
  transcriptionModel?: string | null;
}

/** `https://api.openai.com` (or `.../v1`) → `wss://api.openai.com/v1/realtime?model=...`. */
export function realtimeUrl(baseUrl: string, model: string): string {
  const url = new URL(baseUrl);
  if (url.protocol === 'http:') url.protocol = 'ws:';
  else if (url.protocol === 'https:') url.protocol = 'wss:';
  const path = url.pathname.replace(/\/+$/, '');
  url.pathname = `${path.endsWith('/v1') ? path : `${path}/v1`}/realtime`;
  url.search = '';
  url.searchParams.set('model', model);
  return url.toString();
}

/** The `session` object of a GA `session.update` (only the fields given are changed). */
export function sessionConfig(
  options: Partial<RealtimeSessionOptions>,
  extra: { model?: string; transcriptionModel?: string | null; initial: boolean },
): Record<string, unknown> {
  const session: Record<string, unknown> = { type: 'realtime' };
  if (extra.initial) {
    if (extra.model !== undefined) session.model = extra.model;
    session.output_modalities = ['audio'];
  }
  if (options.instructions !== undefined) session.instructions = options.instructions;
  if (options.tools !== undefined) {
    session.tools = options.tools.map(realtimeTool);
    session.tool_choice = 'auto';
  }
  const input: Record<string, unknown> = {};
  const output: Record<string, unknown> = {};
  if (extra.initial) {
    input.format = { type: 'audio/pcmu' };
    output.format = { type: 'audio/pcmu' };
    if (extra.transcriptionModel) input.transcription = { model: extra.transcriptionModel };
  }
  if (extra.initial || options.turnDetection !== undefined) {
    input.turn_detection = serverVad(options.turnDetection);
  }
  if (extra.initial || options.voice !== undefined) {
    output.voice = options.voice ?? OPENAI_REALTIME_DEFAULT_VOICE;
  }
  const audio: Record<string, unknown> = {};
  if (Object.keys(input).length > 0) audio.input = input;
  if (Object.keys(output).length > 0) audio.output = output;
  if (Object.keys(audio).length > 0) session.audio = audio;
  return session;
}

function serverVad(td: RealtimeSessionOptions['turnDetection']): Record<string, unknown> {
  const vad: Record<string, unknown> = { type: 'server_vad' };
  if (td?.threshold !== undefined) vad.threshold = td.threshold;
  if (td?.prefixPaddingMs !== undefined) vad.prefix_padding_ms = Math.round(td.prefixPaddingMs);
  if (td?.silenceDurationMs !== undefined) {
    vad.silence_duration_ms = Math.round(td.silenceDurationMs);
  }
  vad.create_response = true;
  // the call decides what cuts a response (its detector ignores a click or a cough): server VAD would cut on any sound
  vad.interrupt_response = false;
  return vad;
}

function realtimeTool(fn: LlmFunction): Record<string, unknown> {
  const tool: Record<string, unknown> = { type: 'function', name: fn.name };
  if (fn.description !== undefined) tool.description = fn.description;
  tool.parameters = fn.parameters ?? { type: 'object', properties: {} };
  return tool;
}

interface ServerErrorBody {
  type?: string;
  code?: string | null;
  message?: string;
  param?: string | null;
  event_id?: string | null;
}

/** A server `error` event → our code: the vendor's "non-2xx", with an HTTP-like status. */
function serverError(body: ServerErrorBody | undefined): ProviderError {
  const type = body?.type ?? 'unknown_error';
  const code = body?.code ?? null;
  const message = `OpenAI Realtime ${type}${code ? ` (${code})` : ''}: ${body?.message ?? 'no message'}`;
  if (type === 'authentication_error' || code === 'invalid_api_key') {
    return new ProviderError('PROVIDER_AUTH', OPENAI_REALTIME_PROVIDER_ID, message, 401);
  }
  const status =
    type === 'invalid_request_error' ? 400
    : type === 'rate_limit_error' || code === 'rate_limit_exceeded' ? 429
    : 500;
  return new ProviderError('PROVIDER_HTTP_ERROR', OPENAI_REALTIME_PROVIDER_ID, message, status);
}

function providerError(code: ProviderErrorCode, message: string, status?: number, cause?: unknown) {
  return new ProviderError(code, OPENAI_REALTIME_PROVIDER_ID, message, status, { cause });
}

type ServerEvent = { type: string; [key: string]: unknown };

interface FunctionCallItem {
  type?: string;
  id?: string;
  call_id?: string;
  name?: string;
  arguments?: string;
  status?: string;
}

export function createOpenAiRealtime(
  settings: ProviderSettings,
  adapterOptions: OpenAiRealtimeOptions = {},
): RealtimeProvider {
  const log = adapterOptions.logger;
  const transcriptionModel =
    adapterOptions.transcriptionModel === undefined
      ? OPENAI_REALTIME_DEFAULT_TRANSCRIPTION_MODEL
      : adapterOptions.transcriptionModel;

  return {
    id: OPENAI_REALTIME_PROVIDER_ID,

    connect(config: LlmConfig, options: RealtimeSessionOptions, events: RealtimeEvents, signal) {
      const { baseUrl, apiKey } = vendorEndpoint(settings, OPENAI);
      if (!apiKey) {
        return Promise.reject(providerError('PROVIDER_AUTH', 'OPENAI_API_KEY is not configured'));
      }
      if (signal?.aborted) {
        return Promise.reject(providerError('PROVIDER_ABORTED', 'aborted before connecting'));
      }
      const model = config.model ?? OPENAI_REALTIME_DEFAULT_MODEL;
      const timeoutMs = settings.timeouts?.connectMs ?? DEFAULT_CONNECT_TIMEOUT_MS;

      return new Promise<RealtimeSession>((resolve, reject) => {
        const ws = new WebSocket(realtimeUrl(baseUrl, model), {
          headers: { Authorization: `Bearer ${apiKey}` },
        });

        let connected = false; // connect() has resolved
        let settled = false; // connect() has resolved or rejected
        let closing = false; // we asked for the close
        let closed = false;
        let connectTimer: NodeJS.Timeout | undefined;
        let closeTimer: NodeJS.Timeout | undefined;
        let closeWaiters: Array<() => void> = [];
        let eventSeq = 0;
        const sentEvents = new Map<string, string>(); // event_id → client event type
        // One response at a time: the server refuses a response.create while one is active, so
        // ours wait their turn (a function result that lands before its response.done, a line
        // to say right after a cancel).
        let activeResponseId: string | null = null;
        let createRequested = false; // our response.create is out, no response.created yet
        let cancelOnCreated = false; // cancelled before the requested response even started
        const queuedCreates: Array<Record<string, unknown>> = [];
        const cancelledResponses = new Set<string>();
        const transcripts = new Map<string, string>(); // item_id → assistant transcript so far
        const pendingCalls = new Map<string, RealtimeFunctionCall & { responseId?: string }>();
        const emittedCalls = new Set<string>();
        let emptyInputItem: string | null = null; // the caller's last input transcribed with no words

        const fail = (err: ProviderError) => {
          if (settled) return;
          settled = true;
          clearTimeout(connectTimer);
          signal?.removeEventListener('abort', onAbort);
          ws.removeAllListeners('message');
          ws.terminate();
          reject(err);
        };

        const onAbort = () => {
          if (!connected) fail(providerError('PROVIDER_ABORTED', 'aborted while connecting'));
          else void session.close();
        };
        signal?.addEventListener('abort', onAbort, { once: true });

        connectTimer = setTimeout(() => {
          fail(providerError('PROVIDER_TIMEOUT', `no session.updated within ${timeoutMs} ms`));
        }, timeoutMs);

        const send = (event: Record<string, unknown>): void => {
          if (ws.readyState !== WebSocket.OPEN) return;
          const eventId = `evt_sb_${++eventSeq}`;
          sentEvents.set(eventId, String(event.type));
          if (sentEvents.size > SENT_EVENTS_REMEMBERED) {
            const oldest = sentEvents.keys().next().value;
            if (oldest !== undefined) sentEvents.delete(oldest);
          }
          ws.send(JSON.stringify({ event_id: eventId, ...event }));
        };

        const requestResponse = (event: Record<string, unknown>) => {
          queuedCreates.push(event);
          drainResponses();
        };

        const drainResponses = () => {
          if (activeResponseId || createRequested) return;
          const next = queuedCreates.shift();
          if (!next) return;
          createRequested = true;
          send(next);
        };

        const report = (err: ProviderError) => {
          if (!connected) fail(err);
          else if (!closing) events.onError(err);
        };

        ws.on('unexpected-response', (req: ClientRequest, res: IncomingMessage) => {
          const status = res.statusCode ?? 0;
          let body = '';
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => {
            if (body.length < 2_000) body += chunk;
          });
          const done = () => {
            const detail = vendorMessage(body);
            const text = `OpenAI Realtime refused the connection: HTTP ${status}${detail ? ` ${detail}` : ''}`;
            fail(
              status === 401 || status === 403
                ? providerError('PROVIDER_AUTH', text, status)
                : providerError('PROVIDER_HTTP_ERROR', text, status),
            );
            req.destroy();
          };
          res.on('end', done);
          res.on('error', done);
        });

        ws.on('open', () => {
          send({
            type: 'session.update',
            session: sessionConfig(options, { model, transcriptionModel, initial: true }),
          });
        });

        ws.on('message', (data: WebSocket.RawData, isBinary: boolean) => {
          if (closing || settled !== connected) return; // closing, or connect() already failed
          let event: ServerEvent;
          try {
            if (isBinary) throw new Error('binary frame');
            const parsed: unknown = JSON.parse(data.toString());
            if (!isEvent(parsed)) throw new Error('no event type');
            event = parsed;
          } catch (err) {
            report(providerError('PROVIDER_PROTOCOL', 'OpenAI Realtime sent an unreadable frame', undefined, err));
            return;
          }
          handle(event);
        });

        ws.on('error', (err) => {
          // A 'close' always follows; before the upgrade completes this is the reason we failed.
          if (!settled && !connected) {
            fail(providerError('PROVIDER_DISCONNECTED', `OpenAI Realtime connection failed: ${err.message}`, undefined, err));
          }
        });

        ws.on('close', (code: number, reason: Buffer) => {
          closed = true;
          clearTimeout(closeTimer);
          signal?.removeEventListener('abort', onAbort);
          const why = `OpenAI Realtime closed the connection (${code}${reason.length ? ` ${reason.toString()}` : ''})`;
          if (!connected) {
            fail(providerError('PROVIDER_DISCONNECTED', why));
          } else {
            if (!closing) events.onError(providerError('PROVIDER_DISCONNECTED', why));
            events.onClose?.();
          }
          const waiters = closeWaiters;
          closeWaiters = [];
          for (const w of waiters) w();
        });

        const handle = (event: ServerEvent): void => {
          switch (event.type) {
            case 'session.updated': {
              if (connected) return;
              const problem = formatProblem(event.session);
              if (problem) {
                fail(providerError('PROVIDER_PROTOCOL', problem));
                return;
              }
              connected = true;
              settled = true;
              clearTimeout(connectTimer);
              resolve(session);
              return;
            }
            case 'error': {
              const body = (event.error ?? undefined) as ServerErrorBody | undefined;
              const about = body?.event_id ? sentEvents.get(body.event_id) : undefined;
              if (about === 'response.create') {
                createRequested = false;
                drainResponses();
              }
              if (
                connected &&
                ((body?.code && BENIGN_ERROR_CODES.has(body.code)) ||
                  (about && BEST_EFFORT_EVENTS.has(about)))
              ) {
                log?.debug(
                  { provider: OPENAI_REALTIME_PROVIDER_ID, code: body?.code, about, message: body?.message },
                  'benign realtime error',
                );
                return;
              }
              report(serverError(body));
              return;
            }
            case 'response.created': {
              const id = (event.response as { id?: string } | undefined)?.id;
              createRequested = false;
              if (!id) return;
              activeResponseId = id;
              if (cancelOnCreated) {
                cancelOnCreated = false;
                cancelledResponses.add(id);
                send({ type: 'response.cancel', response_id: id });
              }
              return;
            }
            case 'response.output_audio.delta': {
              if (isCancelled(event)) return;
              const delta = typeof event.delta === 'string' ? event.delta : '';
              const itemId = typeof event.item_id === 'string' ? event.item_id : '';
              const audio = Buffer.from(delta, 'base64');
              if (audio.length > 0) events.onAudio(audio, itemId);
              return;
            }
            case 'response.output_audio_transcript.delta': {
              const itemId = String(event.item_id ?? '');
              const text = (transcripts.get(itemId) ?? '') + String(event.delta ?? '');
              transcripts.set(itemId, text);
              events.onTranscript?.('assistant', text, false);
              return;
            }
            case 'response.output_audio_transcript.done': {
              const itemId = String(event.item_id ?? '');
              transcripts.delete(itemId);
              const text = typeof event.transcript === 'string' ? event.transcript : '';
              events.onTranscript?.('assistant', text, true);
              return;
            }
            case 'conversation.item.input_audio_transcription.completed': {
              const text = typeof event.transcript === 'string' ? event.transcript : '';
              if (text.trim() === '' && typeof event.item_id === 'string') emptyInputItem = event.item_id;
              events.onTranscript?.('user', text, true);
              return;
            }
            case 'input_audio_buffer.speech_started':
              events.onSpeechStarted();
              return;
            case 'input_audio_buffer.speech_stopped':
              events.onSpeechStopped?.();
              return;
            case 'response.function_call_arguments.done': {
              const callId = typeof event.call_id === 'string' ? event.call_id : '';
              if (!callId || emittedCalls.has(callId)) return;
              pendingCalls.set(callId, {
                callId,
                name: String(event.name ?? ''),
                arguments: String(event.arguments ?? ''),
                responseId: typeof event.response_id === 'string' ? event.response_id : undefined,
              });
              return;
            }
            case 'response.output_item.done': {
              const item = event.item as FunctionCallItem | undefined;
              if (item?.type === 'function_call') functionCallDone(item);
              return;
            }
            case 'response.done': {
              const response = (event.response ?? {}) as {
                id?: string;
                status?: string;
                status_details?: { error?: { type?: string; code?: string } };
                output?: FunctionCallItem[];
              };
              if (response.status === 'completed') {
                for (const item of response.output ?? []) {
                  if (item.type === 'function_call') functionCallDone(item);
                }
                for (const [callId, call] of pendingCalls) {
                  if (call.responseId === response.id) emitCall(call);
                  pendingCalls.delete(callId);
                }
              } else {
                for (const [callId, call] of pendingCalls) {
                  if (call.responseId === response.id) pendingCalls.delete(callId);
                }
              }
              if (response.id) cancelledResponses.delete(response.id);
              if (activeResponseId === response.id) activeResponseId = null;
              drainResponses();
              if (response.status === 'failed') {
                const e = response.status_details?.error;
                report(
                  providerError(
                    'PROVIDER_HTTP_ERROR',
                    `OpenAI Realtime response failed: ${e?.type ?? 'unknown'}${e?.code ? ` (${e.code})` : ''}`,
                    500,
                  ),
                );
              }
              events.onResponseDone?.();
              return;
            }
            default:
              // session.created, rate_limits.updated, conversation.item.*, content parts...:
              // nothing the pipeline needs.
              return;
          }
        };

        const isCancelled = (event: ServerEvent): boolean =>
          typeof event.response_id === 'string' && cancelledResponses.has(event.response_id);

        const functionCallDone = (item: FunctionCallItem) => {
          const callId = item.call_id ?? '';
          if (!callId || emittedCalls.has(callId)) return;
          if (item.status === 'incomplete') {
            pendingCalls.delete(callId);
            return;
          }
          const pending = pendingCalls.get(callId);
          pendingCalls.delete(callId);
          emitCall({
            callId,
            name: item.name ?? pending?.name ?? '',
            arguments: item.arguments ?? pending?.arguments ?? '',
          });
        };

        const emitCall = (call: RealtimeFunctionCall) => {
          if (emittedCalls.has(call.callId)) return;
          emittedCalls.add(call.callId);
          if (!call.name) {
            report(providerError('PROVIDER_PROTOCOL', `function call ${call.callId} has no name`));
            return;
          }
          events.onFunctionCall({ callId: call.callId, name: call.name, arguments: call.arguments });
        };

        const session: RealtimeSession = {
          sendAudio(mulaw: Buffer) {
            if (mulaw.length === 0) return;
            send({ type: 'input_audio_buffer.append', audio: mulaw.toString('base64') });
          },
          update(changes: Partial<RealtimeSessionOptions>) {
            const s = sessionConfig(changes, { initial: false });
            if (Object.keys(s).length > 1) send({ type: 'session.update', session: s });
          },
          createResponse(instructions?: string, options?: { tools?: LlmFunction[] }) {
            const response: Record<string, unknown> = {};
            if (instructions !== undefined) response.instructions = instructions;
            if (options?.tools !== undefined) {
              response.tools = options.tools.map(realtimeTool);
              response.tool_choice = options.tools.length > 0 ? 'auto' : 'none';
            }
            requestResponse(
              Object.keys(response).length === 0 ? { type: 'response.create' } : { type: 'response.create', response },
            );
          },
          cancelResponse() {
            queuedCreates.length = 0; // what was still to be said is dropped too
            if (activeResponseId) cancelledResponses.add(activeResponseId);
            else if (createRequested) cancelOnCreated = true;
            send({ type: 'response.cancel' });
          },
          truncate(itemId: string, audioEndMs: number) {
            send({
              type: 'conversation.item.truncate',
              item_id: itemId,
              content_index: 0,
              audio_end_ms: Math.max(0, Math.round(audioEndMs)),
            });
          },
          sendFunctionResult(callId: string, output: string, respond = true) {
            send({
              type: 'conversation.item.create',
              item: { type: 'function_call_output', call_id: callId, output },
            });
            if (respond) requestResponse({ type: 'response.create' });
          },
          interruptsOnSpeech: false,
          get responding() {
            return activeResponseId !== null || createRequested;
          },
          forgetTurn(itemIds: string[]) {
            const ids = emptyInputItem ? [emptyInputItem, ...itemIds] : itemIds;
            emptyInputItem = null;
            for (const id of ids) if (id) send({ type: 'conversation.item.delete', item_id: id });
          },
          addMessage(role: 'system' | 'user', text: string) {
            send({
              type: 'conversation.item.create',
              item: { type: 'message', role, content: [{ type: 'input_text', text }] },
            });
          },
          close() {
            signal?.removeEventListener('abort', onAbort);
            if (closed) return Promise.resolve();
            closing = true;
            return new Promise<void>((done) => {
              closeWaiters.push(done);
              if (closeTimer) return; // already closing
              closeTimer = setTimeout(() => ws.terminate(), CLOSE_GRACE_MS);
              ws.close(1000, 'call ended');
            });
          },
        };
      });
    },
  };
}

function isEvent(value: unknown): value is ServerEvent {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as { type?: unknown }).type === 'string'
  );
}

/** Our session must speak μ-law both ways; anything else would be noise on the phone line. */
function formatProblem(session: unknown): string | null {
  const audio = (session as { audio?: Record<string, { format?: { type?: string } }> } | undefined)
    ?.audio;
  for (const side of ['input', 'output'] as const) {
    const type = audio?.[side]?.format?.type;
    if (type !== undefined && type !== 'audio/pcmu') {
      return `OpenAI Realtime session has ${side} format ${type}, expected audio/pcmu`;
    }
  }
  return null;
}

/** The `error.message` of an OpenAI error body, or a short excerpt of the raw text. */
function vendorMessage(body: string): string {
  try {
    const parsed = JSON.parse(body) as { error?: { message?: string } };
    if (parsed.error?.message) return parsed.error.message;
  } catch {
    // not JSON
  }
  return body.trim().slice(0, 200);
}
