/**
 * `npm start`'s last guard (src/last-resort.ts) in a real server process (`npm start`'s command,
 * on the compiled build): an exception thrown outside every guard and a rejection nobody handles
 * are logged at error level with their call id, counted in /metrics, and the server goes on
 * serving.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { rmSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../helpers/calls.js';
import { buildDist, madeDataDir, ROOT, scriptCommand } from '../helpers/built.js';

const FAULTS = path.join(import.meta.dirname, 'fixtures/escaping-errors.mjs');
let child: ChildProcess | undefined;
let dataDir: string;

beforeAll(async () => {
  // the database made as a first start makes it (the start is not what this tests)
  [dataDir] = await Promise.all([madeDataDir('sb-last-resort-'), buildDist()]);
}, 300_000);
afterAll(() => {
  if (child && child.exitCode === null) child.kill('SIGKILL');
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

const metric = (text: string, name: string) => Number(new RegExp(`^${name} (\\d+)$`, 'm').exec(text)?.[1] ?? NaN);

describe('an error that escapes every guard', () => {
  it('is logged with its call id, counted in /metrics, and the server keeps serving', async () => {
    const env: NodeJS.ProcessEnv = { ...process.env, DATA_DIR: dataDir, LOG_LEVEL: 'error', SIP_PORT: '0', PORT: '0' };
    delete env.DATABASE_URL;
    delete env.REDIS_URL;
    const start = scriptCommand('start', ['--import', FAULTS]);
    child = spawn(start.cmd, start.args, { cwd: ROOT, env });
    let stdout = '';
    let exited: number | null | undefined;
    child.stdout!.on('data', (d) => (stdout += d));
    child.stderr!.on('data', (d) => (stdout += d));
    child.on('exit', (code) => (exited = code));
    const url = await eventually('the server to serve', () => (stdout.includes('API docs') ? /serving on (http:\/\/\S+)/.exec(stdout)?.[1] : undefined), 60_000);

    const metrics = async () => (await fetch(`${url}/metrics`)).text();
    const before = await metrics();
    expect(metric(before, 'switchboard_uncaught_exceptions_total')).toBe(0);
    expect(before).toMatch(/# HELP switchboard_uncaught_exceptions_total Errors thrown outside every guard/);

    child.kill('SIGUSR2');
    const lines = await eventually(
      'both logged',
      () => {
        const logged = stdout
          .split('\n')
          .filter((l) => l.startsWith('{'))
          .map((l) => JSON.parse(l) as { level: number; msg: string; callId?: string; err?: { message: string } });
        const exception = logged.find((l) => l.msg.startsWith('uncaught exception'));
        const rejection = logged.find((l) => l.msg.startsWith('unhandled promise rejection'));
        return exception && rejection ? { exception, rejection } : undefined;
      },
      10_000,
    );
    expect(lines.exception).toMatchObject({ level: 50, callId: 'c0ffee00-0000-4000-8000-00000000e001', err: { message: 'thrown outside every guard' } });
    expect(lines.rejection).toMatchObject({ level: 50, callId: 'c0ffee00-0000-4000-8000-00000000e002', err: { message: 'rejected with nobody to handle it' } });

    const after = await metrics();
    expect(metric(after, 'switchboard_uncaught_exceptions_total')).toBe(1);
    expect(metric(after, 'switchboard_unhandled_rejections_total')).toBe(metric(before, 'switchboard_unhandled_rejections_total') + 1);
    // still up, still serving
    expect(exited).toBeUndefined();
    expect((await fetch(`${url}/healthz`)).status).toBe(200);

    child.kill('SIGTERM');
    await eventually('a clean stop', () => (exited === undefined ? undefined : { code: exited }), 30_000);
    expect(exited).toBe(0);
  }, 120_000);
});
