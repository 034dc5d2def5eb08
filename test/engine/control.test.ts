/**
 * Live control in the engine (DECISIONS 16): `control.say`, `control.add_message`,
 * `control.goto`, `control.transfer` (cold, or warm as a warm transfer node) and `control.end` as
 * events, their commands, what the history keeps (`source: "control"`), what is refused, and that a
 * saved call keeps it all.
 */
import { describe, expect, it } from 'vitest';
import {
  createCallSession,
  restoreCallSession,
  TRANSFER_FAILED_LINE,
  validateDefinition,
  WorkflowDefinition,
  type Command,
  type RunModelCommand,
} from '../../engine/index.js';
import { transferFieldProblems } from '../../engine/control-transfer.js';

function definition(): WorkflowDefinition {
  return WorkflowDefinition.parse({
    version: 1,
    entry_node: 'greeting',
    global_prompt: 'You are the Acme support line.',
    nodes: [
      { id: 'greeting', type: 'conversation', first_line: 'Hello, Acme here.', instructions: 'Find out what the caller needs.' },
      { id: 'billing', type: 'conversation', first_line: 'Billing here, how can I help?', instructions: 'Help with bills.' },
      { id: 'quiet', type: 'conversation', instructions: 'Speak first.' },
      { id: 'lookup', type: 'tool', tool_name: 'find_order', url: 'https://tools.example.com/orders' },
      { id: 'goodbye', type: 'end', first_line: 'Goodbye!' },
    ],
    edges: [
      { from: 'greeting', to: 'lookup', description: 'The caller asks about an order.' },
      { from: 'lookup', to: 'billing', description: 'Done.' },
      { from: 'billing', to: 'goodbye', description: 'The caller is done.' },
      { from: 'quiet', to: 'goodbye', description: 'The caller is done.' },
    ],
  });
}

function started() {
  const session = createCallSession(definition());
  session.start();
  return session;
}

const types = (commands: Command[]) => commands.map((c) => c.type);

describe('control.say', () => {
  it('says the text in the current node, interruptible, marked as the control\'s, and keeps it in the history', () => {
    const session = started();
    const commands = session.send({ type: 'control.say', text: 'A supervisor is listening.' });
    expect(commands).toEqual([
      { type: 'say', say_id: 'say_2', text: 'A supervisor is listening.', node_id: 'greeting', interruptible: true, source: 'control' },
    ]);
    expect(session.history().at(-1)).toEqual({
      role: 'assistant',
      content: 'A supervisor is listening.',
      node_id: 'greeting',
      say_id: 'say_2',
      source: 'control',
    });
    // cut: the history keeps what was heard, as for any line
    session.send({ type: 'assistant.done_speaking', say_id: 'say_2', heard: 'A supervisor' });
    expect(session.history().at(-1)).toMatchObject({ content: 'A supervisor', source: 'control' });
    expect(session.state()).toMatchObject({ status: 'active', node_id: 'greeting', awaiting: 'caller' });
  });

  it('an empty text is a malformed event', () => {
    const session = started();
    expect(session.send({ type: 'control.say', text: '  ' })).toEqual([
      expect.objectContaining({ type: 'event_rejected', code: 'MALFORMED_EVENT' }),
    ]);
  });
});

describe('control.add_message', () => {
  it('is in the model\'s next turn, after what came before, and says nothing', () => {
    const session = started();
    expect(session.send({ type: 'control.add_message', role: 'system', content: 'The caller is a VIP customer.' })).toEqual([]);
    expect(session.send({ type: 'control.add_message', role: 'user', content: 'My order number is 12345.' })).toEqual([]);
    const run = session.send({ type: 'caller.said', text: 'Hi' }).find((c): c is RunModelCommand => c.type === 'run_model')!;
    expect(run.messages.map((m) => [m.role, m.content, m.source])).toEqual([
      ['assistant', 'Hello, Acme here.', undefined],
      ['system', 'The caller is a VIP customer.', 'control'],
      ['user', 'My order number is 12345.', 'control'],
      ['user', 'Hi', undefined],
    ]);
  });

  it('a role other than system or user is a malformed event', () => {
    const session = started();
    const rejected = session.send({ type: 'control.add_message', role: 'assistant', content: 'x' } as never);
    expect(rejected).toEqual([expect.objectContaining({ type: 'event_rejected', code: 'MALFORMED_EVENT' })]);
  });
});

