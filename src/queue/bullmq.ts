/**
 * The queue on Redis (BullMQ), for REDIS_URL deployments: durable across restarts and shared by
 * every process, on connections from the process's Redis owner (src/redis.ts).
 *
 * A job without a group is one BullMQ job (its id is the job's). A group is kept in order without
 * BullMQ groups: each group has a chain in Redis, a list of its queued jobs (`<base>:chain:<group>`),
 * and at most one BullMQ job that owns the chain (`<base>:owner:<group>` holds that job's id). Two
 * small Lua scripts keep this exact:
 * - enqueue: RPUSH; when the list was empty, the new job's id becomes the owner and a BullMQ job
 *   with that id is added;
 * - done: LPOP the head if it is the one just finished; when the list is empty, clear the owner.
 * The owning job attempts the head; when it is done it pops it and goes on with the next.
 *
 * A retry (of either kind) moves the BullMQ job to the delayed set until the next attempt and keeps
 * the attempt count in its data. A worker that dies mid-attempt leaves an active job that BullMQ's
 * stalled check hands to another worker: the job is attempted again (at least once). `start()`
 * also re-adds a job for any chain whose owning job is missing (a crash between RPUSH and the add).
 */
import { Queue, Worker, DelayedError, type Job as BullJob } from 'bullmq';
import type { Redis } from 'ioredis';
import type { RedisConnections } from '../redis.js';
import { CRASHED_ATTEMPT_RETRY_MS } from './in-process.js';
import type { Job, JobOutcome, JobQueue, JobQueueOptions } from './index.js';

export interface BullMqJobQueueOptions<T> extends JobQueueOptions<T> {
  redis: RedisConnections;
}

/** A group's owning job, or a job of its own; `attempts`: made so far on the head (or the job). */
type StoredJob<T> =
  | { kind: 'chain'; group: string; head_id: string | null; attempts: number }
  | { kind: 'single'; job: Job<T>; attempts: number };

/** A chain's entry: the job with its format's version (entries without one are read as a job's bare data). */
interface ChainEntry<T> {
  v: 2;
  id: string;
  data: T;
  attemptsMade?: number | undefined;
}

/**
 * An entry or a job's data as a process before this queue module left them in Redis (a rolling
 * upgrade): webhook chains held the notification itself (`attempts`: made elsewhere), and their job
 * `{call_id, head_id, attempts}`; an e-mail job held the e-mail, its attempts in BullMQ's count.
 */
function readEntry<T>(raw: string, group: string): Job<T> {
  const entry = JSON.parse(raw) as ChainEntry<T> | (T & { id: string; attempts?: number });
  if ('v' in entry && entry.v === 2) return { id: entry.id, group, data: entry.data, attemptsMade: entry.attemptsMade };
  return { id: entry.id, group, data: entry as T, attemptsMade: (entry as { attempts?: number }).attempts };
}

function readStored<T>(job: BullJob<StoredJob<T>>): StoredJob<T> {
  const data = job.data as StoredJob<T> | { call_id: string; head_id: string | null; attempts: number } | T;
  if (data && typeof data === 'object' && 'kind' in data && (data.kind === 'chain' || data.kind === 'single')) return data as StoredJob<T>;
  if (data && typeof data === 'object' && 'call_id' in data && 'head_id' in data) {
    const old = data as { call_id: string; head_id: string | null; attempts: number };
    return { kind: 'chain', group: old.call_id, head_id: old.head_id, attempts: old.attempts };
  }
  return { kind: 'single', job: { id: job.id!, data: data as T }, attempts: job.attemptsMade };
}

const ENQUEUE_SCRIPT = `
local n = redis.call('RPUSH', KEYS[1], ARGV[1])
if n == 1 then
  redis.call('SET', KEYS[2], ARGV[2])
  return 1
end
return 0`;

const DONE_SCRIPT = `
if redis.call('GET', KEYS[2]) ~= ARGV[1] then return -1 end
local head = redis.call('LINDEX', KEYS[1], 0)
if head and cjson.decode(head).id == ARGV[2] then redis.call('LPOP', KEYS[1]) end
local n = redis.call('LLEN', KEYS[1])
if n == 0 then redis.call('DEL', KEYS[2]) end
return n`;

