/**
 * The call log (migration 004, `CallLogRepository`) and the session store that writes it
 * (`LoggedCallStore`), on PGlite and (when DATABASE_URL is set) PostgreSQL.
 */
import { randomUUID } from 'node:crypto';
import { pino } from 'pino';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { hashDefinition } from '../../engine/compile.js';
import type { WorkflowDefinition } from '../../engine/schema.js';
import { callLogEntry, CallLogPruner, LoggedCallStore } from '../../src/calls/call-log.js';
import { MemoryCallStore, type CallRecord } from '../../src/calls/store.js';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/logger.js';
import {
  CallLogRepository,
  decodeCursor,
  encodeCursor,
  InvalidCursorError,
  type CallLogEntry,
  type CallLogQuery,
} from '../../src/store/calls.js';
import { createStore } from '../../src/store/index.js';
import { createRuntime } from '../../src/runtime.js';
import { callRecord } from '../helpers/call-record.js';
import { availableDbKinds, createTestDb, type TestDb } from '../helpers/db.js';

const silent = createLogger('silent');
const DAY = 24 * 60 * 60_000;

const definition = {
  version: 1,
  entry_node: 'greeting',
  nodes: [
    { id: 'greeting', type: 'conversation', first_line: 'Hello.', instructions: 'Help.' },
    { id: 'bye', type: 'end', first_line: 'Goodbye.' },
  ],
  edges: [{ from: 'greeting', to: 'bye', description: 'done' }],
} as unknown as WorkflowDefinition;

const message = (role: 'assistant' | 'user', content: string, seconds = 0) => ({
  role,
  content,
  time: new Date(Date.parse('2025-06-01T12:00:00Z') + seconds * 1000).toISOString(),
  seconds_from_start: seconds,
  node_id: 'greeting',
});

/** A log entry of `orgId`, created at `createdAt`. */
function entry(orgId: string, createdAt: string, patch: Partial<CallLogEntry> = {}): CallLogEntry {
  return {
    ...callLogEntry(callRecord({ organization_id: orgId, created_at: createdAt, started_at: createdAt })),
    ...patch,
  };
}

const ids = (calls: { id: string }[]) => calls.map((c) => c.id);

/** Every page of a listing, following next_cursor. */
async function allPages(repo: CallLogRepository, orgId: string, q: CallLogQuery) {
  const pages: string[][] = [];
  let cursor: string | null = null;
  do {
    const page = await repo.list(orgId, { ...q, cursor });
    pages.push(ids(page.calls));
    cursor = page.next_cursor;
    if (pages.length > 100) throw new Error('the pages never end');
  } while (cursor);
  return pages;
}

/** The database's own order of the organization's calls, newest first, optionally filtered. */
async function expectedOrder(testDb: TestDb, orgId: string, where = 'true', params: unknown[] = []) {
  const { rows } = await testDb.db.query<{ id: string }>(
    `SELECT id FROM calls WHERE organization_id = $1 AND ${where} ORDER BY created_at DESC, id DESC`,
    [orgId, ...params],
  );
  return rows.map((r) => r.id);
}

