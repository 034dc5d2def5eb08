/**
 * The XState v5 machine of a workflow: one state per workflow node. Commands for the service are
 * XState `emit`s; `session.ts` collects them synchronously per event.
 */
import { and, enqueueActions, not, setup, type ActorRefFrom, type SnapshotFrom } from 'xstate';
import { warmTransferOf } from './control-transfer.js';
import type { HistoryOp } from './history.js';
import { DEFAULT_OPERATOR_MESSAGE, DEFAULT_RING_TIMEOUT_SECONDS, type WorkflowDefinition } from './schema.js';
import type {
  CallContext,
  CallEvent,
  CallInput,
  CompiledNode,
  EndedReason,
  HangUpCommand,
  HistoryMessage,
  MachineCommand,
  RejectionCode,
  RunModelReason,
  TransferCommand,
} from './types.js';

/** Said to the caller when a warm transfer did not complete and its edge has no `message` (or it has no edge). */
export const TRANSFER_FAILED_LINE = "I'm sorry, I couldn't reach anyone to take your call.";

/** A step's context changes, what it writes into the conversation, and its commands, applied by one `enqueueActions`. */
interface Step {
  ctx: CallContext;
  patch: Partial<CallContext>;
  history: HistoryOp[];
  commands: MachineCommand[];
}

function beginStep(ctx: CallContext): Step {
  return { ctx, patch: {}, commands: [], history: [] };
}

function current<K extends keyof CallContext>(s: Step, key: K): CallContext[K] {
  return (key in s.patch ? s.patch[key] : s.ctx[key]) as CallContext[K];
}

function nextId(s: Step, prefix: string): string {
  const seq = current(s, 'seq') + 1;
  s.patch.seq = seq;
  return `${prefix}${seq}`;
}

/** A line of the conversation, into the session's history (engine/history.ts). */
function record(s: Step, message: HistoryMessage): void {
  s.history.push({ type: 'history.append', message });
}

function say(s: Step, text: string, nodeId: string, interruptible: boolean, source?: 'control'): string {
  const sayId = nextId(s, 'say_');
  const from = source ? { source } : {};
  s.commands.push({ type: 'say', say_id: sayId, text, node_id: nodeId, interruptible, ...from });
  record(s, { role: 'assistant', content: text, node_id: nodeId, say_id: sayId, ...from });
  return sayId;
}

/**
 * A cut `say` keeps in the history only what the caller heard of it (`heard`, as the service
 * measured it), with no mark of the cut, as a model reply does (`model.replied` carries only its
 * heard part); nothing heard: the entry goes. No `heard`: the line played whole, nothing changes.
 */
