/**
 * A local stand-in for Deepgram's live streaming API (`wss://api.deepgram.com/v1/listen`),
 * faithful enough that the official `@deepgram/sdk` (v5) works against it.
 *
 * - The upgrade needs `Authorization: Token <key>` (the SDK and our adapter send it); anything
 *   else is refused with 401 and Deepgram's error body `{"err_code","err_msg","request_id"}`.
 * - Binary frames are audio; text frames are `KeepAlive`, `Finalize`, `CloseStream` (JSON).
 * - Each connection plays a script: messages to send after N bytes of audio, on `Finalize`, or
 *   after a delay; and it can close with an error, drop the TCP connection, or refuse upgrades.
 * - A script may choose each connection's behaviour from its upgrade request (`connectionFor`),
 *   so that one fake serves a healthy call and a faulty one side by side; a test can also make a
 *   connection send a message now (`act`).
 * - On `Finalize` with nothing scripted it answers an empty final `Results` with
 *   `from_finalize: true`; on `CloseStream` it sends `Metadata` and closes with 1000, as Deepgram
 *   does. Like Deepgram it closes a stream that received nothing for `idleTimeoutMs` with
 *   1011 `NET-0001`, and an unreadable text message with 1002 `DATA-0000`.
 * - Instead of a script, a connection may have a `transcriber`: it hears every audio frame and
 *   each `Finalize`, and answers through the same actions (the call benchmark's vendor fakes
 *   transcribe the sandbox modem this way, test/bench/vendor-fakes.ts). `record: false` keeps no
 *   audio, no sent message and no closed connection, for a fake that runs for long.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { WebSocketServer, type WebSocket } from 'ws';
import { fakeTimers, listenLocal, shutDown, trackConnections } from './http.js';

export type DeepgramFakeAction =
  | {
      type: 'results';
      transcript: string;
      is_final?: boolean;
      speech_final?: boolean;
      confidence?: number;
      /** Seconds; defaults follow the audio received so far. */
      start?: number;
      duration?: number;
    }
  | { type: 'speech-started'; timestamp?: number }
  | { type: 'utterance-end'; last_word_end?: number }
  /** Any text frame, e.g. malformed JSON. */
  | { type: 'raw'; data: string }
  /** Close with a status code and reason, as Deepgram reports errors (e.g. 1011 NET-0000). */
  | { type: 'error-close'; code: number; reason: string }
  /** Drop the TCP connection with no close frame. */
  | { type: 'disconnect' };

export type DeepgramFakeStep = DeepgramFakeAction & {
  /** Wait until this connection has received at least this many audio bytes. */
  afterBytes?: number;
  /** Wait for the client's next `Finalize`. */
  onFinalize?: boolean;
  /** Then wait this long. */
  delayMs?: number;
};

export interface DeepgramFakeConnectionScript {
  /** Refuse the upgrade with this HTTP status (e.g. 401, 400, 429). */
  refuseStatus?: number;
  /** Accept the TCP connection but never answer the upgrade (connect timeouts). */
  hang?: boolean;
  /** Answer the upgrade only after this long. */
  upgradeDelayMs?: number;
  /** Messages to send, in order; each waits for its trigger after the previous one. */
  steps?: DeepgramFakeStep[];
  /** Ignore `CloseStream` (the client's close timeout must cut the stream). */
  ignoreCloseStream?: boolean;
  /**
   * Made when the connection opens: hears the audio and each `Finalize` (then no empty final is
   * sent for it), and answers with `act` (a `results` step with `onFinalize: true` is marked
   * `from_finalize`). Steps, if any, still run beside it.
   */
  transcriber?: (connection: DeepgramFakeTranscriberContext) => DeepgramFakeTranscriber;
}

export interface DeepgramFakeTranscriberContext {
  index: number;
  query: URLSearchParams;
  /** Sends this message (or closes, drops) now. */
  act(step: DeepgramFakeStep): void;
  /** Seconds of audio received so far. */
  audioSeconds(): number;
}

