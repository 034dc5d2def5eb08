/**
 * Twilio's routes: the voice webhook, and for outbound calls the answer (TwiML), status and
 * answering-machine-detection callbacks (form bodies, each verified by `X-Twilio-Signature`), and
 * the media-stream WebSocket on the same server, all handled by the Twilio transport.
 */
import type { FastifyInstance } from 'fastify';
import { WebSocketServer } from 'ws';
import { parseForm } from './signature.js';
import { upgradeRoute } from '../upgrades.js';
import { AMD_PATH, ANSWER_PATH, MEDIA_PATH, STATUS_PATH, VOICE_PATH, type TwilioTelephony } from './transport.js';
import { OPERATOR_MEDIA_PATH, OPERATOR_STATUS_PATH } from './operator.js';

export { AMD_PATH, ANSWER_PATH, MEDIA_PATH, STATUS_PATH, VOICE_PATH } from './transport.js';
/** Twilio's voice webhook form is a few KiB; the route refuses more (413 naming this limit). */
export const VOICE_BODY_LIMIT = 64 * 1024;
const ERROR_PHRASE = { 400: 'Invalid request', 403: 'Forbidden', 404: 'Not found' } as const;

export async function twilioRoutes(app: FastifyInstance, opts: { twilio: TwilioTelephony; publicUrl: string }) {
  await app.register(async (scope) => {
    scope.addContentTypeParser(
      'application/x-www-form-urlencoded',
      { parseAs: 'string' },
      (_request, body, done) => done(null, parseForm(body as string)),
    );
    type Handler = (url: string, params: ReturnType<typeof parseForm>, signature: string | undefined) => Promise<
      { status: 200; twiml: string } | { status: 204 } | { status: 400 | 403 | 404; message: string }
    >;
    /** A form POST from Twilio, verified by its handler against the URL Twilio signed (PUBLIC_URL + path + query). */
    const formRoute = (path: string, handle: Handler) =>
      // the route's limit (not the parser's): every body type is held to it, and the 413 names it
      scope.post(path, { schema: { hide: true }, bodyLimit: VOICE_BODY_LIMIT }, async (request, reply) => {
        const params = (request.body ?? {}) as ReturnType<typeof parseForm>;
        if (typeof params !== 'object' || Array.isArray(params)) {
          return reply.code(400).send({ error: 'Invalid request', details: ['body: expected a form'] });
        }
        const url = `${opts.publicUrl.replace(/\/$/, '')}${request.url}`;
        const signature = request.headers['x-twilio-signature'];
        const result = await handle(url, params, typeof signature === 'string' ? signature : undefined);
        if (result.status === 204) return reply.code(204).send();
        if (result.status !== 200) {
          return reply.code(result.status).send({ error: ERROR_PHRASE[result.status], message: result.message });
        }
        return reply.code(200).header('content-type', 'text/xml; charset=utf-8').send(result.twiml);
      });
    formRoute(VOICE_PATH, (url, params, signature) => opts.twilio.voice(url, params, signature));
    formRoute(ANSWER_PATH, (url, params, signature) => opts.twilio.answer(url, params, signature));
    formRoute(STATUS_PATH, (url, params, signature) => opts.twilio.status(url, params, signature));
    formRoute(AMD_PATH, (url, params, signature) => opts.twilio.machineDetection(url, params, signature));
    formRoute(OPERATOR_STATUS_PATH, (url, params, signature) => opts.twilio.operators.status(url, params, signature));
  });

  const wss = new WebSocketServer({ noServer: true, maxPayload: 64 * 1024 });
  upgradeRoute(app, MEDIA_PATH, (request, socket, head) => {
    wss.handleUpgrade(request, socket, head, (ws) => {
      opts.twilio.attachMedia(ws, request.socket.remoteAddress ?? 'unknown');
    });
  });
  upgradeRoute(app, OPERATOR_MEDIA_PATH, (request, socket, head) => {
    wss.handleUpgrade(request, socket, head, (ws) => {
      opts.twilio.operators.attachMedia(ws, request.socket.remoteAddress ?? 'unknown');
    });
  });
  app.addHook('onClose', async () => {
    for (const client of wss.clients) client.terminate();
    await new Promise<void>((resolve) => wss.close(() => resolve()));
  });
}
