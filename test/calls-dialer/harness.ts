/**
 * What the dialer tests share: the places a dialer can run (BullMQ on the real Redis with a fresh
 * queue per test; in process on PGlite and on a fresh PostgreSQL database), and a fake call
 * service behind the hooks that counts live calls per organization and records every dial.
 */
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { InProcessDialer, type DialContext, type Dialer, type DialerHooks, type DialerOptions, type OutboundJob, type OutboundLimits } from '../../src/calls/dialer.js';
import { BullMqDialer } from '../../src/calls/dialer-bullmq.js';
import type { Db } from '../../src/store/db.js';
import { createPostgresDb as createTestPostgresDb, openMemoryDb, type TestDb } from '../helpers/db.js';

export const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
export const TEST_PREFIX = 'sbtest';
export const silent = pino({ level: 'silent' });

async function reachable(probe: () => Promise<void>): Promise<boolean> {
  try {
    await probe();
    return true;
  } catch {
    return false;
  }
}

export async function redisReachable(): Promise<boolean> {
  if (process.env.REDIS_URL) return true;
  const redis = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null, connectTimeout: 1_000 });
  redis.on('error', () => undefined);
  try {
    return await reachable(async () => {
      await redis.connect();
      await redis.ping();
    });
  } finally {
    redis.disconnect();
  }
}

/**
 * The PostgreSQL server to make test databases on: DATABASE_URL, else the local one CI and the
 * development machines run (the in-process dialer's PostgreSQL path and the kill test need it even
 * in the embedded-default run). Null when none answers.
 */
export async function postgresBase(): Promise<string | null> {
  if (process.env.DATABASE_URL) return process.env.DATABASE_URL;
  const url = 'postgres://postgres@127.0.0.1:5432/postgres';
  const ok = await reachable(async () => {
    const c = new pg.Client({ connectionString: url, connectionTimeoutMillis: 1_000 });
    await c.connect();
    await c.end();
  });
  return ok ? url : null;
}

export type PostgresTestDb = TestDb & { url: string };

/** A fresh database on `base`, migrated; `drop()` closes (if still open) and drops it. */
export const createPostgresDb = (base: string): Promise<PostgresTestDb> => createTestPostgresDb(base, 'sb_dialer');

export async function insertOrganization(db: Db): Promise<string> {
  const id = randomUUID();
  await db.query('INSERT INTO organizations (id, name) VALUES ($1, $2)', [id, `org ${id.slice(0, 8)}`]);
  return id;
}

export type PlaceKind = 'bullmq' | 'pglite' | 'postgres';

/** One test's dialers over one shared queue (a BullMQ queue name, or a database). */
export interface Place {
  kind: PlaceKind;
  /** A new dialer on this place's queue; several BullMQ ones act as several processes. */
  dialer(options?: Partial<DialerOptions>): Dialer;
  newOrg(): Promise<string>;
  /** Closes every dialer made here and empties the queue. */
  cleanup(): Promise<void>;
}

/** Short enough that retries do not slow the suite. */
export const FAST: Partial<DialerOptions> = { retryDelaysMs: [30, 60], fullRecheckMs: 100 };

/**
 * The places of one kind for a test file: BullMQ gets a fresh queue per test; the in-process
 * dialer shares one database per file (opening PGlite takes seconds) with its queue emptied
 * after each test (each test makes its own organizations).
 */
export interface Places {
  open(): Promise<Place>;
  close(): Promise<void>;
}

export async function placesOf(kind: PlaceKind, pgBase: string | null): Promise<Places> {
  if (kind === 'bullmq') {
    return {
      async open() {
        const made: Dialer[] = [];
        const queueName = `dialer-${randomUUID()}`;
        const make = (options: Partial<DialerOptions> = {}) =>
          new BullMqDialer({ redisUrl: REDIS_URL, queueName, prefix: TEST_PREFIX, logger: silent, ...FAST, ...options });
        return {
          kind,
          dialer(options) {
            const d = make(options);
            made.push(d);
            return d;
          },
          newOrg: async () => randomUUID(),
          async cleanup() {
            for (const d of made) await d.close();
            const cleaner = make();
            await cleaner.obliterate();
            await cleaner.close();
          },
        };
      },
      close: async () => undefined,
    };
  }
  let db: Db;
  let drop: () => Promise<void>;
  if (kind === 'pglite') {
    db = await openMemoryDb();
    drop = () => db.close();
  } else {
    if (!pgBase) throw new Error('no PostgreSQL server');
    const t = await createPostgresDb(pgBase);
    db = t.db;
    drop = t.drop;
  }
  return {
    async open() {
      const made: Dialer[] = [];
      return {
        kind,
        dialer(options) {
          const d = new InProcessDialer({ db, logger: silent, ...FAST, ...options });
          made.push(d);
          return d;
        },
        newOrg: () => insertOrganization(db),
        async cleanup() {
          for (const d of made) await d.close();
          await db.query('DELETE FROM outbound_queue');
        },
      };
    },
    close: drop,
  };
}

