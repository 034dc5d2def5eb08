/**
 * Notification e-mail attempts (migration 007): written by the e-mail sender
 * (src/notifications/email-sender.ts), read per call (GET /calls/{id}/emails), pruned by age
 * (migration 012, src/notifications/retention.ts). No message text is kept: a row says who it
 * was for, how the SMTP server answered and what happens next.
 */
import type { Db } from './db.js';
import { DEFAULT_PRUNE_BATCH } from './deliveries.js';
import { deleteOlderThan } from './retention.js';
import { iso } from './workflows.js';

/** `sent`: the SMTP server took it; `retrying`: another attempt is scheduled; `failed`: final; `gave-up`: schedule used up. */
export type EmailOutcome = 'sent' | 'retrying' | 'failed' | 'gave-up';

export interface EmailAttemptRecord {
  organization_id: string;
  call_id: string;
  /** The same on every attempt at one e-mail. */
  email_id: string;
  recipient: string;
  /** 1 for the first attempt. */
  attempt: number;
  outcome: EmailOutcome;
  /** The SMTP reply code; null when no reply came (refused connection, timeout). */
  smtp_code: number | null;
  /** The SMTP server's reply as it gave it (`250 2.0.0 Ok: queued as 4F2A1`). */
  smtp_response: string | null;
  /** Why it failed, in a short phrase that names nothing of the network (the detail is logged). */
  error: string | null;
  duration_ms: number;
  next_retry_at: string | null;
  /** When the attempt started (ISO 8601). */
  created_at: string;
}

export interface EmailAttempt extends EmailAttemptRecord {
  id: string;
}

interface EmailAttemptRow extends Omit<EmailAttemptRecord, 'next_retry_at' | 'created_at'> {
  id: string;
  next_retry_at: Date | string | null;
  created_at: Date | string;
}

const COLUMNS =
  'id::text AS id, organization_id, call_id, email_id, recipient, attempt, outcome, smtp_code, smtp_response, error, duration_ms, next_retry_at, created_at';

export class EmailAttemptRepository {
  constructor(private readonly db: Db) {}

  async record(a: EmailAttemptRecord): Promise<void> {
    await this.db.query(
      `INSERT INTO email_attempts
         (organization_id, call_id, email_id, recipient, attempt, outcome, smtp_code, smtp_response, error, duration_ms, next_retry_at, created_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
      [
        a.organization_id,
        a.call_id,
        a.email_id,
        a.recipient,
        a.attempt,
        a.outcome,
        a.smtp_code,
        a.smtp_response,
        a.error,
        Math.round(a.duration_ms),
        a.next_retry_at,
        a.created_at,
      ],
    );
  }

  /** Every attempt at the e-mails of one call of the organization, oldest first. */
  async listForCall(orgId: string, callId: string, limit = 1000): Promise<EmailAttempt[]> {
    const { rows } = await this.db.query<EmailAttemptRow>(
      `SELECT ${COLUMNS} FROM email_attempts
        WHERE organization_id = $1 AND call_id = $2
        ORDER BY created_at, email_attempts.id LIMIT $3`,
      [orgId, callId, limit],
    );
    return rows.map((r) => ({
      ...r,
      id: String(r.id),
      next_retry_at: r.next_retry_at === null ? null : iso(r.next_retry_at),
      created_at: iso(r.created_at),
    }));
  }

  /**
   * Deletes attempts made before `cutoff`, in batches of `batchSize` (oldest first, each batch its
   * own statement), until none is left or `shouldStop()` says so; returns how many went.
   */
  pruneOlderThan(cutoff: Date, batchSize = DEFAULT_PRUNE_BATCH, options: { shouldStop?: () => boolean } = {}): Promise<number> {
    return deleteOlderThan(this.db, 'email_attempts', cutoff, batchSize, options);
  }
}
