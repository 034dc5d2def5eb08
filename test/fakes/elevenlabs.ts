/**
 * A local stand-in for the ElevenLabs API, close enough to the wire protocol that the official
 * SDK (`@elevenlabs/elevenlabs-js`) works against it:
 *
 * - WebSocket `GET /v1/text-to-speech/:voice_id/stream-input` (the stream-input protocol: a
 *   first message `{text:" ", voice_settings, generation_config, xi-api-key?}`, then
 *   `{text, flush?, try_trigger_generation?}`, closed by `{text:""}`; answers
 *   `{audio, isFinal, normalizedAlignment, alignment}` and finally `{audio:null, isFinal:true}`).
 * - `POST /v1/text-to-speech/:voice_id/stream` and `POST /v1/text-to-speech/:voice_id`
 *   (what the SDK's `textToSpeech.stream()` and `convert()` call), for `output_format=ulaw_8000`.
 *
 * A script may change any of its fields for one socket, chosen from the upgrade request
 * (`perSocket`, e.g. by voice), so that one fake serves a healthy call and a faulty one side by side.
 *
 * The audio carries its text so tests can check order: every UTF-8 byte of the synthesized text
 * becomes `bytesPerChar` μ-law bytes of that value (see `audioForText`), unless the script brings
 * its own `synthesize` (the call benchmark's vendor fakes speak the sandbox modem,
 * test/bench/vendor-fakes.ts). `record: false` keeps no message and no closed socket.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { WebSocketServer, type WebSocket } from 'ws';
import {
  connectionControls,
  fakeTimers,
  layered,
  listenLocal,
  readBody,
  shutDown,
  trackConnections,
  type FakeConnections,
} from './http.js';

export interface FakeElevenLabsScript {
  /** The key that is accepted (header `xi-api-key`, or `xi-api-key` in the first message). */
  apiKey: string;
  /** How a wrong key on the socket is refused: HTTP 401 at the upgrade, or an error message + close 1008. */
  authFailure: 'http-401' | 'ws-error';
  /** μ-law bytes generated per UTF-8 byte of text (160 = 20 ms). */
  bytesPerChar: number;
  /** Size of each audio message (bytes before base64); deliberately not a multiple of 160. */
  chunkBytes: number;
  /** Wait before each audio message (ms). */
  audioDelayMs: number;
  /** Wait before answering the WebSocket upgrade (ms); `Infinity` never answers. */
  handshakeDelayMs: number;
  /** Never send audio, nor isFinal (the client's timeout is tested). */
  silent: boolean;
  /** After this many audio messages of a socket, send `errorMessage` and close with `errorCloseCode`. */
  errorAfterAudioMessages: number | null;
  errorMessage: Record<string, unknown>;
  errorCloseCode: number;
  /** After this many audio messages of a socket, drop the TCP connection (no close frame). */
  dropAfterAudioMessages: number | null;
  /** Close (1000) right after the first message, without audio or isFinal. */
  closeCleanlyAfterInit: boolean;
  /** At the end of input, close (1000) without sending `isFinal` first. */
  omitFinal: boolean;
  /** Send a message that is not JSON instead of the first audio message. */
  sendInvalidJson: boolean;
  /** The audio for a generation's text (default `audioForText(text, bytesPerChar)`). */
  synthesize?: (text: string) => Buffer;
  /** Wait before the first audio message of each generation (ms), on top of `audioDelayMs`. */
  generationDelayMs?: number;
  /** Keep each socket's messages and generated texts, and every socket after it closed (default true). */
  record?: boolean;
  /**
   * Fields that differ for one socket, chosen from its upgrade request (e.g. by voice);
   * `undefined` keeps the script as it is.
   */
  perSocket?: (socket: { voiceId: string; query: URLSearchParams; headers: IncomingMessage['headers'] }) =>
    | Partial<Omit<FakeElevenLabsScript, 'perSocket'>>
    | undefined;
}

