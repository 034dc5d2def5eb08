/**
 * Retention of the delivery-attempt log (`webhook_deliveries`): every process prunes attempts
 * older than WEBHOOK_DELIVERY_RETENTION_DAYS shortly after it starts and then every hour; 0 keeps
 * them forever. Processes sharing one PostgreSQL may prune at the same moment: each batch skips
 * the rows another one has locked, so they split the work instead of waiting on each other.
 */
import type { Logger } from 'pino';
import type { DeliveryRepository } from '../store/deliveries.js';

export const DAY_MS = 24 * 60 * 60_000;
/** Late enough to stay out of start-up's way, early enough that a restart loop still prunes. */
export const FIRST_PRUNE_AFTER_MS = 60_000;
export const PRUNE_EVERY_MS = 60 * 60_000;

export interface DeliveryPrunerOptions {
  deliveries: Pick<DeliveryRepository, 'pruneOlderThan'>;
  /** Whole days to keep; 0: never prune. */
  retentionDays: number;
  logger: Logger;
  firstRunAfterMs?: number;
  everyMs?: number;
  /** Rows per delete statement (`DEFAULT_PRUNE_BATCH` when absent). */
  batchSize?: number;
  now?: () => number;
}

export class DeliveryPruner {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<number> | null = null;
  private stopped = false;

  constructor(private readonly o: DeliveryPrunerOptions) {}

  get enabled(): boolean {
    return this.o.retentionDays > 0;
  }

  /** Schedules the first run; does nothing when retention is off. */
  start(): void {
    if (!this.enabled || this.stopped || this.timer) return;
    this.schedule(this.o.firstRunAfterMs ?? FIRST_PRUNE_AFTER_MS);
  }

  /** One prune now (a run already under way is joined, not doubled); never throws. */
  runOnce(): Promise<number> {
    this.running ??= this.prune().finally(() => {
      this.running = null;
    });
    return this.running;
  }

  /** Cancels the timer and lets a run under way end after its current batch. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.running;
  }

  private schedule(ms: number): void {
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.runOnce().then(() => {
        if (!this.stopped) this.schedule(this.o.everyMs ?? PRUNE_EVERY_MS);
      });
    }, ms);
    // the pruner alone must never keep the process alive
    this.timer.unref();
  }

  private async prune(): Promise<number> {
    if (!this.enabled) return 0;
    const cutoff = new Date((this.o.now?.() ?? Date.now()) - this.o.retentionDays * DAY_MS);
    const started = performance.now();
    try {
      const deleted = await this.o.deliveries.pruneOlderThan(cutoff, this.o.batchSize, {
        shouldStop: () => this.stopped,
      });
      if (deleted > 0) {
        this.o.logger.info(
          {
            deleted,
            cutoff: cutoff.toISOString(),
            retention_days: this.o.retentionDays,
            duration_ms: Math.round(performance.now() - started),
          },
          'pruned old webhook delivery attempts',
        );
      }
      return deleted;
    } catch (err) {
      this.o.logger.error({ err }, 'pruning webhook delivery attempts failed; trying again at the next run');
      return 0;
    }
  }
}
