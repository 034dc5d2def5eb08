/**
 * A local stand-in for OpenAI Realtime transcription sessions (GA protocol) over WebSocket:
 * `/v1/realtime?intent=transcription`, close enough that the official `openai` SDK
 * (`OpenAIRealtimeWS`, which always names a model: `?model=gpt-4o-transcribe` is taken as a
 * transcription session too) talks to it.
 *
 * - The upgrade needs `Authorization: Bearer <key>`; else 401 with OpenAI's error body.
 * - `session.created`, then each `session.update` of `type: "transcription"` is checked (format,
 *   model) and answered with `session.updated`, or an `error` event as OpenAI sends one.
 * - Appended audio (`audio/pcmu`: 8 bytes a ms; `audio/pcm`: 48) is heard by a loudness detector
 *   standing in for server VAD: `speech_started` after 100 ms of sound, `speech_stopped` after
 *   `silence_duration_ms` (default 500) of quiet, then `committed`, the transcript's deltas word by
 *   word and `completed`. With `turn_detection: null` only the client's `input_audio_buffer.commit`
 *   ends a turn (an empty one is `input_audio_buffer_commit_empty`).
 * - The text of the n-th turn is `transcribe(turn)` (default `turn <n>`); a script may change any
 *   of its fields for one connection (`perConnection`, e.g. by language), so that one fake serves a
 *   healthy call and a faulty one side by side; faults: refused, hung upgrade, dropped, garbage,
 *   an `error` event, transcripts that never come.
 */
