/** The pruner of notification e-mail attempts, as the runtime starts and stops it (as for webhook attempts). */
import { randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { pino, type Logger } from 'pino';
import { loadConfig } from '../../src/config.js';
import { createRuntime } from '../../src/runtime.js';
import type { Queryable } from '../../src/store/db.js';
import { createStore, type Store } from '../../src/store/index.js';
import { DAY_MS } from '../../src/store/retention.js';
import { availableDbKinds, createTestDb, type TestDb } from '../helpers/db.js';

interface LogLine {
  level: number;
  msg: string;
  deleted?: number;
  retention_days?: number;
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

/** `n` attempts at e-mails of one call, all made `ageMs` ago. */
async function insertAttempts(db: Queryable, orgId: string, n: number, ageMs: number): Promise<void> {
  await db.query(
    `INSERT INTO email_attempts
       (organization_id, call_id, email_id, recipient, attempt, outcome, smtp_code, smtp_response, duration_ms, created_at)
     SELECT $1, $2, 'eml_' || g, 'ops@example.com', 1, 'sent', 250, '250 2.0.0 Ok', 5, $3::timestamptz
       FROM generate_series(1, $4::int) g`,
    [orgId, randomUUID(), new Date(Date.now() - ageMs).toISOString(), n],
  );
}

const timerOf = (pruner: unknown) => (pruner as { timer: NodeJS.Timeout | null }).timer;

describe.each(availableDbKinds())('the runtime prunes e-mail attempts on %s', (kind) => {
  let testDb: TestDb;
  let store: Store;
  let orgId: string;
  const count = async (olderThanMs = 0) =>
    Number(
      (
        await testDb.db.query<{ n: number }>('SELECT count(*)::int AS n FROM email_attempts WHERE created_at < $1', [
          new Date(Date.now() - olderThanMs).toISOString(),
        ])
      ).rows[0]?.n,
    );

  beforeAll(async () => {
    testDb = await createTestDb(kind);
    store = createStore(testDb.db);
    orgId = (await store.keys.createKey('E-mail Retention')).organization.id;
  });
  afterAll(async () => {
    await testDb.drop();
  });
  beforeEach(async () => {
    await testDb.db.query('DELETE FROM email_attempts');
  });

  const startRuntime = async (env: Record<string, string>, logger: Logger) =>
    createRuntime({
      config: loadConfig({ LOG_LEVEL: 'silent', ...env }),
      store,
      logger,
      emailAttemptPruning: { firstRunAfterMs: 10, everyMs: 60, batchSize: 7 },
    });

  it('the index the pruner reads by is there', async () => {
    const { rows } = await testDb.db.query<{ indexdef: string }>("SELECT indexdef FROM pg_indexes WHERE indexname = 'email_attempts_created'");
    expect(rows[0]?.indexdef).toMatch(/ON (public\.)?email_attempts USING btree \(created_at\)/);
  });

  it('keeps 30 days by default, like webhook attempts', () => {
    const config = loadConfig({ LOG_LEVEL: 'silent' });
    expect(config.EMAIL_ATTEMPT_RETENTION_DAYS).toBe(30);
    expect(config.EMAIL_ATTEMPT_RETENTION_DAYS).toBe(config.WEBHOOK_DELIVERY_RETENTION_DAYS);
    expect(() => loadConfig({ EMAIL_ATTEMPT_RETENTION_DAYS: '-1' })).toThrow(/EMAIL_ATTEMPT_RETENTION_DAYS.*0 keeps e-mail attempts forever/s);
  });

  it('runs shortly after start and then periodically, and stops when the runtime closes', async () => {
    const { logger, lines } = capturingLogger();
    await insertAttempts(testDb.db, orgId, 30, 3 * DAY_MS);
    await insertAttempts(testDb.db, orgId, 4, DAY_MS / 2);
    const runtime = await startRuntime({ EMAIL_ATTEMPT_RETENTION_DAYS: '2' }, logger);
    try {
      await waitFor(async () => (await count(2 * DAY_MS)) === 0, 'the first prune');
      expect(await count()).toBe(4);
      await waitFor(() => lines.some((l) => l.deleted === 30), 'the log line of the first prune');
      expect(lines.find((l) => l.deleted === 30)).toMatchObject({ level: 30, msg: 'pruned old e-mail attempts', retention_days: 2 });

      await insertAttempts(testDb.db, orgId, 9, 5 * DAY_MS);
      await waitFor(async () => (await count(2 * DAY_MS)) === 0, 'a later, periodic prune');
      await waitFor(() => lines.some((l) => l.deleted === 9), 'the log line of the later prune');
    } finally {
      await runtime.close();
    }
    expect(timerOf(runtime.emailAttemptPruner)).toBeNull();
    await insertAttempts(testDb.db, orgId, 5, 3 * DAY_MS);
    await sleep(200);
    expect(await count(2 * DAY_MS)).toBe(5);
    expect(lines.filter((l) => l.level >= 50)).toEqual([]);
  });

  it('EMAIL_ATTEMPT_RETENTION_DAYS=0 keeps every attempt', async () => {
    const { logger, lines } = capturingLogger();
    await insertAttempts(testDb.db, orgId, 6, 4_000 * DAY_MS);
    const runtime = await startRuntime({ EMAIL_ATTEMPT_RETENTION_DAYS: '0' }, logger);
    try {
      expect(runtime.emailAttemptPruner.enabled).toBe(false);
      await sleep(200);
      expect(await count()).toBe(6);
    } finally {
      await runtime.close();
    }
    expect(lines.filter((l) => l.msg.includes('e-mail attempts'))).toEqual([]);
  });
});
