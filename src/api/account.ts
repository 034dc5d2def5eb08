/** The organization's settings: default webhook and telephony credentials (DECISIONS 6). */
import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { Store } from '../store/index.js';
import { outboundLimits, type AccountSettings } from '../store/account.js';
import { maskSecret } from '../webhooks/secrets.js';
import { needsCurrentWebhook, webhookFromInput, webhookView } from './numbers.js';
import { Account, AccountPatchBody, errorResponses, type SipSettingsInput } from './schemas.js';
import type { SipSettings } from '../store/account.js';

/**
 * The trunk settings to keep: each part given replaces the stored one (null clears it), and a
 * password left out is kept when the username is the same (passwords are never shown, so a
 * client changing one field cannot send them back).
 */
function mergeSip(input: z.infer<typeof SipSettingsInput>, stored: SipSettings | null): SipSettings | { problem: string } {
  const out: SipSettings = { inbound: stored?.inbound ?? null, outbound: stored?.outbound ?? null };
  for (const side of ['inbound', 'outbound'] as const) {
    const given = input[side];
    if (given === undefined) continue;
    if (given === null) {
      out[side] = null;
      continue;
    }
    const before = stored?.[side];
    const password = given.password ?? (before?.username && before.username === given.username ? before.password : undefined);
    if (given.username && !password) return { problem: `sip.${side}.password: required with sip.${side}.username` };
    if (!given.username && given.password) return { problem: `sip.${side}.username: required with sip.${side}.password` };
    const part = { ...given, ...(password ? { password } : {}) };
    if (side === 'inbound') out.inbound = part as NonNullable<SipSettings['inbound']>;
    else out.outbound = part as NonNullable<SipSettings['outbound']>;
  }
  return out;
}

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
      sip: {
        inbound: s.sip?.inbound
          ? { allowed_addresses: s.sip.inbound.allowed_addresses, username: s.sip.inbound.username ?? null, password_set: !!s.sip.inbound.password }
          : null,
        outbound: s.sip?.outbound
          ? {
              proxy: s.sip.outbound.proxy,
              username: s.sip.outbound.username ?? null,
              password_set: !!s.sip.outbound.password,
              caller_id: s.sip.outbound.caller_id ?? null,
            }
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
      handler: async (request, reply) => {
        const orgId = request.organization.id;
        // (a masked auth token sent back is refused by the schema: too short to be one)
        const sipInput = request.body.sip;
        const stored = needsCurrentWebhook(request.body.webhook) || sipInput ? await store.account.get(orgId) : null;
        const { webhook, generated } = webhookFromInput(request.body.webhook, stored?.webhook ?? null);
        const sip = sipInput === undefined ? undefined : sipInput === null ? null : mergeSip(sipInput, stored?.sip ?? null);
        if (sip && 'problem' in sip) {
          return reply.code(400).send({ error: 'Invalid request', details: [sip.problem] });
        }
        const settings = await store.account.update(request.organization.id, {
          webhook,
          twilio: request.body.telephony?.twilio,
          outbound: request.body.outbound,
          ...(sip !== undefined ? { sip } : {}),
        });
        return { account: view(request.organization, settings, generated) };
      },
    });
  };
