/**
 * The outbound dial queue on Redis (BullMQ), for REDIS_URL deployments: shared by every process,
 * durable as Redis is, slots and rates exact across processes (docs/outbound-queue.md).
 *
 * One BullMQ job per call, its id the call id (a call is queued once). A job that cannot dial yet
 * moves itself to BullMQ's delayed set (`DelayedError`) and is never active while it waits, so a
 * full or slow organization holds no worker from another one (but for a few first-in-line calls
 * waiting out a dial under 100 ms away). The decisions are Lua scripts, on
 * Redis's clock (`TIME`), so that processes with skewed clocks still agree:
 * - ENQUEUE: puts the calls in their organization's line, by their place in the queue (a shared
 *   counter), before their jobs are added.
 * - ACQUIRE: refuses a call that is done, removed or being dialled by another worker; else takes a
 *   slot (the org's slot set below max, its next allowed dial reached, and no call ahead in the
 *   line still coming: add the call id, move the next dial 1/cps later; a call that still holds its
 *   slot from an attempt whose process died waits only for the rate), claims the call for this
 *   worker, counts the attempt and names the next in line to move up; else books the call a time
 *   to look again, after the org's other waiting calls, so they take turns (about one wake-up per
 *   dial rather than every waiting call at every dial).
 * - RELEASE: frees a slot and brings the first in line forward; FINISH, RETRY and REMOVE do too
 *   when they free a slot or remove the first.
 * - FINISH, RETRY, REMOVE, RECLAIM: the same keys, each in one step.
 * BullMQ's job lock keeps a job with one worker; a dead process's jobs are handed to another by
 * BullMQ's stalled check. Its claim (`dialling:<token>`, `dialClaimMs`) makes a worker that lost
 * its lock while still dialling hold off any other, and the attempt count tells `dial` when an
 * earlier attempt may have reached the carrier.
 */
import { Queue, Worker, DelayedError, type Job } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { RedisConnections } from '../redis.js';
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

export type BullMqDialerOptions = DialerOptions &
  // the process's Redis owner (the runtime's), or a URL for an owner of the dialer's own (tools, tests)
  ({ redis: RedisConnections; redisUrl?: string | undefined } | { redisUrl: string; redis?: undefined });

/** How long `done` and `removed` marks and attempt counts are kept. */
const MARK_TTL_MS = 24 * 60 * 60_000;
/** A waiting call that has not come back this long after its time gives up its turn. */
const STALE_TURN_MS = 30_000;
/**
 * A call this late for its turn (its process frozen or dead, or no worker free) no longer holds
 * back the calls queued after it; when it comes it still goes before them.
 */
const LATE_TURN_MS = 2_000;
/**
 * The first in line, held back by the rate for at most this long, waits in its worker rather than
 * in BullMQ's delayed set; a call moved up is woken this much early. Delayed jobs come back on
 * Redis's timer (`hz`, 10 a second by default), so a shorter delay would be up to 100 ms late.
 */
const SHORT_WAIT_MS = 100;

/** At most this many calls of one process wait in their workers (the rest in the delayed set). */
const MAX_SLEEPERS = 8;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

// Lua shared by the scripts that change who is first in an organization's line.
// nowMs(): Redis's clock. firstComing: the first call in line still coming (its turn at most
// lateTurnMs past) and its turn; entries with no turn (left behind by an older version) are
// dropped on the way. wakeFirst: that call, other than `except`, when its turn is later than
// `threshold`, is brought forward to `target` and its id returned (its job is to be moved up too),
// else ''.
const LINE_LUA = `
local function nowMs()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function firstComing(line, waiting, late)
  for _, m in ipairs(redis.call('ZRANGE', line, 0, 99)) do
    local tm = redis.call('ZSCORE', waiting, m)
    if not tm then
      redis.call('ZREM', line, m)
    elseif tonumber(tm) >= late then
      return m, tonumber(tm)
    end
  end
  return nil, nil
end
local function wakeFirst(line, waiting, late, threshold, target, except)
  local m, tm = firstComing(line, waiting, late)
  if not m or m == except or tm <= threshold then return '' end
  redis.call('ZADD', waiting, target, m)
  return m
end
`;

