/**
 * The outbound dial queue: every behaviour against both dialers, BullMQ on the real Redis (a fresh
 * queue per test; skipped only when no Redis answers) and the in-process one on PGlite and on
 * PostgreSQL. Real time, short rates; the assertions are about order, caps and counts, and the
 * timed ones are floors: dials never closer than 1/cps (less a tolerance), and a call late for its
 * turn holds the line at least 1.5 s of its 2.
 */
import { randomUUID } from 'node:crypto';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createDialer, InProcessDialer, type Dialer } from '../../src/calls/dialer.js';
import { BullMqDialer } from '../../src/calls/dialer-bullmq.js';
import type { Db } from '../../src/store/db.js';
import { openMemoryDb } from '../helpers/db.js';
import { ManualClock } from '../../src/webhooks/clock.js';
import { FakeCalls, insertOrganization, stallLoop, jobsFor, placesOf, postgresBase, redisReachable, REDIS_URL, silent, sleep, waitFor, type Place, type PlaceKind, type Places } from './harness.js';

const hasRedis = await redisReachable();
const pgBase = await postgresBase();
const kinds: PlaceKind[] = [...(hasRedis ? (['bullmq'] as const) : []), 'pglite', ...(pgBase ? (['postgres'] as const) : [])];

/** Positions of `dialled` in `queued`, in dial order. */
const positions = (queued: string[], dialled: string[]) => dialled.map((id) => queued.indexOf(id));

