/**
 * The chat stores: kept 24 h after their last change (the in-process store on a clock the test
 * moves; Redis with a short TTL, when REDIS_URL is set), newest first per organization, one turn
 * at a time (the lock).
 */
import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { CHAT_TTL_SECONDS, MemoryChatStore, RedisChatStore, type ChatRecord, type ChatStore } from '../../src/chats/store.js';

const ORG = randomUUID();

function chat(createdAt: string, org = ORG): ChatRecord {
  return {
    id: randomUUID(),
    organization_id: org,
    status: 'active',
    assistant_id: randomUUID(),
    assistant: {},
    workflow_id: null,
    workflow_note: null,
    definition: null,
    engine: null,
    node_id: 'assistant',
    nodes_visited: ['assistant'],
    ended_reason: null,
    errors: [],
    variables: {},
    messages: [{ role: 'assistant', content: 'Hi.', node_id: 'assistant', time: createdAt }],
    created_at: createdAt,
    updated_at: createdAt,
  };
}

describe('MemoryChatStore', () => {
  it('keeps a chat 24 h after its last change, then forgets it', async () => {
    let now = Date.parse('2025-06-01T00:00:00Z');
    const store = new MemoryChatStore({ now: () => now });
    const a = chat(new Date(now).toISOString());
    await store.save(a);
    now += (CHAT_TTL_SECONDS - 60) * 1000;
    expect((await store.get(a.id))?.id).toBe(a.id);
    // a message 23 h 59 min in: another 24 h from here
    a.messages.push({ role: 'user', content: 'Still here', node_id: 'assistant', time: new Date(now).toISOString() });
    await store.save(a);
    now += (CHAT_TTL_SECONDS - 60) * 1000;
    expect((await store.get(a.id))?.messages).toHaveLength(2);
    now += 61_000;
    expect(await store.get(a.id)).toBeNull();
    expect(await store.list(ORG, 10)).toEqual([]);
  });

  it('lists an organization\'s chats newest first, copies out', async () => {
    const store = new MemoryChatStore();
    const old = chat('2025-06-01T00:00:00.000Z');
    const mid = chat('2025-06-01T00:00:01.000Z');
    const young = chat('2025-06-01T00:00:02.000Z');
    for (const c of [mid, young, old, chat('2025-06-01T00:00:03.000Z', randomUUID())]) await store.save(c);
    expect((await store.list(ORG, 10)).map((c) => c.id)).toEqual([young.id, mid.id, old.id]);
    expect((await store.list(ORG, 2)).map((c) => c.id)).toEqual([young.id, mid.id]);
    const got = (await store.get(old.id))!;
    got.messages = [];
    expect((await store.get(old.id))!.messages).toHaveLength(1);
  });

  it('one turn at a time: a lock is refused while held, lapses after its time, and is released', async () => {
    let now = 0;
    const store = new MemoryChatStore({ now: () => now });
    const release = await store.lock('c1', 1_000);
    expect(release).not.toBeNull();
    expect(await store.lock('c1', 1_000)).toBeNull();
    expect(await store.lock('c2', 1_000)).not.toBeNull();
    await release!();
    const again = await store.lock('c1', 1_000);
    expect(again).not.toBeNull();
    now += 1_001;
    const taken = await store.lock('c1', 1_000);
    expect(taken).not.toBeNull();
    // the lapsed holder's release does not free the new holder's lock
    await again!();
    expect(await store.lock('c1', 1_000)).toBeNull();
  });
});

