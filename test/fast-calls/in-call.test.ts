/**
 * What happens during a call, on both kinds of call, on the memory transport and fake timers:
 * silence checks and `silence_timeout_seconds`, `max_duration_seconds`, key presses as caller
 * input, pronunciations, the recording consent, and transfers (taken, or refused by the carrier).
 * The call's own timers run on the fake clock, so a 10 s limit takes milliseconds.
 */
import { describe, expect, it } from 'vitest';
import { transcriptText } from '../../src/calls/transcript.js';
import { callHarness, useFastCalls, type CallHarness } from '../helpers/call-harness.js';

useFastCalls();

const kinds = [{ kind: 'pipeline' as const }, { kind: 'realtime' as const }];
const model = (h: CallHarness) => (h.assistant.realtime ? h.realtime : h.llm);

/** `speech_config.silence` with up to three reminders: the first after 1 s of silence, the next ones every 3 s. */
const silenceReminders = (maxAttempts: number) => ({
  messages: ['Are you still there?', 'Hello, can you hear me?', 'Is anybody there?'].slice(0, maxAttempts),
  final_message: 'I will hang up now, goodbye.',
  first_check_seconds: 1,
  interval_seconds: 3,
  max_attempts: maxAttempts,
});

/** When the first frame carrying `text` left for the caller (`now()` scale). */
function firstFrameOf(h: CallHarness, text: string, nth = 0): number {
  const lines = new Set<number>();
  for (const f of h.transport.frames) {
    const v = h.voice.decode(f.frame);
    if (v?.text !== text || lines.has(v.line)) continue;
    lines.add(v.line);
    if (lines.size === nth + 1) return h.rel(f.sentAt);
  }
  throw new Error(`"${text}" (#${nth + 1}) was never sent`);
}

/** A gap that the fake clock makes exact, give or take the millisecond a 0 ms timer takes inside a tick. */
const about = (ms: number) => expect.toSatisfy((gap: number) => gap >= ms && gap <= ms + 3, `${ms} ms (+3)`);

describe.each(kinds)('silence ($kind call)', ({ kind }) => {
  it('reminds after first_check_seconds, then every interval_seconds, then says the final message and hangs up', async () => {
    const h = callHarness({ kind, assistant: { first_message: 'Hi.', speech_config: { silence: silenceReminders(2) } } });
    await h.start();
    const report = await h.untilEnded(30_000);
    const said = ['Hi.', 'Are you still there?', 'Hello, can you hear me?', 'I will hang up now, goodbye.'];
    expect(h.heard()).toEqual(said);
    expect(firstFrameOf(h, said[1]!) - h.heardAt(said[0]!)).toEqual(about(1_000));
    expect(firstFrameOf(h, said[2]!) - h.heardAt(said[1]!)).toEqual(about(3_000));
    expect(firstFrameOf(h, said[3]!) - h.heardAt(said[2]!)).toEqual(about(3_000));
    expect(report.ended_reason).toBe('silence-timed-out');
    expect(report.messages.map((m) => m.content)).toEqual(said);
    // the final message was heard before the hang-up
    expect(h.rel(h.transport.hangUps[0]!)).toBeGreaterThanOrEqual(h.heardAt(said[3]!));
    expect(h.notifier.statuses.at(-1)).toMatchObject({ status: 'ended', extra: { ended_reason: 'silence-timed-out' } });
  });

  it('the caller speaking starts the count again: the next reminder is the first, after first_check_seconds', async () => {
    const h = callHarness({ kind, assistant: { first_message: 'Hi.', speech_config: { silence: silenceReminders(3) } } });
    await h.start();
    await h.until('the second reminder', () => h.heard().includes('Hello, can you hear me?'), 10_000);
    await h.caller.say('What are your opening hours?');
    await h.until('the reply', () => h.heard().some((t) => t.startsWith('You said')), 5_000);
    const reply = h.heard().find((t) => t.startsWith('You said'))!;
    await h.until('the first reminder again', () => h.heard().filter((t) => t === 'Are you still there?').length === 2, 5_000);
    // before the caller spoke: first_check_seconds, then interval_seconds
    expect(firstFrameOf(h, 'Are you still there?') - h.heardAt('Hi.')).toEqual(about(1_000));
    expect(firstFrameOf(h, 'Hello, can you hear me?') - h.heardAt('Are you still there?')).toEqual(about(3_000));
    // after the reply: first_check_seconds again, and the first reminder
    expect(firstFrameOf(h, 'Are you still there?', 1) - h.heardAt(reply)).toEqual(about(1_000));
    expect(h.heard()).not.toContain('Is anybody there?');
    const said = [
      ['assistant', 'Hi.'],
      ['assistant', 'Are you still there?'],
      ['assistant', 'Hello, can you hear me?'],
      ['user', 'What are your opening hours?'],
      ['assistant', reply],
      ['assistant', 'Are you still there?'],
    ];
    expect(h.messages()).toEqual(said);
    h.caller.hangUp();
    const report = await h.untilEnded();
    expect(report.ended_reason).toBe('customer-ended-call');
    expect(report.messages.map((m) => [m.role, m.content])).toEqual(said);
  });

  it('silence_timeout_seconds ends the call silence-timed-out when no reminder would', async () => {
    const h = callHarness({
      kind,
      assistant: { first_message: 'Hi.', silence_timeout_seconds: 5, speech_config: { silence: { max_attempts: 0, first_check_seconds: 60 } } },
    });
    await h.start();
    const report = await h.untilEnded(30_000);
    expect(report.ended_reason).toBe('silence-timed-out');
    expect(h.rel(h.transport.hangUps[0]!) - h.heardAt('Hi.')).toEqual(about(5_000));
    expect(h.heard()).toEqual(['Hi.']);
  });
});

