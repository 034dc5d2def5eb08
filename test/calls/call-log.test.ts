/**
 * GET /calls and GET /calls/{id} from the call log: whole sandbox calls made on one server, then
 * the server restarted on the same database with fresh in-process call sessions, so that only
 * the log can answer; and the listing's pages, filters and errors. On PGlite (on disk, reopened)
 * and PostgreSQL (when DATABASE_URL is set).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashDefinition } from '../../engine/compile.js';
import type { WorkflowDefinition } from '../../engine/schema.js';
import { buildApp } from '../../src/app.js';
import { MemoryCallStore, type CallRecord } from '../../src/calls/store.js';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/logger.js';
import { freePort } from '../../src/net.js';
import { createRuntime, type Runtime } from '../../src/runtime.js';
import { SimulatedCall } from '../../src/sim/caller.js';
import { twilioSignature } from '../../src/telephony/twilio/signature.js';
import { request as undiciRequest } from 'undici';
import { openDb, type Db } from '../../src/store/db.js';
import { createStore, type Store } from '../../src/store/index.js';
import {
  ACCOUNT_SID,
  AUTH_TOKEN,
  callIdOf,
  eventually,
  frontDesk,
  receivedMessages,
  sandboxAssistant,
  startFakeTwilioRest,
  type FakeTwilioRest,
  intoBooking,
} from '../helpers/calls.js';
import { availableDbKinds, createTestDb, type DbKind, type TestDb } from '../helpers/db.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';

const logger = createLogger(process.env.TEST_LOG_LEVEL ?? 'silent');

/** Where the database lives across the restart, and how to open it again. */
interface DatabaseHome {
  open(): Promise<Db>;
  remove(): Promise<void>;
}

async function databaseHome(kind: DbKind): Promise<DatabaseHome> {
  if (kind === 'pglite') {
    const dir = mkdtempSync(path.join(tmpdir(), 'sb-call-log-'));
    return {
      open: () => openDb({ dataDir: dir }),
      remove: async () => rmSync(dir, { recursive: true, force: true }),
    };
  }
  const testDb: TestDb = await createTestDb('postgres');
  return {
    open: () => openDb({ databaseUrl: testDb.url! }),
    remove: () => testDb.drop(),
  };
}

/** One server process: the app, its runtime, in-process call sessions, on the given database. */
interface Server {
  db: Db;
  store: Store;
  runtime: Runtime;
  app: FastifyInstance;
  baseUrl: string;
  api(url: string, key: string): Promise<{ status: number; json: any }>;
  stop(): Promise<void>;
}

async function startServer(db: Db, twilio: FakeTwilioRest): Promise<Server> {
  const port = await freePort();
  const config = loadConfig({
    LOG_LEVEL: 'silent',
    WEBHOOK_ALLOW_PRIVATE: 'true',
    PORT: String(port),
    TWILIO_API_BASE: twilio.url,
    RATE_LIMIT_PER_MINUTE: '0',
  });
  const store = createStore(db);
  // in-process sessions even when REDIS_URL is set: after the restart only the log knows the calls
  const runtime = await createRuntime({
    config,
    store,
    logger,
    callStore: new MemoryCallStore(),
    webhookQueueName: `call-log-${port}-${Date.now()}`,
  });
  const app = await buildApp({ config, store, logger, runtime });
  await app.listen({ port, host: '127.0.0.1' });
  return {
    db,
    store,
    runtime,
    app,
    baseUrl: `http://127.0.0.1:${port}`,
    async api(url, key) {
      const res = await app.inject({ method: 'GET', url, headers: { authorization: `Bearer ${key}` } });
      return { status: res.statusCode, json: res.json() };
    },
    async stop() {
      await runtime.close(0);
      await app.close();
      await db.close();
    },
  };
}

async function request(app: FastifyInstance, key: string, method: 'GET' | 'POST' | 'PATCH', url: string, body?: unknown) {
  const res = await app.inject({
    method,
    url,
    headers: { authorization: `Bearer ${key}` },
    ...(body === undefined ? {} : { payload: body as Record<string, unknown> }),
  });
  return { status: res.statusCode, json: res.json() };
}

