/**
 * Workflow definition → compiled workflow (per-node transitions, prompts, provider overrides, and
 * the XState machine of `machine.ts`), once per definition: cached by a hash of its canonical JSON.
 */
import { createHash } from 'node:crypto';
import type { WorkflowDefinition, WorkflowEdge, WorkflowNode } from './schema.js';
import { EngineError, ErrorCodes } from './errors.js';
import { formatPath } from './paths.js';
import { assignTransitionNames, modelSystemPrompt } from './prompt.js';
import { buildMachine, type CallMachine } from './machine.js';
import type { CompiledNode, CompiledTransition, ProviderOverrides } from './types.js';

// Names src/calls and src/chats still import from here.
export type { CallEvent, ProviderOverrides, SilencePolicy } from './types.js';

export interface CompiledWorkflow {
  /** sha256 of the canonical JSON of the definition. */
  readonly hash: string;
  /** A deep-frozen copy: later changes to the caller's object never reach running calls. */
  readonly definition: WorkflowDefinition;
  readonly nodes: ReadonlyMap<string, CompiledNode>;
  readonly globalNodeIds: readonly string[];
  readonly machine: CallMachine;
}

export class WorkflowCompileError extends EngineError {
  static override readonly codes = [ErrorCodes.WORKFLOW_COMPILE_FAILED] as const;
  constructor(readonly details: string[]) {
    super(ErrorCodes.WORKFLOW_COMPILE_FAILED, `Workflow cannot be compiled: ${details.join('; ')}`);
    this.name = 'WorkflowCompileError';
  }
}

// ---------------------------------------------------------------------------------------------
// Hashing and the cache

/** JSON with object keys sorted, so equal definitions hash equally whatever their key order. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(value, sortKeys) ?? 'null';
}

function sortKeys(_key: string, value: unknown): unknown {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return value;
  const keys = Object.keys(value);
  let sorted = true;
  for (let i = 1; i < keys.length && sorted; i++) sorted = keys[i - 1]! < keys[i]!;
  if (sorted) return value;
  keys.sort();
  const copy: Record<string, unknown> = {};
  for (const k of keys) copy[k] = (value as Record<string, unknown>)[k];
  return copy;
}

export function hashDefinition(definition: WorkflowDefinition): string {
  return createHash('sha256').update(canonicalJson(definition)).digest('hex');
}

const CACHE_LIMIT = 256;
const cache = new Map<string, CompiledWorkflow>();
const byOwnDefinition = new WeakMap<WorkflowDefinition, CompiledWorkflow>();

/**
 * The compiled machine for a definition; compiles at most once per distinct definition
 * (least-recently-used cache of 256 entries).
 */
export function compileWorkflow(definition: WorkflowDefinition): CompiledWorkflow {
  // A compiled workflow's own (frozen) definition needs no hashing.
  const own = byOwnDefinition.get(definition);
  if (own) return own;
  const hash = hashDefinition(definition);
  const hit = cache.get(hash);
  if (hit) {
    cache.delete(hash);
    cache.set(hash, hit);
    return hit;
  }
  const compiled = compileUncached(definition, hash);
  cache.set(hash, compiled);
  if (cache.size > CACHE_LIMIT) {
    const oldest = cache.keys().next().value;
    if (oldest !== undefined) cache.delete(oldest);
  }
  return compiled;
}

/** Drops every cached machine (tests and benchmarks). */
export function clearCompileCache(): void {
  cache.clear();
}

export function compileCacheSize(): number {
  return cache.size;
}

// ---------------------------------------------------------------------------------------------
// Compilation

export function compileUncached(definition: WorkflowDefinition, hash = hashDefinition(definition)): CompiledWorkflow {
  const frozen = deepFreeze(structuredClone(definition));
  const nodes = precompute(frozen);
  const globalNodeIds = frozen.nodes
    .filter((n) => n.type === 'conversation' && n.global === true)
    .map((n) => n.id);
  const machine = buildMachine(frozen, nodes);
  const compiled: CompiledWorkflow = { hash, definition: frozen, nodes, globalNodeIds, machine };
  byOwnDefinition.set(frozen, compiled);
  return compiled;
}

function precompute(definition: WorkflowDefinition): Map<string, CompiledNode> {
  const problems: string[] = [];
  const byId = new Map<string, WorkflowNode>();
  definition.nodes.forEach((node, i) => {
    if (byId.has(node.id)) problems.push(`${formatPath(['nodes', i, 'id'], definition)}: duplicate node id "${node.id}"`);
    byId.set(node.id, node);
  });
  if (!byId.has(definition.entry_node)) {
    problems.push(`entry_node: unknown node "${definition.entry_node}"`);
  }
  const outgoing = new Map<string, Array<{ edge: WorkflowEdge; index: number }>>();
  definition.edges.forEach((edge, index) => {
    const at = formatPath(['edges', index], definition);
    if (!byId.has(edge.from)) problems.push(`${at}.from: unknown node "${edge.from}"`);
    if (!byId.has(edge.to)) problems.push(`${at}.to: unknown node "${edge.to}"`);
    let list = outgoing.get(edge.from);
    if (!list) outgoing.set(edge.from, (list = []));
    list.push({ edge, index });
  });
  if (problems.length > 0) throw new WorkflowCompileError(problems);

  const globals = definition.nodes.filter(
    (n): n is Extract<WorkflowNode, { type: 'conversation' }> =>
      n.type === 'conversation' && n.global === true,
  );

  const compiled = new Map<string, CompiledNode>();
  for (const node of definition.nodes) {
    const out = outgoing.get(node.id) ?? [];
    const draft: Array<Omit<CompiledTransition, 'name'>> = [];
    if (node.type === 'conversation' || node.type === 'tool') {
      const seenTargets = new Set<string>();
      for (const { edge, index } of out) {
        if (seenTargets.has(edge.to)) continue; // duplicate edge (invalid): the first one wins
        seenTargets.add(edge.to);
        draft.push({
          description: edge.description ?? `Go to ${edge.to}.`,
          target: edge.to,
          edge_index: index,
          ...(edge.message !== undefined && edge.message !== '' ? { message: edge.message } : {}),
        });
      }
      if (node.type === 'conversation') {
        for (const g of globals) {
          if (g.id === node.id || seenTargets.has(g.id)) continue;
          seenTargets.add(g.id);
          draft.push({
            description: g.global_description ?? `Go to ${g.id}.`,
            target: g.id,
            global: true,
          });
        }
      }
    }
    const names = assignTransitionNames(draft.map((t) => t.target));
    const transitions = draft.map((t, i) => ({ name: names[i]!, ...t }));
    const overrides: ProviderOverrides = {};
    if (node.llm_config) overrides.llm_config = node.llm_config;
    if (node.tts_config) overrides.tts_config = node.tts_config;
    if (node.stt_config) overrides.stt_config = node.stt_config;
    compiled.set(node.id, {
      id: node.id,
      node,
      outgoing: out,
      transitions,
      transitionByName: new Map(transitions.map((t) => [t.name, t])),
      overrides,
      overrides_key: canonicalJson(overrides),
      system: modelSystemPrompt(definition, node),
    });
  }
  return compiled;
}

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value as Record<string, unknown>)) deepFreeze(v);
  }
  return value;
}