export interface DeepgramFakeTranscriber {
  audio(frame: Buffer): void;
  /** The client sent `Finalize`: flush, and answer with a final `from_finalize` result. */
  finalize(): void;
  close?(): void;
}

export interface DeepgramFakeScript extends DeepgramFakeConnectionScript {
  /** The key that `Authorization: Token <key>` must carry (default `dg-test-key`). */
  apiKey?: string;
  /** Per connection, in order; the last one repeats. Overrides the top-level fields. */
  connections?: DeepgramFakeConnectionScript[];
  /** Close a stream that got neither audio nor a text message for this long (default 10 s). */
  idleTimeoutMs?: number;
  /**
   * Keep each connection's audio and sent messages, and every connection after it closed
   * (default true, what tests read); `false` for a long-running fake.
   */
  record?: boolean;
  /**
   * Chooses a connection's script from its upgrade request (e.g. by a `keyterm` in the query);
   * `undefined` falls back to `connections` / the top-level fields.
   */
  connectionFor?: (upgrade: { index: number; query: URLSearchParams; headers: IncomingMessage['headers'] }) =>
    | DeepgramFakeConnectionScript
    | undefined;
}

export interface FakeDeepgramConnection {
  index: number;
  query: URLSearchParams;
  headers: IncomingMessage['headers'];
  /** Every binary frame's size, in order (an empty frame would show as 0). */
  frameSizes: number[];
  audioBytes: number;
  audio(): Buffer;
  /** Text messages received (`KeepAlive`, `Finalize`, `CloseStream`, or the raw text if not JSON). */
  controls: string[];
  /** Messages sent to the client, parsed. */
  sent: Array<Record<string, unknown>>;
  closed: boolean;
  closeCode: number | undefined;
  /** Resolves when the connection is gone (either side). */
  whenClosed: Promise<void>;
  /** Sends (or does) this now, outside the script: a test drives what Deepgram hears. */
  act(action: DeepgramFakeAction): void;
}

export interface FakeDeepgram {
  /** `http://127.0.0.1:<port>` (use as DEEPGRAM_API_BASE). */
  url: string;
  /** `ws://127.0.0.1:<port>` (the SDK's `baseUrl`). */
  wsUrl: string;
  apiKey: string;
  connections: FakeDeepgramConnection[];
  /** Upgrade requests seen, including refused ones. */
  upgrades: number;
  /** Open TCP connections right now. */
  openSockets(): number;
  close(): Promise<void>;
}

