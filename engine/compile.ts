/**
 * Workflow definition → XState v5 machine, once per definition (cached by a hash of its canonical
 * JSON). One state per workflow node; the machine's context is plain JSON (history, counters,
 * what the call waits for) so a call can be saved and restored anywhere. Commands for the
 * service are XState `emit`s; `session.ts` collects them synchronously per event.
 */
import { createHash } from 'node:crypto';
import { enqueueActions, setup, type ActorRefFrom, type SnapshotFrom } from 'xstate';
import type {
  LlmConfig,
  SttConfig,
  TtsConfig,
  WorkflowDefinition,
  WorkflowEdge,
  WorkflowNode,
} from './schema.js';
import { EngineError, ErrorCodes } from './errors.js';
import { formatPath } from './paths.js';
import { assignTransitionNames, modelSystemPrompt } from './prompt.js';

// ---------------------------------------------------------------------------------------------
// Events in, commands out

/** Why the engine (or the caller) ended the call; DECISIONS 7 `ended_reason` values. */
export type EndedReason =
  | 'customer-ended-call'
  | 'assistant-ended-call'
  | 'call-transferred'
  | 'silence-timed-out'
  | 'exceeded-max-duration';

/** What the service tells a call's engine. */
export type CallEvent =
  | { type: 'caller.said'; text: string }
  | { type: 'dtmf'; digits: string }
  /**
   * A `say` (or, without `say_id`, everything said so far) has finished playing or was cut.
   * `heard` (with `say_id` only): the line was cut and the caller heard this much of it (`''`:
   * nothing); its history entry then holds just that. Absent: the line played whole.
   */
  | { type: 'assistant.done_speaking'; say_id?: string; heard?: string }
  /** The model's own words in this turn (spoken by the service); recorded in the history. */
  | { type: 'model.replied'; text: string }
  /** The model called a transition function; `node_id` (optional) guards against stale answers. */
  | { type: 'model.chose_transition'; function_name: string; node_id?: string }
  | { type: 'tool.result'; tool_call_id: string; result: unknown }
  | { type: 'tool.failed'; tool_call_id: string; error: string }
  | { type: 'hangup' }
  | { type: 'timer.silence' }
  | { type: 'timer.max_duration' };

export type CallEventType = CallEvent['type'];

export const CALL_EVENT_TYPES: readonly CallEventType[] = [
  'caller.said',
  'dtmf',
  'assistant.done_speaking',
  'model.replied',
  'model.chose_transition',
  'tool.result',
  'tool.failed',
  'hangup',
  'timer.silence',
  'timer.max_duration',
];

/** Stable codes of events the engine ignored (STYLE: callers match on the code). */
export type RejectionCode =
  | 'MALFORMED_EVENT'
  | 'NOT_STARTED'
  | 'CALL_ENDED'
  | 'EVENT_NOT_EXPECTED'
  | 'UNKNOWN_TRANSITION_FUNCTION'
  | 'STALE_EVENT'
  | 'UNKNOWN_TOOL_CALL'
  | 'INTERNAL_ERROR';

export interface ProviderOverrides {
  llm_config?: LlmConfig;
  tts_config?: TtsConfig;
  stt_config?: SttConfig;
}

export interface SayCommand {
  type: 'say';
  /** Unique within the call; `assistant.done_speaking` names it. */
  say_id: string;
  text: string;
  node_id: string;
  /** `false` for closing lines (end node, transfer line, final silence message). */
  interruptible: boolean;
}

export interface SetProviderOverridesCommand extends ProviderOverrides {
  type: 'set_provider_overrides';
  node_id: string;
}

export interface CallToolCommand {
  type: 'call_tool';
  tool_call_id: string;
  tool_name: string;
  url: string;
  arguments: Record<string, string | number | boolean | null>;
  node_id: string;
}

export interface TransferCommand {
  type: 'transfer';
  destination: string;
  node_id: string;
}

export interface HangUpCommand {
  type: 'hang_up';
  reason: EndedReason;
  node_id: string;
}

export interface EventRejectedCommand {
  type: 'event_rejected';
  event_type: string;
  code: RejectionCode;
  message: string;
  node_id: string | null;
}

/** `silence_check`: the caller has been silent and `silence.messages` is empty: the model checks in. */
export type RunModelReason = 'caller_input' | 'node_entered' | 'tool_result' | 'silence_check';

