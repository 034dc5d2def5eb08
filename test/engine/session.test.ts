import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import {
  CallSessionError,
  clearCompileCache,
  compileCacheSize,
  compileWorkflow,
  createCallSession,
  restoreCallSession,
  SILENCE_CHECK_FALLBACK,
  SILENCE_CHECK_INSTRUCTION,
  WorkflowDefinition,
  type CallEvent,
  type CallSession,
  type CallSessionOptions,
  type Command,
  type RunModelCommand,
  type SayCommand,
} from '../../engine/index.js';

// A small support line: greeting → (tool) lookup → found | missing → goodbye, a global "human"
// node leading to a transfer, and an end node without a line of its own.
function supportDefinition(): WorkflowDefinition {
  return WorkflowDefinition.parse({
    version: 1,
    entry_node: 'greeting',
    global_prompt: 'You are the Acme support line.',
    nodes: [
      {
        id: 'greeting',
        type: 'conversation',
        first_line: 'Hello, Acme here.',
        instructions: 'Find out what the caller needs.',
      },
      {
        id: 'lookup',
        type: 'tool',
        tool_name: 'find_order',
        url: 'https://tools.example.com/orders',
        arguments: { source: 'phone', limit: 1, urgent: false, note: null },
      },
      { id: 'found', type: 'conversation', instructions: 'Tell the caller about the order.' },
      {
        id: 'missing',
        type: 'conversation',
        first_line: 'I could not find that order.',
        instructions: 'Ask for the order number again.',
        tts_config: { provider: 'sandbox', voice_id: 'sandbox' },
      },
      {
        id: 'human',
        type: 'conversation',
        global: true,
        global_description: 'The caller wants to speak to a person.',
        first_line: 'Do you want me to transfer you?',
        instructions: 'Confirm the transfer.',
        llm_config: { provider: 'sandbox' },
      },
      {
        id: 'operator',
        type: 'transfer',
        destination: '+14155550123',
        first_line: 'Transferring you now.',
      },
      { id: 'goodbye', type: 'end', first_line: 'Goodbye!' },
      { id: 'silent_end', type: 'end' },
    ],
    edges: [
      { from: 'greeting', to: 'lookup', description: 'The caller asks about an order.', message: 'One moment.' },
      { from: 'greeting', to: 'silent_end', description: 'The caller has nothing to ask.' },
      { from: 'lookup', to: 'found', description: 'The order was found.' },
      { from: 'lookup', to: 'missing', description: 'No order was found.' },
      { from: 'found', to: 'goodbye', description: 'The caller is done.', message: 'Glad I could help.' },
      { from: 'missing', to: 'lookup', description: 'The caller gave another order number.' },
      { from: 'human', to: 'operator', description: 'The caller confirms the transfer.' },
      { from: 'human', to: 'greeting', description: 'The caller changed their mind.' },
    ],
  });
}

function start(definition = supportDefinition(), options: CallSessionOptions = {}) {
  const session = createCallSession(definition, options);
  const commands = session.start();
  return { session, commands };
}

const types = (commands: Command[]) => commands.map((c) => c.type);
const says = (commands: Command[]) =>
  commands.filter((c): c is SayCommand => c.type === 'say').map((c) => c.text);
const runModel = (commands: Command[]) => commands.find((c): c is RunModelCommand => c.type === 'run_model');
const rejected = (commands: Command[]) => commands.filter((c) => c.type === 'event_rejected');
const toolCallId = (commands: Command[]) => {
  const call = commands.find((c) => c.type === 'call_tool');
  if (!call || call.type !== 'call_tool') throw new Error('no call_tool command');
  return call.tool_call_id;
};

/** Drives the session into the tool node and returns the pending tool call id. */
function toLookup(session: CallSession): string {
  session.send({ type: 'caller.said', text: 'Where is my order?' });
  return toolCallId(session.send({ type: 'model.chose_transition', function_name: 'go_to_lookup' }));
}

describe('conversation nodes', () => {
  it('start in entry_node and say its first_line, with nothing else', () => {
    const { session, commands } = start();
    expect(commands).toEqual([
      { type: 'say', say_id: 'say_1', text: 'Hello, Acme here.', node_id: 'greeting', interruptible: true },
    ]);
    expect(session.state()).toMatchObject({ status: 'active', node_id: 'greeting', awaiting: 'caller' });
    expect(session.nodesVisited()).toEqual(['greeting']);
    expect(session.start()).toEqual([]);
  });

  it('ask the model on caller input, with the global prompt and this node only', () => {
    const { session } = start();
    const commands = session.send({ type: 'caller.said', text: 'Hi there' });
    expect(types(commands)).toEqual(['run_model']);
    const run = runModel(commands)!;
    expect(run).toMatchObject({ node_id: 'greeting', reason: 'caller_input', mode: 'conversation' });
    expect(run.system).toBe('You are the Acme support line.\n\nFind out what the caller needs.');
    expect(run.system).not.toContain('Confirm the transfer');
    expect(run.transition_functions.map((f) => [f.name, f.target, f.description])).toEqual([
      ['go_to_lookup', 'lookup', 'The caller asks about an order.'],
      ['go_to_silent_end', 'silent_end', 'The caller has nothing to ask.'],
      ['go_to_human', 'human', 'The caller wants to speak to a person.'],
    ]);
    expect(run.messages).toEqual([
      { role: 'assistant', content: 'Hello, Acme here.', node_id: 'greeting', say_id: 'say_1' },
      { role: 'user', content: 'Hi there', node_id: 'greeting' },
    ]);
  });

  it('treat keypad digits as caller input', () => {
    const { session } = start();
    const run = runModel(session.send({ type: 'dtmf', digits: '12#' }))!;
    expect(run.messages.at(-1)).toEqual({ role: 'user', content: 'DTMF: 12#', node_id: 'greeting' });
  });

  it("record the model's own words", () => {
    const { session } = start();
    session.send({ type: 'caller.said', text: 'Hi' });
    expect(session.send({ type: 'model.replied', text: 'How can I help?' })).toEqual([]);
    expect(session.history().at(-1)).toEqual({ role: 'assistant', content: 'How can I help?', node_id: 'greeting' });
  });

  it('on a chosen transition say the edge message, then enter the target', () => {
    const { session } = start();
    session.send({ type: 'caller.said', text: 'Where is my order?' });
    const commands = session.send({ type: 'model.chose_transition', function_name: 'go_to_lookup', node_id: 'greeting' });
    expect(commands[0]).toEqual({ type: 'say', say_id: 'say_2', text: 'One moment.', node_id: 'greeting', interruptible: true });
    expect(commands[1]).toEqual({
      type: 'call_tool',
      tool_call_id: 'tool_3',
      tool_name: 'find_order',
      url: 'https://tools.example.com/orders',
      arguments: { source: 'phone', limit: 1, urgent: false, note: null },
      node_id: 'lookup',
    });
    expect(commands).toHaveLength(2);
    expect(session.nodesVisited()).toEqual(['greeting', 'lookup']);
  });

  it('let the model speak first in a node without first_line entered mid-call', () => {
    const { session } = start();
    const id = toLookup(session);
    session.send({ type: 'tool.result', tool_call_id: id, result: { status: 'shipped' } });
    const commands = session.send({ type: 'model.chose_transition', function_name: 'go_to_found' });
    expect(types(commands)).toEqual(['run_model']);
    expect(runModel(commands)).toMatchObject({ node_id: 'found', reason: 'node_entered' });
  });

  it('do not call the model at start when the entry node has no first_line', () => {
    const definition = supportDefinition();
    const { commands } = start({ ...definition, entry_node: 'found' });
    expect(commands).toEqual([]);
  });
});

