/** The embedded database's folder: made, schema included, by a child process on a first start. */
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { PGlite } from '@electric-sql/pglite';
import { initPgliteDir, migrate, openDb } from '../../src/store/db.js';

const migrations = readdirSync(path.join(path.dirname(fileURLToPath(import.meta.url)), '../../src/store/migrations'))
  .filter((f) => f.endsWith('.sql'))
  .sort();

type Query = (sql: string) => Promise<{ rows: unknown[] }>;

/** Every migration recorded, and the schema there (not only its record). */
async function expectMigrated(query: Query, what: string): Promise<void> {
  const { rows } = (await query('SELECT name FROM schema_migrations ORDER BY name')) as { rows: { name: string }[] };
  expect(rows.map((r) => r.name), what).toEqual(migrations);
  const { rows: tables } = (await query(
    "SELECT count(*)::int AS n FROM information_schema.tables WHERE table_name IN ('workflows', 'assistants', 'calls')",
  )) as { rows: { n: number }[] };
  expect(tables[0]?.n, what).toBe(3);
}

describe('the embedded database folder', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'sb-embedded-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  // one folder made (initdb and every migration take seconds): the child's, then opened by the server
  it('the child makes the folder with every migration applied, before the server opens it; the server opens it, and again after a restart, with nothing left to migrate', async () => {
    const folder = path.join(dir, 'pglite');
    await initPgliteDir(folder);
    const db = await PGlite.create(folder);
    try {
      await expectMigrated((sql) => db.query(sql), 'the child');
    } finally {
      await db.close();
    }
    // what openDb opens in DATA_DIR, as on a first start once the child is done
    for (const start of ['first', 'restart']) {
      const db = await openDb({ dataDir: dir });
      try {
        await expectMigrated((sql) => db.query(sql), start);
        expect(await migrate(db), start).toEqual([]);
      } finally {
        await db.close();
      }
    }
  }, 120_000);
});
