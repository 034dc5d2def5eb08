/**
 * Retention of stored rows by age: a `RetentionPruner` deletes, through the `prune` function it is
 * given, the rows older than a number of whole days, shortly after the process starts and then
 * every hour; 0 days keeps them forever. It serves the delivery-attempt log (`DeliveryPruner`,
 * src/webhooks/retention.ts) and the call log (`CallLogPruner`, src/calls/call-log.ts). The prune
 * functions delete in batches and skip the rows another process has locked, so processes sharing
 * one PostgreSQL split the work instead of waiting on each other.
 */
import type { Logger } from 'pino';
import type { Db } from './db.js';

export const DAY_MS = 24 * 60 * 60_000;
/** Late enough to stay out of start-up's way, early enough that a restart loop still prunes. */
export const FIRST_PRUNE_AFTER_MS = 60_000;
export const PRUNE_EVERY_MS = 60 * 60_000;

/**
 * Deletes the rows created more than `retentionDays` whole days before `now`, `batchSize` rows per
 * statement (the repository's default when absent), until none is left or `shouldStop()` says so;
 * returns how many rows it deleted.
 */
export type PruneRows = (
  retentionDays: number,
  options: { now: number; batchSize?: number; shouldStop: () => boolean },
) => Promise<number>;

/**
 * Deletes the rows of `table` (one with `id` and `created_at`) created before `cutoff`, oldest
 * first, `batchSize` rows per statement (each its own short transaction, so a large backlog never
 * holds many row locks at once nor keeps PGlite's single thread busy for long), until none is left
 * or `shouldStop()` says so. Rows another process is deleting at the same moment are skipped, not
 * waited for. Returns how many rows this call deleted.
 */
export async function deleteOlderThan(
  db: Db,
  table: 'calls' | 'webhook_deliveries' | 'email_attempts',
  cutoff: Date,
  batchSize: number,
  options: { shouldStop?: () => boolean } = {},
): Promise<number> {
  if (!Number.isInteger(batchSize) || batchSize < 1) throw new RangeError(`batchSize must be a positive integer, not ${batchSize}`);
  if (Number.isNaN(cutoff.getTime())) throw new RangeError('cutoff is not a valid date');
  let total = 0;
  for (;;) {
    const { rows } = await db.query<{ n: number }>(
      `WITH doomed AS (
         SELECT id FROM ${table} WHERE created_at < $1
          ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED
       ), gone AS (
         DELETE FROM ${table} t USING doomed WHERE t.id = doomed.id RETURNING 1
       )
       SELECT count(*)::int AS n FROM gone`,
      [cutoff.toISOString(), batchSize],
    );
    const n = Number(rows[0]?.n ?? 0);
    total += n;
    if (n < batchSize || options.shouldStop?.()) return total;
    // let the event loop breathe between batches (PGlite runs on this thread)
    await new Promise((resolve) => setImmediate(resolve));
  }
}

/** What every pruner is told by its caller: how long to keep, where to log, when to run. */
export interface PrunerSettings {
  /** Whole days to keep; 0: never prune. */
  retentionDays: number;
  logger: Logger;
  firstRunAfterMs?: number;
  everyMs?: number;
  /** Rows per delete statement (the repository's default when absent). */
  batchSize?: number;
  now?: () => number;
}

export interface RetentionPrunerOptions extends PrunerSettings {
  prune: PruneRows;
  /** The log lines: `pruned` (info, when rows went) and `failed` (error; the next run tries again). */
  messages: { pruned: string; failed: string };
}

export class RetentionPruner {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<number> | null = null;
  private stopped = false;

  constructor(private readonly o: RetentionPrunerOptions) {}

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
    const now = this.o.now?.() ?? Date.now();
    const started = performance.now();
    try {
      const deleted = await this.o.prune(this.o.retentionDays, {
        now,
        batchSize: this.o.batchSize,
        shouldStop: () => this.stopped,
      });
      if (deleted > 0) {
        this.o.logger.info(
          {
            deleted,
            cutoff: new Date(now - this.o.retentionDays * DAY_MS).toISOString(),
            retention_days: this.o.retentionDays,
            duration_ms: Math.round(performance.now() - started),
          },
          this.o.messages.pruned,
        );
      }
      return deleted;
    } catch (err) {
      this.o.logger.error({ err }, this.o.messages.failed);
      return 0;
    }
  }
}