describe('global nodes', () => {
  it('are reachable from every conversation node, but not from themselves', () => {
    const { session } = start();
    session.send({ type: 'caller.said', text: 'Can I talk to a human?' });
    const commands = session.send({ type: 'model.chose_transition', function_name: 'go_to_human' });
    expect(says(commands)).toEqual(['Do you want me to transfer you?']);
    const run = runModel(session.send({ type: 'caller.said', text: 'Hmm' }))!;
    expect(run.transition_functions.map((f) => f.name)).toEqual(['go_to_operator', 'go_to_greeting']);
    expect(rejected(session.send({ type: 'model.chose_transition', function_name: 'go_to_human' }))).toHaveLength(1);
  });

  it('are reachable from a conversation node entered later', () => {
    const { session } = start();
    const id = toLookup(session);
    session.send({ type: 'tool.result', tool_call_id: id, result: { status: 'none' } });
    session.send({ type: 'model.chose_transition', function_name: 'go_to_missing' });
    const run = runModel(session.send({ type: 'caller.said', text: 'a person please' }))!;
    expect(run.transition_functions.map((f) => f.name)).toEqual(['go_to_lookup', 'go_to_human']);
    expect(says(session.send({ type: 'model.chose_transition', function_name: 'go_to_human' }))).toEqual([
      'Do you want me to transfer you?',
    ]);
  });

  it('are offered once, by the explicit edge, when a node already has an edge to one', () => {
    const definition = supportDefinition();
    definition.edges.push({ from: 'found', to: 'human', description: 'Wants a refund.', message: 'Sure.' });
    const { session } = start({ ...definition, entry_node: 'found' });
    const run = runModel(session.send({ type: 'caller.said', text: 'refund' }))!;
    expect(run.transition_functions.filter((f) => f.target === 'human')).toEqual([
      { name: 'go_to_human', description: 'Wants a refund.', target: 'human', edge_index: 8 },
    ]);
    expect(says(session.send({ type: 'model.chose_transition', function_name: 'go_to_human' }))).toEqual([
      'Sure.',
      'Do you want me to transfer you?',
    ]);
  });

  it('are not offered in a tool node', () => {
    const { session } = start();
    const id = toLookup(session);
    const run = runModel(session.send({ type: 'tool.result', tool_call_id: id, result: {} }))!;
    expect(run.transition_functions.map((f) => f.target)).toEqual(['found', 'missing']);
    const commands = session.send({ type: 'model.chose_transition', function_name: 'go_to_human' });
    expect(rejected(commands)[0]).toMatchObject({ code: 'UNKNOWN_TRANSITION_FUNCTION' });
    expect(session.state().node_id).toBe('lookup');
  });
});