// KEYS: slots, next, waiting, state, attempts, line, seq
// ARGV: callId, max, intervalMs, fullRecheckMs, token, claimMs, markTtlMs, staleTurnMs, seq ('' for
// a job queued without one), lateTurnMs
// → {status, value, flag, now, wakeCallId, wakeMs}:
//   {'taken', attempt, fresh(1|0)} | {'full'|'busy', waitMs, 0} | {'rate', waitMs, first(1|0)} |
//   {'gone', 0, 0}; wakeCallId (or '') is the call first in line, its turn just brought forward to
//   wakeMs from now: its job is to be moved up as well
const ACQUIRE_SCRIPT = `${LINE_LUA}
local now = nowMs()
local callId = ARGV[1]
local late = now - tonumber(ARGV[10])
local recheck = tonumber(ARGV[4])
local state = redis.call('GET', KEYS[4])
if state == 'done' or state == 'removed' then
  local wasFirst = firstComing(KEYS[6], KEYS[3], late) == callId
  redis.call('ZREM', KEYS[3], callId)
  redis.call('ZREM', KEYS[6], callId)
  local wake = ''
  if wasFirst then wake = wakeFirst(KEYS[6], KEYS[3], late, now, now, '') end
  return {'gone', 0, 0, now, wake, 0}
end
if state then
  return {'busy', redis.call('PTTL', KEYS[4]), 0, now, '', 0}
end
local max = tonumber(ARGV[2])
local interval = tonumber(ARGV[3])
local staleTurn = tonumber(ARGV[8])
local seq = ARGV[9]
if seq == '' then
  -- queued without a place: its place in line, or a new one behind every call queued so far
  seq = redis.call('ZSCORE', KEYS[6], callId) or tostring(redis.call('INCR', KEYS[7]))
end
-- forget the turns of calls that never came back (removed jobs, dead processes)
for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now - staleTurn)) do
  redis.call('ZREM', KEYS[3], m)
  redis.call('ZREM', KEYS[6], m)
end
-- a call ahead in the line (queued earlier) that is still coming holds this one back; one more
-- than lateTurnMs late for its turn (a frozen or dead process) no longer does
local ahead = firstComing(KEYS[6], KEYS[3], late)
local blocked = ahead ~= nil and ahead ~= callId and tonumber(redis.call('ZSCORE', KEYS[6], ahead)) < tonumber(seq)
local held = redis.call('ZSCORE', KEYS[1], callId)
local used = redis.call('ZCARD', KEYS[1])
local nxt = tonumber(redis.call('GET', KEYS[2]) or '0')
local fullPace = math.max(1, math.floor(recheck / math.max(max, 1)))
redis.call('ZREM', KEYS[3], callId)
-- a call that still holds its slot (an attempt whose process died) needs no free slot and no
-- turn, but dials at the org's rate like any other
if nxt <= now and (held or (used < max and not blocked)) then
  if not held then
    redis.call('ZADD', KEYS[1], now, callId)
    used = used + 1
  end
  redis.call('SET', KEYS[2], now + interval, 'PX', interval + 60000)
  redis.call('ZREM', KEYS[6], callId)
  redis.call('SET', KEYS[4], 'dialling:' .. ARGV[5], 'PX', ARGV[6])
  local attempt = redis.call('INCR', KEYS[5])
  redis.call('PEXPIRE', KEYS[5], ARGV[7])
  -- the next in line looks next: at the org's pace when full, else when the rate allows
  local wait = math.max(1, interval)
  if used >= max then wait = fullPace end
  local wake = wakeFirst(KEYS[6], KEYS[3], late, now + wait, now + wait, callId)
  local fresh = 1
  if held then fresh = 0 end
  return {'taken', attempt, fresh, now, wake, wait}
end
local full = used >= max and not held
local at, spacing
if held then
  -- its own slot is waiting for it: it looks again when the rate allows, ahead of the line
  spacing = math.max(1, interval)
  at = nxt
  blocked = false
elseif full then
  spacing = fullPace
  -- the first in line keeps looking at the org's pace; the others take turns behind the last
  -- (each is moved up when it comes first in line)
  if blocked then at = now + recheck else at = now + spacing end
else
  spacing = math.max(1, interval)
  at = nxt
end
if blocked then
  local last = redis.call('ZREVRANGE', KEYS[3], 0, 0, 'WITHSCORES')
  if last[2] and tonumber(last[2]) + spacing > at then at = tonumber(last[2]) + spacing end
  if at < now + spacing then at = now + spacing end
end
if at <= now then at = now + 1 end
redis.call('ZADD', KEYS[3], at, callId)
redis.call('ZADD', KEYS[6], seq, callId)
local ttl = at - now + staleTurn
if redis.call('PTTL', KEYS[3]) < ttl then redis.call('PEXPIRE', KEYS[3], ttl) end
if redis.call('PTTL', KEYS[6]) < ttl then redis.call('PEXPIRE', KEYS[6], ttl) end
-- the call that holds this one back looks no later than the org could next dial (its own turn
-- may have been booked far out, and the calls that would have moved it up gone)
local soon = now + fullPace
if not full then soon = math.max(now + 1, nxt) end
local wake = wakeFirst(KEYS[6], KEYS[3], late, soon, soon, callId)
local first = 1
if blocked then first = 0 end
if full then return {'full', at - now, 0, now, wake, soon - now} end
-- the first in line held back by the rate only: it may wait for its moment in its worker
return {'rate', at - now, first, now, wake, soon - now}`;

