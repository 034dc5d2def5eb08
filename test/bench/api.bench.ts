/**
 * REST API load check: `npm run bench:api`.
 *
 * Starts the real app on a listening port in a child process (so that the load generator and the
 * server each have a core), on an in-memory PGlite and, when DATABASE_URL is set, also on a fresh
 * PostgreSQL database. With the rate limit off, it seeds 20 workflows with a 50-node definition,
 * then runs autocannon for BENCH_DURATION seconds (default 10) on each of
 *   GET  /workflows   (20 workflows present: the organization's summaries)
 *   POST /workflows   (the 50-node definition: validation + insert)
 * and prints requests/s, p50/p99 latency, non-2xx responses and errors. It exits non-zero if any
 * request failed or answered anything but 2xx.
 */
import { fork, type ChildProcess } from 'node:child_process';
import os from 'node:os';
import type { AddressInfo } from 'node:net';
import { pathToFileURL } from 'node:url';
import { buildApp } from '../../src/app.js';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/logger.js';
import { createStore } from '../../src/store/index.js';
import { createTestDb, type DbKind } from '../helpers/db.js';

const DURATION = Number(process.env.BENCH_DURATION ?? 10);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 10);
const SEEDED_WORKFLOWS = 20;
const NODES = 50;

// ---------------------------------------------------------------------------------------------
// The workload

/**
 * 50 nodes, valid per DECISIONS 3: a chain of 46 conversation nodes (each may also end the call),
 * then a tool node and a transfer, a global help node and an end node; 94 edges.
 */
export function fiftyNodeDefinition() {
  const steps = NODES - 4;
  const step = (i: number) => `step_${i}`;
  const nodes: Record<string, unknown>[] = [];
  const edges: Record<string, unknown>[] = [];
  for (let i = 0; i < steps; i++) {
    nodes.push({
      id: step(i),
      type: 'conversation',
      first_line: `Welcome to step ${i}. How can I help you with it?`,
      instructions: `You are handling step ${i} of the support process. Ask the caller the questions of this step, answer briefly, and move on when the caller is done.`,
      ...(i % 10 === 5 ? { tts_config: { provider: 'sandbox', voice_id: 'sandbox' } } : {}),
    });
    if (i < steps - 1) {
      edges.push({ from: step(i), to: step(i + 1), description: `The caller has finished step ${i}.` });
      edges.push({ from: step(i), to: 'goodbye', description: 'The caller wants to end the call.', message: 'Of course.' });
    }
  }
  nodes.push(
    { id: 'lookup', type: 'tool', tool_name: 'lookup_account', url: 'https://tools.example.com/lookup', arguments: { source: 'phone', priority: 1 } },
    { id: 'human', type: 'transfer', first_line: 'Putting you through now.', destination: '+14155550123' },
    {
      id: 'help',
      type: 'conversation',
      global: true,
      global_description: 'The caller asks what this line can do.',
      instructions: 'List what the line can help with, then go back to the start.',
    },
    { id: 'goodbye', type: 'end', first_line: 'Thank you for calling. Goodbye!' },
  );
  edges.push(
    { from: step(steps - 1), to: 'lookup', description: 'The caller wants their account looked up.' },
    { from: step(steps - 1), to: 'human', description: 'The caller wants a person.' },
    { from: 'lookup', to: 'goodbye' },
    { from: 'help', to: step(0), description: 'The caller is ready to start.' },
  );
  return {
    version: 1,
    entry_node: step(0),
    global_prompt: 'You are the friendly phone assistant of Example Corp. Keep answers short.',
    nodes,
    edges,
  };
}

// ---------------------------------------------------------------------------------------------
// The server (child process)

interface Ready {
  port: number;
  key: string;
  database: string;
}

async function serve(kind: DbKind): Promise<void> {
  const testDb = await createTestDb(kind);
  const store = createStore(testDb.db);
  const config = loadConfig({ LOG_LEVEL: 'silent', RATE_LIMIT_PER_MINUTE: '0' });
  const app = await buildApp({ config, store, logger: createLogger(config.LOG_LEVEL) });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const { key } = await store.keys.createKey('Bench');
  const ready: Ready = { port: (app.server.address() as AddressInfo).port, key, database: store.db.kind };
  process.send!(ready);
  process.on('message', (message) => {
    if (message !== 'stop') return;
    void (async () => {
      await app.close();
      await testDb.drop();
      process.exit(0);
    })();
  });
}

// ---------------------------------------------------------------------------------------------
// The load generator (parent process)