function keepHeard(s: Step, sayId: string, heard: string): void {
  s.history.push({ type: 'history.heard', say_id: sayId, heard });
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
  source?: 'control',
): void {
  if (text !== null && text !== '') {
    const sayId = say(s, text, nodeId, false, source);
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

/** A warm transfer a live control started waits for its outcome (the call stays in its node). */
function controlTransferring(context: CallContext): boolean {
  return typeof context.control_transfer === 'string';
}

export function buildMachine(definition: WorkflowDefinition, nodes: Map<string, CompiledNode>) {
  const apply = (
    enqueue: {
      assign: (patch: Partial<CallContext>) => void;
      emit: (command: MachineCommand | HistoryOp) => void;
    },
    s: Step,
  ): void => {
    if (Object.keys(s.patch).length > 0) enqueue.assign(s.patch);
    for (const op of s.history) enqueue.emit(op);
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
        if (node.mode === 'warm') {
          // the caller hears the node's lines while the operator is dialled; the outcome comes back as `transfer.result`
          if (nonEmpty(node.first_line)) say(s, node.first_line, nodeId, false);
          if (nonEmpty(node.hold_message)) say(s, node.hold_message, nodeId, false);
          s.commands.push({
            type: 'warm_transfer',
            destination: node.destination,
            node_id: nodeId,
            operator_message: node.operator_message ?? DEFAULT_OPERATOR_MESSAGE,
            ring_timeout_seconds: node.ring_timeout_seconds ?? DEFAULT_RING_TIMEOUT_SECONDS,
            require_acceptance: node.require_acceptance ?? false,
          });
          break;
        }
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
      emitted: {} as MachineCommand | HistoryOp,
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
      /** A warm transfer joined the operator: the conversation is over, the legs go on without it. */
      transferCompleted: enqueueActions(({ context, enqueue }) => {
        enqueue.assign({ ended_reason: 'call-transferred', control_transfer: null });
        enqueue.emit({ type: 'hang_up', reason: 'call-transferred', node_id: context.node_id });
      }),
      /** A warm transfer that did not complete, taking the node's edge: the caller is told first. */
      transferFailed: enqueueActions(({ context, enqueue }, params: { message?: string }) => {
        const s = beginStep(context);
        say(s, nonEmpty(params.message) ? params.message : TRANSFER_FAILED_LINE, context.node_id, true);
        apply(enqueue, s);
      }),
      /** A warm transfer that did not complete, with no way out: the caller is told, then `end_call_message`, then the end. */
      transferFailedEnd: enqueueActions(({ context, enqueue }) => {
        const s = beginStep(context);
        const hangUp: HangUpCommand = { type: 'hang_up', reason: 'transfer-failed', node_id: context.node_id };
        const last = context.settings.end_call_message;
        if (nonEmpty(last)) {
          say(s, TRANSFER_FAILED_LINE, context.node_id, false);
          close(s, context.node_id, last, 'transfer-failed', [hangUp]);
        } else {
          close(s, context.node_id, TRANSFER_FAILED_LINE, 'transfer-failed', [hangUp]);
        }
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
      // live control (DECISIONS 16): what a control says or adds is marked `source: "control"`
      controlSay: enqueueActions(({ context, event, enqueue }) => {
        if (event.type !== 'control.say') return;
        const s = beginStep(context);
        say(s, event.text, context.node_id, true, 'control');
        apply(enqueue, s);
      }),
      controlAddMessage: enqueueActions(({ context, event, enqueue }) => {
        if (event.type !== 'control.add_message') return;
        const s = beginStep(context);
        record(s, { role: event.role, content: event.content, node_id: context.node_id, source: 'control' });
        apply(enqueue, s);
      }),
      controlTransfer: enqueueActions(({ context, event, enqueue }) => {
        if (event.type !== 'control.transfer') return;
        const s = beginStep(context);
        if (event.mode === 'warm') {
          // as a warm node: the caller is held while the operator is dialled; the call waits in its node
          s.patch.control_transfer = event.destination;
          if (nonEmpty(event.hold_message)) say(s, event.hold_message, context.node_id, false, 'control');
          s.commands.push(warmTransferOf(event, context.node_id));
          apply(enqueue, s);
          return;
        }
        s.patch.pending_tool_call_id = null;
        s.patch.control_transfer = null;
        close(s, context.node_id, null, 'call-transferred', [
          { type: 'transfer', destination: event.destination, node_id: context.node_id },
          { type: 'hang_up', reason: 'call-transferred', node_id: context.node_id },
        ]);
        apply(enqueue, s);
      }),
      /** A warm transfer by control that did not complete: the caller is told, and the call goes on in its node. */
      controlTransferFailed: enqueueActions(({ context, enqueue }) => {
        const s = beginStep(context);
        s.patch.control_transfer = null;
        say(s, TRANSFER_FAILED_LINE, context.node_id, true, 'control');
        apply(enqueue, s);
      }),
      controlEnd: enqueueActions(({ context, event, enqueue }) => {
        if (event.type !== 'control.end') return;
        const s = beginStep(context);
        s.patch.pending_tool_call_id = null;
        const hangUp: HangUpCommand = { type: 'hang_up', reason: 'api-ended-call', node_id: context.node_id };
        close(s, context.node_id, event.message ?? null, 'api-ended-call', [hangUp], 'control');
        apply(enqueue, s);
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
      transferCompleted: ({ event }) => event.type === 'transfer.result' && event.result === 'completed',
      controlTransferring: ({ context }) => controlTransferring(context),
      /** A warm transfer is under way: one a control started, or a warm node's (the call is in it while live). */
      transferUnderWay: ({ context }) => {
        const node = nodes.get(context.node_id)?.node;
        return controlTransferring(context) || (node?.type === 'transfer' && node.mode === 'warm');
      },
      warmControl: ({ event }) => event.type === 'control.transfer' && event.mode === 'warm',
      inConversation: ({ context }) => nodes.get(context.node_id)?.node.type === 'conversation',
      closingLinePlayed: ({ context, event }) =>
        event.type === 'assistant.done_speaking' &&
        context.closing !== null &&
        (event.say_id === undefined || event.say_id === context.closing.say_id),
      silenceExhausted: ({ context }) =>
        context.silence_attempts >= context.settings.silence.max_attempts,
      silenceExhaustedWithLine: ({ context }) =>
        context.silence_attempts >= context.settings.silence.max_attempts &&
        nonEmpty(context.settings.silence.final_message),
      isGotoTarget: ({ event }, params: { node_id: string }) => event.type === 'control.goto' && event.node_id === params.node_id,
      endsWithLine: ({ event }) => event.type === 'control.end' && nonEmpty(event.message),
    },
  });

  const rejectWith = (code: RejectionCode) => ({ actions: { type: 'reject', params: { code } } });
  const ignore = { actions: [] };
  const callerTurn = { actions: ['recordCallerInput', { type: 'runModel', params: { reason: 'caller_input' } }] };

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

  /** A node whose entry ends the call: after its closing line, or at once. */
  const closesAtOnce = [{ guard: 'isClosing', target: '#closing' }, { target: '#ended' }];
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
            // while a warm transfer by control is under way, the caller is kept and the model not asked
            'caller.said': [{ guard: 'controlTransferring', actions: 'recordCallerInput' }, callerTurn],
            dtmf: [{ guard: 'controlTransferring', actions: 'recordCallerInput' }, callerTurn],
            'model.chose_transition': [{ guard: 'controlTransferring', ...rejectWith('EVENT_NOT_EXPECTED') }, ...choiceTransitions(compiled)],
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
        if (node.mode === 'warm') {
          // waits for the transfer's outcome: joined, or the node's one edge (or the end) when it did not complete
          const way = compiled.outgoing[0];
          states[node.id] = {
            ...base,
            on: {
              'transfer.result': [
                { guard: 'transferCompleted', target: '#ended', actions: 'transferCompleted' },
                way
                  ? {
                      target: `#${stateId(way.edge.to)}`,
                      reenter: true,
                      actions: { type: 'transferFailed', params: way.edge.message !== undefined ? { message: way.edge.message } : {} },
                    }
                  : { target: '#closing', actions: 'transferFailedEnd' },
              ],
            },
          };
          break;
        }
        // a cold transfer ends as an end node does
        states[node.id] = { ...base, always: closesAtOnce };
        break;
      case 'end':
        states[node.id] = { ...base, always: closesAtOnce };
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
      nodes_visited: [],
      seq: 0,
      pending_tool_call_id: null,
      overrides_node: null,
      closing: null,
      silence_attempts: 0,
      ended_reason: null,
      control_transfer: null,
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
            { guard: 'controlTransferring', ...ignore },
            { guard: 'silenceExhaustedWithLine', target: '#closing', actions: 'silenceGiveUp' },
            { guard: 'silenceExhausted', target: '#ended', actions: 'silenceGiveUp' },
            { actions: 'silencePrompt' },
          ],
          'model.chose_transition': rejectWith('EVENT_NOT_EXPECTED'),
          'tool.result': rejectWith('UNKNOWN_TOOL_CALL'),
          'tool.failed': rejectWith('UNKNOWN_TOOL_CALL'),
          'control.say': { actions: 'controlSay' },
          'control.add_message': { actions: 'controlAddMessage' },
          // a warm node's transfer.result is its own: this is a control's
          'transfer.result': [
            { guard: and(['controlTransferring', 'transferCompleted']), target: '#ended', actions: 'transferCompleted' },
            { guard: 'controlTransferring', actions: 'controlTransferFailed' },
            rejectWith('EVENT_NOT_EXPECTED'),
          ],
          // the node is entered again even if it is the current one: its first line is said again
          'control.goto': [
            { guard: 'transferUnderWay', ...rejectWith('TRANSFER_UNDER_WAY') },
            ...[...nodes.keys()].map((id) => ({
              guard: { type: 'isGotoTarget', params: { node_id: id } },
              target: `#${stateId(id)}`,
              reenter: true,
            })),
            rejectWith('UNKNOWN_NODE'),
          ],
          'control.transfer': [
            { guard: and(['warmControl', 'transferUnderWay']), ...rejectWith('TRANSFER_UNDER_WAY') },
            { guard: and(['warmControl', not('inConversation')]), ...rejectWith('NOT_IN_CONVERSATION') },
            { guard: 'warmControl', actions: 'controlTransfer' },
            { target: '#ended', actions: 'controlTransfer' },
          ],
          'control.end': [
            { guard: 'endsWithLine', target: '#closing', actions: 'controlEnd' },
            { target: '#ended', actions: 'controlEnd' },
          ],
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
    case 'UNKNOWN_NODE': {
      const id = event.type === 'control.goto' ? event.node_id : '';
      return `the workflow has no node "${id}" (it has: ${[...nodes.keys()].join(', ')})`;
    }
    case 'TRANSFER_UNDER_WAY':
      return 'a warm transfer is under way; the call moves once it has come out';
    case 'NOT_IN_CONVERSATION':
      return `a warm transfer starts in a conversation node; the call is in ${node?.node.type ?? 'a'} node "${context.node_id}" (try again once it has moved on)`;
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
