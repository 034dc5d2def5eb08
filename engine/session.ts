/**
 * One call's engine: an XState actor over the compiled workflow. Events in, commands out,
 * synchronously: `send(event)` returns what the service must do, in order. Save with
 * `snapshot()` (plain JSON) and resume anywhere with `restoreCallSession`, which re-issues nothing.
 */
import { createActor } from 'xstate';
import type { NodeType, Tool, WorkflowDefinition } from './schema.js';
import { compileWorkflow, type CompiledWorkflow } from './compile.js';
import { MemoryHistory, type ConversationHistory, type HistoryOp } from './history.js';
import type { CallActor, CallMachineSnapshot } from './machine.js';
import {
  CALL_EVENT_TYPES,
  TRANSFER_RESULTS,
  type CallContext,
  type CallEvent,
  type CallSettings,
  type EndedReason,
  type EventRejectedCommand,
  type HistoryMessage,
  type MachineCommand,
  type ProviderOverrides,
  type RejectionCode,
  type RunModelReason,
  type RunModelRequest,
  type SilencePolicy,
} from './types.js';
import { DEFAULT_SILENCE as PLATFORM_SILENCE } from './assistant.js';
import { transferFieldProblems } from './control-transfer.js';
import { EngineError, ErrorCodes } from './errors.js';
import { buildModelContext, type ModelContext, type TransitionFunction } from './prompt.js';

export interface CallSessionOptions {
  /** The assistant's tools; given to the model in conversation nodes. */
  tools?: readonly Tool[];
  /** `speech_config.end_call_message`: said by an end node that has no `first_line`. */
  end_call_message?: string | null;
  /** `speech_config.silence`; missing fields take the platform defaults (`DEFAULT_SILENCE`). */
  silence?: Partial<SilencePolicy>;
  /**
   * Where the conversation is kept (a call's or chat's log); none: the session keeps its own. A
   * restored session puts its snapshot's history into it.
   */
  history?: ConversationHistory;
}

/** What the model is told after the conversation when it writes a silence check-in (DECISIONS 13). */
export const SILENCE_CHECK_INSTRUCTION =
  'The caller has been silent for a while. Say one short sentence, in the language of the conversation so far, ' +
  'to check that they are still there. Do not call any function.';
/** Said instead of the model's check-in when the model fails or says nothing. */
export const SILENCE_CHECK_FALLBACK = 'Are you still there?';

/** `run_model` as the service receives it: everything the model needs for this turn. */
export interface RunModelCommand extends RunModelRequest {
  mode: ModelContext['mode'];
  system: string;
  /** Empty for a `silence_check`: the check-in offers the model no function. */
  transition_functions: readonly TransitionFunction[];
  tools: readonly Tool[];
  /** The conversation so far (shared, read-only). */
  messages: readonly HistoryMessage[];
  /** `silence_check` only: an instruction for this turn, given after the conversation. */
  instruction?: string;
  /**
   * `silence_check` only: said as the model's reply when the model fails or says nothing; a
   * failed check-in never ends the call.
   */
  fallback?: string;
}

export type Command = Exclude<MachineCommand, RunModelRequest> | RunModelCommand;
export type CommandType = Command['type'];

export type SessionStatus = 'active' | 'closing' | 'ended';

export interface SessionState {
  status: SessionStatus;
  node_id: string;
  node_type: NodeType;
  /** What the call is waiting for (`transfer`: a warm transfer's outcome, a node's or a live control's). */
  awaiting: 'caller' | 'tool_result' | 'model_choice' | 'closing_line' | 'transfer' | null;
  /** Where the warm transfer under way dials (`awaiting: "transfer"`); else null. */
  transfer_destination: string | null;
  pending_tool_call_id: string | null;
  ended_reason: EndedReason | null;
  /** Node overrides in effect (empty: the assistant's own blocks). */
  provider_overrides: ProviderOverrides;
}

export const SNAPSHOT_FORMAT = 'switchboard.call-session/1';