// KEYS: line, waiting — ARGV: staleTurnMs, then callId, seq for each call queued (one org's)
// Puts the calls in their organization's line at once, so that one looked at before an earlier
// one (a worker's concurrent slots, a second process) waits for it.
const ENQUEUE_SCRIPT = `${LINE_LUA}
local now = nowMs()
for i = 2, #ARGV, 2 do
  if redis.call('ZADD', KEYS[1], 'NX', ARGV[i + 1], ARGV[i]) == 1 then
    redis.call('ZADD', KEYS[2], 'NX', now, ARGV[i])
  end
end
local ttl = tonumber(ARGV[1])
if redis.call('PTTL', KEYS[1]) < ttl then redis.call('PEXPIRE', KEYS[1], ttl) end
if redis.call('PTTL', KEYS[2]) < ttl then redis.call('PEXPIRE', KEYS[2], ttl) end
return 1`;

// KEYS: state, attempts, waiting, slots, line — ARGV: callId, markTtlMs, releaseSlot (1|0),
// lateTurnMs → the call to move up now ('' for none): a freed slot wakes the first in line
const FINISH_SCRIPT = `${LINE_LUA}
redis.call('SET', KEYS[1], 'done', 'PX', ARGV[2])
redis.call('DEL', KEYS[2])
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('ZREM', KEYS[5], ARGV[1])
if ARGV[3] ~= '1' or redis.call('ZREM', KEYS[4], ARGV[1]) == 0 then return '' end
local now = nowMs()
return wakeFirst(KEYS[5], KEYS[3], now - tonumber(ARGV[4]), now, now, '')`;

// KEYS: state, slots, line, waiting — ARGV: callId, token, lateTurnMs → the call to move up now
const RETRY_SCRIPT = `${LINE_LUA}
if redis.call('GET', KEYS[1]) == 'dialling:' .. ARGV[2] then redis.call('DEL', KEYS[1]) end
if redis.call('ZREM', KEYS[2], ARGV[1]) == 0 then return '' end
local now = nowMs()
return wakeFirst(KEYS[3], KEYS[4], now - tonumber(ARGV[3]), now, now, '')`;

// KEYS: state, job hash, waiting, attempts, line — ARGV: callId, markTtlMs, lateTurnMs
// → {removed (1|0), the call to move up now ('' for none)}
const REMOVE_SCRIPT = `${LINE_LUA}
if redis.call('GET', KEYS[1]) then return {0, ''} end
if redis.call('EXISTS', KEYS[2]) == 0 then return {0, ''} end
local now = nowMs()
local late = now - tonumber(ARGV[3])
local wasFirst = firstComing(KEYS[5], KEYS[3], late) == ARGV[1]
redis.call('SET', KEYS[1], 'removed', 'PX', ARGV[2])
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('ZREM', KEYS[5], ARGV[1])
redis.call('DEL', KEYS[4])
-- it was first: the new first looks at once
if not wasFirst then return {1, ''} end
return {1, wakeFirst(KEYS[5], KEYS[3], late, now, now, '')}`;

// KEYS: slots, line, waiting — ARGV: callId, lateTurnMs → the call to move up now ('' for none)
const RELEASE_SCRIPT = `${LINE_LUA}
if redis.call('ZREM', KEYS[1], ARGV[1]) == 0 then return '' end
local now = nowMs()
return wakeFirst(KEYS[2], KEYS[3], now - tonumber(ARGV[2]), now, now, '')`;

