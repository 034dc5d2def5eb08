/**
 * One small interface over PostgreSQL (`pg`) and the embedded PGlite, so that the repositories
 * run the same SQL on both.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import pg from 'pg';
import type { PGlite, PGliteOptions } from '@electric-sql/pglite';
import { acquireDataDirLock, type DataDirLock } from './lock.js';

export interface QueryResult<T> {
  rows: T[];
}

export interface Queryable {
  query<T = Record<string, unknown>>(sql: string, params?: unknown[]): Promise<QueryResult<T>>;
}

export interface Db extends Queryable {
  readonly kind: 'postgres' | 'pglite';
  /** Runs `fn` in one transaction; rolls back when it throws. */
  transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

/** PostgreSQL error with its SQLSTATE code (both drivers report `code`, `constraint`). */
export interface PgError extends Error {
  code?: string;
  constraint?: string;
}

export function isPgError(err: unknown, code: string): err is PgError {
  return typeof err === 'object' && err !== null && (err as PgError).code === code;
}

export const PG_FOREIGN_KEY_VIOLATION = '23503';
export const PG_UNIQUE_VIOLATION = '23505';
/** ON DELETE RESTRICT reports this rather than 23503. */
export const PG_RESTRICT_VIOLATION = '23001';

/** A delete refused because rows still reference the row. */
export const isStillReferenced = (err: unknown) =>
  isPgError(err, PG_RESTRICT_VIOLATION) || isPgError(err, PG_FOREIGN_KEY_VIOLATION);

class PostgresDb implements Db {
  readonly kind = 'postgres' as const;
  constructor(private readonly pool: pg.Pool) {}

  async query<T>(sql: string, params: unknown[] = []): Promise<QueryResult<T>> {
    const r = await this.pool.query(sql, params as unknown[]);
    return { rows: r.rows as T[] };
  }

  async transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    // a connection dropped between two statements fails the next one; its 'error' must not go unheard
    let lost: Error | null = null;
    const onError = (err: Error) => (lost = err);
    client.on('error', onError);
    try {
      await client.query('BEGIN');
      const tx: Queryable = {
        query: async <R>(sql: string, params: unknown[] = []) => {
          const r = await client.query(sql, params as unknown[]);
          return { rows: r.rows as R[] };
        },
      };
      const result = await fn(tx);
      await client.query('COMMIT');
      return result;
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    } finally {
      client.off('error', onError);
      // a broken connection is destroyed, not handed to the next caller
      client.release(lost ?? undefined);
    }
  }

  async close(): Promise<void> {
    await this.pool.end();
  }
}

class PGliteDb implements Db {
  readonly kind = 'pglite' as const;
  constructor(
    private readonly db: PGlite,
    private readonly lock: DataDirLock | null,
  ) {}

  async query<T>(sql: string, params: unknown[] = []): Promise<QueryResult<T>> {
    const r = await this.db.query<T>(sql, params);
    return { rows: r.rows };
  }

  transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
    return this.db.transaction(async (t) =>
      fn({
        query: async <R>(sql: string, params: unknown[] = []) => {
          const r = await t.query<R>(sql, params);
          return { rows: r.rows };
        },
      }),
    );
  }

  async close(): Promise<void> {
    await this.db.close();
    this.lock?.release();
  }

  /** The database's files as an uncompressed tar. */
  async dump(): Promise<Blob> {
    return this.db.dumpDataDir('none');
  }
}

/** An embedded database's files (a tar) for `openDb`'s `image`. */
export function dumpPglite(db: Db): Promise<Blob> {
  if (!(db instanceof PGliteDb)) throw new Error('only an embedded (PGlite) database can be dumped');
  return db.dump();
}

export interface OpenDbOptions {
  databaseUrl?: string | undefined;
  /** Folder of the embedded database; `null` keeps it in memory (tests). */
  dataDir?: string | null;
  /**
   * In memory only: start from these files (`dumpPglite` of a migrated database) rather than
   * from an empty cluster, which spares `initdb` and the migrations (the tests open many). The
   * migrations not in it still run.
   */
  image?: Blob;
}

/**
 * The embedded PostgreSQL's memory settings. PGlite's defaults (128 MB of shared buffers, as a
 * server's) hold about 290 MB of WebAssembly memory from the start; a single-process embedded
 * database serving one deployment needs far less, and WebAssembly memory never shrinks once
 * grown. With these an opened database holds about 140 MB less (docs/benchmarks.md, "Start-up and
 * idle memory").
 */
const PGLITE_CONF: PGliteOptions = {
  postgresqlconf: ['shared_buffers=16MB', 'wal_buffers=1MB', 'work_mem=2MB', 'maintenance_work_mem=16MB'],
};

/** PGlite, loaded only when the embedded database is used (a deployment on PostgreSQL never loads it). */
async function pglite(): Promise<typeof PGlite> {
  return (await import('@electric-sql/pglite')).PGlite;
}

