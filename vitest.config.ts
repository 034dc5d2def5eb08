import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';

/**
 * Whole calls over real sockets whose assertions do not time the media (webhooks, e-mails, the
 * call log, the API and CLI around calls, restarts, isolation, tools, the vendors' wires, web
 * calls): they mostly wait on real time, so three run side by side (`calls-parallel`). The rest of
 * test/calls measures pacing, gaps or turn-taking (and the SIP phones and Chromium) and runs one
 * file at a time (`calls`), after them.
 */
const CALLS_PARALLEL = [
  'test/calls/call-cli.test.ts',
  'test/calls/call-log.test.ts',
  'test/calls/emails.test.ts',
  'test/calls/gdpr.test.ts',
  'test/calls/isolation.test.ts',
  'test/calls/latency.test.ts',
  'test/calls/media.test.ts',
  'test/calls/outbound.test.ts',
  'test/calls/outbound-restart.test.ts',
  'test/calls/provider-keys.test.ts',
  'test/calls/resilience.test.ts',
  'test/calls/start.test.ts',
  'test/calls/tools-transfer.test.ts',
  'test/calls/vendors.test.ts',
  'test/calls/web-call-stream.test.ts',
  'test/calls/web-call.test.ts',
];

/** vitest's default is one worker fewer than the cores: one on a 2-core machine, which made the unit project run a file at a time. */
const WORKERS = Math.max(2, availableParallelism() - 1);

/**
 * Three projects, run in this order (`sequence.groupOrder`): `unit` (engine, API, store,
 * providers, webhooks, the fast calls…) with files in parallel; `calls-parallel`, three files at
 * a time; `calls` (whole simulated phone calls, and the console in Chromium, in real time, where
 * turn-taking is timed), one file at a time so that CPU-heavy suites next to them cannot skew
 * what they measure. `npm test` runs `unit`, then `calls*` (docs/testing.md).
 */
export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    projects: [
      {
        extends: true,
        test: {
          name: 'unit',
          include: ['test/**/*.test.ts'],
          exclude: ['test/calls/**', 'test/console/**', 'test/sip-harness/**'],
          maxWorkers: WORKERS,
          sequence: { groupOrder: 0 },
        },
      },
      {
        extends: true,
        test: { name: 'calls-parallel', include: CALLS_PARALLEL, maxWorkers: 3, sequence: { groupOrder: 1 } },
      },
      {
        extends: true,
        // the console's test runs a web call in real time in Chromium, and the SIP harness's real
        // phones talk in real time: one file at a time too
        test: {
          name: 'calls',
          include: ['test/calls/**/*.test.ts', 'test/console/**/*.test.ts', 'test/sip-harness/**/*.test.ts'],
          exclude: CALLS_PARALLEL,
          fileParallelism: false,
          sequence: { groupOrder: 2 },
        },
      },
    ],
  },
});
