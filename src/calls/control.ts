/**
 * Word to the process that runs a call, from whichever process heard it: a carrier's callback
 * (answering-machine detection) or `POST /calls/{id}/end` may reach any process of a deployment,
 * while the call's media runs in one. With REDIS_URL each word is appended to the call's own list
 * in Redis (`sb:call-control:<id>`) and a pub/sub message wakes the processes; the one that runs
 * the call takes the list's words. Pub/sub alone drops what is published while a subscriber
 * reconnects: the list keeps it, and the process reads its calls' lists again when its
 * subscription is back and every few seconds. A word that Redis does not take fails the request
 * (503).
 *
 * `deliver` (live controls, `POST /calls/{id}/end`) goes further (DECISIONS 16: applied, or the
 * request fails having done nothing): the sender waits for the reply of the process that runs the
 * call. While it waits, a word that a Redis restart lost is sent again (the process remembers the
 * words it took, so one taken before the loss is answered again, not applied twice); when nobody
 * took it within `DELIVERY_TIMEOUT_MS` it is withdrawn in one step with the check for a reply, so
 * it is either applied and answered, or never applied. In process it goes straight to the handler.
 */
import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { RedisConnections, type RedisSource } from '../redis.js';
import type { Logger } from 'pino';
import type { AnsweredBy } from './store.js';
import type { ControlOutcome, LiveControl } from './live-control.js';

export type CallControlMessage =
  /** End the call through the API (`api-ended-call`). */
  | { kind: 'end' }
  /** Answering-machine detection said who answered. */
  | { kind: 'answered-by'; answeredBy: AnsweredBy }
  /** A live control (`POST /calls/{id}/control`). */
  | { kind: 'control'; control: LiveControl };

/**
 * What became of a word sent with `deliver`: the reply of the process that runs the call
 * (applied, or why not), or `not-taken`: no process took it in time, and it never will (withdrawn).
 */
export type Delivery = ControlOutcome | { kind: 'not-taken' };

/** The process that runs a call acts on its word and says what came of it. */
export type ControlHandler = (callId: string, message: CallControlMessage) => ControlOutcome;

export interface CallControl {
  /** Sends `message` to the process running `callId` (if any does), waiting for nobody. */
  send(callId: string, message: CallControlMessage): Promise<void>;
  /**
   * Sends `message` and waits until the process running the call has acted on it: its reply, or
   * `not-taken` once no process took it within the delivery time (it is withdrawn: it is never
   * applied later). An outage (Redis does not take the word) rejects: nothing was sent.
   */
  deliver(callId: string, message: CallControlMessage): Promise<Delivery>;
  /**
   * Every message for the calls this process runs (`liveCalls`; without it, for any call: the
   * handler answers for calls it does not run).
   */
  subscribe(handler: ControlHandler, liveCalls?: () => Iterable<string>): Promise<void>;
  close(): Promise<void>;
}

export class MemoryCallControl implements CallControl {
  private handler: ControlHandler | null = null;

  async send(callId: string, message: CallControlMessage): Promise<void> {
    // asynchronously, as Redis would: the sender's own work finishes first
    setImmediate(() => this.handler?.(callId, message));
  }

  async deliver(callId: string, message: CallControlMessage): Promise<Delivery> {
    await new Promise((resolve) => setImmediate(resolve));
    return this.handler ? this.handler(callId, message) : { kind: 'not-taken' };
  }

  async subscribe(handler: ControlHandler, _liveCalls?: () => Iterable<string>): Promise<void> {
    this.handler = handler;
  }

  async close(): Promise<void> {
    this.handler = null;
  }
}

const isMessage = (v: unknown): v is CallControlMessage => {
  if (!v || typeof v !== 'object') return false;
  const m = v as { kind?: unknown; control?: unknown };
  if (m.kind === 'control') return !!m.control && typeof m.control === 'object' && typeof (m.control as { type?: unknown }).type === 'string';
  return m.kind === 'end' || m.kind === 'answered-by';
};

/** A call's words wait this long for the process that runs it (a call not live anywhere never takes them). */
const WORD_TTL_SECONDS = 600;
/** How often a process reads its calls' lists without being woken (a lost wake-up). */
const POLL_MS = 2_000;
/** How long `deliver` waits for the process that runs the call (it reads its lists every 2 s at worst). */
export const DELIVERY_TIMEOUT_MS = 5_000;
/** A reply waits this long for its sender. */
const REPLY_TTL_SECONDS = 60;
/** Replies a process remembers, so that a word Redis lost after it was taken (and sent again) is not applied twice. */
const REMEMBERED_REPLIES = 1_000;

