/**
 * Calls that outlive their process's troubles (issue 5, items 6 and 7):
 * - call sessions in Redis: a second instance on the same Redis and database reads a live call;
 * - a process killed mid-call (SIGKILL of a real `node src/main.ts`): another process finalizes
 *   the call with `worker-lost` and sends its status-update `ended` and end-of-call-report;
 *   the same logic on the in-process store, and a live call that must not be taken over;
 * - graceful shutdown: no new calls (`<Reject reason="busy"/>`), live calls may finish within
 *   the grace period, the rest are ended with their reports sent and their sockets closed.
 *
 * Redis tests run on REDIS_URL, or on redis://127.0.0.1:6379 when it answers; the killed-process
 * test also needs PostgreSQL (DATABASE_URL, or postgres://postgres@127.0.0.1:5432/postgres when it
 * answers). Everything here uses Redis logical database 14, so that finalizing stale calls with a
 * short threshold never touches the sessions of other test files running at the same time.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../../src/app.js';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/logger.js';
import { openDb, type Db } from '../../src/store/db.js';
import { createStore, type Store } from '../../src/store/index.js';
import { createRuntime, type Runtime } from '../../src/runtime.js';
import { CallService } from '../../src/calls/service.js';
import { MemoryCallStore, RedisCallStore, type CallRecord, type CallStatus, type CallStore } from '../../src/calls/store.js';
import type { CallNotifier } from '../../src/calls/notifier.js';
import type { Providers } from '../../src/providers/types.js';
import { callRecord } from '../helpers/call-record.js';
import { SimulatedCall } from '../../src/sim/caller.js';
import {
  ACCOUNT_SID,
  AUTH_TOKEN,
  frontDeskWorkflow,
  receivedMessages,
  sandboxAssistant,
  startCallingServer,
  startFakeTwilioRest,
  type CallingServer,
  type FakeTwilioRest,
  eventually,
  callIdOf,
  intoBooking,
} from '../helpers/calls.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';
import { freePort } from '../../src/net.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const REDIS_DB = 14;
const silent = createLogger('silent');

// ---------------------------------------------------------------------------------------------
// what is reachable

async function redisAnswers(url: string): Promise<boolean> {
  const r = new Redis(url, { lazyConnect: true, connectTimeout: 1000, maxRetriesPerRequest: 0, retryStrategy: () => null });
  r.on('error', () => undefined);
  try {
    await r.connect();
    return (await r.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    r.disconnect();
  }
}

async function postgresAnswers(url: string): Promise<boolean> {
  const c = new pg.Client({ connectionString: url, connectionTimeoutMillis: 1000 });
  c.on('error', () => undefined);
  try {
    await c.connect();
    await c.query('SELECT 1');
    return true;
  } catch {
    return false;
  } finally {
    await c.end().catch(() => undefined);
  }
}

function onRedisDb(url: string, db: number): string {
  const u = new URL(url);
  u.pathname = `/${db}`;
  return u.toString();
}

const redisBase = process.env.REDIS_URL ?? ((await redisAnswers('redis://127.0.0.1:6379')) ? 'redis://127.0.0.1:6379' : null);
const REDIS_URL = redisBase ? onRedisDb(redisBase, REDIS_DB) : null;
const postgresBase =
  process.env.DATABASE_URL ??
  ((await postgresAnswers('postgres://postgres@127.0.0.1:5432/postgres')) ? 'postgres://postgres@127.0.0.1:5432/postgres' : null);
/** The sessions of the whole-app tests: Redis when REDIS_URL is set, in process otherwise. */
const envSessions: Record<string, string> = process.env.REDIS_URL && REDIS_URL ? { REDIS_URL } : {};

// ---------------------------------------------------------------------------------------------
// small helpers

/** The caller may also say goodbye at the greeting (the graceful-shutdown tests do). */
const frontDesk = frontDeskWorkflow({ goodbyeFromGreeting: true });

/** Dials, hears the greeting, asks for a booking and hears the booking node's first line. */
async function callIntoBooking(call: SimulatedCall): Promise<string> {
  const callId = callIdOf(await call.dial());
  await intoBooking(call);
  return callId;
}

