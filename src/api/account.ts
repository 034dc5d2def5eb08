/**
 * The organization's settings: default webhook, each carrier's settings and the outbound limits
 * (DECISIONS 6). Where a carrier's settings sit, how a write merges with what is kept and what a
 * response shows are the carrier's own (src/telephony/<carrier>/settings.ts, the registry).
 */
import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { Store } from '../store/index.js';
import { outboundLimits, type AccountSettings } from '../store/account.js';
import { accountCarriers } from '../telephony/registry.js';
import { needsCurrentWebhook, webhookFromInput, webhookView } from './numbers.js';
import { Account, AccountPatchBody, errorResponses } from './schemas.js';
import { applyPricingPatch, pricingFor } from '../observability/pricing.js';

type Body = Record<string, unknown>;

/** The value at a carrier's path in a request body (undefined: not given). */
function at(body: Body, path: readonly string[]): unknown {
  let value: unknown = body;
  for (const key of path) {
    if (value === null || typeof value !== 'object') return undefined;
    value = (value as Body)[key];
  }
  return value;
}

/** Every carrier's view of the settings, each at its path (`telephony: {twilio}`, `sip`, …). */
function carrierViews(s: AccountSettings): Body {
  const out: Body = {};
  for (const { account } of accountCarriers()) {
    const [first, second] = account.path;
    const shown = account.show(account.read(s));
    if (second === undefined) out[first] = shown;
    else out[first] = { ...((out[first] as Body | undefined) ?? {}), [second]: shown };
  }
  return out;
}

/**
 * The account write of every carrier the request gave settings for: each carrier's own merge of
 * what was sent with what is kept, null clearing them. A problem is a 400 naming it.
 */
function carrierWrites(body: Body, stored: AccountSettings | null): { write: Partial<AccountSettings> } | { problem: string } {
  const write: Partial<AccountSettings> = {};
  for (const { account } of accountCarriers()) {
    const given = at(body, account.path);
    if (given === undefined) continue;
    const kept = given === null ? null : account.merge(given, stored ? account.read(stored) : null);
    if (kept && typeof kept === 'object' && 'problem' in kept) return { problem: (kept as { problem: string }).problem };
    const part = account.write(kept);
    // the carriers without a column of their own share one field: merged, not replaced
    const carriers = part.carriers ? { ...write.carriers, ...part.carriers } : write.carriers;
    Object.assign(write, part, carriers ? { carriers } : {});
  }
  return { write };
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
      ...carrierViews(s),
      outbound: outboundLimits(s),
      pricing: pricingFor(s.pricing),
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
        const body = request.body as Body;
        // what is kept, when a write merges with it (a masked URL sent back, a carrier's write-only secret left out)
        const givesCarrier = accountCarriers().some(({ account }) => at(body, account.path) !== undefined && at(body, account.path) !== null);
        const pricingInput = request.body.pricing;
        const stored = needsCurrentWebhook(request.body.webhook) || givesCarrier || pricingInput ? await store.account.get(orgId) : null;
        const { webhook, generated } = webhookFromInput(request.body.webhook, stored?.webhook ?? null);
        const carriers = carrierWrites(body, stored);
        if ('problem' in carriers) {
          return reply.code(400).send({ error: 'Invalid request', details: [carriers.problem] });
        }
        const settings = await store.account.update(request.organization.id, {
          webhook,
          outbound: request.body.outbound,
          ...carriers.write,
          ...(pricingInput !== undefined ? { pricing: pricingInput === null ? null : applyPricingPatch(stored?.pricing ?? null, pricingInput) } : {}),
        });
        return { account: view(request.organization, settings, generated) };
      },
    });
  };
