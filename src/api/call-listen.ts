/**
 * `POST /calls/{id}/listen` (DECISIONS 16, docs/listen.md): a one-time WebSocket URL that carries
 * a live call to a listener (a supervisor), on whichever process it reaches. Not registered here:
 * the app registers it inside its authenticated scope.
 */
import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { CallRecord } from '../calls/store.js';
import { LISTEN_FORMAT } from '../calls/listen-mixer.js';
import { LISTEN_TOKEN_SECONDS, type ListenHub } from '../calls/listen.js';
import { ListenSockets } from '../telephony/listen-socket.js';
import { ApiError, notFound } from './errors.js';
import { ErrorBody, errorResponses, IdParams } from './schemas.js';

export interface CallListenDeps {
  /** The live calls' sessions (any process's, with Redis). */
  sessions: { get(id: string): Promise<CallRecord | null> };
  /** Whether the organization has the call at all (the call log): an ended call is 409, an unknown one 404. */
  callExists(orgId: string, callId: string): Promise<boolean>;
  hub: Pick<ListenHub, 'issue'>;
  /** PUBLIC_URL: the socket's address is on it. */
  publicUrl: string;
}

/** Statuses a listener may join: the call is live (a call being transferred is still heard). */
const LIVE = new Set(['in-progress', 'forwarding']);

export const ListenFormat = z
  .object({
    encoding: z.literal('pcm16'),
    byte_order: z.literal('little-endian'),
    sample_rate: z.literal(8000),
    channels: z.literal(2),
    channel_layout: z.object({ left: z.literal('customer'), right: z.literal('assistant') }).describe('right: the assistant, or the operator once a transfer joined them'),
    frame_ms: z.literal(20),
    frame_bytes: z.literal(640).describe('each binary message is one frame: 160 samples per channel, interleaved left, right'),
  })
  .meta({ id: 'ListenFormat', example: LISTEN_FORMAT });

const ListenAnswer = z.object({
  url: z.string().describe(`ws(s)://…/calls/listen?token=…: open it within ${LISTEN_TOKEN_SECONDS} s; the token works once`),
  format: ListenFormat,
});

export const callListenRoutes =
  (deps: CallListenDeps): FastifyPluginAsyncZod =>
  async (app) => {
    app.post('/calls/:id/listen', {
      schema: {
        operationId: 'listenToCall',
        tags: ['calls'],
        summary: 'Listen to a live call: a one-time WebSocket URL',
        description:
          `The answer's \`url\` is a WebSocket (a one-time token, valid ${LISTEN_TOKEN_SECONDS} s) that carries the live call: binary ` +
          'messages of one 20 ms frame each, 16-bit little-endian PCM at 8 kHz, stereo (left the customer, right the assistant ' +
          'or the operator), sent continuously (silence included) so that the number of frames is time; and text messages ' +
          'with the JSON events a web call\'s browser gets (`message`, `node`, `turn`, `latency`, `ended`). Any number of ' +
          'listeners, on any process of the deployment; a listener cannot speak, and one that does not read is dropped. ' +
          '409 `Call not live` unless the call is in progress (docs/listen.md).',
        params: IdParams,
        response: {
          201: ListenAnswer,
          409: ErrorBody.describe('Call not live'),
          ...errorResponses,
        },
      },
      handler: async (request, reply) => {
        const orgId = request.organization.id;
        const id = request.params.id;
        const session = await deps.sessions.get(id);
        const mine = session?.organization_id === orgId ? session : null;
        if (!mine && !(await deps.callExists(orgId, id))) throw notFound('call', id);
        if (!mine || !LIVE.has(mine.status)) {
          throw new ApiError(409, 'Call not live', `The call is ${mine?.status ?? 'ended'}: only a call in progress can be listened to.`);
        }
        const token = await deps.hub.issue(id);
        reply.code(201);
        return { url: ListenSockets.url(deps.publicUrl, token), format: LISTEN_FORMAT };
      },
    });
  };
