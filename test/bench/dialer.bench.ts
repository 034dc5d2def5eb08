/**
 * The outbound dial queue alone: `npm run bench:dialer -- [options]`.
 *
 * One organization's campaign through the dialer (BullMQ on Redis at REDIS_URL or
 * redis://127.0.0.1:6379, and the in-process one on PGlite in memory), with a stand-in call service
 * behind the hooks (the tests' `FakeCalls`): each dialled call stays live for `--hold-ms` × 0.5 to
 * 1.5 (at random), then is released. No carrier, no audio: what is measured is the queue's own work.
 *
 * Reports, per dialer: wall time, dials per second against the most the cap and the rate allow,
 * the most calls live at once, looks (each time a waiting call asks for a slot: `limits()` is
 * called once a look) per second and per dial, and how far the dial order strayed from the
 * queue's order (the most places any call was off). Exit code 1 when the cap was exceeded, a call
 * was dialled twice or not at all, or the order strayed.
 *
 * BullMQ runs when a Redis answers (an error when REDIS_URL is set and none does, skipped when
 * none answers at the default address).
 *
 * Options: --calls N (300) --max M (10) --cps R (50) --hold-ms H (2000) --dialers D (BullMQ
 * dialers sharing the queue, as processes would; 1) --stall-ms S (busy the event loop for up to S
 * ms, at random, every 10 ms; 0) --full-recheck-ms F (1000) --only bullmq|in-process
 */
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { Redis } from 'ioredis';
import { InProcessDialer, type Dialer, type DialerHooks } from '../../src/calls/dialer.js';
import { BullMqDialer } from '../../src/calls/dialer-bullmq.js';
import { openDb } from '../../src/store/db.js';
import { FakeCalls, insertOrganization, jobsFor, REDIS_URL, silent, stallLoop, waitFor } from '../calls-dialer/harness.js';

const argv = process.argv.slice(2);
const num = (name: string, fallback: number): number => {
  const i = argv.indexOf(`--${name}`);
  if (i < 0) return fallback;
  const v = Number(argv[i + 1]);
  if (!Number.isFinite(v) || v < 0) throw new Error(`--${name} wants a number, got ${argv[i + 1]}`);
  return v;
};
const calls = num('calls', 300);
const max = num('max', 10);
const cps = num('cps', 50);
const holdMs = num('hold-ms', 2000);
const dialers = Math.max(1, Math.floor(num('dialers', 1)));
const stallMs = num('stall-ms', 0);
const fullRecheckMs = num('full-recheck-ms', 1000);
const only = argv.includes('--only') ? argv[argv.indexOf('--only') + 1] : null;

/** Whether a Redis answers at `url` within a second. */
async function answers(url: string): Promise<boolean> {
  const redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null, connectTimeout: 1_000 });
  redis.on('error', () => undefined);
  try {
    await redis.connect();
    await redis.ping();
    return true;
  } catch {
    return false;
  } finally {
    redis.disconnect();
  }
}

interface Result {
  dialer: string;
  seconds: number;
  dialsPerSecond: number;
  maxLive: number;
  looks: number;
  worstOff: number;
  ok: boolean;
}

async function run(name: string, make: () => Promise<{ dialers: Dialer[]; org: string; cleanup: () => Promise<void> }>): Promise<Result> {
  const { dialers: ds, org, cleanup } = await make();
  const fake = new FakeCalls({
    limits: () => ({ maxConcurrentCalls: max, callsPerSecond: cps }),
    holdMs: () => Math.round(holdMs * (0.5 + Math.random())),
  });
  let looks = 0;
  const jobs = jobsFor(org, calls);
  const stop = stallMs > 0 ? stallLoop(stallMs, 10) : () => undefined;
  const t0 = performance.now();
  try {
    await ds[0]!.enqueue(jobs);
    for (const d of ds) {
      const hooks = fake.hooksFor(d);
      const counted: DialerHooks = { ...hooks, limits: (o) => (looks++, hooks.limits(o)) };
      await d.start(counted);
    }
    await waitFor(() => fake.dials.length >= calls, 30 * 60_000, 'every call dialled');
  } finally {
    stop();
  }
  const seconds = (performance.now() - t0) / 1000;
  // a moment for a second dial of any call to show
  await new Promise((r) => setTimeout(r, 200));
  fake.dispose();
  await cleanup();
  const index = new Map(jobs.map((j, i) => [j.callId, i]));
  const order = fake.dials.map((d) => index.get(d.callId) ?? -1);
  const worstOff = Math.max(0, ...order.map((p, i) => Math.abs(p - i)));
  const maxLive = fake.maxLive.get(org) ?? 0;
  const once = new Set(fake.dials.map((d) => d.callId)).size === calls && fake.dials.length === calls;
  return { dialer: name, seconds, dialsPerSecond: calls / seconds, maxLive, looks, worstOff, ok: once && maxLive <= max && worstOff === 0 };
}

const results: Result[] = [];
if (only !== 'in-process') {
  if (await answers(REDIS_URL)) {
    results.push(
      await run(`BullMQ × ${dialers}`, async () => {
        const queueName = `bench-dialer-${randomUUID()}`;
        const ds = Array.from({ length: dialers }, () => new BullMqDialer({ redisUrl: REDIS_URL, queueName, prefix: 'sbbench', logger: silent, fullRecheckMs }));
        return {
          dialers: ds,
          org: randomUUID(),
          cleanup: async () => {
            await ds[0]!.obliterate();
            for (const d of ds) await d.close();
          },
        };
      }),
    );
  } else if (process.env.REDIS_URL) {
    console.error(`BullMQ: REDIS_URL (${REDIS_URL}) does not answer`);
    process.exit(1);
  } else {
    console.log('BullMQ: no Redis at', REDIS_URL, '(skipped)');
  }
}
if (only !== 'bullmq') {
  results.push(
    await run('in process (PGlite)', async () => {
      const db = await openDb({ dataDir: null });
      const org = await insertOrganization(db);
      const d = new InProcessDialer({ db, logger: silent, fullRecheckMs });
      return {
        dialers: [d],
        org,
        cleanup: async () => {
          await d.close();
          await db.close();
        },
      };
    }),
  );
}

// the most the cap and the rate allow: max calls of holdMs on average, and cps
const ceiling = Math.min(cps, holdMs > 0 ? max / (holdMs / 1000) : cps);
console.log(`\n${calls} calls, max_concurrent_calls ${max}, calls_per_second ${cps}, hold ${holdMs} ms ×0.5-1.5, full recheck ${fullRecheckMs} ms${stallMs ? `, event loop busied up to ${stallMs} ms every 10 ms` : ''}`);
console.log(`ceiling ${ceiling.toFixed(2)} dials/s (Node ${process.version})\n`);
console.log('| dialer | wall | dials/s | most live | looks/s | looks per dial | most places off | ok |');
console.log('|---|---:|---:|---:|---:|---:|---:|---|');
for (const r of results) {
  console.log(`| ${r.dialer} | ${r.seconds.toFixed(1)} s | ${r.dialsPerSecond.toFixed(2)} | ${r.maxLive} | ${(r.looks / r.seconds).toFixed(1)} | ${(r.looks / calls).toFixed(2)} | ${r.worstOff} | ${r.ok ? 'yes' : 'NO'} |`);
}
process.exitCode = results.every((r) => r.ok) ? 0 : 1;
