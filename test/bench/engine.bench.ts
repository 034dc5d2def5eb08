/**
 * Engine benchmark: `npm run bench:engine` (tsx --expose-gc).
 *  (a) validation of a 500-node / 2,000-edge definition, median and p99 over 50 runs;
 *  (b) compile time of that definition (uncached), and the cached look-up a call start pays;
 *  (c) heap and time for 1,000 and 10,000 live call sessions, each taking 10 transitions
 *      (caller speaks → model runs → model chooses a transition → next node's first line).
 * Targets (issue 2): validation < 20 ms, 10,000 live actors < 300 MB heap, a step < 0.2 ms median.
 */
import { performance } from 'node:perf_hooks';
import {
  clearCompileCache,
  compileUncached,
  compileWorkflow,
  createCallSession,
  type CallSession,
  type WorkflowDefinition,
  type WorkflowEdge,
  type WorkflowNode,
} from '../../engine/index.js';

const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) {
  console.error('run with --expose-gc (npm run bench:engine)');
  process.exit(1);
}

const NODES = 500;
const EDGES = 2000;
const STEPS = 10;

/** 497 conversation/tool nodes in a ring with forward edges, one global node, a transfer and an end. */
function bigDefinition(): WorkflowDefinition {
  const ring = NODES - 3;
  const id = (i: number) => `step_${i}`;
  const nodes: WorkflowNode[] = [];
  for (let i = 0; i < ring; i++) {
    nodes.push(
      i % 25 === 24
        ? {
            id: id(i),
            type: 'tool',
            tool_name: `lookup_${i}`,
            url: 'https://tools.example.com/lookup',
            arguments: { step: i, source: 'phone' },
          }
        : {
            id: id(i),
            type: 'conversation',
            first_line: `Welcome to step ${i}. How can I help you with it?`,
            instructions: `You are handling step ${i} of the support process. Ask the caller the questions of this step, answer briefly, and move on when the caller is done.`,
            ...(i % 50 === 7 ? { tts_config: { provider: 'sandbox', voice_id: 'sandbox' } } : {}),
          },
    );
  }
  nodes.push({
    id: 'human',
    type: 'conversation',
    global: true,
    global_description: 'The caller asks to speak to a person.',
    first_line: 'Shall I put you through to a colleague?',
  });
  nodes.push({ id: 'operator', type: 'transfer', destination: '+14155550123', first_line: 'Transferring you now.' });
  nodes.push({ id: 'goodbye', type: 'end', first_line: 'Goodbye!' });
  const edges: WorkflowEdge[] = [];
  const offsets = [1, 2, 3, 5];
  for (let i = 0; i < ring; i++) {
    for (const k of offsets) {
      edges.push({ from: id(i), to: id((i + k) % ring), description: `The caller is done with step ${i} and wants step ${(i + k) % ring}.` });
    }
  }
  edges.push({ from: 'human', to: 'operator', description: 'The caller confirms.' });
  edges.push({ from: 'human', to: id(0), description: 'The caller changed their mind.' });
  for (let i = 0; edges.length < EDGES; i++) {
    edges.push({ from: id(i), to: 'goodbye', description: 'The caller has no more questions.' });
  }
  return { version: 1, entry_node: id(0), global_prompt: 'You are the Acme support line. Be brief.', nodes, edges };
}

