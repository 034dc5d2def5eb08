import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { verifyWebhook } from '../../src/index.js';
import { assistantRequestMessage, statusUpdateMessage, toolCallsMessage, type CallContext } from '../../src/webhooks/envelope.js';
import { InProcessDeliveryQueue } from '../../src/webhooks/queue.js';
import { generateWebhookSecret } from '../../src/webhooks/secrets.js';
import { WebhookService } from '../../src/webhooks/service.js';
import { resolveWebhookTarget } from '../../src/webhooks/target.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';

const silent = pino({ level: 'silent' });
const ctx: CallContext = {
  call: { id: randomUUID(), type: 'inbound_phone_call', status: 'in-progress' },
  phone_number: { number: '+14155550100', name: 'Main' },
  customer: { number: '+14155550199' },
};

describe('WebhookService (the entry point for the call code)', () => {
  let receiver: Receiver;
  let service: WebhookService;
  const secret = generateWebhookSecret();
  const organizationId = randomUUID();
  const call = { organizationId, logger: silent };

  beforeAll(async () => {
    receiver = await startReceiver();
    service = new WebhookService({ config: { WEBHOOK_ALLOW_PRIVATE: true, REDIS_URL: undefined }, logger: silent });
    await service.start();
  });
  afterAll(async () => {
    await service.close();
    await receiver.close();
  });

  it('uses the in-process queue without REDIS_URL', () => {
    expect(service.queue).toBeInstanceOf(InProcessDeliveryQueue);
  });

  it('resolves, queues and delivers a signed notification; an unsubscribed event is not sent', async () => {
    const number = { webhook: { url: receiver.url, secret, events: ['status-update'] } };
    const before = receiver.requests.length;
    await service.notify({
      organizationId,
      callId: ctx.call.id,
      target: resolveWebhookTarget({ event: 'end-of-call-report', number }),
      body: statusUpdateMessage(ctx, { status: 'ended', ended_reason: 'customer-ended-call' }),
    });
    await service.notify({
      organizationId,
      callId: ctx.call.id,
      target: resolveWebhookTarget({ event: 'status-update', number }),
      body: statusUpdateMessage(ctx, { status: 'ringing' }),
    });
    const [got] = (await receiver.waitForRequests(before + 1)).slice(before);
    expect(verifyWebhook(got!.body, got!.headers, secret).payload.message).toMatchObject({ type: 'status-update', status: 'ringing' });
    await new Promise((r) => setTimeout(r, 50));
    expect(receiver.requests.length - before).toBe(1);
  });

  it('runs the exchanges', async () => {
    const target = { url: receiver.url, secret, level: 'account' as const };
    receiver.script({ status: 204 }, { status: 200, body: { results: [{ tool_call_id: 't1', result: 'ok' }] } });
    expect(await service.requestAssistant(call, { target, body: assistantRequestMessage(ctx) })).toEqual({ kind: 'number-settings' });
    const body = toolCallsMessage(ctx, { tool_calls: [{ id: 't1', name: 'x', arguments: {} }] });
    expect(await service.callTools(call, { target, body })).toEqual([{ tool_call_id: 't1', result: 'ok' }]);
  });

  it('close() waits for async tool calls in flight', async () => {
    const other = await startReceiver({ default: { status: 200, delayMs: 300, body: { results: [] } } });
    const s = new WebhookService({ config: { WEBHOOK_ALLOW_PRIVATE: true, REDIS_URL: undefined }, logger: silent });
    await s.start();
    const body = toolCallsMessage(ctx, { tool_calls: [{ id: 't1', name: 'x', arguments: {} }] });
    s.sendAsyncToolCalls(call, { target: { url: other.url, secret, level: 'tool' }, body });
    const started = Date.now();
    await s.close();
    expect(Date.now() - started).toBeGreaterThanOrEqual(200);
    expect(other.requests).toHaveLength(1);
    await other.close();
  });
});
