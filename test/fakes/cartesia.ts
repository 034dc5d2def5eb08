/**
 * A local stand-in for Cartesia's TTS WebSocket (`/tts/websocket`), close enough to the wire
 * protocol that the official SDK (`@cartesia/cartesia-js`) works against it:
 *
 * - The upgrade needs the key (`Authorization: Bearer <key>`, or `X-API-Key`, or `?api_key=`)
 *   and an API version (`Cartesia-Version` header or `?cartesia_version=`); otherwise 401 or 400
 *   with Cartesia's error body `{error, message}`.
 * - Text messages are generation requests `{context_id, model_id, voice, output_format,
 *   transcript, continue?, flush?, language?, ...}` or `{cancel: true, context_id}`. Each context
 *   answers `{type:"chunk", data (base64), done:false, status_code:206, step_time, context_id}`
 *   per piece of audio, `{type:"flush_done", flush_id, ...}` after a `flush`, and
 *   `{type:"done", done:true, status_code:200, context_id}` once a transcript with
 *   `continue:false` was spoken. A bad request is answered `{type:"error", status_code:400, ...}`.
 *
 * The audio carries its text so tests can check order (`audioForText` of the ElevenLabs fake:
 * each UTF-8 byte held for `bytesPerChar` μ-law samples), unless the script brings its own
 * `synthesize`. A script's faults: refuse or never answer the upgrade, drop the connection, send
 * garbage, send an error message, close with a code, or stay silent. `record: false` keeps nothing.
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { WebSocketServer, type WebSocket } from 'ws';
import { mulawDecode } from '../../src/audio/mulaw.js';
import { audioForText } from './elevenlabs.js';
import { connectionControls, fakeTimers, layered, listenLocal, shutDown, trackConnections, type FakeConnections } from './http.js';

export interface FakeCartesiaScript {
  apiKey: string;
  /** μ-law bytes generated per UTF-8 byte of text (160 = 20 ms). */
  bytesPerChar: number;
  /** Size of each chunk's audio (bytes before base64); deliberately not a multiple of 160. */
  chunkBytes: number;
  /** Wait before each chunk (ms). */
  chunkDelayMs: number;
  /** Answer the upgrade with this HTTP status and Cartesia's error body (429, 500, ...). */
  refuseStatus: number | null;
  /** Never answer the upgrade (connect timeouts). */
  hang: boolean;
  /** Never send audio, nor `done` (the client's timeout is tested). */
  silent: boolean;
  /** After this many chunks of a socket: drop the TCP connection (no close frame). */
  dropAfterChunks: number | null;
  /** After this many chunks of a socket: a message that is not JSON. */
  garbageAfterChunks: number | null;
  /** After this many chunks of a socket: an error message for the context (`errorStatus`). */
  errorAfterChunks: number | null;
  errorStatus: number;
  /** After this many chunks of a socket: close with `closeCode`. */
  closeAfterChunks: number | null;
  closeCode: number;
  /** The μ-law audio for a transcript (default `audioForText(text, bytesPerChar)`). */
  synthesize?: (text: string) => Buffer;
  /** Keep each socket's messages and closed sockets (default true). */
  record?: boolean;
  /** Fields that differ for one socket, chosen from its upgrade request. */
  perSocket?: (socket: { headers: IncomingMessage['headers']; query: URLSearchParams }) => Partial<Omit<FakeCartesiaScript, 'perSocket'>> | undefined;
}

export interface RecordedCartesiaSocket {
  headers: IncomingMessage['headers'];
  query: URLSearchParams;
  /** Every JSON message the client sent, in order. */
  messages: Record<string, unknown>[];
  /** Transcripts that audio was generated for, in order. */
  generated: string[];
  chunks: number;
  closed: boolean;
  /** Close code the client sent, or 1006 when the TCP connection went without one. */
  closeCode: number | null;
}

export interface FakeCartesia extends FakeConnections {
  /** `http://127.0.0.1:<port>`: the value for `CARTESIA_API_BASE` and the SDK's `baseURL`. */
  url: string;
  script: FakeCartesiaScript;
  sockets: RecordedCartesiaSocket[];
  /** Upgrade requests seen, refused or not. */
  upgrades: number;
  close(): Promise<void>;
}