describe.each(kinds)('dialer on %s', (kind) => {
  let places: Places;
  let place: Place | null = null;
  let fakes: FakeCalls[] = [];
  const fake = (options?: ConstructorParameters<typeof FakeCalls>[0]) => {
    const f = new FakeCalls(options);
    fakes.push(f);
    return f;
  };
  const open = async () => (place = await places.open());

  beforeAll(async () => {
    places = await placesOf(kind, pgBase);
  });
  afterEach(async () => {
    for (const f of fakes) f.dispose();
    fakes = [];
    await place?.cleanup();
    place = null;
  });
  afterAll(async () => {
    await places?.close();
  });

  it('dials an organization\'s calls in the order they were queued', async () => {
    const place = await open();
    const org = await place.newOrg();
    const calls = fake({ limits: () => ({ maxConcurrentCalls: 1, callsPerSecond: 40 }) });
    const dialer = place.dialer();
    const jobs = jobsFor(org, 10);
    await dialer.enqueue(jobs);
    await dialer.start(calls.hooksFor(dialer));
    await waitFor(() => calls.dials.length === 10, 15_000, 'ten dials');
    const order = positions(jobs.map((j) => j.callId), calls.dials.map((d) => d.callId));
    expect(order).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    await waitFor(async () => (await dialer.queuedCount()) === 0, 5_000, 'an empty queue');
  });

  it('keeps the order while the process stalls and calls end at random times', async () => {
    const place = await open();
    const org = await place.newOrg();
    const calls = fake({
      limits: () => ({ maxConcurrentCalls: 4, callsPerSecond: 100 }),
      holdMs: () => 20 + Math.floor(Math.random() * 150),
    });
    const dialer = place.dialer();
    const jobs = jobsFor(org, 40);
    await dialer.enqueue(jobs);
    // a busy event loop (other calls, a collection): the turns of waiting calls come late and
    // in a jumble; each call must still wait for the ones queued before it
    const stop = stallLoop(40, 10);
    try {
      await dialer.start(calls.hooksFor(dialer));
      await waitFor(() => calls.dials.length === 40, 30_000, 'forty dials');
    } finally {
      stop();
    }
    const order = positions(jobs.map((j) => j.callId), calls.dials.map((d) => d.callId));
    expect(order).toEqual(jobs.map((_, i) => i));
    expect(calls.maxLive.get(org)).toBeLessThanOrEqual(4);
  });

  it('never has more live calls than max_concurrent_calls, with calls ending at random times', async () => {
    const place = await open();
    const org = await place.newOrg();
    const calls = fake({
      limits: () => ({ maxConcurrentCalls: 3, callsPerSecond: 100 }),
      holdMs: () => 40 + Math.floor(Math.random() * 120),
    });
    // two BullMQ dialers act as two processes sharing the org's slots
    const dialers = kind === 'bullmq' ? [place.dialer(), place.dialer()] : [place.dialer()];
    await dialers[0]!.enqueue(jobsFor(org, 24));
    for (const d of dialers) await d.start(calls.hooksFor(d));
    await waitFor(() => calls.dials.length === 24, 20_000, '24 dials');
    expect(calls.maxLive.get(org)).toBeLessThanOrEqual(3);
    // the cap was reached, so the test exercised it
    expect(calls.maxLive.get(org)).toBe(3);
    expect(new Set(calls.dials.map((d) => d.callId)).size).toBe(24);
  });

  it('never dials faster than calls_per_second (fractional rates too)', async () => {
    const place = await open();
    const org = await place.newOrg();
    const cps = 12.5; // one dial every 80 ms
    const calls = fake({ limits: () => ({ maxConcurrentCalls: 100, callsPerSecond: cps }) });
    const dialers = kind === 'bullmq' ? [place.dialer(), place.dialer()] : [place.dialer()];
    await dialers[0]!.enqueue(jobsFor(org, 10));
    for (const d of dialers) await d.start(calls.hooksFor(d));
    await waitFor(() => calls.dials.length === 10, 15_000, 'ten dials');
    const at = calls.dials.map((d) => d.at).sort((a, b) => a - b);
    const interval = 1000 / cps;
    // the slot is taken at the limit; the hook runs a little later, by a varying amount
    for (let i = 1; i < at.length; i++) expect(at[i]! - at[i - 1]!).toBeGreaterThanOrEqual(interval - 30);
    expect(at[at.length - 1]! - at[0]!).toBeGreaterThanOrEqual((at.length - 1) * interval - 30);
  });

  it('a full organization and a slow one do not hold up another', async () => {
    const place = await open();
    const [full, slow, other] = [await place.newOrg(), await place.newOrg(), await place.newOrg()];
    const calls = fake({
      limits: (org) =>
        org === full
          ? { maxConcurrentCalls: 1, callsPerSecond: 50 }
          : org === slow
            ? { maxConcurrentCalls: 10, callsPerSecond: 0.1 }
            : { maxConcurrentCalls: 10, callsPerSecond: 50 },
      // the full org's one call stays live for the whole test
      holdMs: (job) => (job.organizationId === full ? null : 0),
    });
    // few workers: the waiting jobs must not occupy them
    const dialer = place.dialer({ concurrency: 2 });
    await dialer.enqueue([...jobsFor(full, 6), ...jobsFor(slow, 6), ...jobsFor(other, 8)]);
    await dialer.start(calls.hooksFor(dialer));
    await waitFor(() => calls.dialsOf(other).length === 8, 15_000, 'the other org\'s eight dials');
    await sleep(200);
    expect(calls.dialsOf(full)).toHaveLength(1);
    expect(calls.dialsOf(slow)).toHaveLength(1);
    expect(await dialer.queuedCount()).toBe(10);
  });

  it('remove(): a queued call is never dialled; a dialled or unknown one says false', async () => {
    const place = await open();
    const org = await place.newOrg();
    const calls = fake({ limits: () => ({ maxConcurrentCalls: 10, callsPerSecond: 10 }) });
    const dialer = place.dialer();
    const jobs = jobsFor(org, 6);
    await dialer.enqueue(jobs);
    await dialer.start(calls.hooksFor(dialer));
    await waitFor(() => calls.dials.length >= 1, 10_000, 'the first dial');
    const canceled = [jobs[3]!.callId, jobs[5]!.callId];
    expect(await dialer.remove(canceled[0]!)).toBe(true);
    expect(await dialer.remove(canceled[1]!)).toBe(true);
    expect(await dialer.remove(canceled[1]!)).toBe(false);
    expect(await dialer.remove(calls.dials[0]!.callId)).toBe(false);
    expect(await dialer.remove(randomUUID())).toBe(false);
    await waitFor(async () => (await dialer.queuedCount()) === 0, 10_000, 'an empty queue');
    await sleep(150);
    expect(calls.dials.map((d) => d.callId).sort()).toEqual(jobs.map((j) => j.callId).filter((id) => !canceled.includes(id)).sort());
  });

  it('remove() racing the dialer: each call is either removed or dialled, never both', async () => {
    const place = await open();
    const org = await place.newOrg();
    const calls = fake({ limits: () => ({ maxConcurrentCalls: 50, callsPerSecond: 200 }) });
    const dialer = place.dialer();
    const jobs = jobsFor(org, 20);
    await dialer.start(calls.hooksFor(dialer));
    await dialer.enqueue(jobs);
    const removed = await Promise.all(jobs.map(async (j, i) => (await sleep(i * 3), (await dialer.remove(j.callId)) ? j.callId : null)));
    await waitFor(async () => (await dialer.queuedCount()) === 0, 10_000, 'an empty queue');
    await sleep(100);
    const dialled = new Set(calls.dials.map((d) => d.callId));
    for (const j of jobs) expect(dialled.has(j.callId) !== removed.includes(j.callId)).toBe(true);
    expect(calls.dials).toHaveLength(dialled.size);
  });

  it('a dial that throws frees its slot, is retried with its attempt number, and is given up at last', async () => {
    const place = await open();
    const org = await place.newOrg();
    const jobs = jobsFor(org, 3);
    const [flaky, next, doomed] = jobs.map((j) => j.callId);
    const calls = fake({
      limits: () => ({ maxConcurrentCalls: 1, callsPerSecond: 50 }),
      fails: (job, ctx) => (job.callId === flaky && ctx.attempt === 1) || job.callId === doomed,
    });
    const dialer = place.dialer({ retryDelaysMs: [150, 30] });
    await dialer.enqueue(jobs);
    await dialer.start(calls.hooksFor(dialer));
    await waitFor(() => calls.gaveUp.length === 1 && calls.dials.length === 2, 15_000, 'two dials and one give-up');
    // the throw freed the slot at once: the next call went while the flaky one waited its 150 ms
    expect(calls.dials.map((d) => [d.callId, d.attempt])).toEqual([
      [next, 1],
      [flaky, 2],
    ]);
    expect(calls.failures.filter((f) => f.callId === doomed).map((f) => f.attempt)).toEqual([1, 2, 3]);
    expect(calls.gaveUp[0]!.job.callId).toBe(doomed);
    expect(String(calls.gaveUp[0]!.err)).toContain('dial refused');
    expect(calls.maxLive.get(org)).toBe(1);
    await waitFor(async () => (await dialer.queuedCount()) === 0, 5_000, 'an empty queue');
  });

  it.runIf(kind === 'bullmq')('a call that still holds its slot from an attempt whose process died dials at the org\'s rate, not at once', async () => {
    const place = await open();
    const org = await place.newOrg();
    const [job] = jobsFor(org, 1);
    const calls = fake({ limits: () => ({ maxConcurrentCalls: 2, callsPerSecond: 0.5 }) });
    const dialer = place.dialer();
    // what a process that died mid-dial leaves in Redis: the call's slot, and the org's next dial 2 s away
    const base = (dialer as unknown as { base: string }).base;
    const redis = new Redis(REDIS_URL);
    try {
      const diedAt = Date.now();
      await redis.zadd(`${base}:org:${org}:slots`, diedAt, job!.callId);
      await redis.set(`${base}:org:${org}:next`, diedAt + 2_000, 'PX', 62_000);
      await dialer.enqueue([job!]);
      await dialer.start(calls.hooksFor(dialer));
      await waitFor(() => calls.dials.length === 1, 10_000, 'the retried dial');
      expect(calls.dials[0]!.at - diedAt).toBeGreaterThanOrEqual(2_000 - 20);
      expect(calls.maxLive.get(org) ?? 1).toBeLessThanOrEqual(2);
    } finally {
      redis.disconnect();
    }
  });

  it('takes back a slot held past staleSlotMs by a call isLive says is gone, and only then', async () => {
    const place = await open();
    const [leaky, kept] = [await place.newOrg(), await place.newOrg()];
    const calls = fake({
      limits: () => ({ maxConcurrentCalls: 1, callsPerSecond: 50 }),
      // nobody ever releases: the process that placed them "died"
      holdMs: () => null,
      isLive: (callId) => !calls.dialsOf(leaky).some((d) => d.callId === callId),
    });
    const dialer = place.dialer({ staleSlotMs: 150, fullRecheckMs: 50 });
    await dialer.enqueue([...jobsFor(leaky, 3), ...jobsFor(kept, 3)]);
    await dialer.start(calls.hooksFor(dialer));
    await waitFor(() => calls.dialsOf(leaky).length === 3, 15_000, 'the leaky org\'s three dials');
    const at = calls.dialsOf(leaky).map((d) => d.at);
    expect(at[1]! - at[0]!).toBeGreaterThanOrEqual(150 - 30);
    // the live call's slot is never taken back
    await sleep(400);
    expect(calls.dialsOf(kept)).toHaveLength(1);
  });

  it('queued calls survive a restart of the dialer', async () => {
    const place = await open();
    const org = await place.newOrg();
    const first = place.dialer();
    const jobs = jobsFor(org, 5);
    await first.enqueue(jobs);
    await first.close();
    const calls = fake({ limits: () => ({ maxConcurrentCalls: 10, callsPerSecond: 50 }) });
    const second = place.dialer();
    expect(await second.queuedCount()).toBe(5);
    await second.start(calls.hooksFor(second));
    await waitFor(() => calls.dials.length === 5, 10_000, 'five dials');
    expect(calls.dials.map((d) => d.callId)).toEqual(expect.arrayContaining(jobs.map((j) => j.callId)));
    // each job's record comes back whole
    expect(calls.dials.every((d) => d.attempt === 1)).toBe(true);
  });

  it('a call queued twice is dialled once', async () => {
    const place = await open();
    const org = await place.newOrg();
    const calls = fake();
    const dialer = place.dialer();
    const [job, other] = jobsFor(org, 2);
    await dialer.enqueue([job!]);
    await dialer.enqueue([job!, other!]);
    expect(await dialer.queuedCount()).toBe(2);
    await dialer.start(calls.hooksFor(dialer));
    await waitFor(() => calls.dials.length === 2, 10_000, 'two dials');
    if (kind === 'bullmq') {
      // BullMQ also remembers a finished call for a day: queued again, it is still not dialled
      await dialer.enqueue([job!]);
      await waitFor(async () => (await dialer.queuedCount()) === 0, 5_000, 'an empty queue');
    }
    await sleep(100);
    expect(calls.dials.map((d) => d.callId).sort()).toEqual([job!.callId, other!.callId].sort());
  });
});