import { randomUUID } from 'node:crypto';
import { createServer as createHttpServer, type IncomingMessage, type Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { Duplex } from 'node:stream';
import WebSocket, { WebSocketServer } from 'ws';
import { mulawDecode } from '../../src/audio/mulaw.js';
import { fakeTimers, layered, listenLocal, shutDown, trackConnections } from './http.js';
import { makeCertificate } from './self-signed.js';

export const FAKE_TRANSCRIBE_MODELS = ['gpt-4o-transcribe', 'gpt-4o-mini-transcribe', 'whisper-1'];

export interface FakeTranscriptionTurn {
  /** 0 for the first turn of the connection. */
  index: number;
  itemId: string;
  /** ms of audio in the turn. */
  audioMs: number;
  /** The session's transcription settings (`model`, `language`, `prompt`). */
  transcription: Record<string, unknown>;
}

export type FakeTranscriptionFault =
  /** Refuse the upgrade with this status (429, 500, ...) and OpenAI's error body. */
  | { type: 'refuse'; status: number }
  /** Take the TCP connection and never answer the upgrade. */
  | { type: 'hang-upgrade' }
  /** Drop the TCP connection (no close frame) once this much audio came. */
  | { type: 'drop'; afterBytes: number }
  /** Send a text frame that is not JSON once this much audio came. */
  | { type: 'garbage'; afterBytes: number }
  /** Send an `error` event once this much audio came. */
  | { type: 'error'; afterBytes: number; error: { type: string; code?: string; message: string } }
  /** Commit turns but never transcribe them. */
  | { type: 'no-transcripts' };

export interface FakeTranscriptionScript {
  apiKey: string;
  /** The text of a turn. */
  transcribe: (turn: FakeTranscriptionTurn) => string;
  /** Wait this long after the commit before the transcript (ms), or as long as it says for the turn. */
  transcriptDelayMs: number | ((turn: FakeTranscriptionTurn) => number);
  /** Mean absolute sample (16-bit) above which 20 ms of audio is sound. */
  loudness: number;
  fault: FakeTranscriptionFault | null;
  /** Fields that differ for one connection, from its upgrade request; `undefined` keeps the script. */
  perConnection?: (upgrade: { index: number; url: URL; headers: IncomingMessage['headers'] }) =>
    | Partial<Omit<FakeTranscriptionScript, 'perConnection' | 'apiKey'>>
    | undefined;
}

export interface FakeTranscriptionConnection {
  readonly index: number;
  readonly url: URL;
  readonly headers: IncomingMessage['headers'];
  /** Every client event, in order (appends without their audio). */
  readonly events: Array<Record<string, unknown>>;
  /** The session as `session.updated` last echoed it. */
  session: Record<string, unknown>;
  audioBytes: number;
  turns: FakeTranscriptionTurn[];
  closed: boolean;
  closeCode?: number;
}

export interface FakeOpenAiTranscription {
  /** `http(s)://127.0.0.1:<port>`: `OPENAI_API_BASE`; the SDK's `baseURL` is this + `/v1`. */
  url: string;
  apiKey: string;
  script: FakeTranscriptionScript;
  connections: FakeTranscriptionConnection[];
  /** The certificate to trust when serving TLS. */
  ca?: string;
  /** TCP connections open now. */
  openConnections(): number;
  close(): Promise<void>;
}

export const defaultTranscriptionScript = (): FakeTranscriptionScript => ({
  apiKey: 'sk-test',
  transcribe: (turn) => `turn ${turn.index + 1}`,
  transcriptDelayMs: 0,
  loudness: 300,
  fault: null,
});

const FORMAT_BYTES_PER_MS: Record<string, number> = { 'audio/pcmu': 8, 'audio/pcma': 8, 'audio/pcm': 48 };
const FRAME_MS = 20;
const SPEECH_MIN_MS = 100;

export async function startFakeOpenAiTranscription(
  overrides: Partial<FakeTranscriptionScript> = {},
  options: { tls?: boolean } = {},
): Promise<FakeOpenAiTranscription> {
  const base: FakeTranscriptionScript = { ...defaultTranscriptionScript(), ...overrides };
  const connections: FakeTranscriptionConnection[] = [];
  const sockets = new Set<WebSocket>();
  const { pending: timers, later } = fakeTimers();
  const certificate = options.tls ? makeCertificate() : undefined;
  const server: Server = certificate
    ? createHttpsServer({ key: certificate.key, cert: certificate.cert }, (_req, res) => res.writeHead(404).end())
    : createHttpServer((_req, res) => res.writeHead(404).end());
  const tcp = trackConnections(server);
  const wss = new WebSocketServer({ noServer: true });
  let upgrades = 0;

  function refuse(socket: Duplex, status: number, message: string, type = 'invalid_request_error') {
    const text = JSON.stringify({ error: { message, type, code: null, param: null } });
    socket.end(`HTTP/1.1 ${status} Refused\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(text)}\r\nConnection: close\r\n\r\n${text}`);
  }

  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const url = new URL(req.url ?? '/', 'http://fake');
    if (url.pathname !== '/v1/realtime') return refuse(socket, 404, `Not found: ${url.pathname}`);
    if (req.headers.authorization !== `Bearer ${base.apiKey}`) return refuse(socket, 401, 'Incorrect API key provided.');
    const model = url.searchParams.get('model');
    if (url.searchParams.get('intent') !== 'transcription' && !(model && FAKE_TRANSCRIBE_MODELS.includes(model))) {
      return refuse(socket, 400, 'this fake serves transcription sessions: ?intent=transcription');
    }
    const script = layered<FakeTranscriptionScript>(base, base.perConnection?.({ index: upgrades++, url, headers: req.headers }));
    if (script.fault?.type === 'refuse') return refuse(socket, script.fault.status, `fake refusal ${script.fault.status}`, script.fault.status === 429 ? 'rate_limit_error' : 'server_error');
    // an upgraded socket is half-open capable: close it when the client goes away
    socket.on('end', () => socket.destroy());
    socket.on('error', () => socket.destroy());
    if (script.fault?.type === 'hang-upgrade') return;
    wss.handleUpgrade(req, socket, head, (ws) => serve(ws, url, req.headers, script));
  });

  function serve(ws: WebSocket, url: URL, headers: IncomingMessage['headers'], script: FakeTranscriptionScript) {
    sockets.add(ws);
    const conn: FakeTranscriptionConnection = {
      index: connections.length,
      url,
      headers,
      events: [],
      session: {
        type: 'transcription',
        id: `sess_${randomUUID().slice(0, 12)}`,
        object: 'realtime.transcription_session',
        audio: { input: { format: { type: 'audio/pcm', rate: 24000 }, transcription: null, noise_reduction: null, turn_detection: { type: 'server_vad', threshold: 0.5, prefix_padding_ms: 300, silence_duration_ms: 500 } } },
      },
      audioBytes: 0,
      turns: [],
      closed: false,
    };
    connections.push(conn);
    const send = (event: Record<string, unknown>) => {
      if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ event_id: `event_${randomUUID().slice(0, 12)}`, ...event }));
    };
    const input = () => (conn.session.audio as { input: Record<string, unknown> }).input;
    let faultDone = false;
    // the turn being heard: bytes in the buffer, loud and quiet runs
    let bufferBytes = 0;
    let bufferMs = 0;
    let speaking = false;
    let loudMs = 0;
    let quietMs = 0;
    let speechStartMs = 0;
    let pcmRest = Buffer.alloc(0);
    let lastItem: string | null = null;

    const commit = (audioMs: number) => {
      const itemId = `item_${randomUUID().slice(0, 12)}`;
      send({ type: 'input_audio_buffer.committed', item_id: itemId, previous_item_id: lastItem });
      send({ type: 'conversation.item.added', item: { id: itemId, type: 'message', role: 'user', content: [{ type: 'input_audio', transcript: null }] } });
      lastItem = itemId;
      const turn: FakeTranscriptionTurn = { index: conn.turns.length, itemId, audioMs, transcription: (input().transcription as Record<string, unknown>) ?? {} };
      conn.turns.push(turn);
      bufferBytes = 0;
      bufferMs = 0;
      if (script.fault?.type === 'no-transcripts') return;
      const delay = typeof script.transcriptDelayMs === 'function' ? script.transcriptDelayMs(turn) : script.transcriptDelayMs;
      later(delay, () => {
        const text = script.transcribe(turn);
        const words = text.split(/(?<= )/);
        for (const delta of words) send({ type: 'conversation.item.input_audio_transcription.delta', item_id: itemId, content_index: 0, delta });
        send({ type: 'conversation.item.input_audio_transcription.completed', item_id: itemId, content_index: 0, transcript: text, usage: { type: 'duration', seconds: Math.ceil(audioMs / 1000) } });
      });
    };

    /** The loudness detector, 20 ms at a time, standing in for server VAD. */
    const hear = (pcm: Int16Array) => {
      let sum = 0;
      for (const s of pcm) sum += Math.abs(s);
      const loud = sum / Math.max(1, pcm.length) > script.loudness;
      const vad = input().turn_detection as { silence_duration_ms?: number } | null;
      bufferMs += FRAME_MS;
      if (!vad) return;
      if (loud) {
        loudMs += FRAME_MS;
        quietMs = 0;
        if (!speaking && loudMs >= SPEECH_MIN_MS) {
          speaking = true;
          speechStartMs = bufferMs - loudMs;
          send({ type: 'input_audio_buffer.speech_started', audio_start_ms: speechStartMs, item_id: `item_${randomUUID().slice(0, 12)}` });
        }
      } else {
        loudMs = 0;
        quietMs += FRAME_MS;
        if (speaking && quietMs >= (vad.silence_duration_ms ?? 500)) {
          speaking = false;
          send({ type: 'input_audio_buffer.speech_stopped', audio_end_ms: bufferMs - quietMs });
          commit(bufferMs);
        }
      }
    };

    const onAudio = (audio: Buffer) => {
      conn.audioBytes += audio.length;
      bufferBytes += audio.length;
      const fault = script.fault;
      if (fault && !faultDone && 'afterBytes' in fault && conn.audioBytes >= fault.afterBytes) {
        faultDone = true;
        if (fault.type === 'drop') return ws.terminate();
        if (fault.type === 'garbage') return ws.send('<html><body>502 Bad Gateway</body></html>');
        send({ type: 'error', error: { ...fault.error, param: null, event_id: null } });
        return;
      }
      const format = (input().format as { type?: string }).type ?? 'audio/pcm';
      if (format !== 'audio/pcmu') return; // the detector hears μ-law only: other formats turn by commit
      pcmRest = Buffer.concat([pcmRest, audio]);
      const frame = FRAME_MS * 8;
      while (pcmRest.length >= frame) {
        hear(mulawDecode(pcmRest.subarray(0, frame)));
        pcmRest = pcmRest.subarray(frame);
      }
    };

    ws.on('message', (data, isBinary) => {
      let event: Record<string, unknown>;
      try {
        if (isBinary) throw new Error('binary');
        event = JSON.parse(data.toString()) as Record<string, unknown>;
      } catch {
        send({ type: 'error', error: { type: 'invalid_request_error', code: 'invalid_json', message: 'The server could not parse the event.', param: null, event_id: null } });
        return;
      }
      const { audio, ...rest } = event;
      conn.events.push(rest);
      const invalid = (message: string, code = 'invalid_value') =>
        send({ type: 'error', error: { type: 'invalid_request_error', code, message, param: null, event_id: event.event_id ?? null } });
      switch (event.type) {
        case 'session.update': {
          const session = event.session as { type?: string; audio?: { input?: Record<string, unknown> } } | undefined;
          if (session?.type !== 'transcription') return invalid(`session.type must be "transcription" in a transcription session, not ${JSON.stringify(session?.type)}`);
          const next = { ...input(), ...(session.audio?.input ?? {}) };
          const format = (next.format as { type?: string } | undefined)?.type;
          if (!format || !(format in FORMAT_BYTES_PER_MS)) return invalid(`unsupported audio format ${JSON.stringify(format)}`);
          const model = (next.transcription as { model?: string } | null)?.model;
          if (!model || !FAKE_TRANSCRIBE_MODELS.includes(model)) return invalid(`unknown transcription model ${JSON.stringify(model)}`);
          conn.session = { ...conn.session, audio: { input: next } };
          send({ type: 'session.updated', session: conn.session });
          return;
        }
        case 'input_audio_buffer.append':
          if (typeof audio !== 'string') return invalid('audio must be base64 text');
          onAudio(Buffer.from(audio, 'base64'));
          return;
        case 'input_audio_buffer.commit': {
          const perMs = FORMAT_BYTES_PER_MS[(input().format as { type: string }).type] ?? 48;
          if (bufferBytes < 100 * perMs) {
            return invalid(`Error committing input audio buffer: buffer too small. Expected at least 100ms of audio, but buffer only has ${(bufferBytes / perMs).toFixed(2)}ms of audio.`, 'input_audio_buffer_commit_empty');
          }
          commit(bufferBytes / perMs);
          return;
        }
        case 'input_audio_buffer.clear':
          bufferBytes = 0;
          bufferMs = 0;
          send({ type: 'input_audio_buffer.cleared' });
          return;
        default:
          return invalid(`unknown event type ${JSON.stringify(event.type)}`, 'invalid_event');
      }
    });
    ws.on('close', (code) => {
      conn.closed = true;
      conn.closeCode = code;
      sockets.delete(ws);
    });
    send({ type: 'session.created', session: conn.session });
  }

  const { url } = await listenLocal(server, certificate ? 'https' : 'http');
  return {
    url,
    apiKey: base.apiKey,
    script: base,
    connections,
    ...(certificate ? { ca: certificate.cert } : {}),
    openConnections: () => tcp.size,
    close: () => shutDown(server, { timers, webSockets: sockets, connections: tcp, wss }),
  };
}
