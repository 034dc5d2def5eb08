/**
 * The call's side of the webhooks: a call's status-updates and report reach the customer in the
 * order the call gave them, however long each one's look-ups take.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { verifyWebhook } from '../../src/index.js';
import { WebhookCallNotifier } from '../../src/calls/webhook-notifier.js';
import { createStore, type Store } from '../../src/store/index.js';
import { generateWebhookSecret } from '../../src/webhooks/secrets.js';
import { WebhookService } from '../../src/webhooks/service.js';
import { callRecord } from '../helpers/call-record.js';
import { availableDbKinds, createTestDb, type TestDb } from '../helpers/db.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';

const silent = pino({ level: 'silent' });
const noProviders = { stt: new Map(), llm: new Map(), tts: new Map(), realtime: new Map() };

/** The store with the number look-ups of the first `slow` calls made `delayMs` slower. */
function slowFirstLookups(store: Store, slow: number, delayMs: number): Store {
  let calls = 0;
  const numbers = Object.create(store.numbers) as Store['numbers'];
  numbers.get = async (orgId, id) => {
    const found = await store.numbers.get(orgId, id);
    if (calls++ < slow) await new Promise((r) => setTimeout(r, delayMs));
    return found;
  };
  return { ...store, numbers };
}

describe.each(availableDbKinds())('WebhookCallNotifier on %s', (kind) => {
  let testDb: TestDb;
  let store: Store;
  let receiver: Receiver;
  let webhooks: WebhookService;
  const secret = generateWebhookSecret();

  beforeAll(async () => {
    testDb = await createTestDb(kind);
    store = createStore(testDb.db);
    receiver = await startReceiver();
    webhooks = new WebhookService({ config: { WEBHOOK_ALLOW_PRIVATE: true, REDIS_URL: undefined }, logger: silent });
    await webhooks.start();
  });
  afterAll(async () => {
    await webhooks.close();
    await receiver.close();
    await testDb.drop();
  });

  async function aCall() {
    const org = (await store.keys.createKey('Notifier Org')).organization.id;
    const number = await store.numbers.create(org, {
      number: `+1555${String(Math.floor(Math.random() * 1e7)).padStart(7, '0')}`,
      webhook: { url: receiver.url, secret, events: ['status-update', 'end-of-call-report'] },
    });
    return callRecord({ organization_id: org, number_id: number.id });
  }

  const messagesOf = (callId: string) =>
    receiver.requests
      .map((r) => verifyWebhook(r.body, r.headers, secret).payload.message as { type: string; status?: string; call: { id: string } })
      .filter((m) => m.call.id === callId);

  it('keeps the order of the calls made to it when an earlier look-up is the slower one', async () => {
    const call = await aCall();
    const notifier = new WebhookCallNotifier(webhooks, slowFirstLookups(store, 1, 150), noProviders, silent);
    // as a transfer does: `forwarding` is not awaited, and the call ends at once
    void notifier.statusUpdate(call, 'forwarding', { destination: '+14155550123' });
    call.status = 'ended';
    call.ended_reason = 'call-transferred';
    call.ended_at = new Date().toISOString();
    await notifier.statusUpdate(call, 'ended', { ended_reason: 'call-transferred' });
    await notifier.endOfCallReport(call);
    await expect.poll(() => messagesOf(call.id).length).toBe(3);
    expect(messagesOf(call.id).map((m) => m.status ?? m.type)).toEqual(['forwarding', 'ended', 'end-of-call-report']);
    expect(notifier.pending).toBe(0);
  });

  it('describes the call as it was when the update was given, not when its turn to be queued came', async () => {
    const call = await aCall();
    const notifier = new WebhookCallNotifier(webhooks, slowFirstLookups(store, 1, 100), noProviders, silent);
    void notifier.statusUpdate(call, 'in-progress');
    const forwarding = notifier.statusUpdate(call, 'forwarding', { destination: '+14155550123' });
    call.customer = { number: '+19995550000' };
    await forwarding;
    await expect.poll(() => messagesOf(call.id).length).toBe(2);
    const [first, second] = messagesOf(call.id) as unknown as Array<{ status: string; customer: { number: string }; call: { status: string } }>;
    expect(first).toMatchObject({ status: 'in-progress', call: { status: 'in-progress' }, customer: { number: '+15005550006' } });
    expect(second).toMatchObject({ status: 'forwarding', call: { status: 'forwarding' }, customer: { number: '+15005550006' } });
  });

  it('calls do not wait for one another, and a failed look-up does not stop the call’s later messages', async () => {
    const slowCall = await aCall();
    const quickCall = await aCall();
    const notifier = new WebhookCallNotifier(webhooks, slowFirstLookups(store, 1, 400), noProviders, silent);
    const slow = notifier.statusUpdate(slowCall, 'in-progress');
    const started = performance.now();
    await notifier.statusUpdate(quickCall, 'in-progress');
    expect(performance.now() - started).toBeLessThan(400);
    await slow;

    // a look-up that throws: that message is lost (and logged), the next one still goes
    const broken = Object.create(store.numbers) as Store['numbers'];
    let failures = 1;
    broken.get = async (orgId, id) => {
      if (failures-- > 0) throw new Error('connection reset');
      return store.numbers.get(orgId, id);
    };
    const flaky = new WebhookCallNotifier(webhooks, { ...store, numbers: broken }, noProviders, silent);
    const call = await aCall();
    await expect(flaky.statusUpdate(call, 'in-progress')).resolves.toBeUndefined();
    await flaky.statusUpdate(call, 'ended', { ended_reason: 'customer-ended-call' });
    await expect.poll(() => messagesOf(call.id).map((m) => m.status)).toEqual(['ended']);
    expect(flaky.pending).toBe(0);
  });
});
