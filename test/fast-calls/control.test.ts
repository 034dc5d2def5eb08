/**
 * Live control on the call controller (DECISIONS 16; src/calls/live-control.ts), on both kinds of
 * call, on the memory transport and fake timers: `say` (after the current line, or cutting it),
 * `add-message` (in the model's next turn, never said), `goto`, `transfer` (cold, and warm as a
 * warm transfer node's: completed, busy, never answered, ended meanwhile) and `end`, what the
 * record, report and transcript keep (`source: "control"`), and when a call cannot take one.
 * How a control reaches the call (another process, Redis) is test/calls-unit/control.test.ts and
 * test/calls/control.test.ts; the API's answers, test/api/call-control.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { TRANSFER_FAILED_LINE } from '../../engine/machine.js';
import { transcriptText } from '../../src/calls/transcript.js';
import { callHarness, useFastCalls, type CallHarness } from '../helpers/call-harness.js';
import type { OperatorPhone } from '../helpers/memory-operator.js';

useFastCalls();

const kinds = [{ kind: 'pipeline' as const }, { kind: 'realtime' as const }];
const model = (h: CallHarness) => (h.assistant.realtime ? h.realtime : h.llm);

const GREETING = 'Hello, this is Acme support, how can I help you today?';

const flow = {
  version: 1,
  entry_node: 'greeting',
  nodes: [
    { id: 'greeting', type: 'conversation', first_line: GREETING, instructions: 'Help the caller.' },
    { id: 'billing', type: 'conversation', first_line: 'You are through to billing.', instructions: 'Help with bills.' },
    { id: 'bye', type: 'end', first_line: 'Goodbye.' },
  ],
  edges: [
    { from: 'greeting', to: 'billing', description: 'the caller asks about a bill' },
    { from: 'billing', to: 'bye', description: 'the caller is done' },
  ],
};

/** A call in the greeting node, its greeting heard; `playing`: the greeting just begun instead. */
async function inConversation(kind: 'pipeline' | 'realtime', options: { playing?: boolean; assistant?: Record<string, unknown> } = {}) {
  const h = callHarness({ kind, definition: flow, ...(options.assistant ? { assistant: options.assistant } : {}) });
  await h.start();
  if (options.playing) await h.until('the greeting playing', () => h.transport.frames.length > 5);
  else await h.until('the greeting', () => h.heard().includes(GREETING));
  return h;
}

/** The record's messages as [role, content, source]. */
const lines = (h: CallHarness) => h.record.messages.map((m) => [m.role, m.content, m.source]);

describe.each(kinds)('say ($kind call)', ({ kind }) => {
  it('is said after the line that plays, kept with source "control" in the record, the report and the model\'s history', async () => {
    const h = await inConversation(kind, { playing: true });
    expect(h.call.control({ type: 'say', text: 'A supervisor has joined the call.' })).toEqual({ kind: 'applied' });
    await h.until('the control\'s line', () => h.heard().includes('A supervisor has joined the call.'), 10_000);
    // the greeting was not cut: heard whole, then the control's line
    expect(h.heard()).toEqual([GREETING, 'A supervisor has joined the call.']);
    expect(h.transport.clears).toEqual([]);
    await h.caller.say('Thanks, what about my bill?');
    await h.until('the answer', () => h.heard().length === 3, 10_000);
    if (kind === 'pipeline') {
      expect(h.llm.asked(0)).toEqual([
        ['assistant', GREETING],
        ['assistant', 'A supervisor has joined the call.'],
        ['user', 'Thanks, what about my bill?'],
      ]);
    }
    h.caller.hangUp();
    const report = await h.untilEnded();
    expect(report.messages.slice(0, 3).map((m) => [m.role, m.content, m.source, m.node_id])).toEqual([
      ['assistant', GREETING, undefined, 'greeting'],
      ['assistant', 'A supervisor has joined the call.', 'control', 'greeting'],
      ['user', 'Thanks, what about my bill?', undefined, 'greeting'],
    ]);
    expect(transcriptText(report.messages)).toContain('Assistant: A supervisor has joined the call.');
  });

  it('with interrupt: what plays is cut at once and the control\'s line follows; the record keeps what was heard of the cut line', async () => {
    const h = await inConversation(kind, { playing: true });
    const at = h.now();
    h.call.control({ type: 'say', text: 'Sorry to cut in.', interrupt: true });
    await h.until('the control\'s line', () => h.heard().includes('Sorry to cut in.'), 10_000);
    expect(h.heard()).toEqual(['Sorry to cut in.']);
    expect(h.transport.clears.length).toBeGreaterThan(0);
    expect(h.rel(h.transport.clears[0]!)).toBeLessThanOrEqual(at + 1);
    // heard within a second of the control: the line's length, not the greeting's rest
    expect(h.heardAt('Sorry to cut in.') - at).toBeLessThan(h.voice.msOf('Sorry to cut in.') + 500);
    await h.advance(10);
    // of the greeting, at most what was heard (the pipeline: whole sentences; realtime: whole words)
    const greeting = h.record.messages.filter((m) => m.source === undefined);
    expect(greeting.every((m) => GREETING.startsWith(m.content) && m.content.length < GREETING.length)).toBe(true);
    expect(h.record.messages.filter((m) => m.source === 'control')).toEqual([
      expect.objectContaining({ role: 'assistant', content: 'Sorry to cut in.', node_id: 'greeting' }),
    ]);
  });
});

