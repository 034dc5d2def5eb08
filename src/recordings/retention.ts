/**
 * Retention of call recordings: every process deletes the recordings last modified more than
 * RECORDING_RETENTION_DAYS ago shortly after it starts and then every hour; 0 keeps them forever.
 * Recordings are files or objects, not rows, so "last modified" (when the recording was committed)
 * stands for the call's date. Processes sharing one bucket may prune at the same moment: deleting
 * an object twice is harmless, so they need no coordination. The schedule and the log lines are
 * `RetentionPruner`'s (src/store/retention.ts).
 */
import { DAY_MS, RetentionPruner, type PrunerSettings } from '../store/retention.js';
import type { RecordingStore } from './storage.js';

export type RecordingPrunerOptions = Omit<PrunerSettings, 'batchSize'> & { recordings: Pick<RecordingStore, 'prune'> };

/** `RetentionPruner` over `RecordingStore.prune`; the store picks its own batches (S3: 1000 keys). */
export class RecordingPruner extends RetentionPruner {
  constructor({ recordings, ...settings }: RecordingPrunerOptions) {
    super({
      ...settings,
      prune: (retentionDays, { now, shouldStop }) => recordings.prune(new Date(now - retentionDays * DAY_MS), { shouldStop }),
      messages: {
        pruned: 'pruned old call recordings',
        failed: 'pruning call recordings failed; trying again at the next run',
      },
    });
  }
}