describe.each(availableDbKinds())('the call log on %s', (kind) => {
  let testDb: TestDb;
  let repo: CallLogRepository;
  let orgId: string;
  let otherOrgId: string;

  beforeAll(async () => {
    testDb = await createTestDb(kind);
    const store = createStore(testDb.db);
    repo = store.calls;
    orgId = (await store.keys.createKey('Call Log Org')).organization.id;
    otherOrgId = (await store.keys.createKey('Other Call Log Org')).organization.id;
  });
  afterAll(async () => {
    await testDb.drop();
  });
  beforeEach(async () => {
    await testDb.db.query('DELETE FROM calls');
  });

  describe('migration 004', () => {
    it('makes the calls table with its listing, filter and retention indexes; the listing uses its index', async () => {
      const { rows } = await testDb.db.query<{ indexname: string; indexdef: string }>(
        `SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'calls' ORDER BY indexname`,
      );
      const byName = Object.fromEntries(rows.map((r) => [r.indexname, r.indexdef]));
      expect(byName.calls_org_created).toMatch(/\(organization_id, created_at DESC, id DESC\)/);
      expect(byName.calls_org_status_created).toMatch(/\(organization_id, status, created_at DESC, id DESC\)/);
      expect(byName.calls_org_assistant_created).toMatch(/\(organization_id, assistant_id, created_at DESC, id DESC\)/);
      expect(byName.calls_org_number_created).toMatch(/\(organization_id, number_id, created_at DESC, id DESC\)/);
      expect(byName.calls_created).toMatch(/\(created_at\)/);

      // one call in fifty is this organization's, the rest another's, over the same hours
      await testDb.db.query(
        `INSERT INTO calls (id, organization_id, type, transport, status, created_at)
         SELECT gen_random_uuid(), CASE WHEN g % 50 = 0 THEN $1 ELSE $2 END::uuid, 'inbound_phone_call', 'twilio', 'ended',
                $3::timestamptz + g * interval '1 second'
           FROM generate_series(1, 10000) g`,
        [orgId, otherOrgId, '2025-01-01T00:00:00Z'],
      );
      await testDb.db.query('ANALYZE calls');
      const plan = await testDb.db.query<{ 'QUERY PLAN': string }>(
        `EXPLAIN SELECT id FROM calls WHERE organization_id = $1 AND (created_at, id) < ($2::timestamptz, $3::uuid)
          ORDER BY created_at DESC, id DESC LIMIT 51`,
        [orgId, '2025-01-01T02:00:00Z', randomUUID()],
      );
      const text = plan.rows.map((r) => r['QUERY PLAN']).join('\n');
      expect(text).toContain('calls_org_created');
      expect(text).not.toMatch(/\bSort\b/);
    });

    it('belongs to an organization: deleting the organization deletes its calls', async () => {
      const store = createStore(testDb.db);
      const doomed = (await store.keys.createKey('Doomed Org')).organization.id;
      await repo.upsert(entry(doomed, '2025-06-01T00:00:00.000Z'));
      await testDb.db.query('DELETE FROM organizations WHERE id = $1', [doomed]);
      expect(await expectedOrder(testDb, doomed)).toEqual([]);
    });
  });

  describe('upsert and get', () => {
    it('writes the whole call and reads it back', async () => {
      const record = callRecord({
        organization_id: orgId,
        assistant_id: randomUUID(),
        workflow_id: randomUUID(),
        definition: definition as unknown as Record<string, unknown>,
        status: 'ended',
        ended_reason: 'assistant-ended-call',
        ended_at: new Date().toISOString(),
        current_node: 'bye',
        nodes_visited: ['greeting', 'bye'],
        messages: [message('assistant', 'Hello.'), message('user', 'Bye then.', 2.5)],
        errors: [{ code: 'UNKNOWN', message: 'something to say' }],
        workflow_note: null,
        variables: { customer_name: 'Dana', visits: 3, vip: true },
      });
      const e = callLogEntry(record);
      await repo.upsert(e);
      const got = await repo.get(orgId, record.id);
      expect(got).toMatchObject({
        id: record.id,
        organization_id: orgId,
        type: 'inbound_phone_call',
        transport: 'twilio',
        transport_ids: { call_sid: record.transport_ids.call_sid!, account_sid: record.transport_ids.account_sid! },
        number_id: record.number_id,
        phone_number: record.phone_number,
        customer: record.customer,
        assistant_id: record.assistant_id,
        workflow_id: record.workflow_id,
        definition_hash: hashDefinition(definition),
        status: 'ended',
        ended_reason: 'assistant-ended-call',
        created_at: record.created_at,
        started_at: record.started_at,
        ended_at: record.ended_at,
        messages: record.messages,
        nodes_visited: ['greeting', 'bye'],
        current_node: 'bye',
        errors: [{ code: 'UNKNOWN', message: 'something to say' }],
        structured_data: null,
        recording_ref: null,
        variables: { customer_name: 'Dana', visits: 3, vip: true },
        transfer: null,
      });
      // gdpr_mode keeps neither the conversation nor the values given for it
      const gdpr = callLogEntry({ ...record, assistant: { gdpr_mode: true } });
      expect(gdpr).toMatchObject({ messages: [], variables: {} });
      expect(got!.definition_hash).toMatch(/^[0-9a-f]{64}$/);
      // another organization's call does not exist for it
      expect(await repo.get(otherOrgId, record.id)).toBeNull();
      expect(await repo.get(orgId, randomUUID())).toBeNull();
    });

    it('a row written before errors had codes (plain strings) reads them as UNKNOWN entries', async () => {
      const record = callRecord({ organization_id: orgId, status: 'ended', ended_reason: 'pipeline-error-elevenlabs', ended_at: new Date().toISOString() });
      // as an earlier version wrote the row: errors a JSON array of sentences
      await repo.upsert({ ...callLogEntry(record), errors: ['elevenlabs: quota exceeded'] as never });
      const old = [{ code: 'UNKNOWN', message: 'elevenlabs: quota exceeded' }];
      expect((await repo.get(orgId, record.id))?.errors).toEqual(old);
      expect((await repo.list(orgId, { limit: 100 })).calls.find((c) => c.id === record.id)?.errors).toEqual(old);
    });

    it('keeps a call\'s transfer (migration 010), and a later write without one keeps it', async () => {
      const transfer = { mode: 'warm' as const, destination: '+14155550123', result: 'completed' as const, summary: 'Ada wants a new time.', operator_answered_at: '2025-06-01T00:00:05.000Z', joined_at: '2025-06-01T00:00:09.000Z' };
      const e = entry(orgId, '2025-06-01T00:00:00.000Z', { status: 'forwarding', transfer });
      await repo.upsert(e);
      expect((await repo.get(orgId, e.id))?.transfer).toEqual(transfer);
      await repo.upsert({ ...e, status: 'ended', transfer: null });
      expect((await repo.get(orgId, e.id))?.transfer).toEqual(transfer);
      expect((await repo.list(orgId, { limit: 10 })).calls[0]?.transfer).toEqual(transfer);
    });

    it('the last write wins; structured data, once logged, is kept by writes without it', async () => {
      const e = entry(orgId, '2025-06-01T00:00:00.000Z', { status: 'ringing' });
      await repo.upsert(e);
      await repo.upsert({ ...e, status: 'in-progress', structured_data: { booked: true } });
      await repo.upsert({ ...e, status: 'ended', ended_reason: 'customer-ended-call', messages: [message('user', 'Hi')] });
      const got = await repo.get(orgId, e.id);
      expect(got).toMatchObject({ status: 'ended', ended_reason: 'customer-ended-call', structured_data: { booked: true } });
      expect(got!.messages).toHaveLength(1);
      await repo.upsert({ ...e, status: 'ended', messages: [] });
      expect((await repo.get(orgId, e.id))!.messages).toEqual([]);
    });

    it('never overwrites another organization\'s call of the same id', async () => {
      const e = entry(orgId, '2025-06-01T00:00:00.000Z', { status: 'ended' });
      await repo.upsert(e);
      await repo.upsert({ ...e, organization_id: otherOrgId, status: 'ringing' });
      expect((await repo.get(orgId, e.id))!.status).toBe('ended');
      expect(await repo.get(otherOrgId, e.id)).toBeNull();
    });
  });

  describe('list', () => {
    it('pages through every call newest first, with no duplicates or gaps, ties on created_at included', async () => {
      // 23 calls over 9 instants (several share one), some to the microsecond, and another org's
      const instants = Array.from({ length: 9 }, (_, i) => `2025-06-01T10:00:0${i}.${i % 2 === 0 ? '000' : '123456'}Z`);
      for (let i = 0; i < 23; i++) await repo.upsert(entry(orgId, instants[i % instants.length]!));
      for (let i = 0; i < 4; i++) await repo.upsert(entry(otherOrgId, instants[i]!));
      const expected = await expectedOrder(testDb, orgId);
      expect(expected).toHaveLength(23);

      for (const limit of [1, 5, 7, 23, 50]) {
        const pages = await allPages(repo, orgId, { limit });
        expect(pages.flat(), `limit ${limit}`).toEqual(expected);
        expect(pages.slice(0, -1).every((p) => p.length === limit)).toBe(true);
        expect(pages.length).toBe(Math.max(1, Math.ceil(23 / limit)));
      }
      const whole = await repo.list(orgId, { limit: 23 });
      expect(whole.next_cursor).toBeNull();
      const times = whole.calls.map((c) => Date.parse(c.created_at));
      expect([...times].sort((a, b) => b - a)).toEqual(times);
    });

    it('a call written between two pages appears on no page after it, nor twice', async () => {
      for (let i = 0; i < 6; i++) await repo.upsert(entry(orgId, `2025-06-01T10:00:0${i}.000Z`));
      const first = await repo.list(orgId, { limit: 3 });
      // a new call (newest) and an update of a listed call while the client reads
      await repo.upsert(entry(orgId, '2025-06-01T11:00:00.000Z'));
      await repo.upsert({ ...(await repo.get(orgId, first.calls[0]!.id))!, status: 'ended' });
      const second = await repo.list(orgId, { limit: 3, cursor: first.next_cursor });
      const seen = [...ids(first.calls), ...ids(second.calls)];
      expect(new Set(seen).size).toBe(6);
      expect(second.next_cursor).toBeNull();
    });

    it('filters by status, type, assistant, number and time, alone or together, across pages', async () => {
      const assistantA = randomUUID();
      const assistantB = randomUUID();
      const numberA = randomUUID();
      const numberB = randomUUID();
      const statuses = ['ringing', 'in-progress', 'forwarding', 'ended'];
      for (let i = 0; i < 24; i++) {
        await repo.upsert(
          entry(orgId, new Date(Date.parse('2025-06-01T00:00:00Z') + i * 3600_000).toISOString(), {
            status: statuses[i % 4]!,
            type: i % 5 === 0 ? 'outbound_phone_call' : 'inbound_phone_call',
            assistant_id: i % 3 === 0 ? null : i % 3 === 1 ? assistantA : assistantB,
            number_id: i % 2 === 0 ? numberA : numberB,
          }),
        );
      }
      await repo.upsert(entry(otherOrgId, '2025-06-01T05:00:00.000Z', { status: 'ended', assistant_id: assistantA, number_id: numberA }));

      const cases: [CallLogQuery, string, unknown[]][] = [
        [{ limit: 4, status: 'ended' }, 'status = $2', ['ended']],
        [{ limit: 4, type: 'outbound_phone_call' }, 'type = $2', ['outbound_phone_call']],
        [{ limit: 4, assistant_id: assistantA }, 'assistant_id = $2', [assistantA]],
        [{ limit: 4, number_id: numberB }, 'number_id = $2', [numberB]],
        [{ limit: 4, since: '2025-06-01T05:00:00Z' }, 'created_at >= $2', ['2025-06-01T05:00:00Z']],
        [{ limit: 4, until: '2025-06-01T05:00:00Z' }, 'created_at < $2', ['2025-06-01T05:00:00Z']],
        [
          { limit: 2, since: '2025-06-01T03:00:00+00:00', until: '2025-06-01T20:00:00Z', number_id: numberA, assistant_id: assistantB },
          'created_at >= $2 AND created_at < $3 AND number_id = $4 AND assistant_id = $5',
          ['2025-06-01T03:00:00Z', '2025-06-01T20:00:00Z', numberA, assistantB],
        ],
        [{ limit: 3, status: 'ended', number_id: numberB }, 'status = $2 AND number_id = $3', ['ended', numberB]],
      ];
      for (const [query, where, params] of cases) {
        const expected = await expectedOrder(testDb, orgId, where, params);
        expect(expected.length, JSON.stringify(query)).toBeGreaterThan(0);
        expect((await allPages(repo, orgId, query)).flat(), JSON.stringify(query)).toEqual(expected);
      }
      // the since bound is inclusive, until exclusive
      const at5 = await repo.list(orgId, { limit: 50, since: '2025-06-01T05:00:00Z', until: '2025-06-01T06:00:00Z' });
      expect(at5.calls.map((c) => c.created_at)).toEqual(['2025-06-01T05:00:00.000Z']);
      expect((await repo.list(orgId, { limit: 50, status: 'queued' })).calls).toEqual([]);
    });

    it('refuses a cursor it did not make, and a limit out of range', async () => {
      const made = encodeCursor('2025-06-01T10:00:00.123456Z', randomUUID());
      expect(decodeCursor(made).created_at).toBe('2025-06-01T10:00:00.123456Z');
      const bad = [
        'not a cursor!',
        Buffer.from('hello').toString('base64url'),
        Buffer.from(JSON.stringify(['2025-06-01T10:00:00Z'])).toString('base64url'),
        Buffer.from(JSON.stringify(['yesterday', randomUUID()])).toString('base64url'),
        Buffer.from(JSON.stringify(['2025-06-01T10:00:00Z', 'not-a-uuid'])).toString('base64url'),
        Buffer.from(JSON.stringify({ at: '2025-06-01T10:00:00Z' })).toString('base64url'),
      ];
      for (const cursor of bad) {
        expect(() => decodeCursor(cursor), cursor).toThrow(InvalidCursorError);
        await expect(repo.list(orgId, { limit: 5, cursor }), cursor).rejects.toThrow(InvalidCursorError);
      }
      await expect(repo.list(orgId, { limit: 0 })).rejects.toThrow(RangeError);
      await expect(repo.list(orgId, { limit: 1001 })).rejects.toThrow(RangeError);
    });
  });

  describe('retention', () => {
    it('prunes the calls created more than the retention days ago, in batches, and nothing with 0', async () => {
      const now = Date.parse('2025-06-01T00:00:00Z');
      const old = Array.from({ length: 7 }, (_, i) => entry(orgId, new Date(now - 91 * DAY - i * 60_000).toISOString()));
      const otherOld = entry(otherOrgId, new Date(now - 200 * DAY).toISOString());
      const kept = [entry(orgId, new Date(now - 89 * DAY).toISOString()), entry(orgId, new Date(now - 90 * DAY).toISOString())];
      for (const e of [...old, otherOld, ...kept]) await repo.upsert(e);

      expect(await repo.prune(0, { now })).toBe(0);
      expect(await repo.prune(90, { now, batchSize: 3 })).toBe(8);
      const left = await testDb.db.query<{ id: string }>('SELECT id FROM calls');
      expect(left.rows.map((r) => r.id).sort()).toEqual(ids(kept).sort());
      expect(await repo.prune(90, { now })).toBe(0);
      expect(() => repo.prune(-1)).toThrow(RangeError);
    });

    it('the pruner deletes old calls when it runs, never with 0 days, and stops cleanly', async () => {
      const now = Date.parse('2025-06-01T00:00:00Z');
      await repo.upsert(entry(orgId, new Date(now - 40 * DAY).toISOString()));
      await repo.upsert(entry(orgId, new Date(now - 10 * DAY).toISOString()));
      const off = new CallLogPruner({ calls: repo, retentionDays: 0, logger: silent, now: () => now });
      expect(off.enabled).toBe(false);
      expect(await off.runOnce()).toBe(0);

      const pruner = new CallLogPruner({ calls: repo, retentionDays: 30, logger: silent, now: () => now, firstRunAfterMs: 10, everyMs: 60_000 });
      pruner.start();
      await expect.poll(async () => (await expectedOrder(testDb, orgId)).length, { timeout: 5_000 }).toBe(1);
      await pruner.stop();

      const failing = new CallLogPruner({
        calls: { prune: () => Promise.reject(new Error('database gone')) },
        retentionDays: 30,
        logger: silent,
      });
      expect(await failing.runOnce()).toBe(0);
    });
  });

  describe('the runtime', () => {
    it('wraps the call sessions with the log, and starts and stops the call-log pruner', async () => {
      await repo.upsert(entry(orgId, new Date(Date.now() - 3 * DAY).toISOString()));
      await repo.upsert(entry(orgId, new Date(Date.now() - DAY / 2).toISOString()));
      const start = (days: string) =>
        createRuntime({
          config: loadConfig({ LOG_LEVEL: 'silent', CALL_RETENTION_DAYS: days }),
          store: createStore(testDb.db),
          logger: silent,
          callStore: new MemoryCallStore(),
          webhookQueueName: `call-log-runtime-${randomUUID()}`,
          callLogPruning: { firstRunAfterMs: 10, everyMs: 60_000 },
        });
      const off = await start('0');
      expect(off.callLogPruner.enabled).toBe(false);
      expect(off.callStore).toBeInstanceOf(LoggedCallStore);
      await off.close();
      expect(await expectedOrder(testDb, orgId)).toHaveLength(2);

      const runtime = await start('2');
      try {
        expect(runtime.callLogPruner.enabled).toBe(true);
        await expect.poll(async () => (await expectedOrder(testDb, orgId)).length, { timeout: 5_000 }).toBe(1);
      } finally {
        await runtime.close();
      }
    });
  });

  describe('LoggedCallStore', () => {
    /** A repository whose writes are slow and uneven, so that order is up to the chain. */
    function slowRepo(): CallLogRepository {
      const slow = Object.create(repo) as CallLogRepository;
      slow.upsert = async (e) => {
        await new Promise((r) => setTimeout(r, Math.random() * 20));
        return repo.upsert(e);
      };
      return slow;
    }

    const newCall = (patch: Partial<CallRecord> = {}): CallRecord =>
      callRecord({
        organization_id: orgId,
        status: 'ringing',
        started_at: null,
        definition: definition as unknown as Record<string, unknown>,
        workflow_id: randomUUID(),
        assistant: { name: 'Ada', gdpr_mode: false },
        ...patch,
      });

    it('writes at create, at each change of status and at the end; in order; the last save wins', async () => {
      const sessions = new MemoryCallStore();
      const calls = new LoggedCallStore(sessions, slowRepo(), silent);
      const r = newCall();
      await calls.create(r);
      await calls.settled();
      expect((await repo.get(orgId, r.id))!.status).toBe('ringing');

      r.status = 'in-progress';
      r.started_at = new Date().toISOString();
      r.messages.push(message('assistant', 'Hello.'));
      void calls.save(r);
      // the same status again: the session has it, the log waits for the next change
      r.messages.push(message('user', 'I would like to book.', 1));
      r.current_node = 'greeting';
      r.nodes_visited = ['greeting'];
      void calls.save(r);
      await calls.settled();
      expect((await repo.get(orgId, r.id))!.messages).toHaveLength(1);
      expect((await sessions.get(r.id))!.messages).toHaveLength(2);

      r.status = 'forwarding';
      void calls.save(r);
      r.status = 'ended';
      r.ended_reason = 'call-transferred';
      r.ended_at = new Date().toISOString();
      r.current_node = 'bye';
      r.nodes_visited = ['greeting', 'bye'];
      // an ended call's record drops its definition (and with gdpr_mode its engine): the log keeps the hash
      r.definition = null;
      r.engine = null;
      void calls.save(r);
      // ended records are saved twice at the end (the second after the report): both land, in order
      r.errors = [{ code: 'CALL_SHUTDOWN', message: 'after the report' }];
      void calls.save(r);
      // the caller may change its record at once: the log has the record as it was saved
      r.ended_reason = 'changed-after-save';
      await calls.settled();
      const logged = await repo.get(orgId, r.id);
      expect(logged).toMatchObject({
        status: 'ended',
        ended_reason: 'call-transferred',
        errors: [{ code: 'CALL_SHUTDOWN', message: 'after the report' }],
        current_node: 'bye',
        nodes_visited: ['greeting', 'bye'],
        definition_hash: hashDefinition(definition),
        transport: 'twilio',
      });
      expect(logged!.messages.map((m) => m.content)).toEqual(['Hello.', 'I would like to book.']);
      expect(calls.pending).toBe(0);
      await calls.close();
    });

    it('keeps the order of many calls saved at once, each in its own chain', async () => {
      const calls = new LoggedCallStore(new MemoryCallStore(), slowRepo(), silent);
      const records = Array.from({ length: 20 }, () => newCall());
      await Promise.all(records.map((r) => calls.create(r)));
      for (const status of ['in-progress', 'forwarding', 'ended'] as const) {
        for (const r of records) {
          r.status = status;
          if (status === 'ended') r.ended_reason = 'customer-ended-call';
          void calls.save(r);
        }
      }
      await calls.settled();
      for (const r of records) expect((await repo.get(orgId, r.id))!.status).toBe('ended');
      await calls.close();
    });

    it('never makes the session save wait for the log, and never throws a log failure to the call', async () => {
      const lines: string[] = [];
      const logger = pino({ level: 'error' }, { write: (line: string) => void lines.push(line) });
      let release: () => void = () => undefined;
      const gate = new Promise<void>((resolve) => (release = resolve));
      const stuck = Object.create(repo) as CallLogRepository;
      stuck.upsert = async (e) => {
        await gate;
        return repo.upsert(e);
      };
      const waiting = new LoggedCallStore(new MemoryCallStore(), stuck, logger);
      const r = newCall();
      const started = Date.now();
      await waiting.create(r);
      r.status = 'in-progress';
      await waiting.save(r);
      expect(Date.now() - started).toBeLessThan(500);
      expect(waiting.pending).toBe(1);
      release();
      await waiting.settled();

      let attempts = 0;
      const broken = Object.create(repo) as CallLogRepository;
      broken.upsert = async (e) => {
        attempts++;
        if (e.status !== 'ended') throw new Error('the database is down');
        return repo.upsert(e);
      };
      const calls = new LoggedCallStore(new MemoryCallStore(), broken, logger);
      const c = newCall();
      await expect(calls.create(c)).resolves.toBeUndefined();
      c.status = 'in-progress';
      await expect(calls.save(c)).resolves.toBeUndefined();
      c.status = 'ended';
      c.ended_reason = 'customer-ended-call';
      await calls.save(c);
      await calls.settled();
      expect(attempts).toBe(3);
      // a failed write does not stop the ones after it
      expect((await repo.get(orgId, c.id))!.status).toBe('ended');
      const errors = lines.map((l) => JSON.parse(l) as { msg: string; callId: string; err: { message: string } });
      expect(errors).toHaveLength(2);
      expect(errors[0]).toMatchObject({ msg: 'could not write the call to the call log', callId: c.id, err: { message: 'the database is down' } });
      await calls.close();
      await waiting.close();
    });

    it('with gdpr_mode keeps no messages in the log, while the live session still has them', async () => {
      const sessions = new MemoryCallStore();
      const calls = new LoggedCallStore(sessions, repo, silent);
      const r = newCall({ assistant: { name: 'Ada', gdpr_mode: true } });
      await calls.create(r);
      r.status = 'in-progress';
      r.messages.push(message('assistant', 'Hello, this is private.'), message('user', 'My card number is 4111.', 2));
      await calls.save(r);
      await calls.settled();
      expect((await repo.get(orgId, r.id))!.messages).toEqual([]);
      expect((await sessions.get(r.id))!.messages).toHaveLength(2);
      r.status = 'ended';
      r.ended_reason = 'customer-ended-call';
      await calls.save(r);
      await calls.settled();
      const logged = await repo.get(orgId, r.id);
      expect(logged).toMatchObject({ status: 'ended', messages: [] });
      expect(JSON.stringify(logged)).not.toContain('4111');
      await calls.close();
    });

    it('an ended call\'s record without its definition still names its hash through the engine snapshot', async () => {
      const r = newCall({ status: 'ended', definition: null, engine: { definition_hash: 'a'.repeat(64) } });
      expect(callLogEntry(r).definition_hash).toBe('a'.repeat(64));
      // with no workflow the engine runs a stand-in definition: that hash is not the call's
      expect(callLogEntry({ ...r, workflow_id: null }).definition_hash).toBeNull();
    });

    it('logs the structured data a record carries, and a call with no workflow has no definition hash', async () => {
      const calls = new LoggedCallStore(new MemoryCallStore(), repo, silent);
      const r = newCall({ definition: null, workflow_id: null });
      await calls.create(r);
      const ended = { ...r, status: 'ended' as const, ended_reason: 'assistant-ended-call', structured_data: { intent: 'booking' } };
      await calls.save(ended);
      await calls.settled();
      expect(await repo.get(orgId, r.id)).toMatchObject({ definition_hash: null, workflow_id: null, structured_data: { intent: 'booking' } });
      await calls.close();
    });

    it('delegates every session method to the session store', async () => {
      const sessions = new MemoryCallStore();
      const calls = new LoggedCallStore(sessions, repo, silent);
      const r = newCall();
      await calls.create(r);
      expect((await calls.get(r.id))!.id).toBe(r.id);
      expect(ids(await calls.list(orgId, 10))).toEqual([r.id]);
      await calls.putStreamToken(r.id, 'token', 60);
      expect(await calls.consumeStreamToken(r.id, 'token')).toBe(true);
      expect(await calls.claimTransportCall('twilio:AC:CA', r.id, 60)).toBeNull();
      expect(await calls.claimTransportCall('twilio:AC:CA', randomUUID(), 60)).toBe(r.id);
      await calls.heartbeat('w-1', [r.id]);
      expect(await calls.findStale(60_000)).toEqual([]);
      expect(await calls.claim(r.id, 'w-2', 60_000)).toBeNull();
      await calls.close();
      expect(await sessions.get(r.id)).toBeNull();
    });
  });
});

describe('CALL_RETENTION_DAYS', () => {
  const days = (value?: string) =>
    loadConfig(value === undefined ? {} : { CALL_RETENTION_DAYS: value }).CALL_RETENTION_DAYS;

  it('is 90 by default; 0 keeps calls forever', () => {
    expect(days()).toBe(90);
    expect(days('')).toBe(90);
    expect(days('0')).toBe(0);
    expect(days('365')).toBe(365);
  });

  it.each([
    ['-1', 'CALL_RETENTION_DAYS: must not be negative; 0 keeps calls forever'],
    ['1.5', 'CALL_RETENTION_DAYS: must be a whole number of days; 0 keeps calls forever'],
    ['ninety', 'CALL_RETENTION_DAYS: must be a whole number of days; 0 keeps calls forever'],
    ['36501', 'CALL_RETENTION_DAYS: must be at most 36500 days (100 years); 0 keeps calls forever'],
  ])('refuses %s', (value, message) => {
    expect(() => days(value)).toThrow(message);
  });
});
