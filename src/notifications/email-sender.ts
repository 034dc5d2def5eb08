/**
 * One attempt at a notification e-mail and what follows from it: sent when the SMTP server takes
 * it; retried on a refused or broken connection, a timeout, a 4xx reply (and 503) on the schedule
 * 0, 30 s, 2 min, 10 min, 30 min, 1 h; final on any other 5xx reply (RFC 5321: the same message
 * would be refused again). Each attempt is recorded (GET /calls/{id}/emails) and logged, neither
 * with anything of the message: its recipient, the server's reply, and the reason alone.
 * Both queues (email-queue.ts) run their attempts through `EmailSender`.
 */
import type { Logger } from 'pino';
import type { EmailAttemptRecord, EmailOutcome } from '../store/email-attempts.js';
import type { OutgoingEmail, SmtpMailer } from './smtp.js';

/** Delay before attempt n+1 (index n): six attempts, the last 1 h 42 min 30 s after the first. */
export const EMAIL_RETRY_SCHEDULE_MS: readonly number[] = [0, 30_000, 2 * 60_000, 10 * 60_000, 30 * 60_000, 60 * 60_000];

/** A queued e-mail: one recipient of one call, the message made once. */
export interface QueuedEmail extends OutgoingEmail {
  organization_id: string;
  call_id: string;
  /** Unix ms when it was queued. */
  created_at: number;
}

/** Where attempts are written (the e-mail attempt repository in production). */
export interface EmailAttemptRecorder {
  record(attempt: EmailAttemptRecord): Promise<void>;
}

export interface EmailAttemptResult {
  outcome: EmailOutcome;
  /** With `retrying`: how long until the next attempt. */
  retryInMs: number | null;
}

export interface EmailSenderOptions {
  mailer: Pick<SmtpMailer, 'send'>;
  logger: Logger;
  recorder?: EmailAttemptRecorder | null;
  /** Default `EMAIL_RETRY_SCHEDULE_MS`; tests shorten it. */
  retryScheduleMs?: readonly number[];
}

export class EmailSender {
  readonly schedule: readonly number[];

  constructor(private readonly options: EmailSenderOptions) {
    this.schedule = options.retryScheduleMs ?? EMAIL_RETRY_SCHEDULE_MS;
  }

  /** `attempt` counts from 1. Never throws. */
  async attempt(email: QueuedEmail, attempt: number): Promise<EmailAttemptResult> {
    const { logger } = this.options;
    const startedAt = Date.now();
    const sent = await this.options.mailer.send(email);
    let outcome: EmailOutcome = sent.ok ? 'sent' : sent.permanent ? 'failed' : 'retrying';
    let retryInMs: number | null = null;
    if (outcome === 'retrying') {
      if (attempt < this.schedule.length) retryInMs = this.schedule[attempt]!;
      else outcome = 'gave-up';
    }
    const error = sent.ok ? null : sent.reason;
    const fields = { callId: email.call_id, emailId: email.id, recipient: email.to, attempt, smtpCode: sent.smtpCode };
    if (outcome === 'sent') {
      logger.info({ ...fields, durationMs: sent.durationMs }, 'notification e-mail sent');
    } else if (outcome === 'retrying') {
      logger.warn({ ...fields, error, detail: !sent.ok ? sent.detail : undefined, retryInMs }, 'notification e-mail not sent; will retry');
    } else {
      logger.warn(
        { ...fields, error, detail: !sent.ok ? sent.detail : undefined },
        outcome === 'gave-up' ? 'notification e-mail given up after the last retry' : 'notification e-mail refused; not retried',
      );
    }
    await this.record({
      organization_id: email.organization_id,
      call_id: email.call_id,
      email_id: email.id,
      recipient: email.to,
      attempt,
      outcome,
      smtp_code: sent.smtpCode,
      smtp_response: sent.response,
      error,
      duration_ms: sent.durationMs,
      next_retry_at: retryInMs === null ? null : new Date(Date.now() + retryInMs).toISOString(),
      created_at: new Date(startedAt).toISOString(),
    });
    return { outcome, retryInMs };
  }

  private async record(attempt: EmailAttemptRecord): Promise<void> {
    if (!this.options.recorder) return;
    try {
      await this.options.recorder.record(attempt);
    } catch (err) {
      // the e-mail itself matters more than its record
      this.options.logger.warn({ err, callId: attempt.call_id, emailId: attempt.email_id }, 'could not record a notification e-mail attempt');
    }
  }
}
