/** One-time media-stream tokens, on the in-process store and on Redis. */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { MemoryCallStore, RedisCallStore, type CallStore } from '../../src/calls/store.js';

const redisUrl = process.env.REDIS_URL;
const prefix = `sb-test-${randomUUID()}:`;
const stores: [string, () => CallStore][] = [['in process', () => new MemoryCallStore()]];
if (redisUrl) stores.push(['Redis', () => new RedisCallStore(redisUrl, prefix)]);

afterAll(async () => {
  if (!redisUrl) return;
  const r = new Redis(redisUrl);
  const keys = await r.keys(`${prefix}*`);
  if (keys.length > 0) await r.del(...keys);
  await r.quit();
});

describe.each(stores)('stream tokens (%s)', (_name, make) => {
  it('are taken once, by the right token only; a wrong guess does not use them up', async () => {
    const store = make();
    try {
      const callId = randomUUID();
      await store.putStreamToken(callId, 'right-token', 60);
      expect(await store.consumeStreamToken(callId, 'wrong-token')).toBe(false);
      expect(await store.consumeStreamToken(randomUUID(), 'right-token')).toBe(false);
      expect(await store.consumeStreamToken(callId, 'right-token')).toBe(true);
      expect(await store.consumeStreamToken(callId, 'right-token')).toBe(false);
    } finally {
      await store.close();
    }
  });

  it('expire', async () => {
    const store = make();
    try {
      const callId = randomUUID();
      await store.putStreamToken(callId, 'token', 1);
      await new Promise((r) => setTimeout(r, 1_200));
      expect(await store.consumeStreamToken(callId, 'token')).toBe(false);
    } finally {
      await store.close();
    }
  });
});
