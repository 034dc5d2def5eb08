/**
 * What the test files of one `vitest run` make once and share: the first file that asks for a
 * thing makes it, the others (in this worker or the other) wait for it. The folder is the run's
 * (test/global-setup.ts), so nothing is kept from one run to the next. Outside a vitest run (the
 * benches) there is no folder: `madeOnce` answers null and the caller does the work itself.
 */
import { closeSync, existsSync, openSync, readFileSync, renameSync, rmSync, writeSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { readdirSync } from 'node:fs';
import path from 'node:path';

const ROOT = path.resolve(import.meta.dirname, '../..');

/**
 * A short hash of what a made database depends on (the migrations and src/store/db.ts), for its
 * name: in watch mode, a changed migration makes a new one.
 */
export function schemaKey(): string {
  const hash = createHash('sha256');
  const migrations = path.join(ROOT, 'src/store/migrations');
  for (const name of readdirSync(migrations).sort()) hash.update(name).update(readFileSync(path.join(migrations, name)));
  hash.update(readFileSync(path.join(ROOT, 'src/store/db.ts')));
  return hash.digest('hex').slice(0, 12);
}

/** The run's folder, or null outside a vitest run. */
export function runDir(): string | null {
  return process.env.SWITCHBOARD_TEST_RUN_DIR || null;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Takes the lock file `file` (waiting while a live process holds it); returns its release. */
async function lock(file: string, timeoutMs: number): Promise<() => void> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    try {
      const fd = openSync(file, 'wx');
      writeSync(fd, String(process.pid));
      closeSync(fd);
      return () => rmSync(file, { force: true });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    // a holder that died (a worker killed mid-run) leaves its lock behind
    let holder: number;
    try {
      holder = Number(readFileSync(file, 'utf8'));
    } catch {
      continue; // released meanwhile
    }
    if (holder > 0 && !alive(holder)) {
      rmSync(file, { force: true });
      continue;
    }
    if (Date.now() > until) throw new Error(`${file} was held for more than ${timeoutMs} ms`);
    await sleep(100);
  }
}

/**
 * Runs `fn` while holding the run's lock `name`: one test file at a time across the workers.
 * Outside a vitest run it just runs `fn`.
 */
export async function withRunLock<T>(name: string, fn: () => Promise<T>, timeoutMs = 300_000): Promise<T> {
  const dir = runDir();
  if (!dir) return fn();
  const release = await lock(path.join(dir, `${name}.lock`), timeoutMs);
  try {
    return await fn();
  } finally {
    release();
  }
}

const made = new Map<string, Promise<string | null>>();

/**
 * The path of `name` in the run's folder, made by `make` (which writes a file or a folder at the
 * path it is given) the first time a test file of the run asks for it. Null outside a vitest run.
 */
export function madeOnce(name: string, make: (into: string) => Promise<void>, timeoutMs = 300_000): Promise<string | null> {
  let p = made.get(name);
  if (!p) {
    p = (async () => {
      const dir = runDir();
      if (!dir) return null;
      const final = path.join(dir, name);
      if (existsSync(final)) return final;
      return withRunLock(
        name,
        async () => {
          // made while this file waited for the lock
          if (existsSync(final)) return final;
          const into = `${final}.${process.pid}`;
          try {
            await make(into);
            renameSync(into, final);
          } catch (err) {
            rmSync(into, { recursive: true, force: true });
            throw err;
          }
          return final;
        },
        timeoutMs,
      );
    })();
    made.set(name, p);
  }
  return p;
}