describe('tool nodes', () => {
  const oneWayOut = (): WorkflowDefinition => {
    const d = supportDefinition();
    d.edges = d.edges.filter((e) => !(e.from === 'lookup' && e.to === 'missing'));
    d.edges.find((e) => e.from === 'lookup')!.message = 'Found it.';
    return d;
  };

  it('call the tool on entry and, with one edge, follow it when the result arrives', () => {
    const { session } = start(oneWayOut());
    const id = toLookup(session);
    expect(session.state()).toMatchObject({ node_id: 'lookup', awaiting: 'tool_result', pending_tool_call_id: id });
    const commands = session.send({ type: 'tool.result', tool_call_id: id, result: { eta: 'Monday' } });
    expect(types(commands)).toEqual(['say', 'run_model']);
    expect(says(commands)).toEqual(['Found it.']);
    expect(runModel(commands)!.messages).toContainEqual({
      role: 'tool',
      content: '{"eta":"Monday"}',
      node_id: 'lookup',
      tool_call_id: id,
      tool_name: 'find_order',
    });
    expect(session.state().node_id).toBe('found');
  });

  it('with one edge follow it on failure too, with the error in the history', () => {
    const { session } = start(oneWayOut());
    const id = toLookup(session);
    const commands = session.send({ type: 'tool.failed', tool_call_id: id, error: 'timed out after 10 s' });
    expect(session.state().node_id).toBe('found');
    expect(runModel(commands)!.messages.at(-2)).toMatchObject({
      role: 'tool',
      content: '{"error":"timed out after 10 s"}',
    });
  });

  it('with two edges let the model choose among them given the result', () => {
    const { session } = start();
    const id = toLookup(session);
    const commands = session.send({ type: 'tool.result', tool_call_id: id, result: 'no such order' });
    expect(types(commands)).toEqual(['run_model']);
    const run = runModel(commands)!;
    expect(run).toMatchObject({ node_id: 'lookup', reason: 'tool_result', mode: 'tool_choice', tools: [] });
    expect(run.transition_functions).toEqual([
      { name: 'go_to_found', description: 'The order was found.', target: 'found', edge_index: 2 },
      { name: 'go_to_missing', description: 'No order was found.', target: 'missing', edge_index: 3 },
    ]);
    expect(run.messages.at(-1)).toMatchObject({ role: 'tool', content: 'no such order' });
    expect(session.state()).toMatchObject({ awaiting: 'model_choice', pending_tool_call_id: null });
    expect(session.modelContext()?.mode).toBe('tool_choice');

    const next = session.send({ type: 'model.chose_transition', function_name: 'go_to_missing' });
    expect(types(next)).toEqual(['set_provider_overrides', 'say']);
    expect(says(next)).toEqual(['I could not find that order.']);
    expect(session.state().node_id).toBe('missing');
  });

  it('with two edges hand a failure to the model as well', () => {
    const { session } = start();
    const id = toLookup(session);
    const run = runModel(session.send({ type: 'tool.failed', tool_call_id: id, error: 'HTTP 500' }))!;
    expect(run.messages.at(-1)).toMatchObject({ role: 'tool', content: '{"error":"HTTP 500"}' });
  });

  it('give each entry its own tool call id', () => {
    const { session } = start();
    const first = toLookup(session);
    session.send({ type: 'tool.result', tool_call_id: first, result: null });
    session.send({ type: 'model.chose_transition', function_name: 'go_to_missing' });
    session.send({ type: 'caller.said', text: 'It is 42' });
    const second = toolCallId(session.send({ type: 'model.chose_transition', function_name: 'go_to_lookup' }));
    expect(second).not.toBe(first);
    expect(rejected(session.send({ type: 'tool.result', tool_call_id: first, result: null }))[0]).toMatchObject({
      code: 'UNKNOWN_TOOL_CALL',
    });
    expect(session.state()).toMatchObject({ node_id: 'lookup', pending_tool_call_id: second });
  });

  it('record what the caller says while the tool runs, without calling the model', () => {
    const { session } = start();
    toLookup(session);
    expect(session.send({ type: 'caller.said', text: 'hello?' })).toEqual([]);
    expect(session.history().at(-1)).toEqual({ role: 'user', content: 'hello?', node_id: 'lookup' });
  });
});

describe('transfer nodes', () => {
  function toOperator(session: CallSession): Command[] {
    session.send({ type: 'caller.said', text: 'A human please' });
    session.send({ type: 'model.chose_transition', function_name: 'go_to_human' });
    session.send({ type: 'caller.said', text: 'Yes' });
    return session.send({ type: 'model.chose_transition', function_name: 'go_to_operator' });
  }

  it('say the first line, then transfer and end with call-transferred once it has played', () => {
    const { session } = start();
    const commands = toOperator(session);
    // Leaving `human` (llm override) for a node without overrides goes back to the assistant's.
    expect(commands).toEqual([
      { type: 'set_provider_overrides', node_id: 'operator' },
      { type: 'say', say_id: 'say_3', text: 'Transferring you now.', node_id: 'operator', interruptible: false },
    ]);
    expect(session.state()).toMatchObject({ status: 'closing', awaiting: 'closing_line' });
    expect(session.send({ type: 'assistant.done_speaking', say_id: 'say_2' })).toEqual([]);
    expect(session.send({ type: 'assistant.done_speaking', say_id: 'say_3' })).toEqual([
      { type: 'transfer', destination: '+14155550123', node_id: 'operator' },
      { type: 'hang_up', reason: 'call-transferred', node_id: 'operator' },
    ]);
    expect(session.state()).toMatchObject({ status: 'ended', ended_reason: 'call-transferred', awaiting: null });
  });

  it('transfer at once when the node has no first line', () => {
    const definition = supportDefinition();
    const operator = definition.nodes.find((n) => n.id === 'operator')!;
    delete operator.first_line;
    const { session } = start(definition);
    expect(types(toOperator(session))).toEqual(['set_provider_overrides', 'transfer', 'hang_up']);
    expect(session.state().status).toBe('ended');
  });
});

describe('end nodes', () => {
  it('say the first line, wait until it has played, then hang up', () => {
    const { session } = start();
    const id = toLookup(session);
    session.send({ type: 'tool.result', tool_call_id: id, result: {} });
    session.send({ type: 'model.chose_transition', function_name: 'go_to_found' });
    const commands = session.send({ type: 'model.chose_transition', function_name: 'go_to_goodbye' });
    expect(says(commands)).toEqual(['Glad I could help.', 'Goodbye!']);
    expect(commands.filter((c) => c.type === 'say').map((c) => (c as SayCommand).interruptible)).toEqual([true, false]);
    const closing = (commands.at(-1) as SayCommand).say_id;
    expect(session.send({ type: 'assistant.done_speaking', say_id: (commands[0] as SayCommand).say_id })).toEqual([]);
    expect(session.send({ type: 'caller.said', text: 'wait' })).toEqual([]);
    expect(session.send({ type: 'assistant.done_speaking', say_id: closing })).toEqual([
      { type: 'hang_up', reason: 'assistant-ended-call', node_id: 'goodbye' },
    ]);
    expect(session.state()).toMatchObject({ status: 'ended', ended_reason: 'assistant-ended-call' });
  });

  it('say end_call_message when the node has no first line; done_speaking without id means all played', () => {
    const { session } = start(supportDefinition(), { end_call_message: 'Thanks for calling.' });
    session.send({ type: 'caller.said', text: 'nothing' });
    const commands = session.send({ type: 'model.chose_transition', function_name: 'go_to_silent_end' });
    expect(says(commands)).toEqual(['Thanks for calling.']);
    expect(types(session.send({ type: 'assistant.done_speaking' }))).toEqual(['hang_up']);
  });

  it('hang up at once with nothing to say', () => {
    const { session } = start();
    session.send({ type: 'caller.said', text: 'nothing' });
    const commands = session.send({ type: 'model.chose_transition', function_name: 'go_to_silent_end' });
    expect(commands).toEqual([{ type: 'hang_up', reason: 'assistant-ended-call', node_id: 'silent_end' }]);
    expect(session.state().status).toBe('ended');
  });
});

