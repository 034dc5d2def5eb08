/**
 * Warm transfers on the controller (DECISIONS 16), on the memory transport and the fake clock:
 * the caller's lines and `forwarding`, the model's summary, the operator's leg hearing the message
 * in the assistant's voice, acceptance by key 1, the join (the call sends nothing more, the legs
 * hear each other until either hangs up), and every other result: busy, failed, never answered
 * (within the ring timeout), declined by key, silence or hang-up; the edge, or the end
 * `transfer-failed`; `transfer` on the record and in the report. A warm transfer a live control
 * started runs this same path: test/fast-calls/control.test.ts (and its move to another process, here).
 */
import { describe, expect, it } from 'vitest';
import { FALLBACK_SUMMARY } from '../../src/calls/warm-transfer.js';
import { TRANSFER_FAILED_LINE } from '../../engine/machine.js';
import { ProviderError } from '../../src/providers/types.js';
import { callHarness, useFastCalls, type CallHarness } from '../helpers/call-harness.js';
import type { MemoryOperatorLeg, OperatorPhone } from '../helpers/memory-operator.js';
import type { MemoryTransportOptions } from '../helpers/memory-transport.js';

useFastCalls();

const SUMMARY = 'Ada wants to move her appointment.';
const FALLBACK = 'Nobody could take your call right now.';

function flow(desk: Record<string, unknown> = {}, withEdge = true) {
  return {
    version: 1,
    entry_node: 'greeting',
    nodes: [
      { id: 'greeting', type: 'conversation', first_line: 'Hello, this is Acme support.', instructions: 'Help the caller.' },
      {
        id: 'desk',
        type: 'transfer',
        mode: 'warm',
        destination: '+14155550123',
        first_line: 'Let me get someone for you.',
        hold_message: 'Please hold while I connect you.',
        ring_timeout_seconds: 10,
        ...desk,
      },
      { id: 'back', type: 'conversation', first_line: 'Is there anything else?', instructions: 'Help the caller.' },
      { id: 'bye', type: 'end', first_line: 'Goodbye.' },
    ],
    edges: [
      { from: 'greeting', to: 'desk', description: 'the caller wants to speak to a person at the front desk' },
      { from: 'greeting', to: 'back', description: 'the caller has another question' },
      { from: 'back', to: 'bye', description: 'the caller is done' },
      ...(withEdge ? [{ from: 'desk', to: 'back', description: 'nobody took the call', message: FALLBACK }] : []),
    ],
  };
}

const model = (h: CallHarness) => (h.assistant.realtime ? h.realtime : h.llm);

interface Setup {
  kind?: 'pipeline' | 'realtime';
  desk?: Record<string, unknown>;
  withEdge?: boolean;
  operator?: OperatorPhone;
  transport?: MemoryTransportOptions;
  assistant?: Record<string, unknown>;
}

/** A call that asks for a person: the model moves to the warm transfer node, the summary is scripted. */
async function askForAPerson(o: Setup = {}): Promise<CallHarness> {
  const h = callHarness({
    kind: o.kind ?? 'pipeline',
    definition: flow(o.desk, o.withEdge ?? true),
    transport: { ...o.transport, ...(o.operator ? { operator: o.operator } : {}) },
    ...(o.assistant ? { assistant: o.assistant } : {}),
  });
  model(h).reply({ calls: [{ name: 'go_to_desk' }] });
  // the summary: the assistant's text model (a realtime assistant's: its vendor's, here the scripted one)
  h.llm.reply({ text: SUMMARY });
  await h.start();
  await h.until('the greeting', () => h.heard().length === 1);
  await h.caller.say('I would like to speak to a person at the front desk.');
  return h;
}

const leg = (h: CallHarness): MemoryOperatorLeg => {
  const l = h.transport.operatorDials[0]?.leg;
  if (!l) throw new Error('the operator never answered');
  return l;
};

/** The lines the operator heard whole, in order (the assistant's voice, decoded). */
function operatorHeard(h: CallHarness, l: MemoryOperatorLeg): string[] {
  const lines = new Map<number, { text: string; count: number; seen: Set<number> }>();
  for (const { frame } of l.heard) {
    const v = h.voice.decode(frame);
    if (!v) continue;
    const line = lines.get(v.line) ?? { text: v.text, count: v.count, seen: new Set<number>() };
    line.seen.add(v.index);
    lines.set(v.line, line);
  }
  return [...lines.values()].filter((x) => x.seen.size === x.count).map((x) => x.text);
}

