/**
 * The BullMQ delivery queue on a real Redis (REDIS_URL, else redis://127.0.0.1:6379; skipped only
 * when neither is reachable). Each test has its own queue name and cleans it up. Redis keeps real
 * time, so the retry schedule is shortened here; the full schedule is tested on the in-process
 * queue with a fake clock (both share NotificationSender).
 */
import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { verifyWebhook } from '../../src/index.js';
import { statusUpdateMessage } from '../../src/webhooks/envelope.js';
import { WebhookHttpClient } from '../../src/webhooks/http.js';
import { createNotification, type Notification } from '../../src/webhooks/notify.js';
import { BullMqDeliveryQueue } from '../../src/webhooks/queue-bullmq.js';
import { createDeliveryQueue } from '../../src/webhooks/service.js';
import { generateWebhookSecret } from '../../src/webhooks/secrets.js';
import type { DeliveryAttemptRecord } from '../../src/store/deliveries.js';
import { startReceiver, type Receiver, type RecordedRequest } from '../helpers/receiver.js';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';

async function redisReachable(): Promise<boolean> {
  if (process.env.REDIS_URL) return true;
  const probe = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null, connectTimeout: 1_000 });
  probe.on('error', () => undefined);
  try {
    await probe.connect();
    return (await probe.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    probe.disconnect();
  }
}

const reachable = await redisReachable();
const silent = pino({ level: 'silent' });
const secret = generateWebhookSecret();
const orgId = randomUUID();
const SHORT_SCHEDULE = [0, 300, 600, 900, 1_200, 1_500, 1_800, 2_100, 2_400];

function message(callId: string, url: string, seq: number): Notification {
  const body = statusUpdateMessage(
    {
      call: { id: callId, type: 'inbound_phone_call', status: 'in-progress' },
      phone_number: { number: '+14155550100', name: 'Line' },
      customer: { number: '+14155550199' },
    },
    { status: 'in-progress' },
  );
  (body.message as unknown as { seq: number }).seq = seq;
  return createNotification({ organizationId: orgId, callId, target: { url, secret }, body });
}
const parsed = (r: RecordedRequest) => (JSON.parse(r.body) as { message: { seq: number; call: { id: string } } }).message;