function recordingNotifier() {
  const statuses: { callId: string; status: CallStatus; ended_reason?: string | undefined }[] = [];
  const reports: CallRecord[] = [];
  const notifier: CallNotifier = {
    async statusUpdate(call, status, extra) {
      statuses.push({ callId: call.id, status, ended_reason: extra?.ended_reason });
    },
    async endOfCallReport(call) {
      reports.push(structuredClone(call));
    },
    async toolCalls() {
      return [];
    },
  };
  return { notifier, statuses, reports };
}

/** A call service that only finalizes (no telephony, no providers): the other process's view. */
function finalizerService(calls: CallStore, notifier: CallNotifier, store = {} as Store): CallService {
  return new CallService({
    store,
    calls,
    providers: {} as Providers,
    notifier,
    resolver: { resolve: async () => ({ kind: 'rejected', errors: [{ code: 'CALL_REJECTED', message: 'unused' }] }) },
    logger: silent,
  });
}

/** Another instance of the service on the same database and call sessions (not listening). */
async function secondInstance(store: Store, env: Record<string, string>): Promise<{ app: FastifyInstance; runtime: Runtime; close(): Promise<void> }> {
  const config = loadConfig({ LOG_LEVEL: 'silent', WEBHOOK_ALLOW_PRIVATE: 'true', RATE_LIMIT_PER_MINUTE: '0', ...env });
  const runtime = await createRuntime({ config, store, logger: silent, webhookQueueName: `resilience-b-${randomUUID()}` });
  const app = await buildApp({ config, store, logger: silent, runtime });
  await app.ready();
  return {
    app,
    runtime,
    async close() {
      await runtime.close(0);
      await app.close();
    },
  };
}

async function getCall(app: FastifyInstance, key: string, id: string) {
  const res = await app.inject({ method: 'GET', url: `/calls/${id}`, headers: { authorization: `Bearer ${key}` } });
  return { status: res.statusCode, call: res.statusCode === 200 ? res.json().call : null };
}

// ---------------------------------------------------------------------------------------------
// 1. call sessions in Redis

describe.skipIf(!REDIS_URL)('call sessions in Redis', () => {
  let a: CallingServer;
  let b: Awaited<ReturnType<typeof secondInstance>>;
  beforeAll(async () => {
    a = await startCallingServer({ REDIS_URL: REDIS_URL! });
    b = await secondInstance(a.store, { REDIS_URL: REDIS_URL! });
  }, 60_000);
  afterAll(async () => {
    await b?.close();
    await a?.close();
  });

  it('a second instance on the same Redis and database shows the live call, its node and transcript', async () => {
    const { number, workflowId } = await a.setUpNumber({ definition: frontDesk });
    const call = a.caller(number);
    const callId = await callIntoBooking(call);

    // the call's media is on A; B reads the session from Redis
    const seen = await eventually('B to see the call in the booking node', async () => {
      const got = await getCall(b.app, a.key, callId);
      return got.call?.current_node === 'booking' && got.call.transcript.includes('book an appointment') ? got.call : null;
    });
    expect(seen).toMatchObject({ id: callId, status: 'in-progress', workflow_id: workflowId, nodes_visited: ['greeting', 'booking'] });
    expect(seen.transcript).toContain('Assistant: Hello, this is Acme Dental.');
    expect(seen.transcript).toContain('Caller: I would like to book an appointment please.');
    const list = await b.app.inject({ method: 'GET', url: '/calls', headers: { authorization: `Bearer ${a.key}` } });
    expect(list.json().calls.map((c: { id: string }) => c.id)).toContain(callId);
    // B does not own the call: another organization's key sees nothing
    const other = await a.store.keys.createKey('Someone else');
    expect((await getCall(b.app, other.key, callId)).status).toBe(404);

    await call.hangUp();
    const ended = await eventually('B to see the call ended', async () => {
      const got = await getCall(b.app, a.key, callId);
      return got.call?.status === 'ended' ? got.call : null;
    });
    expect(ended.ended_reason).toBe('customer-ended-call');
  }, 60_000);
});

// ---------------------------------------------------------------------------------------------
// 2. a process killed mid-call

