/**
 * The queue's embedded default (no REDIS_URL): the rules of index.ts in memory, on the clock it is
 * given. Not durable: jobs still queued when the process stops are lost (counted in the log).
 * Every job is in a chain: its group's, or one of its own.
 */
import { systemClock, type Clock } from '../webhooks/clock.js';
import type { Job, JobOutcome, JobQueue, JobQueueOptions } from './index.js';

interface Chain<T> {
  items: Job<T>[];
  /** The job `attempts` counts for. */
  headId: string | null;
  /** Attempts made so far on the head. */
  attempts: number;
  timer: unknown;
  running: boolean;
}

/** An attempt that crashed (the handler threw) is tried again this much later. */
export const CRASHED_ATTEMPT_RETRY_MS = 60_000;

export class InProcessJobQueue<T> implements JobQueue<T> {
  readonly backend = 'in-process' as const;
  private readonly chains = new Map<string, Chain<T>>();
  private readonly ready: string[] = [];
  private readonly clock: Clock;
  private readonly concurrency: number;
  private readonly inFlight = new Set<Promise<void>>();
  private started = false;
  private closed = false;
  private idleWaiters: (() => void)[] = [];

  constructor(private readonly options: JobQueueOptions<T>) {
    this.clock = options.clock ?? systemClock;
    this.concurrency = options.concurrency ?? 32;
  }

  async add(job: Job<T>): Promise<void> {
    if (this.closed) throw new Error(`the ${this.words.queue} is closed`);
    const key = chainKey(job);
    let chain = this.chains.get(key);
    if (!chain) {
      chain = { items: [], headId: null, attempts: 0, timer: null, running: false };
      this.chains.set(key, chain);
    }
    chain.items.push(job);
    if (chain.items.length === 1) this.markReady(key);
  }

  async holds(job: Pick<Job<T>, 'id' | 'group'>): Promise<boolean> {
    return !!this.chains.get(chainKey(job))?.items.some((j) => j.id === job.id);
  }

  async start(): Promise<void> {
    this.started = true;
    this.pump();
  }

  whenIdle(): Promise<void> {
    if (this.isIdle()) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

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
    if (left > 0) this.options.logger.warn({ pending: left }, `${this.words.queue} closed with ${this.words.items} (in-process queue: they are dropped)`);
    this.chains.clear();
    this.ready.length = 0;
    this.settleIdle();
  }

  async obliterate(): Promise<void> {
    await this.close();
  }

  private get words(): { queue: string; items: string } {
    return this.options.words ?? { queue: 'job queue', items: 'jobs not done' };
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

  private markReady(key: string): void {
    this.ready.push(key);
    this.pump();
  }

  private pump(): void {
    while (this.started && !this.closed && this.inFlight.size < this.concurrency && this.ready.length > 0) {
      const key = this.ready.shift()!;
      const run = this.attemptHead(key).finally(() => {
        this.inFlight.delete(run);
        this.pump();
        this.settleIdle();
      });
      this.inFlight.add(run);
    }
  }

  private async attemptHead(key: string): Promise<void> {
    const chain = this.chains.get(key);
    const head = chain?.items[0];
    if (!chain || !head || chain.running) return;
    chain.running = true;
    if (chain.headId !== head.id) {
      chain.headId = head.id;
      chain.attempts = head.attemptsMade ?? 0;
    }
    chain.attempts += 1;
    let result: JobOutcome;
    try {
      result = await this.options.handler({ id: head.id, group: head.group, data: head.data, attempt: chain.attempts });
    } catch (err) {
      // not expected (handlers report failures as outcomes): retry later rather than lose it
      this.options.logger.error({ err, jobId: head.id, group: head.group }, `${this.words.queue}: an attempt crashed`);
      result = { retryInMs: CRASHED_ATTEMPT_RETRY_MS };
    } finally {
      chain.running = false;
    }
    // closing: the job stays among those not done, counted when the queue closes
    if (this.closed) return;
    if (result !== 'done') {
      chain.timer = this.clock.setTimeout(() => {
        chain.timer = null;
        if (!this.closed) this.markReady(key);
      }, result.retryInMs);
      return;
    }
    chain.items.shift();
    chain.attempts = 0;
    if (chain.items.length > 0) this.ready.push(key);
    else this.chains.delete(key);
  }
}

/** A group's chain, or a chain of the job's own. */
export const chainKey = (job: Pick<Job<unknown>, 'id' | 'group'>): string => (job.group !== undefined ? `g:${job.group}` : `j:${job.id}`);
