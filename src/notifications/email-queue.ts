/**
 * The queue of notification e-mails: BullMQ on Redis when REDIS_URL is set (durable across
 * restarts, shared by every process; email-queue-bullmq.ts), in process otherwise, with the same
 * rules: every e-mail is attempted until the SMTP server takes it, refuses it for good, or the
 * retry schedule is used up (email-sender.ts). E-mails are independent of each other: unlike
 * webhooks, nothing orders them.
 */
import type { Logger } from 'pino';
import { EmailSender, type EmailAttemptResult, type EmailSenderOptions, type QueuedEmail } from './email-sender.js';

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
}

/** An attempt that crashed instead of reporting its outcome is tried again this much later. */
export const CRASHED_ATTEMPT_RETRY_MS = 60_000;

/** Runs one attempt; a crash (not expected: the sender reports failures as outcomes) is retried later. */
export async function attemptSafely(sender: EmailSender, logger: Logger, email: QueuedEmail, attempt: number): Promise<EmailAttemptResult> {
  try {
    return await sender.attempt(email, attempt);
  } catch (err) {
    logger.error({ err, callId: email.call_id, emailId: email.id }, 'notification e-mail attempt crashed');
    return { outcome: 'retrying', retryInMs: CRASHED_ATTEMPT_RETRY_MS };
  }
}

interface Due {
  email: QueuedEmail;
  attempt: number;
}

/** The embedded default. Not durable: e-mails still queued when the process stops are lost (and counted in the log). */
export class InProcessEmailQueue implements EmailQueue {
  private readonly sender: EmailSender;
  private readonly concurrency: number;
  private readonly due: Due[] = [];
  private readonly waiting = new Map<NodeJS.Timeout, Due>();
  private readonly inFlight = new Set<Promise<void>>();
  private started = false;
  private closed = false;

  constructor(private readonly options: EmailQueueOptions) {
    this.sender = new EmailSender(options);
    this.concurrency = options.concurrency ?? 8;
  }

  async enqueue(email: QueuedEmail): Promise<void> {
    if (this.closed) throw new Error('the e-mail queue is closed');
    this.due.push({ email, attempt: 1 });
    this.pump();
  }

  async start(): Promise<void> {
    this.started = true;
    this.pump();
  }

  async whenIdle(): Promise<void> {
    // an attempt that ends starts the next one due before it settles: wait until none is left
    while (this.inFlight.size > 0) await Promise.all([...this.inFlight]);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const timer of this.waiting.keys()) clearTimeout(timer);
    await Promise.all([...this.inFlight]);
    const dropped = this.due.length + this.waiting.size;
    if (dropped > 0) this.options.logger.warn({ pending: dropped }, 'e-mail queue closed with unsent e-mails (in-process queue: they are dropped)');
    this.due.length = 0;
    this.waiting.clear();
  }

  private pump(): void {
    while (this.started && !this.closed && this.inFlight.size < this.concurrency && this.due.length > 0) {
      const next = this.due.shift()!;
      const run = this.run(next).finally(() => {
        this.inFlight.delete(run);
        this.pump();
      });
      this.inFlight.add(run);
    }
  }

  private async run({ email, attempt }: Due): Promise<void> {
    const result = await attemptSafely(this.sender, this.options.logger, email, attempt);
    if (result.outcome !== 'retrying') return;
    // closing: it stays among the unsent, counted when the queue closes
    if (this.closed) return void this.due.push({ email, attempt: attempt + 1 });
    const timer = setTimeout(() => {
      const later = this.waiting.get(timer);
      this.waiting.delete(timer);
      if (!later || this.closed) return;
      this.due.push(later);
      this.pump();
    }, result.retryInMs ?? 0);
    this.waiting.set(timer, { email, attempt: attempt + 1 });
  }
}
