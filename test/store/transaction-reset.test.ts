/**
 * A transaction whose connection PostgreSQL drops between two statements (a restart, a cut network)
 * fails that transaction, and nothing else: the client's 'error' is not left unhandled (it would
 * end the process). Needs PostgreSQL (DATABASE_URL, else postgres://postgres@127.0.0.1:5432/postgres).
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPostgresDb, type TestDb } from '../helpers/db.js';

const BASE = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

async function reachable(): Promise<boolean> {
  const c = new pg.Client({ connectionString: BASE, connectionTimeoutMillis: 1_000 });
  c.on('error', () => undefined);
  try {
    await c.connect();
    return true;
  } catch {
    return false;
  } finally {
    await c.end().catch(() => undefined);
  }
}

describe.skipIf(!(await reachable()))('a transaction on PostgreSQL', () => {
  let testDb: TestDb;
  const unhandled: unknown[] = [];
  const onUncaught = (err: unknown) => unhandled.push(err);

  beforeAll(async () => {
    testDb = await createPostgresDb(BASE);
    process.on('uncaughtException', onUncaught);
  });
  afterAll(async () => {
    process.off('uncaughtException', onUncaught);
    await testDb.drop();
  });

  it('whose connection is dropped between two statements fails alone; the next one works', async () => {
    const admin = new pg.Client({ connectionString: BASE });
    await admin.connect();
    try {
      const failed = testDb.db.transaction(async (tx) => {
        const { rows } = await tx.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
        await admin.query('SELECT pg_terminate_backend($1)', [rows[0]!.pid]);
        // the server's goodbye arrives while no statement is running
        await new Promise((r) => setTimeout(r, 200));
        await tx.query('SELECT 1');
      });
      await expect(failed).rejects.toThrow();
      await new Promise((r) => setTimeout(r, 100));
      expect(unhandled).toEqual([]);
      expect((await testDb.db.transaction((tx) => tx.query<{ one: number }>('SELECT 1 AS one'))).rows).toEqual([{ one: 1 }]);
    } finally {
      await admin.end();
    }
  });
});
