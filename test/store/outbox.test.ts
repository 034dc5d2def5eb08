/**
 * The outbox (DECISIONS 22): writes the database does not take are kept, in order, and written
 * once it answers; with Redis down too they go to a file under DATA_DIR that the next start takes
 * over; past its bound a write is dropped and counted. The database here is a writer that fails
 * as a refused connection does while `down`; Redis is a private server the test stops.
 */
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logger.js';
import { Outbox, type OutboxEvent } from '../../src/store/outbox.js';
import { isOutage } from '../../src/store/outage.js';
import { startPrivateRedis, type PrivateRedis } from '../helpers/outages.js';

const silent = createLogger('silent');
const refused = () => Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });

function fakeDb() {
  const rows: string[] = [];
  const state = { down: false };
  return {
    rows,
    state,
    write: async (v: string) => {
      if (state.down) throw refused();
      rows.push(v);
    },
  };
}

async function waitFor(check: () => boolean, ms = 5_000) {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('isOutage', () => {
  it('tells a store that does not answer from one that refuses what was asked', () => {
    expect(isOutage(refused())).toBe(true);
    expect(isOutage(Object.assign(new Error('x'), { code: '57P01' }))).toBe(true);
    expect(isOutage(new Error('Connection terminated unexpectedly'))).toBe(true);
    expect(isOutage(Object.assign(new Error('Reached the max retries per request limit (which is 3).'), { name: 'MaxRetriesPerRequestError' }))).toBe(true);
    expect(isOutage(Object.assign(new Error('duplicate key'), { code: '23505' }))).toBe(false);
    expect(isOutage(new Error('boom'))).toBe(false);
    expect(isOutage(new Error('wrapped', { cause: refused() }))).toBe(true);
  });
});

describe('Outbox', () => {
  let redis: PrivateRedis;
  let dir: string;
  const open: Outbox[] = [];

  beforeAll(async () => {
    redis = await startPrivateRedis();
  });
  afterAll(async () => {
    await redis.stop();
  });
  afterEach(async () => {
    for (const o of open.splice(0)) await o.close().catch(() => undefined);
    if (dir) await rm(dir, { recursive: true, force: true });
    await redis.start().catch(() => undefined);
  });

  const outbox = async (o: { redisUrl?: string; maxEntries?: number; workerId?: string; events?: [OutboxEvent, string][] } = {}) => {
    dir ??= await mkdtemp(join(tmpdir(), 'sb-outbox-'));
    const box = new Outbox({
      logger: silent,
      workerId: o.workerId ?? `w-${Math.random().toString(36).slice(2)}`,
      redisUrl: o.redisUrl,
      dataDir: dir,
      flushEveryMs: 50,
      ...(o.maxEntries ? { maxEntries: o.maxEntries } : {}),
      onEvent: (e, k) => o.events?.push([e, k]),
    });
    open.push(box);
    return box;
  };

  it('writes at once while the database answers; keeps writes in order while it does not; writes them when it is back', async () => {
    dir = await mkdtemp(join(tmpdir(), 'sb-outbox-'));
    const db = fakeDb();
    const events: [OutboxEvent, string][] = [];
    const box = await outbox({ redisUrl: redis.url, events });
    box.register('row', db.write);
    await box.start();
    expect(await box.submit('row', 'c1', 'a')).toBe('written');
    db.state.down = true;
    expect(await box.submit('row', 'c1', 'b')).toBe('deferred');
    // the database is back, but a write made now waits behind the kept one: the order holds
    db.state.down = false;
    expect(await box.submit('row', 'c1', 'c')).toBe('deferred');
    await waitFor(() => box.pending === 0);
    expect(db.rows).toEqual(['a', 'b', 'c']);
    expect(events.filter(([e]) => e === 'deferred')).toHaveLength(2);
    expect(events.filter(([e]) => e === 'written')).toHaveLength(2);
  });

  it('with Redis down too, keeps writes in a file under DATA_DIR that the next start takes over', async () => {
    dir = await mkdtemp(join(tmpdir(), 'sb-outbox-'));
    const db = fakeDb();
    await redis.stop();
    const first = await outbox({ redisUrl: redis.url });
    first.register('row', db.write);
    await first.start();
    db.state.down = true;
    for (const v of ['x', 'y', 'z']) expect(await first.submit('row', 'c2', v)).toBe('deferred');
    expect((await readdir(join(dir, 'outbox'))).length).toBe(1);
    // the process stops while the database is still down: the file stays
    await first.close();
    open.splice(open.indexOf(first), 1);
    expect(db.rows).toEqual([]);

    await redis.start();
    db.state.down = false;
    const next = await outbox({ redisUrl: redis.url });
    next.register('row', db.write);
    await next.start();
    await waitFor(() => db.rows.length === 3);
    expect(db.rows).toEqual(['x', 'y', 'z']);
    await waitFor(() => next.pending === 0);
  });

  it('a list left in Redis by a stopped process is taken over once its alive key is gone', async () => {
    dir = await mkdtemp(join(tmpdir(), 'sb-outbox-'));
    const db = fakeDb();
    const first = await outbox({ redisUrl: redis.url, workerId: 'w-gone' });
    first.register('row', db.write);
    await first.start();
    db.state.down = true;
    await first.submit('row', 'c3', 'p');
    await first.submit('row', 'c3', 'q');
    // a crash: no close, the alive key expires; its connection goes with the process (left open,
    // it would retry the private Redis after this file stops it, in whatever runs next in this worker)
    (first as unknown as { timer: NodeJS.Timeout }).timer && clearInterval((first as unknown as { timer: NodeJS.Timeout }).timer);
    (first as unknown as { redis: { disconnect(): void } }).redis.disconnect();
    open.splice(open.indexOf(first), 1);
    const { Redis } = await import('ioredis');
    const r = new Redis(redis.url);
    expect(await r.llen('sb:outbox:w-gone')).toBe(2);
    await r.del('sb:outbox-alive:w-gone');
    r.disconnect();
    db.state.down = false;
    const next = await outbox({ redisUrl: redis.url });
    next.register('row', db.write);
    await next.start();
    await waitFor(() => db.rows.length === 2);
    expect(db.rows).toEqual(['p', 'q']);
  });

  it('is bounded: past maxEntries a write is dropped and counted', async () => {
    dir = await mkdtemp(join(tmpdir(), 'sb-outbox-'));
    const db = fakeDb();
    const events: [OutboxEvent, string][] = [];
    const box = await outbox({ maxEntries: 2, events });
    box.register('row', db.write);
    await box.start();
    db.state.down = true;
    for (const v of ['1', '2', '3']) await box.submit('row', 'c4', v);
    expect(box.pending).toBe(2);
    expect(events.filter(([e]) => e === 'dropped')).toHaveLength(1);
    db.state.down = false;
    await waitFor(() => db.rows.length === 2);
    expect(db.rows).toEqual(['1', '2']);
  });

  it('a write that fails for another reason than an outage is thrown, not kept', async () => {
    dir = await mkdtemp(join(tmpdir(), 'sb-outbox-'));
    const box = await outbox();
    box.register('row', async () => {
      throw new Error('bad data');
    });
    await box.start();
    await expect(box.submit('row', 'c5', 'v')).rejects.toThrow('bad data');
    expect(box.pending).toBe(0);
  });
});
