/**
 * The outbound dial queue, the "dialer" (DECISIONS 11, docs/outbound-queue.md): outbound calls
 * made `queued` by `POST /calls` wait here until one of the organization's slots is free
 * (`max_concurrent_calls`) and the organization's rate allows the next dial (`calls_per_second`),
 * then `hooks.dial` places them. BullMQ on Redis with REDIS_URL (dialer-bullmq.ts, shared by every
 * process); otherwise `InProcessDialer` below, which keeps its queue in SQL (`outbound_queue`) so
 * that queued calls survive a restart, for one process per database.
 *
 * Both keep the same rules:
 * - a slot is taken before `dial` and belongs to the call (the call id is the slot), so a retried
 *   job never takes two; it is freed by `release`, by a 'skipped' dial, by a throw, or taken back
 *   when the organization is full and `isLive` says a slot older than `staleSlotMs` is dead;
 * - taking a slot also moves the organization's next allowed dial 1/cps later, in the same step;
 * - an organization waiting for a slot or its rate never holds up another one.
 */
import type { Logger } from 'pino';
import type { Db } from '../store/db.js';
import { OutboundQueueRepository } from '../store/outbound-queue.js';
import { systemClock, type Clock } from '../webhooks/clock.js';
import { BullMqDialer } from './dialer-bullmq.js';
import type { Queues } from '../queue/index.js';

export interface OutboundJob {
  callId: string;
  organizationId: string;
  /** The call's whole record as queued (JSON); the embedded default's call sessions are in memory and gone after a restart. */
  record: Record<string, unknown>;
}

export interface OutboundLimits {
  /** Live outbound calls of the organization never exceed it (DECISIONS 11; default 10). */
  maxConcurrentCalls: number;
  /** Dialling never goes faster; may be fractional (default 1). */
  callsPerSecond: number;
}

export const DEFAULT_OUTBOUND_LIMITS: OutboundLimits = { maxConcurrentCalls: 10, callsPerSecond: 1 };

/** What `dial` is told about this attempt. */
export interface DialContext {
  /**
   * 1 for the first attempt. Above 1, an earlier attempt threw or its process died while dialling,
   * so it may have reached the carrier: look at the call's record before dialling again.
   */
  attempt: number;
}

export interface DialerHooks {
  /** The organization's limits; called each time one of its calls tries to take a slot, so keep it cheap. */
  limits(organizationId: string): Promise<OutboundLimits>;
  /**
   * Places the call. 'dialled': the call now holds one of its org's slots until `release()`;
   * 'skipped': it is no longer queued (ended through the API, or already dialled by someone): no
   * slot. A throw: logged, slot freed, the job retried with backoff (`retryDelaysMs`), then given
   * up (`onGaveUp`).
   */
  dial(job: OutboundJob, context: DialContext): Promise<'dialled' | 'skipped'>;
  /** Whether a call holding a slot is still live (to take back the slots of calls whose process died). */
  isLive(callId: string): Promise<boolean>;
  /** The call was not dialled after its last attempt threw (`err`): end it `dial-failed`. */
  onGaveUp?(job: OutboundJob, err: unknown): Promise<void>;
}

export interface Dialer {
  /** Queues the calls (in order; a call already queued stays as it is). Durable once it resolves. */
  enqueue(jobs: OutboundJob[]): Promise<void>;
  /** A queued call was canceled: true when it was still waiting, and then it is never dialled. */
  remove(callId: string): Promise<boolean>;
  /** A dialled call ended: its slot is free (idempotent). */
  release(organizationId: string, callId: string): Promise<void>;
  /** Starts dialling, calls queued before (and before a restart) included. */
  start(hooks: DialerHooks): Promise<void>;
  /** Stops dialling, letting dials in flight finish; the calls still queued stay queued. */
  close(): Promise<void>;
  /** Calls queued and not yet dialled, skipped or given up (those being dialled now included). */
  queuedCount(): Promise<number>;
}

