/**
 * The call log (migration 004): one row per call, written as the call goes (src/calls/call-log.ts),
 * read by GET /calls and GET /calls/{id} once the call session is gone, pruned by age.
 */
import type { CallObserved } from '../observability/observed.js';
import type { Db } from './db.js';
import { DAY_MS, deleteOlderThan } from './retention.js';
import { iso } from './workflows.js';
import { ErrorCodes, SwitchboardError } from '../../engine/errors.js';
import { readCallErrors, type CallError } from '../errors.js';

export interface LoggedMessage {
  role: 'assistant' | 'user' | 'tool' | 'system';
  content: string;
  time: string;
  seconds_from_start: number;
  node_id: string | null;
  source?: 'control';
}

/** A call as the log keeps it: what the call is and what happened, not its snapshots. */
export interface CallLogEntry {
  id: string;
  organization_id: string;
  type: string;
  /** The way the call came in (`twilio`) and its ids there (`{call_sid, account_sid}`). */
  transport: string;
  transport_ids: Record<string, string>;
  number_id: string | null;
  phone_number: { number: string; name: string | null } | null;
  customer: { number: string; name: string | null } | null;
  /** Outbound calls: `human`, `machine` or `unknown` once answering-machine detection said; else null. */
  answered_by: string | null;
  assistant_id: string | null;
  workflow_id: string | null;
  /** sha256 hex of the workflow definition the call ran (`hashDefinition`); null without one. Never unset once set. */
  definition_hash: string | null;
  workflow_note: string | null;
  status: string;
  ended_reason: string | null;
  created_at: string;
  started_at: string | null;
  ended_at: string | null;
  /** Empty with `gdpr_mode`. */
  messages: LoggedMessage[];
  nodes_visited: string[];
  current_node: string | null;
  errors: CallError[];
  /** `null`: none was extracted. A later write without it keeps the one already logged. */
  structured_data: unknown;
  recording_ref: string | null;
  /** The `{{variables}}` given for the call (POST /calls, /calls/web, an assistant-request answer); empty with `gdpr_mode`. */
  variables: Record<string, string | number | boolean>;
  /** The call's transfer (DECISIONS 16), as `CallTransfer` (src/calls/warm-transfer.ts); null or absent: none. */
  transfer?: LoggedTransfer | null;
  /** Trace id, turns, usage and cost, once the call ended (null before, and for calls logged before they were kept). */
  observed?: CallObserved | null;
}

/** A call's transfer as the log keeps it. */
export interface LoggedTransfer {
  mode: 'cold' | 'warm';
  destination: string;
  result: 'completed' | 'no-answer' | 'busy' | 'declined' | 'failed' | null;
  summary: string | null;
  operator_answered_at: string | null;
  joined_at: string | null;
}

export interface LoggedCall extends CallLogEntry {
  /** When the log last changed. */
  updated_at: string;
}

export interface CallLogQuery {
  /** 1..1000 rows. */
  limit: number;
  /** `next_cursor` of the page before. */
  cursor?: string | null | undefined;
  status?: string | undefined;
  type?: string | undefined;
  assistant_id?: string | undefined;
  number_id?: string | undefined;
  /** created_at ≥ since (ISO 8601). */
  since?: string | undefined;
  /** created_at < until (ISO 8601). */
  until?: string | undefined;
  /** Calls whose customer number contains these characters (`+` and digits: `555 01` is no number). */
  customer?: string | undefined;
}

/** What the dashboard's overview shows of a period (GET /calls/stats). */
export interface CallLogStats {
  /** Calls created in the period. */
  calls: number;
  /** The period's calls by status (queued, ringing, in-progress, forwarding, ended). */
  by_status: Record<string, number>;
  /** The period's ended calls by ended_reason. */
  by_ended_reason: Record<string, number>;
  /** Mean of ended_at − started_at over the period's calls that have both; null when none has. */
  mean_duration_seconds: number | null;
  /** Calls not over, whenever they were created: ringing, in progress or being forwarded now. */
  live: number;
  /** Nearest-rank p50 and p95 of the totals of every caller turn of the period's calls (their `observed.turns`); null without turns. */
  turn_latency_ms: { p50: number; p95: number; turns: number } | null;
}

export interface CallLogPage {
  calls: LoggedCall[];
  /** Where the next page starts; null on the last page. */
  next_cursor: string | null;
}

