/**
 * What happens during a call, end to end: a simulated caller against the real server with the
 * sandbox providers (closing lines and recording consent that cannot be cut, silence reminders on
 * both kinds of call, maximum duration, DTMF, pronunciations, the caller hanging up).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callKinds, eventually, receivedMessages, sandboxAssistant, silenceReminders, startCallingServer, type CallingServer, callIdOf } from '../helpers/calls.js';

let s: CallingServer;
beforeAll(async () => {
  s = await startCallingServer();
});
afterAll(async () => {
  await s?.close();
});

interface Message {
  role: string;
  content: string;
  node_id: string | null;
}

async function callRecord(callId: string) {
  const got = await s.api('GET', `/calls/${callId}`);
  expect(got.status).toBe(200);
  return got.json.call as { status: string; ended_reason: string | null; nodes_visited: string[]; messages: Message[] };
}

/** Waits for a webhook of this call (the receiver gets them asynchronously). */
async function webhook(callId: string, type: string, test: (m: any) => boolean = () => true, timeoutMs = 15_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const found = receivedMessages(s.receiver, type).find((m) => m.call?.id === callId && test(m));
    if (found) return found;
    if (Date.now() > deadline) throw new Error(`no ${type} for ${callId}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const endedStatus = (callId: string) => webhook(callId, 'status-update', (m) => m.status === 'ended');

/** Talking over lines is noticed fast: any interruptible audio would be cleared within ~0.3 s. */
const eagerInterruptions = { turn_taking: { interruption_min_duration: 0.2, interruption_min_words: 0, endpointing_min_delay: 0.3 } };

describe('lines that cannot be interrupted', () => {
  const CLOSING = [
    'Thank you for calling Acme Dental.',
    'Your appointment details will arrive by text message.',
    'We look forward to seeing you soon, goodbye.',
  ];

  it("the end node's line plays to its end over the caller's speech, then the call hangs up", async () => {
    const { number } = await s.setUpNumber({
      assistant: sandboxAssistant({ speech_config: eagerInterruptions }),
      definition: {
        version: 1,
        entry_node: 'greeting',
        nodes: [
          { id: 'greeting', type: 'conversation', first_line: 'Hello, this is Acme Dental.' },
          { id: 'bye', type: 'end', first_line: CLOSING.join(' ') },
        ],
        edges: [{ from: 'greeting', to: 'bye', description: 'the caller says goodbye' }],
      },
    });
    const call = s.caller(number);
    const callId = callIdOf(await call.dial());
    await call.hear('Acme Dental');
    await call.quiet();
    await call.say('Goodbye now.');
    await call.hear(CLOSING[0]!);
    await call.say('Wait, I have one more question please.');
    await call.ended();

    expect(call.clears).toEqual([]);
    expect(call.heard.map((h) => h.text).filter((t) => CLOSING.includes(t))).toEqual(CLOSING);
    expect((await endedStatus(callId)).ended_reason).toBe('assistant-ended-call');
    const record = await callRecord(callId);
    expect(record.messages.find((m) => m.node_id === 'bye' && m.role === 'assistant')!.content).toBe(CLOSING.join(' '));
  }, 60_000);

  it('the recording consent plays to its end over the caller\'s speech', async () => {
    const consent = [
      'This call may be recorded.',
      'Recordings help us train our staff and improve our service.',
      'Stay on the line if you agree.',
    ];
    const { number } = await s.setUpNumber({
      assistant: sandboxAssistant({
        speech_config: eagerInterruptions,
        recording_consent: { enabled: true, message: consent.join(' ') },
        first_message: 'Hi, how can I help?',
      }),
    });
    const call = s.caller(number);
    const callId = callIdOf(await call.dial());
    await call.hear(consent[0]!);
    await call.say('Hello, is anybody there?');
    await call.hear('how can I help');
    expect(call.clears).toEqual([]);
    const heard = call.heard.map((h) => h.text);
    expect(heard.slice(0, 4)).toEqual([...consent, 'Hi, how can I help?']);
    await call.quiet();
    await call.hangUp();
    const report = await webhook(callId, 'end-of-call-report');
    expect(report.messages[0]).toMatchObject({ role: 'assistant', content: consent.join(' ') });
  }, 60_000);
});

describe.each(callKinds)('silence ($kind call)', ({ assistant }) => {
  /** When the caller's ear finished hearing the `nth` (0-based) line containing `fragment`. */
  const heardAt = (call: ReturnType<CallingServer['caller']>, fragment: string, nth = 0) => {
    const line = call.heard.filter((h) => h.text.includes(fragment))[nth];
    if (!line) throw new Error(`never heard "${fragment}" (#${nth + 1}); heard: ${call.heardText()}`);
    return line.at;
  };
  // each line is heard when it has played: a gap is the silence waited plus the line itself
  const FIRST_CHECK = [1_000, 1_000 + 2_500] as const;
  const INTERVAL = [3_000, 3_000 + 2_500] as const;

  it('reminds after first_check_seconds, then every interval_seconds, then says the final message and hangs up', async () => {
    const { number } = await s.setUpNumber({
      assistant: assistant({ first_message: 'Hi.', speech_config: { silence: silenceReminders(2) } }),
    });
    const call = s.caller(number);
    const callId = callIdOf(await call.dial());
    await call.ended(30_000);

    const said = ['Hi.', 'Are you still there?', 'Hello, can you hear me?', 'I will hang up now, goodbye.'];
    expect(call.heard.map((h) => h.text)).toEqual(said);
    const first = heardAt(call, 'Are you still there') - heardAt(call, 'Hi.');
    const second = heardAt(call, 'can you hear me') - heardAt(call, 'Are you still there');
    const final = heardAt(call, 'hang up now') - heardAt(call, 'can you hear me');
    expect(first).toBeGreaterThanOrEqual(FIRST_CHECK[0]);
    expect(first).toBeLessThan(FIRST_CHECK[1]);
    for (const gap of [second, final]) {
      expect(gap).toBeGreaterThanOrEqual(INTERVAL[0]);
      expect(gap).toBeLessThan(INTERVAL[1]);
    }

    expect((await endedStatus(callId)).ended_reason).toBe('silence-timed-out');
    const report = await webhook(callId, 'end-of-call-report');
    expect(report.ended_reason).toBe('silence-timed-out');
    expect(report.messages.map((m: Message) => m.content)).toEqual(said);
    expect(s.twilio.requests.some((r) => r.path.includes(call.callSid) && r.form.get('Status') === 'completed')).toBe(true);
  }, 60_000);

  it('the caller speaking starts the count again: the next reminder is the first, after first_check_seconds', async () => {
    const { number } = await s.setUpNumber({
      assistant: assistant({ first_message: 'Hi.', speech_config: { silence: silenceReminders(3) } }),
    });
    const call = s.caller(number);
    const callId = callIdOf(await call.dial());
    await call.hear('Are you still there');
    await call.hear('can you hear me');
    await call.say('What are your opening hours?');
    await call.hear(/okay|understand/i);
    await eventually('the first reminder again', () => call.heard.filter((h) => h.text.includes('Are you still there')).length >= 2, 10_000);
    await call.hangUp();

    // before the caller spoke: first_check_seconds, then interval_seconds
    const first = heardAt(call, 'Are you still there') - heardAt(call, 'Hi.');
    const second = heardAt(call, 'can you hear me') - heardAt(call, 'Are you still there');
    expect(first).toBeGreaterThanOrEqual(FIRST_CHECK[0]);
    expect(first).toBeLessThan(FIRST_CHECK[1]);
    expect(second).toBeGreaterThanOrEqual(INTERVAL[0]);
    // after the reply to the caller: first_check_seconds again, and the first reminder
    const reply = call.heard.find((h) => /okay|understand/i.test(h.text))!.at;
    const again = heardAt(call, 'Are you still there', 1) - reply;
    expect(again).toBeGreaterThanOrEqual(FIRST_CHECK[0]);
    expect(again).toBeLessThan(FIRST_CHECK[1]);
    expect(call.heard.map((h) => h.text).filter((t) => t.includes('Is anybody there'))).toEqual([]);

    const report = await webhook(callId, 'end-of-call-report');
    expect(report.ended_reason).toBe('customer-ended-call');
    expect(report.messages.map((m: Message) => `${m.role}: ${m.content}`)).toEqual([
      'assistant: Hi.',
      'assistant: Are you still there?',
      'assistant: Hello, can you hear me?',
      'user: What are your opening hours?',
      expect.stringMatching(/^assistant: .*(okay|understand)/i),
      'assistant: Are you still there?',
    ]);
  }, 60_000);
});

