/**
 * The call log beside the call sessions: `LoggedCallStore` is the session store with every call
 * also written to PostgreSQL (`calls`, migration 004) at its start, at each change of status and
 * at its end, so that a call outlives its 24 h session and a restart. The writes stay off the
 * media path: each call's go through its own promise chain, in the order they were made, and a
 * failure is logged, never thrown to the call. `CallLogPruner` deletes calls older than
 * CALL_RETENTION_DAYS.
 */
import type { Logger } from 'pino';
import { hashDefinition } from '../../engine/compile.js';
import type { WorkflowDefinition } from '../../engine/schema.js';
import type { CallLogEntry, CallLogRepository } from '../store/calls.js';
import type { Outbox } from '../store/outbox.js';
import { RetentionPruner, type PrunerSettings } from '../store/retention.js';
import { isGdprCall, type CallRecord, type CallStatus, type CallStore } from './store.js';

/** The carrier a call came through and its ids there. */
export function transportOf(record: CallRecord): { transport: string; transport_ids: Record<string, string> } {
  return { transport: record.transport, transport_ids: { ...record.transport_ids } };
}

/**
 * sha256 hex of the workflow definition the call runs (the engine's hash of its canonical JSON);
 * null without a workflow. An ended call's record no longer holds the definition: its engine
 * snapshot still names the hash (a call with no workflow runs a stand-in definition: not that one).
 */
export function definitionHashOf(record: Pick<CallRecord, 'definition' | 'workflow_id' | 'engine'>): string | null {
  if (record.definition) return hashDefinition(record.definition as unknown as WorkflowDefinition);
  const snapshotHash = record.engine?.definition_hash;
  return record.workflow_id && typeof snapshotHash === 'string' ? snapshotHash : null;
}

/**
 * What the log says about a session record, as it is now (a copy: the record may change at once).
 * `definitionHash` saves hashing the same definition on each write.
 */
export function describeCall(record: CallRecord, definitionHash = definitionHashOf(record)): CallLogEntry {
  return {
    id: record.id,
    organization_id: record.organization_id,
    type: record.type,
    ...transportOf(record),
    number_id: record.number_id || null,
    phone_number: record.phone_number ? { number: record.phone_number.number, name: record.phone_number.name } : null,
    customer: record.customer ? { number: record.customer.number, name: record.customer.name ?? null } : null,
    answered_by: record.answered_by ?? null,
    assistant_id: record.assistant_id,
    workflow_id: record.workflow_id,
    definition_hash: definitionHash,
    workflow_note: record.workflow_note,
    status: record.status,
    ended_reason: record.ended_reason,
    created_at: record.created_at,
    started_at: record.started_at,
    ended_at: record.ended_at,
    messages: record.messages.map((m) => ({ ...m })),
    nodes_visited: [...record.nodes_visited],
    current_node: record.current_node,
    errors: [...record.errors],
    structured_data: structuredClone(record.structured_data ?? null),
    recording_ref: record.recording_url ?? null,
    variables: { ...record.variables },
    transfer: record.transfer ? { ...record.transfer } : null,
    observed: record.observed ? structuredClone(record.observed) : null,
  };
}

/** What the log keeps of a call: `describeCall`, with no messages under `gdpr_mode`. */
export function callLogEntry(record: CallRecord, definitionHash?: string | null): CallLogEntry {
  const entry = describeCall(record, definitionHash === undefined ? definitionHashOf(record) : definitionHash);
  if (isGdprCall(record)) {
    entry.messages = [];
    entry.variables = {};
  }
  return entry;
}

/** A call as the log has it, as a record (no snapshot: for a call that will not run). */
export function recordFromLog(e: CallLogEntry): CallRecord {
  return {
    id: e.id,
    organization_id: e.organization_id,
    type: e.type as CallRecord['type'],
    status: e.status as CallRecord['status'],
    number_id: e.number_id ?? '',
    phone_number: e.phone_number ?? { number: '', name: null },
    customer: e.customer ?? { number: '' },
    answered_by: (e.answered_by ?? null) as CallRecord['answered_by'],
    transport: e.transport,
    transport_ids: { ...e.transport_ids },
    assistant_id: e.assistant_id,
    assistant: {},
    workflow_id: e.workflow_id,
    workflow_note: e.workflow_note,
    definition: null,
    engine: null,
    current_node: e.current_node,
    nodes_visited: [...e.nodes_visited],
    messages: [...e.messages],
    created_at: e.created_at,
    started_at: e.started_at,
    ended_at: e.ended_at,
    ended_reason: e.ended_reason,
    errors: [...e.errors],
    variables: { ...e.variables },
    transfer: e.transfer ?? null,
    observed: e.observed ?? null,
    worker_id: null,
    heartbeat_at: null,
  };
}

/** Calls whose last logged status this process remembers; beyond it, the oldest are forgotten (one extra write each). */
const REMEMBERED_CALLS = 10_000;

export class LoggedCallStore implements CallStore {
  /** Each call's last write still under way: the next one waits for it. */
  private readonly tails = new Map<string, Promise<void>>();
  /** The last status written for each call not yet ended, and its definition's hash. */
  private readonly logged = new Map<string, { status: CallStatus; definitionHash: string | null }>();
  private readonly log: Logger;

  constructor(
    /** The call sessions (in process or Redis): every CallStore method is theirs. */
    readonly sessions: CallStore,
    readonly callLog: CallLogRepository,
    logger: Logger,
    /** Keeps the writes the database does not take during an outage (DECISIONS 22); none: logged and lost. */
    private readonly outbox: Outbox | null = null,
  ) {
    this.log = logger.child({ component: 'call-log' });
    outbox?.register<CallLogEntry>('call-log', (entry) => this.callLog.upsert(entry));
  }

