/**
 * The HTTP plumbing the vendor fakes share: a request body read whole, the server listening on a
 * free local port and shut down again (timers, WebSockets and connections first), and the TCP
 * connections it holds (so a fake can drop them, and a test can wait until none is left).
 */
import type { IncomingMessage, Server as HttpServer } from 'node:http';
import type { AddressInfo, Server, Socket } from 'node:net';

/** The whole request body, as UTF-8 text. */
export function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

/** Listens on a free port of 127.0.0.1; returns the port and the fake's `<scheme>://127.0.0.1:<port>`. */
export async function listenLocal(server: Server, scheme = 'http'): Promise<{ port: number; url: string }> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { port, url: `${scheme}://127.0.0.1:${port}` };
}

/** Resolves once the server is closed (its connections must be gone or destroyed). */
export function closeServer(server: Server): Promise<void> {
  return new Promise<void>((resolve) => server.close(() => resolve()));
}

/** A fake's timers: `pending` holds those not yet run, for `shutDown` to clear. */
export function fakeTimers() {
  const pending = new Set<NodeJS.Timeout>();
  const later = (ms: number, fn: () => void): NodeJS.Timeout => {
    const t = setTimeout(() => {
      pending.delete(t);
      fn();
    }, ms);
    pending.add(t);
    return t;
  };
  const sleep = (ms: number) => new Promise<void>((resolve) => later(ms, resolve));
  return { pending, later, sleep };
}

/**
 * Closes a fake at once, in this order: its pending timers are cleared, its WebSockets
 * terminated, its TCP connections destroyed, its WebSocket server closed, then the server.
 */
export async function shutDown(
  server: Server,
  parts: {
    timers?: Set<NodeJS.Timeout>;
    webSockets?: Iterable<{ terminate(): void }>;
    connections?: Set<Socket>;
    wss?: { close(): void };
  },
): Promise<void> {
  if (parts.timers) {
    for (const t of parts.timers) clearTimeout(t);
    parts.timers.clear();
  }
  for (const ws of parts.webSockets ?? []) ws.terminate();
  for (const socket of parts.connections ?? []) socket.destroy();
  parts.wss?.close();
  await closeServer(server);
}

/** The TCP connections open to `server` right now (kept up to date). */
export function trackConnections(server: Server): Set<Socket> {
  const connections = new Set<Socket>();
  server.on('connection', (socket: Socket) => {
    connections.add(socket);
    socket.on('close', () => connections.delete(socket));
  });
  return connections;
}

/** What a test asks of a fake's TCP connections. */
export interface FakeConnections {
  /** TCP connections currently open to the fake (HTTP and WebSocket). */
  openConnections(): number;
  /** Closes HTTP keep-alive connections that are idle (an SDK's fetch keeps them pooled). */
  closeIdleHttpConnections(): void;
  /** Resolves once no connection is open (or rejects after `timeoutMs`). */
  waitForNoConnections(timeoutMs?: number): Promise<void>;
}

/** `FakeConnections` over the connections of `server` (from `trackConnections`). */
export function connectionControls(server: HttpServer, connections: Set<Socket>): FakeConnections {
  return {
    openConnections: () => connections.size,
    closeIdleHttpConnections: () => server.closeIdleConnections(),
    async waitForNoConnections(timeoutMs = 2_000) {
      const deadline = Date.now() + timeoutMs;
      while (connections.size > 0) {
        if (Date.now() > deadline) throw new Error(`${connections.size} connection(s) still open to the fake`);
        await new Promise<void>((r) => setTimeout(r, 5));
      }
    },
  };
}

/**
 * `base` with `over` on top, for one connection or request of a fake: a field `over` sets wins,
 * every other field is read from `base` when it is used (so a test may still change `base`).
 */
export function layered<T extends object>(base: T, over: Partial<T> | undefined): T {
  return over ? (Object.assign(Object.create(base) as T, over) as T) : base;
}
