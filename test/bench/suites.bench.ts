/**
 * Test-suite speed: `npm run bench:suites [-- --tests 50 --rounds 3]`.
 *
 * Starts the real app with its runtime on a listening port (in-memory PGlite; PostgreSQL when
 * DATABASE_URL is set; sandbox providers), writes a suite of `--tests` chat tests made from the
 * tests of examples/test-suite-front-desk.json (scripts with a tool node and an assistant tool
 * answered by `tool_results`, a global node, simulated callers with a judge), and runs it with the
 * real command (`src/cli/test-suite.ts --file`, which creates the assistant, workflow and suite,
 * runs it, polls to the end and deletes what it made) `--rounds` times. Prints, per round, the
 * command's own time (its summary line), the run's time on the server, and the wall time of the
 * command's process. Exits non-zero when a test failed, or a round took 10 s or more.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { buildApp } from '../../src/app.js';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/logger.js';
import { freePort } from '../../src/net.js';
import { createRuntime } from '../../src/runtime.js';
import { createStore } from '../../src/store/index.js';
import { createTestDb, defaultDbKind } from '../helpers/db.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const LIMIT_MS = 10_000;

const { values } = parseArgs({ options: { tests: { type: 'string', default: '50' }, rounds: { type: 'string', default: '3' } } });
const TESTS = Number(values.tests);
const ROUNDS = Number(values.rounds);

/** The example's tests, repeated (names numbered) up to `count`. */
export function benchSuite(count: number): Record<string, unknown> {
  const example = JSON.parse(readFileSync(path.join(ROOT, 'examples/test-suite-front-desk.json'), 'utf8')) as { tests: Array<{ name: string; mode?: string }> };
  const chat = example.tests.filter((t) => (t.mode ?? 'chat') === 'chat');
  const tests = Array.from({ length: count }, (_, i) => ({ ...chat[i % chat.length]!, name: `${chat[i % chat.length]!.name} #${i + 1}` }));
  return { ...example, name: `${count} chat tests`, tests };
}

function runCommand(file: string, env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string; wallMs: number }> {
  const started = Date.now();
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/test-suite.ts', '--file', file], { cwd: ROOT, env: { ...process.env, ...env } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('close', (code) => resolve({ code, stdout, stderr, wallMs: Date.now() - started }));
  });
}

async function main(): Promise<number> {
  const testDb = await createTestDb(defaultDbKind());
  const port = await freePort();
  const config = loadConfig({ LOG_LEVEL: 'silent', PORT: String(port), RATE_LIMIT_PER_MINUTE: '0' });
  const logger = createLogger('silent');
  const store = createStore(testDb.db);
  const runtime = await createRuntime({ config, store, logger, webhookQueueName: `bench-suites-${port}` });
  const app = await buildApp({ config, store, logger, runtime });
  await app.listen({ port, host: '127.0.0.1' });
  const { key } = await store.keys.createKey('Bench suites');
  const dir = mkdtempSync(path.join(tmpdir(), 'sb-bench-suites-'));
  const file = path.join(dir, 'suite.json');
  writeFileSync(file, JSON.stringify(benchSuite(TESTS)));
  let failed = false;
  try {
    process.stdout.write(`bench:suites: ${TESTS} chat tests (sandbox), ${ROUNDS} rounds, on ${testDb.db.kind}, node ${process.version}\n`);
    for (let round = 1; round <= ROUNDS; round++) {
      const r = await runCommand(file, { SWITCHBOARD_URL: `http://127.0.0.1:${port}`, SWITCHBOARD_API_KEY: key });
      const summary = /^(\d+) tests: (\d+) passed, (\d+) failed in ([\d.]+) s \(the run took ([\d.]+) s on the server\)$/m.exec(r.stdout);
      if (r.code !== 0 || !summary) {
        process.stdout.write(`round ${round}: the command exited ${r.code}\n${r.stdout}${r.stderr}`);
        failed = true;
        continue;
      }
      const commandMs = Number(summary[4]) * 1000;
      process.stdout.write(
        `round ${round}: ${summary[2]}/${summary[1]} passed; the command ${summary[4]} s, the run on the server ${summary[5]} s, the process ${(r.wallMs / 1000).toFixed(2)} s\n`,
      );
      if (commandMs >= LIMIT_MS) failed = true;
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
    await runtime.close(0);
    await app.close();
    await testDb.drop();
  }
  return failed ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`bench:suites: ${(err as Error).stack ?? String(err)}\n`);
    process.exit(1);
  },
);