  /** The session first: a call the sessions refuse (Redis down) leaves no row behind in the log. */
  async create(record: CallRecord): Promise<void> {
    await this.sessions.create(record);
    this.write(record);
  }

  get(id: string): Promise<CallRecord | null> {
    return this.sessions.get(id);
  }

  list(organizationId: string, limit: number): Promise<CallRecord[]> {
    return this.sessions.list(organizationId, limit);
  }

  /** The session save; the log is written too when the status changed, and at every save of an ended call. */
  async save(record: CallRecord): Promise<void> {
    this.logChange(record);
    await this.sessions.save(record);
  }

  async saveRunning(record: CallRecord, engine: () => Record<string, unknown>): Promise<void> {
    this.logChange(record);
    await this.sessions.saveRunning(record, engine);
  }

  async saveIf(record: CallRecord, expected: CallStatus): Promise<boolean> {
    if (!(await this.sessions.saveIf(record, expected))) return false;
    this.logChange(record);
    return true;
  }

  /** Writes the log when the call's status changed since its last write, and at every save of an ended call. */
  private logChange(record: CallRecord): void {
    if (record.status === 'ended' || this.logged.get(record.id)?.status !== record.status) this.write(record);
  }

  putStreamToken(callId: string, token: string, ttlSeconds: number): Promise<void> {
    return this.sessions.putStreamToken(callId, token, ttlSeconds);
  }

  consumeStreamToken(callId: string, token: string): Promise<boolean> {
    return this.sessions.consumeStreamToken(callId, token);
  }

  claimTransportCall(key: string, callId: string, ttlSeconds: number): Promise<string | null> {
    return this.sessions.claimTransportCall(key, callId, ttlSeconds);
  }

  heartbeat(workerId: string, callIds: string[]): Promise<void> {
    return this.sessions.heartbeat(workerId, callIds);
  }

  lastHeartbeat(callId: string): Promise<string | null> {
    return this.sessions.lastHeartbeat(callId);
  }

  findStale(staleMs: number): Promise<CallRecord[]> {
    return this.sessions.findStale(staleMs);
  }

  claim(callId: string, workerId: string, staleMs: number): Promise<CallRecord | null> {
    return this.sessions.claim(callId, workerId, staleMs);
  }

  /** Lets the log writes under way finish (those queued meanwhile too), then closes the sessions. */
  async close(): Promise<void> {
    while (this.tails.size > 0) await this.settled();
    await this.sessions.close();
  }

  /**
   * Resolves once every log write made so far has been done (or has failed and been logged), or
   * after `timeoutMs` when given, whichever comes first. Writes queued meanwhile are not waited for.
   */
  async settled(timeoutMs?: number): Promise<void> {
    // each call's tail follows all of that call's earlier writes
    const all = Promise.all([...this.tails.values()]).then(() => undefined);
    if (timeoutMs === undefined) return all;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([all, new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs)))]);
    clearTimeout(timer);
  }

  /** Log writes still under way (for tests and metrics). */
  get pending(): number {
    return this.tails.size;
  }

  /** Queues a write of the record as it is now, after the call's writes before it. */
  private write(record: CallRecord): void {
    let entry: CallLogEntry;
    try {
      entry = callLogEntry(record, this.hashFor(record));
    } catch (err) {
      // the call goes on whatever the log makes of its record
      this.log.error({ err, callId: record.id }, 'could not describe the call for the call log');
      return;
    }
    if (record.status === 'ended') {
      this.logged.delete(record.id);
    } else {
      this.logged.delete(record.id);
      this.logged.set(record.id, { status: record.status, definitionHash: entry.definition_hash });
      if (this.logged.size > REMEMBERED_CALLS) this.logged.delete(this.logged.keys().next().value!);
    }
    const previous = this.tails.get(record.id) ?? Promise.resolve();
    const upsert = () => (this.outbox ? this.outbox.submit('call-log', record.id, entry) : this.callLog.upsert(entry));
    const tail = previous.then(() =>
      upsert().then(
        () => undefined,
        (err: unknown) => {
          this.log.error({ err, callId: record.id, status: entry.status }, 'could not write the call to the call log');
        },
      ),
    );
    this.tails.set(record.id, tail);
    void tail.finally(() => {
      if (this.tails.get(record.id) === tail) this.tails.delete(record.id);
    });
  }

  /**
   * The definition's hash, computed once per call (its snapshot does not change while it lives).
   * Once the record drops the definition the log keeps the hash it has (see `upsert`).
   */
  private hashFor(record: CallRecord): string | null {
    return this.logged.get(record.id)?.definitionHash ?? definitionHashOf(record);
  }
}

export type CallLogPrunerOptions = PrunerSettings & { calls: Pick<CallLogRepository, 'prune'> };

/**
 * Retention of the call log: every process prunes calls older than CALL_RETENTION_DAYS shortly
 * after it starts and then every hour (`RetentionPruner`, as `DeliveryPruner` for delivery
 * attempts); `batchSize` absent or 0: `DEFAULT_CALL_PRUNE_BATCH`.
 */
export class CallLogPruner extends RetentionPruner {
  constructor({ calls, ...settings }: CallLogPrunerOptions) {
    super({
      ...settings,
      batchSize: settings.batchSize || undefined,
      prune: (retentionDays, options) => calls.prune(retentionDays, options),
      messages: {
        pruned: 'pruned old calls from the call log',
        failed: 'pruning the call log failed; trying again at the next run',
      },
    });
  }
}
