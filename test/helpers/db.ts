/**
 * Test databases: a fresh in-memory PGlite, a fresh PGlite folder copied from a migrated template
 * (what the calling servers run on), or a fresh database on the PostgreSQL server of DATABASE_URL
 * (created per test file, dropped afterwards).
 */
import { createHash, randomBytes } from 'node:crypto';
import { cpSync, existsSync, readFileSync, statfsSync, writeFileSync } from 'node:fs';
import { mkdtemp, readdir, readFile, rename, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { dumpPglite, initPgliteDir, openDb, type Db } from '../../src/store/db.js';
import { madeOnce, schemaKey } from './run-cache.js';

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

let image: Promise<Blob | undefined> | undefined;

/**
 * A migrated empty PGlite database's files, made once a run (test/helpers/run-cache.ts): each
 * in-memory database of the run starts from a copy, not from `initdb` and every migration (some
 * 5 s of CPU each). Undefined outside a vitest run.
 */
export function pgliteImage(): Promise<Blob | undefined> {
  image ??= (async () => {
    const file = await madeOnce(`pglite-image-${schemaKey()}.tar`, async (into) => {
      const db = await openDb({ dataDir: null });
      try {
        writeFileSync(into, Buffer.from(await (await dumpPglite(db)).arrayBuffer()));
      } finally {
        await db.close();
      }
    });
    return file ? new Blob([readFileSync(file)]) : undefined;
  })();
  return image;
}

/** A fresh in-memory PGlite, migrated (from the run's image when there is one). */
export async function openMemoryDb(): Promise<Db> {
  const from = await pgliteImage();
  return openDb({ dataDir: null, ...(from ? { image: from } : {}) });
}

export async function createTestDb(kind: DbKind): Promise<TestDb> {
  if (kind === 'pglite') {
    const db = await openMemoryDb();
    return { db, url: null, drop: () => db.close() };
  }
  const base = process.env.DATABASE_URL;
  if (!base) throw new Error('DATABASE_URL is not set');
  return createPostgresDb(base);
}

const MIGRATIONS = fileURLToPath(new URL('../../src/store/migrations/', import.meta.url));
/**
 * Where the template and the copies go (~40 MB each): memory (tmpfs) where there is room, a copy
 * takes ~0.1 s there; else the temp folder (a container's /dev/shm is often 64 MB).
 */
const BASE = (() => {
  try {
    const shm = statfsSync('/dev/shm');
    return shm.bavail * shm.bsize >= 1024 ** 3 ? '/dev/shm' : tmpdir();
  } catch {
    return tmpdir();
  }
})();
const COPY_PREFIX = 'sb-db-';
let template: Promise<string> | null = null;

/** The installed PGlite's version (its package.json, above its entry point: the package exports no path to it). */
async function pgliteVersion(): Promise<string> {
  let dir = dirname(createRequire(import.meta.url).resolve('@electric-sql/pglite'));
  for (;;) {
    const file = join(dir, 'package.json');
    if (existsSync(file)) {
      const pkg = JSON.parse(await readFile(file, 'utf8')) as { name?: string; version?: string };
      if (pkg.name === '@electric-sql/pglite') return pkg.version ?? '';
    }
    if (dirname(dir) === dir) throw new Error('the installed PGlite has no package.json');
    dir = dirname(dir);
  }
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
};

/**
 * The embedded database's folder as a server makes it at its first start (`initPgliteDir`: initdb
 * and every migration, in a child process), made once per schema and PGlite version and kept, so
 * that runs and test processes share it. What a killed test process left (its copies, a template
 * half made) is removed here.
 */
function pgliteTemplate(): Promise<string> {
  template ??= (async () => {
    for (const name of await readdir(BASE)) {
      const pid = Number((new RegExp(`^${COPY_PREFIX}(\\d+)-`).exec(name) ?? /^switchboard-test-pglite-\w+\.(\d+)\./.exec(name))?.[1] ?? 0);
      if (pid && !alive(pid)) await rm(join(BASE, name), { recursive: true, force: true });
    }
    const hash = createHash('sha256');
    hash.update(await pgliteVersion());
    for (const name of (await readdir(MIGRATIONS)).sort()) hash.update(name).update(await readFile(join(MIGRATIONS, name)));
    const dir = join(BASE, `switchboard-test-pglite-${hash.digest('hex').slice(0, 16)}`);
    if (existsSync(join(dir, 'PG_VERSION'))) return dir;
    // made beside it and renamed into place: a process that finds it finds it whole
    const building = `${dir}.${process.pid}.${randomBytes(4).toString('hex')}`;
    try {
      await initPgliteDir(building);
      await rename(building, dir);
    } catch (err) {
      // another process put its own in place first
      if (!existsSync(join(dir, 'PG_VERSION'))) throw err;
    } finally {
      await rm(building, { recursive: true, force: true });
    }
    return dir;
  })();
  return template;
}

/**
 * Puts a migrated embedded database where `openDb({ dataDir })` looks for one (`<dataDir>/pglite`),
 * as a server that had started there once would have left it: `openDb` then neither runs initdb
 * nor migrates.
 */
export async function seedPgliteDataDir(dataDir: string): Promise<void> {
  const from = await pgliteTemplate();
  // one synchronous copy: far quicker than fs.promises.cp's thousand small steps
  cpSync(from, join(dataDir, 'pglite'), { recursive: true });
}

/**
 * A fresh embedded database in a folder of its own, opened as a server opens its DATA_DIR
 * (`openDb({ dataDir })`): a copy of the migrated template, so that nothing is left to initdb or
 * migrate. A new in-memory PGlite runs initdb and every migration, which was most of a calling
 * server's start (2 s and more of CPU on a 2-core machine; the copy takes a tenth of a second).
 */
export async function createPgliteCopy(): Promise<TestDb> {
  const dir = await mkdtemp(join(BASE, `${COPY_PREFIX}${process.pid}-`));
  try {
    await seedPgliteDataDir(dir);
    const db = await openDb({ dataDir: dir });
    return {
      db,
      url: null,
      async drop() {
        await db.close().catch(() => undefined);
        await rm(dir, { recursive: true, force: true });
      },
    };
  } catch (err) {
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
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
