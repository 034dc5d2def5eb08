/**
 * Listen-in across the processes of a deployment (docs/listen.md), through Redis: a listener's
 * socket may reach any process, while the call's audio is mixed in the one that runs it.
 *
 * - One-time tokens (`sb:listen-token:<sha256 of the token>` → the call id, 60 s), taken in one
 *   step by whichever process the socket reaches.
 * - The listener's process subscribes to the call's channel (`sb:listen:<call id>`), then asks for
 *   it on `sb:listen-wake` (and again each second while nothing arrives). The call's process
 *   publishes the call there only from that wake on, and stops as soon as a publish reaches
 *   nobody (Redis says how many subscribers got it): a call nobody listens to costs nothing.
 *
 * A message on a call's channel is one byte of kind and its payload: `a` whole 640-byte stereo
 * frames, `e` one JSON event, `x` the end of the call.
 */
import type { Redis } from 'ioredis';
import { RedisConnections, type RedisSource } from '../redis.js';
import type { Logger } from 'pino';

export const RELAY_AUDIO = 0x61; // 'a'
export const RELAY_EVENT = 0x65; // 'e'
export const RELAY_END = 0x78; // 'x'

/** Takes a token's call id and deletes it in one step: two sockets never both get one token. */
const TAKE_SCRIPT = `
local v = redis.call('GET', KEYS[1])
if v then redis.call('DEL', KEYS[1]) end
return v`;

export class RedisListenRelay {
  private readonly pub: Redis;
  private readonly sub: Redis;
  private readonly wakeChannel: string;
  private readonly followed = new Map<string, (message: Buffer) => void>();
  private onWake: ((callId: string) => void) | null = null;
  private closed = false;

  constructor(
    redis: RedisSource,
    private readonly log: Logger,
    private readonly prefix = 'sb:',
  ) {
    this.wakeChannel = `${prefix}listen-wake`;
    this.pub = RedisConnections.open(redis, 'listen-in', { maxRetriesPerRequest: 3 });
    this.pub.on('error', () => undefined);
    this.sub = RedisConnections.open(redis, 'listen-in:subscriber');
    this.sub.on('error', (err) => this.log.warn({ err }, 'listen-in relay: Redis error'));
    this.sub.on('messageBuffer', (channel: Buffer, message: Buffer) => this.received(channel.toString(), message));
  }

  /** Wakes for calls (of any process: the handler ignores those it does not run) go to `onWake` from now on. */
  async start(onWake: (callId: string) => void): Promise<void> {
    this.onWake = onWake;
    await this.sub.subscribe(this.wakeChannel);
  }

  channel(callId: string): string {
    return `${this.prefix}listen:${callId}`;
  }

  async putToken(hash: string, callId: string, ttlSeconds: number): Promise<void> {
    await this.pub.set(`${this.prefix}listen-token:${hash}`, callId, 'EX', ttlSeconds);
  }

  async takeToken(hash: string): Promise<string | null> {
    const value = await this.pub.eval(TAKE_SCRIPT, 1, `${this.prefix}listen-token:${hash}`);
    return typeof value === 'string' ? value : null;
  }

  /** Publishes on the call's channel: how many subscribers got it (0: nobody listens any more). */
  publish(callId: string, message: Buffer): Promise<number> {
    return this.pub.publish(this.channel(callId), message);
  }

  /** Asks the process that runs the call to publish it. */
  async wake(callId: string): Promise<void> {
    await this.pub.publish(this.wakeChannel, callId);
  }

  /** The call's messages go to `handler` until the returned function is called. */
  async follow(callId: string, handler: (message: Buffer) => void): Promise<() => void> {
    const channel = this.channel(callId);
    this.followed.set(channel, handler);
    try {
      await this.sub.subscribe(channel);
    } catch (err) {
      this.followed.delete(channel);
      throw err;
    }
    return () => {
      if (this.followed.get(channel) !== handler) return;
      this.followed.delete(channel);
      if (!this.closed) void this.sub.unsubscribe(channel).catch(() => undefined);
    };
  }

  private received(channel: string, message: Buffer): void {
    try {
      if (channel === this.wakeChannel) this.onWake?.(message.toString('utf8'));
      else this.followed.get(channel)?.(message);
    } catch (err) {
      this.log.warn({ err, channel }, 'listen-in relay: a message could not be handled');
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    this.followed.clear();
    await Promise.allSettled([this.pub.quit(), this.sub.quit()]);
  }
}