describe.each(kinds)('add-message ($kind call)', ({ kind }) => {
  it('is in the model\'s context from its next turn, never said; in the record (source "control"), not in the transcript', async () => {
    const h = await inConversation(kind);
    expect(h.call.control({ type: 'add-message', role: 'system', content: 'The caller is a premium customer.' })).toEqual({ kind: 'applied' });
    expect(h.call.control({ type: 'add-message', role: 'user', content: 'My account number is 4471.' })).toEqual({ kind: 'applied' });
    await h.advance(3_000);
    expect(h.heard()).toEqual([GREETING]);
    await h.caller.say('What is my balance?');
    await h.until('the answer', () => h.heard().length === 2, 10_000);
    const asked = model(h).requests[0]!.messages.map((m) => [m.role, m.content]);
    expect(asked).toEqual(expect.arrayContaining([
      ['system', 'The caller is a premium customer.'],
      ['user', 'My account number is 4471.'],
    ]));
    // after what came before, before the caller's turn
    const index = (content: string) => asked.findIndex(([, c]) => c === content);
    expect(index('The caller is a premium customer.')).toBeLessThan(index('What is my balance?'));
    expect(index('My account number is 4471.')).toBeLessThan(index('What is my balance?'));
    h.caller.hangUp();
    const report = await h.untilEnded();
    expect(report.messages.map((m) => [m.role, m.content, m.source])).toEqual([
      ['assistant', GREETING, undefined],
      ['system', 'The caller is a premium customer.', 'control'],
      ['user', 'My account number is 4471.', 'control'],
      ['user', 'What is my balance?', undefined],
      ['assistant', expect.any(String), undefined],
    ]);
    expect(transcriptText(report.messages)).not.toContain('4471');
    expect(transcriptText(report.messages)).not.toContain('premium');
  });
});

describe.each(kinds)('goto ($kind call)', ({ kind }) => {
  it('moves the workflow to the node, which says its first line; the model is in that node from then on', async () => {
    const h = await inConversation(kind);
    expect(h.call.control({ type: 'goto', node_id: 'billing' })).toEqual({ kind: 'applied' });
    await h.until('billing\'s first line', () => h.heard().includes('You are through to billing.'), 10_000);
    await h.advance(10);
    expect(h.record).toMatchObject({ current_node: 'billing', nodes_visited: ['greeting', 'billing'] });
    expect(lines(h).at(-1)).toEqual(['assistant', 'You are through to billing.', undefined]);
    expect(h.record.messages.at(-1)!.node_id).toBe('billing');
    await h.caller.say('I was charged twice.');
    await h.until('the answer', () => h.heard().length === 3, 10_000);
    if (kind === 'pipeline') expect(h.llm.requests[0]!.messages[0]!.content).toContain('Help with bills.');
    else expect(h.realtime.session!.options.instructions).toContain('Help with bills.');
  });

  it('an unknown node is refused with the nodes there are, and nothing moves', async () => {
    const h = await inConversation(kind);
    expect(h.call.control({ type: 'goto', node_id: 'nowhere' })).toEqual({
      kind: 'invalid',
      details: ['node_id: the workflow has no node "nowhere" (it has: greeting, billing, bye)'],
    });
    await h.advance(1_000);
    expect(h.record.current_node).toBe('greeting');
    expect(h.heard()).toEqual([GREETING]);
  });

  it('into an end node: its line, then the call ends assistant-ended-call', async () => {
    const h = await inConversation(kind);
    h.call.control({ type: 'goto', node_id: 'bye' });
    const report = await h.untilEnded();
    expect(h.heard()).toEqual([GREETING, 'Goodbye.']);
    expect(report.ended_reason).toBe('assistant-ended-call');
  });
});

