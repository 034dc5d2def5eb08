/**
 * Call control across a Redis restart (DECISIONS 16: never silently lost): a word sent while the
 * subscriber reconnects reaches the process that runs the call; one Redis does not take fails the
 * sender (the API answers 503). A private redis-server without persistence, restarted by the test.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logger.js';
import { RedisCallControl, type CallControlMessage } from '../../src/calls/control.js';
import { isOutage } from '../../src/store/outage.js';
import { startPrivateRedis, type PrivateRedis } from '../helpers/outages.js';

const silent = createLogger('silent');

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
    await runner.subscribe((id, m) => got.push([id, m]), () => ['call-a']);
    await other.subscribe((id) => otherGot.push(id), () => ['call-b']);
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
    await runner.subscribe((_id, m) => got.push(m), () => ['call-r']);
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
});