describe('maximum duration', () => {
  // 10 s is the smallest max_duration_seconds allowed, so this test takes a little over 10 s
  it('ends the call with exceeded-max-duration once max_duration_seconds have passed', async () => {
    const { number } = await s.setUpNumber({
      assistant: sandboxAssistant({
        first_message: 'Hi, how can I help?',
        max_duration_seconds: 10,
        // keep the silence handling out of the way
        speech_config: { silence: { first_check_seconds: 60, interval_seconds: 60 } },
      }),
    });
    const call = s.caller(number);
    const dialedAt = Date.now();
    const callId = callIdOf(await call.dial());
    await call.hear('how can I help');
    await call.quiet();
    await call.say('What are your opening hours?');
    await call.hear('Okay, I understand');
    await call.ended(20_000);
    const lasted = Date.now() - dialedAt;
    expect(lasted).toBeGreaterThanOrEqual(10_000 - 200);
    expect(lasted).toBeLessThan(10_000 + 4_000);

    expect((await endedStatus(callId)).ended_reason).toBe('exceeded-max-duration');
    const report = await webhook(callId, 'end-of-call-report');
    expect(report.ended_reason).toBe('exceeded-max-duration');
    expect(report.duration_seconds).toBeGreaterThanOrEqual(9.5);
    expect(report.duration_seconds).toBeLessThan(14);
    expect(s.twilio.requests.some((r) => r.path.includes(call.callSid) && r.form.get('Status') === 'completed')).toBe(true);
  }, 30_000);
});

