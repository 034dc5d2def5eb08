/**
 * The Redis owner (src/redis.ts) on a real Redis: it knows every connection it made (BullMQ's
 * worker duplicates included), and after `close()` none of them is left, by its own account and
 * by Redis's CLIENT LIST.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { RedisConnections } from '../src/redis.js';
import { createQueues } from '../src/queue/index.js';
import { loadConfig } from '../src/config.js';
import { createRuntime } from '../src/runtime.js';
import { createStore } from '../src/store/index.js';
import { createTestDb } from './helpers/db.js';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const silent = pino({ level: 'silent' });

/** The client ports Redis sees now. */
async function clientPorts(probe: Redis): Promise<Set<number>> {
  const list = (await probe.client('LIST')) as string;
  return new Set(list.split('\n').map((line) => Number(/ addr=[^ ]*:(\d+) /.exec(` ${line}`)?.[1])).filter((p) => p > 0));
}

const localPort = (client: Redis): number | undefined => (client as unknown as { stream?: { localPort?: number } }).stream?.localPort;

describe('Redis owner', () => {
  it('closes every connection it opened, BullMQ worker duplicates included: none is left in CLIENT LIST', async () => {
    const probe = new Redis(REDIS_URL);
    const redis = new RedisConnections(REDIS_URL, silent);
    const name = `owner-${randomUUID()}`;
    try {
      const sessions = redis.open('call-sessions', { maxRetriesPerRequest: 3 });
      const sub = redis.open('call-control:sub');
      await sessions.set(`sbtest:${name}`, '1', 'EX', 60);
      await sub.subscribe(`sbtest:${name}`);
      const queue = createQueues({ redis }).create<{ n: number }>({ name, prefix: 'sbtest', logger: silent, handler: async () => 'done' });
      await queue.start();
      await queue.add({ id: 'one', data: { n: 1 } });
      const named = redis.connections().map((c) => c.name);
      expect(named).toEqual(expect.arrayContaining(['call-sessions', 'call-control:sub', `queue:${name}`, `queue:${name}:queue`, `queue:${name}:worker`]));
      // the worker's blocking connection is a duplicate the owner made and knows
      expect(named.filter((n) => n.startsWith(`queue:${name}:worker#`)).length).toBeGreaterThanOrEqual(1);
      // every owned connection is one Redis sees
      const owned = (redis as unknown as { owned: { client: Redis }[] }).owned.map(({ client }) => client);
      await Promise.all(owned.map((c) => (c.status === 'ready' ? Promise.resolve() : new Promise((r) => c.once('ready', r)))));
      const ports = owned.map(localPort).filter((p): p is number => p !== undefined);
      expect(ports).toHaveLength(owned.length);
      const seen = await clientPorts(probe);
      for (const port of ports) expect(seen.has(port)).toBe(true);
      expect(redis.openCount).toBe(owned.length);

      await queue.obliterate();
      await queue.close();
      await redis.close();
      expect(redis.openCount).toBe(0);
      expect(redis.connections().every((c) => c.status === 'end')).toBe(true);
      // Redis drops a client as its socket closes: look until it has
      const end = Date.now() + 3_000;
      let left = ports.filter((p) => seen.has(p));
      while (left.length > 0 && Date.now() < end) {
        const now = await clientPorts(probe);
        left = ports.filter((p) => now.has(p));
        if (left.length > 0) await new Promise((r) => setTimeout(r, 50));
      }
      expect(left).toEqual([]);
      expect(() => redis.open('late')).toThrow(/after shutdown/);
    } finally {
      await redis.close();
      await probe.del(`sbtest:${name}`);
      probe.disconnect();
    }
  });

  it('names its connections in CLIENT LIST', async () => {
    const redis = new RedisConnections(REDIS_URL, silent);
    const probe = new Redis(REDIS_URL);
    try {
      const tag = `test-${randomUUID().slice(0, 8)}`;
      await redis.open(tag).ping();
      expect((await probe.client('LIST')) as string).toContain(`name=switchboard:${tag} `);
    } finally {
      await redis.close();
      probe.disconnect();
    }
  });

  it('a runtime on Redis opens every connection through its owner, and none is left after close()', async () => {
    const testDb = await createTestDb('pglite');
    const probe = new Redis(REDIS_URL);
    const id = randomUUID();
    try {
      // every ioredis client that connects in this process while the runtime starts
      const made: Redis[] = [];
      const connect = Redis.prototype.connect;
      Redis.prototype.connect = function (this: Redis, ...args: Parameters<Redis['connect']>) {
        made.push(this);
        return connect.apply(this, args);
      };
      let runtime: Awaited<ReturnType<typeof createRuntime>>;
      try {
        runtime = await createRuntime({
          config: loadConfig({ LOG_LEVEL: 'silent', REDIS_URL, SMTP_URL: 'smtp://127.0.0.1:1', SMTP_FROM: 'calls@example.com' }),
          store: createStore(testDb.db),
          logger: silent,
          webhookQueueName: `owner-webhooks-${id}`,
          dialQueueName: `owner-dial-${id}`,
          emails: { queueName: `owner-emails-${id}` },
        });
      } finally {
        Redis.prototype.connect = connect;
      }
      const redis = runtime.redis!;
      expect(runtime.queues.backend).toBe('redis');
      expect(runtime.queues.redis).toBe(redis);
      const names = redis.connections().map((c) => c.name);
      expect(names).toEqual(
        expect.arrayContaining([
          'outbox',
          `queue:owner-webhooks-${id}`,
          `queue:owner-emails-${id}`,
          'call-sessions',
          'call-control',
          'listen-in',
          'listen-in:subscriber',
          `dialer:owner-dial-${id}`,
        ]),
      );
      // the workers' blocking connections are the owner's too
      for (const q of [`queue:owner-webhooks-${id}`, `queue:owner-emails-${id}`, `dialer:owner-dial-${id}`]) {
        expect(names).toContain(`${q}:queue`);
        expect(names.some((n) => n.startsWith(`${q}:worker#`))).toBe(true);
      }
      // every Redis client this process made while the runtime started is one the owner knows
      expect(made.length).toBeGreaterThan(0);
      const owned = (redis as unknown as { owned: { client: Redis }[] }).owned.map(({ client }) => client);
      for (const client of made) expect(owned).toContain(client);
      await Promise.all(owned.map((c) => (c.status === 'ready' ? Promise.resolve() : new Promise((r) => c.once('ready', r)))));
      const opened = owned.map(localPort).filter((p): p is number => p !== undefined);
      expect(opened).toHaveLength(owned.length);

      await runtime.close();
      expect(redis.openCount).toBe(0);
      const end = Date.now() + 3_000;
      let left = opened;
      while (left.length > 0 && Date.now() < end) {
        const now = await clientPorts(probe);
        left = opened.filter((p) => now.has(p));
        if (left.length > 0) await new Promise((r) => setTimeout(r, 50));
      }
      expect(left).toEqual([]);
    } finally {
      for (const pattern of [`bull:owner-*-${id}*`]) {
        const keys = await probe.keys(pattern);
        if (keys.length > 0) await probe.del(...keys);
      }
      probe.disconnect();
      await testDb.drop();
    }
  });
});
