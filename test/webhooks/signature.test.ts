import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { Webhook } from 'standardwebhooks';
import { verifyWebhook, WebhookVerificationError } from '../../src/index.js';
import { generateWebhookSecret } from '../../src/webhooks/secrets.js';
import { newMessageId, signWebhook, webhookRequestHeaders, webhookSigningKey } from '../../src/webhooks/sign.js';
import { WebhookHttpClient } from '../../src/webhooks/http.js';
import { USER_AGENT } from '../../src/version.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';

/** The standardwebhooks library, keyed like our secrets (whsec_ base64, else UTF-8 bytes). */
const reference = (secret: string) =>
  secret.startsWith('whsec_') ? new Webhook(secret) : new Webhook(Buffer.from(secret, 'utf8'), { format: 'raw' });

/** Our header names mapped to the Standard Webhooks ones. */
const standardHeaders = (h: Record<string, string | string[] | undefined>) => ({
  'webhook-id': String(h['x-webhook-id']),
  'webhook-timestamp': String(h['x-webhook-timestamp']),
  'webhook-signature': String(h['x-webhook-signature']),
});

const nowSeconds = () => Math.floor(Date.now() / 1000);

function expectCode(fn: () => unknown, code: string) {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(WebhookVerificationError);
    expect((err as WebhookVerificationError).code).toBe(code);
    return;
  }
  throw new Error(`expected ${code}, but it verified`);
}

describe('signing (Standard Webhooks algorithm)', () => {
  it('matches the published Standard Webhooks test vector', () => {
    // from github.com/standard-webhooks/standard-webhooks (libraries' shared test vector)
    const secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
    const sig = signWebhook(secret, 'msg_p5jXN8AQM9LWM0D4loKWxJek', 1614265330, '{"test": 2432232314}');
    expect(sig).toBe('v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=');
    expect(reference(secret).sign('msg_p5jXN8AQM9LWM0D4loKWxJek', new Date(1614265330 * 1000), '{"test": 2432232314}')).toBe(sig);
  });

  it('equals the standardwebhooks package for whsec_ and plain secrets, any body', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.uint8Array({ minLength: 16, maxLength: 64 }).map((b) => `whsec_${Buffer.from(b).toString('base64')}`),
          fc.string({ minLength: 8, maxLength: 64 }),
        ),
        fc.string({ unit: 'binary', maxLength: 2000 }),
        fc.integer({ min: 1_000_000_000, max: 4_000_000_000 }),
        (secret, body, ts) => {
          const id = newMessageId();
          const ours = signWebhook(secret, id, ts, body);
          expect(ours).toBe(reference(secret).sign(id, new Date(ts * 1000), body));
          expect(signWebhook(webhookSigningKey(secret), id, ts, Buffer.from(body, 'utf8'))).toBe(ours);
        },
      ),
      { numRuns: 50 },
    );
  });

  it('the key of a whsec_ secret is its base64 payload; any other secret is its UTF-8 bytes', () => {
    const secret = generateWebhookSecret();
    expect(webhookSigningKey(secret)).toEqual(Buffer.from(secret.slice(6), 'base64'));
    expect(webhookSigningKey(secret).length).toBe(32);
    expect(webhookSigningKey('my-shared-secret')).toEqual(Buffer.from('my-shared-secret', 'utf8'));
  });

  it('builds every header of SPEC 6.2 and DECISIONS 7', () => {
    const body = JSON.stringify({ message: { type: 'status-update' } });
    const h = webhookRequestHeaders({ event: 'status-update', messageId: 'msg_1', timestampSeconds: 1700000000, body, secret: 'whsec_AAAA' });
    expect(h).toMatchObject({
      'content-type': 'application/json',
      'user-assistant': USER_AGENT,
      'x-webhook-event': 'status-update',
      'x-webhook-id': 'msg_1',
      'x-webhook-timestamp': '1700000000',
    });
    expect(USER_AGENT).toMatch(/^switchboard\/\d+\.\d+\.\d+/);
    expect(h['x-webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/);
    expect(newMessageId()).toMatch(/^msg_[A-Za-z0-9_-]{32}$/);
  });

  it('sends no signature header when the target has no secret', () => {
    const h = webhookRequestHeaders({ event: 'status-update', messageId: 'msg_1', timestampSeconds: 1, body: '{}', secret: null });
    expect(h['x-webhook-signature']).toBeUndefined();
  });
});

