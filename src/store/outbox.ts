/**
 * The outbox (DECISIONS 22): database writes that must not be lost, kept while PostgreSQL does
 * not answer and written, in the order they were made, once it does. A write goes straight to
 * the database when nothing waits before it; otherwise (or when the database is down) it is kept
 * here: in this process's memory, and for a crash in Redis (`sb:outbox:<worker>`, a list) or,
 * when Redis is down too, in a file under DATA_DIR (`outbox/<host>-<pid>-<worker>.jsonl`). It is
 * bounded (`maxEntries`); past that a write is dropped, logged and counted. A process that starts
 * takes over what a dead one left (its Redis list once its alive key expired, its file once its
 * process is gone or its file untouched for 5 minutes).
 */
import { appendFileSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import path from 'node:path';
import type { Redis } from 'ioredis';
import { RedisConnections } from '../redis.js';
import type { Logger } from 'pino';
import { isOutage } from './outage.js';

interface Entry {
  seq: number;
  kind: string;
  key: string;
  payload: unknown;
  /** Unix ms when the write was first tried. */
  at: number;
}

interface Held extends Entry {
  where: 'redis' | 'file' | 'memory';
  raw: string;
}

export type OutboxEvent = 'deferred' | 'written' | 'dropped';

export interface OutboxOptions {
  logger: Logger;
  workerId: string;
  redisUrl?: string | undefined;
  /** The process's Redis owner (the runtime's); wins over `redisUrl`. */
  redis?: RedisConnections | null;
  /** DATA_DIR: where the file goes when Redis is down too (null: memory only, tests). */
  dataDir?: string | null;
  /** Entries kept at most; default 100,000. */
  maxEntries?: number;
  /** How often the kept writes are tried again; default 1 s. */
  flushEveryMs?: number;
  prefix?: string;
  onEvent?(event: OutboxEvent, kind: string): void;
}

type Apply = (payload: never) => Promise<void>;

const ALIVE_SECONDS = 30;
const ORPHAN_FILE_MS = 5 * 60_000;

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

export class Outbox {
  private readonly appliers = new Map<string, Apply>();
  private readonly held: Held[] = [];
  private seq = 0;
  private timer: NodeJS.Timeout | null = null;
  private flushing: Promise<void> | null = null;
  private readonly redis: Redis | null;
  private readonly listKey: string;
  private readonly aliveKey: string;
  private readonly dir: string | null;
  private readonly file: string | null;
  private readonly max: number;
  private closed = false;
  private readonly log: Logger;

  constructor(private readonly o: OutboxOptions) {
    this.log = o.logger.child({ component: 'outbox' });
    const prefix = o.prefix ?? 'sb:';
    this.listKey = `${prefix}outbox:${o.workerId}`;
    this.aliveKey = `${prefix}outbox-alive:${o.workerId}`;
    // fails at once while Redis is down: the write then goes to the file
    const redis = o.redis ?? o.redisUrl;
    this.redis = redis ? RedisConnections.open(redis, 'outbox', { maxRetriesPerRequest: 1, enableOfflineQueue: false }) : null;
    this.redis?.on('error', () => undefined);
    this.dir = o.dataDir ? path.resolve(o.dataDir, 'outbox') : null;
    this.file = this.dir ? path.join(this.dir, `${hostname()}-${process.pid}-${o.workerId}.jsonl`) : null;
    this.max = o.maxEntries ?? 100_000;
  }

  /** How the kept writes of `kind` are made (the same function as the direct write). */
  register<T>(kind: string, apply: (payload: T) => Promise<void>): void {
    this.appliers.set(kind, apply as Apply);
  }

  /** Writes kept, not yet in the database. */
  get pending(): number {
    return this.held.length;
  }

  /**
   * Writes now, or keeps the write when earlier ones still wait (their order is kept) or the
   * database does not answer. Throws only what is not an outage (a defect, bad data).
   */
  async submit<T>(kind: string, key: string, payload: T): Promise<'written' | 'deferred'> {
    const apply = this.appliers.get(kind);
    if (!apply) throw new Error(`outbox: no writer for "${kind}"`);
    if (this.held.length === 0) {
      try {
        await apply(payload as never);
        return 'written';
      } catch (err) {
        if (!isOutage(err)) throw err;
        this.log.warn({ err, kind, key }, 'the database did not answer: the write is kept in the outbox and retried');
      }
    }
    await this.keep({ seq: ++this.seq, kind, key, payload, at: Date.now() });
    return 'deferred';
  }

  /** Takes over what dead processes left, then retries kept writes every `flushEveryMs`. */
  async start(): Promise<void> {
    const redis = this.redis;
    if (redis && redis.status !== 'ready') {
      // at most 2 s: a Redis that is down leaves the outbox to the file
      await new Promise<void>((resolve) => {
        const done = () => (clearTimeout(timer), redis.off('ready', done), resolve());
        const timer = setTimeout(done, 2_000);
        redis.once('ready', done);
      });
    }
    await this.adopt();
    const every = this.o.flushEveryMs ?? 1_000;
    this.timer = setInterval(() => void this.flush(), every);
    this.timer.unref();
    if (this.held.length > 0) void this.flush();
  }

  /** Writes what is kept, in order, until the database stops answering; never throws. */
  flush(): Promise<void> {
    this.flushing ??= this.flushHeld().finally(() => (this.flushing = null));
    return this.flushing;
  }

  /** A last flush; what is still kept stays in Redis or the file for the next process. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    await this.flush();
    if (this.held.length > 0) this.log.warn({ pending: this.held.length }, 'closing with writes still kept in the outbox: the next start writes them');
    else await this.redis?.del(this.aliveKey).catch(() => undefined);
    this.redis?.disconnect();
  }

  private async keep(entry: Entry): Promise<void> {
    if (this.held.length >= this.max) {
      this.log.error({ kind: entry.kind, key: entry.key, maxEntries: this.max }, 'the outbox is full: a write is dropped');
      this.o.onEvent?.('dropped', entry.kind);
      return;
    }
    const raw = JSON.stringify(entry);
    let where: Held['where'] = 'memory';
    if (this.redis?.status === 'ready') {
      try {
        await this.redis.multi().rpush(this.listKey, raw).set(this.aliveKey, '1', 'EX', ALIVE_SECONDS).exec();
        where = 'redis';
      } catch {
        // Redis is down too: the file below
      }
    }
    if (where === 'memory' && this.file) {
      try {
        mkdirSync(this.dir!, { recursive: true });
        appendFileSync(this.file, `${raw}\n`);
        where = 'file';
      } catch (err) {
        this.log.error({ err, kind: entry.kind }, 'the outbox file could not be written: the write is kept in memory only');
      }
    }
    this.held.push({ ...entry, where, raw });
    this.o.onEvent?.('deferred', entry.kind);
  }

  private async flushHeld(): Promise<void> {
    if (this.held.length === 0) return;
    await this.redis?.set(this.aliveKey, '1', 'EX', ALIVE_SECONDS).catch(() => undefined);
    if (this.file) {
      try {
        const now = new Date();
        utimesSync(this.file, now, now);
      } catch {
        // no file yet
      }
    }
    let written = 0;
    const fileBefore = this.held.some((h) => h.where === 'file');
    while (this.held.length > 0) {
      const entry = this.held[0]!;
      const apply = this.appliers.get(entry.kind);
      try {
        if (!apply) throw new Error(`no writer for "${entry.kind}"`);
        await apply(entry.payload as never);
        this.o.onEvent?.('written', entry.kind);
      } catch (err) {
        if (isOutage(err)) break;
        this.log.error({ err, kind: entry.kind, key: entry.key }, 'a kept write failed for good (not an outage): it is dropped');
        this.o.onEvent?.('dropped', entry.kind);
      }
      this.held.shift();
      written++;
      if (entry.where === 'redis') await this.redis!.lrem(this.listKey, 1, entry.raw).catch(() => undefined);
    }
    if (fileBefore) this.rewriteFile();
    if (written > 0) this.log.info({ written, left: this.held.length }, 'outbox: kept writes made');
  }

  /** The file holds exactly the kept entries that live in it. */
  private rewriteFile(): void {
    if (!this.file) return;
    const lines = this.held.filter((h) => h.where === 'file').map((h) => `${h.raw}\n`);
    try {
      if (lines.length === 0) rmSync(this.file, { force: true });
      else {
        writeFileSync(`${this.file}.tmp`, lines.join(''));
        renameSync(`${this.file}.tmp`, this.file);
      }
    } catch (err) {
      this.log.warn({ err }, 'the outbox file could not be rewritten');
    }
  }

  /** Entries left by dead processes (and by this one's previous runs) become this one's, in their order. */
  private async adopt(): Promise<void> {
    const found: Entry[] = [];
    if (this.dir) {
      let names: string[] = [];
      try {
        names = readdirSync(this.dir).filter((n) => n.endsWith('.jsonl'));
      } catch {
        // no folder: nothing left behind
      }
      for (const name of names) {
        const full = path.join(this.dir, name);
        if (full === this.file) continue;
        const [host, pidText] = name.split('-');
        const pid = Number(pidText);
        let stale = false;
        try {
          stale = Date.now() - statSync(full).mtimeMs > ORPHAN_FILE_MS;
        } catch {
          continue;
        }
        const dead = host === hostname() && Number.isInteger(pid) && (pid === process.pid || !pidAlive(pid));
        if (!dead && !stale) continue;
        const mine = `${full}.adopting-${this.o.workerId}`;
        try {
          renameSync(full, mine); // one process wins the file
        } catch {
          continue;
        }
        found.push(...this.parse(readFileSync(mine, 'utf8').split('\n')));
        rmSync(mine, { force: true });
      }
    }
    if (this.redis?.status === 'ready') {
      try {
        const prefix = this.listKey.slice(0, this.listKey.lastIndexOf(':') + 1);
        let cursor = '0';
        do {
          const [next, keys] = await this.redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 200);
          cursor = next;
          for (const key of keys) {
            if (key === this.listKey) continue;
            const worker = key.slice(prefix.length);
            if (await this.redis.exists(this.aliveKey.replace(this.o.workerId, worker))) continue;
            const claimed = `${key}:adopting:${this.o.workerId}`;
            // RENAME is atomic: one process takes the list
            if ((await this.redis.renamenx(key, claimed).catch(() => 0)) !== 1) continue;
            found.push(...this.parse(await this.redis.lrange(claimed, 0, -1)));
            await this.redis.del(claimed);
          }
        } while (cursor !== '0');
      } catch (err) {
        this.log.warn({ err }, 'outbox: could not look for writes left in Redis by other processes');
      }
    }
    if (found.length === 0) return;
    found.sort((a, b) => a.at - b.at || a.seq - b.seq);
    this.log.warn({ entries: found.length }, 'outbox: taking over writes kept by a process that stopped');
    for (const e of found) await this.keep({ ...e, seq: ++this.seq });
  }

  private parse(lines: string[]): Entry[] {
    const out: Entry[] = [];
    for (const line of lines) {
      if (!line.trim()) continue;
      try {
        out.push(JSON.parse(line) as Entry);
      } catch {
        this.log.error('outbox: an unreadable entry was skipped');
      }
    }
    return out;
  }
}