describe.each(availableDbKinds())('the call log across a restart on %s', (kind) => {
  let home: DatabaseHome;
  let twilio: FakeTwilioRest;
  let receiver: Receiver;
  let server: Server | null = null;
  let key: string;
  let otherKey: string;
  const callers: SimulatedCall[] = [];
  /** The calls as the first server showed them, once over, and their sessions there. */
  const before: Record<string, any> = {};
  const sessions: Record<string, CallRecord> = {};
  let ids: { workflow: string; plain: string; gdpr: string };
  let setup: { workflowId: string; definitionHash: string; assistantId: string; numberId: string; plainNumberId: string };

  const caller = (to: string) => {
    const c = new SimulatedCall({ baseUrl: server!.baseUrl, to, authToken: AUTH_TOKEN, accountSid: ACCOUNT_SID });
    callers.push(c);
    return c;
  };

  beforeAll(async () => {
    home = await databaseHome(kind);
    twilio = await startFakeTwilioRest();
    receiver = await startReceiver();
    server = await startServer(await home.open(), twilio);
    const made = await server.store.keys.createKey('Call Log Customer');
    key = made.key;
    otherKey = (await server.store.keys.createKey('Somebody Else')).key;
    const app = server.app;
    const ok = <T>(res: { status: number; json: T }, status: number) => {
      if (res.status !== status) throw new Error(`set-up failed: ${JSON.stringify(res.json)}`);
      return res.json as any;
    };
    ok(
      await request(app, key, 'PATCH', '/account', {
        webhook: { url: receiver.url, secret: 'whsec_dGVzdC1zZWNyZXQtdGVzdC1zZWNyZXQtdGVzdA==' },
        telephony: { twilio: { account_sid: ACCOUNT_SID, auth_token: AUTH_TOKEN } },
      }),
      200,
    );
    const assistant = ok(await request(app, key, 'POST', '/assistants', sandboxAssistant()), 201).assistant;
    const gdprAssistant = ok(await request(app, key, 'POST', '/assistants', sandboxAssistant({ gdpr_mode: true })), 201).assistant;
    const workflow = ok(await request(app, key, 'POST', '/workflows', { name: 'Front desk', definition: frontDesk }), 201).workflow;
    const seq = String(process.pid % 1000).padStart(3, '0');
    const numbers = {
      workflow: `+1666${seq}${kind === 'pglite' ? 1 : 2}001`,
      plain: `+1666${seq}${kind === 'pglite' ? 1 : 2}002`,
      gdpr: `+1666${seq}${kind === 'pglite' ? 1 : 2}003`,
    };
    const withWorkflow = ok(
      await request(app, key, 'POST', '/numbers', { number: numbers.workflow, assistant_id: assistant.id, workflow_id: workflow.id }),
      201,
    ).number;
    const plain = ok(await request(app, key, 'POST', '/numbers', { number: numbers.plain, assistant_id: assistant.id }), 201).number;
    ok(await request(app, key, 'POST', '/numbers', { number: numbers.gdpr, assistant_id: gdprAssistant.id, workflow_id: workflow.id }), 201);
    setup = {
      workflowId: workflow.id,
      definitionHash: hashDefinition(workflow.definition as WorkflowDefinition),
      assistantId: assistant.id,
      numberId: withWorkflow.id,
      plainNumberId: plain.id,
    };

    // 1. through the workflow to its end node
    const first = caller(numbers.workflow);
    const workflowCall = callIdOf(await first.dial());
    await first.hear('Acme Dental');
    await first.quiet();
    await first.say('I would like to book an appointment please.');
    await first.hear('book your appointment');
    await first.quiet();
    await first.say('That is all, I am finished, goodbye.');
    await first.hear('goodbye');
    await first.ended();
    // 2. no workflow: the caller hangs up
    const second = caller(numbers.plain);
    const plainCall = callIdOf(await second.dial());
    await second.hear(/.+/);
    await second.quiet();
    await second.hangUp();
    // 3. gdpr_mode: the caller hangs up in the greeting
    const third = caller(numbers.gdpr);
    const gdprCall = callIdOf(await third.dial());
    await third.hear('Acme Dental');
    await third.quiet();
    await third.say('I would like to book an appointment please.');
    await third.hear('book your appointment');
    await third.hangUp();
    ids = { workflow: workflowCall, plain: plainCall, gdpr: gdprCall };

    // every call over: its last save made (a call leaves the live set after it), its log written
    await eventually('the calls to end', () => server!.runtime.calls.liveCount() === 0, 30_000);
    await eventually('the reports', () => receivedMessages(receiver, 'end-of-call-report').length >= 3, 15_000);
    await server.runtime.callStore.settled();
    for (const id of Object.values(ids)) {
      before[id] = (await server.api(`/calls/${id}`, key)).json.call;
      sessions[id] = (await server.runtime.callStore.get(id))!;
    }

    // the restart: a new process on the same database, with call sessions that know nothing
    await server.stop();
    server = await startServer(await home.open(), twilio);
  }, 120_000);

  afterAll(async () => {
    for (const c of callers) await c.close().catch(() => undefined);
    await server?.stop();
    await receiver?.close();
    await twilio?.close();
    await home?.remove();
  });

  it('the new process has no session of the calls: only the log answers', async () => {
    for (const id of Object.values(ids)) expect(await server!.runtime.callStore.get(id)).toBeNull();
  });

  it('GET /calls/{id} gives each call whole, as it was before the restart', async () => {
    for (const id of Object.values(ids)) {
      const got = await server!.api(`/calls/${id}`, key);
      expect(got.status).toBe(200);
      expect(got.json.call).toEqual(before[id]);
      // everything the session had that the API shows
      const s = sessions[id]!;
      expect(got.json.call).toMatchObject({
        id: s.id,
        type: s.type,
        status: s.status,
        phone_number: s.phone_number,
        customer: s.customer,
        assistant_id: s.assistant_id,
        workflow_id: s.workflow_id,
        workflow_note: s.workflow_note,
        current_node: s.current_node,
        nodes_visited: s.nodes_visited,
        messages: s.messages,
        created_at: s.created_at,
        started_at: s.started_at,
        ended_at: s.ended_at,
        ended_reason: s.ended_reason,
        errors: s.errors,
      });
    }
    const workflowCall = (await server!.api(`/calls/${ids.workflow}`, key)).json.call;
    expect(workflowCall).toMatchObject({
      id: ids.workflow,
      type: 'inbound_phone_call',
      status: 'ended',
      transport: 'twilio',
      ended_reason: 'assistant-ended-call',
      assistant_id: setup.assistantId,
      workflow_id: setup.workflowId,
      definition_hash: setup.definitionHash,
      current_node: 'bye',
      nodes_visited: ['greeting', 'booking', 'bye'],
      customer: { number: '+15005550006' },
      errors: [],
    });
    expect(workflowCall.started_at).not.toBeNull();
    expect(workflowCall.ended_at).not.toBeNull();
    expect(workflowCall.transcript).toContain('Assistant: Hello, this is Acme Dental.');
    expect(workflowCall.transcript).toContain('Caller: I would like to book an appointment please.');
    expect(workflowCall.transcript).toContain('Assistant: Thank you for calling, goodbye.');
    expect(workflowCall.messages.some((m: { node_id: string }) => m.node_id === 'booking')).toBe(true);
    // the report said it the same way
    const report = receivedMessages(receiver, 'end-of-call-report').find((m) => m.call.id === ids.workflow);
    expect(report.transcript).toBe(workflowCall.transcript);

    const plainCall = (await server!.api(`/calls/${ids.plain}`, key)).json.call;
    expect(plainCall).toMatchObject({ status: 'ended', ended_reason: 'customer-ended-call', workflow_id: null, definition_hash: null });
    expect(plainCall.messages.length).toBeGreaterThan(0);

    const gdprCall = (await server!.api(`/calls/${ids.gdpr}`, key)).json.call;
    expect(gdprCall).toMatchObject({
      status: 'ended',
      ended_reason: 'customer-ended-call',
      messages: [],
      transcript: '',
      nodes_visited: ['greeting', 'booking'],
      definition_hash: setup.definitionHash,
    });
    const { rows } = await server!.db.query<{ messages: unknown }>('SELECT messages FROM calls WHERE id = $1', [ids.gdpr]);
    expect(rows[0]!.messages).toEqual([]);
  });

  it('a replay of a logged call\'s voice webhook makes no call after the restart', async () => {
    const number = before[ids.workflow].phone_number.number;
    const params = { AccountSid: ACCOUNT_SID, CallSid: callers[0]!.callSid, CallStatus: 'ringing', Direction: 'inbound', From: '+15005550006', To: number };
    const url = `${server!.baseUrl}/telephony/twilio/voice`;
    const res = await undiciRequest(url, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-twilio-signature': twilioSignature(AUTH_TOKEN, url, params) },
      body: new URLSearchParams(params).toString(),
    });
    const twiml = await res.body.text();
    expect(twiml).toContain('<Reject');
    expect(twiml).not.toContain('<Stream');
    expect((await server!.api('/calls', key)).json.calls).toHaveLength(3);
  });

  it('GET /calls lists them newest first, whole, and only to their organization', async () => {
    const list = await server!.api('/calls', key);
    expect(list.status).toBe(200);
    expect(list.json.next_cursor).toBeNull();
    expect(list.json.calls.map((c: { id: string }) => c.id)).toEqual([ids.gdpr, ids.plain, ids.workflow]);
    for (const c of list.json.calls) expect(c).toEqual(before[c.id]);
    expect((await server!.api('/calls', otherKey)).json).toEqual({ calls: [], next_cursor: null });
    expect((await server!.api(`/calls/${ids.workflow}`, otherKey)).status).toBe(404);
    expect((await server!.api(`/calls/${randomUUID()}`, key)).status).toBe(404);
  });

  it('pages with next_cursor and filters by status, assistant, number and time', async () => {
    const first = await server!.api('/calls?limit=2', key);
    expect(first.json.calls.map((c: { id: string }) => c.id)).toEqual([ids.gdpr, ids.plain]);
    expect(first.json.next_cursor).toEqual(expect.any(String));
    const second = await server!.api(`/calls?limit=2&cursor=${first.json.next_cursor}`, key);
    expect(second.json.calls.map((c: { id: string }) => c.id)).toEqual([ids.workflow]);
    expect(second.json.next_cursor).toBeNull();

    const idsOf = async (query: string) => (await server!.api(`/calls?${query}`, key)).json.calls.map((c: { id: string }) => c.id);
    expect(await idsOf('status=ended')).toEqual([ids.gdpr, ids.plain, ids.workflow]);
    expect(await idsOf('status=in-progress')).toEqual([]);
    expect(await idsOf('type=inbound_phone_call&limit=100')).toHaveLength(3);
    expect(await idsOf('type=outbound_phone_call')).toEqual([]);
    expect(await idsOf(`assistant_id=${setup.assistantId}`)).toEqual([ids.plain, ids.workflow]);
    expect(await idsOf(`number_id=${setup.numberId}`)).toEqual([ids.workflow]);
    expect(await idsOf(`number_id=${setup.plainNumberId}&assistant_id=${setup.assistantId}`)).toEqual([ids.plain]);
    const plainCreated = before[ids.plain].created_at as string;
    expect(await idsOf(`since=${encodeURIComponent(plainCreated)}`)).toEqual([ids.gdpr, ids.plain]);
    expect(await idsOf(`until=${encodeURIComponent(plainCreated)}`)).toEqual([ids.workflow]);
  });

  it('answers 400 Invalid request, path first, for a bad limit, filter, time or cursor', async () => {
    const cases: [string, RegExp][] = [
      ['limit=0', /^query\.limit: /],
      ['limit=101', /^query\.limit: /],
      ['limit=ten', /^query\.limit: /],
      ['status=done', /^query\.status: /],
      ['type=fax', /^query\.type: /],
      ['assistant_id=nope', /^query\.assistant_id: /],
      ['number_id=123', /^query\.number_id: /],
      ['since=yesterday', /^query\.since: must be an ISO 8601 timestamp/],
      ['until=2025-06-01', /^query\.until: must be an ISO 8601 timestamp/],
      ['since=2025-06-02T00:00:00Z&until=2025-06-01T00:00:00Z', /^query\.until: must be later than since/],
      ['cursor=not-a-cursor', /^query\.cursor: not a cursor from a previous page/],
      [`cursor=${Buffer.from(JSON.stringify(['2025-06-01T00:00:00Z', 'x'])).toString('base64url')}`, /^query\.cursor: /],
      ['colour=blue', /colour/],
    ];
    for (const [query, detail] of cases) {
      const res = await server!.api(`/calls?${query}`, key);
      expect(res.status, query).toBe(400);
      expect(res.json.error, query).toBe('Invalid request');
      expect(res.json.details, query).toEqual(expect.arrayContaining([expect.stringMatching(detail)]));
    }
  });

  it('a live call is listed with its session\'s current state, and the log has it from its first status', async () => {
    const { rows } = await server!.db.query<{ number: string }>('SELECT number FROM numbers WHERE id = $1', [setup.numberId]);
    const call = caller(rows[0]!.number);
    const callId = callIdOf(await call.dial());
    try {
      await intoBooking(call);
      const listed = await eventually('the live call in GET /calls with its transcript so far', async () => {
        const c = (await server!.api('/calls', key)).json.calls[0];
        return c?.id === callId && c.transcript.includes('Caller: I would like to book') ? c : null;
      });
      expect(listed).toMatchObject({ status: 'in-progress', current_node: 'booking', definition_hash: setup.definitionHash, transport: 'twilio' });
      // the log itself is written when the status changes, not at every turn
      const { rows: inLog } = await server!.db.query<{ status: string; current_node: string | null }>(
        'SELECT status, current_node FROM calls WHERE id = $1',
        [callId],
      );
      expect(inLog[0]).toMatchObject({ status: 'in-progress' });
    } finally {
      await call.hangUp();
    }
    const ended = await eventually('the call ended in the log', async () => {
      const { rows: inLog } = await server!.db.query<{ status: string; ended_reason: string }>(
        'SELECT status, ended_reason FROM calls WHERE id = $1',
        [callId],
      );
      return inLog[0]?.status === 'ended' ? inLog[0] : null;
    });
    expect(ended.ended_reason).toBe('customer-ended-call');
  }, 60_000);
});
