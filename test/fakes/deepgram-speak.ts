/**
 * A local stand-in for Deepgram's streaming text-to-speech (`wss://api.deepgram.com/v1/speak`,
 * Aura), faithful enough that the official `@deepgram/sdk` (v5, `speak.v1`) works against it.
 * (The live transcription fake, `deepgram.ts`, is another endpoint with another protocol.)
 *
 * - The upgrade needs `Authorization: Token <key>`; anything else is refused with 401 and
 *   Deepgram's error body `{"err_code","err_msg","request_id"}`; an unknown `model`, `encoding`
 *   or `sample_rate` with 400.
 * - On open it sends `Metadata`. Text frames are `{type:"Speak", text}` (buffered), `Flush`
 *   (the buffer is spoken as binary audio frames, then `{type:"Flushed", sequence_id}`), `Clear`
 *   (buffer and pending audio dropped, `Cleared`) and `Close` (closed with 1000). Anything else
 *   is answered with a `Warning`.
 *
 * The audio carries its text (`audioForText` of the ElevenLabs fake) unless the script brings
 * its own `synthesize`. A script's faults: refuse or never answer the upgrade, drop the
 * connection, send garbage, send an `Error` message, close with a code, or stay silent.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';
import { mulawDecode } from '../../src/audio/mulaw.js';
import { audioForText } from './elevenlabs.js';
import { connectionControls, fakeTimers, layered, listenLocal, shutDown, trackConnections, type FakeConnections } from './http.js';

export interface FakeDeepgramSpeakScript {
  apiKey: string;
  bytesPerChar: number;
  /** Size of each binary audio frame; deliberately not a multiple of 160. */
  chunkBytes: number;
  chunkDelayMs: number;
  refuseStatus: number | null;
  /** Never answer the upgrade (connect timeouts). */
  hang: boolean;
  /** Never send audio, nor `Flushed`. */
  silent: boolean;
  dropAfterChunks: number | null;
  garbageAfterChunks: number | null;
  /** After this many audio frames: `{type:"Error"}`, then close 1011. */
  errorAfterChunks: number | null;
  closeAfterChunks: number | null;
  closeCode: number;
  synthesize?: (text: string) => Buffer;
  record?: boolean;
  perSocket?: (socket: { headers: IncomingMessage['headers']; query: URLSearchParams }) => Partial<Omit<FakeDeepgramSpeakScript, 'perSocket'>> | undefined;
}

export interface RecordedSpeakSocket {
  headers: IncomingMessage['headers'];
  query: URLSearchParams;
  /** Every JSON message the client sent, in order. */
  messages: Record<string, unknown>[];
  /** Texts spoken (one per Flush with text), in order. */
  generated: string[];
  chunks: number;
  closed: boolean;
  closeCode: number | null;
}

export interface FakeDeepgramSpeak extends FakeConnections {
  /** `http://127.0.0.1:<port>`: the value for `DEEPGRAM_API_BASE`. */
  url: string;
  /** `ws://127.0.0.1:<port>`: the SDK's `baseUrl`. */
  wsUrl: string;
  script: FakeDeepgramSpeakScript;
  sockets: RecordedSpeakSocket[];
  upgrades: number;
  close(): Promise<void>;
}

export const FAKE_DEEPGRAM_SPEAK_KEY = 'dg-speak-test-key';
const ENCODINGS = ['mulaw', 'linear16', 'alaw'];
const RATES = ['8000', '16000', '24000', '32000', '48000'];

export const defaultDeepgramSpeakScript = (): FakeDeepgramSpeakScript => ({
  apiKey: FAKE_DEEPGRAM_SPEAK_KEY,
  bytesPerChar: 160,
  chunkBytes: 1000,
  chunkDelayMs: 0,
  refuseStatus: null,
  hang: false,
  silent: false,
  dropAfterChunks: null,
  garbageAfterChunks: null,
  errorAfterChunks: null,
  closeAfterChunks: null,
  closeCode: 1011,
});