export interface DialerOptions {
  /** BullMQ on this Redis; without it, the in-process dialer on `db`. */
  redisUrl?: string | undefined;
  /** The in-process dialer's database (required without `redisUrl`). */
  db?: Db | undefined;
  logger: Logger;
  /** BullMQ queue name. Default `switchboard-outbound`. */
  queueName?: string;
  /** BullMQ Redis key prefix. Default `bull`. */
  prefix?: string;
  /** In-process only: time and timers (BullMQ's slots and rates run on Redis's own clock). */
  clock?: Clock;
  /** Waits before the 2nd, 3rd… attempt of a dial that threw; attempts = length + 1. Default 5 s, 30 s, 2 min. */
  retryDelaysMs?: readonly number[];
  /** A slot held this long is looked at with `isLive` when its organization is full. Default 60 s. */
  staleSlotMs?: number;
  /** How soon a call of a full organization looks again (BullMQ: the org's waiting calls take turns). Default 1 s. */
  fullRecheckMs?: number;
  /** BullMQ: jobs handled at once by this process. Default 32. */
  concurrency?: number;
  /** BullMQ: the worker's job lock; a dead process's jobs go to another worker after it (plus `stalledIntervalMs`). Default 30 s. */
  lockDurationMs?: number;
  /** BullMQ: how often workers look for jobs of dead processes. Default 30 s. */
  stalledIntervalMs?: number;
  /**
   * BullMQ: how long a job being dialled stays claimed when its worker dies, before another may
   * try it again (told `attempt` 2). Longer than any dial. Default 60 s.
   */
  dialClaimMs?: number;
}

export const DEFAULT_RETRY_DELAYS_MS: readonly number[] = [5_000, 30_000, 120_000];
export const DEFAULT_STALE_SLOT_MS = 60_000;
export const DEFAULT_FULL_RECHECK_MS = 1_000;

/**
 * The dialer for this deployment: with the process's `queues` (src/queue/), on their backend (BullMQ
 * on their Redis owner, or in process over `db`); without them, BullMQ with `redisUrl`, else in process.
 */
export function createDialer(options: DialerOptions & { queues?: Queues }): Dialer {
  const { queues, ...rest } = options;
  if (queues) {
    if (queues.redis) return new BullMqDialer({ ...rest, redis: queues.redis });
  } else if (options.redisUrl) {
    return new BullMqDialer({ ...rest, redisUrl: options.redisUrl });
  }
  if (!options.db) throw new Error('createDialer: the in-process dialer needs a database (db)');
  return new InProcessDialer({ ...rest, db: options.db });
}

/** Limits as the slot logic uses them: a whole number of slots, a rate as the least gap between dials. */
export function dialSpacing(limits: OutboundLimits): { max: number; intervalMs: number } {
  const max = Number.isFinite(limits.maxConcurrentCalls) ? Math.max(0, Math.floor(limits.maxConcurrentCalls)) : DEFAULT_OUTBOUND_LIMITS.maxConcurrentCalls;
  const cps = Number.isFinite(limits.callsPerSecond) && limits.callsPerSecond > 0 ? limits.callsPerSecond : DEFAULT_OUTBOUND_LIMITS.callsPerSecond;
  // rounded up: never faster than asked
  return { max, intervalMs: Math.ceil(1000 / cps) };
}

/** The wait before attempt `attempt + 1` after attempt `attempt` threw; null: give up. */
export function retryDelay(delays: readonly number[], attempt: number): number | null {
  return attempt <= delays.length ? (delays[attempt - 1] ?? null) : null;
}

interface QueuedCall {
  job: OutboundJob;
  /** Attempts started. */
  attempts: number;
  notBefore: number;
  /** waiting: in its org's line; claiming: its attempt being counted, no slot yet; dialling: slot taken, in `dial`. */
  state: 'waiting' | 'claiming' | 'dialling';
  removed: boolean;
}

interface OrgLine {
  /** Its queued calls, FIFO. */
  calls: QueuedCall[];
  /** call id → when its slot was taken. */
  slots: Map<string, number>;
  nextDialAt: number;
  timer: unknown;
  timerAt: number;
  pumping: boolean;
  again: boolean;
  lastReclaimAt: number;
}