describe.each(kinds)('maximum duration ($kind call)', ({ kind }) => {
  it('ends the call exceeded-max-duration once max_duration_seconds have passed, whatever is going on', async () => {
    const h = callHarness({
      kind,
      assistant: {
        first_message: 'Hi, how can I help?',
        max_duration_seconds: 10,
        speech_config: { silence: { first_check_seconds: 60, interval_seconds: 60 } },
      },
    });
    await h.start();
    await h.until('the greeting', () => h.heard().length === 1);
    await h.caller.say('What are your opening hours?');
    await h.until('the reply', () => h.heard().length === 2, 5_000);
    const report = await h.untilEnded(20_000);
    expect(report.ended_reason).toBe('exceeded-max-duration');
    expect(h.rel(h.transport.hangUps[0]!)).toBe(10_000);
    expect(h.transport.closedAt).not.toBeNull();
    // the report's duration_seconds is ended_at - started_at (test/webhooks/envelope.test.ts)
    expect(Date.parse(report.ended_at!) - Date.parse(report.started_at!)).toBe(10_000);
    expect(h.notifier.statuses.at(-1)).toMatchObject({ status: 'ended', extra: { ended_reason: 'exceeded-max-duration' } });
  });
});

describe.each(kinds)('key presses ($kind call)', ({ kind }) => {
  it('are caller input: a way out is taken on a key, and the model answers one', async () => {
    const h = callHarness({
      kind,
      definition: {
        version: 1,
        entry_node: 'menu',
        nodes: [
          { id: 'menu', type: 'conversation', first_line: 'Press one for sales.', instructions: 'A keypad menu.' },
          { id: 'sales', type: 'conversation', first_line: 'Welcome to sales.', instructions: 'Sell.' },
          { id: 'bye', type: 'end', first_line: 'Goodbye.' },
        ],
        edges: [
          { from: 'menu', to: 'sales', description: 'the caller pressed 1' },
          { from: 'sales', to: 'bye', description: 'the caller is finished' },
        ],
      },
    });
    model(h).reply({ calls: [{ name: 'go_to_sales' }] }, { text: 'You pressed two.' });
    await h.start();
    await h.until('the menu', () => h.heard().includes('Press one for sales.'));
    h.caller.press('1');
    await h.until('sales', () => h.heard().includes('Welcome to sales.'), 5_000);
    h.caller.press('2');
    await h.until('the answer', () => h.heard().includes('You pressed two.'), 5_000);
    if (kind === 'pipeline') {
      expect(h.llm.asked(0).at(-1)).toEqual(['user', 'DTMF: 1']);
      expect(h.llm.asked(1).at(-1)).toEqual(['user', 'DTMF: 2']);
    } else {
      expect(h.realtime.requests.map((r) => r.instructions?.match(/The caller pressed \d/)?.[0])).toEqual(['The caller pressed 1', 'The caller pressed 2']);
    }
    await h.advance(10);
    expect(h.record.nodes_visited).toEqual(['menu', 'sales']);
    expect(h.record.messages.map((m) => [m.role, m.content, m.node_id])).toEqual([
      ['assistant', 'Press one for sales.', 'menu'],
      ['user', 'DTMF: 1', 'menu'],
      ['assistant', 'Welcome to sales.', 'sales'],
      ['user', 'DTMF: 2', 'sales'],
      ['assistant', 'You pressed two.', 'sales'],
    ]);
  });
});

