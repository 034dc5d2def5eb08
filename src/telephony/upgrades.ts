/**
 * WebSocket upgrades on the app's server, by path: each transport registers its own (Twilio's
 * media stream, the browser's web-call stream); any other path gets a 404. One `upgrade`
 * listener per server, so that two transports never both answer one request.
 */
import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyInstance } from 'fastify';

export type UpgradeHandler = (request: IncomingMessage, socket: Duplex, head: Buffer) => void;

const routes = new WeakMap<Server, Map<string, UpgradeHandler>>();

/** Refuses an upgrade with a plain HTTP answer (a JSON body) and closes the socket. */
export function refuseUpgrade(socket: Duplex, status: 400 | 403 | 404 | 503, body: { error: string; message: string }): void {
  if (socket.destroyed) return;
  const phrase = { 400: 'Bad Request', 403: 'Forbidden', 404: 'Not Found', 503: 'Service Unavailable' }[status];
  const json = JSON.stringify(body);
  socket.end(
    `HTTP/1.1 ${status} ${phrase}\r\nContent-Type: application/json; charset=utf-8\r\n` +
      `Content-Length: ${Buffer.byteLength(json)}\r\nConnection: close\r\n\r\n${json}`,
  );
}

/** Routes WebSocket upgrades of `path` (no query) on the app's server to `handler`. */
export function upgradeRoute(app: FastifyInstance, path: string, handler: UpgradeHandler): void {
  const server = app.server as Server;
  let table = routes.get(server);
  if (!table) {
    const created = new Map<string, UpgradeHandler>();
    table = created;
    routes.set(server, created);
    server.on('upgrade', (request: IncomingMessage, socket: Duplex, head: Buffer) => {
      socket.on('error', () => undefined);
      const route = created.get((request.url ?? '').split('?')[0] ?? '');
      if (!route) return refuseUpgrade(socket, 404, { error: 'Not found', message: 'no WebSocket endpoint at this path' });
      try {
        route(request, socket, head);
      } catch {
        socket.destroy();
      }
    });
  }
  table.set(path, handler);
}
