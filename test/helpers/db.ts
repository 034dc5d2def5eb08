/**
 * Test databases: a fresh in-memory PGlite, or a fresh database on the PostgreSQL server of
 * DATABASE_URL (created per test file, dropped afterwards).
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { openDb, type Db } from '../../src/store/db.js';

export type DbKind = 'pglite' | 'postgres';

/** PGlite always; PostgreSQL too when DATABASE_URL is set (CI sets it). */
export function availableDbKinds(): DbKind[] {
  return process.env.DATABASE_URL ? ['pglite', 'postgres'] : ['pglite'];
}

/** The kind the whole-app tests run on: PostgreSQL when DATABASE_URL is set. */
export function defaultDbKind(): DbKind {
  return process.env.DATABASE_URL ? 'postgres' : 'pglite';
}

export interface TestDb {
  db: Db;
  url: string | null;
  drop(): Promise<void>;
}

export async function createTestDb(kind: DbKind): Promise<TestDb> {
  if (kind === 'pglite') {
    const db = await openDb({ dataDir: null });
    return { db, url: null, drop: () => db.close() };
  }
  const base = process.env.DATABASE_URL;
  if (!base) throw new Error('DATABASE_URL is not set');
  return createPostgresDb(base);
}

/** A fresh database on the PostgreSQL server of `base`, migrated; `drop()` closes and drops it. */
export async function createPostgresDb(base: string, prefix = 'sb_test'): Promise<TestDb & { url: string }> {
  const name = `${prefix}_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: base });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(base);
  url.pathname = `/${name}`;
  const db = await openDb({ databaseUrl: url.toString() });
  return {
    db,
    url: url.toString(),
    async drop() {
      // a test may have closed it already
      await db.close().catch(() => undefined);
      const c = new pg.Client({ connectionString: base });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await c.end();
    },
  };
}
