/**
 * The two commands users run: `npm start` (embedded default, first-start key, data-dir lock,
 * graceful stop) and `npm run keys`, as real processes.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { SERVER_HEAP_FLAGS } from '../../src/heap.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const NODE = process.execPath;
const TS = ['--import', 'tsx'];
const dirs: string[] = [];
const children: ChildProcess[] = [];

function tempDataDir(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'sb-data-'));
  dirs.push(dir);
  return dir;
}

function baseEnv(dataDir: string): NodeJS.ProcessEnv {
  // SIP off: its default port, 5060, may be another test's
  const env: NodeJS.ProcessEnv = { ...process.env, DATA_DIR: dataDir, LOG_LEVEL: 'silent', SIP_PORT: '0' };
  delete env.DATABASE_URL;
  delete env.REDIS_URL;
  return env;
}

function run(cmd: string, args: string[], env: NodeJS.ProcessEnv) {
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    const child = spawn(cmd, args, { cwd: ROOT, env });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

const keys = (dataDir: string, ...args: string[]) => run(NODE, [...TS, 'src/cli/keys.ts', ...args], baseEnv(dataDir));

/** Starts the server and resolves once it has printed its banner. */
function startServer(dataDir: string) {
  // as npm start runs it: with the server's heap flags
  const child = spawn(NODE, [...SERVER_HEAP_FLAGS, ...TS, 'src/main.ts'], { cwd: ROOT, env: { ...baseEnv(dataDir), PORT: '0' } });
  children.push(child);
  let stdout = '';
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += d));
  const ready = new Promise<{ url: string; stdout: string }>((resolve, reject) => {
    child.stdout.on('data', (d) => {
      stdout += d;
      const m = /serving on (http:\/\/\S+)/.exec(stdout);
      if (m && stdout.includes('API docs')) resolve({ url: m[1]!, stdout });
    });
    child.on('exit', (code) => reject(new Error(`server exited ${code}: ${stderr}`)));
  });
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, ready, exited, stderr: () => stderr };
}

afterAll(() => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

// real processes that start through tsx (and PGlite's migrations): on a loaded 2-core machine a start can take most of a minute
describe('npm run keys', () => {
  it('creates a key (alone on the last line of stdout), lists and revokes it', { timeout: 120_000 }, async () => {
    const dataDir = tempDataDir();
    const created = await run('npm', ['run', '--silent', 'keys', '--', 'create', '--org', 'Acme'], baseEnv(dataDir));
    expect(created.code).toBe(0);
    const lines = created.stdout.trim().split('\n');
    const key = lines[lines.length - 1]!;
    expect(key).toMatch(/^sk_live_[A-Za-z0-9_-]{43}$/);

    const listed = await keys(dataDir, 'list');
    expect(listed.code).toBe(0);
    expect(listed.stdout).toContain(key.slice(0, 16));
    expect(listed.stdout).toContain('Acme');
    expect(listed.stdout).not.toContain(key);

    const revoked = await keys(dataDir, 'revoke', key.slice(0, 16));
    expect(revoked.code).toBe(0);
    expect((await keys(dataDir, 'list')).stdout).toContain('revoked');
    expect((await keys(dataDir, 'revoke', key.slice(0, 16))).code).toBe(1);
  });

  it('explains wrong usage with exit code 2', { timeout: 120_000 }, async () => {
    const dataDir = tempDataDir();
    const noOrg = await keys(dataDir, 'create');
    expect(noOrg.code).toBe(2);
    expect(noOrg.stderr).toContain('--org');
    expect((await keys(dataDir, 'frobnicate')).code).toBe(2);
  });
});

describe('npm start on the embedded default', () => {
  it('serves, prints a development key once, refuses a second holder of DATA_DIR, stops cleanly', { timeout: 120_000 }, async () => {
    const dataDir = tempDataDir();
    const server = startServer(dataDir);
    const { url, stdout } = await server.ready;
    const key = /Development API key \(shown once, keep it\): (sk_live_\S+)/.exec(stdout)?.[1];
    expect(key).toBeDefined();

    const ok = await fetch(`${url}/workflows`, { headers: { authorization: `Bearer ${key}` } });
    expect(ok.status).toBe(200);
    expect(await ok.json()).toEqual({ workflows: [] });
    expect((await fetch(`${url}/workflows`)).status).toBe(401);

    // the embedded database is single-process: the keys command says so plainly
    const busy = await keys(dataDir, 'create', '--org', 'Other');
    expect(busy.code).toBe(1);
    expect(busy.stderr).toContain('in use by another Switchboard process');
    expect(busy.stderr).toContain('DATABASE_URL');

    server.child.kill('SIGTERM');
    expect(await server.exited).toBe(0);
    expect(existsSync(path.join(dataDir, 'switchboard.lock'))).toBe(false);

    // second start: same data, no new development key, the old key still works
    const again = startServer(dataDir);
    const second = await again.ready;
    expect(second.stdout).not.toContain('Development API key');
    const still = await fetch(`${second.url}/workflows`, { headers: { authorization: `Bearer ${key}` } });
    expect(still.status).toBe(200);
    again.child.kill('SIGINT');
    expect(await again.exited).toBe(0);
  });

  it('takes over a stale lock left by a killed process', { timeout: 120_000 }, async () => {
    const dataDir = tempDataDir();
    const first = startServer(dataDir);
    await first.ready;
    first.child.kill('SIGKILL');
    await first.exited;
    expect(existsSync(path.join(dataDir, 'switchboard.lock'))).toBe(true);
    const second = startServer(dataDir);
    await second.ready;
    second.child.kill('SIGTERM');
    expect(await second.exited).toBe(0);
  });

  it('reports a bad configuration plainly', { timeout: 120_000 }, async () => {
    const r = await run(NODE, [...TS, 'src/main.ts'], { ...baseEnv(tempDataDir()), PORT: 'eighty' });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('Invalid configuration');
    expect(r.stderr).toContain('PORT');
  });
});
