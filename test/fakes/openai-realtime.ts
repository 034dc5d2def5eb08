/**
 * A local stand-in for the OpenAI Realtime API (GA protocol) over WebSocket, close enough that the
 * official `openai` SDK (`OpenAIRealtimeWS`) talks to it. Scripted: what the model says, when the
 * caller's speech starts, function calls, errors, delays and dropped connections.
 *
 * Audio is G.711 μ-law at 8 kHz when the session asks for `audio/pcmu` (8 bytes per ms).
 *
 * A script may change its fields for one connection, chosen from the upgrade request
 * (`perConnection`, e.g. by model), so that one fake serves a healthy call and a faulty one side
 * by side; a connection whose fields name `responses` answers from its own copy of them.
 */
import { EventEmitter } from 'node:events';
import {
  createServer as createHttpServer,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { Duplex } from 'node:stream';
import WebSocket, { WebSocketServer } from 'ws';
import { fakeTimers, layered, listenLocal, shutDown } from './http.js';
import { makeCertificate } from './self-signed.js';

export interface FakeFunctionCall {
  name: string;
  /** JSON text, streamed in a few `response.function_call_arguments.delta` pieces. */
  arguments: string;
  callId?: string;
}

/** One model response, as the fake streams it. */
export interface FakeResponse {
  /** μ-law audio, sent as `response.output_audio.delta` chunks of `audioChunkBytes`. */
  audio?: Buffer;
  /** Bytes per audio delta (default 800 = 100 ms). */
  audioChunkBytes?: number;
  /** The audio's transcript, sent word by word as `response.output_audio_transcript.delta`. */
  transcript?: string;
  /** A function call after (or instead of) the spoken part. */
  functionCall?: FakeFunctionCall;
  /** Pause between streamed deltas, ms (default 2): gives cancels and barge-ins room. */
  deltaIntervalMs?: number;
  /** Finish with `status: failed` and this error instead of `completed`. */
  fail?: { type: string; code: string };
}

/**
 * Caller speech, detected once the client has appended `afterAudioBytes` bytes in total, or, with
 * `afterResponses`, that many bytes after the client's `afterResponses`-th accepted `response.create`.
 */
export interface FakeTurn {
  afterAudioBytes: number;
  /** Count `afterAudioBytes` from the client's n-th accepted `response.create` (a turn placed after a reply, whatever the call's start-up took). */
  afterResponses?: number;
  /** `speech_stopped` (+ commit, + response when `create_response`) right after; default true. */
  speechStops?: boolean;
  /** Sent as `conversation.item.input_audio_transcription.completed` when transcription is on. */
  userTranscript?: string;
  /** Send the transcript this long after `speech_stopped` (after the reply, as OpenAI can); default at once. */
  userTranscriptDelayMs?: number;
  /** What the model answers when server VAD creates the response. */
  response?: FakeResponse;
}

export interface FakeRealtimeScript {
  /** The key the fake accepts as `Authorization: Bearer <key>` (default `sk-test`). */
  apiKey?: string;
  /** Refuse every upgrade with 401 (as a revoked key does). */
  refuseAuth?: boolean;
  /** Models accepted in `?model=` (default `gpt-realtime`, `gpt-realtime-mini`). */
  models?: string[];
  /** Accept the upgrade, then say nothing at all (a hung server). */
  silent?: boolean;
  /** Set the session up, then answer nothing more (a server that hangs mid-call). */
  silentAfterSession?: boolean;
  /** Delay before `session.updated`, ms. */
  sessionUpdatedDelayMs?: number;
  /** Answer the first `session.update` with this error instead of `session.updated`. */
  rejectSessionUpdate?: { type: string; code: string; message: string };
  /** Caller turns, in order, driven by appended audio. */
  turns?: FakeTurn[];
  /** Answers to client `response.create`, in order; then an empty completed response. */
  responses?: FakeResponse[];
  /** Drop the TCP connection (no close frame) after this many audio deltas in a connection. */
  dropAfterAudioDeltas?: number;
  /** Send a text frame that is not JSON (an HTML error page) after this many audio deltas in a connection. */
  garbageAfterAudioDeltas?: number;
  /**
   * Fields that differ for one connection, chosen from its upgrade request (e.g. by model);
   * `undefined` keeps the script as it is. `tls`, `apiKey` and `models` stay the fake's.
   */
  perConnection?: (upgrade: { model: string; url: URL; headers: IncomingMessage['headers'] }) =>
    | Partial<Omit<FakeRealtimeScript, 'perConnection' | 'tls'>>
    | undefined;
  /** Serve TLS (self-signed, made with `openssl`): `fake.ca` is the certificate to trust. */
  tls?: boolean;
}

export interface ClientEvent {
  type: string;
  event_id?: string;
  [key: string]: unknown;
}

export interface FakeConnection {
  readonly id: number;
  readonly headers: IncomingMessage['headers'];
  readonly model: string;
  /** Every client event received on this connection, in order. */
  readonly events: ClientEvent[];
  /** The effective session (what `session.updated` echoes). */
  session: Record<string, unknown>;
  audioBytes: number;
  /** Scripted caller turns detected so far. */
  turns: number;
  closed: boolean;
  closeCode?: number;
  /** Resolves when the socket is gone (either side). */
  readonly whenClosed: Promise<void>;
  /** Send any server event (an `event_id` is added). */
  send(event: Record<string, unknown>): void;
  /** Send a text frame as is (e.g. something unreadable). */
  sendRaw(text: string): void;
  /** Send an `error` event. */
  sendError(error: { type: string; code?: string; message: string; event_id?: string }): void;
  /** Drop the TCP connection without a close frame. */
  drop(): void;
}

export interface FakeOpenAiRealtime {
  /** `http(s)://127.0.0.1:<port>`: the adapter's `openai.baseUrl`; SDK `baseURL` is `url + '/v1'`. */
  url: string;
  /** The self-signed certificate (PEM) when `tls` is on. */
  ca?: string;
  connections: FakeConnection[];
  /** Every client event across connections. */
  readonly events: ClientEvent[];
  /** Upgrade attempts refused (status and why). */
  readonly refused: Array<{ status: number; reason: string }>;
  eventsOfType(type: string): ClientEvent[];
  /** Resolves with the `count`-th client event of `type` (waits for it if needed). */
  waitForEvent(type: string, count?: number, timeoutMs?: number): Promise<ClientEvent>;
  waitForConnection(count?: number, timeoutMs?: number): Promise<FakeConnection>;
  /** Sockets still open on the server side. */
  openSockets(): number;
  close(): Promise<void>;
}

const DEFAULT_MODELS = ['gpt-realtime', 'gpt-realtime-mini'];

/** What a fresh GA session looks like in `session.created` (PCM 24 kHz until updated). */
function defaultSession(model: string): Record<string, unknown> {
  return {
    type: 'realtime',
    object: 'realtime.session',
    id: `sess_${randomId()}`,
    model,
    output_modalities: ['audio'],
    instructions: 'You are a helpful assistant.',
    tools: [],
    tool_choice: 'auto',
    max_output_tokens: 'inf',
    tracing: null,
    prompt: null,
    expires_at: Math.floor(Date.now() / 1000) + 3600,
    include: null,
    audio: {
      input: {
        format: { type: 'audio/pcm', rate: 24000 },
        transcription: null,
        noise_reduction: null,
        turn_detection: defaultVad(),
      },
      output: { format: { type: 'audio/pcm', rate: 24000 }, voice: 'marin', speed: 1 },
    },
  };
}

function defaultVad(): Record<string, unknown> {
  return {
    type: 'server_vad',
    threshold: 0.5,
    prefix_padding_ms: 300,
    silence_duration_ms: 200,
    idle_timeout_ms: null,
    create_response: true,
    interrupt_response: true,
  };
}

let idCounter = 0;
function randomId(): string {
  idCounter += 1;
  return `${Date.now().toString(36)}${idCounter.toString(36).padStart(4, '0')}${Math.random().toString(36).slice(2, 8)}`;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** `session.update` semantics: only the fields present change; nested objects merge. */
function mergeSession(into: Record<string, unknown>, update: Record<string, unknown>): void {
  for (const [key, value] of Object.entries(update)) {
    if (key === 'turn_detection') {
      into[key] = isObject(value) ? { ...defaultVad(), ...value } : null;
    } else if (isObject(value) && isObject(into[key]) && key !== 'format') {
      mergeSession(into[key] as Record<string, unknown>, value);
    } else {
      into[key] = value;
    }
  }
}

const AUDIO_FORMATS = new Set(['audio/pcm', 'audio/pcmu', 'audio/pcma']);

function sessionProblem(s: Record<string, unknown>): string | null {
  if (s.type !== 'realtime') return "Missing required parameter: 'session.type'.";
  const audio = s.audio;
  if (audio !== undefined && !isObject(audio)) return "Invalid type for 'session.audio'.";
  for (const side of ['input', 'output'] as const) {
    const format = isObject(audio) && isObject(audio[side]) ? audio[side].format : undefined;
    if (format !== undefined && !(isObject(format) && AUDIO_FORMATS.has(String(format.type)))) {
      return `Invalid value for 'session.audio.${side}.format.type'.`;
    }
  }
  if (s.tools !== undefined) {
    if (!Array.isArray(s.tools)) return "Invalid type for 'session.tools'.";
    for (const [i, t] of s.tools.entries()) {
      if (!isObject(t) || t.type !== 'function' || typeof t.name !== 'string') {
        return `Invalid value for 'session.tools[${i}]'.`;
      }
    }
  }
  return null;
}

export async function startFakeOpenAiRealtime(
  script: FakeRealtimeScript = {},
): Promise<FakeOpenAiRealtime> {
  const apiKey = script.apiKey ?? 'sk-test';
  const models = script.models ?? DEFAULT_MODELS;
  const responsesQueue = [...(script.responses ?? [])];
  const bus = new EventEmitter();
  bus.setMaxListeners(0);
  const allEvents: ClientEvent[] = [];
  const connections: FakeConnection[] = [];
  const refused: Array<{ status: number; reason: string }> = [];
  const sockets = new Set<WebSocket>();
  const { pending: timers, later } = fakeTimers();

  const certificate = script.tls ? makeCertificate() : undefined;
  const handler = (_req: IncomingMessage, res: ServerResponse) => {
    res.writeHead(404, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ error: { message: 'Not found', type: 'invalid_request_error' } }));
  };
  const server: Server = certificate
    ? createHttpsServer({ key: certificate.key, cert: certificate.cert }, handler)
    : createHttpServer(handler);
  const wss = new WebSocketServer({ noServer: true });

  function refuse(socket: Duplex, status: number, reason: string, body: unknown) {
    refused.push({ status, reason });
    const text = JSON.stringify(body);
    const phrase = status === 401 ? 'Unauthorized' : status === 404 ? 'Not Found' : 'Bad Request';
    socket.end(
      `HTTP/1.1 ${status} ${phrase}\r\nContent-Type: application/json\r\n` +
        `Content-Length: ${Buffer.byteLength(text)}\r\nConnection: close\r\n\r\n${text}`,
    );
  }

  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const url = new URL(req.url ?? '/', 'http://fake');
    if (url.pathname !== '/v1/realtime') {
      refuse(socket, 404, 'path', { error: { message: `Not found: ${url.pathname}`, type: 'invalid_request_error' } });
      return;
    }
    const over = script.perConnection?.({ model: url.searchParams.get('model') ?? '', url, headers: req.headers });
    const auth = req.headers.authorization ?? '';
    if ((over?.refuseAuth ?? script.refuseAuth) || auth !== `Bearer ${apiKey}`) {
      refuse(socket, 401, auth ? 'wrong key' : 'no key', {
        error: {
          message: auth
            ? 'Incorrect API key provided.'
            : "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth.",
          type: 'invalid_request_error',
          code: 'invalid_api_key',
          param: null,
        },
      });
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) =>
      accept(ws, req, url, layered(script, over), over?.responses ? [...over.responses] : responsesQueue),
    );
  });

  function accept(ws: WebSocket, req: IncomingMessage, url: URL, script: FakeRealtimeScript, responses: FakeResponse[]) {
    sockets.add(ws);
    const model = url.searchParams.get('model') ?? '';
    const events: ClientEvent[] = [];
    let resolveClosed!: () => void;
    const whenClosed = new Promise<void>((r) => (resolveClosed = r));
    let turnIndex = 0;
    let turnCountsFrom: number | null = null; // audio bytes the current turn's afterAudioBytes counts from
    let responsesCreated = 0;
    let audioDeltas = 0;
    let sessionUpdates = 0;
    let active: ActiveResponse | null = null;
    const audioItems = new Map<string, number>(); // assistant item id → audio bytes sent

    interface ActiveResponse {
      id: string;
      timer?: NodeJS.Timeout;
      finish: (status: 'cancelled', reason: string) => void;
    }

    const send = (event: Record<string, unknown>) => {
      if (ws.readyState === WebSocket.OPEN) {
        ws.send(JSON.stringify({ event_id: `event_${randomId()}`, ...event }));
      }
    };
    const sendError = (error: { type: string; code?: string; message: string; event_id?: string }) =>
      send({ type: 'error', error: { code: null, param: null, event_id: null, ...error } });

    const conn: FakeConnection = {
      id: connections.length + 1,
      headers: req.headers,
      model,
      events,
      session: defaultSession(model),
      audioBytes: 0,
      turns: 0,
      closed: false,
      whenClosed,
      send,
      sendRaw: (text) => ws.send(text),
      sendError,
      drop: () => ws.terminate(),
    };
    connections.push(conn);

    ws.on('close', (code) => {
      conn.closed = true;
      conn.closeCode = code;
      sockets.delete(ws);
      if (active?.timer) {
        clearTimeout(active.timer);
        timers.delete(active.timer);
      }
      active = null;
      resolveClosed();
      bus.emit('change');
    });
    ws.on('error', () => {
      // a dropped client; 'close' follows
    });
    bus.emit('change');

    if (req.headers['openai-beta']) {
      // What the GA service does with the retired beta header.
      sendError({
        type: 'invalid_request_error',
        code: 'beta_api_shape_disabled',
        message: 'The Realtime Beta API is no longer supported. Please use /v1/realtime for the GA API.',
      });
      ws.close(1000);
      return;
    }
    if (!models.includes(model)) {
      sendError({
        type: 'invalid_request_error',
        code: 'model_not_found',
        message: `The model '${model}' does not exist or you do not have access to it.`,
      });
      ws.close(1008, 'model_not_found');
      return;
    }
    if (script.silent) {
      ws.on('message', (data) => record(data));
      return;
    }
    send({ type: 'session.created', session: conn.session });

    function record(data: WebSocket.RawData): ClientEvent | null {
      let event: ClientEvent;
      try {
        const parsed: unknown = JSON.parse(data.toString());
        if (!isObject(parsed) || typeof parsed.type !== 'string') throw new Error('no type');
        event = parsed as ClientEvent;
      } catch {
        sendError({ type: 'invalid_request_error', code: 'invalid_json', message: 'The server could not parse the event.' });
        return null;
      }
      events.push(event);
      allEvents.push(event);
      bus.emit('change');
      return event;
    }

    ws.on('message', (data) => {
      const event = record(data);
      if (!event) return;
      const eventId = typeof event.event_id === 'string' ? event.event_id : null;
      const invalid = (message: string, code = 'invalid_value') =>
        sendError({ type: 'invalid_request_error', code, message, event_id: eventId ?? undefined });

      switch (event.type) {
        case 'session.update': {
          sessionUpdates += 1;
          if (!isObject(event.session)) return invalid("Missing required parameter: 'session'.", 'missing_required_parameter');
          if (sessionUpdates === 1 && script.rejectSessionUpdate) {
            return sendError({ ...script.rejectSessionUpdate, event_id: eventId ?? undefined });
          }
          const problem = sessionProblem(event.session);
          if (problem) return invalid(problem);
          mergeSession(conn.session, event.session);
          const answer = () => send({ type: 'session.updated', session: conn.session });
          if (script.sessionUpdatedDelayMs) later(script.sessionUpdatedDelayMs, answer);
          else answer();
          return;
        }
        case 'input_audio_buffer.append': {
          const audio = typeof event.audio === 'string' ? Buffer.from(event.audio, 'base64') : Buffer.alloc(0);
          if (audio.length === 0) return invalid("Invalid 'audio'. Expected a non-empty base64-encoded audio buffer.");
          conn.audioBytes += audio.length;
          const turn = script.turns?.[turnIndex];
          if (turn && turnCountsFrom === null && responsesCreated >= (turn.afterResponses ?? 0)) {
            turnCountsFrom = turn.afterResponses === undefined ? 0 : conn.audioBytes - audio.length;
          }
          if (turn && turnCountsFrom !== null && conn.audioBytes - turnCountsFrom >= turn.afterAudioBytes) {
            turnIndex += 1;
            turnCountsFrom = null;
            speech(turn);
          }
          return;
        }
        case 'response.create': {
          if (script.silentAfterSession) return;
          if (active) {
            return invalid(
              `Conversation already has an active response in progress: ${active.id}. Wait until the response is finished before creating a new one.`,
              'conversation_already_has_active_response',
            );
          }
          responsesCreated += 1;
          startResponse(responses.shift() ?? {});
          return;
        }
        case 'response.cancel': {
          const target = typeof event.response_id === 'string' ? event.response_id : null;
          if (!active || (target !== null && target !== active.id)) {
            return invalid('Cancellation failed: no active response found', 'response_cancel_not_active');
          }
          active.finish('cancelled', 'client_cancelled');
          return;
        }
        case 'conversation.item.truncate': {
          const itemId = String(event.item_id ?? '');
          const ms = Number(event.audio_end_ms);
          const sent = audioItems.get(itemId);
          if (sent === undefined) return invalid(`Item with item_id '${itemId}' not found.`, 'item_truncate_invalid_item_id');
          if (!Number.isInteger(ms) || ms < 0 || event.content_index !== 0) return invalid("Invalid 'audio_end_ms' or 'content_index'.");
          if (ms > sent / 8) return invalid(`Audio content of ${Math.floor(sent / 8)}ms is already shorter than ${ms}ms`, 'invalid_value');
          send({ type: 'conversation.item.truncated', item_id: itemId, content_index: 0, audio_end_ms: ms });
          return;
        }
        case 'conversation.item.create': {
          const item = isObject(event.item) ? event.item : null;
          if (!item || typeof item.type !== 'string') return invalid("Missing required parameter: 'item'.", 'missing_required_parameter');
          if (item.type === 'function_call_output' && (typeof item.call_id !== 'string' || typeof item.output !== 'string')) {
            return invalid("A function_call_output item needs 'call_id' and 'output'.");
          }
          if (item.type === 'message') {
            // system and user messages carry input_text parts (an assistant's, output_text)
            const role = item.role;
            if (role !== 'system' && role !== 'user' && role !== 'assistant') return invalid(`Invalid value: '${String(role)}'. Supported values are: 'system', 'user', and 'assistant'.`, 'invalid_value');
            const part = role === 'assistant' ? 'output_text' : 'input_text';
            const content = Array.isArray(item.content) ? (item.content as unknown[]) : null;
            if (!content || content.length === 0 || !content.every((c) => isObject(c) && (c.type === part || (role === 'user' && c.type === 'input_audio')))) {
              return invalid(`A ${String(role)} message item needs 'content' parts of type '${part}'.`);
            }
          }
          const stored = { id: `item_${randomId()}`, object: 'realtime.item', status: 'completed', ...item };
          send({ type: 'conversation.item.added', previous_item_id: null, item: stored });
          send({ type: 'conversation.item.done', previous_item_id: null, item: stored });
          return;
        }
        case 'input_audio_buffer.commit':
        case 'input_audio_buffer.clear':
        case 'output_audio_buffer.clear':
        case 'conversation.item.delete':
        case 'conversation.item.retrieve':
          return;
        default:
          return invalid(`Invalid value: '${event.type}'. Supported values are client events of the Realtime API.`);
      }
    });

    function sessionOutput(): Record<string, unknown> {
      const audio = conn.session.audio as Record<string, Record<string, unknown>> | undefined;
      return audio?.output ?? {};
    }

    function vad(): Record<string, unknown> | null {
      const audio = conn.session.audio as Record<string, Record<string, unknown>> | undefined;
      const td = audio?.input?.turn_detection;
      return isObject(td) ? td : null;
    }

    function speech(turn: FakeTurn) {
      conn.turns += 1;
      const userItem = `item_${randomId()}`;
      const ms = Math.floor(conn.audioBytes / 8);
      send({ type: 'input_audio_buffer.speech_started', audio_start_ms: ms, item_id: userItem });
      const td = vad();
      if (active && td?.interrupt_response !== false) active.finish('cancelled', 'turn_detected');
      if (turn.speechStops === false) return;
      send({ type: 'input_audio_buffer.speech_stopped', audio_end_ms: ms, item_id: userItem });
      send({ type: 'input_audio_buffer.committed', previous_item_id: null, item_id: userItem });
      const item = {
        id: userItem,
        type: 'message',
        object: 'realtime.item',
        status: 'completed',
        role: 'user',
        content: [{ type: 'input_audio', transcript: null }],
      };
      send({ type: 'conversation.item.added', previous_item_id: null, item });
      send({ type: 'conversation.item.done', previous_item_id: null, item });
      const audio = conn.session.audio as Record<string, Record<string, unknown>> | undefined;
      if (turn.userTranscript !== undefined && isObject(audio?.input?.transcription)) {
        const transcribed = () =>
          send({
            type: 'conversation.item.input_audio_transcription.completed',
            item_id: userItem,
            content_index: 0,
            transcript: turn.userTranscript,
            usage: { type: 'duration', seconds: Math.max(1, Math.round(ms / 1000)) },
          });
        if (turn.userTranscriptDelayMs) later(turn.userTranscriptDelayMs, transcribed);
        else transcribed();
      }
      if (td?.create_response !== false && !active) startResponse(turn.response ?? {});
    }

    function startResponse(spec: FakeResponse) {
      const responseId = `resp_${randomId()}`;
      const interval = spec.deltaIntervalMs ?? 2;
      const chunk = spec.audioChunkBytes ?? 800;
      const output: Array<Record<string, unknown>> = [];
      const steps: Array<() => void> = [];
      const response = (status: string, details: Record<string, unknown> | null) => ({
        id: responseId,
        object: 'realtime.response',
        status,
        status_details: details,
        output,
        conversation_id: 'conv_fake',
        output_modalities: ['audio'],
        max_output_tokens: 'inf',
        audio: { output: { format: sessionOutput().format, voice: sessionOutput().voice } },
        usage: null,
        metadata: null,
      });
      // Items that are open when a cancel arrives, closed with status `incomplete`.
      const open: Array<() => void> = [];

      send({ type: 'response.created', response: response('in_progress', null) });

      if (spec.audio !== undefined || spec.transcript !== undefined) {
        const itemId = `item_${randomId()}`;
        const item: Record<string, unknown> = {
          id: itemId,
          type: 'message',
          object: 'realtime.item',
          status: 'in_progress',
          role: 'assistant',
          content: [],
        };
        const base = { response_id: responseId, item_id: itemId, output_index: output.length, content_index: 0 };
        output.push(item);
        audioItems.set(itemId, 0);
        const audio = spec.audio ?? Buffer.alloc(0);
        const words = (spec.transcript ?? '').split(/(?<= )/).filter((w) => w.length > 0);
        let said = '';
        const closeItem = (status: 'completed' | 'incomplete') => {
          send({ type: 'response.output_audio.done', ...base });
          send({ type: 'response.output_audio_transcript.done', ...base, transcript: said });
          send({ type: 'response.content_part.done', ...base, part: { type: 'audio', transcript: said } });
          item.status = status;
          item.content = [{ type: 'output_audio', transcript: said }];
          send({ type: 'response.output_item.done', response_id: responseId, output_index: base.output_index, item });
          send({ type: 'conversation.item.done', previous_item_id: null, item });
        };
        steps.push(() => {
          send({ type: 'response.output_item.added', response_id: responseId, output_index: base.output_index, item });
          send({ type: 'conversation.item.added', previous_item_id: null, item });
          send({ type: 'response.content_part.added', ...base, part: { type: 'audio', transcript: '' } });
          open.push(() => closeItem('incomplete'));
        });
        const chunks = Math.max(Math.ceil(audio.length / chunk), words.length);
        for (let i = 0; i < chunks; i++) {
          steps.push(() => {
            const word = words[i];
            if (word !== undefined) {
              said += word;
              send({ type: 'response.output_audio_transcript.delta', ...base, delta: word });
            }
            const piece = audio.subarray(i * chunk, (i + 1) * chunk);
            if (piece.length > 0) {
              audioItems.set(itemId, (audioItems.get(itemId) ?? 0) + piece.length);
              send({ type: 'response.output_audio.delta', ...base, delta: piece.toString('base64') });
              audioDeltas += 1;
              if (script.dropAfterAudioDeltas !== undefined && audioDeltas >= script.dropAfterAudioDeltas) {
                ws.terminate();
              } else if (script.garbageAfterAudioDeltas !== undefined && audioDeltas === script.garbageAfterAudioDeltas) {
                ws.send('<html><head><title>502 Bad Gateway</title></head><body>502 Bad Gateway</body></html>');
              }
            }
          });
        }
        steps.push(() => {
          open.pop();
          closeItem('completed');
        });
      }

      if (spec.functionCall) {
        const fc = spec.functionCall;
        const itemId = `item_${randomId()}`;
        const callId = fc.callId ?? `call_${randomId()}`;
        const outputIndex = output.length;
        const item: Record<string, unknown> = {
          id: itemId,
          type: 'function_call',
          object: 'realtime.item',
          status: 'in_progress',
          name: fc.name,
          call_id: callId,
          arguments: '',
        };
        output.push(item);
        const base = { response_id: responseId, item_id: itemId, output_index: outputIndex, call_id: callId };
        const pieces = fc.arguments.match(/[\s\S]{1,16}/g) ?? [];
        let args = '';
        steps.push(() => {
          send({ type: 'response.output_item.added', response_id: responseId, output_index: outputIndex, item });
          send({ type: 'conversation.item.added', previous_item_id: null, item });
          open.push(() => {
            send({ type: 'response.function_call_arguments.done', ...base, name: fc.name, arguments: args });
            item.status = 'incomplete';
            item.arguments = args;
            send({ type: 'response.output_item.done', response_id: responseId, output_index: outputIndex, item });
          });
        });
        for (const piece of pieces) {
          steps.push(() => {
            args += piece;
            send({ type: 'response.function_call_arguments.delta', ...base, delta: piece });
          });
        }
        steps.push(() => {
          open.pop();
          send({ type: 'response.function_call_arguments.done', ...base, name: fc.name, arguments: args });
          item.status = 'completed';
          item.arguments = args;
          send({ type: 'response.output_item.done', response_id: responseId, output_index: outputIndex, item });
          send({ type: 'conversation.item.done', previous_item_id: null, item });
        });
      }

      const current: ActiveResponse = {
        id: responseId,
        finish: (status, reason) => {
          if (current.timer) {
            clearTimeout(current.timer);
            timers.delete(current.timer);
          }
          while (open.length > 0) open.pop()!();
          active = null;
          send({ type: 'response.done', response: response(status, { type: status, reason }) });
        },
      };
      active = current;

      let next = 0;
      const run = () => {
        current.timer = undefined;
        if (active !== current || ws.readyState !== WebSocket.OPEN) return;
        const step = steps[next++];
        if (step) {
          step();
          if (active === current && ws.readyState === WebSocket.OPEN) current.timer = later(interval, run);
          return;
        }
        active = null;
        send({
          type: 'response.done',
          response: spec.fail
            ? response('failed', { type: 'failed', error: spec.fail })
            : response('completed', null),
        });
      };
      current.timer = later(interval, run);
    }
  }

  const { url } = await listenLocal(server, certificate ? 'https' : 'http');

  const fake: FakeOpenAiRealtime = {
    url,
    ...(certificate ? { ca: certificate.cert } : {}),
    connections,
    events: allEvents,
    refused,
    eventsOfType: (type) => allEvents.filter((e) => e.type === type),
    waitForEvent(type, count = 1, timeoutMs = 5_000) {
      return waitUntil(() => fake.eventsOfType(type)[count - 1], `client event ${type} #${count}`, timeoutMs);
    },
    waitForConnection(count = 1, timeoutMs = 5_000) {
      return waitUntil(() => connections[count - 1], `connection #${count}`, timeoutMs);
    },
    openSockets: () => sockets.size,
    close: () => shutDown(server, { timers, webSockets: sockets, wss }),
  };

  function waitUntil<T>(probe: () => T | undefined, what: string, timeoutMs: number): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const check = () => {
        const found = probe();
        if (found === undefined) return;
        clearTimeout(timer);
        bus.off('change', check);
        resolve(found);
      };
      const timer = setTimeout(() => {
        bus.off('change', check);
        reject(new Error(`fake OpenAI Realtime: no ${what} within ${timeoutMs} ms`));
      }, timeoutMs);
      bus.on('change', check);
      check();
    });
  }

  return fake;
}
