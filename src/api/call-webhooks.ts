/**
 * `GET /calls/{id}/webhooks`: every webhook attempt of a call (event, URL, status code, duration,
 * attempt number, next retry), so that customers can debug their endpoint. Not registered here:
 * the app registers it inside its authenticated scope.
 */
import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { DeliveryRepository } from '../store/deliveries.js';
import { publicAttemptError } from '../webhooks/http.js';
import { maskUrlCredentials } from '../webhooks/url-credentials.js';
import { notFound } from './errors.js';
import { errorResponses, IdParams } from './schemas.js';

export const WebhookAttempt = z.object({
  id: z.string(),
  message_id: z.string().describe('X-Webhook-Id: the same on every attempt of one message'),
  event: z.string(),
  url: z.string().describe('credentials in it masked: https://user:****@host/...'),
  attempt: z.number().int().describe('1 for the first attempt'),
  outcome: z.enum(['delivered', 'retrying', 'failed', 'gave-up']),
  status_code: z.number().int().nullable().describe('null when no HTTP answer came (timeout, refused connection)'),
  error: z
    .string()
    .nullable()
    .describe('why it failed: HTTP 500, timed out, connection failed, blocked address, … (no network detail)'),
  duration_ms: z.number().int(),
  next_retry_at: z.string().nullable(),
  created_at: z.string(),
});

export interface CallWebhookRoutesOptions {
  /** When given, an unknown call is a 404 (without it, an unknown call has no attempts). */
  callExists?: (orgId: string, callId: string) => Promise<boolean>;
}

export const callWebhookRoutes =
  (deliveries: DeliveryRepository, options: CallWebhookRoutesOptions = {}): FastifyPluginAsyncZod =>
  async (app) => {
    app.get('/calls/:id/webhooks', {
      schema: {
        operationId: 'listCallWebhooks',
        tags: ['calls'],
        summary: "The webhook attempts of a call, oldest first",
        params: IdParams,
        response: { 200: z.object({ webhooks: z.array(WebhookAttempt) }), ...errorResponses },
      },
      handler: async (request) => {
        const orgId = request.organization.id;
        const callId = request.params.id;
        if (options.callExists && !(await options.callExists(orgId, callId))) throw notFound('call', callId);
        const attempts = await deliveries.listForCall(orgId, callId);
        return {
          webhooks: attempts.map((a) => ({
            id: a.id,
            message_id: a.message_id,
            event: a.event,
            // attempts are recorded masked; older ones may not be
            url: maskUrlCredentials(a.url),
            attempt: a.attempt,
            outcome: a.outcome,
            status_code: a.status_code,
            error: publicAttemptError(a.error),
            duration_ms: a.duration_ms,
            next_retry_at: a.next_retry_at,
            created_at: a.created_at,
          })),
        };
      },
    });
  };
