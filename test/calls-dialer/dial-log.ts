/**
 * The kill test's record of dials, shared by the child process that is killed and the test process
 * that takes over: every dial as a row (duplicates kept, so a double dial shows), and the set of
 * calls the "call record" says were dialled, which the hook reads as the real one reads the call's
 * status before an attempt after the first. In Redis for the BullMQ run, in the test's PostgreSQL
 * database for the in-process run.
 */
import { Redis } from 'ioredis';
import type { Dialer, DialerHooks, OutboundLimits } from '../../src/calls/dialer.js';
import type { Db } from '../../src/store/db.js';

export interface DialEntry {
  callId: string;
  pid: number;
  attempt: number;
}

export interface DialLog {
  wasDialled(callId: string): Promise<boolean>;
  /** Twilio accepting the call and the record saying so, as one step. */
  record(callId: string, attempt: number): Promise<void>;
  all(): Promise<DialEntry[]>;
  close(): Promise<void>;
}

export function redisDialLog(redisUrl: string, base: string): DialLog {
  const redis = new Redis(redisUrl, { maxRetriesPerRequest: null });
  const list = `${base}:test:dials`;
  const dialled = `${base}:test:dialled`;
  return {
    wasDialled: async (callId) => (await redis.hexists(dialled, callId)) === 1,
    async record(callId, attempt) {
      await redis.multi().rpush(list, JSON.stringify({ callId, pid: process.pid, attempt })).hset(dialled, callId, '1').exec();
    },
    all: async () => (await redis.lrange(list, 0, -1)).map((s) => JSON.parse(s) as DialEntry),
    async close() {
      await redis.del(list, dialled);
      redis.disconnect();
    },
  };
}

export async function sqlDialLog(db: Db): Promise<DialLog> {
  await db.query('CREATE TABLE IF NOT EXISTS dialer_test_dials (seq bigserial PRIMARY KEY, call_id uuid NOT NULL, pid integer NOT NULL, attempt integer NOT NULL)');
  await db.query('CREATE TABLE IF NOT EXISTS dialer_test_dialled (call_id uuid PRIMARY KEY)');
  return {
    wasDialled: async (callId) => (await db.query('SELECT 1 FROM dialer_test_dialled WHERE call_id = $1', [callId])).rows.length > 0,
    async record(callId, attempt) {
      await db.transaction(async (tx) => {
        await tx.query('INSERT INTO dialer_test_dials (call_id, pid, attempt) VALUES ($1, $2, $3)', [callId, process.pid, attempt]);
        await tx.query('INSERT INTO dialer_test_dialled (call_id) VALUES ($1)', [callId]);
      });
    },
    all: async () =>
      (await db.query<{ call_id: string; pid: number; attempt: number }>('SELECT call_id::text AS call_id, pid, attempt FROM dialer_test_dials ORDER BY seq')).rows.map(
        (r) => ({ callId: r.call_id, pid: r.pid, attempt: r.attempt }),
      ),
    close: async () => undefined,
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export interface DialLogHooksOptions {
  /** After recording the `n`th dial of this process, hang there (the kill lands mid-dial). */
  hangAfterDial?: number;
  /** Counts what this process's hook saw. */
  seen?: { laterAttempts: number; skipped: number };
}

/**
 * The call service as the kill test plays it: a dial takes a moment on each side of the carrier
 * accepting it (so a kill can land in either), an attempt after the first looks at the record
 * first, and calls end shortly after they are dialled.
 */
export function dialLogHooks(log: DialLog, dialer: Dialer, limits: OutboundLimits, options: DialLogHooksOptions = {}): DialerHooks {
  const live = new Set<string>();
  let dialled = 0;
  return {
    limits: async () => limits,
    async dial(job, { attempt }) {
      await sleep(10);
      if (attempt > 1) {
        if (options.seen) options.seen.laterAttempts += 1;
        if (await log.wasDialled(job.callId)) {
          if (options.seen) options.seen.skipped += 1;
          return 'skipped';
        }
      }
      await log.record(job.callId, attempt);
      live.add(job.callId);
      if (++dialled === options.hangAfterDial) await sleep(600_000);
      setTimeout(() => {
        live.delete(job.callId);
        void dialer.release(job.organizationId, job.callId).catch(() => undefined);
      }, 30);
      await sleep(10);
      return 'dialled';
    },
    // a call of a dead process is over
    isLive: async (callId) => live.has(callId),
  };
}
