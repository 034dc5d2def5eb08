import { defineConfig } from 'vitest/config';

/**
 * Two projects: `unit` (engine, API, store, providers, webhooks…) runs files in parallel; `calls`
 * (whole simulated phone calls, and the console in Chromium, in real time, where turn-taking is timed) runs one file at a time
 * so that CPU-heavy suites next to them cannot skew what they measure. `npm test` runs both.
 */
export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    projects: [
      {
        extends: true,
        test: { name: 'unit', include: ['test/**/*.test.ts'], exclude: ['test/calls/**', 'test/console/**', 'test/sip-harness/**'] },
      },
      {
        extends: true,
        // the console's test runs a web call in real time in Chromium, and the SIP harness's real
        // phones talk in real time: one file at a time too
        test: { name: 'calls', include: ['test/calls/**/*.test.ts', 'test/console/**/*.test.ts', 'test/sip-harness/**/*.test.ts'], fileParallelism: false },
      },
    ],
  },
});
