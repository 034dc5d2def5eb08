/**
 * The engine's vocabulary: the events a call's engine takes, the commands it gives, the machine's
 * context (plain JSON, so a call can be saved and restored anywhere) and the shape of a compiled
 * node. Types only, besides the list of event types.
 */
import type { LlmConfig, SttConfig, TtsConfig, WorkflowEdge, WorkflowNode } from './schema.js';

// ---------------------------------------------------------------------------------------------
// Events in, commands out

/** Why the engine (or the caller) ended the call; DECISIONS 7 `ended_reason` values. */
export type EndedReason =
  | 'customer-ended-call'
  | 'assistant-ended-call'
  | 'call-transferred'
  | 'silence-timed-out'
  | 'exceeded-max-duration'
  /** A live control ended the call (`POST /calls/{id}/control` `end`, said its message first). */
  | 'api-ended-call'
  /** A warm transfer did not complete and its node has no way out (DECISIONS 16). */
  | 'transfer-failed';

/** How a transfer came out (DECISIONS 16): `completed`, or why the operator was not joined. */
export type TransferResult = 'completed' | 'no-answer' | 'busy' | 'declined' | 'failed';
export const TRANSFER_RESULTS: readonly TransferResult[] = ['completed', 'no-answer', 'busy', 'declined', 'failed'];

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
  /** A warm transfer's outcome: joined (`completed`), or why not. */
  | { type: 'transfer.result'; result: TransferResult }
  | { type: 'timer.silence' }
  | { type: 'timer.max_duration' }
  /**
   * Live control (`POST /calls/{id}/control`, DECISIONS 16). `control.say`: a line said in the
   * current node (the service decides when: after the current line, or cutting it), kept in the
   * history like any line. `control.add_message`: a message in the model's context from its next
   * turn, never said. `control.goto`: the workflow moves to `node_id` (its entry runs: its
   * `first_line` is said). `control.transfer`: the call moves to `destination` at once (`mode`
   * `cold`, the default), or, `warm`, as a warm transfer node moves it: `hold_message` is said, the
   * operator is dialled (`warm_transfer`) and the call waits in its node for the `transfer.result`;
   * one that does not complete says `TRANSFER_FAILED_LINE` and the call goes on in that node.
   * `control.end`: `message` (if any) is said, then the call ends `api-ended-call`. Lines they
   * cause carry `source: "control"`.
   */
  | { type: 'control.say'; text: string }
  | { type: 'control.add_message'; role: 'system' | 'user'; content: string }
  | { type: 'control.goto'; node_id: string }
  | {
      type: 'control.transfer';
      destination: string;
      mode?: 'cold' | 'warm';
      /** Warm only, as on a warm transfer node (DECISIONS 16). */
      operator_message?: string;
      hold_message?: string;
      ring_timeout_seconds?: number;
      require_acceptance?: boolean;
    }
  | { type: 'control.end'; message?: string };

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
  'transfer.result',
  'timer.silence',
  'timer.max_duration',
  'control.say',
  'control.add_message',
  'control.goto',
  'control.transfer',
  'control.end',
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
  /** `control.goto` named a node the workflow does not have. */
  | 'UNKNOWN_NODE'
  /** A warm transfer is under way: it must come out before the call moves (`control.goto`, a warm `control.transfer`). */
  | 'TRANSFER_UNDER_WAY'
  /** A warm `control.transfer` outside a conversation node (a tool node runs): the call cannot wait there. */
  | 'NOT_IN_CONVERSATION'
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
  /** `control`: a live control asked for it (`control.say`, `control.end`'s message). */
  source?: 'control';
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

/**
 * A warm transfer (DECISIONS 16): dial `destination`, tell the operator `operator_message`
 * (`{{summary}}` still in it), join the legs; the outcome comes back as `transfer.result`. The
 * node's lines (`first_line`, `hold_message`) are `say`s before it.
 */
export interface WarmTransferCommand {
  type: 'warm_transfer';
  destination: string;
  node_id: string;
  operator_message: string;
  ring_timeout_seconds: number;
  require_acceptance: boolean;
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
  | WarmTransferCommand
  | HangUpCommand
  | EventRejectedCommand
  | RunModelRequest;

export interface HistoryMessage {
  /**
   * `user`: the caller (speech or keypad); `assistant`: said to the caller; `tool`: a tool node's
   * outcome; `system`: an instruction a live control added (`user` too may come from one).
   */
  role: 'user' | 'assistant' | 'tool' | 'system';
  content: string;
  node_id: string;
  tool_call_id?: string;
  tool_name?: string;
  /** On the entry of a `say`: which one (`assistant.done_speaking {say_id, heard}` finds it by this). */
  say_id?: string;
  /** `control`: a live control said or added it. */
  source?: 'control';
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
  /** (The conversation is not here: the session's `ConversationHistory`, engine/history.ts.) */
  nodes_visited: string[];
  /** Counter behind `say_id`s and `tool_call_id`s: deterministic, survives save/restore. */
  seq: number;
  pending_tool_call_id: string | null;
  /** Node whose provider overrides are in effect; `null`: the assistant's own blocks. */
  overrides_node: string | null;
  closing: PendingClose | null;
  silence_attempts: number;
  ended_reason: EndedReason | null;
  /**
   * The destination of a warm transfer a live control started, until its `transfer.result`
   * (absent in a call saved before it existed: none).
   */
  control_transfer?: string | null;
  settings: CallSettings;
}

export interface CallInput {
  settings: CallSettings;
}

// ---------------------------------------------------------------------------------------------
// Compiled nodes

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