type ChainRedis = Redis & {
  sbEnqueue(chainKey: string, ownerKey: string, entry: string, ownerId: string): Promise<number>;
  sbDone(chainKey: string, ownerKey: string, ownerId: string, headId: string): Promise<number>;
};

export class BullMqJobQueue<T> implements JobQueue<T> {
  readonly backend = 'redis' as const;
  readonly pending = 0;
  private readonly queue: Queue<StoredJob<T>>;
  private worker: Worker<StoredJob<T>> | null = null;
  private readonly redis: ChainRedis;
  private readonly base: string;
  private readonly prefix: string;
  private closed = false;

  constructor(private readonly options: BullMqJobQueueOptions<T>) {
    this.prefix = options.prefix ?? 'bull';
    this.base = `${this.prefix}:${options.name}:sb`;
    // the chains' scripts', the queue's and the worker's connections, each its own, all the owner's
    this.redis = options.redis.open(`queue:${options.name}`, { maxRetriesPerRequest: null }) as ChainRedis;
    this.redis.defineCommand('sbEnqueue', { numberOfKeys: 2, lua: ENQUEUE_SCRIPT });
    this.redis.defineCommand('sbDone', { numberOfKeys: 2, lua: DONE_SCRIPT });
    this.queue = new Queue<StoredJob<T>>(options.name, {
      connection: options.redis.forBullMq(`queue:${options.name}:queue`),
      prefix: this.prefix,
      defaultJobOptions: {
        removeOnComplete: true,
        removeOnFail: 1000,
        // only for crashes of the processor itself; the handler's retries are moveToDelayed
        attempts: 1_000_000,
        backoff: { type: 'fixed', delay: 5_000 },
      },
    });
    this.queue.on('error', (err) => this.options.logger.warn({ err }, `${this.words.queue}: BullMQ error`));
  }

  private get words(): { queue: string; items: string } {
    return this.options.words ?? { queue: 'job queue', items: 'jobs not done' };
  }

  private chainKey = (group: string) => `${this.base}:chain:${group}`;
  private ownerKey = (group: string) => `${this.base}:owner:${group}`;

  async add(job: Job<T>): Promise<void> {
    if (this.closed) throw new Error(`the ${this.words.queue} is closed`);
    if (job.group === undefined) {
      await this.queue.add('job', { kind: 'single', job, attempts: job.attemptsMade ?? 0 }, { jobId: job.id });
      return;
    }
    const first = await this.redis.sbEnqueue(this.chainKey(job.group), this.ownerKey(job.group), JSON.stringify({ v: 2, id: job.id, data: job.data, attemptsMade: job.attemptsMade } satisfies ChainEntry<T>), job.id);
    if (first === 1) await this.addChainJob(job.group, job.id);
  }

  async start(): Promise<void> {
    if (this.worker) return;
    await this.recoverOrphanChains();
    this.worker = new Worker<StoredJob<T>>(this.options.name, (job, token) => this.process(job, token), {
      connection: this.options.redis.forBullMq(`queue:${this.options.name}:worker`),
      prefix: this.prefix,
      concurrency: this.options.concurrency ?? 32,
      lockDuration: this.options.lockDurationMs ?? 60_000,
    });
    this.worker.on('error', (err) => this.options.logger.warn({ err }, `${this.words.queue}: worker error`));
    this.worker.on('failed', (job, err) => {
      if (err instanceof DelayedError) return;
      this.options.logger.error({ err, jobId: job?.id }, `${this.words.queue}: a job crashed; BullMQ retries it`);
    });
    await this.worker.waitUntilReady();
  }

  /** Durable: nothing is lost when the process stops, so there is nothing to wait for. */
  whenIdle(): Promise<void> {
    return Promise.resolve();
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.worker?.close();
    await this.queue.close();
  }

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