/** A saved call: plain JSON. */
export interface SessionSnapshot {
  format: typeof SNAPSHOT_FORMAT;
  definition_hash: string;
  status: SessionStatus;
  current_node: string;
  ended_reason: EndedReason | null;
  history: HistoryMessage[];
  nodes_visited: string[];
  /** XState's persisted snapshot; its context leaves out `nodes_visited` (above). */
  machine: Record<string, unknown>;
}

export interface CallSession {
  readonly workflow: CompiledWorkflow;
  /** Enters the entry node; returns its commands. A second call returns []. */
  start(): Command[];
  /** Never throws: an event that does not fit is answered with an `event_rejected` command. */
  send(event: CallEvent): Command[];
  /** Throws `NOT_STARTED` before `start()` (or a restore): check `isStarted()` first. */
  snapshot(): SessionSnapshot;
  /** `start()` ran (or the session was restored): it has a snapshot to save. */
  isStarted(): boolean;
  state(): SessionState;
  history(): readonly HistoryMessage[];
  nodesVisited(): readonly string[];
  /** What the model would see now (conversation node, or a tool node waiting for a choice). */
  modelContext(): ModelContext | null;
  /** Stops the actor; later events are rejected with `CALL_ENDED`. */
  stop(): void;
}

export type CallSessionErrorCode = 'NOT_STARTED' | 'SNAPSHOT_INVALID' | 'SNAPSHOT_DEFINITION_MISMATCH';

export class CallSessionError extends EngineError {
  static override readonly codes = [ErrorCodes.NOT_STARTED, ErrorCodes.SNAPSHOT_INVALID, ErrorCodes.SNAPSHOT_DEFINITION_MISMATCH] as const;
  declare readonly code: CallSessionErrorCode;

  constructor(code: CallSessionErrorCode, message: string) {
    super(code, message);
    this.name = 'CallSessionError';
  }
}

function settingsFrom(options: CallSessionOptions): CallSettings {
  const silence = options.silence ?? {};
  return {
    end_call_message: options.end_call_message ?? null,
    silence: {
      messages: [...(silence.messages ?? PLATFORM_SILENCE.messages)],
      // `null` (no final line) is a choice; only a missing value takes the platform default.
      final_message: silence.final_message !== undefined ? silence.final_message : PLATFORM_SILENCE.final_message,
      max_attempts: silence.max_attempts ?? PLATFORM_SILENCE.max_attempts,
    },
  };
}

function toCompiled(workflow: WorkflowDefinition | CompiledWorkflow): CompiledWorkflow {
  return 'machine' in workflow && 'hash' in workflow ? workflow : compileWorkflow(workflow);
}

/** Starts a call on a definition (compiled once per definition, then cached) or a compiled workflow. */
export function createCallSession(
  workflow: WorkflowDefinition | CompiledWorkflow,
  options: CallSessionOptions = {},
): CallSession {
  const compiled = toCompiled(workflow);
  const actor = createActor(compiled.machine, { input: { settings: settingsFrom(options) } });
  return new Session(compiled, actor, options, false);
}

/**
 * Resumes a saved call in the same node with the same history. Nothing is re-issued: the service
 * carried out the commands before the snapshot was taken. Throws `CallSessionError` when the
 * snapshot is not one of this definition's.
 */
export function restoreCallSession(
  workflow: WorkflowDefinition | CompiledWorkflow,
  snapshot: SessionSnapshot,
  options: CallSessionOptions = {},
): CallSession {
  const compiled = toCompiled(workflow);
  if (!snapshot || typeof snapshot !== 'object' || snapshot.format !== SNAPSHOT_FORMAT) {
    throw new CallSessionError('SNAPSHOT_INVALID', `not a ${SNAPSHOT_FORMAT} snapshot`);
  }
  if (snapshot.definition_hash !== compiled.hash) {
    throw new CallSessionError(
      'SNAPSHOT_DEFINITION_MISMATCH',
      `snapshot was taken on definition ${snapshot.definition_hash}, not ${compiled.hash}`,
    );
  }
  const machine = snapshot.machine as { context?: Record<string, unknown> } | undefined;
  if (!machine || typeof machine !== 'object' || !machine.context || typeof machine.context !== 'object') {
    throw new CallSessionError('SNAPSHOT_INVALID', 'snapshot has no machine state');
  }
  if (!Array.isArray(snapshot.history)) throw new CallSessionError('SNAPSHOT_INVALID', 'snapshot has no history');
  // a snapshot saved before the history left the machine's context carries none there
  const { history: _saved, ...context } = machine.context;
  const persisted = { ...machine, context: { ...context, nodes_visited: snapshot.nodes_visited } };
  // `input` is not used on restore: the saved context (settings included) is.
  const actor = createActor(compiled.machine, {
    snapshot: persisted as unknown as CallMachineSnapshot,
    input: { settings: settingsFrom(options) },
  });
  const session = new Session(compiled, actor, options, true, snapshot.history);
  const restored = actor.getSnapshot();
  if ((restored.status as string) === 'error' || !compiled.nodes.has(restored.context?.node_id)) {
    session.stop();
    throw new CallSessionError('SNAPSHOT_INVALID', 'snapshot does not fit this workflow');
  }
  return session;
}

