/**
 * A test's expectations, checked (DECISIONS 20): a script step's after its turn, the `expect`
 * block on the end state. Each answers the first one not met, path first and for people
 * (`script[2].expect_node: node is "greeting", expected "booking"`), or null.
 */
import { isDeepStrictEqual } from 'node:util';
import type { ScriptStep, SuiteTest } from './schema.js';
import type { ToolCallRecord, TranscriptLine } from './store.js';
import { transcriptPattern } from './validate.js';
import { spokenTranscript } from './prompts.js';

const many = <T>(v: T | T[] | undefined): T[] => (v === undefined ? [] : Array.isArray(v) ? v : [v]);
const show = (v: unknown) => JSON.stringify(v);

/** The conversation as a step sees it, after its turn. */
export interface StepState {
  node_id: string | null;
  status: 'active' | 'ended';
  ended_reason: string | null;
  /** What the assistant said in the step's turn (a step without `say`: the turn before it; the first, the opening lines). */
  reply: string[];
  /** The tools called in that turn. */
  tools: ToolCallRecord[];
}

export function stepFailure(step: ScriptStep, at: string, state: StepState): string | null {
  if (step.expect_node !== undefined && state.node_id !== step.expect_node) {
    return `${at}.expect_node: node is ${show(state.node_id)}, expected ${show(step.expect_node)}`;
  }
  if (step.expect_reply_contains !== undefined) {
    const said = state.reply.join(' ').toLowerCase();
    for (const words of many(step.expect_reply_contains)) {
      if (!said.includes(words.toLowerCase())) {
        return `${at}.expect_reply_contains: the reply does not contain ${show(words)} (it was ${show(state.reply.join(' ') || '(nothing)')})`;
      }
    }
  }
  if (step.expect_tool_call !== undefined) {
    const called = state.tools.map((t) => t.name);
    for (const tool of many(step.expect_tool_call)) {
      if (!called.includes(tool)) return `${at}.expect_tool_call: tool ${tool} was not called${called.length > 0 ? ` (called: ${called.join(', ')})` : ''}`;
    }
  }
  if (step.expect_status !== undefined && state.status !== step.expect_status) {
    return `${at}.expect_status: status is ${state.status}${state.ended_reason ? ` (${state.ended_reason})` : ''}, expected ${step.expect_status}`;
  }
  if (step.expect_ended_reason !== undefined && state.ended_reason !== step.expect_ended_reason) {
    return `${at}.expect_ended_reason: ended_reason is ${show(state.ended_reason)}, expected ${show(step.expect_ended_reason)}`;
  }
  return null;
}

/** The conversation once it is over (or stopped), as `expect` reads it. */
export interface EndState {
  ended_reason: string | null;
  nodes_visited: string[];
  tool_calls: ToolCallRecord[];
  transcript: TranscriptLine[];
  /** What the analysis plan extracted; `error` when it could not. */
  structured_data?: { data: unknown } | { error: string };
}

/** `expected` a subset of `actual`: every field given equal (objects compared field by field, deeply). */
export function isSubset(expected: unknown, actual: unknown): boolean {
  if (typeof expected !== 'object' || expected === null || Array.isArray(expected)) return isDeepStrictEqual(expected, actual);
  if (typeof actual !== 'object' || actual === null || Array.isArray(actual)) return false;
  return Object.entries(expected).every(([k, v]) => Object.hasOwn(actual, k) && isSubset(v, (actual as Record<string, unknown>)[k]));
}

/** Where `wanted` runs through `seen` in order (others between), or the index of the first one it could not find. */
function subsequence<W, S>(wanted: readonly W[], seen: readonly S[], matches: (w: W, s: S) => boolean): number | null {
  let from = 0;
  for (const [i, w] of wanted.entries()) {
    const at = seen.findIndex((s, j) => j >= from && matches(w, s));
    if (at < 0) return i;
    from = at + 1;
  }
  return null;
}

export function endStateFailure(expect: NonNullable<SuiteTest['expect']>, state: EndState): string | null {
  if (expect.ended_reason !== undefined && state.ended_reason !== expect.ended_reason) {
    return state.ended_reason === null
      ? `expect.ended_reason: the conversation had not ended, expected ${show(expect.ended_reason)}`
      : `expect.ended_reason: ended_reason is ${show(state.ended_reason)}, expected ${show(expect.ended_reason)}`;
  }
  if (expect.nodes_visited !== undefined) {
    const missing = subsequence(expect.nodes_visited, state.nodes_visited, (w, s) => w === s);
    if (missing !== null) {
      return `expect.nodes_visited[${missing}]: ${show(expect.nodes_visited[missing])} was not visited in that order (visited: ${state.nodes_visited.join(' → ') || 'none'})`;
    }
  }
  if (expect.tool_calls !== undefined) {
    const missing = subsequence(expect.tool_calls, state.tool_calls, (w, s) => w.name === s.name && (w.arguments === undefined || isSubset(w.arguments, s.arguments)));
    if (missing !== null) {
      const wanted = expect.tool_calls[missing]!;
      const calls = state.tool_calls.map((c) => `${c.name}(${JSON.stringify(c.arguments)})`).join(', ');
      const what = wanted.arguments ? `${wanted.name} with arguments ${JSON.stringify(wanted.arguments)}` : wanted.name;
      return `expect.tool_calls[${missing}]: no call of ${what} in that order (calls: ${calls || 'none'})`;
    }
  }
  if (expect.transcript_matches !== undefined) {
    const text = spokenTranscript(state.transcript);
    const patterns = many(expect.transcript_matches);
    for (const [i, pattern] of patterns.entries()) {
      if (!transcriptPattern(pattern).test(text)) {
        const where = Array.isArray(expect.transcript_matches) ? `expect.transcript_matches[${i}]` : 'expect.transcript_matches';
        return `${where}: the transcript does not match /${pattern}/`;
      }
    }
  }
  if (expect.structured_data !== undefined) {
    const got = state.structured_data;
    if (!got) return 'expect.structured_data: nothing was extracted (the conversation was too short for the analysis plan, or it is off)';
    if ('error' in got) return `expect.structured_data: ${got.error}`;
    if (!isSubset(expect.structured_data, got.data)) {
      return `expect.structured_data: extracted ${JSON.stringify(got.data)}, expected at least ${JSON.stringify(expect.structured_data)}`;
    }
  }
  return null;
}
