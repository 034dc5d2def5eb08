/**
 * The two commands users run: `npm start` (embedded default, first-start key, data-dir lock,
 * graceful stop) and `npm run keys`, as real processes: the compiled build with the commands of
 * package.json (built once a run, test/helpers/built.ts). Only the first start's case makes its
 * embedded database; the others start from a copy of one made once a run, as a second start would.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import dgram from 'node:dgram';
import net from 'node:net';
import { mkdtempSync, rmSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildDist, madeDataDir, ROOT, scriptCommand } from '../helpers/built.js';

const dirs: string[] = [];
const children: ChildProcess[] = [];

/** An empty DATA_DIR: a first start makes the database in it. */
function tempDataDir(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'sb-data-'));
  dirs.push(dir);
  return dir;
}

/** A DATA_DIR with the database made (no keys): what a first start that failed at once leaves. */
async function madeDir(): Promise<string> {
  const dir = await madeDataDir();
  dirs.push(dir);
  return dir;
}

beforeAll(() => buildDist(), 300_000);

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

const KEYS = scriptCommand('keys');
const keys = (dataDir: string, ...args: string[]) => run(KEYS.cmd, [...KEYS.args, ...args], baseEnv(dataDir));
/** `npm start`'s command: its Node options (the heap flags among them) and dist/src/main.js. */
const START = scriptCommand('start');

/** Starts the server and resolves once it has printed its banner; `env` over the test's own (undefined removes a variable). */
function startServer(dataDir: string, env: Record<string, string | undefined> = {}) {
  const merged: NodeJS.ProcessEnv = { ...baseEnv(dataDir), PORT: '0', ...env };
  for (const [k, v] of Object.entries(env)) if (v === undefined) delete merged[k];
  const child = spawn(START.cmd, START.args, { cwd: ROOT, env: merged });
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
  ready.catch(() => undefined); // a start expected to fail is awaited through `exited`
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, ready, exited, stderr: () => stderr, stdout: () => stdout };
}

afterAll(() => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

// real processes (and PGlite): on a loaded 2-core machine a start can take most of a minute
describe('npm run keys', () => {
  it('creates a key (alone on the last line of stdout), lists and revokes it', { timeout: 120_000 }, async () => {
    const dataDir = await madeDir();
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

  it('a start that fails after making the development key prints it; the next start makes none, and the key works; killed, it leaves a stale lock the next start takes over', { timeout: 180_000 }, async () => {
    const dataDir = await madeDir();
    const holder = net.createServer();
    await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
    const port = (holder.address() as net.AddressInfo).port;
    const failed = startServer(dataDir, { PORT: String(port), HOST: '127.0.0.1' });
    expect(await failed.exited).toBe(1);
    await new Promise<void>((resolve) => holder.close(() => resolve()));
    expect(failed.stderr()).toContain(`PORT ${port} is in use on 127.0.0.1`);
    const key = /Development API key made by this start \(shown once, keep it; the next start will not show it\): (sk_live_\S+)/.exec(failed.stderr())?.[1];
    expect(key).toMatch(/^sk_live_[A-Za-z0-9_-]{43}$/);

    const again = startServer(dataDir);
    const { url, stdout } = await again.ready;
    expect(stdout).not.toContain('Development API key');
    expect((await fetch(`${url}/workflows`, { headers: { authorization: `Bearer ${key}` } })).status).toBe(200);

    again.child.kill('SIGKILL');
    await again.exited;
    expect(existsSync(path.join(dataDir, 'switchboard.lock'))).toBe(true);
    const third = startServer(dataDir);
    await third.ready;
    third.child.kill('SIGTERM');
    expect(await third.exited).toBe(0);
  });

  it('SIP on its default port gives way to another program holding it (one warning); a SIP_PORT set on purpose stops the start', { timeout: 180_000 }, async () => {
    // 5060 held here, unless another program holds it already: either way it is taken
    const udp = dgram.createSocket('udp4');
    await new Promise<void>((resolve) => {
      udp.once('error', () => resolve());
      udp.bind(5060, '0.0.0.0', () => resolve());
    });
    try {
      const server = startServer(await madeDir(), { SIP_PORT: undefined });
      const { url, stdout } = await server.ready;
      expect(stdout).toContain('SIP:      off: port 5060 is in use by another program; set SIP_PORT to a free port');
      expect((await fetch(`${url}/healthz`)).status).toBe(200);
      server.child.kill('SIGTERM');
      expect(await server.exited).toBe(0);

      const explicit = startServer(await madeDir(), { SIP_PORT: '5060' });
      expect(await explicit.exited).toBe(1);
      expect(explicit.stderr()).toContain('Switchboard could not start: SIP_PORT 5060 is in use (UDP or TCP)');
      expect(explicit.stderr()).toContain('Development API key made by this start');
    } finally {
      udp.close();
    }
  });

  it('reports a bad configuration plainly', { timeout: 120_000 }, async () => {
    const r = await run(START.cmd, START.args, { ...baseEnv(tempDataDir()), PORT: 'eighty' });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('Invalid configuration');
    expect(r.stderr).toContain('PORT');
  });
});
