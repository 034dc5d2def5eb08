/**
 * The delivery queue of notifications (DECISIONS 1 and 7): BullMQ on Redis when REDIS_URL is set
 * (queue-bullmq.ts), an in-process queue otherwise, with the same semantics:
 *
 * - at least once: a message leaves the queue only after a 2xx or a final failure;
 * - every attempt carries the message's one `X-Webhook-Id` and a fresh timestamp and signature;
 * - in order per call: each call has a chain (FIFO) of its messages and only the head of a chain
 *   is ever attempted; while it waits for its next retry, the call's later messages wait behind
 *   it. Chains of different calls are independent.
 */
import type { Logger } from 'pino';
import { systemClock, type Clock } from './clock.js';
import type { WebhookHttpClient } from './http.js';
import { NotificationSender, type DeliveryRecorder, type Notification } from './notify.js';

export interface DeliveryQueue {
  /** Resolves once the message is queued (in Redis, durably). */
  enqueue(notification: Notification): Promise<void>;
  /** Starts attempting deliveries (messages queued before are kept). */
  start(): Promise<void>;
  /** Stops: lets attempts in flight finish, keeps (Redis) or drops (in process) the rest. */
  close(): Promise<void>;
  /** Whether the message is still queued (the reconciler re-queues it when not). */
  holds(notification: Notification): Promise<boolean>;
}

export interface DeliveryQueueOptions {
  http: WebhookHttpClient;
  logger: Logger;
  recorder?: DeliveryRecorder | null;
  clock?: Clock;
  retryScheduleMs?: readonly number[];
  /** Per-attempt timeout. Default 15 s. */
  timeoutMs?: number;
  /** Attempts in flight at once (over all calls). Default 32. */
  concurrency?: number;
}

interface Chain {
  items: Notification[];
  /** The message `attempts` counts for. */
  headId: string | null;
  /** Attempts made so far on the head. */
  attempts: number;
  timer: unknown;
  running: boolean;
}

/** The embedded default. Not durable: messages still queued when the process stops are lost. */
export class InProcessDeliveryQueue implements DeliveryQueue {
  private readonly chains = new Map<string, Chain>();
  private readonly ready: string[] = [];
  private readonly sender: NotificationSender;
  private readonly clock: Clock;
  private readonly concurrency: number;
  private inFlight = new Set<Promise<void>>();
  private started = false;
  private closed = false;
  private idleWaiters: (() => void)[] = [];

  constructor(private readonly options: DeliveryQueueOptions) {
    this.clock = options.clock ?? systemClock;
    this.concurrency = options.concurrency ?? 32;
    this.sender = new NotificationSender({ ...options, clock: this.clock });
  }

  async enqueue(notification: Notification): Promise<void> {
    if (this.closed) throw new Error('the delivery queue is closed');
    let chain = this.chains.get(notification.call_id);
    if (!chain) {
      chain = { items: [], headId: null, attempts: 0, timer: null, running: false };
      this.chains.set(notification.call_id, chain);
    }
    chain.items.push(notification);
    if (chain.items.length === 1) this.markReady(notification.call_id);
  }

  async holds(notification: Notification): Promise<boolean> {
    return !!this.chains.get(notification.call_id)?.items.some((n) => n.id === notification.id);
  }

  async start(): Promise<void> {
    this.started = true;
    this.pump();
  }

  /** Resolves when no attempt is in flight and none is due (retries may still be scheduled). */
  whenIdle(): Promise<void> {
    if (this.isIdle()) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** Messages not yet delivered or given up, over all calls. */
  get pending(): number {
    let n = 0;
    for (const chain of this.chains.values()) n += chain.items.length;
    return n;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const chain of this.chains.values()) {
      if (chain.timer !== null) this.clock.clearTimeout(chain.timer);
      chain.timer = null;
    }
    await Promise.all([...this.inFlight]);
    const left = this.pending;
    if (left > 0) this.options.logger.warn({ pending: left }, 'webhook queue closed with undelivered messages (in-process queue: they are dropped)');
    this.chains.clear();
    this.ready.length = 0;
    this.settleIdle();
  }

  private isIdle(): boolean {
    return this.inFlight.size === 0 && (this.ready.length === 0 || !this.started || this.closed);
  }

  private settleIdle(): void {
    if (!this.isIdle()) return;
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const w of waiters) w();
  }

  private markReady(callId: string): void {
    this.ready.push(callId);
    this.pump();
  }

  private pump(): void {
    while (this.started && !this.closed && this.inFlight.size < this.concurrency && this.ready.length > 0) {
      const callId = this.ready.shift()!;
      const run = this.attemptHead(callId).finally(() => {
        this.inFlight.delete(run);
        this.pump();
        this.settleIdle();
      });
      this.inFlight.add(run);
    }
  }

  private async attemptHead(callId: string): Promise<void> {
    const chain = this.chains.get(callId);
    const head = chain?.items[0];
    if (!chain || !head || chain.running) return;
    chain.running = true;
    if (chain.headId !== head.id) {
      chain.headId = head.id;
      chain.attempts = head.attempts ?? 0;
    }
    chain.attempts += 1;
    let result;
    try {
      result = await this.sender.attempt(head, chain.attempts);
    } catch (err) {
      // not expected (the sender reports failures as outcomes): retry later rather than lose it
      this.options.logger.error({ err, callId }, 'webhook attempt crashed');
      result = { outcome: 'retrying' as const, retryInMs: 60_000 };
    } finally {
      chain.running = false;
    }
    if (this.closed) return;
    if (result.outcome === 'retrying') {
      chain.timer = this.clock.setTimeout(() => {
        chain.timer = null;
        if (!this.closed) this.markReady(callId);
      }, result.retryInMs ?? 0);
      return;
    }
    chain.items.shift();
    chain.attempts = 0;
    if (chain.items.length > 0) this.ready.push(callId);
    else this.chains.delete(callId);
  }
}