describe('DTMF', () => {
  it('gives key presses to the model as caller input: a transition is taken on a key, and the model answers one', async () => {
    const { number } = await s.setUpNumber({
      definition: {
        version: 1,
        entry_node: 'menu',
        nodes: [
          { id: 'menu', type: 'conversation', first_line: 'Press one for sales.', instructions: 'A keypad menu.' },
          { id: 'sales', type: 'conversation', first_line: 'Welcome to sales.', instructions: 'Sell.' },
          { id: 'bye', type: 'end', first_line: 'Goodbye.' },
        ],
        edges: [
          // the sandbox model matches words; a key press reaches it as "DTMF: 1"
          { from: 'menu', to: 'sales', description: 'the caller pressed a DTMF key on the keypad' },
          { from: 'sales', to: 'bye', description: 'the caller is finished' },
        ],
      },
    });
    const call = s.caller(number);
    const callId = callIdOf(await call.dial());
    await call.hear('Press one');
    await call.quiet();
    call.pressKey('1');
    await call.hear('Welcome to sales');
    await call.quiet();
    // no way out of "sales" shares a word with a key press: the model answers it
    call.pressKey('2');
    await call.hear('Okay, I understand: DTMF: 2');
    await call.quiet();

    const record = await callRecord(callId);
    expect(record.nodes_visited).toEqual(['menu', 'sales']);
    expect(record.messages.map((m) => [m.role, m.content, m.node_id])).toEqual([
      ['assistant', 'Press one for sales.', 'menu'],
      ['user', 'DTMF: 1', 'menu'],
      ['assistant', 'Welcome to sales.', 'sales'],
      ['user', 'DTMF: 2', 'sales'],
      ['assistant', 'Okay, I understand: DTMF: 2.', 'sales'],
    ]);
    await call.hangUp();
  }, 60_000);
});

