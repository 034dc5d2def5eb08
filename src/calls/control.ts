/**
 * Word to the process that runs a call, from whichever process heard it: a carrier's callback
 * (answering-machine detection) or `POST /calls/{id}/end` may reach any process of a deployment,
 * while the call's media runs in one. With REDIS_URL each word is appended to the call's own list
 * in Redis (`sb:call-control:<id>`) and a pub/sub message wakes the processes; the one that runs
 * the call takes the list's words. Pub/sub alone drops what is published while a subscriber
 * reconnects: the list keeps it, and the process reads its calls' lists again when its
 * subscription is back and every few seconds (DECISIONS 16: never silently lost). A word that
 * Redis does not take fails the request (503). In process it goes straight to the handler.
 */
import { EventEmitter } from 'node:events';
import { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { AnsweredBy } from './store.js';

export type CallControlMessage =
  /** End the call through the API (`api-ended-call`). */
  | { kind: 'end' }
  /** Answering-machine detection said who answered. */
  | { kind: 'answered-by'; answeredBy: AnsweredBy };

export interface CallControl {
  /** Delivers `message` to the process running `callId` (if any does). */
  send(callId: string, message: CallControlMessage): Promise<void>;
  /**
   * Every message for the calls this process runs (`liveCalls`; without it, for any call: the
   * handler ignores calls it does not run).
   */
  subscribe(handler: (callId: string, message: CallControlMessage) => void, liveCalls?: () => Iterable<string>): Promise<void>;
  close(): Promise<void>;
}

export class MemoryCallControl implements CallControl {
  private readonly bus = new EventEmitter();

  async send(callId: string, message: CallControlMessage): Promise<void> {
    // asynchronously, as Redis would: the sender's own work finishes first
    setImmediate(() => this.bus.emit('message', callId, message));
  }

  async subscribe(handler: (callId: string, message: CallControlMessage) => void, _liveCalls?: () => Iterable<string>): Promise<void> {
    this.bus.on('message', handler);
  }

  async close(): Promise<void> {
    this.bus.removeAllListeners();
  }
}

const isMessage = (v: unknown): v is CallControlMessage => {
  if (!v || typeof v !== 'object') return false;
  const kind = (v as { kind?: unknown }).kind;
  return kind === 'end' || kind === 'answered-by';
};

/** A call's words wait this long for the process that runs it (a call not live anywhere never takes them). */
const WORD_TTL_SECONDS = 600;
/** How often a process reads its calls' lists without being woken (a lost wake-up). */
const POLL_MS = 2_000;

/** Takes a call's words in order, in one step (LRANGE + DEL): two readers never both get one. */
const TAKE_SCRIPT = `
local words = redis.call('LRANGE', KEYS[1], 0, -1)
if #words > 0 then redis.call('DEL', KEYS[1]) end
return words`;

export class RedisCallControl implements CallControl {
  private readonly pub: Redis;
  private sub: Redis | null = null;
  private readonly channel: string;
  private poll: NodeJS.Timeout | null = null;
  private handler: ((callId: string, message: CallControlMessage) => void) | null = null;
  private liveCalls: (() => Iterable<string>) | null = null;

  constructor(
    private readonly redisUrl: string,
    private readonly log: Logger,
    private readonly prefix = 'sb:',
  ) {
    this.channel = `${prefix}call-control`;
    this.pub = new Redis(redisUrl, { maxRetriesPerRequest: 3 });
    this.pub.on('error', () => undefined);
  }

  private listKey(callId: string): string {
    return `${this.prefix}call-control:${callId}`;
  }

  async send(callId: string, message: CallControlMessage): Promise<void> {
    // the list is what counts; the publish only wakes the processes
    await this.pub.multi().rpush(this.listKey(callId), JSON.stringify(message)).expire(this.listKey(callId), WORD_TTL_SECONDS).exec();
    await this.pub.publish(this.channel, JSON.stringify({ callId })).catch(() => undefined);
  }

  async subscribe(handler: (callId: string, message: CallControlMessage) => void, liveCalls?: () => Iterable<string>): Promise<void> {
    this.handler = handler;
    this.liveCalls = liveCalls ?? null;
    this.sub ??= new Redis(this.redisUrl);
    this.sub.on('error', (err) => this.log.warn({ err }, 'call-control subscription: Redis error'));
    this.sub.on('message', (_channel, raw: string) => {
      let parsed: unknown;
      try {
        parsed = JSON.parse(raw);
      } catch {
        return;
      }
      const callId = (parsed as { callId?: unknown } | null)?.callId;
      if (typeof callId === 'string') void this.take(callId);
    });
    // (re)subscribed after a reconnect: what was sent meanwhile waits in the lists
    this.sub.on('ready', () => void this.takeAll());
    await this.sub.subscribe(this.channel);
    this.poll = setInterval(() => void this.takeAll(), POLL_MS);
    this.poll.unref();
  }

  /** Reads the words of every call this process runs, in one round trip. */
  private async takeAll(): Promise<void> {
    if (!this.liveCalls) return;
    const ids = [...this.liveCalls()];
    if (ids.length === 0) return;
    const batch = this.pub.pipeline();
    for (const id of ids) batch.eval(TAKE_SCRIPT, 1, this.listKey(id));
    const results = await batch.exec().catch(() => null);
    results?.forEach(([err, words], i) => {
      if (!err) this.deliver(ids[i]!, words as string[]);
    });
  }

  private async take(callId: string): Promise<void> {
    // without a list of its calls, every process would take every word: only the one running it may
    if (!this.handler || (this.liveCalls && ![...this.liveCalls()].includes(callId))) return;
    try {
      this.deliver(callId, (await this.pub.eval(TAKE_SCRIPT, 1, this.listKey(callId))) as string[]);
    } catch (err) {
      this.log.warn({ err, callId }, 'call control: could not read the call\'s words; reading them again shortly');
    }
  }

  private deliver(callId: string, words: string[]): void {
    for (const raw of words) {
      let message: unknown;
      try {
        message = JSON.parse(raw);
      } catch {
        continue;
      }
      if (isMessage(message)) this.handler?.(callId, message);
    }
  }

  async close(): Promise<void> {
    if (this.poll) clearInterval(this.poll);
    await Promise.allSettled([this.pub.quit(), this.sub?.quit()]);
  }
}

export function createCallControl(redisUrl: string | undefined, log: Logger): CallControl {
  return redisUrl ? new RedisCallControl(redisUrl, log) : new MemoryCallControl();
}
