/** The periodic pruner of webhook delivery attempts, alone and as the runtime starts and stops it. */
import { randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { pino, type Logger } from 'pino';
import { loadConfig } from '../../src/config.js';
import { createRuntime } from '../../src/runtime.js';
import type { Queryable } from '../../src/store/db.js';
import { createStore, type Store } from '../../src/store/index.js';
import { DAY_MS, DeliveryPruner } from '../../src/webhooks/retention.js';
import { availableDbKinds, createTestDb, type TestDb } from '../helpers/db.js';

interface LogLine {
  level: number;
  msg: string;
  deleted?: number;
  retention_days?: number;
  cutoff?: string;
  err?: { message: string };
}

/** A real pino logger whose lines are kept for the test to read. */
function capturingLogger(): { logger: Logger; lines: LogLine[] } {
  const lines: LogLine[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString().split('\n')) if (line) lines.push(JSON.parse(line) as LogLine);
      done();
    },
  });
  return { logger: pino({ level: 'info' }, stream), lines };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function waitFor(check: () => Promise<boolean> | boolean, what: string, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

type PruneCall = { cutoff: Date; batchSize: number | undefined };

/** A repository stand-in that answers from a list (a number, or an error to throw). */
function fakeDeliveries(answers: (number | Error)[]) {
  const calls: PruneCall[] = [];
  return {
    calls,
    pruneOlderThan: async (cutoff: Date, batchSize?: number) => {
      calls.push({ cutoff, batchSize });
      const answer = answers.shift() ?? 0;
      if (answer instanceof Error) throw answer;
      return answer;
    },
  };
}

const timerOf = (pruner: DeliveryPruner) => (pruner as unknown as { timer: NodeJS.Timeout | null }).timer;

describe('DeliveryPruner', () => {
  it('prunes what is older than the retention, logs how many rows went, and is silent when none did', async () => {
    const { logger, lines } = capturingLogger();
    const deliveries = fakeDeliveries([42, 0]);
    const now = Date.parse('2025-06-30T12:00:00.000Z');
    const pruner = new DeliveryPruner({ deliveries, retentionDays: 7, logger, batchSize: 100, now: () => now });
    expect(await pruner.runOnce()).toBe(42);
    expect(deliveries.calls[0]).toEqual({ cutoff: new Date(now - 7 * DAY_MS), batchSize: 100 });
    expect(lines).toEqual([
      expect.objectContaining({ level: 30, msg: 'pruned old webhook delivery attempts', deleted: 42, retention_days: 7, cutoff: '2025-06-23T12:00:00.000Z' }),
    ]);
    expect(await pruner.runOnce()).toBe(0);
    expect(lines).toHaveLength(1);
  });

  it('logs a failed prune without throwing, and the next run goes ahead', async () => {
    const { logger, lines } = capturingLogger();
    const deliveries = fakeDeliveries([new Error('connection terminated'), 3]);
    const pruner = new DeliveryPruner({ deliveries, retentionDays: 1, logger, firstRunAfterMs: 1, everyMs: 20 });
    pruner.start();
    await waitFor(() => deliveries.calls.length >= 2, 'the run after the failure');
    await pruner.stop();
    expect(lines[0]).toMatchObject({ level: 50, err: { message: 'connection terminated' } });
    expect(lines[1]).toMatchObject({ level: 30, deleted: 3 });
  });

  it('runs once shortly after start, then on its interval, on an unref()ed timer; stop() ends it', async () => {
    const { logger } = capturingLogger();
    const deliveries = fakeDeliveries([]);
    const pruner = new DeliveryPruner({ deliveries, retentionDays: 30, logger, firstRunAfterMs: 5, everyMs: 25 });
    pruner.start();
    expect(timerOf(pruner)?.hasRef()).toBe(false);
    await waitFor(() => deliveries.calls.length >= 3, 'three runs');
    expect(timerOf(pruner)?.hasRef()).toBe(false);
    await pruner.stop();
    const runs = deliveries.calls.length;
    expect(timerOf(pruner)).toBeNull();
    await sleep(80);
    expect(deliveries.calls.length).toBe(runs);
    pruner.start(); // a stopped pruner stays stopped
    expect(timerOf(pruner)).toBeNull();
  });

  it('stop() waits for a run under way, which stops after its current batch', async () => {
    const { logger } = capturingLogger();
    let release!: () => void;
    let stopAsked: (() => boolean) | undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const pruner = new DeliveryPruner({
      deliveries: {
        pruneOlderThan: async (_cutoff, _batch, options) => {
          stopAsked = options?.shouldStop;
          await gate;
          return 5;
        },
      },
      retentionDays: 1,
      logger,
    });
    const run = pruner.runOnce();
    expect(pruner.runOnce()).toBe(run); // joined, not doubled
    expect(stopAsked?.()).toBe(false);
    let stopped = false;
    const stopping = pruner.stop().then(() => (stopped = true));
    await sleep(20);
    expect(stopped).toBe(false);
    expect(stopAsked?.()).toBe(true);
    release();
    await stopping;
    expect(await run).toBe(5);
  });

  it('0 days keeps everything: no timer, no prune', async () => {
    const { logger } = capturingLogger();
    const deliveries = fakeDeliveries([]);
    const pruner = new DeliveryPruner({ deliveries, retentionDays: 0, logger, firstRunAfterMs: 1, everyMs: 1 });
    expect(pruner.enabled).toBe(false);
    pruner.start();
    expect(timerOf(pruner)).toBeNull();
    expect(await pruner.runOnce()).toBe(0);
    await sleep(20);
    expect(deliveries.calls).toEqual([]);
    await pruner.stop();
  });
});

/** `n` attempts of one call, all made `ageMs` ago. */
async function insertAttempts(db: Queryable, orgId: string, n: number, ageMs: number): Promise<void> {
  await db.query(
    `INSERT INTO webhook_deliveries
       (organization_id, call_id, message_id, event, url, attempt, outcome, duration_ms, created_at)
     SELECT $1, $2, 'msg_' || g, 'status-update', 'https://hooks.example/x', 1, 'delivered', 5, $3::timestamptz
       FROM generate_series(1, $4::int) g`,
    [orgId, randomUUID(), new Date(Date.now() - ageMs).toISOString(), n],
  );
}

describe.each(availableDbKinds())('the runtime prunes delivery attempts on %s', (kind) => {
  let testDb: TestDb;
  let store: Store;
  let orgId: string;
  const count = async (olderThanMs = 0) =>
    Number(
      (
        await testDb.db.query<{ n: number }>('SELECT count(*)::int AS n FROM webhook_deliveries WHERE created_at < $1', [
          new Date(Date.now() - olderThanMs).toISOString(),
        ])
      ).rows[0]?.n,
    );

  beforeAll(async () => {
    testDb = await createTestDb(kind);
    store = createStore(testDb.db);
    orgId = (await store.keys.createKey('Runtime Retention')).organization.id;
  });
  afterAll(async () => {
    await testDb.drop();
  });
  beforeEach(async () => {
    await testDb.db.query('DELETE FROM webhook_deliveries');
  });

  const startRuntime = async (retentionDays: string, logger: Logger) =>
    createRuntime({
      config: loadConfig({ LOG_LEVEL: 'silent', WEBHOOK_DELIVERY_RETENTION_DAYS: retentionDays }),
      store,
      logger,
      deliveryPruning: { firstRunAfterMs: 10, everyMs: 60, batchSize: 7 },
    });

  it('runs shortly after start and then periodically, and stops when the runtime closes', async () => {
    const { logger, lines } = capturingLogger();
    await insertAttempts(testDb.db, orgId, 30, 3 * DAY_MS);
    await insertAttempts(testDb.db, orgId, 4, DAY_MS / 2);
    const runtime = await startRuntime('2', logger);
    try {
      await waitFor(async () => (await count(2 * DAY_MS)) === 0, 'the first prune');
      expect(await count()).toBe(4);
      await waitFor(() => lines.some((l) => l.deleted === 30), 'the log line of the first prune');
      expect(lines.find((l) => l.deleted === 30)).toMatchObject({ level: 30, msg: 'pruned old webhook delivery attempts', retention_days: 2 });

      await insertAttempts(testDb.db, orgId, 9, 5 * DAY_MS);
      await waitFor(async () => (await count(2 * DAY_MS)) === 0, 'a later, periodic prune');
      await waitFor(() => lines.some((l) => l.deleted === 9), 'the log line of the later prune');
    } finally {
      await runtime.close();
    }
    expect(timerOf(runtime.deliveryPruner)).toBeNull();
    await insertAttempts(testDb.db, orgId, 5, 3 * DAY_MS);
    await sleep(200);
    expect(await count(2 * DAY_MS)).toBe(5);
    expect(lines.filter((l) => l.level >= 50)).toEqual([]);
  });

  it('WEBHOOK_DELIVERY_RETENTION_DAYS=0 keeps every attempt', async () => {
    const { logger, lines } = capturingLogger();
    await insertAttempts(testDb.db, orgId, 6, 4_000 * DAY_MS);
    const runtime = await startRuntime('0', logger);
    try {
      expect(runtime.deliveryPruner.enabled).toBe(false);
      await sleep(200);
      expect(await count()).toBe(6);
    } finally {
      await runtime.close();
    }
    expect(lines.filter((l) => l.msg.includes('prune'))).toEqual([]);
  });
});