describe.skipIf(!process.env.REDIS_URL)('RedisChatStore', () => {
  const stores: ChatStore[] = [];
  const prefixes = new Set<string>();
  /** A store under its own prefix, or `prefix` (two processes sharing one Redis). */
  const open = (ttlSeconds?: number, prefix = `sb:chat-test-${randomUUID()}:`) => {
    const s = new RedisChatStore(process.env.REDIS_URL!, { prefix, ...(ttlSeconds ? { ttlSeconds } : {}) });
    stores.push(s);
    prefixes.add(prefix);
    return s;
  };
  afterEach(async () => {
    for (const s of stores.splice(0)) await s.close();
    const { Redis } = await import('ioredis');
    const redis = new Redis(process.env.REDIS_URL!);
    for (const prefix of prefixes) {
      const keys = await redis.keys(`${prefix}*`);
      if (keys.length > 0) await redis.del(...keys);
    }
    prefixes.clear();
    redis.disconnect();
  });

  it('keeps a chat its TTL after its last save, then forgets it (and drops it from the list)', async () => {
    const store = open(1);
    const a = chat(new Date().toISOString());
    const b = chat(new Date(Date.now() + 1).toISOString());
    await store.save(a);
    await store.save(b);
    expect((await store.list(ORG, 10)).map((c) => c.id)).toEqual([b.id, a.id]);
    await new Promise((r) => setTimeout(r, 600));
    await store.save(b); // b changed: its second starts again
    await new Promise((r) => setTimeout(r, 600));
    expect(await store.get(a.id)).toBeNull();
    expect((await store.get(b.id))?.id).toBe(b.id);
    expect((await store.list(ORG, 10)).map((c) => c.id)).toEqual([b.id]);
    await new Promise((r) => setTimeout(r, 1_100));
    expect(await store.get(b.id)).toBeNull();
    expect(await store.list(ORG, 10)).toEqual([]);
  });

  it('the default TTL is 24 h, on the record and the list', async () => {
    const prefix = `sb:chat-test-${randomUUID()}:`;
    const store = open(undefined, prefix);
    const a = chat(new Date().toISOString());
    await store.save(a);
    const { Redis } = await import('ioredis');
    const redis = new Redis(process.env.REDIS_URL!);
    try {
      expect((await redis.keys(`${prefix}*`)).sort()).toEqual([`${prefix}org:${ORG}`, `${prefix}rec:${a.id}`]);
      for (const key of [`${prefix}rec:${a.id}`, `${prefix}org:${ORG}`]) {
        const ttl = await redis.ttl(key);
        expect(ttl).toBeGreaterThan(CHAT_TTL_SECONDS - 10);
        expect(ttl).toBeLessThanOrEqual(CHAT_TTL_SECONDS);
      }
    } finally {
      redis.disconnect();
    }
  });

  it('lists newest first past expired ids, a page at a time', async () => {
    const prefix = `sb:chat-test-${randomUUID()}:`;
    const store = open(1, prefix);
    const lasting = open(60, prefix);
    const base = Date.now();
    const kept = [chat(new Date(base).toISOString()), chat(new Date(base + 2).toISOString())];
    const gone = [chat(new Date(base + 1).toISOString()), chat(new Date(base + 3).toISOString())];
    // one TTL per deployment in practice: the list expires with its latest save, here a lasting one
    for (const c of gone) await store.save(c);
    for (const c of kept) await lasting.save(c);
    await new Promise((r) => setTimeout(r, 1_100));
    expect((await lasting.list(ORG, 1)).map((c) => c.id)).toEqual([kept[1]!.id]);
    expect((await lasting.list(ORG, 5)).map((c) => c.id)).toEqual([kept[1]!.id, kept[0]!.id]);
  });

  it('one turn at a time across processes: the lock is one key, released only by its holder', async () => {
    const prefix = `sb:chat-test-${randomUUID()}:`;
    const one = open(undefined, prefix);
    const two = open(undefined, prefix);
    const release = await one.lock('c1', 300);
    expect(release).not.toBeNull();
    expect(await two.lock('c1', 300)).toBeNull();
    await new Promise((r) => setTimeout(r, 350));
    const taken = await two.lock('c1', 5_000);
    expect(taken).not.toBeNull();
    await release!(); // lapsed: must not free two's lock
    expect(await one.lock('c1', 300)).toBeNull();
    await taken!();
    expect(await one.lock('c1', 300)).not.toBeNull();
  });
});