  /**
   * Whether the queue still has the job (for a group: its chain holds it and the chain's job
   * exists; a missing or failed job is put back, as at start-up). False after a Redis restart lost it.
   */
  async holds(job: Pick<Job<T>, 'id' | 'group'>): Promise<boolean> {
    if (job.group === undefined) {
      const stored = await this.queue.getJob(job.id);
      if (!stored) return false;
      if (await stored.isFailed()) await stored.retry();
      return true;
    }
    const [items, ownerId] = await Promise.all([this.redis.lrange(this.chainKey(job.group), 0, -1), this.redis.get(this.ownerKey(job.group))]);
    if (!items.some((raw) => (JSON.parse(raw) as { id: string }).id === job.id)) return false;
    if (!ownerId) return false;
    const owner = await this.queue.getJob(ownerId);
    if (!owner) await this.addChainJob(job.group, ownerId);
    else if (await owner.isFailed()) await owner.retry();
    return true;
  }

  private async addChainJob(group: string, ownerId: string): Promise<void> {
    await this.queue.add('chain', { kind: 'chain', group, head_id: null, attempts: 0 }, { jobId: ownerId });
  }

  /** A chain whose owner job does not exist (crash between RPUSH and add) gets it re-added. */
  private async recoverOrphanChains(): Promise<void> {
    let cursor = '0';
    do {
      const [next, keys] = await this.redis.scan(cursor, 'MATCH', `${this.base}:owner:*`, 'COUNT', 500);
      cursor = next;
      for (const key of keys) {
        const ownerId = await this.redis.get(key);
        if (!ownerId) continue;
        const job = await this.queue.getJob(ownerId);
        const group = key.slice(`${this.base}:owner:`.length);
        if (!job) {
          this.options.logger.info({ group }, `${this.words.queue}: re-adding the job of an orphaned chain`);
          await this.addChainJob(group, ownerId);
        } else if (await job.isFailed()) {
          await job.retry();
        }
      }
    } while (cursor !== '0');
  }

  private async attempt(job: Job<T>, attempt: number): Promise<JobOutcome> {
    try {
      return await this.options.handler({ id: job.id, group: job.group, data: job.data, attempt });
    } catch (err) {
      // not expected (handlers report failures as outcomes): retry later rather than lose it
      this.options.logger.error({ err, jobId: job.id, group: job.group }, `${this.words.queue}: an attempt crashed`);
      return { retryInMs: CRASHED_ATTEMPT_RETRY_MS };
    }
  }

  private async retryLater(job: BullJob<StoredJob<T>>, data: StoredJob<T>, ms: number, token: string | undefined): Promise<never> {
    // the attempt count lives in the job across the wait (and a restart)
    await job.updateData(data);
    await job.moveToDelayed(Date.now() + ms, token);
    throw new DelayedError();
  }

  private async process(job: BullJob<StoredJob<T>>, token: string | undefined): Promise<void> {
    const stored = readStored(job);
    if (stored.kind === 'single') {
      const attempts = stored.attempts + 1;
      const result = await this.attempt(stored.job, attempts);
      if (result !== 'done') await this.retryLater(job, { ...stored, attempts }, result.retryInMs, token);
      return;
    }
    const group = stored.group;
    let { head_id: headId, attempts } = stored;
    if ((await this.redis.get(this.ownerKey(group))) !== job.id) return; // a stale job: not the owner
    for (;;) {
      const raw = await this.redis.lindex(this.chainKey(group), 0);
      if (raw === null) return;
      const head = readEntry<T>(raw, group);
      if (head.id !== headId) {
        headId = head.id;
        attempts = head.attemptsMade ?? 0;
      }
      attempts += 1;
      const result = await this.attempt(head, attempts);
      if (result !== 'done') await this.retryLater(job, { kind: 'chain', group, head_id: headId, attempts }, result.retryInMs, token);
      // pops the head and says how many are left; -1: another job owns the chain now
      const left = await this.redis.sbDone(this.chainKey(group), this.ownerKey(group), job.id!, head.id);
      if (left <= 0) return;
    }
  }
}
