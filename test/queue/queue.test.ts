/**
 * The job queue (src/queue/) on both backends, with the same assertions: in process, and BullMQ on
 * a real Redis (REDIS_URL, else redis://127.0.0.1:6379). Each Redis test has its own queue name
 * and removes its keys.
 */
import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { createQueues, type JobHandler, type JobQueue, type JobRun, type Queues } from '../../src/queue/index.js';
import { RedisConnections } from '../../src/redis.js';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const silent = pino({ level: 'silent' });

async function waitFor(check: () => boolean, what: string, timeoutMs = 10_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

interface Work {
  n: number;
}

describe.each(['in-process', 'redis'] as const)('job queue (%s)', (backend) => {
  const owners: RedisConnections[] = [];
  const open: JobQueue<Work>[] = [];

  const queues = (): Queues => {
    if (backend === 'in-process') return createQueues({ redis: null });
    const redis = new RedisConnections(REDIS_URL, silent);
    owners.push(redis);
    return createQueues({ redis });
  };
  const newQueue = (name: string, handler: JobHandler<Work>, from = queues()): JobQueue<Work> => {
    const q = from.create<Work>({ name, handler, logger: silent, prefix: 'sbtest', concurrency: 8 });
    open.push(q);
    return q;
  };

  afterEach(async () => {
    const last = open.pop();
    for (const q of open.splice(0)) await q.close();
    if (last) {
      await last.obliterate();
      await last.close();
    }
    for (const redis of owners.splice(0)) await redis.close();
  });

  it('is the backend asked for', () => {
    expect(queues().backend).toBe(backend);
  });

  it('attempts every job; a retry comes back with the next attempt number', async () => {
    const runs: JobRun<Work>[] = [];
    const q = newQueue(`q-${randomUUID()}`, async (job) => {
      runs.push(job);
      return job.data.n === 2 && job.attempt < 3 ? { retryInMs: 50 } : 'done';
    });
    await q.start();
    for (const n of [1, 2, 3]) await q.add({ id: `job-${n}-${randomUUID()}`, data: { n } });
    await waitFor(() => runs.filter((r) => r.data.n === 2).length === 3, 'three attempts of job 2');
    await q.whenIdle();
    expect(runs.filter((r) => r.data.n !== 2).map((r) => [r.data.n, r.attempt]).sort()).toEqual([[1, 1], [3, 1]]);
    expect(runs.filter((r) => r.data.n === 2).map((r) => r.attempt)).toEqual([1, 2, 3]);
  });

  it('keeps a group in order behind its retried head; other groups do not wait for it', async () => {
    const done: string[] = [];
    let failedOnce = false;
    const q = newQueue(`q-${randomUUID()}`, async (job) => {
      if (job.group === 'a' && job.data.n === 1 && !failedOnce) {
        failedOnce = true;
        return { retryInMs: 400 };
      }
      done.push(`${job.group}${job.data.n}`);
      return 'done';
    });
    for (const n of [1, 2, 3]) await q.add({ id: randomUUID(), group: 'a', data: { n } });
    for (const n of [1, 2]) await q.add({ id: randomUUID(), group: 'b', data: { n } });
    await q.start();
    await waitFor(() => done.length === 5, 'five jobs done');
    expect(done.filter((d) => d.startsWith('a'))).toEqual(['a1', 'a2', 'a3']);
    expect(done.filter((d) => d.startsWith('b'))).toEqual(['b1', 'b2']);
    // b went on while a's head waited for its retry
    expect(done.indexOf('b2')).toBeLessThan(done.indexOf('a1'));
  });

  it('counts on from the attempts a job made elsewhere', async () => {
    const attempts: number[] = [];
    const q = newQueue(`q-${randomUUID()}`, async (job) => {
      attempts.push(job.attempt);
      return 'done';
    });
    await q.start();
    await q.add({ id: randomUUID(), group: 'g', data: { n: 1 }, attemptsMade: 2 });
    await q.add({ id: randomUUID(), data: { n: 2 }, attemptsMade: 4 });
    await waitFor(() => attempts.length === 2, 'two attempts');
    expect(attempts.sort()).toEqual([3, 5]);
  });

  it('holds a job until it is done', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let finished = 0;
    const q = newQueue(`q-${randomUUID()}`, async () => {
      await gate;
      finished += 1;
      return 'done';
    });
    const grouped = { id: randomUUID(), group: 'g', data: { n: 1 } };
    const single = { id: randomUUID(), data: { n: 2 } };
    await q.add(grouped);
    await q.add(single);
    expect(await q.holds(grouped)).toBe(true);
    expect(await q.holds(single)).toBe(true);
    expect(await q.holds({ id: randomUUID(), group: 'g' })).toBe(false);
    await q.start();
    release();
    await waitFor(() => finished === 2, 'both done');
    // BullMQ removes a completed job a moment after the handler returns
    const end = Date.now() + 5_000;
    while ((await q.holds(grouped)) || (await q.holds(single))) {
      if (Date.now() > end) throw new Error('still held after it was done');
      await new Promise((r) => setTimeout(r, 20));
    }
  });

  it(backend === 'redis' ? 'keeps what is queued across a restart' : 'drops what is queued when it closes, and says so', async () => {
    const name = `q-${randomUUID()}`;
    const seen: number[] = [];
    const handler: JobHandler<Work> = async (job) => {
      seen.push(job.data.n);
      return 'done';
    };
    const lines: string[] = [];
    const logger = pino({ level: 'warn' }, { write: (line: string) => void lines.push(line) });
    const first = queues().create<Work>({ name, handler, logger, prefix: 'sbtest', words: { queue: 'test queue', items: 'jobs not done' } });
    open.push(first);
    await first.add({ id: randomUUID(), group: 'g', data: { n: 1 } });
    await first.add({ id: randomUUID(), data: { n: 2 } });
    expect(first.pending).toBe(backend === 'redis' ? 0 : 2);
    await first.close();
    open.splice(open.indexOf(first), 1);
    const second = newQueue(name, handler);
    await second.start();
    if (backend === 'redis') {
      await waitFor(() => seen.length === 2, 'both jobs after the restart');
      expect(seen.sort()).toEqual([1, 2]);
    } else {
      await new Promise((r) => setTimeout(r, 100));
      expect(seen).toEqual([]);
      expect(lines.join('')).toContain('test queue closed with jobs not done');
      expect(JSON.parse(lines[0]!)).toMatchObject({ pending: 2 });
      await expect(first.add({ id: randomUUID(), data: { n: 3 } })).rejects.toThrow(/closed/);
    }
  });
});
