/**
 * A test suite checked on write (DECISIONS 20): its shape (the zod schemas), what the database
 * cannot store, and what it names — the assistant and workflow (the organization's), the nodes
 * and tools its tests expect (the workflow's), its model (the catalog's), its patterns (valid
 * regular expressions). Every problem goes in one 400, path first; the reference checks read the
 * raw body, so that a type problem elsewhere does not hide them.
 */
import { effectiveAssistant, type AssistantFields, type EffectiveAssistant } from '../../engine/assistant.js';
import { catalogProblems } from '../../engine/catalog.js';
import { formatPath, quote } from '../../engine/paths.js';
import type { WorkflowDefinition } from '../../engine/schema.js';
import { formatZodIssues } from '../../engine/validate.js';
import { storableProblems } from '../api/storable.js';
import { TestSuiteCreate, type TestSuiteCreate as SuiteInput } from './schema.js';

/** What the checks need from the database, looked up by the service. */
export interface SuiteReferences {
  /** The assistant the suite names, when it is the organization's. */
  assistant: AssistantFields | null;
  /** The workflow it names, when it names one and it is the organization's. */
  workflow: { definition: WorkflowDefinition } | null;
}

const asRecord = (v: unknown): Record<string, unknown> | undefined =>
  typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
const asArray = (v: unknown): unknown[] | undefined => (Array.isArray(v) ? v : undefined);
const strings = (v: unknown): string[] => (typeof v === 'string' ? [v] : (asArray(v) ?? []).filter((x): x is string => typeof x === 'string'));
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** The ids a raw body names, for the service to look up (only well-formed ones). */
export function referencedIds(raw: unknown): { assistantId: string | null; workflowId: string | null } {
  const body = asRecord(raw);
  const id = (v: unknown) => (typeof v === 'string' && UUID.test(v) ? v : null);
  return { assistantId: id(body?.assistant_id), workflowId: id(body?.workflow_id) };
}

/** The node ids a test may expect: the workflow's, or `assistant` when the assistant runs alone. */
export function knownNodes(workflow: { definition: WorkflowDefinition } | null): Set<string> {
  return new Set(workflow ? workflow.definition.nodes.map((n) => n.id) : ['assistant']);
}

/** The tools the assistant may call: tool nodes, the assistant's own tools, the nodes' model tools. */
export function knownTools(assistant: EffectiveAssistant | null, workflow: { definition: WorkflowDefinition } | null): Set<string> {
  const tools = new Set<string>();
  for (const t of assistant?.llm_config.tools ?? []) tools.add(t.name);
  for (const node of workflow?.definition.nodes ?? []) {
    if (node.type === 'tool') tools.add(node.tool_name);
    for (const t of node.llm_config?.tools ?? []) tools.add(t.name);
  }
  return tools;
}

/** A `transcript_matches` pattern as a regular expression: any case, `^`/`$` at line ends. */
export function transcriptPattern(source: string): RegExp {
  return new RegExp(source, 'im');
}

function list(names: Iterable<string>): string {
  const all = [...names];
  if (all.length === 0) return 'none';
  const shown = all.slice(0, 20).map(quote).join(', ');
  return all.length > 20 ? `${shown}, …` : shown;
}

/**
 * Every problem of a suite body (a whole suite: a create, or a patch merged over the stored
 * suite), or the parsed suite. `refs` are the organization's assistant and workflow it names.
 */
export function checkSuite(raw: unknown, refs: SuiteReferences): { ok: true; suite: SuiteInput } | { ok: false; details: string[] } {
  const details: string[] = [];
  const parsed = TestSuiteCreate.safeParse(raw);
  if (!parsed.success) details.push(...formatZodIssues(parsed.error.issues, '', raw));
  for (const p of storableProblems(raw)) details.push(`${formatPath(p.path, raw) || '(root)'}: ${p.message}`);

  const body = asRecord(raw);
  if (body) {
    const { assistantId, workflowId } = referencedIds(raw);
    if (assistantId && !refs.assistant) details.push(`assistant_id: no assistant with id ${quote(assistantId)}`);
    if (workflowId && !refs.workflow) details.push(`workflow_id: no workflow with id ${quote(workflowId)}`);
    if (body.llm_config !== undefined && body.llm_config !== null) {
      details.push(...catalogProblems('llm', body.llm_config, 'llm_config', { allowRealtime: false }));
    }
    const assistant = refs.assistant ? effectiveAssistant(refs.assistant) : null;
    // a workflow named but not found: its nodes are unknown, so they are not checked
    const nodes = workflowId && !refs.workflow ? null : knownNodes(refs.workflow);
    const tools = refs.assistant && !(workflowId && !refs.workflow) ? knownTools(assistant, refs.workflow) : null;
    details.push(...testProblems(body.tests, { nodes, tools, assistant }));
  }
  if (details.length > 0 || !parsed.success) return { ok: false, details: [...new Set(details)] };
  return { ok: true, suite: parsed.data };
}