/** A cursor that no page of ours made. */
export class InvalidCursorError extends SwitchboardError {
  static override readonly codes = [ErrorCodes.INVALID_CURSOR] as const;
  constructor() {
    super(ErrorCodes.INVALID_CURSOR, 'not a cursor from a previous page');
  }
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** The position after a row: its `created_at` (to the microsecond, as stored) and id. */
export function encodeCursor(createdAt: string, id: string): string {
  return Buffer.from(JSON.stringify([createdAt, id])).toString('base64url');
}

/** The position a cursor names, or an `InvalidCursorError`. */
export function decodeCursor(cursor: string): { created_at: string; id: string } {
  try {
    if (!/^[A-Za-z0-9_-]+$/.test(cursor)) throw new InvalidCursorError();
    const value: unknown = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    if (!Array.isArray(value) || value.length !== 2) throw new InvalidCursorError();
    const [at, id] = value as unknown[];
    if (typeof at !== 'string' || typeof id !== 'string' || !UUID.test(id)) throw new InvalidCursorError();
    if (!/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?Z$/.test(at) || Number.isNaN(Date.parse(at))) {
      throw new InvalidCursorError();
    }
    return { created_at: at, id };
  } catch {
    throw new InvalidCursorError();
  }
}

interface CallRow {
  id: string;
  organization_id: string;
  type: string;
  transport: string;
  transport_ids: Record<string, string>;
  number_id: string | null;
  phone_number: string | null;
  phone_number_name: string | null;
  customer_number: string | null;
  customer_name: string | null;
  answered_by: string | null;
  assistant_id: string | null;
  workflow_id: string | null;
  definition_hash: string | null;
  workflow_note: string | null;
  status: string;
  ended_reason: string | null;
  created_at: Date | string;
  started_at: Date | string | null;
  ended_at: Date | string | null;
  messages: LoggedMessage[];
  nodes_visited: string[];
  current_node: string | null;
  /** As stored: entries of rows written before entries had codes are strings. */
  errors: unknown;
  structured_data: unknown;
  recording_ref: string | null;
  variables: Record<string, string | number | boolean> | null;
  transfer: LoggedTransfer | null;
  observed: CallObserved | null;
  updated_at: Date | string;
  /** created_at to the microsecond, for the cursor. */
  position: string;
}

const isoOrNull = (d: Date | string | null) => (d === null ? null : iso(d));

const toLoggedCall = (r: CallRow): LoggedCall => ({
  id: r.id,
  organization_id: r.organization_id,
  type: r.type,
  transport: r.transport,
  transport_ids: r.transport_ids,
  number_id: r.number_id,
  phone_number: r.phone_number === null ? null : { number: r.phone_number, name: r.phone_number_name },
  customer: r.customer_number === null ? null : { number: r.customer_number, name: r.customer_name },
  answered_by: r.answered_by,
  assistant_id: r.assistant_id,
  workflow_id: r.workflow_id,
  definition_hash: r.definition_hash,
  workflow_note: r.workflow_note,
  status: r.status,
  ended_reason: r.ended_reason,
  created_at: iso(r.created_at),
  started_at: isoOrNull(r.started_at),
  ended_at: isoOrNull(r.ended_at),
  messages: r.messages,
  nodes_visited: r.nodes_visited,
  current_node: r.current_node,
  errors: readCallErrors(r.errors),
  structured_data: r.structured_data,
  recording_ref: r.recording_ref,
  variables: r.variables ?? {},
  transfer: r.transfer ?? null,
  observed: r.observed ?? null,
  updated_at: iso(r.updated_at),
});

const COLUMNS = `id, organization_id, type, transport, transport_ids, number_id, phone_number, phone_number_name,
  customer_number, customer_name, answered_by, assistant_id, workflow_id, definition_hash, workflow_note, status, ended_reason, created_at,
  started_at, ended_at, messages, nodes_visited, current_node, errors, structured_data, recording_ref, transfer, observed, variables, updated_at,
  to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS position`;

const json = (value: unknown) => JSON.stringify(value);

/** Rows per delete statement, as for delivery attempts (a call row is larger: its messages). */
export const DEFAULT_CALL_PRUNE_BATCH = 200;
export const MAX_PAGE = 1000;

export class CallLogRepository {
  constructor(private readonly db: Db) {}