describe('pronunciation', () => {
  it('changes what the caller hears, not the transcript', async () => {
    const { number } = await s.setUpNumber({
      assistant: sandboxAssistant({
        first_message: 'Welcome to Acme Dental.',
        speech_config: { pronunciation: [{ from: 'Acme', to: 'Ack-Me' }] },
      }),
    });
    const call = s.caller(number);
    const callId = callIdOf(await call.dial());
    await call.hear('Welcome to Ack-Me Dental.');
    await call.quiet();
    await call.say('Tell me about Acme please.');
    await call.hear('Okay, I understand: Tell me about Ack-Me please.');
    await call.quiet();
    expect(call.heardText()).not.toContain('Acme');

    const record = await callRecord(callId);
    expect(record.messages.map((m) => m.content)).toEqual([
      'Welcome to Acme Dental.',
      'Tell me about Acme please.',
      'Okay, I understand: Tell me about Acme please.',
    ]);
    await call.hangUp();
    const report = await webhook(callId, 'end-of-call-report');
    expect(report.transcript).toContain('Welcome to Acme Dental.');
    expect(report.transcript).not.toContain('Ack-Me');
  }, 60_000);
});

describe('recording consent', () => {
  it('plays first, before the first line', async () => {
    const { number } = await s.setUpNumber({
      assistant: sandboxAssistant({ recording_consent: { enabled: true, message: 'This call may be recorded.' } }),
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
    const call = s.caller(number);
    const callId = callIdOf(await call.dial());
    await call.hear('Acme Dental');
    expect(call.heard.map((h) => h.text)).toEqual(['This call may be recorded.', 'Hello, this is Acme Dental.']);
    await call.quiet();
    const record = await callRecord(callId);
    expect(record.messages.map((m) => [m.content, m.node_id])).toEqual([
      ['This call may be recorded.', null],
      ['Hello, this is Acme Dental.', 'greeting'],
    ]);
    await call.hangUp();
  }, 60_000);
});

describe('the caller hangs up', () => {
  it('mid-call: customer-ended-call in the status update and the end-of-call report', async () => {
    const { number, assistantId } = await s.setUpNumber({
      assistant: sandboxAssistant({
        first_message: 'Hi there. Our opening hours are nine to five. We are closed on weekends. How can I help?',
      }),
    });
    const call = s.caller(number);
    const callId = callIdOf(await call.dial());
    await call.hear('Hi there.');
    await call.hangUp();

    expect((await endedStatus(callId)).ended_reason).toBe('customer-ended-call');
    const statuses = receivedMessages(s.receiver, 'status-update')
      .filter((m) => m.call?.id === callId)
      .map((m) => m.status);
    expect(statuses).toEqual(['ringing', 'in-progress', 'ended']);
    const report = await webhook(callId, 'end-of-call-report');
    expect(report).toMatchObject({ ended_reason: 'customer-ended-call', assistant_id: assistantId });
    // only what was played before the hang-up (the first sentence), never the unplayed rest
    expect(report.messages.map((m: Message) => m.content)).toEqual(['Hi there.']);
    expect(report.transcript).not.toContain('How can I help?');
    const record = await callRecord(callId);
    expect(record).toMatchObject({ status: 'ended', ended_reason: 'customer-ended-call' });
    // the caller is gone: no hang-up through the telephony API
    expect(s.twilio.requests.some((r) => r.path.includes(call.callSid))).toBe(false);
  }, 60_000);
});
