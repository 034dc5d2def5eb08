/** Bearer API keys (DECISIONS 2): every API route needs one, every refusal is the same 401. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { build, pipelineAssistant, sampleDefinition, type TestApp } from '../helpers/app.js';

let t: TestApp;
beforeAll(async () => {
  t = await build();
});
afterAll(async () => {
  await t.close();
});

const UNKNOWN_ID = '00000000-0000-4000-8000-000000000000';

/** Every API route, with a body that would be valid, so only the key can be the problem. */
const ROUTES: [method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, body?: unknown][] = [
  ['GET', '/workflows'],
  ['POST', '/workflows', { name: 'W', definition: sampleDefinition() }],
  ['GET', `/workflows/${UNKNOWN_ID}`],
  ['PATCH', `/workflows/${UNKNOWN_ID}`, { name: 'W2' }],
  ['DELETE', `/workflows/${UNKNOWN_ID}`],
  ['GET', '/assistants'],
  ['POST', '/assistants', pipelineAssistant],
  ['GET', `/assistants/${UNKNOWN_ID}`],
  ['PATCH', `/assistants/${UNKNOWN_ID}`, { name: 'A2' }],
  ['DELETE', `/assistants/${UNKNOWN_ID}`],
  ['GET', '/numbers'],
  ['POST', '/numbers', { number: '+14155550100' }],
  ['GET', `/numbers/${UNKNOWN_ID}`],
  ['PATCH', `/numbers/${UNKNOWN_ID}`, { name: 'N2' }],
  ['DELETE', `/numbers/${UNKNOWN_ID}`],
  ['GET', '/account'],
  ['PATCH', '/account', { webhook: null }],
  ['GET', '/catalog'],
];

function send(method: string, url: string, body: unknown, authorization: string | undefined) {
  return t.app.inject({
    method: method as 'GET',
    url,
    headers: authorization === undefined ? {} : { authorization },
    ...(body === undefined ? {} : { payload: body as object }),
  });
}

function expectInvalidKey(res: { statusCode: number; json(): unknown; headers: Record<string, unknown> }) {
  expect(res.statusCode).toBe(401);
  expect(res.headers['content-type']).toMatch(/^application\/json/);
  const body = res.json() as Record<string, unknown>;
  expect(body).toEqual({ error: 'Invalid API key', message: expect.any(String) });
  expect((body.message as string).length).toBeGreaterThan(0);
}

const wellFormedUnknown = `sk_live_${'A'.repeat(43)}`;