describe('verifyWebhook', () => {
  const secret = generateWebhookSecret();
  const body = JSON.stringify({ message: { type: 'end-of-call-report', call: { id: 'c1' }, text: 'héllo ✓' } });

  const signed = (overrides: { ts?: number; id?: string; body?: string; secret?: string } = {}) =>
    webhookRequestHeaders({
      event: 'end-of-call-report',
      messageId: overrides.id ?? 'msg_abc',
      timestampSeconds: overrides.ts ?? nowSeconds(),
      body: overrides.body ?? body,
      secret: overrides.secret ?? secret,
    });

  it('accepts our request and returns the parsed payload, id, timestamp and event', () => {
    const headers = signed();
    const v = verifyWebhook(body, headers, secret);
    expect(v.ok).toBe(true);
    expect(v.id).toBe('msg_abc');
    expect(v.event).toBe('end-of-call-report');
    expect(v.timestamp).toBe(Number(headers['x-webhook-timestamp']));
    expect(v.payload).toEqual(JSON.parse(body));
    expect(verifyWebhook(Buffer.from(body), headers, secret).ok).toBe(true);
  });

  it('standardwebhooks Webhook.verify accepts our request once the headers are mapped', () => {
    const headers = signed();
    expect(reference(secret).verify(body, standardHeaders(headers))).toEqual(JSON.parse(body));
    const plain = 'a-plain-shared-secret';
    expect(reference(plain).verify(body, standardHeaders(signed({ secret: plain })))).toEqual(JSON.parse(body));
  });

  it('accepts what standardwebhooks signs', () => {
    const ts = nowSeconds();
    const sig = reference(secret).sign('msg_ref', new Date(ts * 1000), body);
    const v = verifyWebhook(body, { 'X-Webhook-Id': 'msg_ref', 'X-Webhook-Timestamp': String(ts), 'X-Webhook-Signature': sig }, secret);
    expect(v.id).toBe('msg_ref');
    const plain = 'another plain secret';
    const sig2 = reference(plain).sign('msg_ref', new Date(ts * 1000), body);
    expect(verifyWebhook(body, { 'x-webhook-id': 'msg_ref', 'x-webhook-timestamp': String(ts), 'x-webhook-signature': sig2 }, plain).ok).toBe(true);
  });

  it('rejects a body changed by one byte', () => {
    const headers = signed();
    const changed = Buffer.from(body);
    changed[10] = changed[10]! ^ 0x01;
    expectCode(() => verifyWebhook(changed, headers, secret), 'INVALID_SIGNATURE');
    expectCode(() => verifyWebhook(`${body} `, headers, secret), 'INVALID_SIGNATURE');
    expect(() => reference(secret).verify(changed, standardHeaders(headers))).toThrow();
  });

  it('rejects a wrong secret', () => {
    expectCode(() => verifyWebhook(body, signed(), generateWebhookSecret()), 'INVALID_SIGNATURE');
    expectCode(() => verifyWebhook(body, signed({ secret: 'plain-one' }), 'plain-two'), 'INVALID_SIGNATURE');
  });

  it('rejects a changed id or timestamp (both are signed)', () => {
    const headers = signed();
    expectCode(() => verifyWebhook(body, { ...headers, 'x-webhook-id': 'msg_other' }, secret), 'INVALID_SIGNATURE');
    const ts = Number(headers['x-webhook-timestamp']) + 1;
    expectCode(() => verifyWebhook(body, { ...headers, 'x-webhook-timestamp': String(ts) }, secret), 'INVALID_SIGNATURE');
  });

  it('rejects a timestamp outside the tolerance, both ways; the tolerance and now are options', () => {
    const old = nowSeconds() - 301;
    expectCode(() => verifyWebhook(body, signed({ ts: old }), secret), 'TIMESTAMP_OUT_OF_TOLERANCE');
    expectCode(() => verifyWebhook(body, signed({ ts: nowSeconds() + 301 }), secret), 'TIMESTAMP_OUT_OF_TOLERANCE');
    expect(verifyWebhook(body, signed({ ts: old }), secret, { toleranceSeconds: 600 }).ok).toBe(true);
    expect(verifyWebhook(body, signed({ ts: 1_600_000_000 }), secret, { now: new Date(1_600_000_100_000) }).ok).toBe(true);
    expect(verifyWebhook(body, signed({ ts: 1_600_000_000 }), secret, { now: 1_600_000_100_000 }).ok).toBe(true);
    expectCode(() => verifyWebhook(body, signed({ ts: 1_600_000_000 }), secret, { now: 1_600_000_400_000 }), 'TIMESTAMP_OUT_OF_TOLERANCE');
    expectCode(() => verifyWebhook(body, { ...signed(), 'x-webhook-timestamp': '12.5' }, secret), 'INVALID_TIMESTAMP');
  });

  it('rejects missing headers with the header named', () => {
    const { ['x-webhook-signature']: _sig, ...rest } = signed();
    expect(() => verifyWebhook(body, rest, secret)).toThrow(/X-Webhook-Signature header is missing/);
    expectCode(() => verifyWebhook(body, {}, secret), 'MISSING_HEADER');
  });

  it('accepts several space-separated signatures (key rotation) and ignores other versions', () => {
    const headers = signed();
    const good = headers['x-webhook-signature']!;
    const bad = signed({ secret: generateWebhookSecret() })['x-webhook-signature']!;
    expect(verifyWebhook(body, { ...headers, 'x-webhook-signature': `${bad} ${good}` }, secret).ok).toBe(true);
    expect(verifyWebhook(body, { ...headers, 'x-webhook-signature': `v2,${good.slice(3)} ${good}` }, secret).ok).toBe(true);
    expectCode(() => verifyWebhook(body, { ...headers, 'x-webhook-signature': `v2,${good.slice(3)}` }, secret), 'INVALID_SIGNATURE');
    expectCode(() => verifyWebhook(body, { ...headers, 'x-webhook-signature': `v1,${good.slice(3, 20)}` }, secret), 'INVALID_SIGNATURE');
    expectCode(() => verifyWebhook(body, { ...headers, 'x-webhook-signature': 'garbage' }, secret), 'INVALID_SIGNATURE');
  });

  it('reads headers in any case, as arrays, or from a Fetch Headers object', () => {
    const headers = signed();
    const upper = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toUpperCase(), v]));
    expect(verifyWebhook(body, upper, secret).ok).toBe(true);
    const arrays = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k, [v]]));
    expect(verifyWebhook(body, arrays, secret).ok).toBe(true);
    expect(verifyWebhook(body, new Headers(headers), secret).ok).toBe(true);
  });

  it('reports a signed body that is not JSON', () => {
    expectCode(() => verifyWebhook('not json', signed({ body: 'not json' }), secret), 'INVALID_PAYLOAD');
  });
});

