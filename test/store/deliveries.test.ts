/** Pruning the delivery-attempt log by age, on PGlite and (when DATABASE_URL is set) PostgreSQL. */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { Db, Queryable } from '../../src/store/db.js';
import { DeliveryRepository, type DeliveryAttemptRecord } from '../../src/store/deliveries.js';
import { createStore } from '../../src/store/index.js';
import { availableDbKinds, createTestDb, type TestDb } from '../helpers/db.js';

const CUTOFF = new Date('2025-06-01T00:00:00.000Z');
const at = (msFromCutoff: number) => new Date(CUTOFF.getTime() + msFromCutoff).toISOString();

/** `n` attempts of one call, the first at `from`, one second apart. */
async function insertAttempts(db: Queryable, orgId: string, n: number, from: string, callId = randomUUID()): Promise<void> {
  await db.query(
    `INSERT INTO webhook_deliveries
       (organization_id, call_id, message_id, event, url, attempt, outcome, duration_ms, created_at)
     SELECT $1, $2, 'msg_' || g, 'status-update', 'https://hooks.example/x', 1, 'delivered', 5,
            $3::timestamptz + (g - 1) * interval '1 second'
       FROM generate_series(1, $4::int) g`,
    [orgId, callId, from, n],
  );
}

const countAll = async (db: Queryable) =>
  Number((await db.query<{ n: number }>('SELECT count(*)::int AS n FROM webhook_deliveries')).rows[0]?.n);
const countBefore = async (db: Queryable, cutoff: Date) =>
  Number(
    (await db.query<{ n: number }>('SELECT count(*)::int AS n FROM webhook_deliveries WHERE created_at < $1', [cutoff.toISOString()]))
      .rows[0]?.n,
  );

/** The database with every `DELETE` statement counted. */
function countingDeletes(db: Db): { db: Db; deletes: () => number } {
  let deletes = 0;
  const wrapped = Object.create(db) as Db;
  wrapped.query = (sql, params) => {
    if (/\bDELETE\b/.test(sql)) deletes++;
    return db.query(sql, params);
  };
  return { db: wrapped, deletes: () => deletes };
}