function refuse(socket: Duplex, status: number, errCode: string, errMsg: string) {
  const body = JSON.stringify({ err_code: errCode, err_msg: errMsg, request_id: randomUUID() });
  socket.end(`HTTP/1.1 ${status} Error\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
}

export async function startFakeDeepgramSpeak(overrides: Partial<FakeDeepgramSpeakScript> = {}): Promise<FakeDeepgramSpeak> {
  const script: FakeDeepgramSpeakScript = { ...defaultDeepgramSpeakScript(), ...overrides };
  const sockets: RecordedSpeakSocket[] = [];
  const { pending: pendingTimers, sleep } = fakeTimers();
  const wss = new WebSocketServer({ noServer: true, perMessageDeflate: false });
  let upgrades = 0;

  const server: Server = createServer((_req, res) => {
    res.writeHead(404, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ err_code: 'NOT_FOUND', err_msg: 'Not Found' }));
  });
  const connections = trackConnections(server);

  server.on('upgrade', (req, socket, head) => {
    upgrades++;
    socket.on('error', () => {});
    const url = new URL(req.url ?? '/', 'http://fake');
    if (url.pathname !== '/v1/speak') return refuse(socket, 404, 'NOT_FOUND', 'Not Found');
    const s = layered(script, script.perSocket?.({ headers: req.headers, query: url.searchParams }));
    if (s.hang) {
      // never answered; a client that gives up is seen going (the socket is read, and dropped at its end)
      socket.on('end', () => socket.destroy());
      socket.resume();
      return;
    }
    if (req.headers.authorization !== `Token ${s.apiKey}`) return refuse(socket, 401, 'INVALID_AUTH', 'Invalid credentials.');
    const q = url.searchParams;
    const model = q.get('model') ?? 'aura-asteria-en';
    if (!/^aura-(2-)?[a-z]+-[a-z]{2}$/.test(model)) return refuse(socket, 400, 'Bad Request', `No such model: ${model}`);
    if (!ENCODINGS.includes(q.get('encoding') ?? 'linear16')) return refuse(socket, 400, 'Bad Request', `Unsupported encoding: ${q.get('encoding')}`);
    if (!RATES.includes(q.get('sample_rate') ?? '24000')) return refuse(socket, 400, 'Bad Request', `Unsupported sample_rate: ${q.get('sample_rate')}`);
    if (s.refuseStatus !== null) {
      return refuse(socket, s.refuseStatus, s.refuseStatus === 429 ? 'TOO_MANY_REQUESTS' : 'INTERNAL_SERVER_ERROR', s.refuseStatus === 429 ? 'Too many requests.' : 'Internal server error.');
    }
    wss.handleUpgrade(req, socket, head, (ws) => onSocket(ws, req, q, model, s));
  });

  function onSocket(ws: WebSocket, req: IncomingMessage, query: URLSearchParams, model: string, s: FakeDeepgramSpeakScript) {
    const record: RecordedSpeakSocket = { headers: req.headers, query, messages: [], generated: [], chunks: 0, closed: false, closeCode: null };
    const keep = s.record !== false;
    sockets.push(record);
    const encoding = query.get('encoding') ?? 'linear16';
    let stopped = false;
    let buffer = '';
    let sequence = 0;
    /** Bumped by `Clear`: audio queued before it is not sent. */
    let generation = 0;
    let outbox: Promise<void> = Promise.resolve();
    const queue = (step: () => void | Promise<void>) => {
      outbox = outbox.then(async () => {
        if (stopped || ws.readyState !== ws.OPEN) return;
        await step();
      });
    };
    const send = (m: Record<string, unknown>) => ws.send(JSON.stringify(m));

    const afterChunk = () => {
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
        send({ type: 'Error', err_code: 'INTERNAL_SERVER_ERROR', description: 'The synthesis failed.' });
        ws.close(1011, 'INTERNAL_SERVER_ERROR');
      } else if (s.closeAfterChunks !== null && n >= s.closeAfterChunks) {
        stopped = true;
        ws.close(s.closeCode, 'NET-0000');
      }
    };

    const speak = (text: string) => {
      if (s.silent) return;
      const g = generation;
      if (text.trim().length > 0) {
        if (keep) record.generated.push(text);
        const mulaw = s.synthesize ? s.synthesize(text) : audioForText(text, s.bytesPerChar);
        const audio = encoding === 'linear16' ? Buffer.from(mulawDecode(mulaw).buffer) : mulaw;
        for (let off = 0; off < audio.length; off += s.chunkBytes) {
          const piece = audio.subarray(off, off + s.chunkBytes);
          queue(async () => {
            if (s.chunkDelayMs > 0) await sleep(s.chunkDelayMs);
            if (stopped || g !== generation || ws.readyState !== ws.OPEN) return;
            ws.send(piece);
            afterChunk();
          });
        }
      }
      const id = sequence++;
      queue(() => {
        if (g === generation) send({ type: 'Flushed', sequence_id: id });
      });
    };

    send({ type: 'Metadata', request_id: randomUUID(), model_name: model, model_version: '2025-04-07.0', model_uuid: randomUUID() });

    ws.on('message', (data, isBinary) => {
      if (stopped) return;
      let msg: Record<string, unknown> | null = null;
      try {
        if (!isBinary) msg = JSON.parse(data.toString()) as Record<string, unknown>;
      } catch {
        msg = null;
      }
      if (!msg || typeof msg.type !== 'string') {
        send({ type: 'Warning', description: 'Failed to parse the message.', code: 'INVALID_MESSAGE' });
        return;
      }
      if (keep) record.messages.push(msg);
      switch (msg.type) {
        case 'Speak':
          if (typeof msg.text === 'string') buffer += msg.text;
          else send({ type: 'Warning', description: 'Speak needs a text.', code: 'INVALID_MESSAGE' });
          return;
        case 'Flush': {
          const text = buffer;
          buffer = '';
          speak(text);
          return;
        }
        case 'Clear': {
          buffer = '';
          generation++;
          send({ type: 'Cleared', sequence_id: sequence++ });
          return;
        }
        case 'Close':
          queue(() => {
            stopped = true;
            ws.close(1000);
          });
          return;
        default:
          send({ type: 'Warning', description: `Unknown message type: ${msg.type}`, code: 'INVALID_MESSAGE' });
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

  const { url, port } = await listenLocal(server);
  return {
    url,
    wsUrl: `ws://127.0.0.1:${port}`,
    script,
    sockets,
    get upgrades() {
      return upgrades;
    },
    ...connectionControls(server, connections),
    close: () => shutDown(server, { timers: pendingTimers, webSockets: wss.clients, connections, wss }),
  };
}
