/** GET/PATCH /account (DECISIONS 6): the default webhook and the telephony credentials. */
import { DEFAULT_PRICES } from '../../src/observability/pricing.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { build, type TestApp } from '../helpers/app.js';

let t: TestApp;
beforeAll(async () => {
  t = await build();
});
afterAll(async () => {
  await t.close();
});

const ALL_EVENTS = ['assistant-request', 'tool-calls', 'status-update', 'end-of-call-report'];
const SID = `AC${'0123456789abcdef'.repeat(2)}`;
const GENERATED_SECRET = /^whsec_[A-Za-z0-9+/]{43}=$/;

const get = (key?: string) => t.request('GET', '/account', undefined, key);
const patch = (body: unknown, key?: string) => t.request('PATCH', '/account', body, key);

describe('account settings', () => {
  it('starts empty: the organization, no webhook, no telephony credentials', async () => {
    const res = await get();
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({
      account: {
        id: t.orgId,
        name: 'Acme Test',
        webhook: null,
        telephony: { twilio: null },
        sip: { inbound: null, outbound: null },
        telnyx: null,
        outbound: { max_concurrent_calls: 10, calls_per_second: 1 },
        pricing: DEFAULT_PRICES,
      },
    });
  });

  it('a webhook without a secret gets a generated one, shown once, then masked', async () => {
    const res = await patch({ webhook: { url: 'https://example.com/hooks' } });
    expect(res.statusCode).toBe(200);
    const { webhook } = res.json().account;
    expect(webhook).toEqual({ url: 'https://example.com/hooks', secret: expect.stringMatching(GENERATED_SECRET), events: ALL_EVENTS });
    const masked = `whsec_…${webhook.secret.slice(-4)}`;
    expect((await get()).json().account.webhook).toEqual({ url: 'https://example.com/hooks', secret: masked, events: ALL_EVENTS });
    // the secret shown once is the one kept for signing
    expect((await t.store.account.get(t.orgId)).webhook?.secret).toBe(webhook.secret);
    // a later change of something else does not show it again
    const other = await patch({ telephony: { twilio: null } });
    expect(other.json().account.webhook.secret).toBe(masked);
  });

  it('a webhook with its own secret shows it masked, even in the response that set it', async () => {
    const res = await patch({
      webhook: { url: 'https://example.com/h2', secret: 'my-own-signing-secret', events: ['status-update', 'end-of-call-report'] },
    });
    expect(res.statusCode).toBe(200);
    expect(res.json().account.webhook).toEqual({
      url: 'https://example.com/h2',
      secret: '…cret',
      events: ['status-update', 'end-of-call-report'],
    });
    expect(res.body).not.toContain('my-own-signing-secret');
    const whsec = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
    const second = await patch({ webhook: { url: 'https://example.com/h3', secret: whsec } });
    expect(second.json().account.webhook.secret).toBe('whsec_…LaSw');
    expect((await get()).body).not.toContain(whsec);
    expect((await t.store.account.get(t.orgId)).webhook?.secret).toBe(whsec);
  });

  it('an empty events list is kept (the level then sends nothing)', async () => {
    const res = await patch({ webhook: { url: 'https://example.com/quiet', secret: 'quiet-secret', events: [] } });
    expect(res.statusCode).toBe(200);
    expect(res.json().account.webhook.events).toEqual([]);
  });

  it('null clears the webhook; omitting it leaves it alone', async () => {
    await patch({ webhook: { url: 'https://example.com/keep', secret: 'keep-secret' } });
    expect((await patch({})).json().account.webhook.url).toBe('https://example.com/keep');
    expect((await patch({ telephony: {} })).json().account.webhook.url).toBe('https://example.com/keep');
    const cleared = await patch({ webhook: null });
    expect(cleared.statusCode).toBe(200);
    expect(cleared.json().account.webhook).toBeNull();
    expect((await get()).json().account.webhook).toBeNull();
  });

  it('twilio credentials: the auth token is write-only (masked in every response)', async () => {
    const token = 'a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6';
    const res = await patch({ telephony: { twilio: { account_sid: SID, auth_token: token } } });
    expect(res.statusCode).toBe(200);
    expect(res.json().account.telephony).toEqual({ twilio: { account_sid: SID, auth_token: '…c5d6' } });
    expect(res.body).not.toContain(token);
    const got = await get();
    expect(got.json().account.telephony).toEqual({ twilio: { account_sid: SID, auth_token: '…c5d6' } });
    expect(got.body).not.toContain(token);
    expect((await t.store.account.get(t.orgId)).twilio).toEqual({ account_sid: SID, auth_token: token });

    // the webhook is left alone by a telephony change, and the reverse
    await patch({ webhook: { url: 'https://example.com/both', secret: 'both-secret' } });
    expect((await get()).json().account.telephony.twilio.account_sid).toBe(SID);
    expect((await patch({ telephony: { twilio: null } })).json().account.webhook.url).toBe('https://example.com/both');
    expect((await get()).json().account.telephony).toEqual({ twilio: null });
  });

  it('checks the account SID pattern and the token length', async () => {
    for (const account_sid of ['AC123', `XX${'0'.repeat(32)}`, `AC${'g'.repeat(32)}`, `AC${'0'.repeat(33)}`, '']) {
      const res = await patch({ telephony: { twilio: { account_sid, auth_token: 'long-enough-token' } } });
      expect(res.statusCode).toBe(400);
      expect(res.json()).toEqual({
        error: 'Invalid request',
        message: expect.any(String),
        details: ['telephony.twilio.account_sid: must be a Twilio account SID (AC + 32 hex digits)'],
      });
    }
    const upper = await patch({ telephony: { twilio: { account_sid: SID.toUpperCase(), auth_token: 'long-enough-token' } } });
    expect(upper.statusCode).toBe(200);
    const short = await patch({ telephony: { twilio: { account_sid: SID, auth_token: 'short' } } });
    expect(short.statusCode).toBe(400);
    expect(short.json().details[0]).toMatch(/^telephony\.twilio\.auth_token: /);
    const missing = await patch({ telephony: { twilio: { account_sid: SID } } });
    expect(missing.json().details).toEqual(['telephony.twilio.auth_token: required']);
  });

  it('refuses bad webhook settings, listing every problem', async () => {
    const res = await patch({ webhook: { url: 'ftp://example.com', secret: 'short', events: ['nope'] } });
    expect(res.statusCode).toBe(400);
    const details: string[] = res.json().details;
    expect(details.some((d) => d.startsWith('webhook.url: '))).toBe(true);
    expect(details.some((d) => d.startsWith('webhook.secret: '))).toBe(true);
    expect(details.some((d) => d.startsWith('webhook.events[0]: '))).toBe(true);
    const noUrl = await patch({ webhook: { secret: 'long-enough' } });
    expect(noUrl.json().details).toContain('webhook.url: required');
    const notObject = await patch({ webhook: 'https://example.com' });
    expect(notObject.json().details[0]).toMatch(/^webhook: /);
  });

  it('names unknown fields at every level', async () => {
    const res = await patch({
      timezone: 'UTC',
      webhook: { url: 'https://example.com/h', headers: {} },
      telephony: { vonage: {}, twilio: { account_sid: SID, auth_token: 'long-enough-token', region: 'us1' } },
    });
    expect(res.statusCode).toBe(400);
    expect(res.json().details).toEqual(
      expect.arrayContaining([
        'timezone: unknown field',
        'webhook.headers: unknown field',
        'telephony.vonage: unknown field',
        'telephony.twilio.region: unknown field',
      ]),
    );
  });

  it('credentials in the webhook url are shown masked, stored as written, and kept when sent back as shown', async () => {
    const url = 'https://acct:0rg-pass@example.com/hooks?team=1';
    const set = await patch({ webhook: { url, secret: 'account-secret' } });
    const masked = 'https://acct:****@example.com/hooks?team=1';
    expect(set.json().account.webhook.url).toBe(masked);
    expect((await get()).json().account.webhook.url).toBe(masked);
    expect((await t.store.account.get(t.orgId)).webhook!.url).toBe(url);
    const again = await patch({ webhook: { ...(await get()).json().account.webhook, secret: 'account-secret' } });
    expect(again.statusCode, again.body).toBe(200);
    expect((await t.store.account.get(t.orgId)).webhook!.url).toBe(url);
    const token = await patch({ webhook: { url: 'https://tok_live_55@example.com/hooks', secret: 'account-secret' } });
    expect(token.json().account.webhook.url).toBe('https://****@example.com/hooks');
    const unknown = await patch({ webhook: { url: 'https://acct:****@example.com/hooks' } });
    expect(unknown.statusCode).toBe(400);
    expect(unknown.json().details[0]).toMatch(/^webhook\.url: has masked credentials/);
  });

  it('a refused PATCH changes nothing', async () => {
    await patch({ webhook: { url: 'https://example.com/stable', secret: 'stable-secret' }, telephony: { twilio: null } });
    const before = (await get()).json();
    await patch({ webhook: { url: 'https://example.com/changed' }, telephony: { twilio: { account_sid: 'bad', auth_token: 'x' } } });
    expect((await get()).json()).toEqual(before);
  });

  it("organizations are isolated: each sees and changes only its own settings", async () => {
    await patch({
      webhook: { url: 'https://acme.example.com/h', secret: 'acme-secret' },
      telephony: { twilio: { account_sid: SID, auth_token: 'acme-token-123' } },
    });
    const theirs = await get(t.otherKey);
    expect(theirs.json().account).toEqual({
      id: expect.any(String),
      name: 'Other Org',
      webhook: null,
      telephony: { twilio: null },
      sip: { inbound: null, outbound: null },
      telnyx: null,
      outbound: { max_concurrent_calls: 10, calls_per_second: 1 },
      pricing: DEFAULT_PRICES,
    });
    expect(theirs.json().account.id).not.toBe(t.orgId);
    await patch({ webhook: { url: 'https://other.example.com/h' } }, t.otherKey);
    expect((await get()).json().account.webhook.url).toBe('https://acme.example.com/h');
    expect((await get(t.otherKey)).json().account.webhook.url).toBe('https://other.example.com/h');
    await patch({ webhook: null }, t.otherKey);
    expect((await get()).json().account.webhook.url).toBe('https://acme.example.com/h');
    expect((await get()).json().account.telephony.twilio.account_sid).toBe(SID);
  });

  it('outbound limits: set, partly set (the rest default), refused out of range, cleared with null', async () => {
    const set = await patch({ outbound: { max_concurrent_calls: 3, calls_per_second: 0.5 } });
    expect(set.statusCode).toBe(200);
    expect(set.json().account.outbound).toEqual({ max_concurrent_calls: 3, calls_per_second: 0.5 });
    expect((await get()).json().account.outbound).toEqual({ max_concurrent_calls: 3, calls_per_second: 0.5 });
    // the other settings are untouched by it, and it by them
    await patch({ webhook: null });
    expect((await get()).json().account.outbound).toEqual({ max_concurrent_calls: 3, calls_per_second: 0.5 });
    expect((await patch({ outbound: { max_concurrent_calls: 4 } })).json().account.outbound).toEqual({
      max_concurrent_calls: 4,
      calls_per_second: 1,
    });
    for (const bad of [{ max_concurrent_calls: 0 }, { max_concurrent_calls: 1.5 }, { calls_per_second: 0 }, { calls_per_second: -1 }, { calls_per_second: 101 }, { burst: 2 }]) {
      const res = await patch({ outbound: bad });
      expect(res.statusCode, JSON.stringify(bad)).toBe(400);
      expect(res.json().details.join(' ')).toMatch(/^outbound\./);
    }
    expect((await get()).json().account.outbound).toEqual({ max_concurrent_calls: 4, calls_per_second: 1 });
    expect((await patch({ outbound: null })).json().account.outbound).toEqual({ max_concurrent_calls: 10, calls_per_second: 1 });
  });

  it('SIP trunk settings: set, passwords never shown and kept when left out, refused when malformed, cleared', async () => {
    const set = await patch({
      sip: {
        inbound: { allowed_addresses: ['203.0.113.0/24', '2001:db8::1'], username: 'trunk', password: 'in-secret' },
        outbound: { proxy: 'sip:sip.example.net:5080;transport=tcp', username: 'acme', password: 'out-secret', caller_id: '+15550100200' },
      },
    });
    expect(set.statusCode).toBe(200);
    expect(set.json().account.sip).toEqual({
      inbound: { allowed_addresses: ['203.0.113.0/24', '2001:db8::1'], username: 'trunk', password_set: true },
      outbound: { proxy: 'sip:sip.example.net:5080;transport=tcp', username: 'acme', password_set: true, caller_id: '+15550100200' },
    });
    expect(JSON.stringify((await get()).json())).not.toMatch(/secret"|in-secret|out-secret/);
    // the caller ID changes; the password, left out with the same username, stays
    const changed = await patch({ sip: { outbound: { proxy: 'sip:sip.example.net', username: 'acme', caller_id: '+15550100300' } } });
    expect(changed.statusCode).toBe(200);
    expect((await t.store.account.get(t.orgId)).sip).toMatchObject({
      inbound: { username: 'trunk', password: 'in-secret' },
      outbound: { proxy: 'sip:sip.example.net', password: 'out-secret', caller_id: '+15550100300' },
    });
    // another username needs its password
    const bad = await patch({ sip: { inbound: { allowed_addresses: [], username: 'other' } } });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().details).toEqual(['sip.inbound.password: required with sip.inbound.username']);
    for (const body of [
      { sip: { inbound: { allowed_addresses: ['example.com'] } } },
      { sip: { inbound: { allowed_addresses: ['10.0.0.0/40'] } } },
      { sip: { outbound: { proxy: 'http://example.com' } } },
      { sip: { outbound: { proxy: 'sip:host;transport=tls' } } },
      { sip: { outbound: { proxy: 'sip:host', caller_id: '555' } } },
      { sip: { inbound: { allowed_addresses: [], username: 'a"b', password: 'x' } } },
      { sip: { unknown: true } },
    ]) {
      const res = await patch(body);
      expect(res.statusCode, JSON.stringify(body)).toBe(400);
      expect(res.json().details.join(' ')).toMatch(/sip/);
    }
    expect((await patch({ sip: { inbound: null } })).json().account.sip.inbound).toBeNull();
    expect((await patch({ sip: null })).json().account.sip).toEqual({ inbound: null, outbound: null });
  });

  it('Telnyx settings: the API key write-only (never shown, kept when left out), the keys checked, the others untouched, cleared', async () => {
    const publicKey = Buffer.alloc(32, 7).toString('base64');
    const apiKey = 'KEY0192AB_telnyx_secret_key';
    const set = await patch({ telnyx: { api_key: apiKey, public_key: publicKey, connection_id: '2811212257810187875' } });
    expect(set.statusCode).toBe(200);
    expect(set.json().account.telnyx).toEqual({ public_key: publicKey, connection_id: '2811212257810187875', api_key_set: true });
    expect(set.body).not.toContain(apiKey);
    const got = await get();
    expect(got.json().account.telnyx).toEqual({ public_key: publicKey, connection_id: '2811212257810187875', api_key_set: true });
    expect(got.body).not.toContain(apiKey);
    expect((await t.store.account.get(t.orgId)).carriers).toEqual({ telnyx: { api_key: apiKey, public_key: publicKey, connection_id: '2811212257810187875' } });
    // another connection, the key left out: the one kept is kept
    const changed = await patch({ telnyx: { public_key: publicKey, connection_id: 'uuid-like-0f3e-4b2a' } });
    expect(changed.statusCode).toBe(200);
    expect((await t.store.account.get(t.orgId)).carriers?.telnyx).toEqual({ api_key: apiKey, public_key: publicKey, connection_id: 'uuid-like-0f3e-4b2a' });
    // other settings leave it alone, and it them
    const sip = await patch({ sip: { outbound: { proxy: 'sip:sip.example.net' } } });
    expect(sip.json().account.telnyx.connection_id).toBe('uuid-like-0f3e-4b2a');
    expect((await patch({ telnyx: { public_key: publicKey, connection_id: 'c1' } })).json().account.sip.outbound.proxy).toBe('sip:sip.example.net');
    for (const [body, detail] of [
      [{ telnyx: { api_key: apiKey, public_key: 'not-a-key', connection_id: 'c1' } }, /^telnyx\.public_key: must be Telnyx's public key/],
      [{ telnyx: { api_key: apiKey, public_key: Buffer.alloc(31).toString('base64'), connection_id: 'c1' } }, /^telnyx\.public_key: /],
      [{ telnyx: { api_key: apiKey, public_key: publicKey, connection_id: 'has spaces' } }, /^telnyx\.connection_id: must be a Telnyx connection id/],
      [{ telnyx: { api_key: 'short', public_key: publicKey, connection_id: 'c1' } }, /^telnyx\.api_key: /],
      [{ telnyx: { api_key: apiKey, connection_id: 'c1' } }, /^telnyx\.public_key: required/],
      [{ telnyx: { api_key: apiKey, public_key: publicKey, connection_id: 'c1', extra: 1 } }, /telnyx/],
    ] as const) {
      const res = await patch(body);
      expect(res.statusCode, JSON.stringify(body)).toBe(400);
      expect(res.json().details[0]).toMatch(detail);
    }
    expect((await patch({ telnyx: null })).json().account.telnyx).toBeNull();
    expect((await t.store.account.get(t.orgId)).carriers).toBeUndefined();
    // with none kept, the key is required
    const keyless = await patch({ telnyx: { public_key: publicKey, connection_id: 'c1' } });
    expect(keyless.statusCode).toBe(400);
    expect(keyless.json().details).toEqual(['telnyx.api_key: required (it is never shown; once set, leave it out to keep it)']);
  });
});

describe('pricing (docs/usage.md)', () => {
  it('shows the shipped table with its date; an entry given replaces its price, null goes back, null for all restores them', async () => {
    expect((await get()).json().account.pricing.read_on).toBe(DEFAULT_PRICES.read_on);
    const res = await patch({ pricing: { llm: { 'sandbox/sandbox': { per_million_input_tokens: 1000, per_million_output_tokens: 2000 } }, carrier: { 'web/inbound': { per_minute: 0.5 } } } });
    expect(res.statusCode).toBe(200);
    const pricing = res.json().account.pricing;
    expect(pricing.llm['sandbox/sandbox']).toEqual({ per_million_input_tokens: 1000, per_million_output_tokens: 2000 });
    expect(pricing.carrier['web/inbound']).toEqual({ per_minute: 0.5 });
    expect(pricing.llm['openai/gpt-4o-mini']).toEqual(DEFAULT_PRICES.llm['openai/gpt-4o-mini']);
    // another organization keeps the shipped prices
    expect((await get(t.otherKey)).json().account.pricing).toEqual(DEFAULT_PRICES);
    const back = await patch({ pricing: { carrier: { 'web/inbound': null } } });
    expect(back.json().account.pricing.carrier['web/inbound']).toEqual(DEFAULT_PRICES.carrier['web/inbound']);
    expect(back.json().account.pricing.llm['sandbox/sandbox'].per_million_input_tokens).toBe(1000);
    expect((await patch({ pricing: null })).json().account.pricing).toEqual(DEFAULT_PRICES);
  });

  it('refuses a price that is not a number, a negative one, a unit of another kind, a key that is not provider/model', async () => {
    const res = await patch({ pricing: { stt: { 'deepgram/nova-3': { per_minute: -1 }, nova: { per_minute: 1 } }, llm: { 'openai/gpt-4o': { per_minute: 1 } } } });
    expect(res.statusCode).toBe(400);
    const details = res.json().details.join('\n');
    expect(details).toMatch(/pricing\.stt\["deepgram\/nova-3"\]\.per_minute/);
    expect(details).toMatch(/provider\/model/);
    expect(details).toMatch(/pricing\.llm/);
  });
});
