/** Phone numbers: DECISIONS 6, SPEC 4.2 (attaching and detaching workflows). */
import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { WEBHOOK_EVENT_TYPES } from '../../engine/schema.js';
import type { Store } from '../store/index.js';
import type { PhoneNumber as StoredNumber, WebhookSettings } from '../store/numbers.js';
import { generateWebhookSecret, isMaskedSecret, maskSecret, MASKED_SECRET_PROBLEM, restoreMaskedSecret } from '../webhooks/secrets.js';
import { isMaskedUrl, MASKED_URL_PROBLEM, maskUrlCredentials, restoreMaskedUrl } from '../webhooks/url-credentials.js';
import { invalidRequest, notFound } from './errors.js';
import {
  ErrorBody,
  errorResponses,
  IdParams,
  NumberCreateBody,
  NumberPatchBody,
  PhoneNumber,
  WebhookSettingsInput,
} from './schemas.js';

/**
 * Completes webhook settings from a request: all events by default, a generated secret. A URL
 * sent back as it was shown (credentials masked) is the `current` one's URL again.
 */
export function webhookFromInput(
  input: z.infer<typeof WebhookSettingsInput> | null | undefined,
  current: WebhookSettings | null = null,
): { webhook: WebhookSettings | null | undefined; generated: boolean } {
  if (input === undefined || input === null) return { webhook: input, generated: false };
  const url = restoreMaskedUrl(input.url, [current?.url]);
  const secret = input.secret === undefined || input.secret === null ? input.secret : restoreMaskedSecret(input.secret, current?.secret);
  const problems = [
    ...(url === null ? [`webhook.url: ${MASKED_URL_PROBLEM}`] : []),
    ...(secret === null && input.secret ? [`webhook.secret: ${MASKED_SECRET_PROBLEM}`] : []),
  ];
  if (problems.length > 0 || url === null) throw invalidRequest(problems);
  const generated = input.secret === undefined;
  return {
    webhook: {
      url,
      secret: secret ?? generateWebhookSecret(),
      events: input.events ?? [...WEBHOOK_EVENT_TYPES],
    },
    generated,
  };
}

/** Needs the stored settings only when the request sent a masked URL back. */
export const needsCurrentWebhook = (input: { url: string; secret?: string | null | undefined } | null | undefined) =>
  !!input && (isMaskedUrl(input.url) || (typeof input.secret === 'string' && isMaskedSecret(input.secret)));

export function webhookView(webhook: WebhookSettings | null, showSecret: boolean) {
  if (!webhook) return null;
  return {
    ...webhook,
    url: maskUrlCredentials(webhook.url),
    secret: webhook.secret && !showSecret ? maskSecret(webhook.secret) : webhook.secret,
  };
}

const numberView = (n: StoredNumber, showSecret = false) => ({
  ...n,
  webhook: webhookView(n.webhook, showSecret),
});

export const numberRoutes =
  (store: Store): FastifyPluginAsyncZod =>
  async (app) => {
    const tags = ['numbers'];
    const one = z.object({ number: PhoneNumber });

    app.post('/numbers', {
      schema: {
        operationId: 'createNumber',
        tags,
        summary: 'Register a phone number (E.164, unique across the deployment: 409 when taken)',
        body: NumberCreateBody,
        response: { 201: one, 409: ErrorBody.describe('Conflict'), ...errorResponses },
      },
      handler: async (request, reply) => {
        const { webhook, generated } = webhookFromInput(request.body.webhook);
        const created = await store.numbers.create(request.organization.id, {
          ...request.body,
          webhook: webhook ?? null,
        });
        return reply.code(201).send({ number: numberView(created, generated) });
      },
    });

    app.get('/numbers', {
      schema: {
        operationId: 'listNumbers',
        tags,
        summary: "List the organization's phone numbers, oldest first",
        response: { 200: z.object({ numbers: z.array(PhoneNumber) }), ...errorResponses },
      },
      handler: async (request) => ({
        numbers: (await store.numbers.list(request.organization.id)).map((n) => numberView(n)),
      }),
    });

    app.get('/numbers/:id', {
      schema: { operationId: 'getNumber', tags, summary: 'Get a phone number', params: IdParams, response: { 200: one, ...errorResponses } },
      handler: async (request) => {
        const found = await store.numbers.get(request.organization.id, request.params.id);
        if (!found) throw notFound('number', request.params.id);
        return { number: numberView(found) };
      },
    });

    app.patch('/numbers/:id', {
      schema: {
        operationId: 'updateNumber',
        tags,
        summary: 'Update a phone number; workflow_id attaches a workflow (UUID) or detaches it (null)',
        params: IdParams,
        body: NumberPatchBody,
        response: { 200: one, 409: ErrorBody.describe('Conflict'), ...errorResponses },
      },
      handler: async (request) => {
        const orgId = request.organization.id;
        let current: WebhookSettings | null = null;
        if (needsCurrentWebhook(request.body.webhook)) {
          const found = await store.numbers.get(orgId, request.params.id);
          if (!found) throw notFound('number', request.params.id);
          current = found.webhook;
        }
        const { webhook, generated } = webhookFromInput(request.body.webhook, current);
        const updated = await store.numbers.update(orgId, request.params.id, {
          ...request.body,
          webhook,
        });
        if (!updated) throw notFound('number', request.params.id);
        return { number: numberView(updated, generated) };
      },
    });

    app.delete('/numbers/:id', {
      schema: {
        operationId: 'deleteNumber',
        tags,
        summary: 'Delete a phone number',
        params: IdParams,
        response: { 204: z.undefined(), ...errorResponses },
      },
      handler: async (request, reply) => {
        const deleted = await store.numbers.delete(request.organization.id, request.params.id);
        if (!deleted) throw notFound('number', request.params.id);
        return reply.code(204).send();
      },
    });
  };