function quantile(sorted: ArrayLike<number>, q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

function stats(samples: number[] | Float64Array): { median: number; p99: number; max: number } {
  const sorted = Float64Array.from(samples).sort();
  return { median: quantile(sorted, 0.5), p99: quantile(sorted, 0.99), max: sorted[sorted.length - 1]! };
}

const ms = (n: number) => `${n.toFixed(3)} ms`;
const mb = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MB`;

function time<T>(fn: () => T): [T, number] {
  const t0 = performance.now();
  const value = fn();
  return [value, performance.now() - t0];
}

async function main(): Promise<void> {
  const definition = bigDefinition();
  console.log(`engine benchmark — node ${process.version}, ${definition.nodes.length} nodes / ${definition.edges.length} edges`);

  // (a) validation
  type Validate = (input: unknown) => { ok: boolean; details?: string[] };
  let validate: Validate | null = null;
  try {
    const mod: { validateDefinition?: Validate } = await import('../../engine/validate.js');
    validate = mod.validateDefinition ?? null;
  } catch {
    validate = null;
  }
  if (validate) {
    const input = JSON.parse(JSON.stringify(definition)) as unknown;
    const check = validate(input);
    if (!check.ok) throw new Error(`benchmark definition is invalid: ${(check.details ?? []).slice(0, 5).join('; ')}`);
    for (let i = 0; i < 5; i++) validate(input);
    const samples: number[] = [];
    for (let i = 0; i < 50; i++) samples.push(time(() => validate!(input))[1]);
    const s = stats(samples);
    console.log(`(a) validation            median ${ms(s.median)}  p99 ${ms(s.p99)}  (50 runs; target < 20 ms)`);
  } else {
    console.log('(a) validation            n/a (engine/validate.ts not present)');
  }

  // (b) compile
  {
    const [, first] = time(() => compileUncached(definition));
    const samples: number[] = [];
    for (let i = 0; i < 20; i++) samples.push(time(() => compileUncached(definition))[1]);
    const s = stats(samples);
    console.log(`(b) compile (uncached)    median ${ms(s.median)}  p99 ${ms(s.p99)}  first ${ms(first)}  (20 runs)`);
    clearCompileCache();
    compileWorkflow(definition);
    const cached: number[] = [];
    for (let i = 0; i < 50; i++) cached.push(time(() => compileWorkflow(definition))[1]);
    const c = stats(cached);
    console.log(`    cached look-up (hash)  median ${ms(c.median)}  p99 ${ms(c.p99)}  (what a call start pays)`);
  }

  // (c) live sessions
  const compiled = compileWorkflow(definition);
  // Warm up the code paths (JIT) before measuring.
  runSessions(compiled, 200);

  for (const count of [1_000, 10_000]) {
    gc!();
    gc!();
    const before = process.memoryUsage().heapUsed;
    const t0 = performance.now();
    const { sessions, transitionTimes, callerTimes, startTimes } = runSessions(compiled, count);
    const elapsed = performance.now() - t0;
    gc!();
    gc!();
    const after = process.memoryUsage().heapUsed;
    const t = stats(transitionTimes);
    const c = stats(callerTimes);
    const heap = after - before;
    console.log(
      `(c) ${String(count).padStart(6)} live sessions  heap +${mb(heap)} (${(heap / count / 1024).toFixed(1)} KB each)  ` +
        `total ${elapsed.toFixed(0)} ms for ${count * STEPS} transitions`,
    );
    console.log(`      transition step       median ${ms(t.median)}  p99 ${ms(t.p99)}  max ${ms(t.max)}`);
    const st = stats(startTimes);
    console.log(`      caller.said → run_model median ${ms(c.median)}  p99 ${ms(c.p99)}`);
    console.log(`      session create + start median ${ms(st.median)}  p99 ${ms(st.p99)}`);
    // Keep the sessions alive until measured.
    if (sessions.length !== count || sessions.some((s) => s.nodesVisited().length !== STEPS + 1)) {
      throw new Error('sessions did not take every transition');
    }
    for (const s of sessions) s.stop();
  }
  console.log(`targets: validation < 20 ms median, 10,000 live sessions < 300 MB heap, step < 0.2 ms median`);
}

function runSessions(compiled: ReturnType<typeof compileWorkflow>, count: number) {
  const sessions: CallSession[] = new Array(count);
  const transitionTimes = new Float64Array(count * STEPS);
  const callerTimes = new Float64Array(count * STEPS);
  const startTimes = new Float64Array(count);
  for (let i = 0; i < count; i++) {
    const t0 = performance.now();
    const session = createCallSession(compiled);
    session.start();
    startTimes[i] = performance.now() - t0;
    sessions[i] = session;
  }
  // Interleaved like real calls: every session takes step k before any takes step k + 1.
  for (let step = 0; step < STEPS; step++) {
    const target = `go_to_step_${step + 1}`;
    for (let i = 0; i < count; i++) {
      const session = sessions[i]!;
      let t0 = performance.now();
      session.send({ type: 'caller.said', text: 'I am done with this step, next one please.' });
      callerTimes[step * count + i] = performance.now() - t0;
      t0 = performance.now();
      const commands = session.send({ type: 'model.chose_transition', function_name: target });
      transitionTimes[step * count + i] = performance.now() - t0;
      if (commands.length === 0 || commands[0]!.type === 'event_rejected') {
        throw new Error(`step ${step} failed: ${JSON.stringify(commands[0])}`);
      }
    }
  }
  return { sessions, transitionTimes, callerTimes, startTimes };
}

await main();