interface Histogram {
  average: number;
  mean: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  total: number;
}
interface AutocannonResult {
  requests: Histogram;
  latency: Histogram;
  throughput: Histogram;
  errors: number;
  timeouts: number;
  non2xx: number;
  mismatches: number;
  '2xx': number;
  duration: number;
}
type Autocannon = (options: Record<string, unknown>) => Promise<AutocannonResult>;

interface Row {
  database: string;
  endpoint: string;
  result: AutocannonResult;
}

function startServer(kind: DbKind): Promise<{ child: ChildProcess; ready: Ready }> {
  const child = fork(process.argv[1]!, ['--serve', kind], { execArgv: process.execArgv, stdio: 'inherit' });
  return new Promise((resolve, reject) => {
    child.once('message', (ready) => resolve({ child, ready: ready as Ready }));
    child.once('exit', (code) => reject(new Error(`the ${kind} server exited (${code}) before it was ready`)));
  });
}

async function stopServer(child: ChildProcess): Promise<void> {
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.send('stop');
  await exited;
}

async function benchOne(kind: DbKind, autocannon: Autocannon): Promise<Row[]> {
  const { child, ready } = await startServer(kind);
  try {
    const base = `http://127.0.0.1:${ready.port}`;
    const headers = { authorization: `Bearer ${ready.key}`, 'content-type': 'application/json' };
    const body = JSON.stringify({ name: 'Support line', definition: fiftyNodeDefinition() });
    for (let i = 0; i < SEEDED_WORKFLOWS; i++) {
      const res = await fetch(`${base}/workflows`, { method: 'POST', headers, body });
      if (res.status !== 201) throw new Error(`seeding failed: ${res.status} ${await res.text()}`);
    }
    const listed = (await (await fetch(`${base}/workflows`, { headers })).json()) as { workflows: unknown[] };
    if (listed.workflows.length !== SEEDED_WORKFLOWS) throw new Error('seeding did not land');
    console.error(`${ready.database}: ${SEEDED_WORKFLOWS} workflows of ${NODES} nodes seeded (body ${body.length} bytes)`);

    const common = { connections: CONNECTIONS, duration: DURATION, headers };
    // JIT and caches warm before anything is measured
    await autocannon({ ...common, duration: 2, url: `${base}/workflows`, headers: { authorization: headers.authorization } });
    const rows: Row[] = [];
    console.error(`${ready.database}: GET /workflows for ${DURATION} s...`);
    rows.push({
      database: ready.database,
      endpoint: 'GET /workflows',
      result: await autocannon({ ...common, url: `${base}/workflows`, method: 'GET', headers: { authorization: headers.authorization } }),
    });
    console.error(`${ready.database}: POST /workflows for ${DURATION} s...`);
    rows.push({
      database: ready.database,
      endpoint: `POST /workflows (${NODES} nodes)`,
      result: await autocannon({ ...common, url: `${base}/workflows`, method: 'POST', body }),
    });
    return rows;
  } finally {
    await stopServer(child);
  }
}

async function main(): Promise<void> {
  // autocannon ships no types; this is the part of its result we read
  const autocannon = ((await import('autocannon' as string)) as { default: Autocannon }).default;
  const kinds: DbKind[] = process.env.DATABASE_URL ? ['pglite', 'postgres'] : ['pglite'];
  const cpus = os.cpus();
  console.log(
    `REST API benchmark, ${new Date().toISOString().slice(0, 10)}: ${cpus.length} × ${cpus[0]?.model.trim() ?? 'cpu'}, ` +
      `node ${process.version}; ${CONNECTIONS} connections, ${DURATION} s per endpoint, rate limit off; ` +
      `load average at start ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}`,
  );
  const rows: Row[] = [];
  for (const kind of kinds) rows.push(...(await benchOne(kind, autocannon)));

  const table = rows.map(({ database, endpoint, result: r }) => ({
    database,
    endpoint,
    'req/s': Math.round(r.requests.average),
    'p50 ms': r.latency.p50,
    'p99 ms': r.latency.p99,
    'max ms': r.latency.max,
    requests: r.requests.total,
    non2xx: r.non2xx,
    errors: r.errors,
    timeouts: r.timeouts,
  }));
  console.table(table);
  const failed = rows.filter((x) => x.result.errors > 0 || x.result.non2xx > 0 || x.result.timeouts > 0 || x.result['2xx'] === 0);
  if (failed.length > 0) {
    console.error(`FAILED: ${failed.map((x) => `${x.database} ${x.endpoint}`).join(', ')} had errors or non-2xx answers`);
    process.exit(1);
  }
}

// run only as a script (`fiftyNodeDefinition` may be imported elsewhere)
if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  if (process.argv[2] === '--serve') await serve(process.argv[3] as DbKind);
  else await main();
}
