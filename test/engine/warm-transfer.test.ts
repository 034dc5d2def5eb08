/**
 * Warm transfer nodes in the engine (DECISIONS 16): the schema and validation of their fields and
 * their one way out, the lines and the `warm_transfer` command on entry, and each outcome
 * (`transfer.result`): joined, the edge, or the end `transfer-failed`.
 */
import { describe, expect, it } from 'vitest';
import { createCallSession, type CallSession, type Command } from '../../engine/session.js';
import { TRANSFER_FAILED_LINE } from '../../engine/machine.js';
import { validateDefinition } from '../../engine/validate.js';
import { applyVariablesToDefinition } from '../../engine/variables.js';
import type { WorkflowDefinition } from '../../engine/schema.js';

type Loose = Record<string, any>;

function flow(transfer: Loose, edges: Loose[] = []): Loose {
  return {
    version: 1,
    entry_node: 'greet',
    nodes: [
      { id: 'greet', type: 'conversation', first_line: 'Hello.' },
      { id: 'desk', type: 'transfer', destination: '+14155550123', ...transfer },
      { id: 'back', type: 'conversation', first_line: 'What else can I do?' },
      { id: 'bye', type: 'end' },
    ],
    edges: [
      { from: 'greet', to: 'desk', description: 'the caller wants a person' },
      { from: 'back', to: 'bye', description: 'the caller is done' },
      { from: 'greet', to: 'back', description: 'the caller has another question' },
      ...edges,
    ],
  };
}

const warm = { mode: 'warm', first_line: 'Let me get someone.', hold_message: 'Please hold.' };
const fallback = { from: 'desk', to: 'back', description: 'nobody took the call', message: 'Nobody is free right now.' };

function details(input: unknown): string[] {
  const result = validateDefinition(input);
  return result.ok ? [] : result.details;
}

function valid(input: unknown): WorkflowDefinition {
  const result = validateDefinition(input);
  if (!result.ok) throw new Error(result.details.join('\n'));
  return result.definition;
}

const says = (commands: Command[]) => commands.filter((c) => c.type === 'say').map((c) => (c as { text: string }).text);
const sayIds = (commands: Command[]) => commands.filter((c) => c.type === 'say').map((c) => (c as { say_id: string }).say_id);

function toDesk(definition: Loose, options: { end_call_message?: string } = {}): { session: CallSession; commands: Command[] } {
  const session = createCallSession(valid(definition), options);
  session.start();
  session.send({ type: 'caller.said', text: 'a person please' });
  const commands = session.send({ type: 'model.chose_transition', function_name: 'go_to_desk' });
  return { session, commands };
}