export interface InProcessDialerOptions extends DialerOptions {
  db: Db;
}

/**
 * The embedded default: slots and rates in memory, the queue in SQL. One process per database:
 * two in-process dialers on one PostgreSQL would each dial every row.
 */
export class InProcessDialer implements Dialer {
  private readonly repo: OutboundQueueRepository;
  private readonly clock: Clock;
  private readonly logger: Logger;
  private readonly retryDelaysMs: readonly number[];
  private readonly staleSlotMs: number;
  private readonly fullRecheckMs: number;
  private readonly orgs = new Map<string, OrgLine>();
  private readonly calls = new Map<string, QueuedCall>();
  private readonly inFlight = new Set<Promise<void>>();
  private hooks: DialerHooks | null = null;
  private running = false;
  private closed = false;

  constructor(options: InProcessDialerOptions) {
    this.repo = new OutboundQueueRepository(options.db);
    this.clock = options.clock ?? systemClock;
    this.logger = options.logger;
    this.retryDelaysMs = options.retryDelaysMs ?? DEFAULT_RETRY_DELAYS_MS;
    this.staleSlotMs = options.staleSlotMs ?? DEFAULT_STALE_SLOT_MS;
    this.fullRecheckMs = options.fullRecheckMs ?? DEFAULT_FULL_RECHECK_MS;
  }

  async enqueue(jobs: OutboundJob[]): Promise<void> {
    if (this.closed) throw new Error('the dialer is closed');
    await this.repo.add(jobs);
    const touched = new Set<string>();
    for (const job of jobs) {
      if (this.calls.has(job.callId)) continue;
      this.admit({ job, attempts: 0, notBefore: 0, state: 'waiting', removed: false });
      touched.add(job.organizationId);
    }
    for (const org of touched) void this.pump(org);
  }

  async remove(callId: string): Promise<boolean> {
    const call = this.calls.get(callId);
    if (!call) return this.repo.delete(callId);
    if (call.state === 'dialling' || call.removed) return false;
    // a call still 'claiming' has not reached `dial`: it stops there
    call.removed = true;
    if (call.state === 'waiting') this.forget(call);
    await this.repo.delete(callId);
    return true;
  }

  async release(organizationId: string, callId: string): Promise<void> {
    const line = this.orgs.get(organizationId);
    if (!line?.slots.delete(callId)) return;
    void this.pump(organizationId);
  }

  async start(hooks: DialerHooks): Promise<void> {
    if (this.closed) throw new Error('the dialer is closed');
    if (this.running) return;
    this.hooks = hooks;
    // every queued call has its row (enqueue writes it before it resolves), in FIFO order; the
    // lines are rebuilt in that order, with calls enqueued during this start (no row seen) last
    const rows = await this.repo.list();
    const earlier = new Map(this.calls);
    this.calls.clear();
    for (const line of this.orgs.values()) line.calls.length = 0;
    for (const row of rows) {
      this.admit(
        earlier.get(row.call_id) ?? {
          job: { callId: row.call_id, organizationId: row.organization_id, record: row.record },
          attempts: row.attempts,
          notBefore: row.not_before === null ? 0 : Date.parse(row.not_before),
          state: 'waiting',
          removed: false,
        },
      );
      earlier.delete(row.call_id);
    }
    for (const call of earlier.values()) if (!call.removed) this.admit(call);
    if (rows.length > 0) this.logger.info({ queued: rows.length }, 'dialer: queued outbound calls loaded');
    this.running = true;
    for (const org of this.orgs.keys()) void this.pump(org);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.running = false;
    for (const line of this.orgs.values()) this.clearTimer(line);
    while (this.inFlight.size > 0) await Promise.all([...this.inFlight]);
    for (const line of this.orgs.values()) this.clearTimer(line);
  }

  async queuedCount(): Promise<number> {
    return this.repo.count();
  }

