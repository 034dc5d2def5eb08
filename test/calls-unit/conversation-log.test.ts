/**
 * The conversation's one list (src/calls/conversation.ts): the engine writes into it as its
 * history and reads the model's messages back from it; the record gets each line from the same
 * entries, a said line once it is over with what was heard. The engine's session is handed the
 * list and keeps none of its own.
 */
import { describe, expect, it } from 'vitest';
import { createCallSession, restoreCallSession, type Command, type HistoryMessage, type WorkflowDefinition } from '../../engine/index.js';
import { Conversation, type RecordLine } from '../../src/calls/conversation.js';

const workflow: WorkflowDefinition = {
  entry_node: 'greeting',
  nodes: [
    { id: 'greeting', type: 'conversation', prompt: 'Greet the caller.', first_line: 'Hello, Acme Dental.', first_line_interruptible: true },
    { id: 'done', type: 'end', first_line: 'Goodbye.' },
  ],
  edges: [{ from: 'greeting', to: 'done', condition: { type: 'ai', name: 'finish', description: 'The caller is done.' } }],
} as unknown as WorkflowDefinition;

function listed() {
  const record: RecordLine[] = [];
  const conversation = new Conversation((line) => record.push(line));
  return { record, conversation };
}

const sayOf = (commands: Command[]) => commands.find((c) => c.type === 'say') as Extract<Command, { type: 'say' }>;
const runModelOf = (commands: Command[]) => commands.find((c) => c.type === 'run_model') as Extract<Command, { type: 'run_model' }>;

describe('the conversation as the engine\'s history', () => {
  it('the engine writes into the list it is given; run_model reads the model\'s messages from it', () => {
    const { record, conversation } = listed();
    const session = createCallSession(workflow, { history: conversation });
    const greeting = sayOf(session.start());
    // a line being said is the model's at once, the record's once it is over
    expect(conversation.messages()).toEqual([{ role: 'assistant', content: 'Hello, Acme Dental.', node_id: 'greeting', say_id: greeting.say_id }]);
    expect(record).toEqual([]);
    conversation.spoken(greeting.say_id, 'Hello, Acme Dental.', true);
    session.send({ type: 'assistant.done_speaking', say_id: greeting.say_id });
    expect(record).toEqual([{ role: 'assistant', content: 'Hello, Acme Dental.', nodeId: 'greeting' }]);

    let turn: Extract<Command, { type: 'run_model' }> | undefined;
    conversation.through({ role: 'user', content: 'I need a cleaning.', nodeId: 'greeting' }, () => {
      turn = runModelOf(session.send({ type: 'caller.said', text: 'I need a cleaning.' }));
    });
    // the caller's turn: in the record once, and the model is told the list
    expect(record.map((l) => l.content)).toEqual(['Hello, Acme Dental.', 'I need a cleaning.']);
    expect(turn!.messages).toBe(conversation.messages());
    expect(session.history()).toBe(conversation.messages());
    expect(turn!.messages.map((m) => [m.role, m.content])).toEqual([
      ['assistant', 'Hello, Acme Dental.'],
      ['user', 'I need a cleaning.'],
    ]);
  });

  it('a cut line: the record and the model keep what was heard; nothing heard, neither has it', () => {
    const { record, conversation } = listed();
    const session = createCallSession(workflow, { history: conversation });
    const greeting = sayOf(session.start());
    conversation.spoken(greeting.say_id, 'Hello,', false);
    session.send({ type: 'assistant.done_speaking', say_id: greeting.say_id, heard: 'Hello,' });
    expect(record).toEqual([{ role: 'assistant', content: 'Hello,', nodeId: 'greeting' }]);
    expect(conversation.messages().map((m) => m.content)).toEqual(['Hello,']);

    const second = listed();
    const other = createCallSession(workflow, { history: second.conversation });
    const line = sayOf(other.start());
    second.conversation.spoken(line.say_id, '', false);
    other.send({ type: 'assistant.done_speaking', say_id: line.say_id, heard: '' });
    expect(second.record).toEqual([]);
    expect(second.conversation.messages()).toEqual([]);
  });

  it('a turn the engine does not take (the call has ended) is the record\'s alone; a reply already recorded is the model\'s alone', () => {
    const { record, conversation } = listed();
    const session = createCallSession(workflow, { history: conversation });
    session.start();
    session.send({ type: 'hangup' });
    conversation.through({ role: 'user', content: 'Wait!', nodeId: 'greeting' }, () => session.send({ type: 'caller.said', text: 'Wait!' }));
    expect(record.map((l) => l.content)).toEqual(['Wait!']);
    expect(conversation.messages().map((m) => m.content)).toEqual(['Hello, Acme Dental.']);

    const chat = listed();
    const turn = createCallSession(workflow, { history: chat.conversation });
    turn.start();
    chat.conversation.line({ role: 'assistant', content: 'Let me look.', nodeId: 'greeting' });
    chat.conversation.through(null, () => turn.send({ type: 'model.replied', text: 'Let me look. Tuesday at nine.' }));
    expect(chat.record.map((l) => l.content)).toEqual(['Let me look.']);
    expect(chat.conversation.messages().map((m) => m.content)).toEqual(['Hello, Acme Dental.', 'Let me look. Tuesday at nine.']);
  });

  it('what the engine writes while the commands of a sent line run is recorded as it comes', () => {
    const { record, conversation } = listed();
    const session = createCallSession(workflow, { history: conversation });
    const greeting = sayOf(session.start());
    conversation.through(null, () => {
      session.send({ type: 'model.replied', text: 'Sure.' });
      // a nested event (a line over, a key) within the same step
      session.send({ type: 'caller.said', text: 'Thanks.' });
    });
    expect(record.map((l) => l.content)).toEqual(['Thanks.']);
    conversation.spoken(greeting.say_id, 'Hello, Acme Dental.', true);
    conversation.spoken(greeting.say_id, 'Hello, Acme Dental.', true);
    expect(record.map((l) => l.content)).toEqual(['Thanks.', 'Hello, Acme Dental.']);
  });

  it('a restored session puts its snapshot\'s history into the list, which the record already has', () => {
    const first = listed();
    const session = createCallSession(workflow, { history: first.conversation });
    const greeting = sayOf(session.start());
    first.conversation.spoken(greeting.say_id, 'Hello, Acme Dental.', true);
    session.send({ type: 'assistant.done_speaking', say_id: greeting.say_id });
    const snapshot = session.snapshot();
    expect(snapshot.history).toEqual(first.conversation.messages());
    expect(JSON.stringify(snapshot.machine)).not.toContain('Hello, Acme Dental.');

    const next = listed();
    const resumed = restoreCallSession(workflow, snapshot, { history: next.conversation });
    expect(next.conversation.messages()).toEqual(snapshot.history);
    expect(next.record).toEqual([]);
    const turn = runModelOf(resumed.send({ type: 'caller.said', text: 'Hi.' }));
    expect(turn.messages.map((m) => m.content)).toEqual(['Hello, Acme Dental.', 'Hi.']);
    expect(next.record.map((l) => l.content)).toEqual(['Hi.']);
  });

  it('a snapshot saved when the history was kept in the machine\'s context too restores the same', () => {
    const session = createCallSession(workflow);
    session.start();
    const snapshot = session.snapshot();
    const history: HistoryMessage[] = [...snapshot.history];
    const older = { ...snapshot, machine: { ...snapshot.machine, context: { ...(snapshot.machine.context as object), history } } };
    const resumed = restoreCallSession(workflow, older);
    expect(resumed.history()).toEqual(history);
    expect(resumed.snapshot()).toEqual(snapshot);
  });
});
