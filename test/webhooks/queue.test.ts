import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { verifyWebhook } from '../../src/index.js';
import { ManualClock } from '../../src/webhooks/clock.js';
import { statusUpdateMessage, type CallContext } from '../../src/webhooks/envelope.js';
import { WebhookHttpClient } from '../../src/webhooks/http.js';
import { createNotification, notificationVerdict, RETRY_SCHEDULE_MS, type Notification } from '../../src/webhooks/notify.js';
import { InProcessDeliveryQueue } from '../../src/webhooks/queue.js';
import { generateWebhookSecret } from '../../src/webhooks/secrets.js';
import { DeliveryRepository } from '../../src/store/deliveries.js';
import { createStore } from '../../src/store/index.js';
import { createTestDb, type TestDb } from '../helpers/db.js';
import { startReceiver, type Receiver, type RecordedRequest } from '../helpers/receiver.js';

const silent = pino({ level: 'silent' });
const secret = generateWebhookSecret();

const context = (callId: string): CallContext => ({
  call: { id: callId, type: 'inbound_phone_call', status: 'in-progress' },
  phone_number: { number: '+14155550100', name: null },
  customer: { number: '+14155550199' },
});

/** A status-update whose body names its sequence number within the call. */
function message(orgId: string, callId: string, url: string, seq: number, clock: ManualClock): Notification {
  const body = statusUpdateMessage(context(callId), { status: 'in-progress' }, clock.now());
  (body.message as unknown as { seq: number }).seq = seq;
  return createNotification({ organizationId: orgId, callId, target: { url, secret }, body, now: clock.now() });
}

const seqOf = (r: RecordedRequest) => (JSON.parse(r.body) as { message: { seq: number; call: { id: string } } }).message;

describe('notificationVerdict (DECISIONS 7)', () => {
  const ok = (status: number) => ({ ok: true as const, status, body: '', bodyTooLarge: false, durationMs: 1 });
  const fail = (code: 'TIMEOUT' | 'CONNECTION_FAILED' | 'DNS_FAILED' | 'BLOCKED_ADDRESS' | 'INVALID_URL') => ({
    ok: false as const,
    code,
    reason: code,
    detail: code,
    durationMs: 1,
  });
  it.each([
    [ok(200), 'delivered'],
    [ok(204), 'delivered'],
    [ok(408), 'retry'],
    [ok(429), 'retry'],
    [ok(500), 'retry'],
    [ok(503), 'retry'],
    [ok(301), 'final'],
    [ok(302), 'final'],
    [ok(307), 'final'],
    [ok(400), 'final'],
    [ok(404), 'final'],
    [ok(410), 'final'],
    [fail('TIMEOUT'), 'retry'],
    [fail('CONNECTION_FAILED'), 'retry'],
    [fail('DNS_FAILED'), 'retry'],
    [fail('BLOCKED_ADDRESS'), 'final'],
    [fail('INVALID_URL'), 'final'],
  ])('%o → %s', (outcome, verdict) => {
    expect(notificationVerdict(outcome).verdict).toBe(verdict);
  });

  it('the schedule is 0, 5 s, 30 s, 2 min, 10 min, 30 min, 1 h, 3 h, 6 h', () => {
    expect(RETRY_SCHEDULE_MS).toEqual([0, 5_000, 30_000, 120_000, 600_000, 1_800_000, 3_600_000, 10_800_000, 21_600_000]);
  });
});