export interface DialRecord {
  callId: string;
  organizationId: string;
  at: number;
  attempt: number;
  /** Which dialer (index in `FakeCalls.dialers`) placed it. */
  by: number;
}

export interface FakeCallsOptions {
  limits?: (org: string) => OutboundLimits;
  /** How long a dialled call stays live before it ends and is released; null: until the test says. Default 0. */
  holdMs?: (job: OutboundJob) => number | null;
  /** Throws instead of dialling when it says so. */
  fails?: (job: OutboundJob, context: DialContext) => boolean;
  /** Default: live while the fake holds it. */
  isLive?: (callId: string) => boolean;
}

/**
 * The call service as the dialer sees it. Each dialled call counts as live in its organization
 * from `dial` until it ends; it is released (after it stops counting) on the dialer that placed it.
 */
export class FakeCalls {
  readonly dials: DialRecord[] = [];
  readonly failures: { callId: string; attempt: number }[] = [];
  readonly gaveUp: { job: OutboundJob; err: unknown }[] = [];
  readonly live = new Map<string, Set<string>>();
  readonly maxLive = new Map<string, number>();
  readonly dialers: Dialer[] = [];
  private readonly timers = new Set<NodeJS.Timeout>();

  constructor(private readonly options: FakeCallsOptions = {}) {}

  /** The hooks for `dialer`; start it with them. */
  hooksFor(dialer: Dialer): DialerHooks {
    const by = this.dialers.push(dialer) - 1;
    return {
      limits: async (org) => this.options.limits?.(org) ?? { maxConcurrentCalls: 10, callsPerSecond: 50 },
      dial: async (job, context) => {
        if (this.options.fails?.(job, context)) {
          this.failures.push({ callId: job.callId, attempt: context.attempt });
          throw new Error(`dial refused for ${job.callId}`);
        }
        const org = job.organizationId;
        const live = this.live.get(org) ?? new Set<string>();
        this.live.set(org, live);
        live.add(job.callId);
        this.maxLive.set(org, Math.max(this.maxLive.get(org) ?? 0, live.size));
        this.dials.push({ callId: job.callId, organizationId: org, at: Date.now(), attempt: context.attempt, by });
        const hold = this.options.holdMs ? this.options.holdMs(job) : 0;
        if (hold !== null) {
          const t = setTimeout(() => {
            this.timers.delete(t);
            void this.end(job.organizationId, job.callId, dialer);
          }, hold);
          this.timers.add(t);
        }
        return 'dialled';
      },
      isLive: async (callId) => this.options.isLive?.(callId) ?? [...this.live.values()].some((s) => s.has(callId)),
      onGaveUp: async (job, err) => void this.gaveUp.push({ job, err }),
    };
  }

  /** The call ends: it stops counting, then its slot is released. */
  async end(org: string, callId: string, dialer: Dialer): Promise<void> {
    this.live.get(org)?.delete(callId);
    await dialer.release(org, callId).catch(() => undefined);
  }

  dialsOf(org: string): DialRecord[] {
    return this.dials.filter((d) => d.organizationId === org);
  }

  /** Stops the pending call ends (tests end before them). */
  dispose(): void {
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
  }
}

export function jobsFor(org: string, n: number): OutboundJob[] {
  return Array.from({ length: n }, (_, i) => {
    const callId = randomUUID();
    return { callId, organizationId: org, record: { id: callId, status: 'queued', seq: i, customer: { number: `+1415555${String(1000 + i)}` } } };
  });
}

export async function waitFor(check: () => boolean | Promise<boolean>, timeoutMs = 15_000, what = 'condition'): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Busies this process's event loop for up to `maxMs` (at random) every `everyMs`; returns stop. */
export function stallLoop(maxMs: number, everyMs: number): () => void {
  const timer = setInterval(() => {
    const end = Date.now() + Math.random() * maxMs;
    while (Date.now() < end) {
      // busy: nothing else in this process runs
    }
  }, everyMs);
  return () => clearInterval(timer);
}
