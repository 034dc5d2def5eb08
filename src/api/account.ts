/** The organization's settings: default webhook and telephony credentials (DECISIONS 6). */
import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { Store } from '../store/index.js';
import { outboundLimits, type AccountSettings } from '../store/account.js';
import { maskSecret } from '../webhooks/secrets.js';
import { needsCurrentWebhook, webhookFromInput, webhookView } from './numbers.js';
import { Account, AccountPatchBody, errorResponses } from './schemas.js';

export const accountRoutes =
  (store: Store): FastifyPluginAsyncZod =>
  async (app) => {
    const tags = ['account'];
    const one = z.object({ account: Account });

    const view = (org: { id: string; name: string }, s: AccountSettings, showSecret = false) => ({
      id: org.id,
      name: org.name,
      webhook: webhookView(s.webhook, showSecret),
      telephony: {
        twilio: s.twilio
          ? { account_sid: s.twilio.account_sid, auth_token: maskSecret(s.twilio.auth_token) }
          : null,
      },
      outbound: outboundLimits(s),
    });

    app.get('/account', {
      schema: { operationId: 'getAccount', tags, summary: 'Get the organization settings', response: { 200: one, ...errorResponses } },
      handler: async (request) => ({
        account: view(request.organization, await store.account.get(request.organization.id)),
      }),
    });

    app.patch('/account', {
      schema: {
        operationId: 'updateAccount',
        tags,
        summary: 'Set the default webhook, the telephony credentials and the outbound limits (null clears one)',
        body: AccountPatchBody,
        response: { 200: one, ...errorResponses },
      },
      handler: async (request) => {
        const orgId = request.organization.id;
        // (a masked auth token sent back is refused by the schema: too short to be one)
        const current = needsCurrentWebhook(request.body.webhook) ? (await store.account.get(orgId)).webhook : null;
        const { webhook, generated } = webhookFromInput(request.body.webhook, current);
        const settings = await store.account.update(request.organization.id, {
          webhook,
          twilio: request.body.telephony?.twilio,
          outbound: request.body.outbound,
        });
        return { account: view(request.organization, settings, generated) };
      },
    });
  };