class Session implements CallSession {
  private outbox: MachineCommand[] = [];
  private started = false;
  private renamed: Map<string, Map<string, string>> | null = null;
  private readonly conversation: ConversationHistory;

  constructor(
    readonly workflow: CompiledWorkflow,
    private readonly actor: CallActor,
    private readonly options: CallSessionOptions,
    restored: boolean,
    history?: readonly HistoryMessage[],
  ) {
    this.conversation = options.history ?? new MemoryHistory();
    if (history) this.conversation.restore(history);
    actor.on('*', (emitted) => {
      const op = emitted as MachineCommand | HistoryOp;
      // what the machine writes into the conversation goes there at once; the rest are commands
      if (op.type === 'history.append') this.conversation.append(op.message);
      else if (op.type === 'history.heard') this.conversation.heard(op.say_id, op.heard);
      else this.outbox.push(op);
    });
    // An error observer keeps XState from rethrowing action errors asynchronously.
    actor.subscribe({ error: () => {} });
    if (restored) {
      actor.start();
      this.outbox = [];
      this.started = true;
    }
  }

  start(): Command[] {
    if (this.started) return [];
    this.started = true;
    this.outbox = [];
    this.actor.start();
    return this.drain();
  }

  send(event: CallEvent): Command[] {
    const type = typeof (event as { type?: unknown } | null)?.type === 'string' ? (event as { type: string }).type : 'unknown';
    if (!this.started) return [this.rejection(type, 'NOT_STARTED', 'start() the session before sending events')];
    const problem = eventProblem(event);
    if (problem !== null) return [this.rejection(type, 'MALFORMED_EVENT', problem)];
    if (this.actor.getSnapshot().status !== 'active') {
      return [this.rejection(type, 'CALL_ENDED', 'the call has ended')];
    }
    const forwarded = this.translate(event);
    if (forwarded === null) {
      const name = (event as { function_name: string }).function_name;
      return [this.rejection(type, 'UNKNOWN_TRANSITION_FUNCTION', `no transition function "${name}" in this node`)];
    }
    this.outbox = [];
    try {
      this.actor.send(forwarded);
    } catch (err) {
      this.outbox = [];
      return [this.rejection(type, 'INTERNAL_ERROR', err instanceof Error ? err.message : String(err))];
    }
    if ((this.actor.getSnapshot().status as string) === 'error') {
      this.outbox = [];
      return [this.rejection(type, 'INTERNAL_ERROR', 'the call engine failed on this event')];
    }
    return this.drain();
  }

  isStarted(): boolean {
    return this.started;
  }

  snapshot(): SessionSnapshot {
    if (!this.started) throw new CallSessionError('NOT_STARTED', 'start() the session before saving it');
    const persisted = this.actor.getPersistedSnapshot() as unknown as Record<string, unknown> & {
      context: CallContext;
    };
    const { nodes_visited, ...context } = persisted.context;
    const state = this.state();
    return {
      format: SNAPSHOT_FORMAT,
      definition_hash: this.workflow.hash,
      status: state.status,
      current_node: state.node_id,
      ended_reason: state.ended_reason,
      history: [...this.conversation.messages()],
      nodes_visited: [...nodes_visited],
      machine: { ...persisted, context },
    };
  }

