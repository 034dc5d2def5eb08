/**
 * Call sessions: what one live call is (snapshots of its assistant and workflow, the engine's
 * saved state, the transcript, its heartbeat). In Redis when REDIS_URL is set, so that any
 * process can read them and finalize a call whose process died; in process otherwise.
 */
import { toWellFormed } from '../../engine/text.js';
import { createHash, randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { RedisConnections, type RedisSource } from '../redis.js';
import { readCallErrors, type CallError } from '../errors.js';
import type { CallTransfer } from './warm-transfer.js';
import type { CallObserved } from '../observability/observed.js';

/**
 * A call's statuses, in the order a call goes through them (the API's enum and the webhooks' type
 * are this list). `queued`: an outbound call waiting to be dialled (DECISIONS 11); inbound calls
 * start `ringing`.
 */
export const CALL_STATUSES = ['queued', 'ringing', 'in-progress', 'forwarding', 'ended'] as const;
export type CallStatus = (typeof CALL_STATUSES)[number];
/**
 * `web_call`: a browser (or any WebSocket client) talks to the assistant: no phone, no number (docs/web-calls.md).
 * `test_call`: a voice test of a test suite (docs/test-suites.md): a simulated caller, no number, no notifications.
 */
export type CallType = 'inbound_phone_call' | 'outbound_phone_call' | 'web_call' | 'test_call';
/** Who answered an outbound call, as answering-machine detection says (null: not known yet, or inbound). */
export type AnsweredBy = 'human' | 'machine' | 'unknown';

export interface CallMessage {
  role: 'assistant' | 'user' | 'tool' | 'system';
  content: string;
  /** ISO 8601 UTC. */
  time: string;
  seconds_from_start: number;
  node_id: string | null;
  /** `control`: a live control said or added it (`POST /calls/{id}/control`); absent otherwise. */
  source?: 'control';
}

export interface CallRecord {
  id: string;
  organization_id: string;
  type: CallType;
  status: CallStatus;
  /** The organization's number the call came in on or went out from; null for a web call. */
  number_id: string | null;
  phone_number: { number: string; name: string | null } | null;
  /** Who called or was called; null for a web call. */
  customer: { number: string; name?: string | null } | null;
  /** Outbound calls: who answered (answering-machine detection), once known. */
  answered_by?: AnsweredBy | null;
  /** When an outbound call was dialled (its ringing time counts from here, not from `created_at`). */
  ringing_at?: string | null;
  /**
   * `{{variables}}` given for the call (`POST /calls`, an assistant-request answer): the snapshot
   * keeps the templates, the call substitutes them as it starts (DECISIONS 12).
   */
  variables?: Record<string, string | number | boolean>;
  /** The values the call substituted (built-ins and given ones), fixed when its conversation started. */
  variable_values?: Record<string, string>;
  /** The carrier that carries the call (`twilio`), and its own ids of the call (`{call_sid, account_sid}`). */
  transport: string;
  transport_ids: Record<string, string>;
  assistant_id: string | null;
  /** The effective assistant as the call started (later edits apply to the next call). */
  assistant: Record<string, unknown>;
  workflow_id: string | null;
  /** Why no workflow runs although the number has one (e.g. inactive). */
  workflow_note: string | null;
  definition: Record<string, unknown> | null;
  /**
   * The engine's saved state (`SessionSnapshot`), when a workflow runs. On a record read from the
   * store; the running call's own object gets it at the end (its saves give the store a way to
   * make it: `saveRunning`).
   */
  engine: Record<string, unknown> | null;
  current_node: string | null;
  nodes_visited: string[];
  messages: CallMessage[];
  created_at: string;
  started_at: string | null;
  ended_at: string | null;
  ended_reason: string | null;
  /** What went wrong, for people and programs (`src/errors.ts`). */
  errors: CallError[];
  /** What the analysis plan extracted, set as the end-of-call-report is made. */
  structured_data?: unknown;
  /** Where the recording is served (`GET /calls/{id}/recording` on PUBLIC_URL), once it is kept. */
  recording_url?: string | null;
  /** The call's transfer, cold or warm (DECISIONS 16); absent or null when it had none. */
  transfer?: CallTransfer | null;
  /** Trace id, turns, usage and cost (DECISIONS 21), set as the call ends; null before. */
  observed?: CallObserved | null;
  /** The process that runs the call's media, and when it last said it is alive. */
  worker_id: string | null;
  heartbeat_at: string | null;
}

/**
 * A new call with no assistant, workflow or messages yet: as the voice webhook opens it (inbound,
 * `ringing`), or as `POST /calls` queues it (`outbound_phone_call`, `queued`).
 */
export function newCallRecord(
  fields: Pick<CallRecord, 'organization_id' | 'number_id' | 'phone_number' | 'customer' | 'transport' | 'transport_ids'> &
    Partial<Pick<CallRecord, 'type' | 'status'>>,
): CallRecord {
  return {
    id: randomUUID(),
    type: 'inbound_phone_call',
    status: 'ringing',
    ...fields,
    assistant_id: null,
    assistant: {},
    workflow_id: null,
    workflow_note: null,
    definition: null,
    engine: null,
    current_node: null,
    nodes_visited: [],
    messages: [],
    created_at: new Date().toISOString(),
    started_at: null,
    ended_at: null,
    ended_reason: null,
    errors: [],
    worker_id: null,
    heartbeat_at: null,
  };
}

export interface CallStore {
  create(record: CallRecord): Promise<void>;
  get(id: string): Promise<CallRecord | null>;
  /** The organization's calls, newest first. */
  list(organizationId: string, limit: number): Promise<CallRecord[]>;
  /**
   * Writes the whole record (the owning process is the only writer while the call lives). The
   * record is copied before `save` returns, so the caller may change it at once, and saves reach
   * the store in the order they were made.
   */
  save(record: CallRecord): Promise<void>;
  /**
   * The owning process's save of a call it is running, made as the call goes (coalesced, about
   * twice a turn); `engine` gives the workflow's snapshot at that moment. A store outside the
   * process writes what `save` writes, the record's `engine` set from `engine()` first. The
   * in-process store keeps the record object itself and makes its JSON, the engine's snapshot
   * included, only when it is read: a read sees the call as it is then, never older than this
   * save, and a call that nobody reads costs no copy. `save` and `saveIf` copy again.
   */
  saveRunning(record: CallRecord, engine: () => Record<string, unknown>): Promise<void>;
  /**
   * Writes the whole record only if the stored one still has status `expected` (what the writer
   * read): the moves between statuses that more than one process may make at once (the dialler,
   * a carrier's callback, `POST /calls/{id}/end`, the media connecting) go through `transition`.
   */
  saveIf(record: CallRecord, expected: CallStatus): Promise<boolean>;
  /** Stores a one-time media-stream token for a call. */
  putStreamToken(callId: string, token: string, ttlSeconds: number): Promise<void>;
  /** True once for the right token; the token is gone afterwards. */
  consumeStreamToken(callId: string, token: string): Promise<boolean>;
  /**
   * Takes `key` (a carrier's own id of the call, e.g. `twilio:<AccountSid>:<CallSid>`) for
   * `callId`: null when taken now, else the id of the call that took it first.
   */
  claimTransportCall(key: string, callId: string, ttlSeconds: number): Promise<string | null>;
  /** Marks the calls of a worker as alive now. */
  heartbeat(workerId: string, callIds: string[]): Promise<void>;
  /**
   * When a process last said the call is alive (null: never, or the store lost it): a call
   * whose session a Redis restart lost but whose process still runs it says so within 5 s.
   */
  lastHeartbeat(callId: string): Promise<string | null>;
  /** Live calls whose worker has not said it is alive for `staleMs`. */
  findStale(staleMs: number): Promise<CallRecord[]>;
  /** Takes a stale call over for finalization; only one process wins. */
  claim(callId: string, workerId: string, staleMs: number): Promise<CallRecord | null>;
  close(): Promise<void>;
}

const tokenHash = (token: string) => createHash('sha256').update(token).digest('hex');
/** A call whose media stream has not connected this long after the voice webhook never will. */
export const RINGING_LIMIT_MS = 150_000;
/** A web call's token is valid 60 s (DECISIONS 14): one not connected 75 s after it was made never will be. */
export const WEB_RINGING_LIMIT_MS = 75_000;

/**
 * Live and no longer looked after: a started call whose process has not said it is alive for
 * `staleMs` (`heartbeat` may be newer than the record's own), or a call still ringing long after
 * its stream token expired.
 */
function isStale(r: StaleFields, staleMs: number, now: number, heartbeat: string | null = null): boolean {
  // an outbound call rings from its dial, after however long it waited in the queue
  if (r.status === 'ringing') {
    return now - Date.parse(r.ringing_at ?? r.created_at) > (r.type === 'web_call' ? WEB_RINGING_LIMIT_MS : RINGING_LIMIT_MS);
  }
  if (r.status !== 'in-progress' && r.status !== 'forwarding') return false;
  const last = Math.max(r.heartbeat_at ? Date.parse(r.heartbeat_at) : 0, heartbeat ? Date.parse(heartbeat) : 0);
  return last > 0 && now - last > staleMs;
}

type StaleFields = Pick<CallRecord, 'status' | 'ringing_at' | 'created_at' | 'type' | 'heartbeat_at'>;

/** Whether the call's assistant keeps nothing of the conversation after the call (`gdpr_mode`). */
export const isGdprCall = (record: Pick<CallRecord, 'assistant'>) => record.assistant?.gdpr_mode === true;

/**
 * Once a `gdpr_mode` call's report is made (its structured data extracted): the record drops its
 * messages and engine state (the history is the conversation). Nothing for any other call.
 */
export function forgetConversation(record: CallRecord): void {
  if (!isGdprCall(record)) return;
  record.messages = [];
  record.engine = null;
  // the summary is the conversation's
  if (record.transfer?.summary) record.transfer = { ...record.transfer, summary: null };
}

/**
 * What a store keeps of a record: an ended call keeps no workflow snapshot (it can be large, and
 * the report and the call log have what they need of it); with `gdpr_mode` it keeps no messages and
 * no engine state either (its history is the conversation), whichever process ended it and however.
 */
function kept(record: CallRecord): CallRecord {
  if (record.status !== 'ended') return record;
  const forget = isGdprCall(record) && (record.messages.length > 0 || record.engine !== null);
  if (record.definition === null && !forget) return record;
  return { ...record, definition: null, ...(forget ? { messages: [], engine: null } : {}) };
}

/** The JSON of the parts a call never changes once it has them, by object: made once a call. */
const fixedJson = new WeakMap<object, string>();

/**
 * `JSON.stringify`, with any unpaired UTF-16 surrogate (which it writes as a `\udXXX` escape, and
 * Redis's cjson cannot read back) made U+FFFD: a record that holds one can still be moved.
 */
function storableJson(value: unknown): string {
  const json = JSON.stringify(value);
  return LONE_SURROGATE_ESCAPE.test(json) ? JSON.stringify(value, (_key, v: unknown) => (typeof v === 'string' ? toWellFormed(v) : v)) : json;
}
/** Only an unpaired surrogate is escaped so by `JSON.stringify` (a pair is written as is). */
const LONE_SURROGATE_ESCAPE = /\\u[dD][89a-fA-F]/;

function fixedPart(value: Record<string, unknown> | null | undefined): string {
  if (value === null || typeof value !== 'object') return 'null';
  let json = fixedJson.get(value);
  if (json === undefined) {
    json = storableJson(value);
    fixedJson.set(value, json);
  }
  return json;
}

/**
 * A record as JSON, as `JSON.stringify` gives it but for the order of two keys. The effective
 * assistant and the workflow snapshot are fixed as the call starts (nothing changes them in
 * place; a new one is a new object) and make a third of a live call's record: their JSON is made
 * once, not at every save.
 */
export function recordJson(record: CallRecord): string {
  const { assistant, definition } = record;
  const rest = storableJson({ ...record, assistant: undefined, definition: undefined });
  return `${rest.slice(0, -1)},"assistant":${fixedPart(assistant)},"definition":${fixedPart(definition)}}`;
}

/**
 * A stored record: as JSON (a save is one `JSON.stringify`, about a third of a deep copy's cost,
 * and one string for the collector instead of a tree of objects), or a running call's own record
 * (`saveRunning`: its JSON made when it is read), with the fields the store reads itself beside
 * it. A process holds hundreds of live calls, each saved about twice a turn.
 */
interface MemoryEntry {
  head: StaleFields & Pick<CallRecord, 'id' | 'organization_id' | 'ended_at' | 'worker_id'>;
  /** The record as JSON, or null while the store holds a running call's own record (`saveRunning`). */
  json: string | null;
  running: { record: CallRecord; engine: () => Record<string, unknown> } | null;
}

function entryHead(r: CallRecord): MemoryEntry['head'] {
  const { id, organization_id, created_at, status, ringing_at, type, ended_at, worker_id, heartbeat_at } = r;
  return { id, organization_id, created_at, status, ringing_at, type, ended_at, worker_id, heartbeat_at };
}

/**
 * The fields the store reads itself. A running call's come from its record as it is now (a status
 * it moved to since its last save included, as a read gives it); the owner and the heartbeat are
 * the store's own (`heartbeat`, `claim`).
 */
function headOf(e: MemoryEntry): MemoryEntry['head'] {
  if (e.running) {
    const { worker_id, heartbeat_at } = e.head;
    e.head = { ...entryHead(e.running.record), worker_id, heartbeat_at };
  }
  return e.head;
}

function memoryEntry(record: CallRecord): MemoryEntry {
  const r = kept(record);
  return { head: entryHead(r), json: recordJson(r), running: null };
}

/**
 * A running call's record as JSON, its engine's snapshot made now. A snapshot that cannot be made
 * leaves the record's own (the reader gets the call, never an error of the call's engine).
 */
function runningJson(running: NonNullable<MemoryEntry['running']>): string {
  let engine = running.record.engine;
  try {
    engine = running.engine();
  } catch {
    // the call's end makes its snapshot again, and logs what fails there (`CallLedger.close`)
  }
  return recordJson(kept({ ...running.record, engine }));
}

/** A stored record; `errors` written before entries had codes (a live call's, in Redis) read as `UNKNOWN` entries. */
function parseRecord(json: string): CallRecord {
  const record = JSON.parse(json) as CallRecord;
  record.errors = readCallErrors(record.errors);
  return record;
}

/** The record of an entry: a fresh copy, with the heartbeat and owner the store may have changed since. */
function memoryRecord(e: MemoryEntry): CallRecord {
  const json = e.json ?? runningJson(e.running!);
  const record = parseRecord(json);
  record.worker_id = e.head.worker_id;
  record.heartbeat_at = e.head.heartbeat_at;
  return record;
}

export class MemoryCallStore implements CallStore {
  private readonly calls = new Map<string, MemoryEntry>();
  private readonly tokens = new Map<string, { hash: string; expires: number }>();
  private readonly transportCalls = new Map<string, { callId: string; expires: number }>();

  constructor(private readonly retentionMs = 24 * 3600_000) {}

  async create(record: CallRecord) {
    this.calls.set(record.id, memoryEntry(record));
    this.prune();
  }
  async get(id: string) {
    const e = this.calls.get(id);
    return e ? memoryRecord(e) : null;
  }
  async list(organizationId: string, limit: number) {
    return [...this.calls.values()]
      .filter((e) => headOf(e).organization_id === organizationId)
      .sort((a, b) => b.head.created_at.localeCompare(a.head.created_at))
      .slice(0, limit)
      .map(memoryRecord);
  }
  async save(record: CallRecord) {
    this.calls.set(record.id, memoryEntry(record));
  }
  async saveRunning(record: CallRecord, engine: () => Record<string, unknown>) {
    if (record.status === 'ended') return this.save({ ...record, engine: engine() });
    this.calls.set(record.id, { head: entryHead(record), json: null, running: { record, engine } });
  }
  async saveIf(record: CallRecord, expected: CallStatus) {
    const e = this.calls.get(record.id);
    if (!e || headOf(e).status !== expected) return false;
    this.calls.set(record.id, memoryEntry(record));
    return true;
  }
  async putStreamToken(callId: string, token: string, ttlSeconds: number) {
    this.tokens.set(callId, { hash: tokenHash(token), expires: Date.now() + ttlSeconds * 1000 });
  }
  async consumeStreamToken(callId: string, token: string) {
    const t = this.tokens.get(callId);
    // a wrong guess does not burn the real token
    if (!t || t.expires <= Date.now() || t.hash !== tokenHash(token)) return false;
    this.tokens.delete(callId);
    return true;
  }
  async claimTransportCall(key: string, callId: string, ttlSeconds: number) {
    const now = Date.now();
    const taken = this.transportCalls.get(key);
    if (taken && taken.expires > now) return taken.callId;
    this.transportCalls.set(key, { callId, expires: now + ttlSeconds * 1000 });
    return null;
  }
  async heartbeat(workerId: string, callIds: string[]) {
    const now = new Date().toISOString();
    for (const id of callIds) {
      const e = this.calls.get(id);
      if (e && e.head.worker_id === workerId) e.head.heartbeat_at = now;
    }
  }
  async lastHeartbeat(callId: string) {
    return this.calls.get(callId)?.head.heartbeat_at ?? null;
  }
  async findStale(staleMs: number) {
    const now = Date.now();
    return [...this.calls.values()].filter((e) => isStale(headOf(e), staleMs, now)).map(memoryRecord);
  }
  async claim(callId: string, workerId: string, staleMs: number) {
    const e = this.calls.get(callId);
    if (!e || !isStale(headOf(e), staleMs, Date.now())) return null;
    e.head.worker_id = workerId;
    e.head.heartbeat_at = new Date().toISOString();
    return memoryRecord(e);
  }
  async close() {
    this.calls.clear();
    this.tokens.clear();
    this.transportCalls.clear();
  }
  private prune() {
    const now = Date.now();
    for (const [key, t] of this.transportCalls) if (t.expires <= now) this.transportCalls.delete(key);
    const cutoff = now - this.retentionMs;
    for (const [id, e] of this.calls) {
      const head = headOf(e);
      if (head.status === 'ended' && head.ended_at && Date.parse(head.ended_at) < cutoff) this.calls.delete(id);
    }
  }
}

/**
 * Redis layout (prefix `sb:`): `call:<id>` the record as JSON; `calls:<org>` a sorted set of the
 * org's call ids by creation time; `calls:live` the live call ids; `call-token:<id>` the hash of
 * the one-time stream token, with a TTL; `call-transport:<carrier key>` the call that took a
 * carrier's call id (replays of its webhook make no other call).
 */
/** `saveIf` on Redis: the stored record's status is compared and the new one written in one step. */
const SAVE_IF_SCRIPT = `
local cur = redis.call('GET', KEYS[1])
if not cur then return 0 end
local ok, rec = pcall(cjson.decode, cur)
if not ok or type(rec) ~= 'table' or rec.status ~= ARGV[2] then return 0 end
if ARGV[3] == '1' then
  redis.call('SET', KEYS[1], ARGV[1], 'EX', tonumber(ARGV[4]))
  redis.call('SREM', KEYS[2], ARGV[5])
else
  redis.call('SET', KEYS[1], ARGV[1])
end
return 1`;

/**
 * Reads a call, lets `change` alter a copy (false: leave it as it is), and writes it only if no
 * one moved the call to another status meanwhile; on such a race it reads again and retries. The
 * new record, or null when there is no call or `change` declined.
 */
export async function transition(
  store: Pick<CallStore, 'get' | 'saveIf'>,
  callId: string,
  change: (record: CallRecord) => boolean,
): Promise<CallRecord | null> {
  for (let attempt = 0; attempt < 10; attempt++) {
    const record = await store.get(callId);
    if (!record) return null;
    const before = record.status;
    if (!change(record)) return null;
    if (await store.saveIf(record, before)) return record;
  }
  throw new Error(`call ${callId}: its record kept changing under this write`);
}

export class RedisCallStore implements CallStore {
  private readonly redis: Redis;

  constructor(
    redis: RedisSource,
    private readonly prefix = 'sb:',
    private readonly retentionSeconds = 24 * 3600,
  ) {
    this.redis = RedisConnections.open(redis, 'call-sessions', { maxRetriesPerRequest: 3, lazyConnect: false });
    this.redis.on('error', () => undefined);
  }

  private key(...parts: string[]) {
    return this.prefix + parts.join(':');
  }

  async create(record: CallRecord) {
    await this.redis
      .multi()
      .set(this.key('call', record.id), recordJson(kept(record)))
      .zadd(this.key('calls', record.organization_id), Date.parse(record.created_at), record.id)
      .sadd(this.key('calls', 'live'), record.id)
      .exec();
  }

  async get(id: string) {
    const json = await this.redis.get(this.key('call', id));
    return json ? (parseRecord(json)) : null;
  }

  async list(organizationId: string, limit: number) {
    const orgKey = this.key('calls', organizationId);
    // forget ids whose record expired
    const ids = await this.redis.zrevrange(orgKey, 0, limit * 2);
    if (ids.length === 0) return [];
    const values = await this.redis.mget(ids.map((id) => this.key('call', id)));
    const gone = ids.filter((_, i) => values[i] === null);
    if (gone.length > 0) await this.redis.zrem(orgKey, ...gone);
    return values
      .filter((v): v is string => v !== null)
      .map((v) => parseRecord(v))
      .slice(0, limit);
  }

  async save(record: CallRecord) {
    const m = this.redis.multi();
    if (record.status === 'ended') {
      m.set(this.key('call', record.id), recordJson(kept(record)), 'EX', this.retentionSeconds);
      m.srem(this.key('calls', 'live'), record.id);
    } else {
      m.set(this.key('call', record.id), recordJson(record));
    }
    await m.exec();
  }

  async saveRunning(record: CallRecord, engine: () => Record<string, unknown>) {
    record.engine = engine();
    await this.save(record);
  }

  async saveIf(record: CallRecord, expected: CallStatus) {
    const ended = record.status === 'ended';
    const saved = await this.redis.eval(
      SAVE_IF_SCRIPT,
      2,
      this.key('call', record.id),
      this.key('calls', 'live'),
      recordJson(ended ? kept(record) : record),
      expected,
      ended ? '1' : '0',
      String(this.retentionSeconds),
      record.id,
    );
    return saved === 1;
  }

  async putStreamToken(callId: string, token: string, ttlSeconds: number) {
    await this.redis.set(this.key('call-token', callId), tokenHash(token), 'EX', ttlSeconds);
  }

  async consumeStreamToken(callId: string, token: string) {
    // deleted only by the right token, atomically: a wrong guess does not burn the real one
    const taken = await this.redis.eval(
      "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end",
      1,
      this.key('call-token', callId),
      tokenHash(token),
    );
    return taken === 1;
  }

  async claimTransportCall(key: string, callId: string, ttlSeconds: number) {
    const k = this.key('call-transport', key);
    const taken = await this.redis.set(k, callId, 'EX', ttlSeconds, 'NX');
    if (taken === 'OK') return null;
    return (await this.redis.get(k)) ?? callId;
  }

  /**
   * Heartbeats live in their own keys (`call-hb:<id>`), never in the record: rewriting the record
   * here could undo a save made meanwhile by the call itself (its end, say).
   */
  async heartbeat(workerId: string, callIds: string[]) {
    if (callIds.length === 0) return;
    const now = new Date().toISOString();
    const m = this.redis.multi();
    for (const id of callIds) m.set(this.key('call-hb', id), `${now} ${workerId}`, 'EX', this.retentionSeconds);
    await m.exec();
  }

  lastHeartbeat(callId: string): Promise<string | null> {
    return this.heartbeatOf(callId);
  }

  private async heartbeatOf(id: string): Promise<string | null> {
    const value = await this.redis.get(this.key('call-hb', id));
    return value ? value.split(' ')[0]! : null;
  }

  async findStale(staleMs: number) {
    const ids = await this.redis.smembers(this.key('calls', 'live'));
    const now = Date.now();
    const out: CallRecord[] = [];
    for (const id of ids) {
      const r = await this.get(id);
      if (!r || r.status === 'ended') await this.redis.srem(this.key('calls', 'live'), id);
      else if (isStale(r, staleMs, now, await this.heartbeatOf(id))) out.push(r);
    }
    return out;
  }

  async claim(callId: string, workerId: string, staleMs: number) {
    // one claimer per call: a short lock key decides, then the record is re-checked
    const lock = await this.redis.set(this.key('call-claim', callId), workerId, 'PX', 60_000, 'NX');
    if (lock !== 'OK') return null;
    const r = await this.get(callId);
    if (!r || !isStale(r, staleMs, Date.now(), await this.heartbeatOf(callId))) return null;
    r.worker_id = workerId;
    r.heartbeat_at = new Date().toISOString();
    await this.redis.set(this.key('call', callId), recordJson(r));
    return r;
  }

  async close() {
    await this.redis.quit().catch(() => this.redis.disconnect());
  }
}

/** On Redis with the process's owner (or a URL), in process without. */
export function createCallStore(redis: RedisSource | null | undefined): CallStore {
  return redis ? new RedisCallStore(redis) : new MemoryCallStore();
}
