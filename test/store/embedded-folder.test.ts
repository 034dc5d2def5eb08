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

describe('the embedded database folder', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'sb-embedded-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('the child makes the folder with every migration applied, before the server opens it', async () => {
    const folder = path.join(dir, 'direct');
    await initPgliteDir(folder);
    const db = await PGlite.create(folder);
    try {
      const { rows } = await db.query<{ name: string }>('SELECT name FROM schema_migrations ORDER BY name');
      expect(rows.map((r) => r.name)).toEqual(migrations);
      const { rows: tables } = await db.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM information_schema.tables WHERE table_name IN ('workflows', 'assistants', 'calls')",
      );
      expect(tables[0]?.n).toBe(3);
    } finally {
      await db.close();
    }
  }, 60_000);

  it('a first start finds every migration applied (by the child), and a restart too', async () => {
    for (const start of ['first', 'restart']) {
      const db = await openDb({ dataDir: dir });
      try {
        const { rows } = await db.query<{ name: string }>('SELECT name FROM schema_migrations ORDER BY name');
        expect(rows.map((r) => r.name), start).toEqual(migrations);
        expect(await migrate(db), start).toEqual([]);
        // the schema is there, not only its record
        const { rows: tables } = await db.query<{ n: number }>(
          "SELECT count(*)::int AS n FROM information_schema.tables WHERE table_name IN ('workflows', 'assistants', 'calls')",
        );
        expect(tables[0]?.n).toBe(3);
      } finally {
        await db.close();
      }
    }
  }, 60_000);
});
