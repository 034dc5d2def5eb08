/**
 * Webhook delivery attempts (migration 002): written by the webhook sender, read per call, pruned
 * by age (migration 003, `src/webhooks/retention.ts`).
 */
import type { Db } from './db.js';
import { deleteOlderThan } from './retention.js';
import { iso } from './workflows.js';

/** `retrying`: failed, another attempt is scheduled; `failed`: final; `gave-up`: schedule used up. */
export type DeliveryOutcome = 'delivered' | 'retrying' | 'failed' | 'gave-up';

export interface DeliveryAttemptRecord {
  organization_id: string;
  call_id: string;
  /** `X-Webhook-Id`: the same on every attempt of one message. */
  message_id: string;
  event: string;
  /** Shown to the tenant: recorded with its credentials masked (`https://user:****@host/x`). */
  url: string;
  /** 1 for the first attempt. */
  attempt: number;
  outcome: DeliveryOutcome;
  status_code: number | null;
  /**
   * Shown to the tenant: a reason that names no address, DNS answer or socket error
   * (`HttpFailure.reason`, docs/webhooks.md); the detail goes to the server log only.
   */
  error: string | null;
  duration_ms: number;
  next_retry_at: string | null;
  /** When the attempt started (ISO 8601). */
  created_at: string;
}

export interface DeliveryAttempt extends DeliveryAttemptRecord {
  id: string;
}

interface DeliveryRow extends Omit<DeliveryAttemptRecord, 'next_retry_at' | 'created_at'> {
  id: string;
  next_retry_at: Date | string | null;
  created_at: Date | string;
}

const toAttempt = (r: DeliveryRow): DeliveryAttempt => ({
  id: String(r.id),
  organization_id: r.organization_id,
  call_id: r.call_id,
  message_id: r.message_id,
  event: r.event,
  url: r.url,
  attempt: r.attempt,
  outcome: r.outcome,
  status_code: r.status_code,
  error: r.error,
  duration_ms: r.duration_ms,
  next_retry_at: r.next_retry_at === null ? null : iso(r.next_retry_at),
  created_at: iso(r.created_at),
});

const COLUMNS =
  'id::text AS id, organization_id, call_id, message_id, event, url, attempt, outcome, status_code, error, duration_ms, next_retry_at, created_at';

/** Rows per delete statement: about 3 ms of work on PGlite (1,000: about 6 ms). */
export const DEFAULT_PRUNE_BATCH = 500;

export class DeliveryRepository {
  constructor(private readonly db: Db) {}

  async record(a: DeliveryAttemptRecord): Promise<void> {
    await this.db.query(
      `INSERT INTO webhook_deliveries
         (organization_id, call_id, message_id, event, url, attempt, outcome, status_code, error, duration_ms, next_retry_at, created_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
      [
        a.organization_id,
        a.call_id,
        a.message_id,
        a.event,
        a.url,
        a.attempt,
        a.outcome,
        a.status_code,
        a.error,
        Math.round(a.duration_ms),
        a.next_retry_at,
        a.created_at,
      ],
    );
  }

  /** Every attempt for one call of the organization, oldest first. */
  async listForCall(orgId: string, callId: string, limit = 1000): Promise<DeliveryAttempt[]> {
    const { rows } = await this.db.query<DeliveryRow>(
      `SELECT ${COLUMNS} FROM webhook_deliveries
        WHERE organization_id = $1 AND call_id = $2
        ORDER BY created_at, webhook_deliveries.id LIMIT $3`,
      [orgId, callId, limit],
    );
    return rows.map(toAttempt);
  }

  /** Every attempt of one message (`X-Webhook-Id`), oldest first. */
  async listForMessage(orgId: string, messageId: string): Promise<DeliveryAttempt[]> {
    const { rows } = await this.db.query<DeliveryRow>(
      `SELECT ${COLUMNS} FROM webhook_deliveries
        WHERE organization_id = $1 AND message_id = $2 ORDER BY created_at, webhook_deliveries.id`,
      [orgId, messageId],
    );
    return rows.map(toAttempt);
  }

  /**
   * Deletes the rows created before `cutoff`, oldest first, in batches (`deleteOlderThan`,
   * src/store/retention.ts). Returns how many rows this call deleted.
   */
  pruneOlderThan(cutoff: Date, batchSize = DEFAULT_PRUNE_BATCH, options: { shouldStop?: () => boolean } = {}): Promise<number> {
    return deleteOlderThan(this.db, 'webhook_deliveries', cutoff, batchSize, options);
  }
}