/**
 * Creates the embedded database's folder in a child process, schema included: `initdb` in
 * WebAssembly grows its memory to some 850 MB, and the first migrations some 60 MB more, which
 * the server would keep for its whole life (WebAssembly memory never shrinks). The child exits
 * and gives it back; the server then opens the folder as on any restart, with nothing left to
 * migrate. Does nothing when the folder exists.
 */
export async function initPgliteDir(dir: string): Promise<void> {
  if (existsSync(path.join(dir, 'PG_VERSION'))) return;
  const entry = createRequire(import.meta.url).resolve('@electric-sql/pglite');
  // the child runs the queries `migrate` would run on an empty database, in one transaction
  const queries = [...MIGRATION_PREAMBLE, ...pendingMigrations(new Set()).flatMap((m) => m.queries)];
  const code = `const { PGlite } = await import(${JSON.stringify(pathToFileURL(entry).href)});
let input = '';
for await (const chunk of process.stdin) input += chunk;
const db = await PGlite.create(${JSON.stringify(dir)}, ${JSON.stringify(PGLITE_CONF)});
await db.transaction(async (tx) => { for (const q of JSON.parse(input)) await tx.query(q.sql, q.params); });
await db.close();`;
  await new Promise<void>((resolve, reject) => {
    const child = spawn(process.execPath, ['--input-type=module', '-e', code], { stdio: ['pipe', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`creating the embedded database failed (${code}): ${stderr.trim()}`))));
    child.stdin.on('error', () => undefined); // an early exit is reported by 'exit'
    child.stdin.end(JSON.stringify(queries));
  });
}

/** Opens PostgreSQL when a URL is given, else PGlite, and brings the schema up to date. */
export async function openDb(options: OpenDbOptions): Promise<Db> {
  let db: Db;
  if (options.databaseUrl) {
    // a database that does not answer is an outage in seconds (503, the outbox), not a request that hangs
    const pool = new pg.Pool({ connectionString: options.databaseUrl, max: 10, connectionTimeoutMillis: 5_000 });
    // an idle client's error (server restart) must not crash the process
    pool.on('error', () => undefined);
    db = new PostgresDb(pool);
  } else if (options.dataDir) {
    const dir = path.resolve(options.dataDir);
    mkdirSync(dir, { recursive: true });
    const lock = acquireDataDirLock(dir);
    try {
      const folder = path.join(dir, 'pglite');
      await initPgliteDir(folder);
      db = new PGliteDb(await (await pglite()).create(folder, PGLITE_CONF), lock);
    } catch (err) {
      lock.release();
      throw err;
    }
  } else {
    db = new PGliteDb(await (await pglite()).create(options.image ? { ...PGLITE_CONF, loadDataDir: options.image } : PGLITE_CONF), null);
  }
  try {
    await migrate(db);
  } catch (err) {
    await db.close().catch(() => undefined);
    throw err;
  }
  return db;
}

const MIGRATIONS_DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), 'migrations');
// any fixed number: serializes migrations of processes starting at once on one PostgreSQL
const MIGRATION_LOCK_KEY = 7_285_310_441;

interface MigrationQuery {
  sql: string;
  params: unknown[];
}

/** What every migration run starts with: the lock, and the table of applied migrations. */
const MIGRATION_PREAMBLE: MigrationQuery[] = [
  { sql: 'SELECT pg_advisory_xact_lock($1)', params: [MIGRATION_LOCK_KEY] },
  {
    sql: 'CREATE TABLE IF NOT EXISTS schema_migrations (name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())',
    params: [],
  },
];

/** The migrations not in `done`, in name order, each with its statements and its record. */
function pendingMigrations(done: Set<string>): { name: string; queries: MigrationQuery[] }[] {
  return readdirSync(MIGRATIONS_DIR)
    .filter((f) => f.endsWith('.sql') && !done.has(f))
    .sort()
    .map((name) => ({
      name,
      queries: [
        ...splitSql(readFileSync(path.join(MIGRATIONS_DIR, name), 'utf8')).map((sql) => ({ sql, params: [] })),
        { sql: 'INSERT INTO schema_migrations (name) VALUES ($1)', params: [name] },
      ],
    }));
}

/** Applies `migrations/*.sql` not yet applied, in name order, all in one transaction. */
export async function migrate(db: Db): Promise<string[]> {
  return db.transaction(async (tx) => {
    for (const q of MIGRATION_PREAMBLE) await tx.query(q.sql, q.params);
    const done = new Set(
      (await tx.query<{ name: string }>('SELECT name FROM schema_migrations')).rows.map(
        (r) => r.name,
      ),
    );
    const pending = pendingMigrations(done);
    for (const m of pending) for (const q of m.queries) await tx.query(q.sql, q.params);
    return pending.map((m) => m.name);
  });
}

/** Splits a migration into statements (our migrations use no `;` inside strings or bodies). */
function splitSql(sql: string): string[] {
  return sql
    .split('\n')
    .filter((line) => !line.trimStart().startsWith('--'))
    .join('\n')
    .split(';')
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
}