describe('control.goto', () => {
  it('moves to the node and says its first line', () => {
    const session = started();
    const commands = session.send({ type: 'control.goto', node_id: 'billing' });
    expect(commands).toEqual([
      { type: 'say', say_id: 'say_2', text: 'Billing here, how can I help?', node_id: 'billing', interruptible: true },
    ]);
    expect(session.state()).toMatchObject({ node_id: 'billing', awaiting: 'caller' });
    expect(session.nodesVisited()).toEqual(['greeting', 'billing']);
    // the model is in the new node from its next turn
    const run = session.send({ type: 'caller.said', text: 'My bill' }).find((c): c is RunModelCommand => c.type === 'run_model')!;
    expect(run.system).toContain('Help with bills.');
  });

  it('a node without a first line: its model speaks first', () => {
    const session = started();
    const commands = session.send({ type: 'control.goto', node_id: 'quiet' });
    expect(types(commands)).toEqual(['run_model']);
    expect(commands[0]).toMatchObject({ node_id: 'quiet', reason: 'node_entered' });
  });

  it('the current node is entered again (its first line said again)', () => {
    const session = started();
    expect(session.send({ type: 'control.goto', node_id: 'greeting' })).toEqual([
      expect.objectContaining({ type: 'say', text: 'Hello, Acme here.', node_id: 'greeting' }),
    ]);
    expect(session.nodesVisited()).toEqual(['greeting', 'greeting']);
  });

  it('out of a tool node waiting for its result: the result that comes later is refused', () => {
    const session = started();
    session.send({ type: 'caller.said', text: 'Where is my order?' });
    const call = session.send({ type: 'model.chose_transition', function_name: 'go_to_lookup' }).find((c) => c.type === 'call_tool');
    expect(session.state().awaiting).toBe('tool_result');
    session.send({ type: 'control.goto', node_id: 'billing' });
    expect(session.state()).toMatchObject({ node_id: 'billing', pending_tool_call_id: null });
    const late = session.send({ type: 'tool.result', tool_call_id: (call as { tool_call_id: string }).tool_call_id, result: 'x' });
    expect(late).toEqual([expect.objectContaining({ type: 'event_rejected', code: 'UNKNOWN_TOOL_CALL' })]);
    expect(session.state().node_id).toBe('billing');
  });

  it('into an end node: its line, then the end', () => {
    const session = started();
    const commands = session.send({ type: 'control.goto', node_id: 'goodbye' });
    expect(commands).toEqual([expect.objectContaining({ type: 'say', text: 'Goodbye!', interruptible: false })]);
    expect(session.state().status).toBe('closing');
  });

  it('an unknown node is refused (UNKNOWN_NODE, naming the nodes there are) and nothing moves', () => {
    const session = started();
    const [rejected] = session.send({ type: 'control.goto', node_id: 'nowhere' });
    expect(rejected).toMatchObject({ type: 'event_rejected', code: 'UNKNOWN_NODE' });
    expect((rejected as { message: string }).message).toBe('the workflow has no node "nowhere" (it has: greeting, billing, quiet, lookup, goodbye)');
    expect(session.state().node_id).toBe('greeting');
    expect(session.nodesVisited()).toEqual(['greeting']);
  });
});

describe('control.transfer', () => {
  it('transfers at once and ends call-transferred', () => {
    const session = started();
    expect(session.send({ type: 'control.transfer', destination: '+14155550123' })).toEqual([
      { type: 'transfer', destination: '+14155550123', node_id: 'greeting' },
      { type: 'hang_up', reason: 'call-transferred', node_id: 'greeting' },
    ]);
    expect(session.state()).toMatchObject({ status: 'ended', ended_reason: 'call-transferred' });
  });
});

