/**
 * What the model sees in the current node (DECISIONS 9): the global prompt and this node's
 * instructions only, and one transition function per way out, named safely for OpenAI-style
 * function calling (`^[a-zA-Z0-9_-]{1,64}$`, unique, never equal to one of the assistant's tools).
 */
import type { Tool, WorkflowDefinition, WorkflowNode } from './schema.js';
import type { CompiledWorkflow } from './compile.js';
import type { CompiledNode } from './types.js';

export const FUNCTION_NAME_PATTERN = /^[a-zA-Z0-9_-]{1,64}$/;
const MAX_NAME = 64;

export interface TransitionFunction {
  /** The function name the model calls; send it back as `model.chose_transition.function_name`. */
  name: string;
  /** When to call it: the edge's `description`, or a global node's `global_description`. */
  description: string;
  /** Node the call moves to. */
  target: string;
  /** Index in `definition.edges`; absent for a global node. */
  edge_index?: number;
  /** `true` for a global node's transition. */
  global?: boolean;
}

export interface ModelContext {
  node_id: string;
  /** `conversation`: the node's turn; `tool_choice`: pick a way out of a tool node given its result. */
  mode: 'conversation' | 'tool_choice';
  system: string;
  transitionFunctions: TransitionFunction[];
  /** The assistant's own tools (conversation nodes only), passed through unchanged. */
  tools: Tool[];
}

export interface ModelContextOptions {
  /** The assistant's tools (`llm_config.tools`); transition names avoid their names. */
  tools?: readonly Tool[];
}

/** `go_to_<target>`, made safe and unique (suffix `_2`, `_3`, … when names would clash). */
export function assignTransitionNames(
  targets: readonly string[],
  reserved: ReadonlySet<string> = new Set(),
): string[] {
  const used = new Set<string>(reserved);
  return targets.map((target) => {
    const base = `go_to_${target.replace(/[^a-zA-Z0-9_-]/g, '_')}`.slice(0, MAX_NAME);
    let name = base;
    for (let n = 2; used.has(name); n++) {
      const suffix = `_${n}`;
      name = base.slice(0, MAX_NAME - suffix.length) + suffix;
    }
    used.add(name);
    return name;
  });
}

/** The system prompt of a node: `global_prompt`, then the node's own instructions. */
export function modelSystemPrompt(definition: WorkflowDefinition, node: WorkflowNode): string {
  const parts: string[] = [];
  if (definition.global_prompt) parts.push(definition.global_prompt);
  if (node.type === 'conversation') {
    if (node.instructions) parts.push(node.instructions);
  } else if (node.type === 'tool') {
    parts.push(
      `The tool "${node.tool_name}" has returned; its result (or error) is the last tool message. ` +
        'Call exactly one of the transition functions to continue the call.',
    );
  }
  return parts.join('\n\n');
}

const noToolsCache = new WeakMap<CompiledNode, ModelContext>();

/**
 * The model's context in node `nodeId`. Conversation nodes: the node's prompt, its transition
 * functions (edges, then global nodes) and the assistant's tools. Tool nodes: a prompt to choose
 * among the node's edges given the result, and only those edges.
 */
export function buildModelContext(
  compiled: CompiledWorkflow,
  nodeId: string,
  options: ModelContextOptions = {},
): ModelContext {
  const node = compiled.nodes.get(nodeId);
  if (!node) throw new RangeError(`unknown node "${nodeId}"`);
  const tools = node.node.type === 'conversation' ? (options.tools ?? []) : [];
  if (tools.length === 0) {
    const hit = noToolsCache.get(node);
    if (hit) return hit;
  }
  const reserved = new Set(tools.map((t) => t.name));
  const clash = node.transitions.some((t) => reserved.has(t.name));
  const names = clash
    ? assignTransitionNames(
        node.transitions.map((t) => t.target),
        reserved,
      )
    : node.transitions.map((t) => t.name);
  const context: ModelContext = {
    node_id: nodeId,
    mode: node.node.type === 'tool' ? 'tool_choice' : 'conversation',
    system: node.system,
    transitionFunctions: node.transitions.map((t, i) => ({
      name: names[i]!,
      description: t.description,
      target: t.target,
      ...(t.edge_index !== undefined ? { edge_index: t.edge_index } : {}),
      ...(t.global ? { global: true } : {}),
    })),
    tools: [...tools],
  };
  if (tools.length === 0) {
    // Shared by every call in this node: frozen so no caller can change another call's prompt.
    context.transitionFunctions.forEach((f) => Object.freeze(f));
    Object.freeze(context.transitionFunctions);
    Object.freeze(context.tools);
    noToolsCache.set(node, Object.freeze(context));
  }
  return context;
}

/**
 * What the model is told when it writes a warm transfer's `{{summary}}` (DECISIONS 16): the
 * conversation so far follows, as a transcript, in the next message.
 */
export const TRANSFER_SUMMARY_INSTRUCTION =
  'A colleague is about to take over this phone call. Summarize the conversation so far for them in one to three short sentences, ' +
  'in the language of the conversation: who is calling and what they need. Write only the summary.';
