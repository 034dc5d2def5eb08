/**
 * Notification e-mails as the runtime uses them (DECISIONS 13): after every answered call, one
 * e-mail to each of the assistant's `notification_email` and `notification_emails`, queued and
 * retried like notifications. One object per process; without SMTP_URL it sends nothing and says
 * so once, at start-up.
 *
 *   const emails = new NotificationEmails({ config, logger, recorder: store.emailAttempts });
 *   await emails.start();
 *   emails.callEnded(record); // from the call service's onCallEnded: the report was made
 */
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import type { CallRecord } from '../calls/store.js';
import { callEmail, isAnsweredCall, notificationRecipients } from './call-email.js';
import type { EmailAttemptRecorder, QueuedEmail } from './email-sender.js';
import { InProcessEmailQueue, NotificationEmailQueue, type EmailQueue, type EmailQueueOptions } from './email-queue.js';
import { BullMqEmailQueue } from './email-queue-bullmq.js';
import type { Queues } from '../queue/index.js';
import { redactSmtpUrl, SmtpMailer } from './smtp.js';

export interface NotificationEmailsOptions {
  config: Pick<Config, 'SMTP_URL' | 'SMTP_FROM' | 'REDIS_URL'>;
  logger: Logger;
  /** Where attempts are recorded: the store's `emailAttempts`. */
  recorder?: EmailAttemptRecorder | null;
  /** BullMQ queue name (Redis only); tests give each server its own. */
  queueName?: string;
  /** The process's queues (src/queue/); without them, a queue of its own from `config.REDIS_URL`. */
  queues?: Queues;
  /** Tests shorten the retry schedule and the SMTP waits. */
  retryScheduleMs?: readonly number[];
  smtpTimeoutMs?: number;
}

/** `eml_` + 18 random bytes in base64url: one per e-mail, kept across its attempts. */
export const newEmailId = (): string => `eml_${randomBytes(18).toString('base64url')}`;

export class NotificationEmails {
  private readonly queue: EmailQueue | null;
  private readonly mailer: SmtpMailer | null;
  private readonly logger: Logger;
  /** E-mails being made and queued (a Redis round trip each): `close` waits for them. */
  private readonly queueing = new Set<Promise<void>>();

  constructor(options: NotificationEmailsOptions) {
    const { config } = options;
    this.logger = options.logger;
    if (!config.SMTP_URL || !config.SMTP_FROM) {
      this.logger.info('notification e-mails are off: SMTP_URL is not set');
      this.queue = null;
      this.mailer = null;
      return;
    }
    const timeout = options.smtpTimeoutMs;
    this.mailer = new SmtpMailer({
      url: config.SMTP_URL,
      from: config.SMTP_FROM,
      ...(timeout ? { connectionTimeoutMs: timeout, greetingTimeoutMs: timeout, socketTimeoutMs: timeout } : {}),
    });
    const queueOptions: EmailQueueOptions = {
      mailer: this.mailer,
      logger: this.logger,
      recorder: options.recorder ?? null,
      ...(options.retryScheduleMs ? { retryScheduleMs: options.retryScheduleMs } : {}),
    };
    if (options.queueName) queueOptions.queueName = options.queueName;
    this.queue = options.queues
      ? new NotificationEmailQueue(options.queues, queueOptions)
      : config.REDIS_URL
        ? new BullMqEmailQueue({ ...queueOptions, redisUrl: config.REDIS_URL })
        : new InProcessEmailQueue(queueOptions);
    const onRedis = options.queues ? options.queues.backend === 'redis' : !!config.REDIS_URL;
    this.logger.info(
      { smtp: redactSmtpUrl(config.SMTP_URL), from: config.SMTP_FROM, queue: onRedis ? 'redis' : 'in process' },
      'notification e-mails are on',
    );
  }

  /** Whether SMTP_URL is set. */
  get enabled(): boolean {
    return this.queue !== null;
  }

  async start(): Promise<void> {
    await this.queue?.start();
  }

  /**
   * A call has ended, its report made (structured data in the record): an answered call queues
   * one e-mail per recipient. Never throws and never waits: the call is over, whatever SMTP does.
   */
  callEnded(call: CallRecord): void {
    if (!this.queue || !isAnsweredCall(call)) return;
    let emails: QueuedEmail[];
    try {
      const recipients = notificationRecipients(call);
      if (recipients.length === 0) return;
      // made now: the record is as the call left it
      const message = callEmail(call);
      const now = Date.now();
      emails = recipients.map((to) => ({ id: newEmailId(), organization_id: call.organization_id, call_id: call.id, to, ...message, created_at: now }));
    } catch (err) {
      this.logger.error({ err, callId: call.id }, 'the notification e-mail of a call could not be made');
      return;
    }
    const queue = this.queue;
    const queued = Promise.all(
      emails.map((email) =>
        queue.enqueue(email).catch((err: unknown) => {
          this.logger.error({ err, callId: call.id, emailId: email.id, recipient: email.to }, 'a notification e-mail could not be queued');
        }),
      ),
    ).then(() => undefined);
    this.queueing.add(queued);
    void queued.finally(() => this.queueing.delete(queued));
  }

  /** Resolves when every e-mail made so far is queued and none is being attempted or due. */
  async whenIdle(): Promise<void> {
    await Promise.all([...this.queueing]);
    await this.queue?.whenIdle();
  }

  async close(): Promise<void> {
    await Promise.all([...this.queueing]);
    await this.queue?.close();
    this.mailer?.close();
  }
}