describe.each(kinds)('pronunciation and recording consent ($kind call)', ({ kind }) => {
  it('a pronunciation changes what the caller hears, not the record', async () => {
    const h = callHarness({
      kind,
      assistant: { first_message: 'Welcome to Acme Dental.', speech_config: { pronunciation: [{ from: 'Acme', to: 'Ack-Me' }] } },
    });
    await h.start();
    await h.until('the greeting', () => h.heard().length === 1);
    expect(h.heard()).toEqual(['Welcome to Ack-Me Dental.']);
    expect(h.messages()).toEqual([['assistant', 'Welcome to Acme Dental.']]);
    if (kind === 'pipeline') {
      // the model's own words are spoken with it too (a realtime model speaks its replies itself:
      // only the lines it is told to say exactly are rewritten)
      await h.caller.say('Tell me about Acme please.');
      await h.until('the reply', () => h.heard().length === 2, 5_000);
      expect(h.heard()).toEqual(['Welcome to Ack-Me Dental.', 'You said: Tell me about Ack-Me please.']);
      expect(h.heard().join(' ')).not.toContain('Acme');
      expect(h.messages().map(([, content]) => content)).toEqual([
        'Welcome to Acme Dental.',
        'Tell me about Acme please.',
        'You said: Tell me about Acme please.',
      ]);
    }
    h.caller.hangUp();
    const report = await h.untilEnded();
    expect(transcriptText(report.messages)).toContain('Welcome to Acme Dental.');
    expect(transcriptText(report.messages)).not.toContain('Ack-Me');
  });

  it('the recording consent plays first, before the first line, and is recorded outside any node', async () => {
    const h = callHarness({
      kind,
      assistant: { recording_consent: { enabled: true, message: 'This call may be recorded.' } },
      definition: {
        version: 1,
        entry_node: 'greeting',
        nodes: [
          { id: 'greeting', type: 'conversation', first_line: 'Hello, this is Acme Dental.' },
          { id: 'bye', type: 'end' },
        ],
        edges: [{ from: 'greeting', to: 'bye', description: 'the caller says goodbye' }],
      },
    });
    await h.start();
    await h.until('the first line', () => h.heard().includes('Hello, this is Acme Dental.'), 5_000);
    expect(h.heard()).toEqual(['This call may be recorded.', 'Hello, this is Acme Dental.']);
    // the first line is asked for once the consent has been heard
    expect(firstFrameOf(h, 'Hello, this is Acme Dental.')).toBeGreaterThanOrEqual(h.heardAt('This call may be recorded.'));
    expect(h.record.messages.map((m) => [m.content, m.node_id])).toEqual([
      ['This call may be recorded.', null],
      ['Hello, this is Acme Dental.', 'greeting'],
    ]);
  });
});

describe.each(kinds)('a transfer node ($kind call)', ({ kind }) => {
  const transferFlow = {
    version: 1,
    entry_node: 'greeting',
    nodes: [
      { id: 'greeting', type: 'conversation', first_line: 'Hello, this is Acme support.', instructions: 'Help the caller.' },
      { id: 'agent', type: 'transfer', first_line: 'Connecting you to an agent now.', destination: '+14155550123' },
    ],
    edges: [{ from: 'greeting', to: 'agent', description: 'the caller wants to speak to a human agent', message: 'Of course.' }],
  };

  async function askForAnAgent(transport: { delayMs?: number; error?: Error }) {
    const h = callHarness({ kind, definition: transferFlow, transport: { transfer: transport } });
    model(h).reply({ calls: [{ name: 'go_to_agent' }] });
    await h.start();
    await h.until('the greeting', () => h.heard().length === 1);
    await h.caller.say('I want to speak to a human agent please.');
    return h;
  }

  it('says its line, sends forwarding, moves the call through the carrier, and closes the media only once the carrier took it', async () => {
    const h = await askForAnAgent({ delayMs: 1_500 });
    const report = await h.untilEnded(20_000);
    expect(h.heard()).toEqual(['Hello, this is Acme support.', 'Of course.', 'Connecting you to an agent now.']);
    expect(h.transport.transfers).toEqual([{ destination: '+14155550123', at: expect.any(Number) }]);
    expect(h.rel(h.transport.closedAt!) - h.rel(h.transport.transfers[0]!.at)).toBe(1_500);
    expect(h.transport.hangUps).toEqual([]);
    expect(report).toMatchObject({ ended_reason: 'call-transferred', nodes_visited: ['greeting', 'agent'], errors: [] });
    expect(transcriptText(report.messages)).toContain('Connecting you to an agent now.');
    // the call ended once the carrier had taken it, not when the transfer was asked for
    const transferAt = Date.now() - (performance.now() - h.transport.transfers[0]!.at);
    expect(Date.parse(report.ended_at!) - transferAt).toBe(1_500);
    expect(h.notifier.statuses.map((s) => s.status)).toEqual(['forwarding', 'ended']);
    expect(h.notifier.statuses[0]!.extra).toEqual({ destination: '+14155550123' });
    expect(h.notifier.statuses[1]!.extra).toMatchObject({ ended_reason: 'call-transferred' });
    expect(h.record).toMatchObject({ status: 'ended', ended_reason: 'call-transferred', current_node: 'agent' });
  });

  it('a transfer the carrier refuses: the call is hung up and ends pipeline-error-<carrier>, saying why', async () => {
    const refused = Object.assign(new Error('No international permission'), { provider: 'twilio' });
    const h = await askForAnAgent({ error: refused });
    const report = await h.untilEnded(20_000);
    expect(report.ended_reason).toBe('pipeline-error-twilio');
    expect(report.errors).toEqual([{ code: 'TRANSFER_FAILED', message: expect.stringContaining('No international permission'), provider: 'twilio' }]);
    expect(h.transport.hangUps).toHaveLength(1);
    expect(h.notifier.statuses.at(-1)).toMatchObject({ status: 'ended', extra: { ended_reason: 'pipeline-error-twilio' } });
    expect(h.record).toMatchObject({ status: 'ended', ended_reason: 'pipeline-error-twilio' });
  });
});
