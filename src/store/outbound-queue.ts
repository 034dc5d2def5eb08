/**
 * The in-process dialer's queue (migration 005, src/calls/dialer.ts): the outbound calls waiting
 * to be dialled, kept in SQL so that they survive a restart of the embedded default. A row lives
 * from `POST /calls` until its call was dialled, skipped or given up.
 */
import type { Db } from './db.js';
import { iso } from './workflows.js';

export interface QueuedOutboundCall {
  call_id: string;
  organization_id: string;
  /** The call's whole record as queued. */
  record: Record<string, unknown>;
  /** Dial attempts started so far. */
  attempts: number;
  /** A retry waits until then (ISO 8601); null: due now. */
  not_before: string | null;
  created_at: string;
  /** FIFO order. */
  seq: number;
}

interface Row {
  call_id: string;
  organization_id: string;
  record: Record<string, unknown> | string;
  attempts: number;
  not_before: Date | string | null;
  created_at: Date | string;
  seq: string | number;
}

const toQueued = (r: Row): QueuedOutboundCall => ({
  call_id: r.call_id,
  organization_id: r.organization_id,
  record: typeof r.record === 'string' ? (JSON.parse(r.record) as Record<string, unknown>) : r.record,
  attempts: r.attempts,
  not_before: r.not_before === null ? null : iso(r.not_before),
  created_at: iso(r.created_at),
  seq: Number(r.seq),
});

export class OutboundQueueRepository {
  constructor(private readonly db: Db) {}

  /**
   * Queues the calls in the order given, in one statement (all or none); a call already queued
   * keeps its row. Returns how many rows were added.
   */
  async add(calls: { callId: string; organizationId: string; record: Record<string, unknown> }[]): Promise<number> {
    if (calls.length === 0) return 0;
    const { rows } = await this.db.query<{ call_id: string }>(
      `INSERT INTO outbound_queue (call_id, organization_id, record)
       SELECT c, o, r::jsonb FROM unnest($1::uuid[], $2::uuid[], $3::text[]) WITH ORDINALITY AS t(c, o, r, n)
        ORDER BY n
       ON CONFLICT (call_id) DO NOTHING
       RETURNING call_id`,
      [calls.map((c) => c.callId), calls.map((c) => c.organizationId), calls.map((c) => JSON.stringify(c.record))],
    );
    return rows.length;
  }

  /** Every queued call, oldest first. */
  async list(): Promise<QueuedOutboundCall[]> {
    const { rows } = await this.db.query<Row>(
      `SELECT call_id::text AS call_id, organization_id::text AS organization_id, record, attempts, not_before, created_at, seq
         FROM outbound_queue ORDER BY seq`,
    );
    return rows.map(toQueued);
  }

  /** Counts an attempt about to start; returns the attempt's number, or null when the call is no longer queued. */
  async startAttempt(callId: string): Promise<number | null> {
    const { rows } = await this.db.query<{ attempts: number }>(
      'UPDATE outbound_queue SET attempts = attempts + 1 WHERE call_id = $1 RETURNING attempts',
      [callId],
    );
    return rows[0]?.attempts ?? null;
  }

  /** The next attempt waits until `at`. */
  async retryAt(callId: string, at: Date): Promise<void> {
    await this.db.query('UPDATE outbound_queue SET not_before = $2 WHERE call_id = $1', [callId, at.toISOString()]);
  }

  /** Takes the call out of the queue; false when it was not queued. */
  async delete(callId: string): Promise<boolean> {
    const { rows } = await this.db.query<{ call_id: string }>(
      'DELETE FROM outbound_queue WHERE call_id = $1 RETURNING call_id',
      [callId],
    );
    return rows.length > 0;
  }

  async count(): Promise<number> {
    const { rows } = await this.db.query<{ n: string | number }>('SELECT count(*) AS n FROM outbound_queue');
    return Number(rows[0]?.n ?? 0);
  }
}
