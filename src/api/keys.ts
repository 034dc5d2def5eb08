/**
 * The caller's organization's API keys (DECISIONS 19): `GET /keys`, `POST /keys` (the new key is
 * in the answer, once: only its hash is kept) and `DELETE /keys/{id}` (revoked at once; the
 * organization's last active key is refused, 409, so that it can always reach the API).
 */
import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { wellFormed } from '../../engine/text.js';
import { LIMITS } from '../../engine/schema.js';
import type { KeyRepository, OrganizationKey } from '../store/keys.js';
import { ApiError, notFound } from './errors.js';
import { ErrorBody, errorResponses, IdParams } from './schemas.js';
import { storable } from './storable.js';
import { apiKeyCreatedExample, apiKeyCreateExample, apiKeyExample } from './examples.js';

const Timestamp = z.string().describe('ISO 8601 UTC timestamp');

export const ApiKey = z
  .object({
    id: z.uuid(),
    name: z.string().nullable().describe('what the key is for, as given when it was made; null for keys made by `npm run keys` or the first start'),
    prefix: z.string().describe('the first 16 characters of the key (sk_live_ and 8 more), to recognise it; the key itself is never shown again'),
    created_at: Timestamp,
    revoked_at: Timestamp.nullable().describe('when it was revoked; null while it works'),
    current: z.boolean().describe('true for the key this request was made with'),
  })
  .meta({ id: 'ApiKey', example: apiKeyExample });

export const ApiKeyCreateBody = storable(
  z.strictObject({
    name: wellFormed().min(1).max(LIMITS.nameLength).optional().describe('what the key is for (1 to 200 characters)'),
  }),
).meta({ example: apiKeyCreateExample });

const view = (k: OrganizationKey, currentId: string) => ({ ...k, current: k.id === currentId });

export const keyRoutes =
  (keys: KeyRepository): FastifyPluginAsyncZod =>
  async (app) => {
    const tags = ['keys'];

    app.get('/keys', {
      schema: {
        operationId: 'listKeys',
        tags,
        summary: "The organization's API keys, oldest first, revoked ones included (never the keys themselves)",
        response: { 200: z.object({ keys: z.array(ApiKey) }), ...errorResponses },
      },
      handler: async (request) => ({
        keys: (await keys.listForOrganization(request.organization.id)).map((k) => view(k, request.apiKeyId)),
      }),
    });

    app.post('/keys', {
      schema: {
        operationId: 'createKey',
        tags,
        summary: 'Make a new API key for the organization: the answer is the only place it is ever shown',
        description:
          'The key works at once. `key.secret` is the key itself (`sk_live_` and 43 characters): keep it now; only its ' +
          'SHA-256 hash is stored, and no other answer shows it.',
        body: ApiKeyCreateBody,
        response: {
          201: z
            .object({ key: ApiKey.extend({ secret: z.string().describe('the API key itself, shown this once') }) })
            .meta({ example: apiKeyCreatedExample }),
          ...errorResponses,
        },
      },
      // no body at all (`curl -X POST`) is an empty one: every field is optional
      preValidation: async (request) => {
        request.body ??= {};
      },
      handler: async (request, reply) => {
        const { key, secret } = await keys.createForOrganization(request.organization.id, request.body.name ?? null);
        return reply.code(201).send({ key: { ...view(key, request.apiKeyId), secret } });
      },
    });

    app.delete('/keys/:id', {
      schema: {
        operationId: 'revokeKey',
        tags,
        summary: 'Revoke an API key at once (409 for the organization\'s last active key)',
        description:
          'Requests with the key are refused (401) from now on, this request\'s own key included. A key already revoked, ' +
          'unknown or of another organization is 404. The last active key of the organization cannot be revoked (409 ' +
          '`Conflict`): make another first.',
        params: IdParams,
        response: { 204: z.undefined(), 409: ErrorBody.describe('Conflict: the organization\'s last active key'), ...errorResponses },
      },
      handler: async (request, reply) => {
        const outcome = await keys.revokeForOrganization(request.organization.id, request.params.id);
        if (outcome.kind === 'not-found') throw notFound('active API key', request.params.id);
        if (outcome.kind === 'last-key') {
          throw new ApiError(409, 'Conflict', 'This is the organization\'s last active API key: make another (POST /keys) before revoking it.', [
            `id: ${request.params.id} is the only active key of the organization`,
          ]);
        }
        return reply.code(204).send();
      },
    });
  };