export const FAKE_CARTESIA_KEY = 'sk_car_test';
const ENCODINGS = ['pcm_mulaw', 'pcm_s16le'];
const RATES = [8000, 16000, 22050, 24000, 44100, 48000];

export const defaultCartesiaScript = (): FakeCartesiaScript => ({
  apiKey: FAKE_CARTESIA_KEY,
  bytesPerChar: 160,
  chunkBytes: 1000,
  chunkDelayMs: 0,
  refuseStatus: null,
  hang: false,
  silent: false,
  dropAfterChunks: null,
  garbageAfterChunks: null,
  errorAfterChunks: null,
  errorStatus: 500,
  closeAfterChunks: null,
  closeCode: 1011,
});

/** What Cartesia checks in a generation request, with its messages' shape; null when fine. */
function problemOf(msg: Record<string, unknown>): string | null {
  if (typeof msg.context_id !== 'string' || msg.context_id === '') return 'context_id is required';
  if (typeof msg.model_id !== 'string' || msg.model_id === '') return 'model_id is required';
  if (typeof msg.transcript !== 'string') return 'transcript is required';
  const voice = msg.voice as { mode?: unknown; id?: unknown } | string | undefined;
  const voiceId = typeof voice === 'string' ? voice : voice?.id;
  if (typeof voiceId !== 'string' || voiceId.trim() === '') return 'voice.id is required';
  const format = msg.output_format as { container?: unknown; encoding?: unknown; sample_rate?: unknown } | undefined;
  if (format?.container !== 'raw') return 'output_format.container must be "raw" here';
  if (!ENCODINGS.includes(format.encoding as string)) return `output_format.encoding ${String(format.encoding)} is not supported by the fake`;
  if (!RATES.includes(format.sample_rate as number)) return `output_format.sample_rate ${String(format.sample_rate)} is not supported`;
  return null;
}

