import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';

/**
 * Whole calls over real sockets whose assertions do not time the media (webhooks, e-mails, the
 * call log, the API and CLI around calls, restarts, outages, isolation, tools, the carriers' and
 * vendors' wires, web calls, SIP signalling, the dashboard's pages): they mostly wait on real time,
 * so three run side by side (`calls-parallel`). The rest of test/calls measures pacing, gaps or
 * turn-taking, or reads back what a phone, a recording or Chromium heard, and runs one file at a
 * time (`calls`), after them. Four at a time was tried: a little quicker, and a webhook's answer
 * was read in flight under load (docs/testing.md, "The third pass").
 */
const CALLS_PARALLEL = [
  'test/calls/call-cli.test.ts',
  'test/calls/call-log.test.ts',
  // two processes and a private Redis: waits on real time, measures none
  'test/calls/control.test.ts',
  'test/calls/emails.test.ts',
  'test/calls/gdpr.test.ts',
  'test/calls/isolation.test.ts',
  // Kamailio, two runtimes and a real SIP phone: signalling only (who took the call, 503s), no audio read back
  'test/calls/kamailio.test.ts',
  'test/calls/latency.test.ts',
  'test/calls/media.test.ts',
  // a private Redis restarted and PostgreSQL cut under live calls: waits on restarts, measures nothing
  'test/calls/outages.test.ts',
  'test/calls/outbound.test.ts',
  'test/calls/outbound-restart.test.ts',
  'test/calls/outbound-text.test.ts',
  'test/calls/provider-keys.test.ts',
  'test/calls/realtime.test.ts',
  'test/calls/resilience.test.ts',
  // counts 401s over UDP; timer H (3.2 s) is waited out with room to spare
  'test/calls/sip-reflection.test.ts',
  // a real SIP phone as the trunk: signalling, statuses and the report, no audio read back
  'test/calls/sip-outbound.test.ts',
  'test/calls/start.test.ts',
  'test/calls/telnyx.test.ts',
  'test/calls/test-suites-voice.test.ts',
  'test/calls/tools-transfer.test.ts',
  'test/calls/twilio-warm-transfer.test.ts',
  'test/calls/vendors.test.ts',
  'test/calls/web-call-flood.test.ts',
  'test/calls/web-call-stream.test.ts',
  'test/calls/web-call.test.ts',
  // every dashboard page in Chromium over a call recorded before: no live call, nothing timed
  'test/console/dashboard.test.ts',
];

/**
 * The unit files that cannot share a worker process with others (`unit-isolated`, a fresh process
 * each): what they check is the process itself, or they change something process-wide that a file
 * after them would see. Every other unit file runs in `unit`, without isolation.
 */
const UNIT_ISOLATED = [
  // patches ioredis's Redis.prototype.connect and counts every client of the process while a runtime starts
  'test/redis.test.ts',
  // start OpenTelemetry's Node SDK: its global tracer provider can be registered once a process
  'test/observability/tracing-json.test.ts',
  'test/observability/tracing-proto.test.ts',
  // reads the time the process's one Silero session took to load: loaded by a fast call before it,
  // that was on a fake clock (0 ms)
  'test/calls-unit/vad.test.ts',
  // count the process's sockets, timers or immediates before and after a case ("nothing left
  // behind"): in a shared worker, what an earlier file still has winding down counts too
  'test/providers/anthropic-llm.test.ts',
  'test/providers/cartesia-tts.test.ts',
  'test/providers/deepgram-tts.test.ts',
  'test/providers/deepgram.test.ts',
  'test/providers/elevenlabs.test.ts',
  'test/providers/google-llm.test.ts',
  'test/providers/openai-llm.test.ts',
  'test/providers/openai-tts.test.ts',
  'test/providers/sandbox-realtime.test.ts',
  'test/providers/sandbox-stt.test.ts',
  'test/providers/sandbox-tts.test.ts',
];

/** vitest's default is one worker fewer than the cores: one on a 2-core machine, which made the unit project run a file at a time. */
const WORKERS = Math.max(2, availableParallelism() - 1);

/**
 * Four projects, run in this order (`sequence.groupOrder`): `unit` (engine, API, store,
 * providers, webhooks, the fast calls…) with files in parallel; `unit-isolated`, the few unit files
 * listed in UNIT_ISOLATED above, a fresh process each; `calls-parallel`, three files at a time;
 * `calls` (whole simulated phone calls, and the console in Chromium, in real time, where
 * turn-taking is timed), one file at a time so that CPU-heavy suites next to them cannot skew
 * what they measure. `unit` and the two `calls` projects run without isolation: a worker loads the
 * modules (src, PGlite's WebAssembly, the models) once and runs its files one after another, each
 * file starting its own servers, instead of a new process and its imports (~5 s) per file. A file
 * goes to `unit-isolated` only when what it checks is the process itself, or it changes something
 * process-wide that cannot be put back; a file that leaks (a client or a server left open, a timer
 * left running) is fixed instead. `npm test` runs `unit*`, then `calls*` (docs/testing.md).
 */
export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // a folder for what the files of a run make once and share (test/helpers/run-cache.ts)
    globalSetup: ['test/global-setup.ts'],
    projects: [
      {
        extends: true,
        test: {
          name: 'unit',
          include: ['test/**/*.test.ts'],
          exclude: ['test/calls/**', 'test/console/**', 'test/sip-harness/**', ...UNIT_ISOLATED],
          maxWorkers: WORKERS,
          isolate: false,
          sequence: { groupOrder: 0 },
        },
      },
      {
        extends: true,
        // a group of its own: vitest ends a shared worker as soon as the next file in its queue is
        // an isolated one, so mixing the two in one group would start a process per file again
        test: { name: 'unit-isolated', include: UNIT_ISOLATED, maxWorkers: WORKERS, sequence: { groupOrder: 1 } },
      },
      {
        extends: true,
        test: { name: 'calls-parallel', include: CALLS_PARALLEL, maxWorkers: 3, isolate: false, sequence: { groupOrder: 2 } },
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
          isolate: false,
          sequence: { groupOrder: 3 },
        },
      },
    ],
  },
});