describe.runIf(hasRedis)('BullMQ dialer: the line', () => {
  it('a call more than 2 s late for its turn (its process frozen or dead) stops holding back the calls behind it', async () => {
    const queueName = `dialer-${randomUUID()}`;
    // one slot, and a full organization looked at once a second: the calls turned away while the
    // late one held them are booked a second apart behind each other, up to 20 s out
    const dialer = new BullMqDialer({ redisUrl: REDIS_URL, queueName, prefix: 'sbtest', logger: silent, fullRecheckMs: 1_000 });
    const redis = new Redis(REDIS_URL);
    const calls = new FakeCalls({ limits: () => ({ maxConcurrentCalls: 1, callsPerSecond: 50 }) });
    try {
      const org = randomUUID();
      const base = `sbtest:${queueName}:sb:org:${org}`;
      // a call queued before the others, due now, whose worker never looks again
      const [secs, micros] = await redis.time();
      await redis.zadd(`${base}:line`, 0, 'frozen-call');
      await redis.zadd(`${base}:waiting`, Number(secs) * 1000 + Math.floor(Number(micros) / 1000), 'frozen-call');
      const started = Date.now();
      const jobs = jobsFor(org, 20);
      await dialer.enqueue(jobs);
      await dialer.start(calls.hooksFor(dialer));
      // once it is late, the first of the others still coming is woken, and each call dialled or
      // released wakes the next: not a forgotten turn's 30 s, nor the far turns' 20 s
      await waitFor(() => calls.dials.length === 20, 10_000, 'twenty dials');
      expect(calls.dials.map((d) => d.callId)).toEqual(jobs.map((j) => j.callId));
      // they did wait for it while it could still come
      expect(calls.dials[0]!.at - started).toBeGreaterThanOrEqual(1_500);
    } finally {
      calls.dispose();
      await dialer.obliterate();
      await dialer.close();
      redis.disconnect();
    }
  });
});