describe.each(availableDbKinds())('delivery attempt retention on %s', (kind) => {
  let testDb: TestDb;
  let repo: DeliveryRepository;
  let orgId: string;

  beforeAll(async () => {
    testDb = await createTestDb(kind);
    repo = new DeliveryRepository(testDb.db);
    orgId = (await createStore(testDb.db).keys.createKey('Retention Org')).organization.id;
  });
  afterAll(async () => {
    await testDb.drop();
  });
  beforeEach(async () => {
    await testDb.db.query('DELETE FROM webhook_deliveries');
  });

  it('migration 003 indexes created_at, and deleting by age uses it', async () => {
    const { rows } = await testDb.db.query<{ indexdef: string }>(
      `SELECT indexdef FROM pg_indexes WHERE tablename = 'webhook_deliveries' AND indexname = 'webhook_deliveries_created'`,
    );
    expect(rows[0]?.indexdef).toMatch(/\(created_at\)/);
    await insertAttempts(testDb.db, orgId, 2000, at(-3_000_000));
    await testDb.db.query('ANALYZE webhook_deliveries');
    const plan = await testDb.db.query<{ 'QUERY PLAN': string }>(
      `EXPLAIN SELECT id FROM webhook_deliveries WHERE created_at < $1 ORDER BY created_at LIMIT 10`,
      [at(-2_999_000)],
    );
    expect(plan.rows.map((r) => r['QUERY PLAN']).join('\n')).toContain('webhook_deliveries_created');
  });

  it('deletes the attempts made before the cutoff and keeps the rest (the cutoff itself included)', async () => {
    const record = (created_at: string, callId: string): DeliveryAttemptRecord => ({
      organization_id: orgId,
      call_id: callId,
      message_id: `msg_${randomUUID()}`,
      event: 'status-update',
      url: 'https://hooks.example/x',
      attempt: 1,
      outcome: 'delivered',
      status_code: 200,
      error: null,
      duration_ms: 3,
      next_retry_at: null,
      created_at,
    });
    const oldCall = randomUUID();
    const newCall = randomUUID();
    await repo.record(record(at(-40 * 86_400_000), oldCall));
    await repo.record(record(at(-1), oldCall));
    await repo.record(record(at(0), newCall));
    await repo.record(record(at(1), newCall));

    expect(await repo.pruneOlderThan(CUTOFF, 10)).toBe(2);
    expect(await repo.listForCall(orgId, oldCall)).toEqual([]);
    expect((await repo.listForCall(orgId, newCall)).map((a) => a.created_at)).toEqual([at(0), at(1)]);
    expect(await repo.pruneOlderThan(CUTOFF, 10)).toBe(0);
  });

  it('works through a backlog in batches until none is left', async () => {
    await insertAttempts(testDb.db, orgId, 25, at(-3_600_000));
    await insertAttempts(testDb.db, orgId, 3, at(0));
    const counting = countingDeletes(testDb.db);
    expect(await new DeliveryRepository(counting.db).pruneOlderThan(CUTOFF, 4)).toBe(25);
    // six full batches, then one of a single row that shows the backlog is done
    expect(counting.deletes()).toBe(7);
    expect(await countAll(testDb.db)).toBe(3);

    await insertAttempts(testDb.db, orgId, 8, at(-3_600_000));
    const exact = countingDeletes(testDb.db);
    expect(await new DeliveryRepository(exact.db).pruneOlderThan(CUTOFF, 4)).toBe(8);
    expect(exact.deletes()).toBe(3); // 4, 4, then an empty batch
  });

  it('takes the oldest first and stops between batches when asked to', async () => {
    await insertAttempts(testDb.db, orgId, 10, at(-3_600_000));
    let batches = 0;
    const deleted = await repo.pruneOlderThan(CUTOFF, 3, { shouldStop: () => ++batches >= 2 });
    expect(deleted).toBe(6);
    const { rows } = await testDb.db.query<{ created_at: Date | string }>(
      'SELECT created_at FROM webhook_deliveries ORDER BY created_at LIMIT 1',
    );
    expect(new Date(rows[0]!.created_at).toISOString()).toBe(at(-3_600_000 + 6_000));
  });

  it('refuses a batch size that is not a positive integer, and an invalid cutoff', async () => {
    await expect(repo.pruneOlderThan(CUTOFF, 0)).rejects.toThrow(/batchSize/);
    await expect(repo.pruneOlderThan(CUTOFF, 2.5)).rejects.toThrow(/batchSize/);
    await expect(repo.pruneOlderThan(new Date(Number.NaN), 10)).rejects.toThrow(/cutoff/);
  });

  it('concurrent prunes (several processes on one database) split the rows between them', async () => {
    await insertAttempts(testDb.db, orgId, 1200, at(-7_200_000));
    await insertAttempts(testDb.db, orgId, 5, at(10));
    const other = new DeliveryRepository(testDb.db);
    const results = await Promise.all([repo.pruneOlderThan(CUTOFF, 50), other.pruneOlderThan(CUTOFF, 50), repo.pruneOlderThan(CUTOFF, 70)]);
    expect(results.reduce((a, b) => a + b, 0)).toBe(1200);
    expect(await countBefore(testDb.db, CUTOFF)).toBe(0);
    expect(await countAll(testDb.db)).toBe(5);
  });

  it.runIf(kind === 'postgres')('a prune skips rows another transaction holds instead of waiting for them', async () => {
    await insertAttempts(testDb.db, orgId, 10, at(-3_600_000));
    await testDb.db.transaction(async (tx) => {
      // another process's prune in the middle of its batch: it holds the three oldest rows
      await tx.query(
        `SELECT id FROM webhook_deliveries WHERE created_at < $1 ORDER BY created_at LIMIT 3 FOR UPDATE`,
        [CUTOFF.toISOString()],
      );
      const deleted = await Promise.race([
        repo.pruneOlderThan(CUTOFF, 4),
        new Promise<string>((resolve) => setTimeout(() => resolve('blocked'), 5_000)),
      ]);
      expect(deleted).toBe(7);
    });
    expect(await repo.pruneOlderThan(CUTOFF, 4)).toBe(3);
    expect(await countAll(testDb.db)).toBe(0);
  });
});
