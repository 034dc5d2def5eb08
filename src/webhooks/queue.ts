/**
 * The delivery queue of notifications (DECISIONS 1 and 7): notifications as jobs on the process's
 * job queue (src/queue/, docs/queues.md), BullMQ on Redis when REDIS_URL is set, in process
 * otherwise, with the queue's rules:
 *
 * - at least once: a message leaves the queue only after a 2xx or a final failure;
 * - every attempt carries the message's one `X-Webhook-Id` and a fresh timestamp and signature;
 * - in order per call: each call's messages are one group of the queue, and only the head of a
 *   group is ever attempted; while it waits for its next retry, the call's later messages wait
 *   behind it. Calls are independent.
 */
import type { Logger } from 'pino';
import { createQueues, type JobQueue, type Queues } from '../queue/index.js';
import { systemClock, type Clock } from './clock.js';
import type { WebhookHttpClient } from './http.js';
import { NotificationSender, type DeliveryRecorder, type Notification } from './notify.js';

export interface DeliveryQueue {
  /** Resolves once the message is queued (in Redis, durably). */
  enqueue(notification: Notification): Promise<void>;
  /** Starts attempting deliveries (messages queued before are kept). */
  start(): Promise<void>;
  /** Stops: lets attempts in flight finish, keeps (Redis) or drops (in process) the rest. */
  close(): Promise<void>;
  /** Whether the message is still queued (the reconciler re-queues it when not). */
  holds(notification: Notification): Promise<boolean>;
  /** Resolves when no attempt is in flight or due here (retries may still be scheduled). */
  whenIdle(): Promise<void>;
}

export interface DeliveryQueueOptions {
  http: WebhookHttpClient;
  logger: Logger;
  recorder?: DeliveryRecorder | null;
  clock?: Clock;
  retryScheduleMs?: readonly number[];
  /** Per-attempt timeout. Default 15 s. */
  timeoutMs?: number;
  /** Attempts in flight at once (over all calls). Default 32. */
  concurrency?: number;
  /** BullMQ queue name. Default `switchboard-webhooks`. */
  queueName?: string;
  /** BullMQ Redis key prefix. Default `bull`. */
  prefix?: string;
}

export const WEBHOOK_QUEUE = 'switchboard-webhooks';

/** Notifications on a job queue of `queues`' backend. */
export class NotificationQueue implements DeliveryQueue {
  protected readonly jobs: JobQueue<Notification>;

  constructor(queues: Queues, options: DeliveryQueueOptions) {
    const sender = new NotificationSender({ ...options, clock: options.clock ?? systemClock });
    this.jobs = queues.create<Notification>({
      name: options.queueName ?? WEBHOOK_QUEUE,
      logger: options.logger,
      words: { queue: 'webhook queue', items: 'undelivered messages' },
      concurrency: options.concurrency ?? 32,
      // an attempt takes at most the 15 s timeout; the lock is renewed meanwhile
      lockDurationMs: 60_000,
      ...(options.clock ? { clock: options.clock } : {}),
      ...(options.prefix ? { prefix: options.prefix } : {}),
      handler: async ({ data, attempt }) => {
        const result = await sender.attempt(data, attempt);
        return result.outcome === 'retrying' ? { retryInMs: result.retryInMs ?? 0 } : 'done';
      },
    });
  }

  enqueue(n: Notification): Promise<void> {
    return this.jobs.add({ id: n.id, group: n.call_id, data: n, attemptsMade: n.attempts });
  }

  holds(n: Notification): Promise<boolean> {
    return this.jobs.holds({ id: n.id, group: n.call_id });
  }

  start(): Promise<void> {
    return this.jobs.start();
  }

  whenIdle(): Promise<void> {
    return this.jobs.whenIdle();
  }

  /** Messages not yet delivered or given up, over all calls (in process; Redis keeps its own). */
  get pending(): number {
    return this.jobs.pending;
  }

  close(): Promise<void> {
    return this.jobs.close();
  }

  /** Stops this instance's worker and removes every key of the queue (tests). */
  obliterate(): Promise<void> {
    return this.jobs.obliterate();
  }
}

/** The embedded default. Not durable: messages still queued when the process stops are lost. */
export class InProcessDeliveryQueue extends NotificationQueue {
  constructor(options: DeliveryQueueOptions) {
    super(createQueues({ redis: null }), options);
  }
}