describe('warm transfer nodes: validation', () => {
  it('takes mode, operator_message, hold_message, ring_timeout_seconds and require_acceptance on a warm node, and one described edge', () => {
    const definition = valid(
      flow({ ...warm, operator_message: 'Caller says: {{summary}}', ring_timeout_seconds: 45, require_acceptance: true }, [fallback]),
    );
    expect(definition.nodes[1]).toMatchObject({ mode: 'warm', ring_timeout_seconds: 45, require_acceptance: true });
    // a cold node stays as it was; "cold" may be said
    expect(details(flow({ mode: 'cold' }))).toEqual([]);
    expect(details(flow({}))).toEqual([]);
  });

  it('refuses warm-only fields on a cold node, each by name', () => {
    const d = details(flow({ mode: 'cold', hold_message: 'Hold on.', ring_timeout_seconds: 20 }));
    expect(d).toEqual([
      'nodes[1] (desk).hold_message: only allowed on a warm transfer ("mode": "warm")',
      'nodes[1] (desk).ring_timeout_seconds: only allowed on a warm transfer ("mode": "warm")',
    ]);
    expect(details(flow({ operator_message: 'x', require_acceptance: false }))).toEqual([
      'nodes[1] (desk).operator_message: only allowed on a warm transfer ("mode": "warm")',
      'nodes[1] (desk).require_acceptance: only allowed on a warm transfer ("mode": "warm")',
    ]);
  });

  it('refuses the transfer fields on other nodes, and a mode that is neither', () => {
    const definition = flow({});
    definition.nodes[0].mode = 'warm';
    definition.nodes[3].hold_message = 'Hold.';
    expect(details(definition)).toEqual([
      'nodes[0] (greet).mode: not allowed on a conversation node (it belongs to transfer nodes)',
      'nodes[3] (bye).hold_message: not allowed on an end node (it belongs to transfer nodes)',
    ]);
    expect(details(flow({ mode: 'hot' }))).toEqual(['nodes[1] (desk).mode: must be one of "cold", "warm", not "hot"']);
  });

  it('bounds ring_timeout_seconds to 5–120 whole seconds', () => {
    expect(details(flow({ ...warm, ring_timeout_seconds: 4 }))).toEqual(['nodes[1] (desk).ring_timeout_seconds: must be at least 5']);
    expect(details(flow({ ...warm, ring_timeout_seconds: 121 }))).toEqual(['nodes[1] (desk).ring_timeout_seconds: must be at most 120']);
    expect(details(flow({ ...warm, ring_timeout_seconds: 7.5 }))).toEqual(['nodes[1] (desk).ring_timeout_seconds: must be an integer, not 7.5']);
    expect(details(flow({ ...warm, ring_timeout_seconds: 5 }))).toEqual([]);
    expect(details(flow({ ...warm, ring_timeout_seconds: 120 }))).toEqual([]);
  });

  it('a warm node has at most one way out, described; a cold one none', () => {
    const two = flow(warm, [fallback, { from: 'desk', to: 'bye', description: 'also' }]);
    expect(details(two)).toEqual([
      'edges[4] (desk → bye).from: "desk" is a warm transfer node, which may have one outgoing edge (the way taken when the transfer does not complete); it has 2',
    ]);
    const undescribed = flow(warm, [{ from: 'desk', to: 'back' }]);
    expect(details(undescribed)).toEqual([
      'edges[3] (desk → back).description: required on the edge leaving a warm transfer node ("desk"): say when it is taken (the transfer did not complete)',
    ]);
    expect(details(flow({}, [fallback]))).toEqual([
      'edges[3] (desk → back).from: "desk" is a transfer node, which cannot have outgoing edges (a warm one, "mode": "warm", may have one)',
    ]);
  });

  it('a node reached only through a warm node\'s edge is reachable', () => {
    const definition = flow(warm, [fallback]);
    definition.edges = definition.edges.filter((e: Loose) => !(e.from === 'greet' && e.to === 'back'));
    expect(details(definition)).toEqual([]);
  });

  it('variables fill hold_message and operator_message, never {{summary}}', () => {
    const definition = valid(flow({ ...warm, hold_message: 'Hold, {{customer.name}}.', operator_message: 'For {{customer.name}}: {{summary}}' }));
    const applied = applyVariablesToDefinition(definition, { 'customer.name': 'Ada', summary: 'not this' });
    expect(applied.nodes[1]).toMatchObject({ hold_message: 'Hold, Ada.', operator_message: 'For Ada: {{summary}}' });
  });
});