// KEYS: slots — ARGV: callId, takenAt: removes the slot only if it is the one that was looked at
const RECLAIM_SCRIPT = `
local s = redis.call('ZSCORE', KEYS[1], ARGV[1])
if s and tonumber(s) == tonumber(ARGV[2]) then return redis.call('ZREM', KEYS[1], ARGV[1]) end
return 0`;

type AcquireReply = [status: 'taken' | 'full' | 'rate' | 'busy' | 'gone', value: number, flag: number, now: number, wakeCallId: string, wakeMs: number];

type DialerRedis = Redis & {
  sbAcquire(...args: (string | number)[]): Promise<AcquireReply>;
  sbFinish(...args: (string | number)[]): Promise<string>;
  sbRetry(...args: (string | number)[]): Promise<string>;
  sbRemove(...args: (string | number)[]): Promise<[removed: number, wakeCallId: string]>;
  sbReclaim(...args: (string | number)[]): Promise<number>;
  sbEnqueue(...args: (string | number)[]): Promise<number>;
  sbRelease(...args: (string | number)[]): Promise<string>;
};

/** A queued call as BullMQ keeps it: with its place in the queue (jobs queued without one get one at their first look). */
type QueuedJob = OutboundJob & { seq?: number };

const callOf = ({ callId, organizationId, record }: QueuedJob): OutboundJob => ({ callId, organizationId, record });

