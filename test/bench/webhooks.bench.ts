/**
 * Webhook benchmark: `npm run bench:webhooks`.
 *  (a) signing a 10 kB body (HMAC-SHA256 over "<id>.<timestamp>.<body>"), µs per signature,
 *      with the key decoded once and with the secret decoded per call; all headers of a request;
 *  (b) signed deliveries per second to a local HTTP receiver through the in-process queue
 *      (every message signed, sent, answered 200, recorded in memory), and through the BullMQ
 *      queue when Redis is reachable (REDIS_URL or redis://127.0.0.1:6379).
 * Target (issue 6): signing under 20 µs for a 10 kB body.
 */
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { statusUpdateMessage } from '../../src/webhooks/envelope.js';
import { WebhookHttpClient } from '../../src/webhooks/http.js';
import { createNotification } from '../../src/webhooks/notify.js';
import { BullMqDeliveryQueue } from '../../src/webhooks/queue-bullmq.js';
import { InProcessDeliveryQueue, type DeliveryQueue } from '../../src/webhooks/queue.js';
import { generateWebhookSecret } from '../../src/webhooks/secrets.js';
import { newMessageId, signWebhook, webhookRequestHeaders, webhookSigningKey } from '../../src/webhooks/sign.js';

const secret = generateWebhookSecret();
const body10k = JSON.stringify({ message: { type: 'end-of-call-report', transcript: 'x'.repeat(10_000 - 60) } });

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

/** µs per call: median of `rounds` batches of `batch` calls. */
function timeIt(fn: () => void, batch = 2_000, rounds = 25): { median: number; p99: number } {
  for (let i = 0; i < batch * 2; i++) fn(); // warm up
  const perCall: number[] = [];
  for (let r = 0; r < rounds; r++) {
    const t0 = performance.now();
    for (let i = 0; i < batch; i++) fn();
    perCall.push(((performance.now() - t0) * 1000) / batch);
  }
  const sorted = [...perCall].sort((a, b) => a - b);
  return { median: median(perCall), p99: sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.99))]! };
}

const fmt = (x: number) => x.toFixed(2);

// ---------------------------------------------------------------------------------------------
// (a) signing

const key = webhookSigningKey(secret);
const id = newMessageId();
const ts = Math.floor(Date.now() / 1000);
const signKey = timeIt(() => signWebhook(key, id, ts, body10k));
const signSecret = timeIt(() => signWebhook(secret, id, ts, body10k));
const headers = timeIt(() => webhookRequestHeaders({ event: 'end-of-call-report', messageId: id, timestampSeconds: ts, body: body10k, secret }));
console.log(`body: ${Buffer.byteLength(body10k)} bytes`);
console.log(`sign (key decoded once)      median ${fmt(signKey.median)} µs  p99 ${fmt(signKey.p99)} µs`);
console.log(`sign (whsec_ secret)          median ${fmt(signSecret.median)} µs  p99 ${fmt(signSecret.p99)} µs`);
console.log(`all request headers (signed)  median ${fmt(headers.median)} µs  p99 ${fmt(headers.p99)} µs`);
console.log(`target < 20 µs: ${signSecret.median < 20 ? 'met' : 'NOT met'}`);

// ---------------------------------------------------------------------------------------------
// (b) deliveries per second

const server = createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    res.writeHead(200, { 'content-length': '0' });
    res.end();
    received += 1;
    if (received === expected) onAll?.();
  });
});
let received = 0;
let expected = 0;
let onAll: (() => void) | null = null;
await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
const logger = pino({ level: 'silent' });
const http = new WebhookHttpClient({ allowPrivate: true });
const recorder = { record: async () => undefined };

async function throughput(label: string, queue: DeliveryQueue, messages: number, calls: number) {
  await queue.start();
  received = 0;
  expected = messages;
  const done = new Promise<void>((r) => (onAll = r));
  const callIds = Array.from({ length: calls }, () => randomUUID());
  const t0 = performance.now();
  // calls queue their messages in parallel, each call in order (as live calls do)
  await Promise.all(
    callIds.map(async (callId) => {
      for (let i = 0; i < messages / calls; i++) {
        const body = statusUpdateMessage(
          {
            call: { id: callId, type: 'inbound_phone_call', status: 'in-progress' },
            phone_number: { number: '+14155550100', name: 'Bench' },
            customer: { number: '+14155550199' },
          },
          { status: 'in-progress' },
        );
        await queue.enqueue(createNotification({ organizationId: 'bench', callId, target: { url, secret }, body }));
      }
    }),
  );
  const queued = (performance.now() - t0) / 1000;
  await done;
  const seconds = (performance.now() - t0) / 1000;
  console.log(
    `${label}: ${messages} messages over ${calls} calls in ${seconds.toFixed(2)} s = ${Math.round(messages / seconds)} deliveries/s (queueing them took ${queued.toFixed(2)} s)`,
  );
}

await throughput('in-process queue', new InProcessDeliveryQueue({ http, logger, recorder }), 20_000, 200).then(() => undefined);

const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const probe = new Redis(redisUrl, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
probe.on('error', () => undefined);
const redisUp = await probe.connect().then(
  () => true,
  () => false,
);
probe.disconnect();
if (redisUp) {
  const q = new BullMqDeliveryQueue({ redisUrl, queueName: `bench-${randomUUID()}`, prefix: 'sbbench', http, logger, recorder, concurrency: 64 });
  try {
    await throughput('BullMQ queue (Redis)', q, 5_000, 200);
  } finally {
    await q.obliterate();
    await q.close();
  }
} else {
  console.log('BullMQ queue: skipped (Redis not reachable)');
}

await http.close();
server.close();
process.exit(0);