/** What the machine emits; `session.ts` completes `run_model` with the model's context. */
export interface RunModelRequest {
  type: 'run_model';
  node_id: string;
  reason: RunModelReason;
}

export type MachineCommand =
  | SayCommand
  | SetProviderOverridesCommand
  | CallToolCommand
  | TransferCommand
  | HangUpCommand
  | EventRejectedCommand
  | RunModelRequest;

export interface HistoryMessage {
  /** `user`: the caller (speech or keypad); `assistant`: said to the caller; `tool`: a tool node's outcome. */
  role: 'user' | 'assistant' | 'tool';
  content: string;
  node_id: string;
  tool_call_id?: string;
  tool_name?: string;
  /** On the entry of a `say`: which one (`assistant.done_speaking {say_id, heard}` finds it by this). */
  say_id?: string;
}

// ---------------------------------------------------------------------------------------------
// Machine context

export interface SilencePolicy {
  /**
   * Said in turn on each `timer.silence` until `max_attempts` is reached; empty: each check is the
   * model's (`run_model` `silence_check`, DECISIONS 13).
   */
  messages: string[];
  /** Said before hanging up with `silence-timed-out`; `null`: hang up at once. */
  final_message: string | null;
  max_attempts: number;
}

/** Per-call settings copied into the context at start, so a restored call decides the same way. */
export interface CallSettings {
  /** Said by an end node without a `first_line` (`speech_config.end_call_message`). */
  end_call_message: string | null;
  silence: SilencePolicy;
}

export interface PendingClose {
  /** The closing line; the call ends when it has been played. */
  say_id: string;
  reason: EndedReason;
  commands: Array<TransferCommand | HangUpCommand>;
}

export interface CallContext {
  node_id: string;
  history: HistoryMessage[];
  nodes_visited: string[];
  /** Counter behind `say_id`s and `tool_call_id`s: deterministic, survives save/restore. */
  seq: number;
  pending_tool_call_id: string | null;
  /** Node whose provider overrides are in effect; `null`: the assistant's own blocks. */
  overrides_node: string | null;
  closing: PendingClose | null;
  silence_attempts: number;
  ended_reason: EndedReason | null;
  settings: CallSettings;
}

export interface CallInput {
  settings: CallSettings;
}

// ---------------------------------------------------------------------------------------------
// Compiled workflow

export interface CompiledTransition {
  /** Safe OpenAI function name, unique within the node (`go_to_<target>`). */
  name: string;
  description: string;
  target: string;
  /** Index in `definition.edges`; absent for a global node's transition. */
  edge_index?: number;
  /** Said when the transition is taken (`edge.message`). */
  message?: string;
  global?: boolean;
}

export interface CompiledNode {
  id: string;
  node: WorkflowNode;
  /** Edges leaving this node, in definition order. */
  outgoing: Array<{ edge: WorkflowEdge; index: number }>;
  /**
   * The node's ways out as transition functions: for a conversation node its edges then the global
   * nodes (not itself, not those it already has an edge to); for a tool node its edges.
   */
  transitions: CompiledTransition[];
  transitionByName: ReadonlyMap<string, CompiledTransition>;
  overrides: ProviderOverrides;
  /** Canonical JSON of `overrides`; equal keys mean no `set_provider_overrides` is needed. */
  overrides_key: string;
  /** System prompt for this node (global prompt + this node's instructions). */
  system: string;
}

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

// ---------------------------------------------------------------------------------------------
// The machine

/** A step's context changes and commands, applied by one `enqueueActions`. */
interface Step {
  ctx: CallContext;
  patch: Partial<CallContext>;
  commands: MachineCommand[];
}

function beginStep(ctx: CallContext): Step {
  return { ctx, patch: {}, commands: [] };
}

function current<K extends keyof CallContext>(s: Step, key: K): CallContext[K] {
  return (key in s.patch ? s.patch[key] : s.ctx[key]) as CallContext[K];
}

function nextId(s: Step, prefix: string): string {
  const seq = current(s, 'seq') + 1;
  s.patch.seq = seq;
  return `${prefix}${seq}`;
}

function record(s: Step, message: HistoryMessage): void {
  s.patch.history = [...current(s, 'history'), message];
}