/**
 * Takes a call's words in order, in one step: two readers never both get one. A word someone
 * waits for (`word_id`) is taken only while its sender still waits (its `pending` key), and its
 * reply key says `taken` at once; a withdrawn or late one is dropped.
 * KEYS[1] the list; ARGV[1] the key prefix, ARGV[2] the reply's TTL.
 */
const TAKE_SCRIPT = `
local words = redis.call('LRANGE', KEYS[1], 0, -1)
if #words == 0 then return words end
redis.call('DEL', KEYS[1])
local out = {}
for _, raw in ipairs(words) do
  local ok, word = pcall(cjson.decode, raw)
  local id = ok and type(word) == 'table' and word.word_id or nil
  if type(id) ~= 'string' then
    table.insert(out, raw)
  elseif redis.call('DEL', ARGV[1] .. 'call-control-pending:' .. id) == 1 then
    redis.call('SET', ARGV[1] .. 'call-control-reply:' .. id, 'taken', 'EX', ARGV[2])
    table.insert(out, raw)
  end
end
return out`;

/**
 * The sender's look at a word it waits for: its reply, if any; else, when the word is neither
 * waiting nor taken (Redis lost it in a restart), it is put back with the time left. The first
 * look sends it. KEYS: the list, pending, reply; ARGV: the word, ms left, the list's TTL.
 */
const LOOK_SCRIPT = `
local reply = redis.call('GET', KEYS[3])
if reply then return reply end
if redis.call('EXISTS', KEYS[2]) == 1 then return false end
redis.call('SET', KEYS[2], '1', 'PX', ARGV[2])
redis.call('RPUSH', KEYS[1], ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[3])
return 'sent'`;

/** The sender gives up: the reply if it came meanwhile, else the word is withdrawn. KEYS as above; ARGV[1] the word. */
const WITHDRAW_SCRIPT = `
local reply = redis.call('GET', KEYS[3])
if reply then return reply end
redis.call('DEL', KEYS[2])
redis.call('LREM', KEYS[1], 0, ARGV[1])
return false`;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A stored reply (`taken`: the word was taken and is being applied: as good as applied). */
function readReply(raw: string): ControlOutcome {
  if (raw === 'taken') return { kind: 'applied' };
  try {
    const reply = JSON.parse(raw) as ControlOutcome;
    if (reply && (reply.kind === 'applied' || reply.kind === 'not-live' || reply.kind === 'invalid')) return reply;
  } catch {
    // below
  }
  return { kind: 'applied' };
}

export class RedisCallControl implements CallControl {
  private readonly pub: Redis;
  private sub: Redis | null = null;
  private readonly channel: string;
  private poll: NodeJS.Timeout | null = null;
  private handler: ControlHandler | null = null;
  private liveCalls: (() => Iterable<string>) | null = null;
  /** The replies to words this process took, by word id (a word sent again after Redis lost it is answered, not applied again). */
  private readonly replies = new Map<string, ControlOutcome>();

  constructor(
    private readonly redis: RedisSource,
    private readonly log: Logger,
    private readonly prefix = 'sb:',
    private readonly deliveryTimeoutMs = DELIVERY_TIMEOUT_MS,
  ) {
    this.channel = `${prefix}call-control`;
    this.pub = RedisConnections.open(redis, 'call-control', { maxRetriesPerRequest: 3 });
    this.pub.on('error', () => undefined);
  }

  private listKey(callId: string): string {
    return `${this.prefix}call-control:${callId}`;
  }

  async send(callId: string, message: CallControlMessage): Promise<void> {
    // the list is what counts; the publish only wakes the processes
    await this.pub.multi().rpush(this.listKey(callId), JSON.stringify(message)).expire(this.listKey(callId), WORD_TTL_SECONDS).exec();
    await this.wake(callId);
  }