describe('a say cut by a barge-in', () => {
  /** A greeting of two sentences, so that a cut can keep the first. */
  function twoSentences(): WorkflowDefinition {
    const d = supportDefinition();
    d.nodes.find((n) => n.id === 'greeting')!.first_line = 'Hello, Acme here. How can I help you today?';
    return d;
  }
  const cut = (say_id: string, heard: string): CallEvent => ({ type: 'assistant.done_speaking', say_id, heard });

  it('keeps in the history only what the caller heard, and the next model request sees only that', () => {
    const { session } = start(twoSentences());
    expect(session.send(cut('say_1', 'Hello, Acme here.'))).toEqual([]);
    expect(session.history()).toEqual([
      { role: 'assistant', content: 'Hello, Acme here.', node_id: 'greeting', say_id: 'say_1' },
    ]);
    const run = runModel(session.send({ type: 'caller.said', text: 'I need my order' }))!;
    expect(run.messages.map((m) => [m.role, m.content])).toEqual([
      ['assistant', 'Hello, Acme here.'],
      ['user', 'I need my order'],
    ]);
  });

  it('drops the line from the history when nothing of it was heard', () => {
    const { session } = start(twoSentences());
    expect(session.send(cut('say_1', ''))).toEqual([]);
    expect(session.history()).toEqual([]);
    const run = runModel(session.send({ type: 'caller.said', text: 'Hello?' }))!;
    expect(run.messages).toEqual([{ role: 'user', content: 'Hello?', node_id: 'greeting' }]);
  });

  it('treats blank heard text as nothing heard, and trims what was heard', () => {
    const { session } = start(twoSentences());
    session.send(cut('say_1', '  Hello, Acme here. '));
    expect(session.history()[0]!.content).toBe('Hello, Acme here.');
    const other = start(twoSentences()).session;
    other.send(cut('say_1', ' \n '));
    expect(other.history()).toEqual([]);
  });

  it('shortens the right line when the caller spoke after it, and leaves the rest in order', () => {
    const { session } = start(twoSentences());
    session.send({ type: 'caller.said', text: 'Where is my order?' });
    session.send({ type: 'model.chose_transition', function_name: 'go_to_lookup' }); // say_2 'One moment.'
    session.send({ type: 'caller.said', text: 'wait' });
    session.send(cut('say_1', 'Hello, Acme here.'));
    session.send(cut('say_2', ''));
    expect(session.history().map((m) => [m.role, m.content])).toEqual([
      ['assistant', 'Hello, Acme here.'],
      ['user', 'Where is my order?'],
      ['user', 'wait'],
    ]);
  });

  it('does not change a history already handed to the model (run_model messages are shared)', () => {
    const { session } = start(twoSentences());
    const run = runModel(session.send({ type: 'caller.said', text: 'Hi' }))!;
    const seen = JSON.stringify(run.messages);
    session.send(cut('say_1', ''));
    expect(JSON.stringify(run.messages)).toBe(seen);
    expect(session.history()).toHaveLength(1);
  });

  it('changes only the cut line: not a line played whole, wholly heard, or unknown', () => {
    const { session } = start(twoSentences());
    const before = JSON.stringify(session.snapshot());
    expect(session.send({ type: 'assistant.done_speaking', say_id: 'say_1' })).toEqual([]);
    expect(session.send(cut('say_1', 'Hello, Acme here. How can I help you today?'))).toEqual([]);
    // an unknown say_id with heard text is no error: there is nothing of it to shorten
    expect(session.send(cut('say_99', 'Hello'))).toEqual([]);
    expect(JSON.stringify(session.snapshot())).toBe(before);
    session.send(cut('say_1', 'Hello, Acme here.'));
    expect(JSON.stringify(session.snapshot())).not.toBe(before);
    expect(session.history().map((m) => m.content)).toEqual(['Hello, Acme here.']);
  });

  it('keeps the heard part of a cut closing line, and still ends the call', () => {
    const { session } = start();
    session.send({ type: 'caller.said', text: 'human' });
    session.send({ type: 'model.chose_transition', function_name: 'go_to_human' });
    const commands = session.send({ type: 'model.chose_transition', function_name: 'go_to_operator' });
    const closing = (commands.at(-1) as SayCommand).say_id;
    expect(types(session.send(cut(closing, 'Transferring you')))).toEqual(['transfer', 'hang_up']);
    expect(session.history().at(-1)).toEqual({ role: 'assistant', content: 'Transferring you', node_id: 'operator', say_id: closing });
  });

  it('survives a save and restore, and a cut after the restore applies too', () => {
    const { session } = start(twoSentences());
    session.send(cut('say_1', 'Hello, Acme here.'));
    session.send({ type: 'caller.said', text: 'Where is my order?' });
    session.send({ type: 'model.chose_transition', function_name: 'go_to_lookup' }); // say_2
    const snapshot = JSON.parse(JSON.stringify(session.snapshot()));
    expect(snapshot.history[0]).toEqual({ role: 'assistant', content: 'Hello, Acme here.', node_id: 'greeting', say_id: 'say_1' });
    const restored = restoreCallSession(twoSentences(), snapshot);
    expect(restored.history()).toEqual(session.history());
    expect(restored.send(cut('say_2', ''))).toEqual(session.send(cut('say_2', '')));
    expect(restored.history().map((m) => m.content)).toEqual(['Hello, Acme here.', 'Where is my order?']);
    expect(restored.snapshot()).toEqual(session.snapshot());
  });

  it('for any cut of any say: that entry holds the heard text (or is gone), every other entry is unchanged', () => {
    const lines = fc.constantFrom('Hello, Acme here.', 'How can I help?', 'One moment.', '');
    fc.assert(
      fc.property(
        fc.array(fc.oneof(fc.constant('caller' as const), fc.constant('silence' as const)), { maxLength: 6 }),
        fc.nat(10),
        fc.oneof(lines, fc.string({ maxLength: 12 })),
        (steps, pick, heard) => {
          const { session } = start(twoSentences(), { silence: { messages: ['Still there?'], max_attempts: 10 } });
          steps.forEach((step, i) =>
            session.send(step === 'caller' ? { type: 'caller.said', text: `words ${i}` } : { type: 'timer.silence' }),
          );
          const before = [...session.history()];
          const saysIn = before.filter((m) => m.say_id !== undefined);
          const target = saysIn[pick % saysIn.length]!;
          expect(session.send(cut(target.say_id!, heard))).toEqual([]);
          const expected = before.flatMap((m) =>
            m !== target ? [m] : heard.trim() === '' ? [] : [{ ...m, content: heard.trim() }],
          );
          expect(session.history()).toEqual(expected);
        },
      ),
      { numRuns: 200 },
    );
  });
});

