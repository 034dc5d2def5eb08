/**
 * Queued outbound calls survive a restart (DECISIONS 11): a campaign is queued on one server,
 * that server stops with calls still waiting, and another server on the same database (and Redis,
 * with REDIS_URL) dials the rest: every customer once, none twice. On the embedded default the
 * queue is in SQL and the call sessions in memory, so the second server brings the calls back
 * from the queue; with Redis both are shared. (The dialler killed mid-campaign with SIGKILL is
 * test/calls-dialer/restart.test.ts.)
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../../src/app.js';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/logger.js';
import { createStore, type Store } from '../../src/store/index.js';
import { createRuntime, type Runtime } from '../../src/runtime.js';
import { freePort } from '../../src/net.js';
import { createTestDb, defaultDbKind, type TestDb } from '../helpers/db.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';
import { ACCOUNT_SID, AUTH_TOKEN, eventually, receivedMessages, sandboxAssistant, startFakeTwilioRest, type FakeTwilioRest } from '../helpers/calls.js';

let testDb: TestDb;
let twilio: FakeTwilioRest;
let receiver: Receiver;
const queueName = `test-restart-dial-${Date.now()}`;

interface Server {
  app: FastifyInstance;
  runtime: Runtime;
  store: Store;
  api(method: 'GET' | 'POST' | 'PATCH', url: string, body?: unknown): Promise<{ status: number; json: any }>;
  close(): Promise<void>;
}

let key = '';

/** Both servers have one address (PUBLIC_URL): Twilio's callbacks for calls the first dialled reach the second. */
let port = 0;

async function startServer(): Promise<Server> {
  const store = createStore(testDb.db);
  port ||= await freePort();
  const config = loadConfig({
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
    WEBHOOK_ALLOW_PRIVATE: 'true',
    PORT: String(port),
    TWILIO_API_BASE: twilio.url,
    RATE_LIMIT_PER_MINUTE: '0',
    ...(process.env.REDIS_URL ? { REDIS_URL: process.env.REDIS_URL } : {}),
  });
  const logger = createLogger(config.LOG_LEVEL);
  const runtime = await createRuntime({ config, store, logger, webhookQueueName: `${queueName}-hooks`, dialQueueName: queueName });
  const app = await buildApp({ config, store, logger, runtime });
  await app.listen({ port, host: '127.0.0.1' });
  if (!key) key = (await store.keys.createKey('Restart test')).key;
  const api: Server['api'] = async (method, url, body) => {
    const res = await app.inject({
      method,
      url,
      headers: { authorization: `Bearer ${key}` },
      ...(body === undefined ? {} : { payload: body as Record<string, unknown> }),
    });
    return { status: res.statusCode, json: res.body ? res.json() : null };
  };
  return {
    app,
    runtime,
    store,
    api,
    async close() {
      await runtime.close(0);
      await app.close();
    },
  };
}

beforeAll(async () => {
  testDb = await createTestDb(defaultDbKind());
  twilio = await startFakeTwilioRest();
  receiver = await startReceiver();
}, 60_000);
afterAll(async () => {
  await twilio?.close();
  await receiver?.close();
  await testDb?.drop();
});

it('a campaign queued on a server that stops is dialled by the next one, every customer once', async () => {
  const first = await startServer();
  const customers = Array.from({ length: 6 }, (_, i) => `+1415700${String(i).padStart(4, '0')}`);
  // busy lines end at once: what is measured is who dials, not the calls
  twilio.setDefaultCallee({ kind: 'busy' });
  let callIds: string[] = [];
  try {
    const account = await first.api('PATCH', '/account', {
      webhook: { url: receiver.url },
      telephony: { twilio: { account_sid: ACCOUNT_SID, auth_token: AUTH_TOKEN } },
      outbound: { max_concurrent_calls: 10, calls_per_second: 1 },
    });
    expect(account.status).toBe(200);
    const assistant = await first.api('POST', '/assistants', sandboxAssistant());
    const number = await first.api('POST', '/numbers', { number: '+14155550177', assistant_id: assistant.json.assistant.id });
    const res = await first.api('POST', '/calls', { number_id: number.json.number.id, customers: customers.map((n) => ({ number: n })) });
    expect(res.status).toBe(201);
    callIds = res.json.calls.map((c: { id: string }) => c.id);
    // the first is dialled and over (the next may dial a second later); then this server stops
    // with the rest still queued. (A call ringing across a restart is another matter: its
    // session dies with an embedded server, docs/outbound-calls.md.)
    await eventually('the first report', () => receivedMessages(receiver, 'end-of-call-report').length >= 1);
  } finally {
    await first.close();
  }
  const dialledByFirst = twilio.calls.length;
  expect(dialledByFirst).toBeLessThan(customers.length);

  const second = await startServer();
  try {
    await eventually('every customer dialled', () => twilio.calls.length >= customers.length, 30_000);
    // a moment more: nothing is dialled twice
    await new Promise((r) => setTimeout(r, 1_500));
    expect(twilio.calls.map((c) => c.to).sort()).toEqual([...customers].sort());
    for (const id of callIds) {
      const call = await eventually(`call ${id} ended`, async () => {
        const r = await second.api('GET', `/calls/${id}`);
        return r.json.call?.status === 'ended' ? r.json.call : null;
      });
      expect(call).toMatchObject({ type: 'outbound_phone_call', ended_reason: 'customer-busy' });
    }
    const reports = receivedMessages(receiver, 'end-of-call-report');
    for (const id of callIds) expect(reports.filter((m) => m.call.id === id)).toHaveLength(1);
  } finally {
    await second.close();
  }
}, 60_000);
