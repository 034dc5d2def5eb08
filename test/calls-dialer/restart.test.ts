/**
 * A process with queued calls is killed (SIGKILL, mid-campaign) and another one dials them, none
 * twice. The killed one is a child Node process (child-dialer.ts) that queues a campaign and dials
 * it at a low rate, recording each dial (dial-log.ts); the test process then starts a dialer on
 * the same queue: the same BullMQ queue on Redis, or, in process, the same PostgreSQL database
 * (not PGlite: a killed writer must not be able to damage the files the next one opens).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { BullMqDialer } from '../../src/calls/dialer-bullmq.js';
import { InProcessDialer, type Dialer } from '../../src/calls/dialer.js';
import { dialLogHooks, redisDialLog, sqlDialLog, type DialLog } from './dial-log.js';
import { createPostgresDb, insertOrganization, postgresBase, REDIS_URL, redisReachable, silent, sleep, TEST_PREFIX, waitFor, type PostgresTestDb } from './harness.js';

const hasRedis = await redisReachable();
const pgBase = await postgresBase();
const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '../..');

const CALLS = 40;
const LIMITS = { maxConcurrentCalls: 3, callsPerSecond: 20 };
/** The child's 6th dial hangs after the carrier accepted it and before the queue hears: it is killed there. */
const HANG_AFTER = 6;

interface Child {
  process: ChildProcess;
  output: () => string;
}

function startChild(env: Record<string, string>): Child {
  let output = '';
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(here, 'child-dialer.ts')], {
    cwd: root,
    env: { ...process.env, ...env, DIALER_MAX: String(LIMITS.maxConcurrentCalls), DIALER_CPS: String(LIMITS.callsPerSecond), DIALER_HANG_AFTER: String(HANG_AFTER) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
  return { process: child, output: () => output };
}

async function killMidCampaign(child: Child, log: DialLog): Promise<number> {
  await waitFor(
    async () => {
      if (child.process.exitCode !== null) throw new Error(`the child exited early:\n${child.output()}`);
      return (await log.all()).length >= HANG_AFTER;
    },
    30_000,
    'the child\'s first dials',
  );
  const exited = new Promise((r) => child.process.once('exit', r));
  child.process.kill('SIGKILL');
  await exited;
  return (await log.all()).length;
}

/** Every call dialled exactly once, some by the killed process and the rest by this one. */
async function expectEachDialledOnce(log: DialLog, callIds: string[], childPid: number, dialledBeforeKill: number, seen: Seen) {
  const entries = await log.all();
  const times = new Map<string, number>();
  for (const e of entries) times.set(e.callId, (times.get(e.callId) ?? 0) + 1);
  expect([...times.keys()].sort()).toEqual([...callIds].sort());
  expect([...times.values()].every((n) => n === 1)).toBe(true);
  const byChild = entries.filter((e) => e.pid === childPid).length;
  expect(byChild).toBeGreaterThanOrEqual(dialledBeforeKill);
  expect(byChild).toBeLessThan(CALLS);
  expect(entries.filter((e) => e.pid === process.pid).length).toBe(CALLS - byChild);
  // the call killed mid-dial came back as attempt 2, and the record said it was dialled
  expect(seen.laterAttempts).toBeGreaterThanOrEqual(1);
  expect(seen.skipped).toBeGreaterThanOrEqual(1);
}

type Seen = { laterAttempts: number; skipped: number };

describe('a killed dialer\'s calls are dialled by another process, none twice', () => {
  const cleanups: (() => Promise<void>)[] = [];
  let child: Child | null = null;

  afterEach(async () => {
    if (child && child.process.exitCode === null && child.process.signalCode === null) child.process.kill('SIGKILL');
    child = null;
    for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
  });

  it.skipIf(!hasRedis)('BullMQ: the same queue on Redis', async () => {
    const queueName = `dialer-${randomUUID()}`;
    const org = randomUUID();
    const callIds = Array.from({ length: CALLS }, () => randomUUID());
    const log = redisDialLog(REDIS_URL, `${TEST_PREFIX}:${queueName}`);
    cleanups.push(() => log.close());
    child = startChild({ DIALER_MODE: 'bullmq', REDIS_URL, DIALER_QUEUE: queueName, DIALER_PREFIX: TEST_PREFIX, DIALER_ORG: org, DIALER_CALLS: callIds.join(',') });
    const childPid = child.process.pid!;
    const dialledBeforeKill = await killMidCampaign(child, log);

    const dialer: Dialer = new BullMqDialer({
      redisUrl: REDIS_URL,
      queueName,
      prefix: TEST_PREFIX,
      logger: silent,
      stalledIntervalMs: 300,
      dialClaimMs: 1_500,
      // the killed process's calls hold slots nobody releases: take them back soon
      staleSlotMs: 300,
      fullRecheckMs: 100,
    });
    cleanups.push(async () => {
      await dialer.close();
      const cleaner = new BullMqDialer({ redisUrl: REDIS_URL, queueName, prefix: TEST_PREFIX, logger: silent });
      await cleaner.obliterate();
      await cleaner.close();
    });
    const seen: Seen = { laterAttempts: 0, skipped: 0 };
    await dialer.start(dialLogHooks(log, dialer, LIMITS, { seen }));
    await waitFor(async () => new Set((await log.all()).map((e) => e.callId)).size === CALLS, 30_000, 'every call dialled');
    await waitFor(async () => (await dialer.queuedCount()) === 0, 15_000, 'an empty queue');
    await sleep(300);
    await expectEachDialledOnce(log, callIds, childPid, dialledBeforeKill, seen);
  });

  it.skipIf(!pgBase)('in process: the same PostgreSQL database', async () => {
    const pgDb: PostgresTestDb = await createPostgresDb(pgBase!);
    cleanups.push(() => pgDb.drop());
    const org = await insertOrganization(pgDb.db);
    const log = await sqlDialLog(pgDb.db);
    const callIds = Array.from({ length: CALLS }, () => randomUUID());
    child = startChild({ DIALER_MODE: 'sql', DIALER_DATABASE_URL: pgDb.url, DIALER_ORG: org, DIALER_CALLS: callIds.join(',') });
    const childPid = child.process.pid!;
    const dialledBeforeKill = await killMidCampaign(child, log);

    const dialer = new InProcessDialer({ db: pgDb.db, logger: silent });
    cleanups.push(() => dialer.close());
    expect(await dialer.queuedCount()).toBeGreaterThan(0);
    const seen: Seen = { laterAttempts: 0, skipped: 0 };
    await dialer.start(dialLogHooks(log, dialer, LIMITS, { seen }));
    await waitFor(async () => new Set((await log.all()).map((e) => e.callId)).size === CALLS, 30_000, 'every call dialled');
    await waitFor(async () => (await dialer.queuedCount()) === 0, 15_000, 'an empty queue');
    await sleep(200);
    await expectEachDialledOnce(log, callIds, childPid, dialledBeforeKill, seen);
  });
});