describe('control.transfer, warm (as a warm transfer node)', () => {
  const warm = {
    type: 'control.transfer',
    destination: '+14155550199',
    mode: 'warm',
    operator_message: 'VIP caller: {{summary}}',
    hold_message: 'Please hold while I connect you.',
    ring_timeout_seconds: 20,
    require_acceptance: true,
  } as const;

  /** In `greeting`, after a turn of the caller's: the warm transfer by control is under way. */
  function transferring() {
    const session = started();
    session.send({ type: 'caller.said', text: 'I want a person' });
    const commands = session.send(warm);
    return { session, commands };
  }

  it('says hold_message (not cut by the caller, the control\'s) and dials with the given settings; the call waits in its node', () => {
    const { session, commands } = transferring();
    expect(commands).toEqual([
      { type: 'say', say_id: 'say_2', text: 'Please hold while I connect you.', node_id: 'greeting', interruptible: false, source: 'control' },
      {
        type: 'warm_transfer',
        destination: '+14155550199',
        node_id: 'greeting',
        operator_message: 'VIP caller: {{summary}}',
        ring_timeout_seconds: 20,
        require_acceptance: true,
      },
    ]);
    expect(session.state()).toMatchObject({ status: 'active', node_id: 'greeting', awaiting: 'transfer', transfer_destination: '+14155550199' });
    expect(session.nodesVisited()).toEqual(['greeting']);
    expect(session.modelContext()).toBeNull();
  });

  it('without its own settings: no line, the node\'s defaults', () => {
    const session = started();
    expect(session.send({ type: 'control.transfer', destination: '+14155550199', mode: 'warm' })).toEqual([
      {
        type: 'warm_transfer',
        destination: '+14155550199',
        node_id: 'greeting',
        operator_message: 'Incoming transfer: {{summary}}',
        ring_timeout_seconds: 30,
        require_acceptance: false,
      },
    ]);
  });

  it('while the operator is dialled: the caller\'s words and keys are kept and ask nothing of the model; silence checks and late choices are not taken', () => {
    const { session } = transferring();
    expect(session.send({ type: 'assistant.done_speaking', say_id: 'say_2' })).toEqual([]);
    expect(session.send({ type: 'caller.said', text: 'hello?' })).toEqual([]);
    expect(session.send({ type: 'dtmf', digits: '5' })).toEqual([]);
    expect(session.send({ type: 'timer.silence' })).toEqual([]);
    expect(session.send({ type: 'model.chose_transition', function_name: 'go_to_lookup' })).toEqual([
      expect.objectContaining({ type: 'event_rejected', code: 'EVENT_NOT_EXPECTED' }),
    ]);
    expect(session.history().slice(-2).map((m) => m.content)).toEqual(['hello?', 'DTMF: 5']);
    expect(session.state()).toMatchObject({ node_id: 'greeting', awaiting: 'transfer' });
  });

  it('completed: the call ends call-transferred, nothing more said', () => {
    const { session } = transferring();
    expect(session.send({ type: 'transfer.result', result: 'completed' })).toEqual([
      { type: 'hang_up', reason: 'call-transferred', node_id: 'greeting' },
    ]);
    expect(session.state()).toMatchObject({ status: 'ended', ended_reason: 'call-transferred', transfer_destination: null });
  });

  it.each(['no-answer', 'busy', 'declined', 'failed'] as const)('%s: the fixed line is said and the conversation goes on in its node', (result) => {
    const { session } = transferring();
    const commands = session.send({ type: 'transfer.result', result });
    expect(commands).toEqual([
      { type: 'say', say_id: 'say_3', text: TRANSFER_FAILED_LINE, node_id: 'greeting', interruptible: true, source: 'control' },
    ]);
    expect(session.state()).toMatchObject({ status: 'active', node_id: 'greeting', awaiting: 'caller', transfer_destination: null });
    expect(session.nodesVisited()).toEqual(['greeting']);
    // the model has its turns again, with the failure in its history
    const run = session.send({ type: 'caller.said', text: 'OK, then help me yourself.' }).find((c): c is RunModelCommand => c.type === 'run_model')!;
    expect(run.messages.map((m) => m.content)).toContain(TRANSFER_FAILED_LINE);
    expect(session.send({ type: 'transfer.result', result })).toEqual([expect.objectContaining({ code: 'EVENT_NOT_EXPECTED' })]);
  });

  it('under way, the call does not move: goto and a second warm transfer are refused (TRANSFER_UNDER_WAY); say, add-message, a cold transfer and end are taken', () => {
    const { session } = transferring();
    const [goto] = session.send({ type: 'control.goto', node_id: 'billing' });
    expect(goto).toMatchObject({ type: 'event_rejected', code: 'TRANSFER_UNDER_WAY', message: 'a warm transfer is under way; the call moves once it has come out' });
    expect(session.send(warm)).toEqual([expect.objectContaining({ code: 'TRANSFER_UNDER_WAY' })]);
    expect(types(session.send({ type: 'control.say', text: 'Still trying.' }))).toEqual(['say']);
    expect(session.send({ type: 'control.add_message', role: 'system', content: 'x' })).toEqual([]);
    expect(session.send({ type: 'control.transfer', destination: '+14155550123' })).toEqual([
      { type: 'transfer', destination: '+14155550123', node_id: 'greeting' },
      { type: 'hang_up', reason: 'call-transferred', node_id: 'greeting' },
    ]);
    const other = transferring().session;
    expect(other.send({ type: 'control.end' })).toEqual([{ type: 'hang_up', reason: 'api-ended-call', node_id: 'greeting' }]);
  });

  it('in a tool node it is refused (NOT_IN_CONVERSATION) and the tool node goes on', () => {
    const session = started();
    session.send({ type: 'caller.said', text: 'Where is my order?' });
    session.send({ type: 'model.chose_transition', function_name: 'go_to_lookup' });
    const [refused] = session.send(warm);
    expect(refused).toMatchObject({ type: 'event_rejected', code: 'NOT_IN_CONVERSATION' });
    expect((refused as { message: string }).message).toBe(
      'a warm transfer starts in a conversation node; the call is in tool node "lookup" (try again once it has moved on)',
    );
    expect(session.state()).toMatchObject({ node_id: 'lookup', awaiting: 'tool_result' });
  });

  it('its fields are checked as a transfer node\'s, with the same messages (MALFORMED_EVENT)', () => {
    const session = started();
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ mode: 'warm', ring_timeout_seconds: 4 }, 'ring_timeout_seconds: must be at least 5'],
      [{ mode: 'warm', ring_timeout_seconds: 121 }, 'ring_timeout_seconds: must be at most 120'],
      [{ mode: 'warm', ring_timeout_seconds: 7.5 }, 'ring_timeout_seconds: must be an integer, not 7.5'],
      [{ mode: 'warm', require_acceptance: 'yes' }, 'require_acceptance: must be a boolean, not "yes"'],
      [{ hold_message: 'Hold on.' }, 'hold_message: only allowed on a warm transfer ("mode": "warm")'],
      [{ mode: 'cold', operator_message: 'Hi' }, 'operator_message: only allowed on a warm transfer ("mode": "warm")'],
    ];
    for (const [fields, problem] of cases) {
      const [rejected] = session.send({ type: 'control.transfer', destination: '+14155550199', ...fields } as never);
      expect(rejected).toMatchObject({ type: 'event_rejected', code: 'MALFORMED_EVENT', message: `control.transfer: ${problem}` });
      expect(transferFieldProblems(fields)).toEqual([problem]);
      // a transfer node with the same fields is told the same
      const node = { id: 'desk', type: 'transfer', destination: '+14155550199', ...fields };
      const result = validateDefinition({ version: 1, entry_node: 'desk', nodes: [node], edges: [] });
      expect(result.ok ? [] : result.details).toContain(`nodes[0] (desk).${problem}`);
    }
    expect(session.send({ type: 'control.transfer', destination: '+14155550199', mode: 'hot' } as never)).toEqual([
      expect.objectContaining({ code: 'MALFORMED_EVENT', message: 'control.transfer: mode: must be one of "cold", "warm", not "hot"' }),
    ]);
    expect(session.state()).toMatchObject({ status: 'active', awaiting: 'caller' });
  });

  it('a call saved while the operator is dialled resumes waiting for the outcome, in its node', () => {
    const { session } = transferring();
    const restored = restoreCallSession(definition(), JSON.parse(JSON.stringify(session.snapshot())));
    expect(restored.state()).toMatchObject({ node_id: 'greeting', awaiting: 'transfer', transfer_destination: '+14155550199' });
    expect(restored.send({ type: 'transfer.result', result: 'no-answer' })).toEqual([
      expect.objectContaining({ type: 'say', text: TRANSFER_FAILED_LINE, node_id: 'greeting' }),
    ]);
    expect(restored.state()).toMatchObject({ awaiting: 'caller' });
  });

  it('a call saved before warm transfers by control existed resumes as it was (no transfer under way)', () => {
    const session = started();
    const snapshot = JSON.parse(JSON.stringify(session.snapshot()));
    delete snapshot.machine.context.control_transfer;
    const restored = restoreCallSession(definition(), snapshot);
    expect(restored.state()).toMatchObject({ awaiting: 'caller', transfer_destination: null });
    expect(restored.send({ type: 'transfer.result', result: 'completed' })).toEqual([expect.objectContaining({ code: 'EVENT_NOT_EXPECTED' })]);
    expect(types(restored.send(warm))).toEqual(['say', 'warm_transfer']);
  });
});