describe.each([{ kind: 'pipeline' as const }, { kind: 'realtime' as const }])('a warm transfer that completes ($kind call)', ({ kind }) => {
  it('the caller holds, the operator hears the summary in the assistant\'s voice, the legs are joined until the operator hangs up', async () => {
    const h = await askForAPerson({ kind });
    await h.until('the join', () => h.transport.joined !== null, 30_000);
    const l = leg(h);
    // the caller heard the node's lines; forwarding was sent
    expect(h.heard()).toEqual(['Hello, this is Acme support.', 'Let me get someone for you.', 'Please hold while I connect you.']);
    expect(h.notifier.statuses.map((s) => s.status)).toEqual(['forwarding']);
    expect(h.notifier.statuses[0]!.extra).toEqual({ destination: '+14155550123' });
    // the operator was dialled from the call's number, and heard the message with the model's summary
    expect(h.transport.operatorDials).toEqual([
      expect.objectContaining({ destination: '+14155550123', ringTimeoutMs: 10_000, callerId: '+15550100100', canceledAt: null }),
    ]);
    expect(operatorHeard(h, l)).toEqual([`Incoming transfer: ${SUMMARY}`]);
    // the join came once the caller had heard the hold message whole, and after the operator's message
    expect(h.rel(l.joinedAt!)).toBeGreaterThanOrEqual(h.heardAt('Please hold while I connect you.'));
    expect(l.joinedAt!).toBeGreaterThanOrEqual(l.heard.at(-1)!.at + 20);
    expect(h.record).toMatchObject({
      status: 'forwarding',
      transfer: { mode: 'warm', destination: '+14155550123', result: 'completed', summary: SUMMARY, operator_answered_at: expect.any(String), joined_at: expect.any(String) },
    });
    // joined: the two hear each other, the call says nothing more, and it is not over
    await h.caller.say('Hi, is this the front desk?');
    expect(l.fromCaller.length).toBeGreaterThan(0);
    await h.advance(5_000);
    expect(h.transport.sentWhileJoined).toBe(0);
    expect(h.notifier.reports).toHaveLength(0);
    expect(h.transport.closedAt).toBeNull();
    // the operator hangs up: the caller's leg is hung up, the call ends call-transferred
    l.hangUpByOperator();
    const report = await h.untilEnded(10_000);
    expect(h.transport.hangUps).toHaveLength(1);
    expect(report).toMatchObject({ ended_reason: 'call-transferred', nodes_visited: ['greeting', 'desk'], errors: [] });
    expect(report.transfer).toEqual({
      mode: 'warm',
      destination: '+14155550123',
      result: 'completed',
      summary: SUMMARY,
      operator_answered_at: expect.any(String),
      joined_at: expect.any(String),
    });
    expect(Date.parse(report.transfer!.joined_at!)).toBeGreaterThan(Date.parse(report.transfer!.operator_answered_at!));
    expect(h.notifier.statuses.map((s) => s.status)).toEqual(['forwarding', 'ended']);
    // what the caller said to the operator is not the conversation's
    expect(report.messages.map((m) => m.content)).not.toContain('Hi, is this the front desk?');
  });
});