export async function startFakeDeepgram(script: DeepgramFakeScript = {}): Promise<FakeDeepgram> {
  const apiKey = script.apiKey ?? 'dg-test-key';
  const idleTimeoutMs = script.idleTimeoutMs ?? 10_000;
  const keep = script.record !== false;
  const server: Server = createServer((_req, res) => {
    res.writeHead(404, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ err_code: 'NOT_FOUND', err_msg: 'Not found', request_id: randomUUID() }));
  });
  const wss = new WebSocketServer({ noServer: true });
  const sockets = trackConnections(server);
  const { pending: timers, later: laterMs } = fakeTimers();
  const connections: FakeDeepgramConnection[] = [];
  let upgrades = 0;

  const scriptFor = (index: number): DeepgramFakeConnectionScript => {
    if (!script.connections?.length) return script;
    return script.connections[Math.min(index, script.connections.length - 1)]!;
  };

  server.on('upgrade', (req, socket, head) => {
    const index = upgrades++;
    const url = new URL(req.url ?? '/', 'http://localhost');
    const conn = script.connectionFor?.({ index, query: url.searchParams, headers: req.headers }) ?? scriptFor(index);
    const refuse = (status: number, errCode: string, errMsg: string) => {
      const body = JSON.stringify({ err_code: errCode, err_msg: errMsg, request_id: randomUUID() });
      socket.end(
        `HTTP/1.1 ${status} ${status === 401 ? 'Unauthorized' : 'Error'}\r\n` +
          `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
          `dg-request-id: ${randomUUID()}\r\ndg-error: ${errMsg}\r\nConnection: close\r\n\r\n${body}`,
      );
    };
    if (url.pathname !== '/v1/listen') return refuse(404, 'NOT_FOUND', 'Not found');
    if (req.headers.authorization !== `Token ${apiKey}`) {
      return refuse(401, 'INVALID_AUTH', 'Invalid credentials.');
    }
    // An upgraded socket is half-open capable: close it when the client goes away.
    socket.on('end', () => socket.destroy());
    socket.on('error', () => socket.destroy());
    if (conn.hang) return; // the socket stays open until the client gives up
    if (conn.refuseStatus) return refuse(conn.refuseStatus, 'REFUSED', 'Refused by the script.');
    const accept = () => {
      if (socket.destroyed) return;
      wss.handleUpgrade(req, socket, head, (ws) => serve(ws, req, url.searchParams, conn, connections.length));
    };
    if (!conn.upgradeDelayMs) return accept();
    laterMs(conn.upgradeDelayMs, accept);
  });

  function serve(
    ws: WebSocket,
    req: IncomingMessage,
    query: URLSearchParams,
    conn: DeepgramFakeConnectionScript,
    index: number,
  ): void {
    const chunks: Buffer[] = [];
    let resolveClosed!: () => void;
    const record: FakeDeepgramConnection = {
      index,
      query,
      headers: req.headers,
      frameSizes: [],
      audioBytes: 0,
      audio: () => Buffer.concat(chunks),
      controls: [],
      sent: [],
      closed: false,
      closeCode: undefined,
      whenClosed: new Promise((resolve) => (resolveClosed = resolve)),
      act: (action) => act(action),
    };
    connections.push(record);
    const requestId = randomUUID();
    const myTimers = new Set<NodeJS.Timeout>();
    const later = (ms: number, fn: () => void) => {
      const t = setTimeout(() => {
        myTimers.delete(t);
        timers.delete(t);
        fn();
      }, ms);
      myTimers.add(t);
      timers.add(t);
    };
    let idle: NodeJS.Timeout | undefined;
    const touch = () => {
      if (idle) clearTimeout(idle);
      idle = setTimeout(() => {
        ws.close(1011, 'NET-0001');
      }, idleTimeoutMs);
    };
    touch();

    const sendJson = (msg: Record<string, unknown>) => {
      if (ws.readyState !== ws.OPEN) return;
      if (keep) record.sent.push(msg);
      ws.send(JSON.stringify(msg));
    };
    const audioSeconds = () => record.audioBytes / 8000;

    // The script: each step waits for its trigger, then acts.
    const steps = [...(conn.steps ?? [])];
    let waiting: DeepgramFakeStep | undefined;
    let finalizes = 0;
    let consumedFinalizes = 0;
    let lastEnd = 0;
    const advance = () => {
      if (waiting || record.closed) return;
      const step = steps[0];
      if (!step) return;
      const ready =
        (step.afterBytes === undefined || record.audioBytes >= step.afterBytes) &&
        (!step.onFinalize || finalizes > consumedFinalizes);
      if (!ready) return;
      steps.shift();
      if (step.onFinalize) consumedFinalizes += 1;
      waiting = step;
      later(step.delayMs ?? 0, () => {
        waiting = undefined;
        act(step);
        advance();
      });
    };

    const act = (step: DeepgramFakeStep) => {
      switch (step.type) {
        case 'results': {
          const start = step.start ?? lastEnd;
          const duration = step.duration ?? Math.max(0, audioSeconds() - start);
          if (step.is_final) lastEnd = start + duration;
          const words = step.transcript.split(/\s+/).filter(Boolean);
          const per = words.length ? duration / words.length : 0;
          sendJson({
            type: 'Results',
            channel_index: [0, 1],
            duration,
            start,
            is_final: step.is_final ?? false,
            speech_final: step.speech_final ?? false,
            channel: {
              alternatives: [
                {
                  transcript: step.transcript,
                  confidence: step.confidence ?? 0.98,
                  words: words.map((w, i) => ({
                    word: w.toLowerCase().replace(/[^\p{L}\p{N}']/gu, ''),
                    start: start + i * per,
                    end: start + (i + 1) * per,
                    confidence: step.confidence ?? 0.98,
                    punctuated_word: w,
                  })),
                },
              ],
            },
            metadata: {
              request_id: requestId,
              model_info: { name: query.get('model') ?? 'general', version: '2024-01-01.0', arch: 'nova-3' },
              model_uuid: randomUUID(),
            },
            from_finalize: step.onFinalize === true,
          });
          return;
        }
        case 'speech-started':
          sendJson({ type: 'SpeechStarted', channel: [0], timestamp: step.timestamp ?? audioSeconds() });
          return;
        case 'utterance-end':
          sendJson({ type: 'UtteranceEnd', channel: [0, 1], last_word_end: step.last_word_end ?? lastEnd });
          return;
        case 'raw':
          if (ws.readyState === ws.OPEN) ws.send(step.data);
          return;
        case 'error-close':
          ws.close(step.code, step.reason);
          return;
        case 'disconnect':
          ws.terminate();
          return;
      }
    };

    const transcriber = conn.transcriber?.({ index, query, act: (step) => act(step), audioSeconds });

    const metadata = () => ({
      type: 'Metadata',
      transaction_key: 'deprecated',
      request_id: requestId,
      sha256: '0'.repeat(64),
      created: new Date().toISOString(),
      duration: audioSeconds(),
      channels: 1,
      models: [randomUUID()],
      model_info: {},
    });

    ws.on('message', (data, isBinary) => {
      touch();
      if (isBinary) {
        const buf = Buffer.isBuffer(data) ? data : Buffer.concat(data as Buffer[]);
        if (keep) record.frameSizes.push(buf.length);
        // Deepgram treats an empty binary frame as the end of the stream.
        if (buf.length === 0) {
          sendJson(metadata());
          ws.close(1000);
          return;
        }
        if (keep) chunks.push(Buffer.from(buf));
        record.audioBytes += buf.length;
        transcriber?.audio(buf);
        advance();
        return;
      }
      const text = data.toString();
      let type: string;
      try {
        type = String((JSON.parse(text) as { type?: unknown }).type);
      } catch {
        type = text;
      }
      record.controls.push(type);
      if (type === 'Finalize') {
        finalizes += 1;
        const next = steps[0];
        if (!waiting && next?.onFinalize) advance();
        else if (!steps.some((s) => s.onFinalize)) {
          consumedFinalizes = finalizes;
          if (transcriber) transcriber.finalize();
          else act({ type: 'results', transcript: '', is_final: true, onFinalize: true });
        }
      } else if (type === 'CloseStream' && !conn.ignoreCloseStream) {
        sendJson(metadata());
        ws.close(1000);
      } else if (type !== 'KeepAlive' && type !== 'CloseStream') {
        ws.close(1002, 'DATA-0000');
      }
    });
    ws.on('close', (code) => {
      record.closed = true;
      record.closeCode = code;
      if (idle) clearTimeout(idle);
      for (const t of myTimers) {
        clearTimeout(t);
        timers.delete(t);
      }
      transcriber?.close?.();
      const at = keep ? -1 : connections.indexOf(record);
      if (at >= 0) connections.splice(at, 1);
      resolveClosed();
    });
    ws.on('error', () => {});
    advance();
  }

  const { port, url } = await listenLocal(server);
  return {
    url,
    wsUrl: `ws://127.0.0.1:${port}`,
    apiKey,
    connections,
    get upgrades() {
      return upgrades;
    },
    openSockets: () => sockets.size,
    close: () => shutDown(server, { timers, webSockets: wss.clients, connections: sockets, wss }),
  };
}