  state(): SessionState {
    const snap = this.actor.getSnapshot();
    const ctx = snap.context;
    const node = this.workflow.nodes.get(ctx.node_id)!;
    const ended = snap.status !== 'active';
    const closing = !ended && snap.value === 'closing';
    let awaiting: SessionState['awaiting'] = null;
    let transferDestination: string | null = null;
    if (closing) awaiting = 'closing_line';
    else if (!ended && this.started) {
      if (typeof ctx.control_transfer === 'string') {
        // a warm transfer by control: the call waits in its node for the outcome
        awaiting = 'transfer';
        transferDestination = ctx.control_transfer;
      } else if (node.node.type === 'tool') {
        awaiting = ctx.pending_tool_call_id !== null ? 'tool_result' : this.inToolChoice() ? 'model_choice' : null;
      } else if (node.node.type === 'conversation') {
        awaiting = 'caller';
      } else if (node.node.type === 'transfer' && node.node.mode === 'warm') {
        awaiting = 'transfer';
        transferDestination = node.node.destination;
      }
    }
    return {
      status: ended ? 'ended' : closing ? 'closing' : 'active',
      node_id: ctx.node_id,
      node_type: node.node.type,
      awaiting,
      transfer_destination: transferDestination,
      pending_tool_call_id: ctx.pending_tool_call_id,
      ended_reason: ctx.ended_reason,
      provider_overrides:
        ctx.overrides_node === null ? {} : { ...this.workflow.nodes.get(ctx.overrides_node)!.overrides },
    };
  }

  history(): readonly HistoryMessage[] {
    return this.conversation.messages();
  }

  nodesVisited(): readonly string[] {
    return this.actor.getSnapshot().context.nodes_visited;
  }

  modelContext(): ModelContext | null {
    const snap = this.actor.getSnapshot();
    if (snap.status !== 'active' || snap.value === 'closing') return null;
    // while a warm transfer by control is under way the model has no turn
    if (typeof snap.context.control_transfer === 'string') return null;
    const node = this.workflow.nodes.get(snap.context.node_id)!;
    if (node.node.type === 'conversation' || (node.node.type === 'tool' && this.inToolChoice())) {
      return this.contextFor(node.id);
    }
    return null;
  }

  stop(): void {
    this.actor.stop();
  }

  private inToolChoice(): boolean {
    const value = this.actor.getSnapshot().value as unknown;
    if (typeof value !== 'object' || value === null) return false;
    const live = (value as { live?: unknown }).live;
    return typeof live === 'object' && live !== null && Object.values(live).includes('choosing');
  }

  private contextFor(nodeId: string): ModelContext {
    return buildModelContext(this.workflow, nodeId, this.options.tools ? { tools: this.options.tools } : {});
  }

  /**
   * Maps a transition name renamed around the assistant's tools back to the compiled name;
   * `null` when the name is a compiled one that a tool's name hid from the model.
   */
  private translate(event: CallEvent): CallEvent | null {
    if (event.type !== 'model.chose_transition' || !this.options.tools || this.options.tools.length === 0) {
      return event;
    }
    const nodeId = this.actor.getSnapshot().context.node_id;
    const node = this.workflow.nodes.get(nodeId)!;
    if (node.node.type !== 'conversation') return event;
    this.renamed ??= new Map();
    let names = this.renamed.get(nodeId);
    if (!names) {
      const context = this.contextFor(nodeId);
      names = new Map(context.transitionFunctions.map((f, i) => [f.name, node.transitions[i]!.name]));
      this.renamed.set(nodeId, names);
    }
    const canonical = names.get(event.function_name);
    if (canonical === undefined) return node.transitionByName.has(event.function_name) ? null : event;
    return canonical === event.function_name ? event : { ...event, function_name: canonical };
  }