describe('call-level events', () => {
  it('hangup ends the call as customer-ended-call, and later events are rejected', () => {
    const { session } = start();
    expect(session.send({ type: 'hangup' })).toEqual([]);
    expect(session.state()).toMatchObject({ status: 'ended', ended_reason: 'customer-ended-call' });
    expect(rejected(session.send({ type: 'caller.said', text: 'hello?' }))[0]).toMatchObject({ code: 'CALL_ENDED' });
  });

  it('the caller can hang up during a closing line', () => {
    const { session } = start();
    session.send({ type: 'caller.said', text: 'human' });
    session.send({ type: 'model.chose_transition', function_name: 'go_to_human' });
    session.send({ type: 'model.chose_transition', function_name: 'go_to_operator' });
    expect(session.send({ type: 'hangup' })).toEqual([]);
    expect(session.state().ended_reason).toBe('customer-ended-call');
  });

  it('timer.max_duration hangs up with exceeded-max-duration', () => {
    const { session } = start();
    expect(session.send({ type: 'timer.max_duration' })).toEqual([
      { type: 'hang_up', reason: 'exceeded-max-duration', node_id: 'greeting' },
    ]);
    expect(session.state().status).toBe('ended');
  });

  it('timer.silence prompts, resets on caller input, then says the final line and hangs up', () => {
    const { session } = start(supportDefinition(), {
      silence: { messages: ['Still there?', 'Hello?'], final_message: 'Bye for now.', max_attempts: 2 },
    });
    expect(says(session.send({ type: 'timer.silence' }))).toEqual(['Still there?']);
    session.send({ type: 'caller.said', text: 'yes' });
    expect(says(session.send({ type: 'timer.silence' }))).toEqual(['Still there?']);
    expect(says(session.send({ type: 'timer.silence' }))).toEqual(['Hello?']);
    const last = session.send({ type: 'timer.silence' });
    expect(last).toEqual([
      { type: 'say', say_id: expect.any(String), text: 'Bye for now.', node_id: 'greeting', interruptible: false },
    ]);
    expect(session.send({ type: 'assistant.done_speaking', say_id: (last[0] as SayCommand).say_id })).toEqual([
      { type: 'hang_up', reason: 'silence-timed-out', node_id: 'greeting' },
    ]);
  });

  it('timer.silence defaults to the platform silence settings', () => {
    const { session } = start();
    expect(says(session.send({ type: 'timer.silence' }))).toEqual(['Are you still there?']);
    expect(says(session.send({ type: 'timer.silence' }))).toEqual(['Are you still there?']);
    const last = session.send({ type: 'timer.silence' });
    expect(says(last)).toEqual(["I haven't heard from you, so I'll end the call now. Goodbye."]);
    expect(types(session.send({ type: 'assistant.done_speaking' }))).toEqual(['hang_up']);
    expect(session.state().ended_reason).toBe('silence-timed-out');
  });

  it('timer.silence with no messages asks the model for a check-in: no functions, an instruction, a fallback', () => {
    const tools = [{ name: 'find_order', description: 'Find an order', url: 'https://tools.example.com/orders' }];
    const { session } = start(supportDefinition(), {
      tools,
      silence: { messages: [], final_message: 'Bye for now.', max_attempts: 2 },
    });
    const first = session.send({ type: 'timer.silence' });
    expect(first).toEqual([
      {
        type: 'run_model',
        node_id: 'greeting',
        reason: 'silence_check',
        mode: 'conversation',
        system: session.modelContext()!.system,
        transition_functions: [],
        tools: [],
        messages: session.history(),
        instruction: SILENCE_CHECK_INSTRUCTION,
        fallback: SILENCE_CHECK_FALLBACK,
      },
    ]);
    // the check-in is the model's reply, recorded as one
    expect(session.send({ type: 'model.replied', text: 'Are you still with me?' })).toEqual([]);
    expect(session.history().at(-1)).toEqual({ role: 'assistant', content: 'Are you still with me?', node_id: 'greeting' });
    expect(runModel(session.send({ type: 'timer.silence' }))?.reason).toBe('silence_check');
    // max_attempts check-ins, then the final line as with messages
    expect(says(session.send({ type: 'timer.silence' }))).toEqual(['Bye for now.']);
    // a caller turn after a check-in is an ordinary turn, with its functions
    const other = start(supportDefinition(), { tools, silence: { messages: [], max_attempts: 2 } }).session;
    other.send({ type: 'timer.silence' });
    const turn = runModel(other.send({ type: 'caller.said', text: 'Yes, still here.' }))!;
    expect(turn).toMatchObject({ reason: 'caller_input', tools });
    expect(turn.transition_functions.length).toBeGreaterThan(0);
    expect(turn.instruction).toBeUndefined();
  });

  it('timer.silence with max_attempts 0 closes at the first check (autonomous_silence_handling false)', () => {
    const { session } = start(supportDefinition(), { silence: { messages: [], final_message: 'Goodbye.', max_attempts: 0 } });
    const last = session.send({ type: 'timer.silence' });
    expect(last).toEqual([{ type: 'say', say_id: expect.any(String), text: 'Goodbye.', node_id: 'greeting', interruptible: false }]);
    expect(session.state().status).toBe('closing');
    expect(session.send({ type: 'assistant.done_speaking', say_id: (last[0] as SayCommand).say_id })).toEqual([
      { type: 'hang_up', reason: 'silence-timed-out', node_id: 'greeting' },
    ]);
    const silent = start(supportDefinition(), { silence: { messages: [], final_message: null, max_attempts: 0 } }).session;
    expect(silent.send({ type: 'timer.silence' })).toEqual([{ type: 'hang_up', reason: 'silence-timed-out', node_id: 'greeting' }]);
  });

  it('timer.silence without a final line hangs up at once after the prompts', () => {
    const { session } = start(supportDefinition(), { silence: { max_attempts: 1, final_message: null } });
    expect(says(session.send({ type: 'timer.silence' }))).toEqual(['Are you still there?']);
    expect(session.send({ type: 'timer.silence' })).toEqual([
      { type: 'hang_up', reason: 'silence-timed-out', node_id: 'greeting' },
    ]);
  });
});

