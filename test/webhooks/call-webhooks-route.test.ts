import { randomUUID } from 'node:crypto';
import Fastify, { type FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import type { z } from 'zod';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callWebhookRoutes } from '../../src/api/call-webhooks.js';
import { registerAuth } from '../../src/api/auth.js';
import { registerErrorHandler, RequestValidationError } from '../../src/api/errors.js';
import { DeliveryRepository, type DeliveryAttemptRecord } from '../../src/store/deliveries.js';
import { createStore, type Store } from '../../src/store/index.js';
import { createTestDb, defaultDbKind, type TestDb } from '../helpers/db.js';

/** The route in an authenticated scope, as the app will register it. */
async function buildRouteApp(store: Store, deliveries: DeliveryRepository, known: Map<string, string>) {
  const app = Fastify().withTypeProvider<ZodTypeProvider>();
  app.setValidatorCompiler<z.ZodType>(({ schema, httpPart }) => (data) => {
    const result = schema.safeParse(data);
    return result.success ? { value: result.data } : { error: new RequestValidationError(httpPart ?? 'body', result.error.issues) };
  });
  app.setSerializerCompiler(() => (data) => JSON.stringify(data));
  registerErrorHandler(app);
  await app.register(async (api) => {
    registerAuth(api, store.keys);
    await api.register(callWebhookRoutes(deliveries, { callExists: async (org, id) => known.get(id) === org }));
  });
  await app.ready();
  return app;
}

describe('GET /calls/{id}/webhooks', () => {
  let testDb: TestDb;
  let app: FastifyInstance;
  let key: string;
  let otherKey: string;
  let orgId: string;
  const callId = randomUUID();
  const quietCall = randomUUID();
  const otherCall = randomUUID();
  const leakyCall = randomUUID();

  beforeAll(async () => {
    testDb = await createTestDb(defaultDbKind());
    const store = createStore(testDb.db);
    const deliveries = new DeliveryRepository(testDb.db);
    const mine = await store.keys.createKey('Route Org');
    const other = await store.keys.createKey('Other Org');
    key = mine.key;
    otherKey = other.key;
    orgId = mine.organization.id;
    const base: DeliveryAttemptRecord = {
      organization_id: orgId,
      call_id: callId,
      message_id: 'msg_1',
      event: 'status-update',
      url: 'https://hooks.example/x',
      attempt: 1,
      outcome: 'retrying',
      status_code: 503,
      error: 'HTTP 503',
      duration_ms: 12,
      next_retry_at: '2025-01-01T00:00:05.000Z',
      created_at: '2025-01-01T00:00:00.000Z',
    };
    await deliveries.record(base);
    await deliveries.record({ ...base, attempt: 2, outcome: 'delivered', status_code: 200, error: null, next_retry_at: null, created_at: '2025-01-01T00:00:05.000Z' });
    await deliveries.record({ ...base, organization_id: other.organization.id, call_id: otherCall, message_id: 'msg_other' });
    // attempts as they were recorded before: the real URL, the resolver's answer and socket errors
    const leaky = { ...base, call_id: leakyCall, outcome: 'failed' as const, status_code: null, next_retry_at: null };
    await deliveries.record({
      ...leaky,
      url: 'https://ops:s3cret-pass@hooks.example/x?v=1',
      error: 'hooks.example resolves to 127.0.0.1; refused to connect to 127.0.0.1: loopback address (only public addresses are allowed; WEBHOOK_ALLOW_PRIVATE=true allows others)',
    });
    await deliveries.record({ ...leaky, event: 'tool-calls', url: 'https://token123@tools.example/t', error: 'the tool could not be reached: connection failed (ECONNREFUSED)' });
    await deliveries.record({ ...leaky, event: 'assistant-request', error: 'could not resolve hooks.corp.internal: ENOTFOUND' });
    await deliveries.record({ ...leaky, error: 'refused to connect to 10.1.2.3: private address (only public addresses are allowed; WEBHOOK_ALLOW_PRIVATE=true allows others)' });
    app = await buildRouteApp(
      store,
      deliveries,
      new Map([
        [callId, orgId],
        [quietCall, orgId],
        [leakyCall, orgId],
        [otherCall, other.organization.id],
      ]),
    );
  });
  afterAll(async () => {
    await app.close();
    await testDb.drop();
  });

  const get = (id: string, k: string | null = key) =>
    app.inject({ method: 'GET', url: `/calls/${id}/webhooks`, headers: k ? { authorization: `Bearer ${k}` } : {} });

  it('lists the attempts of the call, oldest first', async () => {
    const res = await get(callId);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({
      webhooks: [
        {
          id: expect.any(String),
          message_id: 'msg_1',
          event: 'status-update',
          url: 'https://hooks.example/x',
          attempt: 1,
          outcome: 'retrying',
          status_code: 503,
          error: 'HTTP 503',
          duration_ms: 12,
          next_retry_at: '2025-01-01T00:00:05.000Z',
          created_at: '2025-01-01T00:00:00.000Z',
        },
        expect.objectContaining({ attempt: 2, outcome: 'delivered', status_code: 200, error: null, next_retry_at: null }),
      ],
    });
  });

  it('credentials in URLs are masked and network details left out, for attempts recorded before too', async () => {
    const res = await get(leakyCall);
    expect(res.statusCode).toBe(200);
    expect(res.json().webhooks.map((w: { url: string; error: string }) => [w.url, w.error])).toEqual([
      ['https://ops:****@hooks.example/x?v=1', 'blocked address (only public addresses are allowed)'],
      ['https://****@tools.example/t', 'the tool could not be reached: connection failed'],
      ['https://hooks.example/x', 'could not resolve the host name'],
      ['https://hooks.example/x', 'blocked address (only public addresses are allowed)'],
    ]);
    expect(res.body).not.toMatch(/s3cret-pass|token123|127\.0\.0\.1|10\.1\.2\.3|ECONNREFUSED|ENOTFOUND|corp\.internal/);
  });

  it('a known call without attempts has an empty list', async () => {
    expect((await get(quietCall)).json()).toEqual({ webhooks: [] });
  });

  it('unknown, non-UUID and other organizations\' calls are 404; no key is 401', async () => {
    expect((await get(randomUUID())).statusCode).toBe(404);
    expect((await get('not-a-uuid')).statusCode).toBe(404);
    expect((await get(callId, otherKey)).statusCode).toBe(404);
    expect((await get(otherCall)).statusCode).toBe(404);
    expect((await get(otherCall, otherKey)).json().webhooks).toHaveLength(1);
    expect((await get(callId, null)).statusCode).toBe(401);
  });
});
