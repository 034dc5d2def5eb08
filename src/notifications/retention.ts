/**
 * Retention of the e-mail attempt log (`email_attempts`), as for webhook delivery attempts: every
 * process prunes attempts older than EMAIL_ATTEMPT_RETENTION_DAYS shortly after it starts and then
 * every hour; 0 keeps them forever. Processes sharing one PostgreSQL split the work (each batch
 * skips the rows another one has locked). The schedule, the batches and the log lines are
 * `RetentionPruner`'s (src/store/retention.ts).
 */
import type { EmailAttemptRepository } from '../store/email-attempts.js';
import { DAY_MS, RetentionPruner, type PrunerSettings } from '../store/retention.js';

export type EmailAttemptPrunerOptions = PrunerSettings & { attempts: Pick<EmailAttemptRepository, 'pruneOlderThan'> };

export class EmailAttemptPruner extends RetentionPruner {
  constructor({ attempts, ...settings }: EmailAttemptPrunerOptions) {
    super({
      ...settings,
      prune: (retentionDays, { now, batchSize, shouldStop }) => attempts.pruneOlderThan(new Date(now - retentionDays * DAY_MS), batchSize, { shouldStop }),
      messages: {
        pruned: 'pruned old e-mail attempts',
        failed: 'pruning e-mail attempts failed; trying again at the next run',
      },
    });
  }
}
