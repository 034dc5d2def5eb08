/**
 * Notification e-mails on Redis (BullMQ), for REDIS_URL deployments: one job per e-mail (its id is
 * the e-mail's), durable across restarts and shared by every process. An attempt to retry throws
 * `RetryLater`, and BullMQ's own retries wait for the delay it names (the sender's schedule);
 * `attemptsMade` is the attempt count, kept in Redis through a restart. A process that dies
 * mid-attempt leaves an active job that BullMQ's stalled check hands to another worker: the
 * attempt is repeated (at least once; the Message-ID stays the same).
 */
import { Queue, Worker, type Job } from 'bullmq';
import { EmailSender, type QueuedEmail } from './email-sender.js';
import { attemptSafely, type EmailQueue, type EmailQueueOptions } from './email-queue.js';
import { ErrorCodes, SwitchboardError } from '../../engine/errors.js';

export interface BullMqEmailQueueOptions extends EmailQueueOptions {
  redisUrl: string;
  /** BullMQ queue name. Default `switchboard-emails`. */
  queueName?: string;
  /** Redis key prefix. Default `bull`. */
  prefix?: string;
}

const BACKOFF_TYPE = 'notification-email-schedule';

/** Thrown by an attempt to retry: BullMQ waits `delayMs` before the next one. */
class RetryLater extends SwitchboardError {
  static override readonly codes = [ErrorCodes.EMAIL_RETRY_LATER] as const;
  constructor(readonly delayMs: number) {
    super(ErrorCodes.EMAIL_RETRY_LATER, `retry in ${delayMs} ms`);
  }
}

export class BullMqEmailQueue implements EmailQueue {
  private readonly queue: Queue<QueuedEmail>;
  private worker: Worker<QueuedEmail> | null = null;
  private readonly sender: EmailSender;
  private readonly queueName: string;
  private readonly prefix: string;
  private closed = false;

  constructor(private readonly options: BullMqEmailQueueOptions) {
    this.queueName = options.queueName ?? 'switchboard-emails';
    this.prefix = options.prefix ?? 'bull';
    this.sender = new EmailSender(options);
    this.queue = new Queue<QueuedEmail>(this.queueName, {
      connection: { url: options.redisUrl, maxRetriesPerRequest: null },
      prefix: this.prefix,
      defaultJobOptions: {
        removeOnComplete: true,
        removeOnFail: 1000,
        // the sender ends an e-mail within its schedule; the margin is for crashed attempts
        attempts: this.sender.schedule.length + 10,
        backoff: { type: BACKOFF_TYPE },
      },
    });
    this.queue.on('error', (err) => options.logger.warn({ err }, 'e-mail queue: BullMQ error'));
  }

  async enqueue(email: QueuedEmail): Promise<void> {
    if (this.closed) throw new Error('the e-mail queue is closed');
    await this.queue.add('email', email, { jobId: email.id });
  }

  async start(): Promise<void> {
    if (this.worker) return;
    this.worker = new Worker<QueuedEmail>(this.queueName, (job) => this.process(job), {
      connection: { url: this.options.redisUrl, maxRetriesPerRequest: null },
      prefix: this.prefix,
      concurrency: this.options.concurrency ?? 8,
      // an attempt takes at most the SMTP waits (about a minute); the lock is renewed meanwhile
      lockDuration: 120_000,
      settings: {
        backoffStrategy: (_attemptsMade, _type, err) => (err instanceof RetryLater ? err.delayMs : 60_000),
      },
    });
    this.worker.on('error', (err) => this.options.logger.warn({ err }, 'e-mail worker error'));
    this.worker.on('failed', (job, err) => {
      if (err instanceof RetryLater) return;
      this.options.logger.error({ err, callId: job?.data.call_id, emailId: job?.id }, 'notification e-mail job failed');
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

  /** Stops this instance's worker and removes every key of the queue (tests). */
  async obliterate(): Promise<void> {
    await this.worker?.close();
    await this.queue.obliterate({ force: true });
  }

  private async process(job: Job<QueuedEmail>): Promise<void> {
    const result = await attemptSafely(this.sender, this.options.logger, job.data, job.attemptsMade + 1);
    if (result.outcome === 'retrying') throw new RetryLater(result.retryInMs ?? 0);
  }
}