describe('provider overrides', () => {
  it('are set on entering a node with overrides and reset on leaving it, only when they change', () => {
    const { session } = start();
    const id = toLookup(session);
    session.send({ type: 'tool.result', tool_call_id: id, result: {} });
    const entering = session.send({ type: 'model.chose_transition', function_name: 'go_to_missing' });
    expect(entering[0]).toEqual({
      type: 'set_provider_overrides',
      node_id: 'missing',
      tts_config: { provider: 'sandbox', voice_id: 'sandbox' },
    });
    expect(session.state().provider_overrides).toEqual({ tts_config: { provider: 'sandbox', voice_id: 'sandbox' } });
    session.send({ type: 'caller.said', text: 'human' });
    const toHuman = session.send({ type: 'model.chose_transition', function_name: 'go_to_human' });
    expect(toHuman[0]).toEqual({ type: 'set_provider_overrides', node_id: 'human', llm_config: { provider: 'sandbox' } });
    const back = session.send({ type: 'model.chose_transition', function_name: 'go_to_greeting' });
    expect(back[0]).toEqual({ type: 'set_provider_overrides', node_id: 'greeting' });
    expect(session.state().provider_overrides).toEqual({});
  });

  it('are emitted at start when the entry node has them', () => {
    const definition = supportDefinition();
    const { commands } = start({ ...definition, entry_node: 'missing' });
    expect(types(commands)).toEqual(['set_provider_overrides', 'say']);
  });
});

describe('invalid events', () => {
  const bad: Array<[string, unknown]> = [
    ['null', null],
    ['a string', 'hangup'],
    ['no type', {}],
    ['an unknown type', { type: 'caller.shouted', text: 'x' }],
    ['caller.said without text', { type: 'caller.said' }],
    ['caller.said with blank text', { type: 'caller.said', text: '  ' }],
    ['dtmf with letters', { type: 'dtmf', digits: 'hello' }],
    ['a numeric say_id', { type: 'assistant.done_speaking', say_id: 3 }],
    ['a numeric heard', { type: 'assistant.done_speaking', say_id: 'say_1', heard: 3 }],
    ['a null heard', { type: 'assistant.done_speaking', say_id: 'say_1', heard: null }],
    ['heard as an array of words', { type: 'assistant.done_speaking', say_id: 'say_1', heard: ['Hello,'] }],
    ['heard without the say_id of the cut line', { type: 'assistant.done_speaking', heard: 'Hello,' }],
    ['a transition without name', { type: 'model.chose_transition' }],
    ['tool.result without id', { type: 'tool.result', result: 1 }],
    ['tool.failed without error', { type: 'tool.failed', tool_call_id: 'tool_1' }],
  ];

  it.each(bad)('%s is rejected as malformed and changes nothing', (_label, event) => {
    const { session } = start();
    const before = JSON.stringify(session.snapshot());
    const commands = session.send(event as CallEvent);
    expect(commands).toHaveLength(1);
    expect(commands[0]).toMatchObject({ type: 'event_rejected', code: 'MALFORMED_EVENT' });
    expect(JSON.stringify(session.snapshot())).toBe(before);
  });

  it('events that do not fit the current node are rejected with a code and change nothing', () => {
    const { session } = start();
    const cases: Array<[CallEvent, string]> = [
      [{ type: 'model.chose_transition', function_name: 'go_to_nowhere' }, 'UNKNOWN_TRANSITION_FUNCTION'],
      [{ type: 'model.chose_transition', function_name: 'go_to_found' }, 'UNKNOWN_TRANSITION_FUNCTION'],
      [{ type: 'model.chose_transition', function_name: 'go_to_lookup', node_id: 'found' }, 'STALE_EVENT'],
      [{ type: 'tool.result', tool_call_id: 'tool_1', result: {} }, 'UNKNOWN_TOOL_CALL'],
      [{ type: 'tool.failed', tool_call_id: 'tool_1', error: 'x' }, 'UNKNOWN_TOOL_CALL'],
    ];
    for (const [event, code] of cases) {
      const before = JSON.stringify(session.snapshot());
      const commands = session.send(event);
      expect(commands, JSON.stringify(event)).toEqual([
        expect.objectContaining({ type: 'event_rejected', event_type: event.type, code, node_id: 'greeting' }),
      ]);
      expect((commands[0] as { message: string }).message.length).toBeGreaterThan(0);
      expect(JSON.stringify(session.snapshot())).toBe(before);
    }
  });

  it('a transition while the tool is still running is not expected', () => {
    const { session } = start();
    toLookup(session);
    expect(rejected(session.send({ type: 'model.chose_transition', function_name: 'go_to_found' }))[0]).toMatchObject({
      code: 'EVENT_NOT_EXPECTED',
    });
    expect(session.state().node_id).toBe('lookup');
  });

  it('events before start are rejected', () => {
    const session = createCallSession(supportDefinition());
    expect(rejected(session.send({ type: 'caller.said', text: 'hi' }))[0]).toMatchObject({ code: 'NOT_STARTED' });
    expect(() => session.snapshot()).toThrow(CallSessionError);
  });

  it('a stopped session rejects events', () => {
    const { session } = start();
    session.stop();
    expect(rejected(session.send({ type: 'caller.said', text: 'hi' }))[0]).toMatchObject({ code: 'CALL_ENDED' });
  });
});