describe.each(kinds)('transfer ($kind call)', ({ kind }) => {
  it('cold: the call moves through the carrier\'s transfer (forwarding, then call-transferred)', async () => {
    const h = await inConversation(kind);
    expect(h.call.control({ type: 'transfer', destination: '+14155550199' })).toEqual({ kind: 'applied' });
    const report = await h.untilEnded();
    expect(h.transport.transfers).toEqual([{ destination: '+14155550199', at: expect.any(Number) }]);
    expect(h.transport.hangUps).toEqual([]);
    expect(report.ended_reason).toBe('call-transferred');
    expect(h.notifier.statuses.map((s) => s.status)).toEqual(['forwarding', 'ended']);
    expect(h.notifier.statuses[0]!.extra).toEqual({ destination: '+14155550199' });
  });

  it('a transfer the carrier refuses ends the call as a transfer node\'s would (hung up, its error)', async () => {
    const h = callHarness({ kind, definition: flow, transport: { transfer: { error: Object.assign(new Error('No permission'), { provider: 'twilio' }) } } });
    await h.start();
    await h.until('the greeting', () => h.heard().includes(GREETING));
    h.call.control({ type: 'transfer', destination: '+14155550199', mode: 'cold' });
    const report = await h.untilEnded();
    expect(report.ended_reason).toBe('pipeline-error-twilio');
    expect(report.errors).toEqual([expect.objectContaining({ code: 'TRANSFER_FAILED' })]);
    expect(h.transport.hangUps).toHaveLength(1);
  });
});

const HOLD = 'Please hold while I find a specialist.';
const SUMMARY = 'The caller wants help with a bill.';
const warmControl = { type: 'transfer', destination: '+14155550199', mode: 'warm', hold_message: HOLD, ring_timeout_seconds: 10 } as const;

/** A call in the greeting node (greeting heard, or just begun: `playing`), its operator's phone as given, the summary scripted. */
async function warmReady(kind: 'pipeline' | 'realtime', operator: OperatorPhone, playing = false) {
  const h = callHarness({ kind, definition: flow, transport: { operator } });
  // the summary: the assistant's text model (a realtime assistant's: its vendor's, here the scripted one)
  h.llm.reply({ text: SUMMARY });
  await h.start();
  if (playing) await h.until('the greeting playing', () => h.transport.frames.length > 5);
  else await h.until('the greeting', () => h.heard().includes(GREETING));
  return h;
}

