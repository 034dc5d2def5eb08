/**
 * Chat records: what one text chat is (snapshots of its assistant and workflow, the engine's saved
 * state, its messages). Kept CHAT_TTL (24 h) after their last change, like call sessions: in Redis
 * when REDIS_URL is set (keys under `sb:chat:`), in process otherwise. A chat is changed by one
 * request at a time: `lock` takes it for the length of a turn.
 */
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { RedisConnections, type RedisSource } from '../redis.js';
import type { VariableValue } from '../../engine/variables.js';
import { readCallErrors, type CallError } from '../errors.js';

/** A stored chat; `errors` written before entries had codes read as `UNKNOWN` entries. */
function parseChat(json: string): ChatRecord {
  const record = JSON.parse(json) as ChatRecord;
  record.errors = readCallErrors(record.errors);
  return record;
}

export type ChatStatus = 'active' | 'ended';

export interface ChatMessage {
  role: 'assistant' | 'user' | 'tool';
  content: string;
  node_id: string | null;
  /** ISO 8601 UTC. */
  time: string;
  /** `tool` messages: the tool that answered (a tool node's or one of the assistant's tools). */
  tool_name?: string;
}

export interface ChatRecord {
  id: string;
  /** `test_chat`: a test suite's chat (docs/test-suites.md); absent (records made before types) is `chat`. */
  type?: 'chat' | 'test_chat';
  organization_id: string;
  status: ChatStatus;
  assistant_id: string;
  /** The effective assistant as the chat started (later edits apply to the next chat). */
  assistant: Record<string, unknown>;
  workflow_id: string | null;
  /** Why no workflow runs although one was named (inactive). */
  workflow_note: string | null;
  definition: Record<string, unknown> | null;
  /** The engine's saved state (`SessionSnapshot`). */
  engine: Record<string, unknown> | null;
  node_id: string | null;
  nodes_visited: string[];
  ended_reason: string | null;
  /** What went wrong (`src/errors.ts`), as a call's. */
  errors: CallError[];
  /** As given at the start; substituted into the assistant and definition at each turn (docs/variables.md). */
  variables: Record<string, VariableValue>;
  messages: ChatMessage[];
  created_at: string;
  updated_at: string;
}

/** How long a chat is kept after its last change. */
export const CHAT_TTL_SECONDS = 24 * 3600;

export interface ChatStore {
  /** Writes the whole record (a new one or a change); it is kept `CHAT_TTL_SECONDS` from now. */
  save(record: ChatRecord): Promise<void>;
  get(id: string): Promise<ChatRecord | null>;
  /** The organization's chats, newest first (by `created_at`). */
  list(organizationId: string, limit: number): Promise<ChatRecord[]>;
  /**
   * Takes the chat for one turn: a release function, or `null` when another request holds it.
   * The lock lapses by itself after `ttlMs` (a process that died while holding it).
   */
  lock(id: string, ttlMs: number): Promise<(() => Promise<void>) | null>;
  close(): Promise<void>;
}

export interface MemoryChatStoreOptions {
  ttlSeconds?: number;
  /** The clock (ms since the epoch); tests move it to see chats expire. */
  now?: () => number;
}

export class MemoryChatStore implements ChatStore {
  private readonly chats = new Map<string, { record: ChatRecord; expires: number }>();
  private readonly locks = new Map<string, number>();
  private readonly ttlMs: number;
  private readonly now: () => number;

  constructor(options: MemoryChatStoreOptions = {}) {
    this.ttlMs = (options.ttlSeconds ?? CHAT_TTL_SECONDS) * 1000;
    this.now = options.now ?? Date.now;
  }

  async save(record: ChatRecord) {
    this.prune();
    this.chats.set(record.id, { record: structuredClone(record), expires: this.now() + this.ttlMs });
  }

  async get(id: string) {
    const entry = this.chats.get(id);
    if (!entry) return null;
    if (entry.expires <= this.now()) {
      this.chats.delete(id);
      return null;
    }
    return structuredClone(entry.record);
  }