  /**
   * Writes the whole entry (insert, or replace the row of the same id and organization). A null
   * `definition_hash`, `structured_data` or `recording_ref` keeps the one already logged: a call's
   * definition does not change, and an ended call's record no longer carries it.
   */
  async upsert(e: CallLogEntry): Promise<void> {
    await this.db.query(
      `INSERT INTO calls (id, organization_id, type, transport, transport_ids, number_id, phone_number, phone_number_name,
         customer_number, assistant_id, workflow_id, definition_hash, workflow_note, status, ended_reason, created_at,
         started_at, ended_at, messages, nodes_visited, current_node, errors, structured_data, recording_ref,
         customer_name, answered_by, variables, transfer, observed)
       VALUES ($1, $2, $3, $4, $5::jsonb, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18,
         $19::jsonb, $20::jsonb, $21, $22::jsonb, $23::jsonb, $24, $25, $26, $27::jsonb, $28::jsonb, $29::jsonb)
       ON CONFLICT (id) DO UPDATE SET
         type = EXCLUDED.type,
         transport = EXCLUDED.transport,
         transport_ids = EXCLUDED.transport_ids,
         number_id = EXCLUDED.number_id,
         phone_number = EXCLUDED.phone_number,
         phone_number_name = EXCLUDED.phone_number_name,
         customer_number = EXCLUDED.customer_number,
         customer_name = EXCLUDED.customer_name,
         answered_by = EXCLUDED.answered_by,
         assistant_id = EXCLUDED.assistant_id,
         workflow_id = EXCLUDED.workflow_id,
         definition_hash = COALESCE(EXCLUDED.definition_hash, calls.definition_hash),
         workflow_note = EXCLUDED.workflow_note,
         status = EXCLUDED.status,
         ended_reason = EXCLUDED.ended_reason,
         created_at = EXCLUDED.created_at,
         started_at = EXCLUDED.started_at,
         ended_at = EXCLUDED.ended_at,
         messages = EXCLUDED.messages,
         nodes_visited = EXCLUDED.nodes_visited,
         current_node = EXCLUDED.current_node,
         errors = EXCLUDED.errors,
         structured_data = COALESCE(EXCLUDED.structured_data, calls.structured_data),
         recording_ref = COALESCE(EXCLUDED.recording_ref, calls.recording_ref),
         variables = EXCLUDED.variables,
         transfer = COALESCE(EXCLUDED.transfer, calls.transfer),
         observed = COALESCE(EXCLUDED.observed, calls.observed),
         updated_at = now()
       WHERE calls.organization_id = EXCLUDED.organization_id`,
      [
        e.id,
        e.organization_id,
        e.type,
        e.transport,
        json(e.transport_ids),
        e.number_id,
        e.phone_number?.number ?? null,
        e.phone_number?.name ?? null,
        e.customer?.number ?? null,
        e.assistant_id,
        e.workflow_id,
        e.definition_hash,
        e.workflow_note,
        e.status,
        e.ended_reason,
        e.created_at,
        e.started_at,
        e.ended_at,
        json(e.messages),
        json(e.nodes_visited),
        e.current_node,
        json(e.errors),
        e.structured_data === null || e.structured_data === undefined ? null : json(e.structured_data),
        e.recording_ref,
        e.customer?.name ?? null,
        e.answered_by,
        json(e.variables ?? {}),
        e.transfer ? json(e.transfer) : null,
        e.observed ? json(e.observed) : null,
      ],
    );
  }

  /**
   * The call a carrier's call id belongs to (`call_sid`, plus every other id given, e.g. the
   * `account_sid`), or null: a replayed voice webhook makes no second call.
   */
  async findByTransportCall(transport: string, ids: { call_sid: string } & Record<string, string>): Promise<string | null> {
    const { rows } = await this.db.query<{ id: string }>(
      `SELECT id FROM calls WHERE transport = $1 AND transport_ids->>'call_sid' = $2 AND transport_ids @> $3::jsonb LIMIT 1`,
      [transport, ids.call_sid, JSON.stringify(ids)],
    );
    return rows[0]?.id ?? null;
  }

