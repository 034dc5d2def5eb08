/**
 * The delivery queue on Redis (BullMQ), for REDIS_URL deployments: durable across restarts and
 * shared by every process.
 *
 * Ordering per call without BullMQ groups: each call has a chain in Redis, a list of its queued
 * messages (`<base>:chain:<callId>`), and at most one BullMQ job that owns the chain
 * (`<base>:owner:<callId>` holds that job's id). Two small Lua scripts keep this exact:
 * - enqueue: RPUSH; when the list was empty, the new message's id becomes the owner and a job
 *   with that id is added;
 * - done: LPOP the head if it is the one just finished; when the list is empty, clear the owner.
 * The owning job attempts the head; on success or a final failure it pops it and goes on with
 * the next; on a failure to retry it moves itself to BullMQ's delayed set until the next attempt
 * (the later messages of the call wait behind it) and keeps the head's attempt count in its data.
 * A worker that dies mid-attempt leaves an active job that BullMQ's stalled check hands to another
 * worker: the head is attempted again (at least once). `start()` also re-adds a job for any
 * chain whose owning job is missing (a crash between RPUSH and the job add).
 */
import { Queue, Worker, DelayedError, type Job } from 'bullmq';
import { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { systemClock, type Clock } from './clock.js';
import { NotificationSender, type Notification } from './notify.js';
import type { DeliveryQueue, DeliveryQueueOptions } from './queue.js';

export interface BullMqDeliveryQueueOptions extends DeliveryQueueOptions {
  redisUrl: string;
  /** BullMQ queue name. Default `switchboard-webhooks`. */
  queueName?: string;
  /** Redis key prefix. Default `bull`. */
  prefix?: string;
}

interface ChainJobData {
  call_id: string;
  /** The head message being retried, and the attempts already made on it. */
  head_id: string | null;
  attempts: number;
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

export class BullMqDeliveryQueue implements DeliveryQueue {
  private readonly queue: Queue<ChainJobData>;
  private worker: Worker<ChainJobData> | null = null;
  private readonly redis: ChainRedis;
  private readonly sender: NotificationSender;
  private readonly base: string;
  private readonly logger: Logger;
  private readonly clock: Clock;
  private readonly queueName: string;
  private readonly prefix: string;
  private closed = false;

  constructor(private readonly options: BullMqDeliveryQueueOptions) {
    const queueName = options.queueName ?? 'switchboard-webhooks';
    const prefix = options.prefix ?? 'bull';
    this.base = `${prefix}:${queueName}:sb`;
    this.logger = options.logger;
    this.clock = options.clock ?? systemClock;
    this.sender = new NotificationSender({ ...options, clock: this.clock });
    this.redis = new Redis(options.redisUrl, { maxRetriesPerRequest: null, lazyConnect: false }) as ChainRedis;
    this.redis.on('error', (err) => this.logger.warn({ err }, 'webhook queue: Redis error'));
    this.redis.defineCommand('sbEnqueue', { numberOfKeys: 2, lua: ENQUEUE_SCRIPT });
    this.redis.defineCommand('sbDone', { numberOfKeys: 2, lua: DONE_SCRIPT });
    this.queue = new Queue<ChainJobData>(queueName, {
      connection: { url: options.redisUrl, maxRetriesPerRequest: null },
      prefix,
      defaultJobOptions: {
        removeOnComplete: true,
        removeOnFail: 1000,
        // only for crashes of the processor itself; delivery retries are moveToDelayed
        attempts: 1_000_000,
        backoff: { type: 'fixed', delay: 5_000 },
      },
    });
    this.queue.on('error', (err) => this.logger.warn({ err }, 'webhook queue: BullMQ error'));
    this.queueName = queueName;
    this.prefix = prefix;
  }

  private chainKey = (callId: string) => `${this.base}:chain:${callId}`;
  private ownerKey = (callId: string) => `${this.base}:owner:${callId}`;

  async enqueue(n: Notification): Promise<void> {
    if (this.closed) throw new Error('the delivery queue is closed');
    const first = await this.redis.sbEnqueue(this.chainKey(n.call_id), this.ownerKey(n.call_id), JSON.stringify(n), n.id);
    if (first === 1) await this.addChainJob(n.call_id, n.id);
  }

  async start(): Promise<void> {
    if (this.worker) return;
    await this.recoverOrphanChains();
    this.worker = new Worker<ChainJobData>(this.queueName, (job, token) => this.process(job, token), {
      connection: { url: this.options.redisUrl, maxRetriesPerRequest: null },
      prefix: this.prefix,
      concurrency: this.options.concurrency ?? 32,
      // an attempt takes at most the 15 s timeout; the lock is renewed meanwhile
      lockDuration: 60_000,
    });
    this.worker.on('error', (err) => this.logger.warn({ err }, 'webhook worker error'));
    this.worker.on('failed', (job, err) => {
      if (err instanceof DelayedError) return;
      this.logger.error({ err, callId: job?.data.call_id }, 'webhook chain job crashed; BullMQ retries it');
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

  private async addChainJob(callId: string, ownerId: string): Promise<void> {
    await this.queue.add('chain', { call_id: callId, head_id: null, attempts: 0 }, { jobId: ownerId });
  }

  /**
   * Whether the queue still has the message (its chain holds it and the chain's job exists; a
   * missing or failed job is put back, as at start-up). False after a Redis restart lost it.
   */
  async holds(n: Notification): Promise<boolean> {
    const [items, ownerId] = await Promise.all([this.redis.lrange(this.chainKey(n.call_id), 0, -1), this.redis.get(this.ownerKey(n.call_id))]);
    if (!items.some((raw) => (JSON.parse(raw) as Notification).id === n.id)) return false;
    if (!ownerId) return false;
    const job = await this.queue.getJob(ownerId);
    if (!job) await this.addChainJob(n.call_id, ownerId);
    else if (await job.isFailed()) await job.retry();
    return true;
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
        const callId = key.slice(`${this.base}:owner:`.length);
        if (!job) {
          this.logger.info({ callId }, 'webhook queue: re-adding the job of an orphaned chain');
          await this.addChainJob(callId, ownerId);
        } else if (await job.isFailed()) {
          await job.retry();
        }
      }
    } while (cursor !== '0');
  }

  private async process(job: Job<ChainJobData>, token: string | undefined): Promise<void> {
    const callId = job.data.call_id;
    let { head_id: headId, attempts } = job.data;
    if ((await this.redis.get(this.ownerKey(callId))) !== job.id) return; // a stale job: not the owner
    for (;;) {
      const raw = await this.redis.lindex(this.chainKey(callId), 0);
      if (raw === null) return;
      const head = JSON.parse(raw) as Notification;
      if (head.id !== headId) {
        headId = head.id;
        attempts = head.attempts ?? 0;
      }
      attempts += 1;
      const result = await this.sender.attempt(head, attempts);
      if (result.outcome === 'retrying') {
        // the attempt count lives in the job across the wait (and a restart)
        await job.updateData({ call_id: callId, head_id: headId, attempts });
        // BullMQ's delayed set runs on real time, whatever clock the sender is given
        await job.moveToDelayed(Date.now() + (result.retryInMs ?? 0), token);
        throw new DelayedError();
      }
      // pops the head and says how many are left; -1: another job owns the chain now
      const left = await this.redis.sbDone(this.chainKey(callId), this.ownerKey(callId), job.id!, head.id);
      if (left <= 0) return;
    }
  }
}