describe('warm transfer nodes: the engine', () => {
  it('on entry: first_line, hold_message (neither cut by the caller), then warm_transfer with the defaults', () => {
    const { session, commands } = toDesk(flow(warm, [fallback]));
    expect(commands.filter((c) => c.type !== 'set_provider_overrides')).toEqual([
      { type: 'say', say_id: expect.any(String), text: 'Let me get someone.', node_id: 'desk', interruptible: false },
      { type: 'say', say_id: expect.any(String), text: 'Please hold.', node_id: 'desk', interruptible: false },
      {
        type: 'warm_transfer',
        destination: '+14155550123',
        node_id: 'desk',
        operator_message: 'Incoming transfer: {{summary}}',
        ring_timeout_seconds: 30,
        require_acceptance: false,
      },
    ]);
    expect(session.state()).toMatchObject({ status: 'active', node_id: 'desk', awaiting: 'transfer' });
    // the lines played: the call still waits for the transfer; what the caller says meanwhile is kept, and asks nothing of the model
    for (const id of sayIds(commands)) expect(session.send({ type: 'assistant.done_speaking', say_id: id })).toEqual([]);
    expect(session.send({ type: 'caller.said', text: 'hello?' })).toEqual([]);
    expect(session.send({ type: 'dtmf', digits: '5' })).toEqual([]);
    expect(session.state()).toMatchObject({ status: 'active', awaiting: 'transfer' });
  });

  it('the node\'s own settings go in the command', () => {
    const { commands } = toDesk(flow({ mode: 'warm', operator_message: 'Hi: {{summary}}', ring_timeout_seconds: 10, require_acceptance: true }));
    expect(says(commands)).toEqual([]);
    expect(commands.at(-1)).toEqual({
      type: 'warm_transfer',
      destination: '+14155550123',
      node_id: 'desk',
      operator_message: 'Hi: {{summary}}',
      ring_timeout_seconds: 10,
      require_acceptance: true,
    });
  });

  it('completed: the call ends call-transferred, with nothing more said', () => {
    const { session } = toDesk(flow(warm, [fallback]));
    expect(session.send({ type: 'transfer.result', result: 'completed' })).toEqual([{ type: 'hang_up', reason: 'call-transferred', node_id: 'desk' }]);
    expect(session.state()).toMatchObject({ status: 'ended', ended_reason: 'call-transferred' });
  });

  it.each(['no-answer', 'busy', 'declined', 'failed'] as const)('%s with an edge: its message is said and the call goes on there', (result) => {
    const { session } = toDesk(flow(warm, [fallback]));
    const commands = session.send({ type: 'transfer.result', result });
    expect(says(commands)).toEqual(['Nobody is free right now.', 'What else can I do?']);
    expect(session.state()).toMatchObject({ status: 'active', node_id: 'back', awaiting: 'caller' });
    expect(session.nodesVisited()).toEqual(['greet', 'desk', 'back']);
  });

  it('a failure with an edge that has no message: the fixed line', () => {
    const { session } = toDesk(flow(warm, [{ from: 'desk', to: 'back', description: 'nobody took it' }]));
    expect(says(session.send({ type: 'transfer.result', result: 'busy' }))).toEqual([TRANSFER_FAILED_LINE, 'What else can I do?']);
  });

  it('a failure with no edge: the fixed line, end_call_message, then transfer-failed', () => {
    const { session } = toDesk(flow(warm), { end_call_message: 'Goodbye for now.' });
    const commands = session.send({ type: 'transfer.result', result: 'no-answer' });
    expect(says(commands)).toEqual([TRANSFER_FAILED_LINE, 'Goodbye for now.']);
    expect(commands.map((c) => c.type)).toEqual(['say', 'say']);
    expect(session.state()).toMatchObject({ status: 'closing' });
    const last = sayIds(commands).at(-1)!;
    expect(session.send({ type: 'assistant.done_speaking', say_id: last })).toEqual([{ type: 'hang_up', reason: 'transfer-failed', node_id: 'desk' }]);
    expect(session.state()).toMatchObject({ status: 'ended', ended_reason: 'transfer-failed' });
  });

  it('a failure with no edge and no end_call_message: the fixed line closes the call', () => {
    const { session } = toDesk(flow(warm));
    const commands = session.send({ type: 'transfer.result', result: 'declined' });
    expect(says(commands)).toEqual([TRANSFER_FAILED_LINE]);
    expect(session.send({ type: 'assistant.done_speaking', say_id: sayIds(commands)[0]! })).toEqual([
      { type: 'hang_up', reason: 'transfer-failed', node_id: 'desk' },
    ]);
  });

  it('a result outside a warm node, or one that is not a result, is refused', () => {
    const session = createCallSession(valid(flow(warm)));
    session.start();
    expect(session.send({ type: 'transfer.result', result: 'completed' })).toEqual([
      expect.objectContaining({ type: 'event_rejected', code: 'EVENT_NOT_EXPECTED' }),
    ]);
    expect(session.send({ type: 'transfer.result', result: 'maybe' } as never)).toEqual([
      expect.objectContaining({ type: 'event_rejected', code: 'MALFORMED_EVENT' }),
    ]);
  });

  it('while the operator is dialled, a live control does not move the call: goto and a warm transfer are refused (TRANSFER_UNDER_WAY)', () => {
    const { session } = toDesk(flow(warm, [fallback]));
    expect(session.send({ type: 'control.goto', node_id: 'back' })).toEqual([expect.objectContaining({ code: 'TRANSFER_UNDER_WAY' })]);
    expect(session.send({ type: 'control.transfer', destination: '+14155550199', mode: 'warm' })).toEqual([
      expect.objectContaining({ code: 'TRANSFER_UNDER_WAY' }),
    ]);
    expect(session.state()).toMatchObject({ node_id: 'desk', awaiting: 'transfer', transfer_destination: '+14155550123' });
    expect(says(session.send({ type: 'transfer.result', result: 'busy' }))).toEqual(['Nobody is free right now.', 'What else can I do?']);
  });

  it('the caller hanging up while the operator is dialled ends the call customer-ended-call', () => {
    const { session } = toDesk(flow(warm, [fallback]));
    expect(session.send({ type: 'hangup' })).toEqual([]);
    expect(session.state()).toMatchObject({ status: 'ended', ended_reason: 'customer-ended-call' });
  });

  it('a snapshot taken while the operator is dialled resumes waiting for the outcome', async () => {
    const { session } = toDesk(flow(warm, [fallback]));
    const { restoreCallSession } = await import('../../engine/session.js');
    const resumed = restoreCallSession(valid(flow(warm, [fallback])), JSON.parse(JSON.stringify(session.snapshot())));
    expect(resumed.state()).toMatchObject({ node_id: 'desk', awaiting: 'transfer' });
    expect(says(resumed.send({ type: 'transfer.result', result: 'failed' }))).toEqual(['Nobody is free right now.', 'What else can I do?']);
  });
});