describe.each(kinds)('a warm transfer by control ($kind call), as a warm transfer node\'s', ({ kind }) => {
  it('completed: what plays is cut, the caller holds, the operator hears the summary, the legs are joined; call-transferred', async () => {
    const h = await warmReady(kind, { answer: 'yes', afterMs: 2_000 }, true);
    expect(h.call.control({ ...warmControl, operator_message: 'From the control desk: {{summary}}' })).toMatchObject({ kind: 'applied' });
    await h.until('the join', () => h.transport.joined !== null, 30_000);
    const l = h.transport.operatorDials[0]!.leg!;
    // the greeting was cut for the hold line, heard whole before the join
    expect(h.heard()).toEqual([HOLD]);
    expect(h.transport.clears.length).toBeGreaterThan(0);
    expect(h.rel(l.joinedAt!)).toBeGreaterThanOrEqual(h.heardAt(HOLD));
    expect(h.transport.operatorDials).toEqual([
      expect.objectContaining({ destination: '+14155550199', ringTimeoutMs: 10_000, callerId: '+15550100100', canceledAt: null }),
    ]);
    const told = new Set(l.heard.map(({ frame }) => h.voice.decode(frame)?.text).filter((t) => t !== undefined));
    expect([...told]).toEqual([`From the control desk: ${SUMMARY}`]);
    expect(h.notifier.statuses.map((s) => s.status)).toEqual(['forwarding']);
    expect(h.record).toMatchObject({
      status: 'forwarding',
      current_node: 'greeting',
      transfer: { mode: 'warm', destination: '+14155550199', result: 'completed', summary: SUMMARY, joined_at: expect.any(String) },
    });
    // joined: the call says nothing more, the model is not asked
    await h.caller.say('Hello, is this a specialist?');
    await h.advance(3_000);
    expect(h.transport.sentWhileJoined).toBe(0);
    l.hangUpByOperator();
    const report = await h.untilEnded(10_000);
    expect(report).toMatchObject({ ended_reason: 'call-transferred', nodes_visited: ['greeting'], errors: [], transfer: { result: 'completed' } });
    expect(report.messages.filter((m) => m.source === 'control').map((m) => [m.role, m.content])).toEqual([['assistant', HOLD]]);
    if (kind === 'pipeline') expect(h.llm.requests).toHaveLength(1); // the summary, no conversation turn
  });

  it.each([
    ['busy', { answer: 'busy', afterMs: 2_000 } as OperatorPhone, 'busy'],
    ['never answered', { answer: 'never' } as OperatorPhone, 'no-answer'],
  ])('%s: the caller is told the fixed line and the conversation goes on in its node', async (_what, operator, result) => {
    const h = await warmReady(kind, operator);
    h.call.control(warmControl);
    // while the operator is dialled the call does not move
    await h.until('the hold line', () => h.heard().includes(HOLD), 10_000);
    expect(h.call.control({ type: 'goto', node_id: 'billing' })).toEqual({
      kind: 'not-live',
      message: 'a warm transfer is under way; the call moves once it has come out',
    });
    await h.until('the failure line', () => h.heard().includes(TRANSFER_FAILED_LINE), 20_000);
    if (result === 'no-answer') {
      const dial = h.transport.operatorDials[0]!;
      expect(dial.canceledAt! - dial.at).toBe(10_000);
    }
    expect(h.heard()).toEqual([GREETING, HOLD, TRANSFER_FAILED_LINE]);
    await h.advance(100);
    expect(h.record).toMatchObject({ status: 'in-progress', current_node: 'greeting', nodes_visited: ['greeting'], errors: [] });
    expect(h.record.transfer).toEqual({ mode: 'warm', destination: '+14155550199', result, summary: null, operator_answered_at: null, joined_at: null });
    expect(h.notifier.statuses.map((s) => s.status)).toEqual(['forwarding', 'in-progress']);
    // the model has its turns again, and the call may move again
    model(h).reply({ text: 'I can help you with that myself.' });
    await h.caller.say('Then can you help me?');
    await h.until('the model\'s answer', () => h.heard().includes('I can help you with that myself.'), 10_000);
    expect(h.call.control({ type: 'goto', node_id: 'bye' })).toMatchObject({ kind: 'applied' });
    const report = await h.untilEnded();
    expect(report).toMatchObject({ ended_reason: 'assistant-ended-call', transfer: { result } });
    expect(report.messages.filter((m) => m.source === 'control').map((m) => m.content)).toEqual([HOLD, TRANSFER_FAILED_LINE]);
  });

  it('ended by control while the operator rings: the dial is given up, the message said, api-ended-call', async () => {
    const h = await warmReady(kind, { answer: 'never' });
    h.call.control(warmControl);
    await h.until('the hold line', () => h.heard().includes(HOLD), 10_000);
    expect(h.call.control({ type: 'end', message: 'Sorry, we have to end the call.' })).toEqual({ kind: 'applied' });
    expect(h.transport.operatorDials[0]!.canceledAt).not.toBeNull();
    const report = await h.untilEnded();
    expect(report.ended_reason).toBe('api-ended-call');
    expect(h.heard().at(-1)).toBe('Sorry, we have to end the call.');
    expect(h.transport.joined).toBeNull();
  });

  it('fields a warm node would refuse are refused with its messages, and nothing is done', async () => {
    const h = await warmReady(kind, { answer: 'yes' });
    expect(h.call.control({ type: 'transfer', destination: '+14155550199', mode: 'warm', ring_timeout_seconds: 3 })).toEqual({
      kind: 'invalid',
      details: ['ring_timeout_seconds: must be at least 5'],
    });
    expect(h.call.control({ type: 'transfer', destination: '+14155550199', hold_message: HOLD })).toEqual({
      kind: 'invalid',
      details: ['hold_message: only allowed on a warm transfer ("mode": "warm")'],
    });
    await h.advance(1_000);
    expect(h.transport.operatorDials).toEqual([]);
    expect(h.transport.transfers).toEqual([]);
    expect(h.call.isEnded()).toBe(false);
  });
});