  async get(orgId: string, id: string): Promise<LoggedCall | null> {
    const { rows } = await this.db.query<CallRow>(
      `SELECT ${COLUMNS} FROM calls WHERE id = $1 AND organization_id = $2`,
      [id, orgId],
    );
    return rows[0] ? toLoggedCall(rows[0]) : null;
  }

  /**
   * One page of the organization's calls, newest first (`created_at`, then `id`, both descending),
   * from the position of `cursor`. Throws `InvalidCursorError` for a cursor it did not make.
   */
  async list(orgId: string, q: CallLogQuery): Promise<CallLogPage> {
    if (!Number.isInteger(q.limit) || q.limit < 1 || q.limit > MAX_PAGE) {
      throw new RangeError(`limit must be an integer from 1 to ${MAX_PAGE}, not ${q.limit}`);
    }
    const where = ['organization_id = $1'];
    const params: unknown[] = [orgId];
    const param = (value: unknown) => {
      params.push(value);
      return `$${params.length}`;
    };
    if (q.cursor) {
      const after = decodeCursor(q.cursor);
      where.push(`(created_at, id) < (${param(after.created_at)}::timestamptz, ${param(after.id)}::uuid)`);
    }
    if (q.status) where.push(`status = ${param(q.status)}`);
    if (q.type) where.push(`type = ${param(q.type)}`);
    if (q.assistant_id) where.push(`assistant_id = ${param(q.assistant_id)}`);
    if (q.number_id) where.push(`number_id = ${param(q.number_id)}`);
    if (q.since) where.push(`created_at >= ${param(q.since)}::timestamptz`);
    if (q.until) where.push(`created_at < ${param(q.until)}::timestamptz`);
    // the characters are `+` and digits only (the API's query schema): nothing of LIKE's own
    if (q.customer) where.push(`customer_number LIKE ${param(`%${q.customer}%`)}`);
    // one row more than asked says whether another page follows
    const pageSql = `WHERE ${where.join(' AND ')} ORDER BY created_at DESC, id DESC LIMIT ${param(q.limit + 1)}`;
    // a search picks the page's ids from the customer-number index first (migration 010), then
    // reads those rows alone: a substring can be checked in the index, not looked up in it
    const { rows } = await this.db.query<CallRow>(
      q.customer
        ? `SELECT ${COLUMNS} FROM calls WHERE id IN (SELECT id FROM calls ${pageSql}) ORDER BY created_at DESC, id DESC`
        : `SELECT ${COLUMNS} FROM calls ${pageSql}`,
      params,
    );
    const page = rows.slice(0, q.limit);
    const last = page[page.length - 1];
    return {
      calls: page.map(toLoggedCall),
      next_cursor: rows.length > q.limit && last ? encodeCursor(last.position, last.id) : null,
    };
  }