function say(s: Step, text: string, nodeId: string, interruptible: boolean): string {
  const sayId = nextId(s, 'say_');
  s.commands.push({ type: 'say', say_id: sayId, text, node_id: nodeId, interruptible });
  record(s, { role: 'assistant', content: text, node_id: nodeId, say_id: sayId });
  return sayId;
}

/**
 * A cut `say` keeps in the history only what the caller heard of it (`heard`, as the service
 * measured it), with no mark of the cut, as a model reply does (`model.replied` carries only its
 * heard part); nothing heard: the entry goes. No `heard`: the line played whole, nothing changes.
 */
function keepHeard(s: Step, sayId: string, heard: string): void {
  const history = current(s, 'history');
  let i = history.length - 1;
  while (i >= 0 && history[i]!.say_id !== sayId) i--;
  if (i < 0) return;
  const text = heard.trim();
  if (text === history[i]!.content) return;
  s.patch.history =
    text === ''
      ? [...history.slice(0, i), ...history.slice(i + 1)]
      : [...history.slice(0, i), { ...history[i]!, content: text }, ...history.slice(i + 1)];
}

function reject(s: Step, eventType: string, code: RejectionCode, message: string): void {
  s.commands.push({ type: 'event_rejected', event_type: eventType, code, message, node_id: s.ctx.node_id });
}

/** End now, or after a closing line has been played. */
function close(
  s: Step,
  nodeId: string,
  text: string | null,
  reason: EndedReason,
  commands: Array<TransferCommand | HangUpCommand>,
): void {
  if (text !== null && text !== '') {
    const sayId = say(s, text, nodeId, false);
    s.patch.closing = { say_id: sayId, reason, commands };
  } else {
    s.commands.push(...commands);
    s.patch.ended_reason = reason;
  }
}

function resultContent(value: unknown): string {
  if (typeof value === 'string') return value;
  try {
    return JSON.stringify(value) ?? 'null';
  } catch {
    return String(value);
  }
}

function nonEmpty(text: string | undefined | null): text is string {
  return typeof text === 'string' && text !== '';
}

