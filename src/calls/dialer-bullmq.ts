/**
 * The outbound dial queue on Redis (BullMQ), for REDIS_URL deployments: shared by every process,
 * durable as Redis is, slots and rates exact across processes (docs/outbound-queue.md).
 *
 * One BullMQ job per call, its id the call id (a call is queued once). A job that cannot dial yet
 * moves itself to BullMQ's delayed set (`DelayedError`) and is never active while it waits, so a
 * full or slow organization holds no worker from another one. The decisions are Lua scripts, on
 * Redis's clock (`TIME`), so that processes with skewed clocks still agree:
 * - ACQUIRE: refuses a call that is done, removed or being dialled by another worker; else takes a
 *   slot (the org's slot set below max and its next allowed dial reached: add the call id, move the
 *   next dial 1/cps later) and claims the call for this worker and counts the attempt; else books
 *   the call a time to look again, after the org's other waiting calls, so they take turns (about
 *   one wake-up per dial rather than every waiting call at every dial).
 * - FINISH, RETRY, REMOVE, RECLAIM: the same keys, each in one step.
 * BullMQ's job lock keeps a job with one worker; a dead process's jobs are handed to another by
 * BullMQ's stalled check. Its claim (`dialling:<token>`, `dialClaimMs`) makes a worker that lost
 * its lock while still dialling hold off any other, and the attempt count tells `dial` when an
 * earlier attempt may have reached the carrier.
 */
import { Queue, Worker, DelayedError, type Job } from 'bullmq';
import { Redis } from 'ioredis';
import type { Logger } from 'pino';
import {
  DEFAULT_FULL_RECHECK_MS,
  DEFAULT_RETRY_DELAYS_MS,
  DEFAULT_STALE_SLOT_MS,
  dialSpacing,
  isDead,
  retryDelay,
  type Dialer,
  type DialerHooks,
  type DialerOptions,
  type OutboundJob,
} from './dialer.js';

export interface BullMqDialerOptions extends DialerOptions {
  redisUrl: string;
}

/** How long `done` and `removed` marks and attempt counts are kept. */
const MARK_TTL_MS = 24 * 60 * 60_000;
/** A waiting call that has not come back this long after its time gives up its turn. */
const STALE_TURN_MS = 30_000;

// KEYS: slots, next, waiting, state, attempts
// ARGV: callId, max, intervalMs, fullRecheckMs, token, claimMs, markTtlMs, staleTurnMs
// → {'taken', attempt, fresh(1|0), now} | {'full'|'rate'|'busy', waitMs, 0, now} | {'gone', 0, 0, now}
const ACQUIRE_SCRIPT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local callId = ARGV[1]
local state = redis.call('GET', KEYS[4])
if state == 'done' or state == 'removed' then
  redis.call('ZREM', KEYS[3], callId)
  return {'gone', 0, 0, now}
end
if state then
  return {'busy', redis.call('PTTL', KEYS[4]), 0, now}
end
local max = tonumber(ARGV[2])
local interval = tonumber(ARGV[3])
local held = redis.call('ZSCORE', KEYS[1], callId)
local used = redis.call('ZCARD', KEYS[1])
local nxt = tonumber(redis.call('GET', KEYS[2]) or '0')
if held or (used < max and nxt <= now) then
  if not held then
    redis.call('ZADD', KEYS[1], now, callId)
    redis.call('SET', KEYS[2], now + interval, 'PX', interval + 60000)
  end
  redis.call('ZREM', KEYS[3], callId)
  redis.call('SET', KEYS[4], 'dialling:' .. ARGV[5], 'PX', ARGV[6])
  local attempt = redis.call('INCR', KEYS[5])
  redis.call('PEXPIRE', KEYS[5], ARGV[7])
  if held then return {'taken', attempt, 0, now} end
  return {'taken', attempt, 1, now}
end
local full = used >= max
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now - tonumber(ARGV[8]))
local turn = redis.call('ZSCORE', KEYS[3], callId)
local due = turn and tonumber(turn) <= now
local head = due and redis.call('ZRANGE', KEYS[3], 0, 0)[1] == callId
redis.call('ZREM', KEYS[3], callId)
local at, spacing
if full then
  local recheck = tonumber(ARGV[4])
  at = now + recheck
  spacing = math.max(1, math.floor(recheck / math.max(max, 1)))
  -- the first in line keeps looking at the org's pace; the others take turns behind the last
  if head then at = now + spacing end
else
  at = nxt
  spacing = interval