export async function startFakeCartesia(overrides: Partial<FakeCartesiaScript> = {}): Promise<FakeCartesia> {
  const script: FakeCartesiaScript = { ...defaultCartesiaScript(), ...overrides };
  const sockets: RecordedCartesiaSocket[] = [];
  const { pending: pendingTimers, sleep } = fakeTimers();
  const wss = new WebSocketServer({ noServer: true, perMessageDeflate: false });
  let upgrades = 0;

  const server: Server = createServer((_req, res) => {
    res.writeHead(404, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ error: 'Not Found' }));
  });
  const connections = trackConnections(server);

  const refuse = (socket: import('node:stream').Duplex, status: number, error: string) => {
    const body = JSON.stringify({ error, message: error });
    socket.end(`HTTP/1.1 ${status} Error\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
  };

  server.on('upgrade', (req, socket, head) => {
    upgrades++;
    socket.on('error', () => {});
    const url = new URL(req.url ?? '/', 'http://fake');
    if (url.pathname !== '/tts/websocket') return refuse(socket, 404, 'Not Found');
    const s = layered(script, script.perSocket?.({ headers: req.headers, query: url.searchParams }));
    if (s.hang) {
      // never answered; a client that gives up is seen going (the socket is read, and dropped at its end)
      socket.on('end', () => socket.destroy());
      socket.resume();
      return;
    }
    const bearer = String(req.headers.authorization ?? '').replace(/^Bearer\s+/i, '');
    const key = bearer || req.headers['x-api-key'] || url.searchParams.get('api_key');
    if (key !== s.apiKey) return refuse(socket, 401, 'Invalid API key');
    if (!req.headers['cartesia-version'] && !url.searchParams.get('cartesia_version')) {
      return refuse(socket, 400, 'Cartesia-Version header is required');
    }
    if (s.refuseStatus !== null) return refuse(socket, s.refuseStatus, s.refuseStatus === 429 ? 'Too many concurrent requests' : 'Internal server error');
    wss.handleUpgrade(req, socket, head, (ws) => onSocket(ws, req, url.searchParams, s));
  });

  function onSocket(ws: WebSocket, req: IncomingMessage, query: URLSearchParams, s: FakeCartesiaScript) {
    const record: RecordedCartesiaSocket = { headers: req.headers, query, messages: [], generated: [], chunks: 0, closed: false, closeCode: null };
    const keep = s.record !== false;
    sockets.push(record);
    let stopped = false;
    const cancelled = new Set<string>();
    const flushIds = new Map<string, number>();
    // Messages go out one after another, in order.
    let outbox: Promise<void> = Promise.resolve();
    const queue = (step: () => void | Promise<void>) => {
      outbox = outbox.then(async () => {
        if (stopped || ws.readyState !== ws.OPEN) return;
        await step();
      });
    };
    const send = (m: Record<string, unknown>) => ws.send(JSON.stringify(m));

    const afterChunk = (contextId: string) => {
      record.chunks++;
      const n = record.chunks;
      if (s.dropAfterChunks !== null && n >= s.dropAfterChunks) {
        stopped = true;
        ws.terminate();
      } else if (s.garbageAfterChunks !== null && n >= s.garbageAfterChunks) {
        stopped = true;
        ws.send('<html>502 Bad Gateway</html>');
      } else if (s.errorAfterChunks !== null && n >= s.errorAfterChunks) {
        stopped = true;
        send({ type: 'error', context_id: contextId, status_code: s.errorStatus, done: true, title: 'Generation failed', message: 'The server had an error while generating.', error_code: 'internal_error' });
      } else if (s.closeAfterChunks !== null && n >= s.closeAfterChunks) {
        stopped = true;
        ws.close(s.closeCode, 'server error');
      }
    };

    const generate = (contextId: string, text: string, encoding: string) => {
      if (s.silent || text.trim().length === 0) return;
      if (keep) record.generated.push(text);
      const mulaw = s.synthesize ? s.synthesize(text) : audioForText(text, s.bytesPerChar);
      const audio = encoding === 'pcm_s16le' ? Buffer.from(mulawDecode(mulaw).buffer) : mulaw;
      for (let off = 0; off < audio.length; off += s.chunkBytes) {
        const piece = audio.subarray(off, off + s.chunkBytes);
        queue(async () => {
          if (s.chunkDelayMs > 0) await sleep(s.chunkDelayMs);
          if (stopped || cancelled.has(contextId) || ws.readyState !== ws.OPEN) return;
          send({ type: 'chunk', data: piece.toString('base64'), done: false, status_code: 206, step_time: 1.5, context_id: contextId });
          afterChunk(contextId);
        });
      }
    };

    ws.on('message', (data, isBinary) => {
      if (stopped) return;
      let msg: Record<string, unknown>;
      try {
        if (isBinary) throw new Error('binary');
        msg = JSON.parse(data.toString()) as Record<string, unknown>;
      } catch {
        send({ type: 'error', status_code: 400, done: true, title: 'Invalid message', message: 'Messages must be JSON text', error_code: 'invalid_request' });
        return;
      }
      if (keep) record.messages.push(msg);
      const contextId = typeof msg.context_id === 'string' ? msg.context_id : '';
      if (msg.cancel === true) {
        cancelled.add(contextId);
        return;
      }
      const problem = problemOf(msg);
      if (problem) {
        send({ type: 'error', context_id: contextId || undefined, status_code: 400, done: true, title: 'Invalid request', message: problem, error_code: 'invalid_request' });
        return;
      }
      if (cancelled.has(contextId)) return;
      generate(contextId, msg.transcript as string, (msg.output_format as { encoding: string }).encoding);
      if (s.silent) return;
      if (msg.flush === true) {
        const id = (flushIds.get(contextId) ?? 0) + 1;
        flushIds.set(contextId, id);
        queue(() => {
          if (!cancelled.has(contextId)) send({ type: 'flush_done', done: false, flush_done: true, flush_id: id, status_code: 206, context_id: contextId });
        });
      }
      if (msg.continue !== true) {
        queue(() => {
          if (!cancelled.has(contextId)) send({ type: 'done', done: true, status_code: 200, context_id: contextId });
        });
      }
    });
    ws.on('close', (code) => {
      stopped = true;
      record.closed = true;
      record.closeCode = code;
      const at = keep ? -1 : sockets.indexOf(record);
      if (at >= 0) sockets.splice(at, 1);
    });
    ws.on('error', () => {});
  }

  const { url } = await listenLocal(server);
  return {
    url,
    script,
    sockets,
    get upgrades() {
      return upgrades;
    },
    ...connectionControls(server, connections),
    close: () => shutDown(server, { timers: pendingTimers, webSockets: wss.clients, connections, wss }),
  };
}