function buildMachine(definition: WorkflowDefinition, nodes: Map<string, CompiledNode>) {
  const apply = (
    enqueue: {
      assign: (patch: Partial<CallContext>) => void;
      emit: (command: MachineCommand) => void;
    },
    s: Step,
  ): void => {
    if (Object.keys(s.patch).length > 0) enqueue.assign(s.patch);
    for (const command of s.commands) enqueue.emit(command);
  };

  const enterNode = (s: Step, nodeId: string): void => {
    const compiled = nodes.get(nodeId)!;
    const node = compiled.node;
    const initial = current(s, 'nodes_visited').length === 0;
    s.patch.node_id = nodeId;
    s.patch.nodes_visited = [...current(s, 'nodes_visited'), nodeId];
    s.patch.pending_tool_call_id = null;

    const activeOverrides = current(s, 'overrides_node');
    const activeKey = activeOverrides === null ? '{}' : nodes.get(activeOverrides)!.overrides_key;
    if (activeKey !== compiled.overrides_key) {
      s.commands.push({ type: 'set_provider_overrides', node_id: nodeId, ...compiled.overrides });
    }
    s.patch.overrides_node = compiled.overrides_key === '{}' ? null : nodeId;

    switch (node.type) {
      case 'conversation':
        if (nonEmpty(node.first_line)) say(s, node.first_line, nodeId, true);
        // No line of its own: the node's model speaks next (not at call start: the caller may).
        else if (!initial) s.commands.push({ type: 'run_model', node_id: nodeId, reason: 'node_entered' });
        break;
      case 'tool': {
        if (nonEmpty(node.first_line)) say(s, node.first_line, nodeId, true);
        const toolCallId = nextId(s, 'tool_');
        s.patch.pending_tool_call_id = toolCallId;
        s.commands.push({
          type: 'call_tool',
          tool_call_id: toolCallId,
          tool_name: node.tool_name,
          url: node.url,
          arguments: { ...(node.arguments ?? {}) },
          node_id: nodeId,
        });
        break;
      }
      case 'transfer':
        close(s, nodeId, node.first_line ?? null, 'call-transferred', [
          { type: 'transfer', destination: node.destination, node_id: nodeId },
          { type: 'hang_up', reason: 'call-transferred', node_id: nodeId },
        ]);
        break;
      case 'end':
        close(
          s,
          nodeId,
          nonEmpty(node.first_line) ? node.first_line : s.ctx.settings.end_call_message,
          'assistant-ended-call',
          [{ type: 'hang_up', reason: 'assistant-ended-call', node_id: nodeId }],
        );
        break;
    }
  };

  const machineSetup = setup({
    types: {
      context: {} as CallContext,
      events: {} as CallEvent,
      input: {} as CallInput,
      emitted: {} as MachineCommand,
    },
    actions: {
      enterNode: enqueueActions(({ context, enqueue }, params: { node_id: string }) => {
        const s = beginStep(context);
        enterNode(s, params.node_id);
        apply(enqueue, s);
      }),
      /** Says the edge's `message` before the target's entry actions run. */
      takeTransition: enqueueActions(({ context, enqueue }, params: { message?: string }) => {
        if (!nonEmpty(params.message)) return;
        const s = beginStep(context);
        say(s, params.message, context.node_id, true);
        apply(enqueue, s);
      }),
      recordCallerInput: enqueueActions(({ context, event, enqueue }) => {
        const s = beginStep(context);
        const content =
          event.type === 'caller.said' ? event.text : event.type === 'dtmf' ? `DTMF: ${event.digits}` : null;
        if (content === null) return;
        record(s, { role: 'user', content, node_id: context.node_id });
        s.patch.silence_attempts = 0;
        apply(enqueue, s);
      }),
      recordModelReply: enqueueActions(({ context, event, enqueue }) => {
        if (event.type !== 'model.replied' || event.text === '') return;
        const s = beginStep(context);
        record(s, { role: 'assistant', content: event.text, node_id: context.node_id });
        apply(enqueue, s);
      }),
      recordHeard: enqueueActions(({ context, event, enqueue }) => {
        if (event.type !== 'assistant.done_speaking' || event.heard === undefined || event.say_id === undefined) return;
        const s = beginStep(context);
        keepHeard(s, event.say_id, event.heard);
        apply(enqueue, s);
      }),
      runModel: enqueueActions(({ context, enqueue }, params: { reason: RunModelReason }) => {
        enqueue.emit({ type: 'run_model', node_id: context.node_id, reason: params.reason });
      }),
      recordToolOutcome: enqueueActions(({ context, event, enqueue }) => {
        if (event.type !== 'tool.result' && event.type !== 'tool.failed') return;
        const node = nodes.get(context.node_id)!.node;
        const s = beginStep(context);
        record(s, {
          role: 'tool',
          content:
            event.type === 'tool.result'
              ? resultContent(event.result)
              : resultContent({ error: event.error }),
          node_id: context.node_id,
          tool_call_id: event.tool_call_id,
          ...(node.type === 'tool' ? { tool_name: node.tool_name } : {}),
        });
        s.patch.pending_tool_call_id = null;
        apply(enqueue, s);
      }),
      reject: enqueueActions(({ context, event, enqueue }, params: { code: RejectionCode }) => {
        const s = beginStep(context);
        reject(s, event.type, params.code, rejectionMessage(params.code, event, context, nodes));
        apply(enqueue, s);
      }),
      silencePrompt: enqueueActions(({ context, enqueue }) => {
        const s = beginStep(context);
        const attempt = context.silence_attempts + 1;
        s.patch.silence_attempts = attempt;
        const messages = context.settings.silence.messages;
        if (messages.length > 0) {
          say(s, messages[(attempt - 1) % messages.length]!, context.node_id, true);
        } else {
          s.commands.push({ type: 'run_model', node_id: context.node_id, reason: 'silence_check' });
        }
        apply(enqueue, s);
      }),
      silenceGiveUp: enqueueActions(({ context, enqueue }) => {
        const s = beginStep(context);
        close(s, context.node_id, context.settings.silence.final_message, 'silence-timed-out', [
          { type: 'hang_up', reason: 'silence-timed-out', node_id: context.node_id },
        ]);
        apply(enqueue, s);
      }),
      finishClosing: enqueueActions(({ context, enqueue }) => {
        const closing = context.closing;
        if (!closing) return;
        enqueue.assign({ closing: null, ended_reason: closing.reason });
        for (const command of closing.commands) enqueue.emit(command);
      }),
      endedByCaller: enqueueActions(({ enqueue }) => {
        enqueue.assign({ ended_reason: 'customer-ended-call', closing: null, pending_tool_call_id: null });
      }),
      endedByMaxDuration: enqueueActions(({ context, enqueue }) => {
        enqueue.assign({ ended_reason: 'exceeded-max-duration', closing: null, pending_tool_call_id: null });
        enqueue.emit({ type: 'hang_up', reason: 'exceeded-max-duration', node_id: context.node_id });
      }),
    },
    guards: {
      choseFunction: ({ event }, params: { name: string }) =>
        event.type === 'model.chose_transition' && event.function_name === params.name,
      isStale: ({ context, event }) =>
        event.type === 'model.chose_transition' &&
        event.node_id !== undefined &&
        event.node_id !== context.node_id,
      isPendingToolCall: ({ context, event }) =>
        (event.type === 'tool.result' || event.type === 'tool.failed') &&
        context.pending_tool_call_id !== null &&
        event.tool_call_id === context.pending_tool_call_id,
      isClosing: ({ context }) => context.closing !== null,
      closingLinePlayed: ({ context, event }) =>
        event.type === 'assistant.done_speaking' &&
        context.closing !== null &&
        (event.say_id === undefined || event.say_id === context.closing.say_id),
      silenceExhausted: ({ context }) =>
        context.silence_attempts >= context.settings.silence.max_attempts,
      silenceExhaustedWithLine: ({ context }) =>
        context.silence_attempts >= context.settings.silence.max_attempts &&
        nonEmpty(context.settings.silence.final_message),
    },
  });

  const rejectWith = (code: RejectionCode) => ({ actions: { type: 'reject', params: { code } } });
  const ignore = { actions: [] };

  const choiceTransitions = (compiled: CompiledNode) => [
    { guard: 'isStale', ...rejectWith('STALE_EVENT') },
    ...compiled.transitions.map((t) => ({
      guard: { type: 'choseFunction', params: { name: t.name } },
      target: `#${stateId(t.target)}`,
      // A transition to the node itself (invalid, but harmless) re-enters it.
      reenter: true,
      actions: { type: 'takeTransition', params: t.message !== undefined ? { message: t.message } : {} },
    })),
    rejectWith('UNKNOWN_TRANSITION_FUNCTION'),
  ];

  const states: Record<string, unknown> = {};
  for (const compiled of nodes.values()) {
    const node = compiled.node;
    const base = {
      id: stateId(node.id),
      entry: { type: 'enterNode', params: { node_id: node.id } },
    };
    switch (node.type) {
      case 'conversation':
        states[node.id] = {
          ...base,
          on: {
            'caller.said': { actions: ['recordCallerInput', { type: 'runModel', params: { reason: 'caller_input' } }] },
            dtmf: { actions: ['recordCallerInput', { type: 'runModel', params: { reason: 'caller_input' } }] },
            'model.chose_transition': choiceTransitions(compiled),
          },
        };
        break;
      case 'tool': {
        const onOutcome =
          compiled.transitions.length === 1
            ? {
                guard: 'isPendingToolCall',
                target: `#${stateId(compiled.transitions[0]!.target)}`,
                reenter: true,
                actions: [
                  'recordToolOutcome',
                  {
                    type: 'takeTransition',
                    params: compiled.transitions[0]!.message !== undefined ? { message: compiled.transitions[0]!.message } : {},
                  },
                ],
              }
            : compiled.transitions.length === 0
              ? { guard: 'isPendingToolCall', target: 'done', actions: ['recordToolOutcome'] }
              : {
                  guard: 'isPendingToolCall',
                  target: 'choosing',
                  actions: ['recordToolOutcome', { type: 'runModel', params: { reason: 'tool_result' } }],
                };
        states[node.id] = {
          ...base,
          initial: 'running',
          states: {
            running: {
              on: {
                'tool.result': [onOutcome, rejectWith('UNKNOWN_TOOL_CALL')],
                'tool.failed': [onOutcome, rejectWith('UNKNOWN_TOOL_CALL')],
              },
            },
            choosing: { on: { 'model.chose_transition': choiceTransitions(compiled) } },
            // A tool node without a way out (rejected by validation): the call waits for the caller to hang up.
            done: {},
          },
        };
        break;
      }
      case 'transfer':
      case 'end':
        states[node.id] = {
          ...base,
          always: [{ guard: 'isClosing', target: '#closing' }, { target: '#ended' }],
        };
        break;
    }
  }

  const endEvents = {
    hangup: { target: '#ended', actions: 'endedByCaller' },
    'timer.max_duration': { target: '#ended', actions: 'endedByMaxDuration' },
  };

  const config = {
    id: 'call',
    context: ({ input }: { input: CallInput }): CallContext => ({
      node_id: definition.entry_node,
      history: [],
      nodes_visited: [],
      seq: 0,
      pending_tool_call_id: null,
      overrides_node: null,
      closing: null,
      silence_attempts: 0,
      ended_reason: null,
      settings: input.settings,
    }),
    initial: 'live',
    states: {
      live: {
        initial: definition.entry_node,
        states,
        on: {
          ...endEvents,
          'caller.said': { actions: 'recordCallerInput' },
          dtmf: { actions: 'recordCallerInput' },
          'model.replied': { actions: 'recordModelReply' },
          'assistant.done_speaking': { actions: 'recordHeard' },
          'timer.silence': [
            { guard: 'silenceExhaustedWithLine', target: '#closing', actions: 'silenceGiveUp' },
            { guard: 'silenceExhausted', target: '#ended', actions: 'silenceGiveUp' },
            { actions: 'silencePrompt' },
          ],
          'model.chose_transition': rejectWith('EVENT_NOT_EXPECTED'),
          'tool.result': rejectWith('UNKNOWN_TOOL_CALL'),
          'tool.failed': rejectWith('UNKNOWN_TOOL_CALL'),
          '*': rejectWith('EVENT_NOT_EXPECTED'),
        },
      },
      closing: {
        id: 'closing',
        on: {
          ...endEvents,
          'assistant.done_speaking': [
            { guard: 'closingLinePlayed', target: '#ended', actions: ['recordHeard', 'finishClosing'] },
            { actions: 'recordHeard' },
          ],
          'caller.said': { actions: 'recordCallerInput' },
          dtmf: { actions: 'recordCallerInput' },
          'model.replied': ignore,
          'timer.silence': ignore,
          'tool.result': rejectWith('UNKNOWN_TOOL_CALL'),
          'tool.failed': rejectWith('UNKNOWN_TOOL_CALL'),
          '*': rejectWith('EVENT_NOT_EXPECTED'),
        },
      },
      ended: { id: 'ended', type: 'final' },
    },
  };

  // The states are generated from data, so their config is checked by the tests, not by tsc.
  return machineSetup.createMachine(config as unknown as Parameters<typeof machineSetup.createMachine>[0]);
}