  /** Slots held now per organization (tests, metrics). */
  liveSlots(organizationId: string): number {
    return this.orgs.get(organizationId)?.slots.size ?? 0;
  }

  private line(org: string): OrgLine {
    let line = this.orgs.get(org);
    if (!line) {
      line = { calls: [], slots: new Map(), nextDialAt: 0, timer: null, timerAt: 0, pumping: false, again: false, lastReclaimAt: -Infinity };
      this.orgs.set(org, line);
    }
    return line;
  }

  private admit(call: QueuedCall): void {
    this.calls.set(call.job.callId, call);
    this.line(call.job.organizationId).calls.push(call);
  }

  private forget(call: QueuedCall): void {
    this.calls.delete(call.job.callId);
    const line = this.orgs.get(call.job.organizationId);
    if (!line) return;
    const i = line.calls.indexOf(call);
    if (i >= 0) line.calls.splice(i, 1);
  }

  /** Dials the org's calls, oldest first, while a slot and the rate allow; else sets a timer. */
  private async pump(org: string): Promise<void> {
    const line = this.orgs.get(org);
    if (!line || !this.running) return;
    if (line.pumping) {
      line.again = true;
      return;
    }
    line.pumping = true;
    try {
      do {
        line.again = false;
        await this.pumpOnce(org, line);
      } while (line.again && this.running);
    } catch (err) {
      this.logger.error({ err, organizationId: org }, 'dialer: could not dial the organization\'s queue; trying again shortly');
      this.wakeAt(org, line, this.clock.now() + this.fullRecheckMs);
    } finally {
      line.pumping = false;
    }
  }

  private async pumpOnce(org: string, line: OrgLine): Promise<void> {
    const hooks = this.hooks!;
    for (;;) {
      if (!this.running) return;
      const head = this.headOf(line, this.clock.now());
      if (!head) {
        const later = line.calls.filter((c) => c.state === 'waiting').map((c) => c.notBefore);
        if (later.length > 0) this.wakeAt(org, line, Math.min(...later));
        return;
      }
      const { max, intervalMs } = dialSpacing(await hooks.limits(org));
      if (!this.running) return;
      if (head.state !== 'waiting' || head.removed) continue;
      const now = this.clock.now();
      if (line.slots.size >= max) {
        if (await this.reclaim(line, now)) continue;
        // release() pumps at once; the timer is for the reclaim check
        this.wakeAt(org, line, now + this.fullRecheckMs);
        return;
      }
      if (line.nextDialAt > now) {
        this.wakeAt(org, line, line.nextDialAt);
        return;
      }
      // the attempt is counted first, so that nothing stands between taking the slot and the dial
      // (the rate is the carrier's requests' rate); meanwhile only release() touches this org's slots
      head.state = 'claiming';
      const attempt = await this.countAttempt(head);
      if (attempt === null) continue;
      if (!this.running) {
        // closing: not dialled; the next start tells the hook attempt n+1, which looks at the record
        head.state = 'waiting';
        return;
      }
      const at = this.clock.now();
      line.slots.set(head.job.callId, at);
      line.nextDialAt = Math.max(line.nextDialAt, at) + intervalMs;
      head.state = 'dialling';
      head.attempts = attempt;
      const run = this.dialOne(line, head, attempt).finally(() => {
        this.inFlight.delete(run);
        void this.pump(org);
      });
      this.inFlight.add(run);
    }
  }

  /** The attempt's number, saved; null when the call left the queue meanwhile or the save failed. */
  private async countAttempt(call: QueuedCall): Promise<number | null> {
    let attempt: number | null;
    try {
      attempt = await this.repo.startAttempt(call.job.callId);
    } catch (err) {
      this.logger.error({ err, callId: call.job.callId }, 'dialer: could not count the dial attempt; trying again shortly');
      call.state = 'waiting';
      call.notBefore = this.clock.now() + this.fullRecheckMs;
      return null;
    }
    if (attempt === null || call.removed) {
      this.forget(call);
      return null;
    }
    return attempt;
  }

