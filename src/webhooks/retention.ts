/**
 * Retention of the delivery-attempt log (`webhook_deliveries`): every process prunes attempts
 * older than WEBHOOK_DELIVERY_RETENTION_DAYS shortly after it starts and then every hour; 0 keeps
 * them forever. Processes sharing one PostgreSQL may prune at the same moment: each batch skips
 * the rows another one has locked, so they split the work instead of waiting on each other.
 * The schedule, the batches and the log lines are `RetentionPruner`'s (src/store/retention.ts).
 */
import type { DeliveryRepository } from '../store/deliveries.js';
import { DAY_MS, RetentionPruner, type PrunerSettings } from '../store/retention.js';

export { DAY_MS, FIRST_PRUNE_AFTER_MS, PRUNE_EVERY_MS } from '../store/retention.js';

export type DeliveryPrunerOptions = PrunerSettings & { deliveries: Pick<DeliveryRepository, 'pruneOlderThan'> };

/**
 * `RetentionPruner` over the delivery repository's `pruneOlderThan`; `batchSize` absent:
 * `DEFAULT_PRUNE_BATCH`.
 */
export class DeliveryPruner extends RetentionPruner {
  constructor({ deliveries, ...settings }: DeliveryPrunerOptions) {
    super({
      ...settings,
      prune: (retentionDays, { now, batchSize, shouldStop }) =>
        deliveries.pruneOlderThan(new Date(now - retentionDays * DAY_MS), batchSize, { shouldStop }),
      messages: {
        pruned: 'pruned old webhook delivery attempts',
        failed: 'pruning webhook delivery attempts failed; trying again at the next run',
      },
    });
  }
}