describe('control.end', () => {
  it('with a message: says it (not interruptible, the control\'s), then hangs up api-ended-call', () => {
    const session = started();
    const commands = session.send({ type: 'control.end', message: 'We have to end the call now.' });
    expect(commands).toEqual([
      { type: 'say', say_id: 'say_2', text: 'We have to end the call now.', node_id: 'greeting', interruptible: false, source: 'control' },
    ]);
    expect(session.state()).toMatchObject({ status: 'closing', awaiting: 'closing_line' });
    // while the line plays, the caller's words are kept but the model is not asked
    expect(types(session.send({ type: 'caller.said', text: 'Wait!' }))).toEqual([]);
    expect(session.send({ type: 'assistant.done_speaking', say_id: 'say_2' })).toEqual([
      { type: 'hang_up', reason: 'api-ended-call', node_id: 'greeting' },
    ]);
    expect(session.state()).toMatchObject({ status: 'ended', ended_reason: 'api-ended-call' });
  });

  it('without one: hangs up at once', () => {
    const session = started();
    expect(session.send({ type: 'control.end' })).toEqual([{ type: 'hang_up', reason: 'api-ended-call', node_id: 'greeting' }]);
    expect(session.state().ended_reason).toBe('api-ended-call');
  });
});

describe('controls and the state of the call', () => {
  it('while a closing line plays, every control is refused (EVENT_NOT_EXPECTED)', () => {
    const session = started();
    session.send({ type: 'control.goto', node_id: 'goodbye' });
    for (const event of [
      { type: 'control.say', text: 'Hi' },
      { type: 'control.add_message', role: 'system', content: 'x' },
      { type: 'control.goto', node_id: 'billing' },
      { type: 'control.transfer', destination: '+14155550123' },
      { type: 'control.end' },
    ] as const) {
      expect(session.send(event)).toEqual([expect.objectContaining({ type: 'event_rejected', code: 'EVENT_NOT_EXPECTED' })]);
    }
  });

  it('after the end, every control is refused (CALL_ENDED)', () => {
    const session = started();
    session.send({ type: 'control.end' });
    expect(session.send({ type: 'control.say', text: 'Hi' })).toEqual([expect.objectContaining({ code: 'CALL_ENDED' })]);
  });

  it('a call saved and restored keeps what controls said, added and where they moved it', () => {
    const def = definition();
    const session = createCallSession(def);
    session.start();
    session.send({ type: 'control.add_message', role: 'system', content: 'VIP.' });
    session.send({ type: 'control.goto', node_id: 'billing' });
    session.send({ type: 'control.say', text: 'One moment.' });
    const restored = restoreCallSession(def, JSON.parse(JSON.stringify(session.snapshot())));
    expect(restored.state().node_id).toBe('billing');
    expect(restored.history().filter((m) => m.source === 'control').map((m) => m.content)).toEqual(['VIP.', 'One moment.']);
    expect(restored.send({ type: 'control.goto', node_id: 'greeting' })).toEqual([
      expect.objectContaining({ type: 'say', text: 'Hello, Acme here.', say_id: 'say_4' }),
    ]);
  });
});