describe('authentication', () => {
  it('a valid key reaches every route (none of them answers 401)', async () => {
    for (const [method, url, body] of ROUTES) {
      const res = await send(method, url, body, `Bearer ${t.key}`);
      expect(res.statusCode, `${method} ${url}`).not.toBe(401);
      expect(res.statusCode, `${method} ${url}`).toBeLessThan(500);
    }
  });

  const refused: [label: string, header: () => string | undefined][] = [
    ['no Authorization header', () => undefined],
    ['an empty header', () => ''],
    ['Basic credentials', () => `Basic ${Buffer.from('user:pass').toString('base64')}`],
    ['the key under Basic', () => `Basic ${t.key}`],
    ['"Bearer" alone', () => 'Bearer'],
    ['"Bearer " with nothing after it', () => 'Bearer '],
    ['the key without a scheme', () => t.key],
    ['another scheme (Token)', () => `Token ${t.key}`],
    ['extra junk after the key', () => `Bearer ${t.key} junk`],
    ['two keys', () => `Bearer ${t.key} ${t.otherKey}`],
    ['a comma-joined second credential', () => `Bearer ${t.key}, Basic abc`],
    ['an unknown well-formed key', () => `Bearer ${wellFormedUnknown}`],
    ['a key one character short', () => `Bearer ${t.key.slice(0, -1)}`],
    ['a key one character long', () => `Bearer ${t.key}A`],
    ['a key with the last character changed', () => `Bearer ${t.key.slice(0, -1)}${t.key.endsWith('A') ? 'B' : 'A'}`],
    ['a test-mode prefix', () => `Bearer ${t.key.replace('sk_live_', 'sk_test_')}`],
    ['a malformed key', () => 'Bearer sk_live_short'],
    ['a key with characters outside base64url', () => `Bearer sk_live_${'+'.repeat(43)}`],
    ['a quoted key', () => `Bearer "${t.key}"`],
  ];

  for (const [label, header] of refused) {
    it(`401 for ${label}, on every route`, async () => {
      for (const [method, url, body] of ROUTES) {
        const res = await send(method, url, body, header());
        expectInvalidKey(res);
      }
    });
  }

  it('the scheme is case-insensitive and surrounding spaces are tolerated (RFC 9110)', async () => {
    for (const header of [`bearer ${t.key}`, `BEARER ${t.key}`, `Bearer   ${t.key}`, `Bearer ${t.key}  `]) {
      const res = await send('GET', '/workflows', undefined, header);
      expect(res.statusCode, JSON.stringify(header)).toBe(200);
    }
  });

  it('a key in the query string is not a credential', async () => {
    expectInvalidKey(await send('GET', `/workflows?api_key=${t.key}`, undefined, undefined));
    expectInvalidKey(await send('GET', `/workflows?key=${t.key}`, undefined, undefined));
  });

  it('a revoked key is refused everywhere; other keys of the organization keep working', async () => {
    const made = await t.store.keys.createKey('Acme Test');
    expect((await send('GET', '/workflows', undefined, `Bearer ${made.key}`)).statusCode).toBe(200);
    const { revoked } = await t.store.keys.revoke(made.prefix);
    expect(revoked).toEqual([made.prefix]);
    for (const [method, url, body] of ROUTES) {
      expectInvalidKey(await send(method, url, body, `Bearer ${made.key}`));
    }
    expect((await send('GET', '/workflows', undefined, `Bearer ${t.key}`)).statusCode).toBe(200);
  });

  it('the key is checked before anything else: no 400, 404 or 413 leaks to an unauthenticated caller', async () => {
    const malformed = await t.app.inject({
      method: 'POST',
      url: '/workflows',
      headers: { 'content-type': 'application/json' },
      payload: '{"name":',
    });
    expectInvalidKey(malformed);
    expectInvalidKey(await send('POST', '/workflows', { colour: 'blue' }, undefined));
    expectInvalidKey(await send('GET', '/workflows/not-a-uuid', undefined, 'Bearer nope'));
    const big = await t.app.inject({
      method: 'POST',
      url: '/workflows',
      headers: { 'content-type': 'application/json' },
      payload: JSON.stringify({ name: 'x'.repeat(1024 * 1024) }),
    });
    // Fastify refuses an oversized body before any hook runs; either answer is fine, never a 2xx/5xx.
    expect([401, 413]).toContain(big.statusCode);
  });

  it("an existing resource of the caller's own organization is still a 401 without the key", async () => {
    const created = (await t.request('POST', '/workflows', { name: 'Mine', definition: sampleDefinition() })).json()
      .workflow;
    expectInvalidKey(await send('GET', `/workflows/${created.id}`, undefined, undefined));
    expectInvalidKey(await send('DELETE', `/workflows/${created.id}`, undefined, `Bearer ${wellFormedUnknown}`));
    expect((await t.request('GET', `/workflows/${created.id}`)).statusCode).toBe(200);
  });

  it('health, readiness and the API description need no key', async () => {
    for (const url of ['/healthz', '/readyz', '/openapi.json']) {
      expect((await send('GET', url, undefined, undefined)).statusCode, url).toBe(200);
      expect((await send('GET', url, undefined, 'Bearer nonsense')).statusCode, url).toBe(200);
    }
  });

  it('keys are stored only as SHA-256 hashes', async () => {
    const { rows } = await t.store.db.query<Record<string, unknown>>('SELECT * FROM api_keys');
    expect(rows.length).toBeGreaterThan(0);
    const dump = JSON.stringify(rows);
    expect(dump).not.toContain(t.key);
    expect(dump).not.toContain(t.key.slice('sk_live_'.length));
    expect(dump).not.toContain(t.otherKey);
  });
});