describe("the assistant's tools", () => {
  it('are given to the model in conversation nodes; transition names avoid their names', () => {
    const tools = [{ name: 'go_to_lookup', description: 'A tool that happens to share the name.' }];
    const { session } = start(supportDefinition(), { tools });
    const run = runModel(session.send({ type: 'caller.said', text: 'order' }))!;
    expect(run.tools).toEqual(tools);
    const fn = run.transition_functions.find((f) => f.target === 'lookup')!;
    expect(fn.name).not.toBe('go_to_lookup');
    expect(rejected(session.send({ type: 'model.chose_transition', function_name: 'go_to_lookup' }))[0]).toMatchObject({
      code: 'UNKNOWN_TRANSITION_FUNCTION',
    });
    expect(types(session.send({ type: 'model.chose_transition', function_name: fn.name }))).toEqual(['say', 'call_tool']);
  });
});

describe('definitions', () => {
  it('are compiled once per distinct definition (key order does not matter)', () => {
    clearCompileCache();
    const a = compileWorkflow(supportDefinition());
    const reverseKeys = (v: unknown): unknown =>
      Array.isArray(v)
        ? v.map(reverseKeys)
        : v !== null && typeof v === 'object'
          ? Object.fromEntries(Object.entries(v).reverse().map(([k, x]) => [k, reverseKeys(x)]))
          : v;
    const reordered = reverseKeys(supportDefinition()) as WorkflowDefinition;
    expect(Object.keys(reordered)[0]).toBe('edges');
    const b = compileWorkflow(reordered);
    expect(b).toBe(a);
    expect(b.machine).toBe(a.machine);
    const changed = supportDefinition();
    changed.global_prompt = 'Another prompt.';
    expect(compileWorkflow(changed)).not.toBe(a);
    expect(compileCacheSize()).toBe(2);
    createCallSession(supportDefinition()).start();
    expect(compileCacheSize()).toBe(2);
  });

  it('a running call keeps its definition when the workflow is replaced mid-call', () => {
    const v1 = supportDefinition();
    const first = createCallSession(v1);
    first.start();
    first.send({ type: 'caller.said', text: 'my order' });

    // The workflow is updated (PATCH): new prompt, new first line, the tool edge goes elsewhere.
    const v2 = supportDefinition();
    v2.global_prompt = 'You are the NEW Acme line.';
    v2.nodes.find((n) => n.id === 'missing')!.first_line = 'New wording.';
    v2.edges = v2.edges.filter((e) => e.from !== 'greeting' || e.to !== 'lookup');
    v2.edges.push({ from: 'greeting', to: 'human', description: 'Anything else.' });
    // Even the caller's own object changing under the running call must not reach it.
    v1.global_prompt = 'mutated';
    v1.nodes.find((n) => n.id === 'missing')!.first_line = 'mutated';

    const second = createCallSession(v2);
    second.start();
    expect(runModel(second.send({ type: 'caller.said', text: 'hi' }))!.system).toContain('NEW Acme');

    const id = toolCallId(first.send({ type: 'model.chose_transition', function_name: 'go_to_lookup' }));
    first.send({ type: 'tool.result', tool_call_id: id, result: {} });
    expect(says(first.send({ type: 'model.chose_transition', function_name: 'go_to_missing' }))).toEqual([
      'I could not find that order.',
    ]);
    expect(runModel(first.send({ type: 'caller.said', text: 'x' }))!.system).toContain('You are the Acme support line.');
    expect(first.workflow.hash).not.toBe(second.workflow.hash);
    expect(rejected(second.send({ type: 'model.chose_transition', function_name: 'go_to_lookup' }))).toHaveLength(1);
  });

  it('compiled definitions are frozen copies', () => {
    const compiled = compileWorkflow(supportDefinition());
    expect(Object.isFrozen(compiled.definition)).toBe(true);
    expect(Object.isFrozen(compiled.definition.nodes[0])).toBe(true);
  });
});

