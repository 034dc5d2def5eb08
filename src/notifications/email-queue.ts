/**
 * The queue of notification e-mails: e-mails as jobs on the process's job queue (src/queue/,
 * docs/queues.md), BullMQ on Redis when REDIS_URL is set (durable across restarts, shared by every
 * process), in process otherwise, with one rule: every e-mail is attempted until the SMTP server
 * takes it, refuses it for good, or the retry schedule is used up (email-sender.ts). E-mails are
 * independent of each other: unlike webhooks, nothing orders them (no group). A process that dies
 * mid-attempt leaves the attempt to be repeated (at least once; the Message-ID stays the same).
 */
import { createQueues, type JobQueue, type Queues } from '../queue/index.js';
import { EmailSender, type EmailSenderOptions, type QueuedEmail } from './email-sender.js';

export interface EmailQueue {
  /** Resolves once the e-mail is queued (in Redis, durably). */
  enqueue(email: QueuedEmail): Promise<void>;
  /** Starts attempting (e-mails queued before are kept). */
  start(): Promise<void>;
  /** Resolves when no attempt is in flight or due (retries may still be scheduled). */
  whenIdle(): Promise<void>;
  /** Stops: lets attempts in flight finish, keeps (Redis) or drops (in process) the rest. */
  close(): Promise<void>;
}

export interface EmailQueueOptions extends EmailSenderOptions {
  /** Attempts in flight at once. Default 8. */
  concurrency?: number;
  /** BullMQ queue name. Default `switchboard-emails`. */
  queueName?: string;
  /** BullMQ Redis key prefix. Default `bull`. */
  prefix?: string;
}

export const EMAIL_QUEUE = 'switchboard-emails';

/** E-mails on a job queue of `queues`' backend. */
export class NotificationEmailQueue implements EmailQueue {
  protected readonly jobs: JobQueue<QueuedEmail>;

  constructor(queues: Queues, options: EmailQueueOptions) {
    const sender = new EmailSender(options);
    this.jobs = queues.create<QueuedEmail>({
      name: options.queueName ?? EMAIL_QUEUE,
      logger: options.logger,
      words: { queue: 'e-mail queue', items: 'unsent e-mails' },
      concurrency: options.concurrency ?? 8,
      // an attempt takes at most the SMTP waits (about a minute); the lock is renewed meanwhile
      lockDurationMs: 120_000,
      ...(options.prefix ? { prefix: options.prefix } : {}),
      handler: async ({ data, attempt }) => {
        const result = await sender.attempt(data, attempt);
        return result.outcome === 'retrying' ? { retryInMs: result.retryInMs ?? 0 } : 'done';
      },
    });
  }

  enqueue(email: QueuedEmail): Promise<void> {
    return this.jobs.add({ id: email.id, data: email });
  }

  start(): Promise<void> {
    return this.jobs.start();
  }

  whenIdle(): Promise<void> {
    return this.jobs.whenIdle();
  }

  close(): Promise<void> {
    return this.jobs.close();
  }

  /** Stops this instance's worker and removes every key of the queue (tests). */
  obliterate(): Promise<void> {
    return this.jobs.obliterate();
  }
}

/** The embedded default. Not durable: e-mails still queued when the process stops are lost (and counted in the log). */
export class InProcessEmailQueue extends NotificationEmailQueue {
  constructor(options: EmailQueueOptions) {
    super(createQueues({ redis: null }), options);
  }
}