describe.runIf(hasRedis)('BullMQ dialer: jobs queued without a place (by an earlier version)', () => {
  it('each gets a place at its first look: dialled once each, in the cap, without looking all the time', async () => {
    const queueName = `dialer-${randomUUID()}`;
    const dialer = new BullMqDialer({ redisUrl: REDIS_URL, queueName, prefix: 'sbtest', logger: silent, fullRecheckMs: 300 });
    const raw = new Queue(queueName, { connection: { url: REDIS_URL }, prefix: 'sbtest' });
    const calls = new FakeCalls({ limits: () => ({ maxConcurrentCalls: 3, callsPerSecond: 50 }), holdMs: () => 300 });
    let looks = 0;
    try {
      const org = randomUUID();
      const jobs = jobsFor(org, 30);
      // as the dialer queued them before calls had places: the job's data is the call alone
      await raw.addBulk(jobs.map((data) => ({ name: 'dial', data, opts: { jobId: data.callId } })));
      const hooks = calls.hooksFor(dialer);
      await dialer.start({ ...hooks, limits: (o) => (looks++, hooks.limits(o)) });
      await waitFor(() => calls.dials.length === 30, 15_000, 'thirty dials');
      await sleep(200);
      expect(calls.dials.map((d) => d.callId).sort()).toEqual(jobs.map((j) => j.callId).sort());
      expect(calls.maxLive.get(org)).toBeLessThanOrEqual(3);
      // in line, a call looks about 4 times (129 seen); each treated as first in line, all of
      // them looked at the full organization's pace (384 seen)
      expect(looks).toBeLessThan(30 * 8);
    } finally {
      calls.dispose();
      await dialer.obliterate();
      await dialer.close();
      await raw.close();
    }
  });
});