describe('save and restore', () => {
  const roundTrip = (session: CallSession, options: CallSessionOptions = {}) =>
    restoreCallSession(supportDefinition(), JSON.parse(JSON.stringify(session.snapshot())), options);

  it('resume in the same node with the same history, issuing nothing, and continue', () => {
    const { session } = start();
    const id = toLookup(session);
    const snapshot = session.snapshot();
    expect(snapshot).toMatchObject({ status: 'active', current_node: 'lookup', nodes_visited: ['greeting', 'lookup'] });

    const restored = roundTrip(session);
    expect(restored.state()).toEqual(session.state());
    expect(restored.history()).toEqual(session.history());
    expect(restored.nodesVisited()).toEqual(['greeting', 'lookup']);
    expect(restored.start()).toEqual([]);

    const event: CallEvent = { type: 'tool.result', tool_call_id: id, result: { ok: true } };
    expect(restored.send(event)).toEqual(session.send(event));
    const choose: CallEvent = { type: 'model.chose_transition', function_name: 'go_to_found' };
    expect(restored.send(choose)).toEqual(session.send(choose));
    expect(restored.snapshot()).toEqual(session.snapshot());
  });

  it('keeps a closing line pending across a restore', () => {
    const { session } = start();
    session.send({ type: 'caller.said', text: 'human' });
    session.send({ type: 'model.chose_transition', function_name: 'go_to_human' });
    const commands = session.send({ type: 'model.chose_transition', function_name: 'go_to_operator' });
    const restored = roundTrip(session);
    expect(restored.state()).toMatchObject({ status: 'closing', node_id: 'operator' });
    expect(types(restored.send({ type: 'assistant.done_speaking', say_id: (commands.at(-1) as SayCommand).say_id }))).toEqual([
      'transfer',
      'hang_up',
    ]);
  });

  it('keeps the settings of the call (not the options given at restore)', () => {
    const { session } = start(supportDefinition(), { silence: { messages: ['Anyone?'], max_attempts: 3 } });
    const restored = roundTrip(session, { silence: { messages: ['Other'] } });
    expect(says(restored.send({ type: 'timer.silence' }))).toEqual(['Anyone?']);
  });

  it('restores an ended call as ended', () => {
    const { session } = start();
    session.send({ type: 'hangup' });
    const restored = roundTrip(session);
    expect(restored.state()).toMatchObject({ status: 'ended', ended_reason: 'customer-ended-call' });
    expect(rejected(restored.send({ type: 'hangup' }))[0]).toMatchObject({ code: 'CALL_ENDED' });
  });

  it('refuses a snapshot of another definition, or garbage', () => {
    const { session } = start();
    const snapshot = JSON.parse(JSON.stringify(session.snapshot()));
    const other = supportDefinition();
    other.global_prompt = 'changed';
    expect(() => restoreCallSession(other, snapshot)).toThrow(
      expect.objectContaining({ code: 'SNAPSHOT_DEFINITION_MISMATCH' }),
    );
    expect(() => restoreCallSession(supportDefinition(), { ...snapshot, format: 'x' })).toThrow(
      expect.objectContaining({ code: 'SNAPSHOT_INVALID' }),
    );
    expect(() => restoreCallSession(supportDefinition(), { ...snapshot, machine: null })).toThrow(CallSessionError);
    const wrongNode = { ...snapshot, machine: { ...snapshot.machine, context: { ...snapshot.machine.context, node_id: 'nope' } } };
    expect(() => restoreCallSession(supportDefinition(), wrongNode)).toThrow(CallSessionError);
  });
});

describe('any sequence of events', () => {
  const functionNames = ['go_to_lookup', 'go_to_found', 'go_to_missing', 'go_to_goodbye', 'go_to_human', 'go_to_operator', 'go_to_greeting', 'go_to_silent_end', 'nope'];
  const eventArb: fc.Arbitrary<CallEvent | { pick: 'tool.result' | 'tool.failed' | 'done' | 'cut'; heard?: string }> = fc.oneof(
    fc.record({ type: fc.constant('caller.said' as const), text: fc.string({ minLength: 1, maxLength: 8 }) }),
    fc.record({ type: fc.constant('dtmf' as const), digits: fc.constantFrom('1', '42#') }),
    fc.record({ type: fc.constant('model.chose_transition' as const), function_name: fc.constantFrom(...functionNames) }),
    fc.record({ type: fc.constant('model.replied' as const), text: fc.string({ maxLength: 8 }) }),
    fc.record({ type: fc.constant('tool.result' as const), tool_call_id: fc.constantFrom('tool_1', 'x'), result: fc.jsonValue() }),
    fc.record({ pick: fc.constantFrom('tool.result' as const, 'tool.failed' as const, 'done' as const) }),
    fc.record({ pick: fc.constant('cut' as const), heard: fc.constantFrom('', 'Hello,', 'One', ' ') }),
    fc.constant({ type: 'timer.silence' as const }),
    fc.constant({ type: 'assistant.done_speaking' as const }),
    fc.constant({ type: 'hangup' as const }),
  );

  // `pick` events answer whatever the call waits for (the pending tool call, the last say).
  // `cut` cuts the last say still in the history, keeping `heard` of it.
  function resolve(session: CallSession, e: CallEvent | { pick: string; heard?: string }): CallEvent {
    if (!('pick' in e)) return e;
    const state = session.state();
    if (e.pick === 'cut') {
      const say_id = [...session.history()].reverse().find((m) => m.say_id !== undefined)?.say_id ?? 'say_1';
      return { type: 'assistant.done_speaking', say_id, heard: e.heard ?? '' };
    }
    if (e.pick === 'done') {
      const lastSay = session.history().length;
      return { type: 'assistant.done_speaking', say_id: `say_${lastSay}` };
    }
    const id = state.pending_tool_call_id ?? 'none';
    return e.pick === 'tool.result'
      ? { type: 'tool.result', tool_call_id: id, result: { n: 1 } }
      : { type: 'tool.failed', tool_call_id: id, error: 'boom' };
  }

  it('never throws, always answers with an array, and a restore at any point changes nothing', () => {
    fc.assert(
      fc.property(fc.array(eventArb, { maxLength: 40 }), fc.nat(40), (events, cut) => {
        const a = createCallSession(supportDefinition());
        const b = createCallSession(supportDefinition());
        expect(b.start()).toEqual(a.start());
        let restored: CallSession = b;
        events.forEach((raw, i) => {
          if (i === cut) {
            restored = restoreCallSession(supportDefinition(), JSON.parse(JSON.stringify(restored.snapshot())));
          }
          const event = resolve(a, raw);
          const out = a.send(event);
          expect(Array.isArray(out)).toBe(true);
          expect(restored.send(event)).toEqual(out);
        });
        expect(restored.snapshot()).toEqual(a.snapshot());
      }),
      { numRuns: 200 },
    );
  });
});