  async list(organizationId: string, limit: number) {
    this.prune();
    return [...this.chats.values()]
      .map((e) => e.record)
      .filter((r) => r.organization_id === organizationId)
      .sort((a, b) => b.created_at.localeCompare(a.created_at) || b.id.localeCompare(a.id))
      .slice(0, limit)
      .map((r) => structuredClone(r));
  }

  async lock(id: string, ttlMs: number) {
    const now = this.now();
    const held = this.locks.get(id);
    if (held !== undefined && held > now) return null;
    const until = now + ttlMs;
    this.locks.set(id, until);
    return async () => {
      if (this.locks.get(id) === until) this.locks.delete(id);
    };
  }

  async close() {
    this.chats.clear();
    this.locks.clear();
  }

  private prune() {
    const now = this.now();
    for (const [id, e] of this.chats) if (e.expires <= now) this.chats.delete(id);
    for (const [id, until] of this.locks) if (until <= now) this.locks.delete(id);
  }
}

/**
 * Redis layout (prefix `sb:chat:`): `rec:<id>` the record as JSON, expiring `ttlSeconds` after its
 * last save; `org:<org>` a sorted set of the organization's chat ids by creation time (ids whose
 * record expired are dropped as lists meet them; the set itself expires with its newest chat);
 * `lock:<id>` the turn under way, with its own short expiry.
 */
export class RedisChatStore implements ChatStore {
  private readonly redis: Redis;

  constructor(
    redis: RedisSource,
    private readonly options: { prefix?: string; ttlSeconds?: number } = {},
  ) {
    this.redis = RedisConnections.open(redis, 'chats', { maxRetriesPerRequest: 3, lazyConnect: false });
    this.redis.on('error', () => undefined);
  }

  private key(...parts: string[]) {
    return (this.options.prefix ?? 'sb:chat:') + parts.join(':');
  }

  private get ttl() {
    return this.options.ttlSeconds ?? CHAT_TTL_SECONDS;
  }

  async save(record: ChatRecord) {
    const orgKey = this.key('org', record.organization_id);
    await this.redis
      .multi()
      .set(this.key('rec', record.id), JSON.stringify(record), 'EX', this.ttl)
      .zadd(orgKey, Date.parse(record.created_at), record.id)
      .expire(orgKey, this.ttl)
      .exec();
  }

  async get(id: string) {
    const json = await this.redis.get(this.key('rec', id));
    return json ? (parseChat(json)) : null;
  }

  async list(organizationId: string, limit: number) {
    const orgKey = this.key('org', organizationId);
    const out: ChatRecord[] = [];
    // ids whose record expired are dropped on the way; read on until the page is full
    for (let start = 0; out.length < limit; ) {
      const ids = await this.redis.zrevrange(orgKey, start, start + limit - 1);
      if (ids.length === 0) break;
      const values = await this.redis.mget(ids.map((id) => this.key('rec', id)));
      const gone = ids.filter((_, i) => values[i] === null);
      if (gone.length > 0) await this.redis.zrem(orgKey, ...gone);
      for (const v of values) if (v !== null && out.length < limit) out.push(parseChat(v));
      start += ids.length - gone.length;
    }
    return out;
  }

  async lock(id: string, ttlMs: number) {
    const key = this.key('lock', id);
    const token = randomBytes(12).toString('base64url');
    const taken = await this.redis.set(key, token, 'PX', ttlMs, 'NX');
    if (taken !== 'OK') return null;
    return async () => {
      // only our own lock: one that lapsed and was taken by another request stays
      await this.redis
        .eval("if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end", 1, key, token)
        .catch(() => undefined);
    };
  }

  async close() {
    await this.redis.quit().catch(() => this.redis.disconnect());
  }
}

/** On Redis with the process's owner (or a URL), in process without. */
export function createChatStore(redis: RedisSource | null | undefined): ChatStore {
  return redis ? new RedisChatStore(redis) : new MemoryChatStore();
}