export interface RecordedSocket {
  voiceId: string;
  query: URLSearchParams;
  headers: IncomingMessage['headers'];
  /** Every JSON message the client sent, in order. */
  messages: Record<string, unknown>[];
  /** Texts that audio was generated for, in order. */
  generated: string[];
  audioMessages: number;
  closed: boolean;
  /** Close code the client sent, or 1006 when the TCP connection went without one. */
  closeCode: number | null;
}

export interface RecordedHttpRequest {
  method: string;
  path: string;
  query: URLSearchParams;
  headers: IncomingMessage['headers'];
  body: Record<string, unknown> | null;
}

export interface FakeElevenLabs extends FakeConnections {
  /** `http://127.0.0.1:<port>`: the value for `ELEVENLABS_API_BASE` and the SDK's `baseUrl`. */
  url: string;
  script: FakeElevenLabsScript;
  sockets: RecordedSocket[];
  httpRequests: RecordedHttpRequest[];
  close(): Promise<void>;
}

export const FAKE_ELEVENLABS_KEY = 'xi-test-key';

export const defaultElevenLabsScript = (): FakeElevenLabsScript => ({
  apiKey: FAKE_ELEVENLABS_KEY,
  authFailure: 'http-401',
  bytesPerChar: 160,
  chunkBytes: 1000,
  audioDelayMs: 0,
  handshakeDelayMs: 0,
  silent: false,
  errorAfterAudioMessages: null,
  errorMessage: { message: 'We are sorry, something went wrong.', error: 'internal_error', code: 1011 },
  errorCloseCode: 1011,
  dropAfterAudioMessages: null,
  closeCleanlyAfterInit: false,
  omitFinal: false,
  sendInvalidJson: false,
});

/** The μ-law audio the fake makes for `text`: each UTF-8 byte held for `bytesPerChar` samples. */
export function audioForText(text: string, bytesPerChar = 160): Buffer {
  const utf8 = Buffer.from(text, 'utf8');
  const out = Buffer.alloc(utf8.length * bytesPerChar);
  for (let i = 0; i < utf8.length; i++) out.fill(utf8[i]!, i * bytesPerChar, (i + 1) * bytesPerChar);
  return out;
}

/** The inverse of `audioForText` for audio that came through whole. */
export function textFromAudio(audio: Buffer, bytesPerChar = 160): string {
  const bytes: number[] = [];
  for (let i = 0; i + bytesPerChar <= audio.length; i += bytesPerChar) bytes.push(audio[i]!);
  return Buffer.from(bytes).toString('utf8');
}

