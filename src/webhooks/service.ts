/**
 * The webhook layer as the call code uses it: one object per process that owns the HTTP client
 * and the delivery queue. Targets come from `resolveWebhookTarget`, bodies from envelope.ts.
 *
 *   const target = resolveWebhookTarget({ event: 'status-update', assistant, number, account });
 *   await webhooks.notify({ organizationId, callId, target, body: statusUpdateMessage(ctx, {...}) });
 */
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import type { Clock } from './clock.js';
import type { StatusUpdateMessage, EndOfCallReportMessage, WebhookBody } from './envelope.js';
import {
  callTools,
  requestAssistant,
  sendAsyncToolCalls,
  type AssistantRequestOutcome,
  type ExchangeOptions,
  type ToolCallResult,
} from './exchanges.js';
import { WebhookHttpClient, type ResolveHost } from './http.js';
import { createNotification, type DeliveryRecorder, type Notification } from './notify.js';
import { BullMqDeliveryQueue } from './queue-bullmq.js';
import { InProcessDeliveryQueue, NotificationQueue, type DeliveryQueue, type DeliveryQueueOptions } from './queue.js';
import type { Queues } from '../queue/index.js';
import type { WebhookTarget } from './target.js';

export interface WebhookServiceOptions {
  config: Pick<Config, 'REDIS_URL' | 'WEBHOOK_ALLOW_PRIVATE'>;
  logger: Logger;
  /** Where attempts are recorded: `new DeliveryRepository(db)`. */
  recorder?: DeliveryRecorder | null;
  clock?: Clock;
  /** BullMQ queue name (Redis only). */
  queueName?: string;
  /** The process's queues (src/queue/); without them, a queue of its own from `config.REDIS_URL`. */
  queues?: Queues;
  resolve?: ResolveHost;
  /**
   * Where a notification is recorded before it is queued (DECISIONS 22: the database, through the
   * outbox while it is down); the reconciler re-queues what the queue loses from there.
   */
  durable?: { record(notification: Notification): Promise<void> } | null;
}

/**
 * On the process's queues; or, given the configuration (tools, tests), on a queue of its own:
 * BullMQ when REDIS_URL is set, in process otherwise (DECISIONS 1).
 */
export function createDeliveryQueue(from: Queues | Pick<Config, 'REDIS_URL'>, options: DeliveryQueueOptions): DeliveryQueue {
  if ('create' in from) return new NotificationQueue(from, options);
  return from.REDIS_URL ? new BullMqDeliveryQueue({ ...options, redisUrl: from.REDIS_URL }) : new InProcessDeliveryQueue(options);
}

/** How long a recorded notification's enqueue is waited for before the call goes on. */
const ENQUEUE_WAIT_MS = 5_000;

export class WebhookService {
  readonly http: WebhookHttpClient;
  readonly queue: DeliveryQueue;
  private readonly logger: Logger;
  private readonly recorder: DeliveryRecorder | null;
  private readonly clock: Clock | undefined;
  private readonly pendingAsync = new Set<Promise<void>>();
  private readonly durable: WebhookServiceOptions['durable'];

  constructor(options: WebhookServiceOptions) {
    this.logger = options.logger;
    this.durable = options.durable ?? null;
    this.recorder = options.recorder ?? null;
    this.clock = options.clock;
    this.http = new WebhookHttpClient({
      allowPrivate: options.config.WEBHOOK_ALLOW_PRIVATE,
      ...(options.resolve ? { resolve: options.resolve } : {}),
    });
    this.queue = createDeliveryQueue(options.queues ?? options.config, {
      http: this.http,
      logger: options.logger,
      recorder: this.recorder,
      ...(options.clock ? { clock: options.clock } : {}),
      ...(options.queueName ? { queueName: options.queueName } : {}),
    });
  }

  start(): Promise<void> {
    return this.queue.start();
  }

  /** Queues a status-update or end-of-call-report; `target: null` (not subscribed) does nothing. */
  async notify(input: {
    organizationId: string;
    callId: string;
    target: WebhookTarget | null;
    body: WebhookBody<StatusUpdateMessage | EndOfCallReportMessage>;
  }): Promise<void> {
    if (!input.target) return;
    const notification = createNotification({
      organizationId: input.organizationId,
      callId: input.callId,
      target: input.target,
      body: input.body,
      now: this.clock?.now(),
    });
    if (!this.durable) return this.queue.enqueue(notification);
    // recorded first: whatever happens to the queue, the message is not lost
    await this.durable.record(notification);
    // a queue that does not answer (Redis down) must not hold up the call or the outbox: the
    // message is recorded, and goes out once Redis answers (or the reconciler queues it again)
    const queued = this.queue.enqueue(notification).then(
      () => true,
      (err: unknown) => {
        this.logger.warn({ err, callId: input.callId, webhookId: notification.id }, 'the queue refused a notification; it is recorded and the reconciler queues it again');
        return true;
      },
    );
    let timer: NodeJS.Timeout | undefined;
    const inTime = await Promise.race([queued, new Promise<false>((r) => (timer = setTimeout(() => r(false), ENQUEUE_WAIT_MS)))]);
    clearTimeout(timer);
    if (!inTime) {
      this.logger.warn({ callId: input.callId, webhookId: notification.id }, 'the queue did not take a notification in time (Redis down?); it is recorded and goes out once Redis answers');
    }
  }

  requestAssistant(
    call: { organizationId: string; logger: Logger },
    input: Parameters<typeof requestAssistant>[1],
  ): Promise<AssistantRequestOutcome> {
    return requestAssistant(this.exchange(call), input);
  }

  callTools(call: { organizationId: string; logger: Logger }, input: Parameters<typeof callTools>[1]): Promise<ToolCallResult[]> {
    return callTools(this.exchange(call), input);
  }

  /** Tools with `async: true`: sent, not waited for; `close()` waits for them. */
  sendAsyncToolCalls(call: { organizationId: string; logger: Logger }, input: Parameters<typeof callTools>[1]): void {
    const { done } = sendAsyncToolCalls(this.exchange(call), input);
    this.pendingAsync.add(done);
    void done.finally(() => this.pendingAsync.delete(done));
  }

  async close(): Promise<void> {
    await this.queue.close();
    await Promise.all([...this.pendingAsync]);
    await this.http.close();
  }

  private exchange(call: { organizationId: string; logger: Logger }): ExchangeOptions {
    return {
      http: this.http,
      logger: call.logger,
      organizationId: call.organizationId,
      recorder: this.recorder,
      ...(this.clock ? { clock: this.clock } : {}),
    };
  }
}