interface TestContext {
  /** null: not known (an unknown workflow), not checked */
  nodes: Set<string> | null;
  tools: Set<string> | null;
  assistant: EffectiveAssistant | null;
}

function testProblems(rawTests: unknown, ctx: TestContext): string[] {
  const out: string[] = [];
  const tests = asArray(rawTests) ?? [];
  const names = new Map<string, number>();
  tests.forEach((rawTest, i) => {
    const test = asRecord(rawTest);
    if (!test) return;
    const at = `tests[${i}]`;
    if (typeof test.name === 'string') {
      const first = names.get(test.name);
      if (first !== undefined) out.push(`${at}.name: ${quote(test.name)} is the name of tests[${first}] too; test names are unique in a suite`);
      else names.set(test.name, i);
    }
    if ((test.script === undefined) === (test.caller === undefined)) out.push(`${at}: a test needs either \`script\` or \`caller\` (not both)`);
    (asArray(test.script) ?? []).forEach((step, j) => {
      if (asRecord(step) && Object.keys(step as object).length === 0) out.push(`${at}.script[${j}]: a step needs \`say\` or an expectation`);
    });
    if (asRecord(test.expect) && Object.keys(test.expect as object).length === 0) out.push(`${at}.expect: give at least one expectation`);
    const node = (path: string, id: unknown) => {
      if (ctx.nodes && typeof id === 'string' && !ctx.nodes.has(id)) out.push(`${path}: unknown node ${quote(id)} (nodes: ${list(ctx.nodes)})`);
    };
    const tool = (path: string, name: unknown) => {
      if (ctx.tools && typeof name === 'string' && !ctx.tools.has(name)) out.push(`${path}: unknown tool ${quote(name)} (tools: ${list(ctx.tools)})`);
    };
    (asArray(test.script) ?? []).forEach((rawStep, j) => {
      const step = asRecord(rawStep);
      if (!step) return;
      node(`${at}.script[${j}].expect_node`, step.expect_node);
      const called = step.expect_tool_call;
      if (Array.isArray(called)) called.forEach((name, k) => tool(`${at}.script[${j}].expect_tool_call[${k}]`, name));
      else tool(`${at}.script[${j}].expect_tool_call`, called);
    });
    const expect = asRecord(test.expect);
    if (expect) {
      (asArray(expect.nodes_visited) ?? []).forEach((id, k) => node(`${at}.expect.nodes_visited[${k}]`, id));
      (asArray(expect.tool_calls) ?? []).forEach((call, k) => tool(`${at}.expect.tool_calls[${k}].name`, asRecord(call)?.name));
      const patterns = expect.transcript_matches;
      const each = Array.isArray(patterns) ? patterns.map((p, k) => [p, `${at}.expect.transcript_matches[${k}]`] as const) : [[patterns, `${at}.expect.transcript_matches`] as const];
      for (const [pattern, path] of each) {
        if (typeof pattern !== 'string') continue;
        try {
          transcriptPattern(pattern);
        } catch (err) {
          out.push(`${path}: not a regular expression (${(err as Error).message})`);
        }
      }
      if (expect.structured_data !== undefined && ctx.assistant && !ctx.assistant.analysis_plan.structured_data_plan.enabled) {
        out.push(`${at}.expect.structured_data: the assistant's analysis_plan.structured_data_plan is not enabled; nothing would be extracted`);
      }
    }
    const results = asRecord(test.tool_results);
    if (results) for (const name of Object.keys(results)) tool(`${at}.${formatPath(['tool_results', name])}`, name);
    if (test.mode === 'voice' && ctx.assistant) {
      const problem = voiceProblem(ctx.assistant);
      if (problem) out.push(`${at}.mode: ${problem}`);
    }
  });
  return out;
}

/**
 * Why a voice test cannot run with this assistant, or null. The simulated caller speaks with the
 * sandbox voice: the assistant must hear through the sandbox STT (or be the sandbox realtime
 * model, which does). It may speak with any voice (`callerReadsVoice`).
 */
export function voiceProblem(assistant: EffectiveAssistant): string | null {
  if (assistant.realtime) {
    return assistant.llm_config.provider === 'sandbox-realtime'
      ? null
      : `voice tests speak with the sandbox voice, which the realtime model ${quote(assistant.llm_config.provider)} cannot hear; use sandbox-realtime, or chat mode`;
  }
  const stt = assistant.stt_config?.provider;
  if (stt !== 'sandbox') return `voice tests speak with the sandbox voice: the assistant's stt_config.provider must be "sandbox" (it is ${quote(String(stt))}); or use chat mode`;
  return null;
}

/**
 * Whether the simulated caller's ear (the sandbox STT) can read the assistant's voice: the
 * sandbox voice (a pipeline's sandbox TTS, or sandbox-realtime). Otherwise a step's reply is what
 * the call's transcript says the caller heard.
 */
export function callerReadsVoice(assistant: EffectiveAssistant): boolean {
  return assistant.realtime ? assistant.llm_config.provider === 'sandbox-realtime' : assistant.tts_config?.provider === 'sandbox';
}
