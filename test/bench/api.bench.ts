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
 *
 * Then the call log as the dashboard reads it (DECISIONS 19): a server with the call routes, its
 * log seeded with BENCH_CALLS calls (default 100,000, over the last 20 days, six messages and
 * three observed caller turns each),
 * and one connection (a person at the dashboard) for BENCH_CALL_LOG_DURATION seconds (default 5)
 * on each of the requests the Calls and Overview pages make: the first page of 50, a page deep
 * in the log (its cursor), the page filtered by status, a search by customer number that finds a
 * few calls and one that finds none (the whole log read), and the 7-day and 30-day stats. It
 * fails when any answers anything but 2xx, or when the first page's p99 is 300 ms or more.
 */
import { fork, type ChildProcess } from 'node:child_process';
import os from 'node:os';
import type { AddressInfo } from 'node:net';
import { pathToFileURL } from 'node:url';
import { buildApp } from '../../src/app.js';
import { createRuntime } from '../../src/runtime.js';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/logger.js';
import { createStore } from '../../src/store/index.js';
import { createTestDb, type DbKind } from '../helpers/db.js';

const DURATION = Number(process.env.BENCH_DURATION ?? 10);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 10);
const SEEDED_WORKFLOWS = 20;
const NODES = 50;
const CALLS = Number(process.env.BENCH_CALLS ?? 100_000);
const CALL_LOG_DURATION = Number(process.env.BENCH_CALL_LOG_DURATION ?? 5);
/** The dashboard's budget for the call log page (issue 33). */
const CALL_LOG_BUDGET_MS = 300;

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

/**
 * The call log of one organization: `count` calls, one every 17 s back from now (100,000 span
 * about 20 days), all ended but for the five newest; six messages each; customer numbers
 * +14155550000 to +14155559999 in turn, every tenth a web call with none.
 */
export async function seedCallLog(db: { query(sql: string, params?: unknown[]): Promise<unknown> }, orgId: string, count: number): Promise<void> {
  const messages = JSON.stringify(
    ['Hello, Acme Dental, how can I help?', 'I would like to book a cleaning next week.', 'Sure. Which day suits you best?', 'Tuesday morning if you can.', 'Tuesday at nine is free; shall I book it?', 'Yes please, thank you.'].map(
      (content, i) => ({ role: i % 2 ? 'user' : 'assistant', content, time: '2025-06-01T12:00:00.000Z', seconds_from_start: i * 4, node_id: 'greeting' }),
    ),
  );
  const reasons = `ARRAY['customer-ended-call', 'assistant-ended-call', 'call-transferred', 'silence-timed-out', 'customer-ended-call']`;
  // what a call keeps of what was observed (DECISIONS 21): three caller turns each, for the overview's p50/p95
  const observed = JSON.stringify({
    trace_id: null,
    turns: [450, 610, 880].map((total, i) => ({
      node_id: 'greeting',
      at: '2025-06-01T12:00:04.000Z',
      latency: { stt: 120, endpointing: 500, llm_first_token: 210 + i, tts_first_audio: 95, service: 4, total },
    })),
    turn_latency: { p50: 610, p95: 880 },
    usage: { stt: [], llm: [], tts: [], realtime: [], carrier: [] },
    cost: null,
  });
  for (let start = 0; start < count; start += 10_000) {
    await db.query(
      `INSERT INTO calls (id, organization_id, type, transport, number_id, phone_number, customer_number, assistant_id, status,
         ended_reason, created_at, started_at, ended_at, messages, nodes_visited, current_node, observed)
       SELECT gen_random_uuid(), $1, CASE WHEN i % 10 = 0 THEN 'web_call' ELSE 'inbound_phone_call' END,
              CASE WHEN i % 10 = 0 THEN 'web' ELSE 'twilio' END, NULL, '+15550100100',
              CASE WHEN i % 10 = 0 THEN NULL ELSE '+1415555' || lpad((i % 10000)::text, 4, '0') END, NULL,
              CASE WHEN i < 5 THEN 'in-progress' ELSE 'ended' END,
              CASE WHEN i < 5 THEN NULL ELSE (${reasons})[1 + i % 5] END,
              now() - i * interval '17 seconds', now() - i * interval '17 seconds' + interval '1 second',
              CASE WHEN i < 5 THEN NULL ELSE now() - i * interval '17 seconds' + (31 + i % 240) * interval '1 second' END,
              $2::jsonb, '["greeting", "booking", "bye"]'::jsonb, 'bye', CASE WHEN i < 5 THEN NULL ELSE $5::jsonb END
         FROM generate_series($3::int, $4::int) AS i`,
      [orgId, messages, start, Math.min(count, start + 10_000) - 1, observed],
    );
  }
  // as autovacuum leaves a table in use: the visibility map set, so that index-only scans read no rows
  await db.query('VACUUM ANALYZE calls');
}