describe('in-process delivery queue', () => {
  let testDb: TestDb;
  let repo: DeliveryRepository;
  let orgId: string;
  let receiver: Receiver;
  let http: WebhookHttpClient;
  let clock: ManualClock;
  let queue: InProcessDeliveryQueue;

  beforeAll(async () => {
    testDb = await createTestDb('pglite');
    const store = createStore(testDb.db);
    orgId = (await store.keys.createKey('Webhook Org')).organization.id;
    repo = new DeliveryRepository(testDb.db);
    http = new WebhookHttpClient({ allowPrivate: true });
  });
  afterAll(async () => {
    await http.close();
    await testDb.drop();
  });
  beforeEach(async () => {
    receiver = await startReceiver();
    clock = new ManualClock();
    queue = new InProcessDeliveryQueue({ http, logger: silent, recorder: repo, clock, timeoutMs: 300 });
    await queue.start();
  });
  afterEach(async () => {
    await queue.close();
    await receiver.close();
  });

  /** Advances the fake clock to `ms` from now, letting each due attempt finish before the next. */
  async function runFor(ms: number) {
    const end = clock.now() + ms;
    await queue.whenIdle();
    for (;;) {
      const next = clock.nextTimerAt();
      if (next === null || next > end) break;
      clock.advance(next - clock.now());
      await queue.whenIdle();
    }
    clock.advance(end - clock.now());
    await queue.whenIdle();
  }

  it('500 then 200: the same X-Webhook-Id, a new timestamp and signature', async () => {
    receiver.script({ status: 500 });
    const callId = randomUUID();
    const n = message(orgId, callId, receiver.url, 1, clock);
    await queue.enqueue(n);
    await queue.whenIdle();
    expect(receiver.requests).toHaveLength(1);
    await runFor(4_999);
    expect(receiver.requests).toHaveLength(1);
    await runFor(1);
    expect(receiver.requests).toHaveLength(2);
    const [first, second] = receiver.requests as [RecordedRequest, RecordedRequest];
    expect(first.headers['x-webhook-id']).toBe(n.id);
    expect(second.headers['x-webhook-id']).toBe(n.id);
    expect(Number(second.headers['x-webhook-timestamp']) - Number(first.headers['x-webhook-timestamp'])).toBe(5);
    expect(second.headers['x-webhook-signature']).not.toBe(first.headers['x-webhook-signature']);
    expect(second.body).toBe(first.body);
    for (const r of [first, second]) {
      expect(verifyWebhook(r.body, r.headers, secret, { now: Number(r.headers['x-webhook-timestamp']) * 1000 }).id).toBe(n.id);
    }
    const attempts = await repo.listForCall(orgId, callId);
    expect(attempts.map((a) => [a.attempt, a.outcome, a.status_code, a.error])).toEqual([
      [1, 'retrying', 500, 'HTTP 500'],
      [2, 'delivered', 200, null],
    ]);
    expect(Date.parse(attempts[0]!.next_retry_at!) - Date.parse(attempts[0]!.created_at)).toBe(5_000);
    expect(attempts[1]!.next_retry_at).toBeNull();
    expect(attempts.every((a) => a.message_id === n.id && a.url === receiver.url && a.event === 'status-update')).toBe(true);
    expect(queue.pending).toBe(0);
  });

  it('410 is final; the call\'s next message goes on', async () => {
    receiver.script({ status: 410 });
    const callId = randomUUID();
    await queue.enqueue(message(orgId, callId, receiver.url, 1, clock));
    await queue.enqueue(message(orgId, callId, receiver.url, 2, clock));
    await runFor(24 * 3600_000);
    expect(receiver.requests.map((r) => seqOf(r).seq)).toEqual([1, 2]);
    const attempts = await repo.listForCall(orgId, callId);
    expect(attempts.map((a) => [a.outcome, a.status_code])).toEqual([
      ['failed', 410],
      ['delivered', 200],
    ]);
  });

  it('301 is a final failure: not followed, not retried', async () => {
    const elsewhere = await startReceiver();
    try {
      receiver.script({ status: 301, headers: { location: elsewhere.url } });
      const callId = randomUUID();
      await queue.enqueue(message(orgId, callId, receiver.url, 1, clock));
      await runFor(24 * 3600_000);
      expect(receiver.requests).toHaveLength(1);
      expect(elsewhere.requests).toHaveLength(0);
      const [attempt] = await repo.listForCall(orgId, callId);
      expect(attempt).toMatchObject({ outcome: 'failed', status_code: 301, error: 'HTTP 301: redirects are not followed' });
    } finally {
      await elsewhere.close();
    }
  });

  it('a slow receiver times out and is retried', async () => {
    receiver.script({ status: 200, delayMs: 2_000 });
    const callId = randomUUID();
    await queue.enqueue(message(orgId, callId, receiver.url, 1, clock));
    await runFor(5_000);
    const attempts = await repo.listForCall(orgId, callId);
    expect(attempts.map((a) => [a.outcome, a.status_code, a.error])).toEqual([
      ['retrying', null, 'timed out: no complete answer within 0.3 s'],
      ['delivered', 200, null],
    ]);
    expect(attempts[0]!.duration_ms).toBeGreaterThanOrEqual(250);
  });

  it('connection refused is retried; 408 and 429 too', async () => {
    await receiver.stop();
    const callId = randomUUID();
    await queue.enqueue(message(orgId, callId, receiver.url, 1, clock));
    await queue.whenIdle();
    await receiver.restart();
    receiver.script({ status: 408 }, { status: 429 });
    await runFor(5_000 + 30_000 + 120_000);
    const attempts = await repo.listForCall(orgId, callId);
    expect(attempts.map((a) => [a.outcome, a.status_code])).toEqual([
      ['retrying', null],
      ['retrying', 408],
      ['retrying', 429],
      ['delivered', 200],
    ]);
    expect(attempts[0]!.error).toBe('connection failed');
  });

  it('a URL that resolves to a private address: a final failure, recorded as "blocked address" with its credentials masked', async () => {
    const lines: { msg: string; detail?: string }[] = [];
    const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line)) });
    const guarded = new WebhookHttpClient({
      allowPrivate: false,
      resolve: async () => [{ address: '10.9.8.7', family: 4 }],
    });
    const strict = new InProcessDeliveryQueue({ http: guarded, logger, recorder: repo, clock, timeoutMs: 300 });
    try {
      await strict.start();
      const callId = randomUUID();
      await strict.enqueue(message(orgId, callId, 'https://ops:s3cret-pass@hooks.corp.internal/events', 1, clock));
      await strict.whenIdle();
      const attempts = await repo.listForCall(orgId, callId);
      expect(attempts.map((a) => [a.outcome, a.status_code, a.error, a.url])).toEqual([
        ['failed', null, 'blocked address (only public addresses are allowed)', 'https://ops:****@hooks.corp.internal/events'],
      ]);
      expect(JSON.stringify(attempts)).not.toMatch(/10\.9\.8\.7|s3cret-pass/);
      // the operator's log keeps the whole story, without the password
      const line = lines.find((l) => l.msg === 'webhook failed; not retried')!;
      expect(line.detail).toMatch(/^hooks\.corp\.internal resolves to 10\.9\.8\.7; refused/);
      expect(JSON.stringify(lines)).not.toContain('s3cret-pass');
    } finally {
      await strict.close();
      await guarded.close();
    }
  });

  it('a receiver down for an hour gets every message afterwards, in order per call', async () => {
    const calls = [randomUUID(), randomUUID(), randomUUID()];
    await receiver.stop();
    // three calls, messages interleaved, some queued while the receiver is down
    for (let seq = 1; seq <= 3; seq++) {
      for (const callId of calls) await queue.enqueue(message(orgId, callId, receiver.url, seq, clock));
    }
    await runFor(20 * 60_000);
    for (const callId of calls) await queue.enqueue(message(orgId, callId, receiver.url, 4, clock));
    await runFor(40 * 60_000);
    expect(receiver.requests).toHaveLength(0);
    await receiver.restart();
    // the next attempt (the 7th, 1 h after the 6th at 42 min 35 s) finds it up
    await runFor(2 * 3600_000);
    expect(queue.pending).toBe(0);
    for (const callId of calls) {
      const got = receiver.requests.filter((r) => seqOf(r).call.id === callId).map((r) => seqOf(r).seq);
      expect(got).toEqual([1, 2, 3, 4]);
    }
    const first = (await repo.listForCall(orgId, calls[0]!)).filter((a) => a.attempt > 0);
    const head = first.filter((a) => a.message_id === first[0]!.message_id);
    expect(head.map((a) => a.outcome)).toEqual([...Array(6).fill('retrying'), 'delivered']);
    const starts = head.map((a) => Date.parse(a.created_at) - Date.parse(head[0]!.created_at));
    expect(starts).toEqual([0, 5_000, 35_000, 155_000, 755_000, 2_555_000, 6_155_000]);
  });

  it('gives up after the ninth attempt, records it, and goes on with the call', async () => {
    receiver.setDefault({ status: 503 });
    const callId = randomUUID();
    await queue.enqueue(message(orgId, callId, receiver.url, 1, clock));
    await queue.enqueue(message(orgId, callId, receiver.url, 2, clock));
    // the whole schedule: the ninth attempt is 10 h 42 min 35 s after the first
    await runFor(RETRY_SCHEDULE_MS.reduce((a, b) => a + b, 0));
    receiver.setDefault({ status: 200 });
    await runFor(60_000);
    const attempts = await repo.listForCall(orgId, callId);
    const firstMessage = attempts.filter((a) => a.message_id === attempts[0]!.message_id);
    expect(firstMessage.map((a) => a.attempt)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(firstMessage.at(-1)).toMatchObject({ outcome: 'gave-up', next_retry_at: null, status_code: 503 });
    // the second message waited behind the first, then was tried on its own schedule
    const second = attempts.filter((a) => a.message_id !== attempts[0]!.message_id);
    expect(Date.parse(second[0]!.created_at)).toBe(Date.parse(firstMessage.at(-1)!.created_at));
    expect(receiver.requests.filter((r) => seqOf(r).seq === 2).length).toBeGreaterThan(0);
    expect(queue.pending).toBe(0);
  });

  it('a retrying call does not hold up other calls', async () => {
    const other = await startReceiver();
    try {
      receiver.setDefault({ status: 500 });
      const stuck = randomUUID();
      const fine = randomUUID();
      await queue.enqueue(message(orgId, stuck, receiver.url, 1, clock));
      await queue.enqueue(message(orgId, fine, other.url, 1, clock));
      await queue.enqueue(message(orgId, fine, other.url, 2, clock));
      await queue.whenIdle();
      expect(other.requests.map((r) => seqOf(r).seq)).toEqual([1, 2]);
      expect(receiver.requests).toHaveLength(1);
    } finally {
      await other.close();
    }
  });

  it('keeps per-call order with many calls, random latencies and failures', async () => {
    let n = 0;
    receiver.setDefault(() => ({ status: n++ % 5 === 0 ? 500 : 200, delayMs: Math.floor(Math.random() * 15) }));
    const calls = Array.from({ length: 12 }, () => randomUUID());
    for (let seq = 1; seq <= 6; seq++) {
      for (const callId of calls) await queue.enqueue(message(orgId, callId, receiver.url, seq, clock));
    }
    await runFor(3600_000);
    expect(queue.pending).toBe(0);
    for (const callId of calls) {
      const delivered = receiver.requests.filter((r) => seqOf(r).call.id === callId);
      // a failed attempt may be followed by its own retry only: the delivered sequence is 1..6
      const seqs = delivered.map((r) => seqOf(r).seq);
      expect([...new Set(seqs)]).toEqual([1, 2, 3, 4, 5, 6]);
      for (let i = 1; i < seqs.length; i++) expect(seqs[i]!).toBeGreaterThanOrEqual(seqs[i - 1]!);
    }
  });

  it('messages queued before start() wait for it', async () => {
    const q = new InProcessDeliveryQueue({ http, logger: silent, clock });
    try {
      await q.enqueue(message(orgId, randomUUID(), receiver.url, 1, clock));
      await q.whenIdle();
      expect(receiver.requests).toHaveLength(0);
      await q.start();
      await q.whenIdle();
      expect(receiver.requests).toHaveLength(1);
    } finally {
      await q.close();
    }
  });

  it('close() lets the attempt in flight finish, drops the rest with a warning, and refuses new ones', async () => {
    const lines: string[] = [];
    const logger = pino({ level: 'warn' }, { write: (l: string) => void lines.push(l) });
    const q = new InProcessDeliveryQueue({ http, logger, clock, timeoutMs: 2_000 });
    await q.start();
    receiver.script({ status: 200, delayMs: 200 });
    const callId = randomUUID();
    await q.enqueue(message(orgId, callId, receiver.url, 1, clock));
    await q.enqueue(message(orgId, callId, receiver.url, 2, clock));
    await receiver.waitForRequests(1);
    await q.close();
    expect(receiver.requests).toHaveLength(1);
    expect(lines.join('')).toContain('webhook queue closed with undelivered messages');
    await expect(q.enqueue(message(orgId, callId, receiver.url, 3, clock))).rejects.toThrow('closed');
    expect(clock.pendingTimers).toBe(0);
  });
});