async function waitFor(check: () => boolean, timeoutMs = 10_000, what = 'condition') {
  const end = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Per call: the distinct sequence numbers in arrival order (duplicates of one message allowed). */
function deliveredOrder(requests: RecordedRequest[], callId: string, okOnly: Set<RecordedRequest>) {
  const seqs = requests.filter((r) => okOnly.has(r) && parsed(r).call.id === callId).map((r) => parsed(r).seq);
  return seqs.filter((s, i) => i === 0 || s !== seqs[i - 1]);
}

describe.skipIf(!reachable)('BullMQ delivery queue (Redis)', () => {
  let receiver: Receiver;
  let http: WebhookHttpClient;
  const open: BullMqDeliveryQueue[] = [];
  const names = new Set<string>();
  let records: DeliveryAttemptRecord[] = [];
  /** Requests the receiver answered with a 2xx. */
  const delivered = new Set<RecordedRequest>();
  let failNext = 0;

  const newQueue = (queueName: string, extra: Partial<ConstructorParameters<typeof BullMqDeliveryQueue>[0]> = {}) => {
    const q = new BullMqDeliveryQueue({
      redisUrl: REDIS_URL,
      queueName,
      prefix: 'sbtest',
      http,
      logger: silent,
      recorder: { record: async (r) => void records.push(r) },
      retryScheduleMs: SHORT_SCHEDULE,
      timeoutMs: 2_000,
      ...extra,
    });
    open.push(q);
    names.add(queueName);
    return q;
  };

  beforeAll(async () => {
    receiver = await startReceiver({
      default: (req) => {
        if (failNext > 0) {
          failNext -= 1;
          return { status: 503 };
        }
        delivered.add(req);
        return { status: 200 };
      },
    });
    http = new WebhookHttpClient({ allowPrivate: true });
  });
  afterEach(async () => {
    // every other instance stops first, so nothing writes to the queue while the last one (never
    // closed by a test) cleans it
    const cleaner = open.pop();
    const others = open.splice(0);
    for (const q of others) await q.close();
    if (cleaner) {
      await cleaner.obliterate();
      await cleaner.close();
    }
    receiver.requests.length = 0;
    delivered.clear();
    records = [];
    failNext = 0;
  });
  afterAll(async () => {
    await http.close();
    await receiver.close();
    // belt and braces: a key a closing worker wrote after its queue was obliterated
    const redis = new Redis(REDIS_URL);
    try {
      for (const name of names) {
        const keys = await redis.keys(`sbtest:${name}:*`);
        if (keys.length > 0) await redis.del(...keys);
      }
    } finally {
      redis.disconnect();
    }
  });

  it('createDeliveryQueue picks BullMQ when REDIS_URL is set', async () => {
    const q = createDeliveryQueue({ REDIS_URL }, { http, logger: silent, queueName: `sb-${randomUUID()}` });
    expect(q).toBeInstanceOf(BullMqDeliveryQueue);
    open.push(q as BullMqDeliveryQueue);
  });

  it('delivers in order per call; 503 then 200 keeps the X-Webhook-Id with a new timestamp', async () => {
    const q = newQueue(`sb-${randomUUID()}`);
    await q.start();
    failNext = 1;
    const a = randomUUID();
    const b = randomUUID();
    const sent = [message(a, receiver.url, 1), message(b, receiver.url, 1), message(a, receiver.url, 2), message(a, receiver.url, 3), message(b, receiver.url, 2)];
    for (const n of sent) await q.enqueue(n);
    await waitFor(() => delivered.size >= 5, 10_000, 'five deliveries');
    expect(deliveredOrder(receiver.requests, a, delivered)).toEqual([1, 2, 3]);
    expect(deliveredOrder(receiver.requests, b, delivered)).toEqual([1, 2]);
    const failed = receiver.requests.find((r) => !delivered.has(r))!;
    const retry = receiver.requests.find((r) => delivered.has(r) && r.headers['x-webhook-id'] === failed.headers['x-webhook-id'])!;
    expect(retry).toBeDefined();
    expect(retry.body).toBe(failed.body);
    expect(Number(retry.headers['x-webhook-timestamp'])).toBeGreaterThanOrEqual(Number(failed.headers['x-webhook-timestamp']));
    expect(verifyWebhook(retry.body, retry.headers, secret).id).toBe(failed.headers['x-webhook-id']);
    const forFailed = records.filter((r) => r.message_id === failed.headers['x-webhook-id']);
    expect(forFailed.map((r) => [r.attempt, r.outcome, r.status_code])).toEqual([
      [1, 'retrying', 503],
      [2, 'delivered', 200],
    ]);
  });

  it('a later message of a call waits while an earlier one is retried', async () => {
    const q = newQueue(`sb-${randomUUID()}`);
    await q.start();
    failNext = 3;
    const a = randomUUID();
    await q.enqueue(message(a, receiver.url, 1));
    await q.enqueue(message(a, receiver.url, 2));
    await waitFor(() => delivered.size >= 2, 10_000, 'two deliveries');
    // the first three requests were all message 1 (failing); message 2 came only after it
    expect(receiver.requests.map((r) => parsed(r).seq)).toEqual([1, 1, 1, 1, 2]);
  });

  it('a 410 is final and the chain goes on', async () => {
    const q = newQueue(`sb-${randomUUID()}`);
    await q.start();
    receiver.script({ status: 410 });
    const a = randomUUID();
    await q.enqueue(message(a, receiver.url, 1));
    await q.enqueue(message(a, receiver.url, 2));
    await waitFor(() => delivered.size >= 1, 10_000, 'one delivery');
    expect(receiver.requests.map((r) => parsed(r).seq)).toEqual([1, 2]);
    expect(records.map((r) => r.outcome)).toEqual(['failed', 'delivered']);
  });

  it('survives a restart in the middle of a retry schedule: nothing lost, same ids', async () => {
    const name = `sb-${randomUUID()}`;
    const first = newQueue(name, { retryScheduleMs: [0, 1_500, 1_500, 1_500, 1_500, 1_500, 1_500, 1_500, 1_500] });
    await first.start();
    failNext = 1_000; // down
    const calls = [randomUUID(), randomUUID()];
    const sent: Notification[] = [];
    for (let seq = 1; seq <= 3; seq++) {
      for (const c of calls) {
        const n = message(c, receiver.url, seq);
        sent.push(n);
        await first.enqueue(n);
      }
    }
    // both chains made their first attempt and now wait in BullMQ's delayed set
    await waitFor(() => receiver.requests.length >= 2, 5_000, 'first attempts');
    await first.close();
    const attemptsBefore = receiver.requests.length;
    expect(delivered.size).toBe(0);

    failNext = 0; // up again
    const second = newQueue(name, { retryScheduleMs: [0, 200, 200, 200, 200, 200, 200, 200, 200] });
    await second.start();
    await waitFor(() => new Set([...delivered].map((r) => r.headers['x-webhook-id'])).size >= sent.length, 15_000, 'every message');
    expect(receiver.requests.length).toBeGreaterThan(attemptsBefore);
    for (const c of calls) expect(deliveredOrder(receiver.requests, c, delivered)).toEqual([1, 2, 3]);
    // the retries after the restart kept each message's id
    const ids = new Set([...delivered].map((r) => r.headers['x-webhook-id']));
    expect(ids).toEqual(new Set(sent.map((n) => n.id)));
  });

  it('re-adds the job of a chain whose job was lost (a crash between RPUSH and the job add)', async () => {
    const name = `sb-${randomUUID()}`;
    const callId = randomUUID();
    const n = message(callId, receiver.url, 1);
    const redis = new Redis(REDIS_URL);
    try {
      const base = `sbtest:${name}:sb`;
      await redis.rpush(`${base}:chain:${callId}`, JSON.stringify(n));
      await redis.set(`${base}:owner:${callId}`, n.id);
    } finally {
      redis.disconnect();
    }
    const q = newQueue(name);
    await q.start();
    await waitFor(() => delivered.size >= 1, 10_000, 'the orphan delivered');
    expect(receiver.requests[0]!.headers['x-webhook-id']).toBe(n.id);
  });

  it('two processes on one queue keep per-call order', async () => {
    const name = `sb-${randomUUID()}`;
    const p1 = newQueue(name, { concurrency: 4 });
    const p2 = newQueue(name, { concurrency: 4 });
    await p1.start();
    await p2.start();
    let i = 0;
    receiver.setDefault((req) => {
      const fail = i++ % 4 === 0;
      if (!fail) delivered.add(req);
      return { status: fail ? 500 : 200, delayMs: Math.floor(Math.random() * 20) };
    });
    try {
      const calls = Array.from({ length: 6 }, () => randomUUID());
      for (let seq = 1; seq <= 5; seq++) {
        for (const [k, c] of calls.entries()) await (k % 2 === 0 ? p1 : p2).enqueue(message(c, receiver.url, seq));
      }
      await waitFor(() => new Set([...delivered].map((r) => r.headers['x-webhook-id'])).size >= 30, 20_000, '30 messages');
      for (const c of calls) expect(deliveredOrder(receiver.requests, c, delivered)).toEqual([1, 2, 3, 4, 5]);
    } finally {
      receiver.setDefault((req) => {
        if (failNext > 0) {
          failNext -= 1;
          return { status: 503 };
        }
        delivered.add(req);
        return { status: 200 };
      });
    }
  }, 30_000);
});
