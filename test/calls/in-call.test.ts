/**
 * Whole calls over the Twilio protocol, end to end: a simulated caller against the real server
 * with the sandbox providers, and realtime calls against OpenAI Realtime's wire-protocol fake.
 * These measure what the caller hears against the wall clock (the pacing of the media messages,
 * a barge-in's `clear`, silence reminders), so they run in the `calls` project, one file at a
 * time:
 * - a sandbox call through a workflow (the webhooks, the attempt log, metrics, the hang-up over
 *   Twilio's REST API), and the assistant's audio 40 ms to a media message;
 * - barge-in over a real socket (a `clear` the far end acts on, marks it echoes, what the caller's
 *   own STT heard, the record and the report), on a pipeline call and on an OpenAI Realtime call
 *   (`response.cancel`, `conversation.item.truncate`);
 * - silence reminders ending the call (a timer that ends the call with a hang-up over Twilio's
 *   REST API), and on an OpenAI Realtime call a late caller transcript starting the count again;
 * - key presses sent as Media Streams `dtmf` events, the caller hanging up.
 * Timings are checked in ranges wide enough for a loaded 2-core machine. The thresholds, false
 * interruptions, endpointing, what the model is given after caller input, lines that cannot be
 * cut, silence and duration limits on both kinds of call, pronunciations and the recording
 * consent are checked exactly in test/fast-calls (see docs/testing.md).
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { SimulatedCall } from '../../src/sim/caller.js';
import { startFakeOpenAiRealtime, type FakeOpenAiRealtime, type FakeRealtimeScript } from '../fakes/openai-realtime.js';
import { VAD_FIXTURES } from '../helpers/vad-fixtures.js';
import {
  callIdOf,
  eventually,
  frontDesk,
  receivedMessages,
  sandboxAssistant,
  silenceReminders,
  startCallingServer,
  type CallingServer,
  throughFrontDesk,
} from '../helpers/calls.js';

let s: CallingServer;
beforeAll(async () => {
  s = await startCallingServer();
});
afterAll(async () => {
  await s?.close();
});

/** A greeting long enough to talk over: five sentences, each its own TTS session and mark. */
const LONG_LINE = [
  'Welcome to the Acme Dental line.',
  'Our office is open from nine to five on weekdays.',
  'We are closed on weekends and on public holidays.',
  'You can book, move or cancel an appointment with me.',
  'Tell me how I can help you today.',
];

const longFrontDesk = {
  version: 1,
  entry_node: 'greeting',
  nodes: [
    { id: 'greeting', type: 'conversation', first_line: LONG_LINE.join(' '), instructions: 'Find out what the caller needs.' },
    { id: 'booking', type: 'conversation', first_line: 'Let us book your appointment.', instructions: 'Book it.' },
    { id: 'bye', type: 'end', first_line: 'Goodbye.' },
  ],
  edges: [
    { from: 'greeting', to: 'booking', description: 'the caller wants to book an appointment', message: 'Sure thing.' },
    { from: 'booking', to: 'bye', description: 'the caller is finished' },
  ],
};

const withTurnTaking = (turnTaking: Record<string, number>, extra: Record<string, unknown> = {}) =>
  sandboxAssistant({ speech_config: { turn_taking: turnTaking }, ...extra });