export class BullMqDialer implements Dialer {
  private readonly queue: Queue<QueuedJob>;
  private worker: Worker<QueuedJob> | null = null;
  private readonly redis: DialerRedis;
  /** The owner of its connections; closed with the dialer when it is the dialer's own. */
  private readonly connections: RedisConnections;
  private readonly ownConnections: boolean;
  private readonly logger: Logger;
  private readonly queueName: string;
  private readonly prefix: string;
  private readonly base: string;
  private readonly retryDelaysMs: readonly number[];
  private readonly staleSlotMs: number;
  private readonly fullRecheckMs: number;
  private readonly claimMs: number;
  private readonly lastReclaim = new Map<string, number>();
  /** Calls waiting in their worker for a dial moments away. */
  private sleepers = 0;
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
    this.ownConnections = !options.redis;
    this.connections = options.redis ?? new RedisConnections(options.redisUrl!, options.logger);
    // the slot scripts', the queue's and the worker's connections, each its own as ever, all the owner's
    this.redis = this.connections.open(`dialer:${this.queueName}`, { maxRetriesPerRequest: null }) as DialerRedis;
    this.redis.on('error', (err) => this.logger.warn({ err }, 'dialer: Redis error'));
    this.redis.defineCommand('sbAcquire', { numberOfKeys: 7, lua: ACQUIRE_SCRIPT });
    this.redis.defineCommand('sbFinish', { numberOfKeys: 5, lua: FINISH_SCRIPT });
    this.redis.defineCommand('sbRetry', { numberOfKeys: 4, lua: RETRY_SCRIPT });
    this.redis.defineCommand('sbRemove', { numberOfKeys: 5, lua: REMOVE_SCRIPT });
    this.redis.defineCommand('sbEnqueue', { numberOfKeys: 2, lua: ENQUEUE_SCRIPT });
    this.redis.defineCommand('sbRelease', { numberOfKeys: 3, lua: RELEASE_SCRIPT });
    this.redis.defineCommand('sbReclaim', { numberOfKeys: 1, lua: RECLAIM_SCRIPT });
    this.queue = new Queue<QueuedJob>(this.queueName, {
      connection: this.connections.forBullMq(`dialer:${this.queueName}:queue`),
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
  private lineKey = (org: string) => `${this.base}:org:${org}:line`;
  private get seqKey(): string {
    return `${this.base}:seq`;
  }
  private stateKey = (callId: string) => `${this.base}:call:${callId}:state`;
  private attemptsKey = (callId: string) => `${this.base}:call:${callId}:attempts`;
  private jobKey = (callId: string) => `${this.prefix}:${this.queueName}:${callId}`;

  async enqueue(jobs: OutboundJob[]): Promise<void> {
    if (this.closed) throw new Error('the dialer is closed');
    if (jobs.length === 0) return;
    // each call's place in the queue, shared by every process
    const last = await this.redis.incrby(this.seqKey, jobs.length);
    const queued = jobs.map((job, i): QueuedJob => ({ ...callOf(job), seq: last - jobs.length + 1 + i }));
    const byOrg = new Map<string, QueuedJob[]>();
    for (const job of queued) {
      const calls = byOrg.get(job.organizationId);
      if (calls) calls.push(job);
      else byOrg.set(job.organizationId, [job]);
    }
    // in line first: a job taken by a worker the moment it is added already waits its turn (a call
    // queued again keeps its place; the line's entries of a failed add are forgotten with time)
    for (const [org, calls] of byOrg) {
      await this.redis.sbEnqueue(this.lineKey(org), this.waitingKey(org), STALE_TURN_MS, ...calls.flatMap((c) => [c.callId, c.seq!]));
    }
    // a job id already in the queue is not added again
    await this.queue.addBulk(queued.map((data) => ({ name: 'dial', data, opts: { jobId: data.callId } })));
  }

  async remove(callId: string): Promise<boolean> {
    const job = await this.queue.getJob(callId);
    if (!job) return false;
    const org = job.data.organizationId;
    const [removed, wake] = await this.redis.sbRemove(
      this.stateKey(callId),
      this.jobKey(callId),
      this.waitingKey(org),
      this.attemptsKey(callId),
      this.lineKey(org),
      callId,
      MARK_TTL_MS,
      LATE_TURN_MS,
    );
    if (wake) await this.moveUp(wake, 0);
    if (removed !== 1) return false;
    // an active job (between two looks at its slot) cannot be removed here; its next look sees 'removed'
    await this.queue.remove(callId).catch((err: unknown) => this.logger.debug({ err, callId }, 'dialer: removed call left to its worker'));
    return true;
  }

  async release(organizationId: string, callId: string): Promise<void> {
    const wake = await this.redis.sbRelease(this.slotsKey(organizationId), this.lineKey(organizationId), this.waitingKey(organizationId), callId, LATE_TURN_MS);
    if (wake) await this.moveUp(wake, 0);
  }

  /**
   * Brings a waiting call's next look forward to `ms` from now (it came first in line, or a slot
   * was freed). A job that is not waiting in the delayed set (being looked at, or gone) is left as
   * it is: it looks again soon by itself.
   */
  private async moveUp(callId: string, ms: number): Promise<void> {
    try {
      const job = await this.queue.getJob(callId);
      if (job) await this.bringForward(job, ms);
    } catch (err) {
      this.logger.debug({ err, callId }, 'dialer: a waiting call was not moved up');
    }
  }

  private async recheckTurn(job: Job<QueuedJob>, bookedAt: number, ms: number): Promise<void> {
    try {
      const turn = await this.redis.zscore(this.waitingKey(job.data.organizationId), job.data.callId);
      if (turn !== null && Number(turn) < bookedAt + ms) await this.bringForward(job, Number(turn) - bookedAt);
    } catch (err) {
      this.logger.debug({ err, callId: job.id }, 'dialer: a waiting call\'s turn was not read again');
    }
  }

  private async bringForward(job: Job<QueuedJob>, ms: number): Promise<void> {
    try {
      // early by the timer's granularity: a call that comes before its moment waits in its worker
      if (ms <= SHORT_WAIT_MS) await job.promote();
      else await job.changeDelay(ms - SHORT_WAIT_MS);
    } catch (err) {
      // not in the delayed set (being looked at, or gone): it looks again soon by itself
      this.logger.debug({ err, callId: job.id }, 'dialer: a waiting call was not moved up');
    }
  }

  async start(hooks: DialerHooks): Promise<void> {
    if (this.closed) throw new Error('the dialer is closed');
    if (this.worker) return;
    this.hooks = hooks;
    this.worker = new Worker<QueuedJob>(this.queueName, (job, token) => this.process(job, token), {
      connection: this.connections.forBullMq(`dialer:${this.queueName}:worker`),
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
    if (this.ownConnections) await this.connections.close();
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

  private async process(job: Job<QueuedJob>, token: string | undefined): Promise<void> {
    const hooks = this.hooks!;
    const { callId, organizationId: org } = job.data;
    for (let look = 0; ; look++) {
      const { max, intervalMs } = dialSpacing(await hooks.limits(org));
      const [status, value, flag, now, wakeCallId, wakeMs] = await this.redis.sbAcquire(
        this.slotsKey(org),
        this.nextKey(org),
        this.waitingKey(org),
        this.stateKey(callId),
        this.attemptsKey(callId),
        this.lineKey(org),
        this.seqKey,
        callId,
        max,
        intervalMs,
        this.fullRecheckMs,
        token ?? '',
        this.claimMs,
        MARK_TTL_MS,
        STALE_TURN_MS,
        job.data.seq ?? '',
        LATE_TURN_MS,
      );
      if (wakeCallId) void this.moveUp(wakeCallId, Number(wakeMs));
      switch (status) {
        case 'gone':
          return;
        case 'taken':
          return this.dial(job, token, value, flag === 1);
        case 'full':
          if (look === 0 && (await this.reclaim(org, Number(now)))) continue;
          return this.waitFor(job, token, value, Number(now));
        case 'busy':
          // another worker claimed it (or died claiming it): look again once the claim is over
          return this.waitFor(job, token, Math.max(0, value) + 50);
        case 'rate':
          // the next dial is this call's and only moments away: wait for it here (a delayed job
          // looks again only at Redis's timer, about 100 ms late at the default hz)
          if (flag === 1 && value <= SHORT_WAIT_MS && !this.closed && this.sleepers < MAX_SLEEPERS) {
            this.sleepers++;
            try {
              await sleep(Math.max(1, value));
            } finally {
              this.sleepers--;
            }
            if (!this.closed) continue;
          }
          return this.waitFor(job, token, value, Number(now));
      }
    }
  }

  /**
   * Puts the job in the delayed set for `ms`. With `bookedAt` (Redis's time when the turn was
   * booked, `ms` before the turn): a call ahead may have moved this one's turn up while its job was
   * still here, out of reach of `changeDelay`; then it is moved up now.
   */
  private async waitFor(job: Job<QueuedJob>, token: string | undefined, ms: number, bookedAt?: number): Promise<never> {
    // BullMQ's delayed set runs on this process's clock; the scripts' decisions on Redis's
    await job.moveToDelayed(Date.now() + Math.max(1, Number(ms)), token);
    if (bookedAt !== undefined && ms > SHORT_WAIT_MS) {
      // after this run has ended (BullMQ tracks a job's lock by its id: a promoted job picked up
      // again before this run let go would lose the new run's lock renewal)
      setImmediate(() => void this.recheckTurn(job, bookedAt, ms));
    }
    throw new DelayedError();
  }

  /** With the slot taken and the call claimed: dial, and record what came of it. */
  private async dial(job: Job<QueuedJob>, token: string | undefined, attempt: number, fresh: boolean): Promise<void> {
    const hooks = this.hooks!;
    const { callId, organizationId: org } = job.data;
    const log = this.logger.child({ callId, organizationId: org });
    const finish = async (releaseSlot: boolean) => {
      const wake = await this.redis.sbFinish(
        this.stateKey(callId),
        this.attemptsKey(callId),
        this.waitingKey(org),
        this.slotsKey(org),
        this.lineKey(org),
        callId,
        MARK_TTL_MS,
        releaseSlot ? 1 : 0,
        LATE_TURN_MS,
      );
      if (wake) await this.moveUp(wake, 0);
    };
    const maxAttempts = this.retryDelaysMs.length + 1;
    if (attempt > maxAttempts) {
      // earlier attempts died with their processes; this one is past the limit
      const err = new Error(`the call was not dialled after ${maxAttempts} attempts`);
      log.error({ attempt }, 'dialer: too many attempts; giving up');
      await this.giveUp(callOf(job.data), err, log);
      await finish(true);
      return;
    }
    let outcome: 'dialled' | 'skipped';
    try {
      outcome = await hooks.dial(callOf(job.data), { attempt });
    } catch (err) {
      const wait = retryDelay(this.retryDelaysMs, attempt);
      if (wait === null) {
        log.error({ err, attempt }, 'dialer: dial failed; giving up');
        await this.giveUp(callOf(job.data), err, log);
        await finish(true);
        return;
      }
      log.warn({ err, attempt, retryInMs: wait }, 'dialer: dial failed; retrying');
      const wake = await this.redis.sbRetry(this.stateKey(callId), this.slotsKey(org), this.lineKey(org), this.waitingKey(org), callId, token ?? '', LATE_TURN_MS);
      if (wake) await this.moveUp(wake, 0);
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
