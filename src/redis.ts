/**
 * The one owner of the process's Redis connections (REDIS_URL; docs/queues.md): every module that
 * talks to Redis (call sessions, chats, the outbox, call control, the listen-in relay, the queues
 * and the dialler) asks it for a named connection instead of opening its own. It knows each one,
 * says which are open (`connections()`), and closes every one left at shutdown (`close()`), the
 * connections BullMQ duplicates for its workers included.
 *
 *   const redis = new RedisConnections(config.REDIS_URL, logger);
 *   const sessions = redis.open('call-sessions', { maxRetriesPerRequest: 3 });
 *   const queue = new Queue(name, { connection: redis.forBullMq('webhooks') });
 *   await redis.close(); // last, after the modules that use them
 */
import { Redis, type RedisOptions } from 'ioredis';
import type { Logger } from 'pino';

export interface RedisConnectionInfo {
  name: string;
  /** ioredis's status: `connecting`, `ready`, `reconnecting`, `end`… */
  status: string;
}

/** A module's Redis: the process's owner, or a URL for a connection of its own (tools, tests). */
export type RedisSource = RedisConnections | string;

interface Owned {
  name: string;
  client: Redis;
}

export class RedisConnections {
  private readonly owned: Owned[] = [];
  private closing: Promise<void> | null = null;

  constructor(
    readonly url: string,
    private readonly logger?: Logger,
  ) {}

  /**
   * A new connection named `name` (shown by `connections()` and, as `switchboard:<name>`, by
   * Redis's CLIENT LIST). Errors are logged at warn level unless the caller's options say otherwise.
   */
  open(name: string, options: RedisOptions = {}): Redis {
    if (this.closing) throw new Error(`Redis connection "${name}" asked for after shutdown`);
    const client = new Redis(this.url, { connectionName: `switchboard:${name}`, ...options });
    this.adopt(name, client);
    return client;
  }

  /**
   * A connection for a BullMQ `Queue` or `Worker`, with the options BullMQ gives the connections it
   * makes itself (`maxRetriesPerRequest: null`, its reconnection pace). BullMQ leaves a given
   * connection open and duplicates it for a worker's blocking reads: the duplicates are made here
   * too, so the owner knows and closes them as well.
   */
  forBullMq(name: string): Redis {
    const client = this.open(name, { maxRetriesPerRequest: null, retryStrategy: (times) => Math.max(Math.min(Math.exp(times), 20_000), 1_000) });
    this.duplicatesOwned(name, client);
    return client;
  }

  /** Where a module's connection comes from: the owner's `open`, or a connection of its own from a URL. */
  static open(source: RedisSource, name: string, options: RedisOptions = {}): Redis {
    return typeof source === 'string' ? new Redis(source, options) : source.open(name, options);
  }

  /** Every connection made so far and its state (closed ones included). */
  connections(): RedisConnectionInfo[] {
    return this.owned.map(({ name, client }) => ({ name, status: client.status }));
  }

  /** Connections not yet ended. */
  get openCount(): number {
    return this.owned.filter(({ client }) => client.status !== 'end').length;
  }

  /** Closes every connection still open (QUIT, else a disconnect); idempotent. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      await Promise.allSettled(this.owned.map(({ client }) => endConnection(client)));
      const left = this.openCount;
      if (left > 0) this.logger?.warn({ left }, 'Redis connections still open after close');
    })();
    return this.closing;
  }

  private adopt(name: string, client: Redis): void {
    this.owned.push({ name, client });
    // an owned connection always has a listener: an unhandled 'error' would end the process
    // (logged here only when the module that uses it does not listen itself)
    client.on('error', (err) => {
      if (client.listenerCount('error') === 1) this.logger?.warn({ err, connection: name }, 'Redis connection error');
    });
  }

  private duplicatesOwned(name: string, client: Redis): void {
    let n = 0;
    client.duplicate = (override?: Partial<RedisOptions>): Redis => {
      if (this.closing) throw new Error(`Redis connection "${name}" duplicated after shutdown`);
      n += 1;
      // BullMQ names its blocking connections itself (its getWorkers() reads those names)
      const copy = new Redis(this.url, { ...client.options, connectionName: `switchboard:${name}:${n}`, ...override });
      this.adopt(`${name}#${n}`, copy);
      this.duplicatesOwned(`${name}#${n}`, copy);
      return copy;
    };
  }
}

/** QUIT (pending replies first), or a disconnect when Redis does not answer it; resolves once the socket is closed. */
export async function endConnection(client: Redis): Promise<void> {
  if (client.status === 'end') return;
  if (client.status === 'reconnecting') {
    // between two tries there is no socket to close, and ioredis never says 'end' (BullMQ does the same)
    client.disconnect();
    (client as unknown as { status: string }).status = 'end';
    return;
  }
  const ended = new Promise<void>((resolve) => client.once('end', () => resolve()));
  if (client.status === 'ready') {
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([client.quit(), new Promise((_, reject) => (timer = setTimeout(() => reject(new Error('QUIT timed out')), 2_000)))]);
    } catch {
      client.disconnect();
    } finally {
      clearTimeout(timer);
    }
  } else {
    client.disconnect();
  }
  // QUIT's reply comes before the socket closes: the connection ends a moment later
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([ended, new Promise<void>((resolve) => (timer = setTimeout(resolve, 2_000)))]);
  clearTimeout(timer);
  if ((client.status as string) !== 'end') client.disconnect();
}