export function stateId(nodeId: string): string {
  return `node:${nodeId}`;
}

function rejectionMessage(
  code: RejectionCode,
  event: CallEvent,
  context: CallContext,
  nodes: Map<string, CompiledNode>,
): string {
  const node = nodes.get(context.node_id);
  switch (code) {
    case 'UNKNOWN_TRANSITION_FUNCTION': {
      const name = event.type === 'model.chose_transition' ? event.function_name : '';
      const known = node ? node.transitions.map((t) => t.name).join(', ') : '';
      return `node "${context.node_id}" has no transition function "${name}"${known ? ` (it has: ${known})` : ''}`;
    }
    case 'STALE_EVENT':
      return `the call is in node "${context.node_id}", not "${event.type === 'model.chose_transition' ? event.node_id : ''}"`;
    case 'UNKNOWN_TOOL_CALL': {
      const id = event.type === 'tool.result' || event.type === 'tool.failed' ? event.tool_call_id : '';
      return context.pending_tool_call_id === null
        ? `no tool call is pending (got "${id}")`
        : `pending tool call is "${context.pending_tool_call_id}", not "${id}"`;
    }
    default:
      return `"${event.type}" is not expected in node "${context.node_id}" now`;
  }
}

export type CallMachine = ReturnType<typeof buildMachine>;
export type CallActor = ActorRefFrom<CallMachine>;
export type CallMachineSnapshot = SnapshotFrom<CallMachine>;