  /**
   * The organization's calls created in [since, until): how many, by status and ended reason,
   * their mean duration; and how many calls are live now. One pass over the period's index
   * entries (migration 010 covers the columns read, so PostgreSQL need not visit the rows).
   */
  async stats(orgId: string, period: { since: string; until: string }): Promise<CallLogStats> {
    const { rows } = await this.db.query<{ status: string; ended_reason: string | null; n: number; timed: number; seconds: number | null }>(
      `SELECT status, ended_reason, count(*)::int AS n,
              count(*) FILTER (WHERE started_at IS NOT NULL AND ended_at IS NOT NULL)::int AS timed,
              sum(extract(epoch FROM ended_at - started_at)) FILTER (WHERE started_at IS NOT NULL AND ended_at IS NOT NULL)::float8 AS seconds
         FROM calls WHERE organization_id = $1 AND created_at >= $2::timestamptz AND created_at < $3::timestamptz
        GROUP BY status, ended_reason`,
      [orgId, period.since, period.until],
    );
    const live = await this.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM calls WHERE organization_id = $1 AND status IN ('ringing', 'in-progress', 'forwarding')`,
      [orgId],
    );
    // every turn of the period's ended calls: kept in `observed` (migration 010_call_observed) once a call ends
    const turns = await this.db.query<{ p50: number | null; p95: number | null; n: number }>(
      `SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY total) AS p50, percentile_disc(0.95) WITHIN GROUP (ORDER BY total) AS p95,
              count(*)::int AS n
         FROM (SELECT (t->'latency'->>'total')::float8 AS total
                 FROM calls c, jsonb_array_elements(CASE WHEN jsonb_typeof(c.observed->'turns') = 'array' THEN c.observed->'turns' ELSE '[]'::jsonb END) AS t
                WHERE c.organization_id = $1 AND c.created_at >= $2::timestamptz AND c.created_at < $3::timestamptz
                  AND c.observed IS NOT NULL) AS turn
        WHERE total IS NOT NULL`,
      [orgId, period.since, period.until],
    );
    const t = turns.rows[0];
    const out: CallLogStats = {
      calls: 0,
      by_status: {},
      by_ended_reason: {},
      mean_duration_seconds: null,
      live: live.rows[0]?.n ?? 0,
      turn_latency_ms: t && t.n > 0 && t.p50 !== null && t.p95 !== null ? { p50: t.p50, p95: t.p95, turns: t.n } : null,
    };
    let timed = 0;
    let seconds = 0;
    for (const r of rows) {
      out.calls += r.n;
      out.by_status[r.status] = (out.by_status[r.status] ?? 0) + r.n;
      if (r.status === 'ended') {
        const reason = r.ended_reason ?? 'unknown';
        out.by_ended_reason[reason] = (out.by_ended_reason[reason] ?? 0) + r.n;
      }
      timed += r.timed;
      seconds += r.seconds ?? 0;
    }
    if (timed > 0) out.mean_duration_seconds = seconds / timed;
    return out;
  }

  /**
   * Calls the log has as not yet over (`ringing`, `in-progress`, `forwarding`, and `queued` when
   * asked), created before `before`, oldest first: the sweep (DECISIONS 22) ends those no process
   * looks after and queues again the queued ones the dial queue lost.
   */
  async unfinished(before: Date, limit = 1000, options: { queued?: boolean } = {}): Promise<LoggedCall[]> {
    const statuses = options.queued ? "'queued', 'ringing', 'in-progress', 'forwarding'" : "'ringing', 'in-progress', 'forwarding'";
    const { rows } = await this.db.query<CallRow>(
      `SELECT ${COLUMNS} FROM calls WHERE status IN (${statuses}) AND created_at < $1
        ORDER BY created_at LIMIT $2`,
      [before.toISOString(), limit],
    );
    return rows.map(toLoggedCall);
  }

  /**
   * Ends a call in the log only if it still has status `expected`: one process wins when several
   * sweep at once. True when this one did.
   */
  async endIf(id: string, expected: string, end: { ended_reason: string; ended_at: string; errors: CallError[] }): Promise<boolean> {
    const { rows } = await this.db.query<{ id: string }>(
      `UPDATE calls SET status = 'ended', ended_reason = $3, ended_at = $4, errors = $5::jsonb, updated_at = now()
        WHERE id = $1 AND status = $2 RETURNING id`,
      [id, expected, end.ended_reason, end.ended_at, json(end.errors)],
    );
    return rows.length > 0;
  }

  /** A recording kept after the call's row was ended (a worker-lost call's, src/recordings/lost.ts). */
  async noteRecording(id: string, recordingUrl: string): Promise<void> {
    await this.db.query(`UPDATE calls SET recording_ref = $2, updated_at = now() WHERE id = $1`, [id, recordingUrl]);
  }

  /** Calls created more than `retentionDays` whole days ago are deleted (0: none). */
  prune(retentionDays: number, options: { now?: number; batchSize?: number; shouldStop?: () => boolean } = {}): Promise<number> {
    if (!Number.isInteger(retentionDays) || retentionDays < 0) {
      throw new RangeError(`retentionDays must be a whole number of days, not ${retentionDays}`);
    }
    if (retentionDays === 0) return Promise.resolve(0);
    const cutoff = new Date((options.now ?? Date.now()) - retentionDays * DAY_MS);
    return this.pruneOlderThan(cutoff, options.batchSize, options);
  }

  /**
   * Deletes the rows created before `cutoff`, oldest first, in batches (`deleteOlderThan`,
   * src/store/retention.ts). Returns how many rows this call deleted.
   */
  pruneOlderThan(cutoff: Date, batchSize = DEFAULT_CALL_PRUNE_BATCH, options: { shouldStop?: () => boolean } = {}): Promise<number> {
    return deleteOlderThan(this.db, 'calls', cutoff, batchSize, options);
  }
}