describe('finalizing calls whose process died', () => {
  const stores: { name: string; make(): { calls: CallStore; cleanUp(): Promise<void> } }[] = [
    { name: 'in process', make: () => ({ calls: new MemoryCallStore(), cleanUp: async () => undefined }) },
  ];
  if (REDIS_URL) {
    stores.push({
      name: 'Redis',
      make: () => {
        const prefix = `sb-test-${randomBytes(4).toString('hex')}:`;
        return {
          calls: new RedisCallStore(REDIS_URL, prefix),
          async cleanUp() {
            const r = new Redis(REDIS_URL);
            const keys = await r.keys(`${prefix}*`);
            if (keys.length > 0) await r.del(...keys);
            await r.quit();
          },
        };
      },
    });
  }

  const record = (patch: Partial<CallRecord>): CallRecord => {
    const started = new Date(Date.now() - 60_000).toISOString();
    return callRecord({
      phone_number: { number: '+15550001111', name: null },
      transport_ids: { call_sid: 'CA1', account_sid: ACCOUNT_SID },
      current_node: 'booking',
      nodes_visited: ['greeting', 'booking'],
      messages: [{ role: 'user', content: 'I would like to book.', time: started, seconds_from_start: 3, node_id: 'greeting' }],
      created_at: started,
      started_at: started,
      worker_id: 'w-dead',
      heartbeat_at: new Date(Date.now() - 30_000).toISOString(),
      ...patch,
    });
  };

  for (const kind of stores) {
    it(`${kind.name}: a call whose stream never connected is ended as customer-ended-call; a heartbeat never undoes an end`, async () => {
      const { calls, cleanUp } = kind.make();
      try {
        const longAgo = new Date(Date.now() - 10 * 60_000).toISOString();
        const unanswered = record({ status: 'ringing', worker_id: null, heartbeat_at: null, started_at: null, created_at: longAgo });
        const ending = record({ worker_id: 'w-me', heartbeat_at: new Date().toISOString() });
        for (const r of [unanswered, ending]) await calls.create(r);
        // the call ends and saves while its process beats: the end must stay
        await calls.save({ ...ending, status: 'ended', ended_reason: 'assistant-ended-call', ended_at: new Date().toISOString() });
        await calls.heartbeat('w-me', [ending.id]);
        expect((await calls.get(ending.id))!.status).toBe('ended');

        const seen = recordingNotifier();
        expect(await finalizerService(calls, seen.notifier).finalizeStale(20)).toBe(1);
        expect(seen.statuses).toEqual([{ callId: unanswered.id, status: 'ended', ended_reason: 'customer-ended-call' }]);
        expect(seen.reports[0]!.errors).toEqual([{ code: 'CALL_STREAM_LOST', message: 'the media stream never connected' }]);
      } finally {
        await cleanUp();
        await calls.close();
      }
    });

    it(`${kind.name}: ends only calls without a heartbeat, once, with worker-lost and their report`, async () => {
      const { calls, cleanUp } = kind.make();
      try {
        const lost = record({});
        const alive = record({ worker_id: 'w-alive', heartbeat_at: new Date(Date.now() - 1_000).toISOString() });
        const over = record({ status: 'ended', ended_reason: 'customer-ended-call', ended_at: new Date().toISOString() });
        const ringing = record({ status: 'ringing', worker_id: null, heartbeat_at: null, started_at: null });
        for (const r of [lost, alive, over, ringing]) await calls.create(r);

        const one = recordingNotifier();
        const two = recordingNotifier();
        const a = finalizerService(calls, one.notifier);
        const b = finalizerService(calls, two.notifier);
        // two processes look at the same moment: exactly one takes the call over
        const counts = await Promise.all([a.finalizeStale(20), b.finalizeStale(20)]);
        expect(counts[0]! + counts[1]!).toBe(1);
        const statuses = [...one.statuses, ...two.statuses];
        const reports = [...one.reports, ...two.reports];
        expect(statuses).toEqual([{ callId: lost.id, status: 'ended', ended_reason: 'worker-lost' }]);
        expect(reports).toHaveLength(1);
        expect(reports[0]).toMatchObject({ id: lost.id, status: 'ended', ended_reason: 'worker-lost', nodes_visited: ['greeting', 'booking'] });
        expect(reports[0]!.messages.map((m) => m.content)).toEqual(['I would like to book.']);
        expect(reports[0]!.errors.map((e: { message: string }) => e.message).join()).toContain('w-dead');

        const saved = await calls.get(lost.id);
        expect(saved).toMatchObject({ status: 'ended', ended_reason: 'worker-lost' });
        expect(saved!.ended_at).not.toBeNull();
        expect((await calls.get(alive.id))!.status).toBe('in-progress');
        expect((await calls.get(ringing.id))!.status).toBe('ringing');
        expect((await calls.get(over.id))!.ended_reason).toBe('customer-ended-call');
        // finalized once: nothing is left to take over, not even for a shorter threshold
        expect(await a.finalizeStale(20)).toBe(0);
        expect(await b.finalizeStale(20)).toBe(0);
        // the live one goes stale only past its own threshold
        expect(await a.finalizeStale(0.5)).toBe(1);
        expect(one.statuses.at(-1)).toEqual({ callId: alive.id, status: 'ended', ended_reason: 'worker-lost' });
      } finally {
        await cleanUp();
        await calls.close();
      }
    });
  }

  describe('a live call that keeps talking', () => {
    let s: CallingServer;
    beforeAll(async () => {
      s = await startCallingServer(envSessions);
    }, 60_000);
    afterAll(async () => {
      await s?.close();
    });

    it('is never taken over by another process while its own process beats, however long it runs', async () => {
      // the other process shares the sessions: the same Redis, or (in process) the same store
      const shared = envSessions.REDIS_URL ? new RedisCallStore(envSessions.REDIS_URL) : s.runtime.callStore;
      const other = recordingNotifier();
      const b = finalizerService(shared, other.notifier, s.store);
      try {
        const { number } = await s.setUpNumber({ definition: frontDesk });
        const call = s.caller(number);
        const startedAt = Date.now();
        const callId = callIdOf(await call.dial());
        await call.hear('Acme Dental');
        await call.quiet();
        // older than the threshold below, with at least one heartbeat (every 5 s) behind it
        await new Promise((r) => setTimeout(r, Math.max(0, 7_500 - (Date.now() - startedAt))));
        // the turn saves the whole session (transcript, node): that save must not turn back its heartbeat
        await call.say('I would like to book an appointment please.');
        await call.hear('book your appointment');
        const saved = await eventually('the session to be saved in the booking node', async () => {
          const r = await shared.get(callId);
          return r?.current_node === 'booking' ? r : null;
        });
        expect(Date.now() - Date.parse(saved.heartbeat_at!)).toBeLessThan(6_000);
        // 6 s: more than the 5 s between heartbeats, less than the call's age
        await b.finalizeStale(6);
        expect(other.statuses.filter((x) => x.callId === callId)).toEqual([]);
        expect((await shared.get(callId))!.status).toBe('in-progress');
        await call.hangUp();
      } finally {
        if (shared !== s.runtime.callStore) await shared.close();
      }
    }, 60_000);
  });

  describe.skipIf(!REDIS_URL || !postgresBase)('a real server process, SIGKILLed mid-call', () => {
    let dbName = '';
    let dbUrl = '';
    let db: Db;
    let store: Store;
    let b: Awaited<ReturnType<typeof secondInstance>>;
    let receiver: Receiver;
    let twilio: FakeTwilioRest;
    let child: ChildProcess | null = null;
    let caller: SimulatedCall | null = null;

    beforeAll(async () => {
      dbName = `sb_test_${randomBytes(6).toString('hex')}`;
      const admin = new pg.Client({ connectionString: postgresBase! });
      await admin.connect();
      await admin.query(`CREATE DATABASE ${dbName}`);
      await admin.end();
      const u = new URL(postgresBase!);
      u.pathname = `/${dbName}`;
      dbUrl = u.toString();
      db = await openDb({ databaseUrl: dbUrl });
      store = createStore(db);
      receiver = await startReceiver();
      twilio = await startFakeTwilioRest();
      // B uses the default webhook queue, like the process it survives
      const config = loadConfig({
        LOG_LEVEL: 'silent',
        WEBHOOK_ALLOW_PRIVATE: 'true',
        RATE_LIMIT_PER_MINUTE: '0',
        TWILIO_API_BASE: twilio.url,
        REDIS_URL: REDIS_URL!,
      });
      const runtime = await createRuntime({ config, store, logger: silent });
      const app = await buildApp({ config, store, logger: silent, runtime });
      await app.ready();
      b = {
        app,
        runtime,
        async close() {
          await runtime.close(0);
          await app.close();
        },
      };
    }, 60_000);

    afterAll(async () => {
      if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await caller?.close().catch(() => undefined);
      await b?.close();
      await receiver?.close();
      await twilio?.close();
      await db?.close();
      if (dbName) {
        const admin = new pg.Client({ connectionString: postgresBase! });
        await admin.connect();
        await admin.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
        await admin.end();
      }
    }, 30_000);

    it('B finalizes the call with worker-lost and sends its status-update ended and its report', async () => {
      const { key } = await store.keys.createKey('Killed mid-call');
      const api = async (method: 'POST' | 'PATCH', url: string, body: unknown) => {
        const res = await b.app.inject({ method, url, headers: { authorization: `Bearer ${key}` }, payload: body as Record<string, unknown> });
        if (res.statusCode >= 300) throw new Error(`${method} ${url}: ${res.statusCode} ${res.body}`);
        return res.json();
      };
      await api('PATCH', '/account', {
        webhook: { url: receiver.url, secret: 'whsec_dGVzdC1zZWNyZXQtdGVzdC1zZWNyZXQtdGVzdA==' },
        telephony: { twilio: { account_sid: ACCOUNT_SID, auth_token: AUTH_TOKEN } },
      });
      const assistant = await api('POST', '/assistants', sandboxAssistant());
      const workflow = await api('POST', '/workflows', { name: 'Front desk', definition: frontDesk });
      const number = '+15557770001';
      await api('POST', '/numbers', { number, assistant_id: assistant.assistant.id, workflow_id: workflow.workflow.id });

      // A: the real server, in its own process, on the same PostgreSQL and Redis
      const port = await freePort();
      const a = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
        cwd: ROOT,
        env: {
          PATH: process.env.PATH ?? '',
          HOME: process.env.HOME ?? '',
          PORT: String(port),
          HOST: '127.0.0.1',
          DATABASE_URL: dbUrl,
          REDIS_URL: REDIS_URL!,
          WEBHOOK_ALLOW_PRIVATE: 'true',
          TWILIO_API_BASE: twilio.url,
          RATE_LIMIT_PER_MINUTE: '0',
          LOG_LEVEL: 'warn',
          // SIP's default port, 5060, may be another test server's
          SIP_PORT: '0',
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      child = a;
      let output = '';
      a.stdout!.on('data', (d: Buffer) => (output += d.toString()));
      a.stderr!.on('data', (d: Buffer) => (output += d.toString()));
      await eventually(`server A to listen (output: ${output})`, () => output.includes('Switchboard is serving on') || a.exitCode !== null, 30_000);
      expect(a.exitCode, output).toBeNull();

      caller = new SimulatedCall({ baseUrl: `http://127.0.0.1:${port}`, to: number, authToken: AUTH_TOKEN, accountSid: ACCOUNT_SID });
      const callId = await callIntoBooking(caller);
      const live = await eventually('the session in the booking node', async () => {
        const r = await b.runtime.callStore.get(callId);
        return r?.current_node === 'booking' && r.messages.some((m) => m.content.includes('book an appointment')) ? r : null;
      });
      expect(live.status).toBe('in-progress');
      expect(live.worker_id).not.toBe(b.runtime.calls.workerId);

      // A dies without a word: no hang-up, no report, no more heartbeats
      a.kill('SIGKILL');
      await eventually('A to exit', () => a.signalCode === 'SIGKILL');
      await caller.ended(10_000);
      expect(caller.closeCode).toBe(1006);
      expect((await b.runtime.callStore.get(callId))!.status).toBe('in-progress');

      // B's periodic check, with a 1 s threshold: the call goes stale within one heartbeat period
      await eventually(
        'B to finalize the call',
        async () => {
          await b.runtime.calls.finalizeStale(1);
          const r = await b.runtime.callStore.get(callId);
          return r?.status === 'ended' ? r : null;
        },
        15_000,
      );
      const ended = await getCall(b.app, key, callId);
      expect(ended.call).toMatchObject({ status: 'ended', ended_reason: 'worker-lost', current_node: 'booking' });
      expect(ended.call.errors.map((e: { message: string }) => e.message).join()).toMatch(/the process running the call stopped \(w-/);

      const report = await eventually('the end-of-call-report', () =>
        receivedMessages(receiver, 'end-of-call-report').find((m) => m.call.id === callId),
      );
      expect(report).toMatchObject({
        ended_reason: 'worker-lost',
        assistant_id: assistant.assistant.id,
        workflow_id: workflow.workflow.id,
        nodes_visited: ['greeting', 'booking'],
      });
      expect(report.transcript).toContain('book an appointment');
      const statuses = await eventually('status-update ended', () => {
        const mine = receivedMessages(receiver, 'status-update').filter((m) => m.call.id === callId);
        return mine.some((m) => m.status === 'ended') ? mine : null;
      });
      expect(statuses.map((m: { status: string }) => m.status)).toEqual(['ringing', 'in-progress', 'ended']);
      expect(statuses.at(-1).ended_reason).toBe('worker-lost');

      // once only
      expect(await b.runtime.calls.finalizeStale(1)).toBe(0);
      await new Promise((r) => setTimeout(r, 300));
      expect(receivedMessages(receiver, 'end-of-call-report').filter((m) => m.call.id === callId)).toHaveLength(1);
    }, 90_000);
  });
});

// ---------------------------------------------------------------------------------------------
// 3. graceful shutdown

describe('graceful shutdown', () => {
  let s: CallingServer | null = null;
  afterEach(async () => {
    await s?.close();
    s = null;
  });

  it('refuses new calls as busy and lets a live call finish within the grace period', async () => {
    s = await startCallingServer(envSessions);
    const { number } = await s.setUpNumber({ definition: frontDesk });
    const call = s.caller(number);
    const callId = callIdOf(await call.dial());
    await call.hear('Acme Dental');
    await call.quiet();

    const began = Date.now();
    let closedAt = 0;
    const closing = s.runtime.close(20_000).then(() => (closedAt = Date.now()));
    const late = s.caller(number);
    const refused = await late.dial();
    expect(refused.kind).toBe('rejected');
    expect(late.twiml).toContain('<Reject reason="busy"/>');

    // the live call goes on and ends on its own
    await call.say('That is all, I am finished, goodbye.');
    await call.hear('goodbye');
    await call.ended();
    await closing;
    expect(closedAt - began).toBeLessThan(15_000);
    expect(s.runtime.calls.liveCount()).toBe(0);

    const report = await eventually('the end-of-call-report', () =>
      receivedMessages(s!.receiver, 'end-of-call-report').find((m) => m.call.id === callId),
    );
    expect(report.ended_reason).toBe('assistant-ended-call');
    expect(report.errors).toBeUndefined();
    expect(report.transcript).toContain('I am finished');
  }, 60_000);

  it('after the grace period ends the live call cleanly: hang-up, socket closed, report sent', async () => {
    s = await startCallingServer(envSessions);
    const { number } = await s.setUpNumber({ definition: frontDesk });
    const call = s.caller(number);
    const callId = callIdOf(await call.dial());
    await call.hear('Acme Dental');
    await call.quiet();

    const began = Date.now();
    await s.runtime.close(1_500);
    const took = Date.now() - began;
    expect(took).toBeGreaterThanOrEqual(1_400);
    expect(took).toBeLessThan(10_000);
    expect(s.runtime.calls.liveCount()).toBe(0);

    // the caller's side: the media socket was closed by the server, normally
    await call.ended(5_000);
    expect(call.closeCode).toBe(1000);
    // and the phone leg was hung up through the telephony API
    expect(s.twilio.requests.some((r) => r.path.includes(call.callSid) && r.form.get('Status') === 'completed')).toBe(true);

    const statuses = await eventually('status-update ended', () => {
      const mine = receivedMessages(s!.receiver, 'status-update').filter((m) => m.call.id === callId);
      return mine.some((m) => m.status === 'ended') ? mine : null;
    });
    expect(statuses.map((m: { status: string }) => m.status)).toEqual(['ringing', 'in-progress', 'ended']);
    const report = await eventually('the end-of-call-report', () =>
      receivedMessages(s!.receiver, 'end-of-call-report').find((m) => m.call.id === callId),
    );
    expect(report.ended_reason).toBe(statuses.at(-1).ended_reason);
    expect(report.ended_reason).toBe('assistant-ended-call');
    expect(report.errors).toEqual([{ code: 'CALL_SHUTDOWN', message: 'the server shut down: the call was still live after the 1.5 s shutdown grace period' }]);
    expect(report.transcript).toContain('Acme Dental');
  }, 60_000);
});
