/**
 * Call control across a Redis restart (DECISIONS 16: never silently lost): a word sent while the
 * subscriber reconnects reaches the process that runs the call; one Redis does not take fails the
 * sender (the API answers 503). `deliver` (live controls, POST /calls/{id}/end): the sender gets
 * the reply of the process that runs the call; a word a restart lost before it was taken is sent
 * again; one taken before the restart is answered again, not applied twice; one nobody takes in
 * time is withdrawn and never applied. A private redis-server without persistence, restarted by
 * the test.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { createLogger } from '../../src/logger.js';
import { RedisCallControl, type CallControlMessage } from '../../src/calls/control.js';
import { isOutage } from '../../src/store/outage.js';
import { startPrivateRedis, type PrivateRedis } from '../helpers/outages.js';

const silent = createLogger('silent');
const applied = { kind: 'applied' } as const;

async function eventuallyAsync(check: () => Promise<boolean>, ms = 10_000) {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function waitFor(check: () => boolean, ms = 10_000) {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('RedisCallControl', () => {
  let redis: PrivateRedis;
  beforeAll(async () => {
    redis = await startPrivateRedis();
  });
  afterAll(async () => {
    await redis.stop();
  });

  it('delivers to the process that runs the call, and only to it', async () => {
    const runner = new RedisCallControl(redis.url, silent);
    const other = new RedisCallControl(redis.url, silent);
    const api = new RedisCallControl(redis.url, silent);
    const got: [string, CallControlMessage][] = [];
    const otherGot: string[] = [];
    await runner.subscribe((id, m) => (got.push([id, m]), applied), () => ['call-a']);
    await other.subscribe((id) => (otherGot.push(id), applied), () => ['call-b']);
    await api.send('call-a', { kind: 'end' });
    await api.send('call-a', { kind: 'answered-by', answeredBy: 'machine' });
    await waitFor(() => got.length === 2);
    expect(got).toEqual([
      ['call-a', { kind: 'end' }],
      ['call-a', { kind: 'answered-by', answeredBy: 'machine' }],
    ]);
    expect(otherGot).toEqual([]);
    await Promise.all([runner.close(), other.close(), api.close()]);
  });

  it('a word sent while Redis restarts (the subscription not yet back) is not lost', async () => {
    const runner = new RedisCallControl(redis.url, silent);
    const got: CallControlMessage[] = [];
    await runner.subscribe((_id, m) => (got.push(m), applied), () => ['call-r']);
    await redis.stop();
    // the subscriber's reconnection backs off meanwhile: Redis is back before its subscription is
    await new Promise((r) => setTimeout(r, 1_500));
    await redis.start();
    const api = new RedisCallControl(redis.url, silent);
    await api.send('call-r', { kind: 'end' });
    await waitFor(() => got.length === 1);
    expect(got).toEqual([{ kind: 'end' }]);
    await Promise.all([runner.close(), api.close()]);
  });

  it('a word Redis does not take fails the sender (an outage: 503), never a silent success', async () => {
    const api = new RedisCallControl(redis.url, silent);
    await api.send('call-x', { kind: 'end' }); // connected
    await redis.stop();
    const err = await api.send('call-x', { kind: 'end' }).then(() => null, (e: unknown) => e);
    expect(err).not.toBeNull();
    expect(isOutage(err)).toBe(true);
    await redis.start();
    await api.close();
  });

  it('deliver: the sender gets what the process that runs the call answered', async () => {
    const runner = new RedisCallControl(redis.url, silent);
    const api = new RedisCallControl(redis.url, silent);
    await runner.subscribe((_id, m) => {
      if (m.kind !== 'control') return applied;
      if (m.control.type === 'goto') return { kind: 'invalid', details: ['body.node_id: no such node'] };
      return { kind: 'not-live', message: 'the call is ending' };
    }, () => ['call-d']);
    expect(await api.deliver('call-d', { kind: 'end' })).toEqual(applied);
    expect(await api.deliver('call-d', { kind: 'control', control: { type: 'goto', node_id: 'x' } })).toEqual({ kind: 'invalid', details: ['body.node_id: no such node'] });
    expect(await api.deliver('call-d', { kind: 'control', control: { type: 'say', text: 'Hi' } })).toEqual({ kind: 'not-live', message: 'the call is ending' });
    await Promise.all([runner.close(), api.close()]);
  });

  it('deliver: a word nobody takes in time is withdrawn (not-taken), and never applied later', async () => {
    const api = new RedisCallControl(redis.url, silent, 'sb:', 600);
    const started = Date.now();
    expect(await api.deliver('call-n', { kind: 'end' })).toEqual({ kind: 'not-taken' });
    expect(Date.now() - started).toBeGreaterThanOrEqual(600);
    expect(Date.now() - started).toBeLessThan(2_000);
    // the process that runs the call comes now: the word is gone
    const runner = new RedisCallControl(redis.url, silent);
    const got: CallControlMessage[] = [];
    await runner.subscribe((_id, m) => (got.push(m), applied), () => ['call-n']);
    await new Promise((r) => setTimeout(r, 2_500)); // past a poll of its lists
    expect(got).toEqual([]);
    await Promise.all([runner.close(), api.close()]);
  });

  it('deliver: a Redis restart between the word and its delivery loses nothing (sent again), and the reply comes', async () => {
    const api = new RedisCallControl(redis.url, silent);
    let runs: string[] = [];
    const runner = new RedisCallControl(redis.url, silent);
    const got: CallControlMessage[] = [];
    // the call is not yet this process's when the word comes (it takes it once it runs it)
    await runner.subscribe((_id, m) => (got.push(m), applied), () => runs);
    const reply = api.deliver('call-x', { kind: 'control', control: { type: 'say', text: 'Hello' } });
    await new Promise((r) => setTimeout(r, 100));
    await redis.restart(); // the word is gone with everything else
    runs = ['call-x'];
    expect(await reply).toEqual(applied);
    expect(got).toEqual([{ kind: 'control', control: { type: 'say', text: 'Hello' }, word_id: expect.any(String) }]);
    await Promise.all([runner.close(), api.close()]);
  });

  it('deliver: a word taken before Redis lost its reply, sent again, is answered again and applied once', async () => {
    const runner = new RedisCallControl(redis.url, silent);
    let applications = 0;
    await runner.subscribe(() => (applications++, { kind: 'applied' }), () => ['call-t']);
    // what deliver writes: the word with its id, its pending key, a wake-up (src/calls/control.ts)
    const raw = new Redis(redis.url);
    const id = 'w-once';
    const word = JSON.stringify({ kind: 'end', word_id: id });
    const send = async () => {
      await raw.set(`sb:call-control-pending:${id}`, '1', 'PX', 5_000);
      await raw.rpush('sb:call-control:call-t', word);
      await raw.publish('sb:call-control', JSON.stringify({ callId: 'call-t' }));
    };
    await send();
    await waitFor(() => applications === 1);
    await eventuallyAsync(async () => (await raw.get(`sb:call-control-reply:${id}`)) === JSON.stringify(applied));
    // a restart lost the reply; the sender, seeing neither it nor the word, sends the word again
    await raw.del(`sb:call-control-reply:${id}`);
    await send();
    await eventuallyAsync(async () => (await raw.get(`sb:call-control-reply:${id}`)) === JSON.stringify(applied));
    expect(applications).toBe(1);
    raw.disconnect();
    await runner.close();
  });
});