async function serveCalls(kind: DbKind): Promise<void> {
  const testDb = await createTestDb(kind);
  const store = createStore(testDb.db);
  const config = loadConfig({ LOG_LEVEL: 'silent', RATE_LIMIT_PER_MINUTE: '0' });
  const logger = createLogger(config.LOG_LEVEL);
  const runtime = await createRuntime({ config, store, logger });
  const app = await buildApp({ config, store, logger, runtime });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const { key, organization } = await store.keys.createKey('Bench');
  const started = Date.now();
  await seedCallLog(store.db, organization.id, CALLS);
  console.error(`${store.db.kind}: ${CALLS.toLocaleString('en-US')} calls seeded in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  const ready: Ready = { port: (app.server.address() as AddressInfo).port, key, database: store.db.kind };
  process.send!(ready);
  process.on('message', (message) => {
    if (message !== 'stop') return;
    void (async () => {
      await runtime.close(0);
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

function startServer(kind: DbKind, role = '--serve'): Promise<{ child: ChildProcess; ready: Ready }> {
  const child = fork(process.argv[1]!, [role, kind], { execArgv: process.execArgv, stdio: 'inherit' });
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

async function benchCallLog(kind: DbKind, autocannon: Autocannon): Promise<Row[]> {
  const { child, ready } = await startServer(kind, '--serve-calls');
  try {
    const base = `http://127.0.0.1:${ready.port}`;
    const headers = { authorization: `Bearer ${ready.key}` };
    const get = async (path: string) => {
      const res = await fetch(`${base}${path}`, { headers });
      if (res.status !== 200) throw new Error(`${path}: ${res.status} ${await res.text()}`);
      return res.json() as Promise<{ calls: { customer: unknown }[]; next_cursor: string | null }>;
    };
    // a cursor halfway down the log: 10 pages of 100 from the top, then the 50-call page after it
    let cursor: string | null = null;
    for (let i = 0; i < 10; i++) cursor = (await get(`/calls?limit=100${cursor ? `&cursor=${cursor}` : ''}`)).next_cursor;
    const found = await get('/calls?limit=50&customer=5550123');
    console.error(`${ready.database}: the search for 5550123 finds ${found.calls.length} calls`);
    const week = new Date(Date.now() - 7 * 86_400_000).toISOString();
    const month = new Date(Date.now() - 30 * 86_400_000).toISOString();
    const paths: [string, string][] = [
      ['GET /calls?limit=50 (the Calls page)', '/calls?limit=50'],
      ['GET /calls?limit=50&cursor= (page 21)', `/calls?limit=50&cursor=${cursor}`],
      ['GET /calls?limit=50&status=ended', '/calls?limit=50&status=ended'],
      ['GET /calls?customer=5550123 (10 found)', '/calls?limit=50&customer=5550123'],
      ['GET /calls?customer=999999 (none: every row read)', '/calls?limit=50&customer=999999'],
      ['GET /calls/stats (7 days: the Overview)', `/calls/stats?since=${encodeURIComponent(week)}`],
      ['GET /calls/stats (30 days)', `/calls/stats?since=${encodeURIComponent(month)}`],
    ];
    const common = { connections: 1, duration: CALL_LOG_DURATION, headers };
    await autocannon({ ...common, duration: 2, url: `${base}${paths[0]![1]}` });
    const rows: Row[] = [];
    for (const [endpoint, path] of paths) {
      console.error(`${ready.database}: ${endpoint} for ${CALL_LOG_DURATION} s...`);
      rows.push({ database: ready.database, endpoint: `${endpoint}, ${CALLS.toLocaleString('en-US')} calls`, result: await autocannon({ ...common, url: `${base}${path}` }) });
    }
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
  if (process.env.BENCH_ONLY !== 'call-log') for (const kind of kinds) rows.push(...(await benchOne(kind, autocannon)));
  const callLogRows: Row[] = [];
  if (process.env.BENCH_ONLY !== 'workflows') for (const kind of kinds) callLogRows.push(...(await benchCallLog(kind, autocannon)));
  rows.push(...callLogRows);

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
  const slow = callLogRows.filter((x) => x.database === 'postgres' && x.endpoint.includes('(the Calls page)') && x.result.latency.p99 >= CALL_LOG_BUDGET_MS);
  if (slow.length > 0) {
    console.error(`FAILED: the call log page's p99 on PostgreSQL is ${slow[0]!.result.latency.p99} ms, over its ${CALL_LOG_BUDGET_MS} ms`);
    process.exit(1);
  }
}

// run only as a script (`fiftyNodeDefinition` may be imported elsewhere)
if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  if (process.argv[2] === '--serve') await serve(process.argv[3] as DbKind);
  else if (process.argv[2] === '--serve-calls') await serveCalls(process.argv[3] as DbKind);
  else await main();
}