  private drain(): Command[] {
    const out = this.outbox;
    this.outbox = [];
    if (out.length === 0) return out as Command[];
    const history = this.conversation.messages();
    return out.map((command): Command => {
      if (command.type !== 'run_model') return command;
      const context = this.contextFor(command.node_id);
      const turn = { ...command, mode: context.mode, system: context.system, messages: history };
      if (command.reason === 'silence_check') {
        return { ...turn, transition_functions: [], tools: [], instruction: SILENCE_CHECK_INSTRUCTION, fallback: SILENCE_CHECK_FALLBACK };
      }
      return { ...turn, transition_functions: context.transitionFunctions, tools: context.tools };
    });
  }

  private rejection(eventType: string, code: RejectionCode, message: string): EventRejectedCommand {
    let nodeId: string | null = null;
    try {
      nodeId = this.actor.getSnapshot().context.node_id;
    } catch {
      nodeId = null;
    }
    return { type: 'event_rejected', event_type: eventType, code, message, node_id: nodeId };
  }
}

const isString = (v: unknown): v is string => typeof v === 'string';

/** Why an event cannot be processed at all (shape), or null. */
function eventProblem(event: unknown): string | null {
  if (event === null || typeof event !== 'object') return 'an event is an object with a "type"';
  const e = event as Record<string, unknown>;
  if (!isString(e.type) || !(CALL_EVENT_TYPES as readonly string[]).includes(e.type)) {
    return `unknown event type ${JSON.stringify(e.type) ?? 'undefined'}; expected one of ${CALL_EVENT_TYPES.join(', ')}`;
  }
  switch (e.type as CallEvent['type']) {
    case 'caller.said':
      // An empty final transcript is not a turn: it must not wake the model.
      return isString(e.text) && e.text.trim() !== '' ? null : 'caller.said: "text" must be a non-empty string';
    case 'model.replied':
      return isString(e.text) ? null : 'model.replied: "text" must be a string';
    case 'dtmf':
      return isString(e.digits) && /^[0-9*#A-Da-dw]+$/.test(e.digits) ? null : 'dtmf: "digits" must be keypad digits (0-9, *, #, A-D)';
    case 'assistant.done_speaking':
      if (e.say_id !== undefined && !isString(e.say_id)) return 'assistant.done_speaking: "say_id" must be a string';
      if (e.heard === undefined) return null;
      if (!isString(e.heard)) return 'assistant.done_speaking: "heard" must be a string';
      // which line was cut must be said: "everything said so far" has no one text to shorten
      return e.say_id !== undefined ? null : 'assistant.done_speaking: "heard" needs the "say_id" of the line that was cut';
    case 'model.chose_transition':
      if (!isString(e.function_name)) return 'model.chose_transition: "function_name" must be a string';
      return e.node_id === undefined || isString(e.node_id) ? null : 'model.chose_transition: "node_id" must be a string';
    case 'tool.result':
      return isString(e.tool_call_id) ? null : 'tool.result: "tool_call_id" must be a string';
    case 'transfer.result':
      return (TRANSFER_RESULTS as readonly unknown[]).includes(e.result) ? null : `transfer.result: "result" must be one of ${TRANSFER_RESULTS.join(', ')}`;
    case 'tool.failed':
      if (!isString(e.tool_call_id)) return 'tool.failed: "tool_call_id" must be a string';
      return isString(e.error) ? null : 'tool.failed: "error" must be a string';
    case 'control.say':
      return isString(e.text) && e.text.trim() !== '' ? null : 'control.say: "text" must be a non-empty string';
    case 'control.add_message':
      if (e.role !== 'system' && e.role !== 'user') return 'control.add_message: "role" must be "system" or "user"';
      return isString(e.content) && e.content.trim() !== '' ? null : 'control.add_message: "content" must be a non-empty string';
    case 'control.goto':
      return isString(e.node_id) ? null : 'control.goto: "node_id" must be a string';
    case 'control.transfer': {
      if (!isString(e.destination) || e.destination === '') return 'control.transfer: "destination" must be a non-empty string';
      const problems = transferFieldProblems(e);
      return problems.length === 0 ? null : `control.transfer: ${problems.join('; ')}`;
    }
    case 'control.end':
      return e.message === undefined || isString(e.message) ? null : 'control.end: "message" must be a string';
    default:
      return null;
  }
}

export type { CallEvent, EndedReason, HistoryMessage, ProviderOverrides, RejectionCode, RunModelReason };
