/**
 * The one job queue of the process (docs/queues.md): webhook notifications and notification
 * e-mails are jobs on it, and the dialler takes its BullMQ connection from the same place. Two
 * backends with one set of rules, chosen once from the configuration by `createQueues`: BullMQ on
 * Redis when REDIS_URL is set (durable, shared by every process; bullmq.ts), in process otherwise
 * (in-process.ts).
 *
 * - at least once: a job leaves the queue only when its handler says `done` (or throws past
 *   BullMQ's crash retries); `{ retryInMs }` attempts it again that much later, with `attempt` + 1;
 * - a job with a `group` waits behind the group's earlier jobs (FIFO): only the head of a group is
 *   attempted, and while it waits for its retry the rest of the group waits too. Groups (and jobs
 *   without one) are independent of each other.
 *
 *   const queues = createQueues({ redis, logger });            // redis: RedisConnections | null
 *   const q = queues.create<Email>({ name: 'switchboard-emails', handler, ... });
 *   await q.start(); await q.add({ id, data });
 */
import type { Logger } from 'pino';
import type { RedisConnections } from '../redis.js';
import type { Clock } from '../webhooks/clock.js';
import { BullMqJobQueue } from './bullmq.js';
import { InProcessJobQueue } from './in-process.js';

export interface Job<T> {
  /** Unique: adding an id that is already queued (BullMQ) does not queue it twice. */
  id: string;
  /** Jobs of one group are attempted one at a time, in the order they were added. */
  group?: string | undefined;
  data: T;
  /** Attempts already made elsewhere (a job queued again); the next one is `attemptsMade + 1`. */
  attemptsMade?: number | undefined;
}

export interface JobRun<T> {
  id: string;
  group: string | undefined;
  data: T;
  /** 1 for the first attempt. */
  attempt: number;
}

/** `done`: it leaves the queue; `retryInMs`: attempted again that much later. */
export type JobOutcome = 'done' | { retryInMs: number };

export type JobHandler<T> = (job: JobRun<T>) => Promise<JobOutcome>;

export interface JobQueueOptions<T> {
  /** The queue's name (BullMQ's queue name; keys `<prefix>:<name>:…`). */
  name: string;
  handler: JobHandler<T>;
  logger: Logger;
  /** Jobs attempted at once by this process. Default 32. */
  concurrency?: number;
  /** How the logs name it: `{ queue: 'webhook queue', items: 'undelivered messages' }`. */
  words?: { queue: string; items: string };
  /** In process: time and timers (tests give a ManualClock). BullMQ waits on real time. */
  clock?: Clock;
  /** BullMQ: Redis key prefix. Default `bull`. */
  prefix?: string;
  /** BullMQ: the job lock, longer than one attempt (it is renewed meanwhile). Default 60 s. */
  lockDurationMs?: number;
}

export interface JobQueue<T> {
  readonly backend: QueueBackend;
  /** Resolves once the job is queued (in Redis, durably). */
  add(job: Job<T>): Promise<void>;
  /** Whether the job is still queued (a lost BullMQ job of a kept group is put back, and counts). */
  holds(job: Pick<Job<T>, 'id' | 'group'>): Promise<boolean>;
  /** Starts attempting (jobs queued before, and before a restart, included). */
  start(): Promise<void>;
  /** Resolves when no attempt is in flight or due here (retries may still be scheduled). */
  whenIdle(): Promise<void>;
  /** Jobs not yet done that this process holds (in process); BullMQ: 0, they are in Redis. */
  readonly pending: number;
  /** Stops: lets attempts in flight finish, keeps (Redis) or drops (in process) the rest. */
  close(): Promise<void>;
  /** Stops this instance's worker and removes every key of the queue (tests). */
  obliterate(): Promise<void>;
}

export type QueueBackend = 'in-process' | 'redis';

/** The queues of one process, all on the one backend. */
export interface Queues {
  readonly backend: QueueBackend;
  /** The Redis owner the BullMQ queues (and the dialler) take their connections from; null in process. */
  readonly redis: RedisConnections | null;
  create<T>(options: JobQueueOptions<T>): JobQueue<T>;
}

/** The one place the backend is chosen: BullMQ on Redis with the owner, in process without. */
export function createQueues(o: { redis: RedisConnections | null }): Queues {
  const redis = o.redis;
  if (!redis) return { backend: 'in-process', redis: null, create: (options) => new InProcessJobQueue(options) };
  return { backend: 'redis', redis, create: (options) => new BullMqJobQueue({ ...options, redis }) };
}