describe('a signed request over HTTP', () => {
  let receiver: Receiver;
  let http: WebhookHttpClient;
  beforeAll(async () => {
    receiver = await startReceiver();
    http = new WebhookHttpClient({ allowPrivate: true });
  });
  afterAll(async () => {
    await http.close();
    await receiver.close();
  });

  it('arrives with the exact signed bytes; both verifiers accept it', async () => {
    const secret = generateWebhookSecret();
    const body = JSON.stringify({ message: { type: 'status-update', note: 'unicode ✓ "quotes" \u2028' } });
    const headers = webhookRequestHeaders({ event: 'status-update', messageId: newMessageId(), timestampSeconds: nowSeconds(), body, secret });
    const out = await http.post(receiver.url, { headers, body, timeoutMs: 5_000 });
    expect(out.ok && out.status).toBe(200);
    const got = receiver.requests.at(-1)!;
    expect(got.method).toBe('POST');
    expect(got.body).toBe(body);
    expect(got.headers['content-type']).toBe('application/json');
    expect(got.headers['user-assistant']).toBe(USER_AGENT);
    expect(got.headers['x-webhook-event']).toBe('status-update');
    expect(verifyWebhook(got.body, got.headers, secret).payload).toEqual(JSON.parse(body));
    expect(reference(secret).verify(got.body, standardHeaders(got.headers))).toEqual(JSON.parse(body));
  });
});
