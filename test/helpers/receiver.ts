/**
 * A local HTTP endpoint that records every request and answers as each test scripts it: status,
 * delay, body, headers, or a socket closed without an answer. `stop()`/`restart()` take it off
 * and back on its port (connection refused in between).
 */
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

export interface RecordedRequest {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
  /** Wall-clock ms when the request had been read. */
  at: number;
}

export interface ReceiverAnswer {
  status?: number;
  /** Waits this long before answering (or closing). */
  delayMs?: number;
  /** A string is sent as is; anything else as JSON. */
  body?: unknown;
  headers?: Record<string, string>;
  /** Closes the socket instead of answering. */
  destroy?: boolean;
  /** Sends the status, headers and body, then never ends the response. */
  unfinished?: boolean;
}

export type ReceiverScript =
  | ReceiverAnswer
  | ((request: RecordedRequest, index: number) => ReceiverAnswer | Promise<ReceiverAnswer>);

export interface Receiver {
  /** `http://127.0.0.1:<port>/hook`. */
  readonly url: string;
  readonly port: number;
  readonly requests: RecordedRequest[];
  /** Answers for the next requests, one each, in order; then the default. */
  script(...answers: ReceiverScript[]): void;
  setDefault(answer: ReceiverScript): void;
  /** Resolves once at least `n` requests have arrived. */
  waitForRequests(n: number, timeoutMs?: number): Promise<RecordedRequest[]>;
  stop(): Promise<void>;
  restart(): Promise<void>;
  close(): Promise<void>;
}

export async function startReceiver(
  options: { default?: ReceiverScript; host?: string; port?: number } = {},
): Promise<Receiver> {
  const host = options.host ?? '127.0.0.1';
  const requests: RecordedRequest[] = [];
  const queue: ReceiverScript[] = [];
  let fallback: ReceiverScript = options.default ?? { status: 200, body: '' };
  const sockets = new Set<Socket>();
  const timers = new Set<NodeJS.Timeout>();
  const waiters: { n: number; resolve: () => void }[] = [];
  let server: Server;
  let port = options.port ?? 0;

  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      const t = setTimeout(() => {
        timers.delete(t);
        resolve();
      }, ms);
      timers.add(t);
    });

  const answer = async (res: ServerResponse, a: ReceiverAnswer) => {
    if (a.delayMs) await sleep(a.delayMs);
    if (res.destroyed) return;
    if (a.destroy) {
      res.socket?.destroy();
      return;
    }
    const body = a.body === undefined ? '' : typeof a.body === 'string' ? a.body : JSON.stringify(a.body);
    const headers: Record<string, string> = { ...a.headers };
    if (body !== '' && !Object.keys(headers).some((h) => h.toLowerCase() === 'content-type')) {
      headers['content-type'] = typeof a.body === 'string' ? 'text/plain' : 'application/json';
    }
    res.writeHead(a.status ?? 200, headers);
    if (a.unfinished) res.write(body);
    else res.end(body);
  };

  const listen = () =>
    new Promise<void>((resolve, reject) => {
      server = createServer((req, res) => {
        const chunks: Buffer[] = [];
        req.on('data', (c: Buffer) => chunks.push(c));
        req.on('end', () => {
          const recorded: RecordedRequest = {
            method: req.method ?? '',
            path: req.url ?? '',
            headers: req.headers,
            body: Buffer.concat(chunks).toString('utf8'),
            at: Date.now(),
          };
          const index = requests.length;
          requests.push(recorded);
          for (const w of [...waiters]) {
            if (requests.length >= w.n) {
              waiters.splice(waiters.indexOf(w), 1);
              w.resolve();
            }
          }
          const script = queue.length > 0 ? queue.shift()! : fallback;
          void Promise.resolve(typeof script === 'function' ? script(recorded, index) : script).then(
            (a) => answer(res, a),
            () => res.socket?.destroy(),
          );
        });
      });
      server.on('connection', (s) => {
        sockets.add(s);
        s.on('close', () => sockets.delete(s));
      });
      server.once('error', reject);
      server.listen(port, host, () => {
        port = (server.address() as AddressInfo).port;
        resolve();
      });
    });

  const stop = () =>
    new Promise<void>((resolve) => {
      for (const t of timers) clearTimeout(t);
      timers.clear();
      for (const s of sockets) s.destroy();
      server.close(() => resolve());
    });

  await listen();
  const urlHost = host.includes(':') ? `[${host}]` : host;
  return {
    get url() {
      return `http://${urlHost}:${port}/hook`;
    },
    get port() {
      return port;
    },
    requests,
    script: (...answers) => queue.push(...answers),
    setDefault: (a) => {
      fallback = a;
    },
    waitForRequests(n, timeoutMs = 5_000) {
      if (requests.length >= n) return Promise.resolve(requests);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`only ${requests.length} of ${n} requests arrived within ${timeoutMs} ms`)), timeoutMs);
        waiters.push({
          n,
          resolve: () => {
            clearTimeout(timer);
            resolve(requests);
          },
        });
      });
    },
    stop,
    restart: listen,
    close: stop,
  };
}
