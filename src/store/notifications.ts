/**
 * Notifications waiting to be delivered (migration 009): the durable record of the delivery
 * queue's work. Written before a message is queued, deleted once its last attempt is made
 * (delivered, failed, gave up); what is left behind after that is what the queue lost.
 */
import type { Queryable } from './db.js';
import type { Notification } from '../webhooks/notify.js';
import { iso } from './workflows.js';

/** A pending notification with its latest recorded attempt (none: never attempted). */
export interface PendingNotification {
  notification: Notification;
  attempts: number;
  last_outcome: string | null;
  next_retry_at: string | null;
}

interface Row {
  id: string;
  organization_id: string;
  call_id: string;
  event: Notification['event'];
  url: string;
  secret: string | null;
  body: string;
  created_at: Date | string;
  attempt: number | null;
  outcome: string | null;
  next_retry_at: Date | string | null;
}

export class NotificationRepository {
  constructor(private readonly db: Queryable) {}

  /** Records a message about to be queued (a second insert of one id does nothing). */
  async insert(n: Notification): Promise<void> {
    await this.db.query(
      `INSERT INTO webhook_notifications (id, organization_id, call_id, event, url, secret, body, created_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (id) DO NOTHING`,
      [n.id, n.organization_id, n.call_id, n.event, n.url, n.secret, n.body, new Date(n.created_at).toISOString()],
    );
  }

  /** The message's last attempt was made: nothing more to deliver. */
  async done(id: string): Promise<void> {
    await this.db.query('DELETE FROM webhook_notifications WHERE id = $1', [id]);
  }

  /** Pending messages made before `before`, oldest first, each with its latest attempt. */
  async pending(before: Date, limit = 500): Promise<PendingNotification[]> {
    const { rows } = await this.db.query<Row>(
      `SELECT n.id, n.organization_id, n.call_id, n.event, n.url, n.secret, n.body, n.created_at,
              d.attempt, d.outcome, d.next_retry_at
         FROM webhook_notifications n
         LEFT JOIN LATERAL (
           SELECT attempt, outcome, next_retry_at FROM webhook_deliveries w
            WHERE w.message_id = n.id ORDER BY w.attempt DESC, w.id DESC LIMIT 1
         ) d ON true
        WHERE n.created_at < $1
        ORDER BY n.seq LIMIT $2`,
      [before.toISOString(), limit],
    );
    return rows.map((r) => ({
      notification: {
        id: r.id,
        organization_id: r.organization_id,
        call_id: r.call_id,
        event: r.event,
        url: r.url,
        secret: r.secret,
        body: r.body,
        created_at: Date.parse(iso(r.created_at)),
      },
      attempts: r.attempt ?? 0,
      last_outcome: r.outcome,
      next_retry_at: r.next_retry_at === null ? null : iso(r.next_retry_at),
    }));
  }

  /** How many messages are waiting (for /metrics). */
  async count(): Promise<number> {
    const { rows } = await this.db.query<{ n: string | number }>('SELECT count(*) AS n FROM webhook_notifications');
    return Number(rows[0]?.n ?? 0);
  }
}
