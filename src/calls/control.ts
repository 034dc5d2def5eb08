/**
 * Word to the process that runs a call, from whichever process heard it: a carrier's callback
 * (answering-machine detection) or `POST /calls/{id}/end` may reach any process of a deployment,
 * while the call's media runs in one. With REDIS_URL the word goes through Redis pub/sub to every
 * process and the one that has the call acts; in process it goes straight to the handler.
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
  /** Every message for any call; the handler ignores calls it does not run. */
  subscribe(handler: (callId: string, message: CallControlMessage) => void): Promise<void>;
  close(): Promise<void>;
}

export class MemoryCallControl implements CallControl {
  private readonly bus = new EventEmitter();

  async send(callId: string, message: CallControlMessage): Promise<void> {
    // asynchronously, as Redis would: the sender's own work finishes first
    setImmediate(() => this.bus.emit('message', callId, message));
  }

  async subscribe(handler: (callId: string, message: CallControlMessage) => void): Promise<void> {
    this.bus.on('message', handler);
  }

  async close(): Promise<void> {
    this.bus.removeAllListeners();
  }
}

const isMessage = (v: unknown): v is { callId: string; message: CallControlMessage } => {
  if (!v || typeof v !== 'object') return false;
  const { callId, message } = v as { callId?: unknown; message?: { kind?: unknown } };
  return typeof callId === 'string' && !!message && (message.kind === 'end' || message.kind === 'answered-by');
};

export class RedisCallControl implements CallControl {
  private readonly pub: Redis;
  private sub: Redis | null = null;
  private readonly channel: string;

  constructor(
    private readonly redisUrl: string,
    private readonly log: Logger,
    prefix = 'sb:',
  ) {
    this.channel = `${prefix}call-control`;
    this.pub = new Redis(redisUrl, { maxRetriesPerRequest: 3 });
    this.pub.on('error', () => undefined);
  }

  async send(callId: string, message: CallControlMessage): Promise<void> {
    await this.pub.publish(this.channel, JSON.stringify({ callId, message }));
  }

  async subscribe(handler: (callId: string, message: CallControlMessage) => void): Promise<void> {
    this.sub ??= new Redis(this.redisUrl);
    this.sub.on('error', (err) => this.log.warn({ err }, 'call-control subscription: Redis error'));
    this.sub.on('message', (_channel, raw: string) => {
      let parsed: unknown;
      try {
        parsed = JSON.parse(raw);
      } catch {
        return;
      }
      if (isMessage(parsed)) handler(parsed.callId, parsed.message);
    });
    await this.sub.subscribe(this.channel);
  }

  async close(): Promise<void> {
    await Promise.allSettled([this.pub.quit(), this.sub?.quit()]);
  }
}

export function createCallControl(redisUrl: string | undefined, log: Logger): CallControl {
  return redisUrl ? new RedisCallControl(redisUrl, log) : new MemoryCallControl();
}