describe('a warm transfer (pipeline call)', () => {
  it('the summary is asked of the model with the conversation so far', async () => {
    const h = await askForAPerson();
    await h.until('the join', () => h.transport.joined !== null, 30_000);
    const asked = h.llm.requests.at(-1)!;
    expect(asked.messages[0]).toMatchObject({ role: 'system', content: expect.stringContaining('Summarize the conversation so far') });
    expect(asked.messages[1]!.content).toContain('Caller: I would like to speak to a person at the front desk.');
    expect(asked.messages[1]!.content).toContain('Assistant: Hello, this is Acme support.');
    expect(asked.functions).toEqual([]);
    h.caller.hangUp();
    const report = await h.untilEnded(10_000);
    expect(report.ended_reason).toBe('call-transferred');
    // the caller hung up: the operator was hung up by the bridge, the caller's leg not again
    expect(leg(h).hungUpBy).toBe('call');
    expect(h.transport.hangUps).toEqual([]);
  });

  it('ended from outside while joined (shutdown, the API): both legs are hung up, the call ends call-transferred', async () => {
    const h = await askForAPerson();
    await h.until('the join', () => h.transport.joined !== null, 30_000);
    const l = leg(h);
    void h.call.terminate('api-ended-call');
    const report = await h.untilEnded(10_000);
    expect(report.ended_reason).toBe('call-transferred');
    expect(l.hungUpBy).toBe('call');
    expect(h.transport.hangUps).toHaveLength(1);
  });

  it('with require_acceptance: "Press 1 to take the call", and 1 joins', async () => {
    const h = await askForAPerson({ desk: { require_acceptance: true, operator_message: 'Call for the desk: {{ summary }}' } });
    await h.until('the operator\'s message', () => h.transport.operatorDials[0]?.leg && operatorHeard(h, leg(h)).length > 0, 30_000);
    expect(operatorHeard(h, leg(h))).toEqual([`Call for the desk: ${SUMMARY} Press 1 to take the call.`]);
    await h.advance(3_000);
    expect(h.transport.joined).toBeNull();
    leg(h).press('1');
    await h.until('the join', () => h.transport.joined !== null, 5_000);
    expect(h.record.transfer?.result).toBe('completed');
    leg(h).hangUpByOperator();
    expect((await h.untilEnded()).ended_reason).toBe('call-transferred');
  });

  it.each([
    ['another key', (l: MemoryOperatorLeg) => l.press('2')],
    ['a hang-up', (l: MemoryOperatorLeg) => l.hangUpByOperator()],
  ])('with require_acceptance, %s declines: the caller is told the edge\'s message and the call goes on there', async (_what, act) => {
    const h = await askForAPerson({ desk: { require_acceptance: true } });
    await h.until('the operator\'s message', () => h.transport.operatorDials[0]?.leg && operatorHeard(h, leg(h)).length > 0, 30_000);
    act(leg(h));
    await h.until('the way back', () => h.heard().includes('Is there anything else?'), 10_000);
    expect(h.heard().slice(-2)).toEqual([FALLBACK, 'Is there anything else?']);
    expect(h.transport.joined).toBeNull();
    expect(leg(h).hungUpAt).not.toBeNull();
    expect(h.record).toMatchObject({ status: 'in-progress', current_node: 'back', transfer: { mode: 'warm', result: 'declined', joined_at: null } });
    expect(h.notifier.statuses.map((s) => s.status)).toEqual(['forwarding', 'in-progress']);
    expect(h.record.errors).toEqual([]);
  });

  it('with require_acceptance, 10 s of silence after the message declines', async () => {
    const h = await askForAPerson({ desk: { require_acceptance: true } });
    await h.until('the operator\'s message', () => h.transport.operatorDials[0]?.leg && operatorHeard(h, leg(h)).length > 0, 30_000);
    const messageEnd = leg(h).heard.at(-1)!.at + 20;
    await h.until('the decline', () => leg(h).hungUpAt !== null, 15_000);
    expect(leg(h).hungUpAt! - messageEnd).toBeGreaterThanOrEqual(10_000);
    expect(leg(h).hungUpAt! - messageEnd).toBeLessThan(10_100);
    expect(leg(h).hungUpBy).toBe('call');
    await h.until('the way back', () => h.heard().includes('Is there anything else?'), 10_000);
    expect(h.record.transfer?.result).toBe('declined');
  });

  it('without require_acceptance, keys do nothing, and an operator who hangs up during the message declines', async () => {
    const h = await askForAPerson({ desk: { operator_message: 'A long message for the operator: {{summary}} Please be kind to them.' } });
    await h.until('the message begins', () => (h.transport.operatorDials[0]?.leg?.heard.length ?? 0) > 10, 30_000);
    leg(h).press('9');
    await h.advance(100);
    expect(leg(h).hungUpAt).toBeNull();
    leg(h).hangUpByOperator();
    await h.until('the way back', () => h.heard().includes('Is there anything else?'), 10_000);
    expect(h.record.transfer).toMatchObject({ result: 'declined', operator_answered_at: expect.any(String), joined_at: null });
  });

  it('busy: the caller is told, the call takes the edge', async () => {
    const h = await askForAPerson({ operator: { answer: 'busy', afterMs: 2_000 } });
    await h.until('the way back', () => h.heard().includes('Is there anything else?'), 20_000);
    expect(h.heard()).toEqual([
      'Hello, this is Acme support.',
      'Let me get someone for you.',
      'Please hold while I connect you.',
      FALLBACK,
      'Is there anything else?',
    ]);
    expect(h.record).toMatchObject({ status: 'in-progress', nodes_visited: ['greeting', 'desk', 'back'], errors: [] });
    expect(h.record.transfer).toEqual({ mode: 'warm', destination: '+14155550123', result: 'busy', summary: null, operator_answered_at: null, joined_at: null });
    // the conversation goes on there, and ends as it would
    model(h).reply({ calls: [{ name: 'go_to_bye' }] });
    await h.caller.say('No, I am done, thanks.');
    const report = await h.untilEnded();
    expect(report).toMatchObject({ ended_reason: 'assistant-ended-call', transfer: { result: 'busy' } });
  });

  it('failed: the carrier failed the dial, said in errors; the edge', async () => {
    const h = await askForAPerson({ operator: { answer: 'failed' } });
    await h.until('the way back', () => h.heard().includes('Is there anything else?'), 20_000);
    expect(h.record.transfer?.result).toBe('failed');
    expect(h.record.errors).toEqual([{ code: 'TRANSFER_FAILED', message: 'warm transfer: the carrier failed the dial (503)', provider: 'memory' }]);
  });

  it('an operator who never answers costs the caller the ring timeout and no more: no-answer, the dial given up', async () => {
    const h = await askForAPerson({ operator: { answer: 'never' } });
    await h.until('the failure line', () => h.heard().includes(FALLBACK), 20_000);
    const dial = h.transport.operatorDials[0]!;
    expect(dial.canceledAt! - dial.at).toBe(10_000);
    // the caller hears about it at once: the line's first frame left within a second of the ring timeout
    const first = h.transport.frames.find((f) => h.voice.decode(f.frame)?.text === FALLBACK)!;
    expect(first.sentAt - dial.at).toBeLessThanOrEqual(11_000);
    expect(h.record.transfer).toMatchObject({ result: 'no-answer', operator_answered_at: null });
    expect(h.record.errors).toEqual([]);
  });

  it('with no edge: the fixed line, end_call_message, and the end transfer-failed', async () => {
    const h = await askForAPerson({ withEdge: false, operator: { answer: 'busy' }, assistant: { speech_config: { end_call_message: 'Thank you for calling.' } } });
    const report = await h.untilEnded(30_000);
    expect(h.heard().slice(-2)).toEqual([TRANSFER_FAILED_LINE, 'Thank you for calling.']);
    expect(report).toMatchObject({ ended_reason: 'transfer-failed', nodes_visited: ['greeting', 'desk'], transfer: { mode: 'warm', result: 'busy' } });
    expect(h.transport.hangUps).toHaveLength(1);
    expect(h.notifier.statuses.map((s) => s.status)).toEqual(['forwarding', 'in-progress', 'ended']);
  });

  it('the caller hanging up while the operator rings: the dial is given up, the call ends customer-ended-call', async () => {
    const h = await askForAPerson({ operator: { answer: 'never' } });
    await h.until('the hold message', () => h.heard().includes('Please hold while I connect you.'), 20_000);
    await h.advance(1_000);
    h.caller.hangUp();
    const report = await h.untilEnded();
    expect(report.ended_reason).toBe('customer-ended-call');
    expect(h.transport.operatorDials[0]!.canceledAt).not.toBeNull();
    expect(report.transfer).toMatchObject({ mode: 'warm', result: 'failed', joined_at: null });
  });

  it('the caller hanging up while the operator hears the message: the operator is hung up', async () => {
    const h = await askForAPerson({ desk: { require_acceptance: true } });
    await h.until('the message begins', () => (h.transport.operatorDials[0]?.leg?.heard.length ?? 0) > 5, 30_000);
    h.caller.hangUp();
    const report = await h.untilEnded();
    expect(report.ended_reason).toBe('customer-ended-call');
    expect(leg(h).hungUpBy).toBe('call');
    expect(h.transport.joined).toBeNull();
  });

  it('a summary the model cannot write: the operator hears the fixed one, said in errors; the transfer goes on', async () => {
    const h = callHarness({ definition: flow() });
    h.llm.reply({ calls: [{ name: 'go_to_desk' }] }, { error: new ProviderError('PROVIDER_HTTP_ERROR', 'sandbox', 'HTTP 500') });
    await h.start();
    await h.until('the greeting', () => h.heard().length === 1);
    await h.caller.say('I would like to speak to a person at the front desk.');
    await h.until('the join', () => h.transport.joined !== null, 30_000);
    expect(operatorHeard(h, leg(h))).toEqual([`Incoming transfer: ${FALLBACK_SUMMARY}`]);
    expect(h.record.errors).toEqual([{ code: 'TRANSFER_SUMMARY_FAILED', message: expect.stringContaining('HTTP 500') }]);
    expect(h.record.transfer).toMatchObject({ result: 'completed', summary: FALLBACK_SUMMARY });
    leg(h).hangUpByOperator();
    expect((await h.untilEnded()).ended_reason).toBe('call-transferred');
  });

  it('a carrier that cannot dial an operator: failed, saying why', async () => {
    const h = callHarness({ definition: flow() });
    (h.transport as { dialOperator?: unknown }).dialOperator = undefined;
    h.llm.reply({ calls: [{ name: 'go_to_desk' }] }, { text: SUMMARY });
    await h.start();
    await h.until('the greeting', () => h.heard().length === 1);
    await h.caller.say('I would like to speak to a person at the front desk.');
    await h.until('the way back', () => h.heard().includes('Is there anything else?'), 20_000);
    expect(h.record.transfer?.result).toBe('failed');
    expect(h.record.errors).toEqual([{ code: 'TRANSFER_FAILED', message: 'warm transfer: the memory carrier cannot dial an operator', provider: 'memory' }]);
  });

  it('a cold transfer is on the record too', async () => {
    const h = callHarness({
      definition: {
        ...flow(),
        nodes: flow().nodes.map((n) => (n.id === 'desk' ? { id: 'desk', type: 'transfer', destination: '+14155550123', first_line: 'Transferring you.' } : n)),
        edges: flow().edges.filter((e) => e.from !== 'desk'),
      },
    });
    h.llm.reply({ calls: [{ name: 'go_to_desk' }] });
    await h.start();
    await h.until('the greeting', () => h.heard().length === 1);
    await h.caller.say('I would like to speak to a person at the front desk.');
    const report = await h.untilEnded();
    expect(report.ended_reason).toBe('call-transferred');
    expect(report.transfer).toEqual({ mode: 'cold', destination: '+14155550123', result: 'completed', summary: null, operator_answered_at: null, joined_at: null });
    expect(h.transport.operatorDials).toEqual([]);
  });

  it('a call resumed in another process while its operator was dialled: the transfer failed, the call takes the edge', async () => {
    const first = await askForAPerson({ operator: { answer: 'never' } });
    await first.until('the hold message', () => first.heard().includes('Please hold while I connect you.'), 20_000);
    await first.advance(100);
    const saved = (await first.store.get(first.record.id))!.engine!;
    expect(saved).toMatchObject({ current_node: 'desk' });
    await first.dispose();

    const second = callHarness({ definition: flow() });
    await second.store.create(second.record);
    second.call.start(saved).catch((err: unknown) => second.call.fail(err, 'start'));
    await second.until('the way back', () => second.heard().includes('Is there anything else?'), 10_000);
    expect(second.heard()).toEqual([FALLBACK, 'Is there anything else?']);
    expect(second.transport.operatorDials).toEqual([]);
    expect(second.record.transfer).toMatchObject({ mode: 'warm', destination: '+14155550123', result: 'failed' });
    expect(second.record.errors).toEqual([{ code: 'TRANSFER_FAILED', message: 'warm transfer: the call moved to another process while the operator was dialled' }]);
  });

  it('one a live control started, resumed in another process while its operator was dialled: failed, the fixed line, the call goes on in its node', async () => {
    const first = callHarness({ definition: flow(), transport: { operator: { answer: 'never' } } });
    first.llm.reply({ text: SUMMARY });
    await first.start();
    await first.until('the greeting', () => first.heard().length === 1);
    first.call.control({ type: 'transfer', destination: '+14155550177', mode: 'warm', hold_message: 'One moment, please.' });
    await first.until('the hold message', () => first.heard().includes('One moment, please.'), 20_000);
    await first.advance(100);
    const saved = (await first.store.get(first.record.id))!.engine!;
    expect(saved).toMatchObject({ current_node: 'greeting' });
    await first.dispose();

    const second = callHarness({ definition: flow() });
    await second.store.create(second.record);
    second.call.start(saved).catch((err: unknown) => second.call.fail(err, 'start'));
    await second.until('the failure line', () => second.heard().includes(TRANSFER_FAILED_LINE), 10_000);
    expect(second.heard()).toEqual([TRANSFER_FAILED_LINE]);
    expect(second.transport.operatorDials).toEqual([]);
    expect(second.record.transfer).toMatchObject({ mode: 'warm', destination: '+14155550177', result: 'failed' });
    expect(second.record).toMatchObject({ status: 'in-progress', current_node: 'greeting' });
    expect(second.call.control({ type: 'goto', node_id: 'back' })).toMatchObject({ kind: 'applied' });
  });
});
