/**
 * Telnyx's routes: the Call Control webhook (JSON, read as its exact text: the signature covers
 * the bytes) and the media-stream WebSocket on the same server, both handled by ./telephony.ts.
 */
import type { FastifyInstance } from 'fastify';
import { WebSocketServer } from 'ws';
import { upgradeRoute } from '../upgrades.js';
import { SIGNATURE_HEADER, TIMESTAMP_HEADER } from './signature.js';
import { MEDIA_PATH, WEBHOOK_PATH, type TelnyxTelephony } from './telephony.js';

/** A Call Control webhook is a few KiB; the route refuses more (413 naming this limit). */
export const WEBHOOK_BODY_LIMIT = 64 * 1024;
const ERROR_PHRASE = { 400: 'Invalid request', 403: 'Forbidden', 404: 'Not found', 503: 'Unavailable' } as const;

const header = (value: string | string[] | undefined) => (typeof value === 'string' ? value : undefined);

export async function telnyxRoutes(app: FastifyInstance, opts: { telnyx: TelnyxTelephony }) {
  await app.register(async (scope) => {
    // the body as it came: parsed by the handler once its signature is checked
    scope.removeContentTypeParser(['application/json']);
    scope.addContentTypeParser('application/json', { parseAs: 'string' }, (_request, body, done) => done(null, body));
    scope.post(WEBHOOK_PATH, { schema: { hide: true }, bodyLimit: WEBHOOK_BODY_LIMIT }, async (request, reply) => {
      if (typeof request.body !== 'string') return reply.code(400).send({ error: 'Invalid request', details: ['body: expected JSON'] });
      const result = await opts.telnyx.webhook(request.body, header(request.headers[SIGNATURE_HEADER]), header(request.headers[TIMESTAMP_HEADER]));
      if (result.status === 204) return reply.code(204).send();
      if (result.status === 503) reply.header('retry-after', '5');
      return reply.code(result.status).send({ error: ERROR_PHRASE[result.status], message: result.message });
    });
  });

  const wss = new WebSocketServer({ noServer: true, maxPayload: 256 * 1024 });
  upgradeRoute(app, MEDIA_PATH, (request, socket, head) => {
    const query = new URL(request.url ?? '', 'http://x').searchParams;
    wss.handleUpgrade(request, socket, head, (ws) => opts.telnyx.attachMedia(ws, query, request.socket.remoteAddress ?? 'unknown'));
  });
  app.addHook('onClose', async () => {
    for (const client of wss.clients) client.terminate();
    await new Promise<void>((resolve) => wss.close(() => resolve()));
  });
}
