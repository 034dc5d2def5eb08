/**
 * What happens during a call, end to end: a simulated caller against the real server with the
 * sandbox providers. Silence reminders (fixed, or written by the sandbox model) ending the call
 * (a timer that ends the call with a hang-up over Twilio's REST API), key presses sent as Media Streams `dtmf` events, the caller hanging up.
 * Lines that cannot be cut, silence and duration limits on both kinds of call, pronunciations and
 * the recording consent are checked exactly in test/fast-calls (see docs/testing.md).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { receivedMessages, sandboxAssistant, silenceReminders, startCallingServer, type CallingServer, callIdOf } from '../helpers/calls.js';

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

// The realtime kind's silence path over a socket: test/calls/realtime.test.ts (OpenAI Realtime).
describe('silence (pipeline call)', () => {
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
      assistant: sandboxAssistant({ first_message: 'Hi.', speech_config: { silence: silenceReminders(2) } }),
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

  // (no messages, the model writes the check-in: test/fast-calls/silence.test.ts on both kinds; the sandbox
  // model's check-in line: test/providers/sandbox-llm.test.ts)
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