async function endOfCallReport(callId: string, timeoutMs = 15_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const report = receivedMessages(s.receiver, 'end-of-call-report').find((m) => m.call?.id === callId);
    if (report) return report;
    if (Date.now() > deadline) throw new Error(`no end-of-call-report for ${callId}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The sentences of LONG_LINE the caller's ear decoded, in order. */
const heardOfLine = (call: SimulatedCall) => call.heard.map((h) => h.text).filter((t) => LONG_LINE.includes(t));

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

describe('a sandbox call through a workflow', () => {
  it('answers, follows the workflow on what the caller says, and hangs up at the end node', async () => {
    const { number, workflowId, assistantId } = await s.setUpNumber({ definition: frontDesk });
    const call = s.caller(number);
    const outcome = await call.dial();
    expect(outcome.kind).toBe('connected');
    await throughFrontDesk(call);

    const callId = outcome.kind === 'connected' ? outcome.callId : '';
    await s.receiver.waitForRequests(4, 10_000);
    const statuses = receivedMessages(s.receiver, 'status-update').filter((m) => m.call.id === callId).map((m) => m.status);
    expect(statuses).toEqual(['ringing', 'in-progress', 'ended']);
    const ended = receivedMessages(s.receiver, 'status-update').find((m) => m.call.id === callId && m.status === 'ended');
    expect(ended.ended_reason).toBe('assistant-ended-call');
    const report = receivedMessages(s.receiver, 'end-of-call-report').find((m) => m.call.id === callId);
    expect(report).toMatchObject({
      ended_reason: 'assistant-ended-call',
      assistant_id: assistantId,
      workflow_id: workflowId,
      nodes_visited: ['greeting', 'booking', 'bye'],
    });
    expect(report.transcript).toContain('book an appointment');
    expect(report.messages.some((m: { node_id: string }) => m.node_id === 'booking')).toBe(true);

    const got = await s.api('GET', `/calls/${callId}`);
    expect(got.status).toBe(200);
    expect(got.json.call).toMatchObject({ status: 'ended', ended_reason: 'assistant-ended-call', current_node: 'bye' });
    // every delivery attempt of the call, for debugging an endpoint
    let attempts = await s.api('GET', `/calls/${callId}/webhooks`);
    for (let i = 0; i < 50 && attempts.json.webhooks.length < 4; i++) {
      await new Promise((r) => setTimeout(r, 100)); // an attempt is recorded once its answer is in
      attempts = await s.api('GET', `/calls/${callId}/webhooks`);
    }
    expect(attempts.status).toBe(200);
    const events = attempts.json.webhooks.map((a: { event: string }) => a.event);
    expect(events).toEqual(expect.arrayContaining(['status-update', 'end-of-call-report']));
    for (const a of attempts.json.webhooks) {
      expect(a).toMatchObject({ url: s.receiver.url, attempt: 1, outcome: 'delivered', status_code: 200 });
    }
    expect((await s.api('GET', '/calls/00000000-0000-4000-8000-000000000000/webhooks')).status).toBe(404);
    // Prometheus metrics: the call is counted by its ended_reason, its turns and its webhooks too
    const metrics = await s.app.inject({ method: 'GET', url: '/metrics' });
    expect(metrics.statusCode).toBe(200);
    expect(metrics.headers['content-type']).toContain('text/plain');
    expect(metrics.body).toMatch(/switchboard_calls_ended_total\{ended_reason="assistant-ended-call"\} [1-9]/);
    expect(metrics.body).toMatch(/switchboard_webhook_deliveries_total\{event="end-of-call-report",outcome="delivered"\} [1-9]/);
    expect(metrics.body).toMatch(/switchboard_turn_latency_seconds_count [1-9]/);
    expect(metrics.body).toContain('switchboard_live_calls');
    // the assistant hung up through the telephony REST API
    expect(s.twilio.requests.some((r) => r.form.get('Status') === 'completed')).toBe(true);
  }, 60_000);

  it('sends the assistant\'s audio 40 ms to a Twilio media message (a reply\'s last one may be shorter), all of it heard', async () => {
    const { number } = await s.setUpNumber({ assistant: sandboxAssistant({ first_message: 'Hi there, how can I help?' }) });
    const call = s.caller(number, { recordAudio: true });
    await call.dial();
    await call.hear('how can I help');
    await call.quiet();
    await call.hangUp();
    const sizes = call.outboundAudio.map((a) => a.length);
    expect(sizes.length).toBeGreaterThan(10);
    // whole frames, one or two to a message
    expect(sizes.filter((n) => n !== 320)).toEqual(sizes.filter((n) => n === 160));
    // single frames only while a reply's first audio trickles in (each goes at once: the lead is
    // not yet full) and at its end, on an odd frame; two in between. The sandbox TTS hands out a
    // sentence's audio in chunks of up to a second, so the first pacing step has frames enough
    // for pairs; a TTS whose first bytes are one frame sends that frame alone at once, never held
    // for the next (the call flushes what the transport holds at the end of each pacing step:
    // test/calls-unit/pacer.test.ts)
    expect([160, 320]).toContain(sizes[0]);
    const paired = sizes.slice(sizes.indexOf(320));
    expect(paired.slice(0, -1).every((n) => n === 320)).toBe(true);
    expect(sizes.indexOf(320)).toBeLessThanOrEqual(4);
    expect(call.frameTimes.length).toBe(sizes.reduce((a, n) => a + n, 0) / 160);
  }, 30_000);

  // (no workflow: first_message, an answer in the model's words, the report: test/fast-calls/conversation.test.ts;
  // the sandbox model's own words: test/providers/sandbox-llm.test.ts)
});

describe('barge-in', () => {
  it('clears the line once the caller has spoken for interruption_min_duration, and keeps only what was heard', async () => {
    const { number } = await s.setUpNumber({
      assistant: withTurnTaking({ interruption_min_duration: 0.3, interruption_min_words: 0, endpointing_min_delay: 0.3 }),
      definition: longFrontDesk,
    });
    const call = s.caller(number);
    const callId = callIdOf(await call.dial());
    await call.hear(LONG_LINE[0]!);
    expect(call.clears).toEqual([]);
    await call.say('I would like to book an appointment.');
    const speech = call.spoken.at(-1)!;
    await call.hear('Sure thing');
    await call.hear('book your appointment');
    await call.quiet();

    // the clear came once the caller had spoken for about interruption_min_duration
    expect(call.clears.length).toBeGreaterThan(0);
    const clearAt = call.clears[0]!;
    expect(clearAt - speech.startedAt).toBeGreaterThanOrEqual(300 - 40);
    expect(clearAt - speech.startedAt).toBeLessThan(300 + 1500);
    // no assistant audio after the clear until the caller had finished: the reply to the caller
    const framesAfter = call.frameTimes.filter((t) => t > clearAt);
    expect(framesAfter.length).toBeGreaterThan(0);
    expect(framesAfter[0]!).toBeGreaterThanOrEqual(speech.endedAt);

    // the caller heard the start of the greeting, not its end, then the reply
    const heard = heardOfLine(call);
    expect(heard.length).toBeGreaterThanOrEqual(1);
    expect(heard.length).toBeLessThan(LONG_LINE.length);
    expect(heard).toEqual(LONG_LINE.slice(0, heard.length));
    const texts = call.heard.map((h) => h.text);
    expect(texts.indexOf('Sure thing.')).toBe(heard.length);

    // the history holds the sentences the caller heard (their marks came back), not the whole line
    const live = await callRecord(callId);
    const greeting = live.messages.filter((m) => m.role === 'assistant' && m.node_id === 'greeting');
    expect(greeting).toHaveLength(2); // the cut greeting, then the edge's message
    const kept = greeting[0]!.content;
    const keptSentences = LONG_LINE.filter((l) => kept.includes(l));
    expect(kept).toBe(keptSentences.join(' '));
    expect(keptSentences.length).toBeGreaterThanOrEqual(1);
    // a sentence whose tones had played but whose mark was still pending is counted as not heard
    expect(heard.length - keptSentences.length).toBeGreaterThanOrEqual(0);
    expect(heard.length - keptSentences.length).toBeLessThanOrEqual(1);
    expect(keptSentences).toEqual(LONG_LINE.slice(0, keptSentences.length));
    expect(live.messages.map((m) => m.role)).toEqual(['assistant', 'user', 'assistant', 'assistant']);
    expect(live.messages[1]!.content).toBe('I would like to book an appointment.');

    await call.hangUp();
    const report = await endOfCallReport(callId);
    expect(report.ended_reason).toBe('customer-ended-call');
    expect(report.messages[0].content).toBe(kept);
    expect(report.transcript).not.toContain(LONG_LINE[LONG_LINE.length - 1]);
  }, 60_000);
});

// ---------------------------------------------------------------------------------------------
// realtime calls with OpenAI Realtime (the wire-protocol fake): each test its own fake and a server on it

/** μ-law bytes that are easy to recognise (never the silence byte). */
const tone = (bytes: number) => Buffer.from(Array.from({ length: bytes }, (_, i) => i % 200));

const until = async (probe: () => boolean, what: string, timeoutMs = 10_000) => {
  await eventually(what, probe, timeoutMs, 20);
};

describe('a realtime call on the OpenAI Realtime wire-protocol fake', () => {
  // the server runs on the fake (OPENAI_API_BASE), one of each per test
  let fake: FakeOpenAiRealtime | null = null;
  let s: CallingServer | null = null;
  afterEach(async () => {
    await s?.close();
    await fake?.close();
    s = null;
    fake = null;
  });

  describe('barge-in', () => {

    async function setUp(script: FakeRealtimeScript) {
      fake = await startFakeOpenAiRealtime(script);
      s = await startCallingServer({ OPENAI_API_BASE: fake.url, OPENAI_API_KEY: 'sk-test' });
      const { number } = await s.setUpNumber({
        assistant: { name: 'OpenAI receptionist', llm_config: { provider: 'openai-realtime' } },
        definition: frontDesk,
      });
      return { fake, s, call: s.caller(number) };
    }

    it('on speech over the assistant audio: clear to the caller, response.cancel and conversation.item.truncate to the model', async () => {
      const { fake, s, call } = await setUp({
        // a 3 s first line; server VAD hears the caller about 1 s in, and (interrupt_response: false) cuts nothing
        responses: [{ audio: tone(24_000), transcript: 'Hello, this is Acme Dental, the friendliest dentist in town, how can I help you today?' }],
        turns: [{ afterAudioBytes: 8_000, speechStops: false }],
      });
      const outcome = await call.dial();
      expect(outcome.kind).toBe('connected');
      // the caller speaks once some of the line has played: the call's detector cuts it after interruption_min_duration
      await until(() => call.frameTimes.length > 50, 'a second of the first line');
      const speech = VAD_FIXTURES.find((f) => f.file === 'speech-booking.wav')!;
      void call.play(speech.mulaw, 'speech');
      await fake.waitForEvent('response.cancel', 1, 10_000);
      const truncate = await fake.waitForEvent('conversation.item.truncate', 1, 5_000);
      await until(() => call.clears.length > 0, 'a clear');
      expect(truncate.content_index).toBe(0);
      expect(String(truncate.item_id)).toMatch(/^item_/);
      // what the caller heard, from the echoed marks: some of the line, not all of it
      expect(truncate.audio_end_ms).toBeGreaterThan(200);
      expect(truncate.audio_end_ms).toBeLessThan(2_000);
      // no further audio of the cut line reaches the caller
      const framesAtClear = call.frameTimes.filter((t) => t <= call.clears[0]!).length;
      await new Promise((r) => setTimeout(r, 300));
      expect(call.frameTimes.length - framesAtClear).toBeLessThanOrEqual(1);
      // the truncate is valid for the fake (no error came back about it)
      await call.hangUp();
      const callId = outcome.kind === 'connected' ? outcome.callId : '';
      await until(() => receivedMessages(s.receiver, 'end-of-call-report').some((m) => m.call.id === callId), 'the report');
      const report = receivedMessages(s.receiver, 'end-of-call-report').find((m) => m.call.id === callId);
      expect(report.ended_reason).toBe('customer-ended-call');
      const first = report.messages[0];
      expect(first.role).toBe('assistant');
      expect('Hello, this is Acme Dental.'.startsWith(first.content)).toBe(true);
      expect(first.content.length).toBeLessThan('Hello, this is Acme Dental.'.length);
    }, 60_000);
  });

  describe('silence', () => {

    it('a caller transcript that comes after the reply resets the silence count: the next reminder is the first, after first_check_seconds', async () => {
      // Timeline: "Hi." → 1 s → reminder 1 → 3 s → reminder 2 → the caller speaks 1 s after reminder 2
      // was asked for (counted in caller audio, whatever the call's start-up took), the reply plays,
      // and OpenAI's transcript of the caller arrives 1.5 s after the turn.
      fake = await startFakeOpenAiRealtime({
        responses: [
          { audio: tone(800), transcript: 'Hi.' },
          { audio: tone(800), transcript: 'Are you still there?' },
          { audio: tone(800), transcript: 'Hello, can you hear me?' },
          { audio: tone(800), transcript: 'Are you still there?' },
        ],
        turns: [
          {
            afterResponses: 3,
            afterAudioBytes: 8_000, // 1 s of caller audio (8 bytes per ms)
            userTranscript: 'What are your opening hours?',
            userTranscriptDelayMs: 1_500,
            response: { audio: tone(800), transcript: 'We are open from nine to five.' },
          },
        ],
      });
      s = await startCallingServer({ OPENAI_API_BASE: fake.url, OPENAI_API_KEY: 'sk-test' });
      const { number } = await s.setUpNumber({
        assistant: {
          name: 'OpenAI reminders',
          llm_config: { provider: 'openai-realtime' },
          first_message: 'Hi.',
          speech_config: { silence: silenceReminders(3) },
        },
      });
      const call = s.caller(number);
      const outcome = await call.dial();
      const callId = outcome.kind === 'connected' ? outcome.callId : '';
      const f = fake;
      const asked = async (n: number) => {
        const event = await f.waitForEvent('response.create', n, 15_000);
        return { at: Date.now(), instructions: (event.response as { instructions?: string } | undefined)?.instructions };
      };
      const hi = await asked(1);
      const first = await asked(2);
      const second = await asked(3);
      await until(() => (f.connections[0]?.turns ?? 0) >= 1, 'the caller turn', 10_000);
      const turnAt = Date.now();
      const again = await asked(4);
      // the reminder is played to the caller, then the caller hangs up
      await until(() => (call.frameTimes.at(-1) ?? 0) > again.at, 'the reminder\'s audio', 5_000);
      await call.quiet();
      await call.hangUp();

      expect([hi, first, second, again].map((r) => r.instructions)).toEqual([
        'Say exactly: "Hi."',
        'Say exactly: "Are you still there?"',
        'Say exactly: "Hello, can you hear me?"',
        'Say exactly: "Are you still there?"',
      ]);
      // first_check_seconds after the line was heard, then interval_seconds
      expect(first.at - hi.at).toBeGreaterThanOrEqual(1_000);
      expect(first.at - hi.at).toBeLessThan(2_500);
      expect(second.at - first.at).toBeGreaterThanOrEqual(3_000);
      expect(second.at - first.at).toBeLessThan(4_000);
      expect(turnAt).toBeGreaterThan(second.at);
      // the transcript (turn + 1.5 s) starts the count again: first_check_seconds (1 s), not interval_seconds (3 s)
      expect(again.at - turnAt).toBeGreaterThanOrEqual(2_000);
      expect(again.at - turnAt).toBeLessThan(3_500);

      await until(() => receivedMessages(s!.receiver, 'end-of-call-report').some((m) => m.call.id === callId), 'the report');
      const report = receivedMessages(s.receiver, 'end-of-call-report').find((m) => m.call.id === callId);
      expect(report.ended_reason).toBe('customer-ended-call');
      const lines = report.messages.map((m: { role: string; content: string }) => `${m.role}: ${m.content}`);
      expect(lines).toContain('user: What are your opening hours?');
      expect(lines).toContain('assistant: We are open from nine to five.');
      expect(lines.at(-1)).toBe('assistant: Are you still there?');
    }, 60_000);
  });
});

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