end
-- a call back on its turn goes first; others queue behind the last
if not (due and (head or not full)) then
  local last = redis.call('ZREVRANGE', KEYS[3], 0, 0, 'WITHSCORES')
  if last[2] and tonumber(last[2]) + spacing > at then at = tonumber(last[2]) + spacing end
end
redis.call('ZADD', KEYS[3], at, callId)
local ttl = at - now + tonumber(ARGV[8])
if redis.call('PTTL', KEYS[3]) < ttl then redis.call('PEXPIRE', KEYS[3], ttl) end
if full then return {'full', at - now, 0, now} end
return {'rate', at - now, 0, now}`;

// KEYS: state, attempts, waiting, slots — ARGV: callId, markTtlMs, releaseSlot (1|0)
const FINISH_SCRIPT = `
redis.call('SET', KEYS[1], 'done', 'PX', ARGV[2])
redis.call('DEL', KEYS[2])
redis.call('ZREM', KEYS[3], ARGV[1])
if ARGV[3] == '1' then redis.call('ZREM', KEYS[4], ARGV[1]) end
return 1`;

// KEYS: state, slots — ARGV: callId, token
const RETRY_SCRIPT = `
if redis.call('GET', KEYS[1]) == 'dialling:' .. ARGV[2] then redis.call('DEL', KEYS[1]) end
redis.call('ZREM', KEYS[2], ARGV[1])
return 1`;

// KEYS: state, job hash, waiting, attempts — ARGV: callId, markTtlMs
const REMOVE_SCRIPT = `
if redis.call('GET', KEYS[1]) then return 0 end
if redis.call('EXISTS', KEYS[2]) == 0 then return 0 end
redis.call('SET', KEYS[1], 'removed', 'PX', ARGV[2])
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('DEL', KEYS[4])
return 1`;

// KEYS: slots — ARGV: callId, takenAt: removes the slot only if it is the one that was looked at
const RECLAIM_SCRIPT = `
local s = redis.call('ZSCORE', KEYS[1], ARGV[1])
if s and tonumber(s) == tonumber(ARGV[2]) then return redis.call('ZREM', KEYS[1], ARGV[1]) end
return 0`;

type AcquireReply = [status: 'taken' | 'full' | 'rate' | 'busy' | 'gone', value: number, fresh: number, now: number];

type DialerRedis = Redis & {
  sbAcquire(...args: (string | number)[]): Promise<AcquireReply>;
  sbFinish(...args: (string | number)[]): Promise<number>;
  sbRetry(...args: (string | number)[]): Promise<number>;
  sbRemove(...args: (string | number)[]): Promise<number>;
  sbReclaim(...args: (string | number)[]): Promise<number>;
};

export class BullMqDialer implements Dialer {
  private readonly queue: Queue<OutboundJob>;
  private worker: Worker<OutboundJob> | null = null;
  private readonly redis: DialerRedis;
  private readonly logger: Logger;
  private readonly queueName: string;
  private readonly prefix: string;
  private readonly base: string;
  private readonly retryDelaysMs: readonly number[];
  private readonly staleSlotMs: number;
  private readonly fullRecheckMs: number;
  private readonly claimMs: number;
  private readonly lastReclaim = new Map<string, number>();
  private hooks: DialerHooks | null = null;
  private closed = false;

  constructor(private readonly options: BullMqDialerOptions) {
    this.queueName = options.queueName ?? 'switchboard-outbound';
    this.prefix = options.prefix ?? 'bull';
    this.base = `${this.prefix}:${this.queueName}:sb`;
    this.logger = options.logger;
    this.retryDelaysMs = options.retryDelaysMs ?? DEFAULT_RETRY_DELAYS_MS;
    this.staleSlotMs = options.staleSlotMs ?? DEFAULT_STALE_SLOT_MS;
    this.fullRecheckMs = options.fullRecheckMs ?? DEFAULT_FULL_RECHECK_MS;
    this.claimMs = options.dialClaimMs ?? 60_000;
    this.redis = new Redis(options.redisUrl, { maxRetriesPerRequest: null }) as DialerRedis;
    this.redis.on('error', (err) => this.logger.warn({ err }, 'dialer: Redis error'));
    this.redis.defineCommand('sbAcquire', { numberOfKeys: 5, lua: ACQUIRE_SCRIPT });
    this.redis.defineCommand('sbFinish', { numberOfKeys: 4, lua: FINISH_SCRIPT });
    this.redis.defineCommand('sbRetry', { numberOfKeys: 2, lua: RETRY_SCRIPT });
    this.redis.defineCommand('sbRemove', { numberOfKeys: 4, lua: REMOVE_SCRIPT });
    this.redis.defineCommand('sbReclaim', { numberOfKeys: 1, lua: RECLAIM_SCRIPT });
    this.queue = new Queue<OutboundJob>(this.queueName, {
      connection: { url: options.redisUrl, maxRetriesPerRequest: null },
      prefix: this.prefix,
      defaultJobOptions: {
        removeOnComplete: true,
        removeOnFail: 1000,
        // only for crashes of the processor itself (Redis down, a hook's limits() throwing);
        // failed dials are retried by moving the job to delayed
        attempts: 1_000_000,
        backoff: { type: 'fixed', delay: 5_000 },
      },
    });
    this.queue.on('error', (err) => this.logger.warn({ err }, 'dialer: BullMQ error'));
  }

  private slotsKey = (org: string) => `${this.base}:org:${org}:slots`;
  private nextKey = (org: string) => `${this.base}:org:${org}:next`;
  private waitingKey = (org: string) => `${this.base}:org:${org}:waiting`;
  private stateKey = (callId: string) => `${this.base}:call:${callId}:state`;
  private attemptsKey = (callId: string) => `${this.base}:call:${callId}:attempts`;
  private jobKey = (callId: string) => `${this.prefix}:${this.queueName}:${callId}`;

  async enqueue(jobs: OutboundJob[]): Promise<void> {
    if (this.closed) throw new Error('the dialer is closed');
    if (jobs.length === 0) return;
    // a job id already in the queue is not added again
    await this.queue.addBulk(jobs.map((data) => ({ name: 'dial', data, opts: { jobId: data.callId } })));
  }

  async remove(callId: string): Promise<boolean> {
    const job = await this.queue.getJob(callId);
    if (!job) return false;
    const org = job.data.organizationId;
    const removed = await this.redis.sbRemove(this.stateKey(callId), this.jobKey(callId), this.waitingKey(org), this.attemptsKey(callId), callId, MARK_TTL_MS);
    if (removed !== 1) return false;
    // an active job (between two looks at its slot) cannot be removed here; its next look sees 'removed'
    await this.queue.remove(callId).catch((err: unknown) => this.logger.debug({ err, callId }, 'dialer: removed call left to its worker'));
    return true;
  }

  async release(organizationId: string, callId: string): Promise<void> {
    await this.redis.zrem(this.slotsKey(organizationId), callId);
  }

  async start(hooks: DialerHooks): Promise<void> {
    if (this.closed) throw new Error('the dialer is closed');
    if (this.worker) return;
    this.hooks = hooks;
    this.worker = new Worker<OutboundJob>(this.queueName, (job, token) => this.process(job, token), {
      connection: { url: this.options.redisUrl, maxRetriesPerRequest: null },
      prefix: this.prefix,
      concurrency: this.options.concurrency ?? 32,
      lockDuration: this.options.lockDurationMs ?? 30_000,
      stalledInterval: this.options.stalledIntervalMs ?? 30_000,
      // a job only stalls when its process died (or froze): always hand it on; the attempt count
      // and the claim keep it from being dialled twice, and gives up after too many attempts
      maxStalledCount: 1_000_000,
    });
    this.worker.on('error', (err) => this.logger.warn({ err }, 'dialer: worker error'));
    this.worker.on('failed', (job, err) => {
      if (err instanceof DelayedError) return;
      this.logger.error({ err, callId: job?.id }, 'dialer: job crashed; BullMQ retries it');
    });
    await this.worker.waitUntilReady();
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.worker?.close();
    await this.queue.close();
    await this.redis.quit().catch(() => this.redis.disconnect());
  }

  async queuedCount(): Promise<number> {
    return this.queue.getJobCountByTypes('waiting', 'delayed', 'active', 'prioritized');
  }

  /** Slots held now by the organization (tests, metrics). */
  liveSlots(organizationId: string): Promise<number> {
    return this.redis.zcard(this.slotsKey(organizationId));
  }

  /** Stops this instance's worker and removes every key of the queue (tests). */
  async obliterate(): Promise<void> {
    await this.worker?.close();
    await this.queue.obliterate({ force: true });
    let cursor = '0';
    do {
      const [next, keys] = await this.redis.scan(cursor, 'MATCH', `${this.base}:*`, 'COUNT', 500);
      cursor = next;
      if (keys.length > 0) await this.redis.del(...keys);
    } while (cursor !== '0');
  }

  private async process(job: Job<OutboundJob>, token: string | undefined): Promise<void> {
    const hooks = this.hooks!;
    const { callId, organizationId: org } = job.data;
    for (let look = 0; ; look++) {
      const { max, intervalMs } = dialSpacing(await hooks.limits(org));
      const [status, value, fresh, now] = await this.redis.sbAcquire(
        this.slotsKey(org),
        this.nextKey(org),
        this.waitingKey(org),
        this.stateKey(callId),
        this.attemptsKey(callId),
        callId,
        max,
        intervalMs,
        this.fullRecheckMs,
        token ?? '',
        this.claimMs,
        MARK_TTL_MS,
        STALE_TURN_MS,
      );
      switch (status) {
        case 'gone':
          return;
        case 'taken':
          return this.dial(job, token, value, fresh === 1);
        case 'full':
          if (look === 0 && (await this.reclaim(org, Number(now)))) continue;
          return this.waitFor(job, token, value);
        case 'busy':
          // another worker claimed it (or died claiming it): look again once the claim is over
          return this.waitFor(job, token, Math.max(0, value) + 50);
        case 'rate':
          return this.waitFor(job, token, value);
      }
    }
  }

  private async waitFor(job: Job<OutboundJob>, token: string | undefined, ms: number): Promise<never> {
    // BullMQ's delayed set runs on this process's clock; the scripts' decisions on Redis's
    await job.moveToDelayed(Date.now() + Math.max(1, Number(ms)), token);
    throw new DelayedError();
  }

  /** With the slot taken and the call claimed: dial, and record what came of it. */
  private async dial(job: Job<OutboundJob>, token: string | undefined, attempt: number, fresh: boolean): Promise<void> {
    const hooks = this.hooks!;
    const { callId, organizationId: org } = job.data;
    const log = this.logger.child({ callId, organizationId: org });
    const finish = (releaseSlot: boolean) =>
      this.redis.sbFinish(this.stateKey(callId), this.attemptsKey(callId), this.waitingKey(org), this.slotsKey(org), callId, MARK_TTL_MS, releaseSlot ? 1 : 0);
    const maxAttempts = this.retryDelaysMs.length + 1;
    if (attempt > maxAttempts) {
      // earlier attempts died with their processes; this one is past the limit
      const err = new Error(`the call was not dialled after ${maxAttempts} attempts`);
      log.error({ attempt }, 'dialer: too many attempts; giving up');
      await this.giveUp(job.data, err, log);
      await finish(true);
      return;
    }
    let outcome: 'dialled' | 'skipped';
    try {
      outcome = await hooks.dial(job.data, { attempt });
    } catch (err) {
      const wait = retryDelay(this.retryDelaysMs, attempt);
      if (wait === null) {
        log.error({ err, attempt }, 'dialer: dial failed; giving up');
        await this.giveUp(job.data, err, log);
        await finish(true);
        return;
      }
      log.warn({ err, attempt, retryInMs: wait }, 'dialer: dial failed; retrying');
      await this.redis.sbRetry(this.stateKey(callId), this.slotsKey(org), callId, token ?? '');
      return this.waitFor(job, token, wait);
    }
    // a slot held from an earlier attempt may belong to the live call that attempt placed
    const releaseSlot = outcome === 'skipped' && (fresh || (await isDead(hooks, callId, log)));
    await finish(releaseSlot);
  }

  private async giveUp(job: OutboundJob, err: unknown, log: Logger): Promise<void> {
    try {
      await this.hooks!.onGaveUp?.(job, err);
    } catch (e) {
      log.error({ err: e }, 'dialer: onGaveUp failed');
    }
  }

  /** Takes back the org's slots older than `staleSlotMs` whose call is not live; true when any was. */
  private async reclaim(org: string, now: number): Promise<boolean> {
    const every = Math.min(this.fullRecheckMs, this.staleSlotMs);
    const last = this.lastReclaim.get(org);
    if (last !== undefined && now - last < every) return false;
    this.lastReclaim.set(org, now);
    const old = await this.redis.zrangebyscore(this.slotsKey(org), '-inf', now - this.staleSlotMs, 'WITHSCORES');
    let freed = false;
    for (let i = 0; i + 1 < old.length; i += 2) {
      const callId = old[i]!;
      const takenAt = old[i + 1]!;
      if (!(await isDead(this.hooks!, callId, this.logger))) continue;
      if ((await this.redis.sbReclaim(this.slotsKey(org), callId, takenAt)) === 1) {
        freed = true;
        this.logger.warn({ callId, organizationId: org, heldMs: now - Number(takenAt) }, 'dialer: took back the slot of a call that is not live');
      }
    }
    return freed;
  }
}