// one in-memory database for the two cases below (each opening one spent seconds on migrations)
let memoryDb: Promise<Db> | null = null;
const sharedMemoryDb = () => (memoryDb ??= openMemoryDb());
afterAll(async () => {
  await (await memoryDb)?.close();
});

describe('createDialer', () => {
  it('is BullMQ with a Redis URL, in process without', async () => {
    const db = await sharedMemoryDb();
    const inProcess: Dialer = createDialer({ db, logger: silent });
    expect(inProcess).toBeInstanceOf(InProcessDialer);
    await inProcess.close();
    expect(() => createDialer({ logger: silent })).toThrow(/needs a database/);
    if (hasRedis) {
      const d = createDialer({ redisUrl: REDIS_URL, logger: silent, queueName: `dialer-${randomUUID()}`, prefix: 'sbtest' });
      expect(d).toBeInstanceOf(BullMqDialer);
      await (d as BullMqDialer).obliterate();
      await d.close();
    }
  });
});

describe('in-process dialer on a fake clock', () => {
  it('cps 0.5 dials exactly 2 s apart, a full org waits for a release, and close leaves no timer', async () => {
    const db = await sharedMemoryDb();
    const clock = new ManualClock();
    const org = await insertOrganization(db);
    const dialer = new InProcessDialer({ db, logger: silent, clock });
    const dialledAt: number[] = [];
    const jobs = jobsFor(org, 4);
    await dialer.enqueue(jobs);
    await dialer.start({
      limits: async () => ({ maxConcurrentCalls: 2, callsPerSecond: 0.5 }),
      dial: async () => (dialledAt.push(clock.now()), 'dialled'),
      isLive: async () => true,
    });
    // the dialer awaits the database between steps: let it run after each move of the clock
    const settle = async () => {
      for (let i = 0; i < 5; i++) await sleep(10);
    };
    const t0 = clock.now();
    await settle();
    expect(dialledAt).toEqual([t0]);
    clock.advance(1_999);
    await settle();
    expect(dialledAt).toHaveLength(1);
    clock.advance(1);
    await settle();
    expect(dialledAt).toEqual([t0, t0 + 2_000]);
    clock.advance(10_000);
    await settle();
    // two live calls: full, however long it waits
    expect(dialledAt).toHaveLength(2);
    expect(dialer.liveSlots(org)).toBe(2);
    await dialer.release(org, jobs[0]!.callId);
    await dialer.release(org, jobs[0]!.callId);
    await settle();
    expect(dialledAt).toEqual([t0, t0 + 2_000, t0 + 12_000]);
    await dialer.release(org, jobs[1]!.callId);
    await settle();
    // freed at once, but the rate still holds it to 2 s after the last dial
    expect(dialledAt).toHaveLength(3);
    clock.advance(2_000);
    await settle();
    expect(dialledAt).toEqual([t0, t0 + 2_000, t0 + 12_000, t0 + 14_000]);
    expect(await dialer.queuedCount()).toBe(0);
    await dialer.close();
    expect(clock.pendingTimers).toBe(0);
  });
});