const DEFAULT_SCHEDULE = [120, 160, 250, 290];
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export async function startFakeElevenLabs(
  overrides: Partial<FakeElevenLabsScript> = {},
): Promise<FakeElevenLabs> {
  const script: FakeElevenLabsScript = { ...defaultElevenLabsScript(), ...overrides };
  const sockets: RecordedSocket[] = [];
  const httpRequests: RecordedHttpRequest[] = [];
  const { pending: pendingTimers, later: laterMs } = fakeTimers();
  const wss = new WebSocketServer({ noServer: true, perMessageDeflate: false });

  /** `Infinity` never runs. */
  const later = (ms: number, fn: () => void) => (Number.isFinite(ms) ? laterMs(ms, fn) : undefined);

  const server: Server = createServer((req, res) => {
    handleHttp(req, res).catch((err: unknown) => {
      if (!res.headersSent) sendJson(res, 500, { detail: { status: 'internal', message: String(err) } });
      else res.destroy();
    });
  });
  const connections = trackConnections(server);

  server.on('upgrade', (req, socket, head) => {
    const url = new URL(req.url ?? '/', 'http://fake');
    const match = /^\/v1\/text-to-speech\/([^/]+)\/stream-input$/.exec(url.pathname);
    if (!match) {
      socket.end('HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n');
      return;
    }
    const voiceId = decodeURIComponent(match[1]!);
    // this socket's script: the fields `perSocket` changes, the others read from `script` as used
    const s = layered(script, script.perSocket?.({ voiceId, query: url.searchParams, headers: req.headers }));
    const headerKey = req.headers['xi-api-key'];
    if (headerKey !== undefined && headerKey !== s.apiKey && s.authFailure === 'http-401') {
      const body = JSON.stringify({ detail: { status: 'invalid_api_key', message: 'Invalid API key' } });
      socket.end(
        `HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
      );
      return;
    }
    // Until the upgrade is answered, a client that goes away must not leave a half-open socket.
    const onEnd = () => socket.destroy();
    socket.on('end', onEnd);
    socket.on('error', () => {});
    const forget = () => {
      if (answer) {
        clearTimeout(answer);
        pendingTimers.delete(answer);
      }
    };
    socket.on('close', forget);
    const answer = later(s.handshakeDelayMs, () => {
      socket.off('close', forget);
      if (socket.destroyed) return;
      socket.off('end', onEnd);
      wss.handleUpgrade(req, socket, head, (ws) => {
        onSocket(ws, req, voiceId, url.searchParams, headerKey === s.apiKey, s);
      });
    });
  });

  function onSocket(
    ws: WebSocket,
    req: IncomingMessage,
    voiceId: string,
    query: URLSearchParams,
    headerAuthed: boolean,
    script: FakeElevenLabsScript,
  ) {
    const record: RecordedSocket = {
      voiceId,
      query,
      headers: req.headers,
      messages: [],
      generated: [],
      audioMessages: 0,
      closed: false,
      closeCode: null,
    };
    const keep = script.record !== false;
    sockets.push(record);
    let buffer = '';
    let initialized = false;
    let schedule = DEFAULT_SCHEDULE;
    let scheduleIndex = 0;
    // Messages go out one after another, each after its delay, in order.
    let outbox: Promise<void> = Promise.resolve();
    let stopped = false;

    const refuse = (message: Record<string, unknown>, code: number, reason: string) => {
      stopped = true;
      ws.send(JSON.stringify(message));
      ws.close(code, reason);
    };

    const queue = (step: () => void | Promise<void>) => {
      outbox = outbox.then(async () => {
        if (stopped || ws.readyState !== ws.OPEN) return;
        await step();
      });
    };

    const generate = (text: string) => {
      if (script.silent || text.trim().length === 0) return;
      if (keep) record.generated.push(text);
      const audio = script.synthesize ? script.synthesize(text) : audioForText(text, script.bytesPerChar);
      const chars = [...text];
      const msPerChar = script.synthesize ? audio.length / 8 / Math.max(1, chars.length) : script.bytesPerChar / 8;
      const generationDelayMs = script.generationDelayMs ?? 0;
      for (let off = 0; off < audio.length; off += script.chunkBytes) {
        const piece = audio.subarray(off, off + script.chunkBytes);
        const first = off === 0;
        queue(async () => {
          if (first && generationDelayMs > 0) await sleep(generationDelayMs);
          if (script.audioDelayMs > 0) await sleep(script.audioDelayMs);
          if (stopped || ws.readyState !== ws.OPEN) return;
          if (script.sendInvalidJson) {
            ws.send('<html>502 Bad Gateway</html>');
            return;
          }
          const alignment = first
            ? {
                chars,
                charStartTimesMs: chars.map((_, i) => Math.round(i * msPerChar)),
                charDurationsMs: chars.map(() => Math.round(msPerChar)),
              }
            : null;
          ws.send(
            JSON.stringify({
              audio: piece.toString('base64'),
              isFinal: null,
              normalizedAlignment: alignment,
              alignment,
            }),
          );
          record.audioMessages++;
          if (script.dropAfterAudioMessages !== null && record.audioMessages >= script.dropAfterAudioMessages) {
            stopped = true;
            ws.terminate();
          } else if (script.errorAfterAudioMessages !== null && record.audioMessages >= script.errorAfterAudioMessages) {
            refuse(script.errorMessage, script.errorCloseCode, String(script.errorMessage.message ?? 'error').slice(0, 120));
          }
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
        refuse({ message: 'Invalid message received', error: 'invalid_message', code: 1008 }, 1008, 'Invalid message received');
        return;
      }
      if (keep) record.messages.push(msg);
      if (typeof msg.text !== 'string') {
        refuse({ message: 'Field "text" is required', error: 'invalid_message', code: 1008 }, 1008, 'Field text is required');
        return;
      }
      if (!initialized) {
        initialized = true;
        const bodyKey = msg['xi-api-key'];
        if (!headerAuthed && bodyKey !== script.apiKey) {
          refuse({ message: 'Invalid API key', error: 'invalid_api_key', code: 1008 }, 1008, 'Invalid API key');
          return;
        }
        if (msg.text !== ' ') {
          refuse({ message: 'The first message must be a single space', error: 'invalid_message', code: 1008 }, 1008, 'Invalid first message');
          return;
        }
        const config = msg.generation_config as { chunk_length_schedule?: number[] } | undefined;
        if (Array.isArray(config?.chunk_length_schedule) && config.chunk_length_schedule.length > 0) {
          schedule = config.chunk_length_schedule;
        }
        if (script.closeCleanlyAfterInit) {
          stopped = true;
          ws.close(1000);
        }
        return;
      }
      if (msg.text === '') {
        // End of input: generate what is left, then isFinal, then close.
        generate(buffer);
        buffer = '';
        if (script.silent) return;
        queue(() => {
          if (!script.omitFinal) {
            ws.send(JSON.stringify({ audio: null, isFinal: true, normalizedAlignment: null, alignment: null }));
          }
          stopped = true;
          ws.close(1000);
        });
        return;
      }
      buffer += msg.text;
      const threshold = schedule[Math.min(scheduleIndex, schedule.length - 1)] ?? 120;
      if (msg.flush === true || msg.try_trigger_generation === true || buffer.length >= threshold) {
        if (msg.flush !== true) scheduleIndex++;
        generate(buffer);
        buffer = '';
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

  async function handleHttp(req: IncomingMessage, res: ServerResponse) {
    const url = new URL(req.url ?? '/', 'http://fake');
    const match = /^\/v1\/text-to-speech\/([^/]+)(\/stream)?$/.exec(url.pathname);
    const raw = await readBody(req);
    let body: Record<string, unknown> | null = null;
    try {
      body = raw.length > 0 ? (JSON.parse(raw) as Record<string, unknown>) : null;
    } catch {
      body = null;
    }
    httpRequests.push({ method: req.method ?? '', path: url.pathname, query: url.searchParams, headers: req.headers, body });
    if (!match || req.method !== 'POST') {
      sendJson(res, 404, { detail: 'Not Found' });
      return;
    }
    if (req.headers['xi-api-key'] !== script.apiKey) {
      sendJson(res, 401, { detail: { status: 'invalid_api_key', message: 'Invalid API key' } });
      return;
    }
    if (!body || typeof body.text !== 'string') {
      sendJson(res, 422, {
        detail: [{ type: 'missing', loc: ['body', 'text'], msg: 'Field required', input: body }],
      });
      return;
    }
    const format = url.searchParams.get('output_format') ?? 'mp3_44100_128';
    if (format !== 'ulaw_8000') {
      sendJson(res, 400, {
        detail: { status: 'invalid_output_format', message: `the fake only produces ulaw_8000, not ${format}` },
      });
      return;
    }
    const audio = audioForText(body.text, script.bytesPerChar);
    // One request per connection: no pooled socket of an SDK's fetch outlives a test.
    res.writeHead(200, { 'content-type': 'audio/basic', 'transfer-encoding': 'chunked', connection: 'close' });
    for (let off = 0; off < audio.length; off += script.chunkBytes) {
      if (res.destroyed) return;
      if (script.audioDelayMs > 0) await sleep(script.audioDelayMs);
      res.write(audio.subarray(off, off + script.chunkBytes));
    }
    res.end();
  }

  const { url } = await listenLocal(server);
  return {
    url,
    script,
    sockets,
    httpRequests,
    ...connectionControls(server, connections),
    close: () => shutDown(server, { timers: pendingTimers, webSockets: wss.clients, connections, wss }),
  };
}

function sendJson(res: ServerResponse, status: number, body: unknown) {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
    connection: 'close',
  });
  res.end(text);
}
