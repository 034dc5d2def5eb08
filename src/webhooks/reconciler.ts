/**
 * The reconciler (DECISIONS 22): PostgreSQL is the record of what must be delivered
 * (`webhook_notifications`), the queue only carries it. Every process runs one; a transaction
 * advisory lock lets one at a time do the work. Each run takes the pending messages old enough
 * that the queue must have them: a message whose last attempt was final is only cleared; one
 * that is due (never attempted, or `retrying` with its next attempt past) and that the queue no
 * longer holds (a Redis restart without persistence) is queued again, with its attempt count,
 * logged and counted.
 */
import type { Logger } from 'pino';
import type { Db, Queryable } from '../store/db.js';
import { NotificationRepository } from '../store/notifications.js';
import { isOutage } from '../store/outage.js';
import type { DeliveryQueue } from './queue.js';

// any fixed number: one reconciler at a time over one database
const RECONCILE_LOCK_KEY = 7_285_310_442;

export interface ReconcilerOptions {
  db: Db;
  queue: DeliveryQueue;
  logger: Logger;
  /** How late (past its creation or its next attempt) a message must be before it counts as lost; default 60 s. */
  graceMs?: number;
  /** How often it runs; default 30 s (and once shortly after start). */
  everyMs?: number;
  firstRunAfterMs?: number;
  onRequeued?(event: string): void;
}

export class NotificationReconciler {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<number> | null = null;
  private stopped = false;
  private readonly log: Logger;

  constructor(private readonly o: ReconcilerOptions) {
    this.log = o.logger.child({ component: 'webhooks' });
  }

  start(): void {
    if (this.stopped || this.timer) return;
    this.schedule(this.o.firstRunAfterMs ?? 5_000);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.running;
  }

  /** One run now (joined if one is under way): how many messages it queued again. Never throws. */
  runOnce(): Promise<number> {
    this.running ??= this.run()
      .catch((err: unknown) => {
        if (isOutage(err)) this.log.info({ err }, 'reconciler: the database or Redis does not answer; trying again later');
        else this.log.error({ err }, 'reconciler run failed');
        return 0;
      })
      .finally(() => (this.running = null));
    return this.running;
  }

  private schedule(ms: number): void {
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.runOnce().then(() => {
        if (!this.stopped) this.schedule(this.o.everyMs ?? 30_000);
      });
    }, ms);
    this.timer.unref();
  }

  private run(): Promise<number> {
    return this.o.db.transaction(async (tx) => {
      const { rows } = await tx.query<{ locked: boolean }>('SELECT pg_try_advisory_xact_lock($1) AS locked', [RECONCILE_LOCK_KEY]);
      if (!rows[0]?.locked) return 0;
      return this.reconcile(tx);
    });
  }

  private async reconcile(tx: Queryable): Promise<number> {
    const repo = new NotificationRepository(tx);
    const grace = this.o.graceMs ?? 60_000;
    const now = Date.now();
    let requeued = 0;
    /** Calls one of whose messages waits for its retry: their later messages wait behind it. */
    const waiting = new Set<string>();
    for (const p of await repo.pending(new Date(now - grace))) {
      const n = p.notification;
      if (p.last_outcome === 'delivered' || p.last_outcome === 'failed' || p.last_outcome === 'gave-up') {
        await repo.done(n.id); // finished; its clearing was lost
        continue;
      }
      if (waiting.has(n.call_id)) continue;
      if (p.last_outcome === 'retrying' && p.next_retry_at !== null && Date.parse(p.next_retry_at) > now - grace) {
        waiting.add(n.call_id);
        continue;
      }
      if (await this.o.queue.holds(n)) continue;
      await this.o.queue.enqueue({ ...n, attempts: p.attempts });
      requeued++;
      this.o.onRequeued?.(n.event);
      this.log.warn(
        { callId: n.call_id, webhookId: n.id, event: n.event, attemptsMade: p.attempts, nextRetryAt: p.next_retry_at },
        'webhook re-queued: the delivery queue had lost it (Redis restarted?)',
      );
    }
    return requeued;
  }
}