  private headOf(line: OrgLine, now: number): QueuedCall | undefined {
    return line.calls.find((c) => c.state === 'waiting' && !c.removed && c.notBefore <= now);
  }

  private async dialOne(line: OrgLine, call: QueuedCall, attempt: number): Promise<void> {
    const { job } = call;
    const log = this.logger.child({ callId: job.callId, organizationId: job.organizationId });
    let outcome: 'dialled' | 'skipped';
    try {
      outcome = await this.hooks!.dial(job, { attempt });
    } catch (err) {
      line.slots.delete(job.callId);
      const wait = retryDelay(this.retryDelaysMs, attempt);
      if (wait === null || this.closed) {
        if (wait === null) {
          log.error({ err, attempt }, 'dialer: dial failed; giving up');
          await this.giveUp(call, err, log);
        } else {
          // closing: the row stays, the next start retries it
          log.warn({ err, attempt }, 'dialer: dial failed while closing; it is retried after the next start');
          call.state = 'waiting';
        }
        return;
      }
      log.warn({ err, attempt, retryInMs: wait }, 'dialer: dial failed; retrying');
      call.notBefore = this.clock.now() + wait;
      call.state = 'waiting';
      await this.repo.retryAt(job.callId, new Date(call.notBefore)).catch((e: unknown) => log.warn({ err: e }, 'dialer: could not save the retry time'));
      this.wakeAt(job.organizationId, line, call.notBefore);
      return;
    }
    if (outcome === 'skipped') line.slots.delete(job.callId);
    // the row goes before the call leaves memory, so that remove() meanwhile says false
    // (a failed delete leaves the row: after a restart it is attempt n+1 and the hook sees the record)
    await this.repo.delete(job.callId).catch((err: unknown) => log.error({ err }, 'dialer: could not take the dialled call out of the queue'));
    this.forget(call);
  }

  private async giveUp(call: QueuedCall, err: unknown, log: Logger): Promise<void> {
    try {
      await this.hooks!.onGaveUp?.(call.job, err);
    } catch (e) {
      log.error({ err: e }, 'dialer: onGaveUp failed');
    }
    await this.repo.delete(call.job.callId).catch((e: unknown) => log.error({ err: e }, 'dialer: could not take the given-up call out of the queue'));
    this.forget(call);
  }

  /** Takes back slots older than `staleSlotMs` whose call `isLive` says is gone; true when any was. */
  private async reclaim(line: OrgLine, now: number): Promise<boolean> {
    if (now - line.lastReclaimAt < Math.min(this.fullRecheckMs, this.staleSlotMs)) return false;
    line.lastReclaimAt = now;
    let freed = false;
    for (const [callId, takenAt] of [...line.slots]) {
      if (now - takenAt < this.staleSlotMs) continue;
      if (await isDead(this.hooks!, callId, this.logger)) {
        if (line.slots.get(callId) === takenAt) {
          line.slots.delete(callId);
          freed = true;
          this.logger.warn({ callId, heldMs: now - takenAt }, 'dialer: took back the slot of a call that is not live');
        }
      }
    }
    return freed;
  }

  private wakeAt(org: string, line: OrgLine, at: number): void {
    if (!this.running) return;
    if (line.timer !== null && line.timerAt <= at) return;
    this.clearTimer(line);
    line.timerAt = at;
    line.timer = this.clock.setTimeout(() => {
      line.timer = null;
      void this.pump(org);
    }, Math.max(0, at - this.clock.now()));
  }

  private clearTimer(line: OrgLine): void {
    if (line.timer !== null) this.clock.clearTimeout(line.timer);
    line.timer = null;
  }
}

/** `isLive` said false; a throw counts as live (a slot is never taken back on a guess). */
export async function isDead(hooks: DialerHooks, callId: string, logger: Logger): Promise<boolean> {
  try {
    return !(await hooks.isLive(callId));
  } catch (err) {
    logger.warn({ err, callId }, 'dialer: isLive failed; the slot is kept');
    return false;
  }
}