describe.each(kinds)('end ($kind call)', ({ kind }) => {
  it('with a message: what plays is cut, the message is heard whole, then the call hangs up api-ended-call', async () => {
    const h = await inConversation(kind, { playing: true });
    const at = h.now();
    expect(h.call.control({ type: 'end', message: 'We have to end the call now, goodbye.' })).toEqual({ kind: 'applied' });
    // the caller speaking over it neither cuts it nor starts a model turn
    await h.caller.say('Wait a moment!');
    const report = await h.untilEnded();
    expect(h.heard()).toEqual(['We have to end the call now, goodbye.']);
    expect(h.rel(h.transport.hangUps[0]!)).toBeGreaterThanOrEqual(h.heardAt('We have to end the call now, goodbye.'));
    expect(h.heardAt('We have to end the call now, goodbye.') - at).toBeLessThan(h.voice.msOf('We have to end the call now, goodbye.') + 500);
    expect(model(h).requests).toEqual([]);
    expect(report.ended_reason).toBe('api-ended-call');
    expect(report.messages.find((m) => m.source === 'control')).toMatchObject({ role: 'assistant', content: 'We have to end the call now, goodbye.' });
    expect(h.notifier.statuses.at(-1)).toMatchObject({ status: 'ended', extra: { ended_reason: 'api-ended-call' } });
  });

  it('without one: the call hangs up at once', async () => {
    const h = await inConversation(kind);
    const at = h.now();
    h.call.control({ type: 'end' });
    const report = await h.untilEnded();
    expect(report.ended_reason).toBe('api-ended-call');
    expect(h.rel(h.transport.hangUps[0]!) - at).toBeLessThan(5);
  });
});

describe.each(kinds)('when a call cannot take a control ($kind call)', ({ kind }) => {
  it('while its closing line plays: 409 for what would go on talking; end ends it at once', async () => {
    const h = await inConversation(kind);
    h.call.control({ type: 'goto', node_id: 'bye' });
    expect(h.call.control({ type: 'say', text: 'One more thing.' })).toEqual({ kind: 'not-live', message: 'the call is ending' });
    expect(h.call.control({ type: 'add-message', role: 'system', content: 'x' })).toEqual({ kind: 'not-live', message: 'the call is ending' });
    expect(h.call.control({ type: 'goto', node_id: 'billing' })).toEqual({ kind: 'not-live', message: 'the call is ending' });
    expect(h.call.control({ type: 'end' })).toEqual({ kind: 'applied' });
    const report = await h.untilEnded();
    expect(report.ended_reason).toBe('api-ended-call');
    expect(h.heard()).not.toContain('One more thing.');
  });

  it('while the opening lines play (the recording consent): 409 until the conversation has begun', async () => {
    const h = callHarness({ kind, definition: flow, assistant: { recording_consent: { enabled: true, message: 'This call may be recorded for quality purposes.' } } });
    await h.start();
    await h.until('the consent playing', () => h.transport.frames.length > 3);
    expect(h.call.control({ type: 'say', text: 'Hi.' })).toMatchObject({ kind: 'not-live', message: expect.stringContaining('not begun') });
    await h.until('the greeting', () => h.heard().includes(GREETING), 10_000);
    expect(h.call.control({ type: 'say', text: 'Hi.' })).toEqual({ kind: 'applied' });
  });

  it('a tool node waiting for its result: goto leaves it; the result that comes later changes nothing', async () => {
    const h = callHarness({
      kind,
      definition: {
        version: 1,
        entry_node: 'lookup',
        nodes: [
          { id: 'lookup', type: 'tool', tool_name: 'find_order', url: 'https://tools.example.com/orders', first_line: 'Let me look that up.' },
          { id: 'found', type: 'conversation', first_line: 'Found it.', instructions: 'Tell the caller.' },
          {
            id: 'billing',
            type: 'conversation',
            global: true,
            global_description: 'the caller asks about a bill',
            first_line: 'You are through to billing.',
            instructions: 'Help with bills.',
          },
          { id: 'bye', type: 'end', first_line: 'Goodbye.' },
        ],
        edges: [
          { from: 'lookup', to: 'found', description: 'found' },
          { from: 'billing', to: 'bye', description: 'the caller is done' },
        ],
      },
    });
    h.notifier.answer = () => ({ result: { status: 'shipped' }, delayMs: 3_000 });
    await h.start();
    await h.until('the tool line', () => h.heard().includes('Let me look that up.'));
    h.call.control({ type: 'goto', node_id: 'billing' });
    await h.advance(5_000);
    expect(h.heard()).toEqual(['Let me look that up.', 'You are through to billing.']);
    expect(h.record).toMatchObject({ current_node: 'billing', nodes_visited: ['lookup', 'billing'] });
  });
});
