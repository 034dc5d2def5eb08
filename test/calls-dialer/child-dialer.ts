/**
 * The process the kill test kills (restart.test.ts): queues a campaign and dials it at a low rate
 * until SIGKILL. `node --import tsx test/calls-dialer/child-dialer.ts`, configured by environment:
 * DIALER_MODE (bullmq | sql), DIALER_CALLS (comma-separated call ids), DIALER_ORG, DIALER_CPS,
 * DIALER_MAX, DIALER_HANG_AFTER, and REDIS_URL + DIALER_QUEUE + DIALER_PREFIX (bullmq) or DIALER_DATABASE_URL (sql).
 */
import { pino } from 'pino';
import { BullMqDialer } from '../../src/calls/dialer-bullmq.js';
import { InProcessDialer, type Dialer, type OutboundJob } from '../../src/calls/dialer.js';
import { openDb } from '../../src/store/db.js';
import { dialLogHooks, redisDialLog, sqlDialLog, type DialLog } from './dial-log.js';

const env = (name: string): string => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set`);
  return v;
};

const org = env('DIALER_ORG');
const jobs: OutboundJob[] = env('DIALER_CALLS')
  .split(',')
  .map((callId, i) => ({ callId, organizationId: org, record: { id: callId, status: 'queued', seq: i } }));
const limits = { maxConcurrentCalls: Number(env('DIALER_MAX')), callsPerSecond: Number(env('DIALER_CPS')) };
const logger = pino({ level: 'silent' });

let dialer: Dialer;
let log: DialLog;
if (env('DIALER_MODE') === 'bullmq') {
  const queueName = env('DIALER_QUEUE');
  const prefix = env('DIALER_PREFIX');
  dialer = new BullMqDialer({
    redisUrl: env('REDIS_URL'),
    queueName,
    prefix,
    logger,
    // short, so that the test process gets this one's jobs back soon after the kill
    lockDurationMs: 1_500,
    stalledIntervalMs: 500,
    dialClaimMs: 1_500,
  });
  log = redisDialLog(env('REDIS_URL'), `${prefix}:${queueName}`);
} else {
  const db = await openDb({ databaseUrl: env('DIALER_DATABASE_URL') });
  dialer = new InProcessDialer({ db, logger });
  log = await sqlDialLog(db);
}
await dialer.enqueue(jobs);
// the test kills this process once DIALER_HANG_AFTER dials are recorded: the last one is mid-dial
await dialer.start(dialLogHooks(log, dialer, limits, { hangAfterDial: Number(env('DIALER_HANG_AFTER')) }));
process.stdout.write('dialling\n');
// runs until killed
setInterval(() => undefined, 60_000);