  async deliver(callId: string, message: CallControlMessage): Promise<Delivery> {
    const id = randomUUID();
    const word = JSON.stringify({ ...message, word_id: id });
    const keys = [this.listKey(callId), `${this.prefix}call-control-pending:${id}`, `${this.prefix}call-control-reply:${id}`];
    const deadline = Date.now() + this.deliveryTimeoutMs;
    const look = () => this.pub.eval(LOOK_SCRIPT, 3, ...keys, word, String(Math.max(1, deadline - Date.now())), String(WORD_TTL_SECONDS)) as Promise<string | null>;
    // the first look sends it: a Redis that does not take it fails the request, nothing was sent
    await look();
    await this.wake(callId);
    for (let wait = 5; Date.now() < deadline; wait = Math.min(wait * 2, 50)) {
      await sleep(Math.min(wait, Math.max(0, deadline - Date.now())));
      if (Date.now() >= deadline) break;
      let seen: string | null;
      try {
        seen = await look();
      } catch (err) {
        // Redis away a moment (a restart): look again until the deadline
        this.log.debug({ err, callId }, 'call control: could not look for the reply; looking again');
        continue;
      }
      if (seen === 'sent') {
        this.log.warn({ callId, kind: message.kind }, 'call control: Redis lost a word before it was taken (a restart); sent again');
        await this.wake(callId);
      } else if (seen !== null && seen !== 'taken') {
        return readReply(seen);
      }
    }
    // withdrawn unless taken meanwhile, in one step: a word given up on is never applied later
    const last = (await this.pub.eval(WITHDRAW_SCRIPT, 3, ...keys, word)) as string | null;
    return last === null ? { kind: 'not-taken' } : readReply(last);
  }

  private async wake(callId: string): Promise<void> {
    await this.pub.publish(this.channel, JSON.stringify({ callId })).catch(() => undefined);
  }

  async subscribe(handler: ControlHandler, liveCalls?: () => Iterable<string>): Promise<void> {
    this.handler = handler;
    this.liveCalls = liveCalls ?? null;
    this.sub ??= RedisConnections.open(this.redis, 'call-control:subscriber');
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
    for (const id of ids) batch.eval(TAKE_SCRIPT, 1, this.listKey(id), this.prefix, String(REPLY_TTL_SECONDS));
    const results = await batch.exec().catch(() => null);
    results?.forEach(([err, words], i) => {
      if (!err) this.deliverWords(ids[i]!, words as string[]);
    });
  }

  private async take(callId: string): Promise<void> {
    // without a list of its calls, every process would take every word: only the one running it may
    if (!this.handler || (this.liveCalls && ![...this.liveCalls()].includes(callId))) return;
    try {
      this.deliverWords(callId, (await this.pub.eval(TAKE_SCRIPT, 1, this.listKey(callId), this.prefix, String(REPLY_TTL_SECONDS))) as string[]);
    } catch (err) {
      this.log.warn({ err, callId }, 'call control: could not read the call\'s words; reading them again shortly');
    }
  }

  private deliverWords(callId: string, words: string[]): void {
    for (const raw of words) {
      let message: unknown;
      try {
        message = JSON.parse(raw);
      } catch {
        continue;
      }
      if (!isMessage(message) || !this.handler) continue;
      const id = (message as { word_id?: unknown }).word_id;
      if (typeof id !== 'string') {
        this.handler(callId, message);
        continue;
      }
      // a word taken before, sent again because Redis lost its reply: answered again, applied once
      const reply = this.replies.get(id) ?? this.remember(id, this.handler(callId, message));
      void this.pub.set(`${this.prefix}call-control-reply:${id}`, JSON.stringify(reply), 'EX', REPLY_TTL_SECONDS).catch((err: unknown) => {
        this.log.warn({ err, callId }, 'call control: could not give the sender its reply (it counts the word as applied)');
      });
    }
  }

  private remember(id: string, reply: ControlOutcome): ControlOutcome {
    this.replies.set(id, reply);
    if (this.replies.size > REMEMBERED_REPLIES) this.replies.delete(this.replies.keys().next().value!);
    return reply;
  }

  async close(): Promise<void> {
    if (this.poll) clearInterval(this.poll);
    await Promise.allSettled([this.pub.quit(), this.sub?.quit()]);
  }
}

/** Through Redis with the process's owner (or a URL), in process without. */
export function createCallControl(redis: RedisSource | null | undefined, log: Logger, deliveryTimeoutMs?: number): CallControl {
  return redis ? new RedisCallControl(redis, log, 'sb:', deliveryTimeoutMs) : new MemoryCallControl();
}
