/**
 * Realtime assistants on whole calls over the Twilio protocol: the sandbox speech-to-speech
 * provider end to end, and the OpenAI Realtime adapter against its wire-protocol fake.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { orderLookupNodes, receivedMessages, silenceReminders, toolResultAnswer, startCallingServer, type CallingServer, frontDesk, eventually } from '../helpers/calls.js';
import { startFakeOpenAiRealtime, type FakeOpenAiRealtime, type FakeRealtimeScript } from '../fakes/openai-realtime.js';

const until = async (probe: () => boolean, what: string, timeoutMs = 10_000) => {
  await eventually(what, probe, timeoutMs, 20);
};

describe('a realtime call with the sandbox speech-to-speech provider', () => {
  let s: CallingServer;
  beforeAll(async () => {
    s = await startCallingServer();
  });
  afterAll(async () => {
    await s?.close();
  });

  it('says the first line, follows the workflow on what the caller says, and hangs up at the end node', async () => {
    const { number, workflowId, assistantId } = await s.setUpNumber({
      assistant: { name: 'Realtime receptionist', llm_config: { provider: 'sandbox-realtime' } },
      definition: frontDesk,
    });
    const call = s.caller(number);
    const outcome = await call.dial();
    expect(outcome.kind).toBe('connected');
    await call.hear('Acme Dental');
    await call.quiet();
    await call.say('I would like to book an appointment please.');
    await call.hear('Sure thing');
    await call.hear('book your appointment');
    await call.quiet();
    await call.say('That is all, I am finished, goodbye.');
    await call.hear('goodbye');
    await call.ended();

    const callId = outcome.kind === 'connected' ? outcome.callId : '';
    await s.receiver.waitForRequests(4, 10_000);
    await until(() => receivedMessages(s.receiver, 'end-of-call-report').some((m) => m.call.id === callId), 'the report');
    const statuses = receivedMessages(s.receiver, 'status-update').filter((m) => m.call.id === callId).map((m) => m.status);
    expect(statuses).toEqual(['ringing', 'in-progress', 'ended']);
    const report = receivedMessages(s.receiver, 'end-of-call-report').find((m) => m.call.id === callId);
    expect(report).toMatchObject({
      ended_reason: 'assistant-ended-call',
      assistant_id: assistantId,
      workflow_id: workflowId,
      nodes_visited: ['greeting', 'booking', 'bye'],
    });
    const lines = report.messages.map((m: { role: string; content: string; node_id: string }) => `${m.role}@${m.node_id}: ${m.content}`);
    expect(lines).toEqual([
      'assistant@greeting: Hello, this is Acme Dental.',
      'user@greeting: I would like to book an appointment please.',
      'assistant@greeting: Sure thing.',
      'assistant@booking: Let us book your appointment.',
      'user@booking: That is all, I am finished, goodbye.',
      'assistant@bye: Thank you for calling, goodbye.',
    ]);
    expect(report.transcript).toContain('book an appointment');

    const got = await s.api('GET', `/calls/${callId}`);
    expect(got.json.call).toMatchObject({ status: 'ended', ended_reason: 'assistant-ended-call', current_node: 'bye' });
    expect(s.twilio.requests.some((r) => r.form.get('Status') === 'completed')).toBe(true);
  }, 60_000);

  // (no workflow: first_message, an answer in the model's words, the report: test/fast-calls/conversation.test.ts)
  it('runs a tool node through the tool-calls exchange, then transfers the call', async () => {
    s.receiver.setDefault(toolResultAnswer({ status: 'shipped' }));
    const { number } = await s.setUpNumber({
      assistant: { name: 'Realtime orders', llm_config: { provider: 'sandbox-realtime' } },
      definition: {
        version: 1,
        entry_node: 'greeting',
        nodes: [
          ...orderLookupNodes(s.receiver.url),
          { id: 'handoff', type: 'transfer', first_line: 'Connecting you to a person now.', destination: '+14155550123' },
        ],
        edges: [
          { from: 'greeting', to: 'lookup', description: 'the caller asks where their order is' },
          { from: 'lookup', to: 'handoff' },
        ],
      },
    });
    const call = s.caller(number);
    await call.dial();
    await call.hear('Acme orders');
    await call.quiet();
    await call.say('Where is my order?');
    await call.hear('One moment');
    await call.hear('Connecting you');
    await call.ended();
    const callId = call.callId!;
    await until(() => receivedMessages(s.receiver, 'end-of-call-report').some((m) => m.call.id === callId), 'the report');
    const toolCalls = receivedMessages(s.receiver, 'tool-calls').filter((m) => m.call.id === callId);
    expect(toolCalls).toHaveLength(1);
    expect(toolCalls[0].tool_calls[0]).toMatchObject({ name: 'lookup_order', arguments: { order: 'A1' } });
    const statuses = receivedMessages(s.receiver, 'status-update').filter((m) => m.call.id === callId).map((m) => m.status);
    expect(statuses).toEqual(['ringing', 'in-progress', 'forwarding', 'ended']);
    const report = receivedMessages(s.receiver, 'end-of-call-report').find((m) => m.call.id === callId);
    expect(report).toMatchObject({ ended_reason: 'call-transferred', nodes_visited: ['greeting', 'lookup', 'handoff'] });
    expect(s.twilio.requests.some((r) => (r.form.get('Twiml') ?? '').includes('+14155550123'))).toBe(true);
    s.receiver.setDefault({ status: 200, body: '' });
  }, 60_000);

  // (a key press over the line: test/fast-calls/barge-in.test.ts, on both kinds of call)
  it('stops talking when the caller speaks over an interruptible line (clear), and keeps only what was heard, before the input', async () => {
    const input = 'Sorry, I need to book.';
    const long = 'Welcome to Acme Dental. We are open from eight in the morning until six in the evening on weekdays. ' +
      'On Saturdays we are open from nine until one. We are closed on Sundays and public holidays.';
    const { number } = await s.setUpNumber({
      assistant: { name: 'Realtime talker', llm_config: { provider: 'sandbox-realtime' }, first_message: long },
    });
    const call = s.caller(number);
    await call.dial();
    await call.hear('Welcome to Acme Dental');
    await call.say(input);
    await until(() => call.clears.length > 0, 'a clear');
    await call.hear(/okay|understand/i);
    await call.hangUp();
    const callId = call.callId!;
    await until(() => receivedMessages(s.receiver, 'end-of-call-report').some((m) => m.call.id === callId), 'the report');
    const report = receivedMessages(s.receiver, 'end-of-call-report').find((m) => m.call.id === callId);
    const first = report.messages[0];
    expect(first.role).toBe('assistant');
    expect(long.startsWith(first.content)).toBe(true);
    expect(first.content.length).toBeLessThan(long.length);
    expect(report.messages[1]).toMatchObject({ role: 'user', content: input });
    // the engine's history (the saved session) keeps the same heard part of the cut line
    let stored = await s.runtime.callStore.get(callId);
    for (let i = 0; i < 100 && stored?.status !== 'ended'; i++) {
      await new Promise((r) => setTimeout(r, 50));
      stored = await s.runtime.callStore.get(callId);
    }
    const history = (stored!.engine as { history: { role: string; content: string }[] }).history;
    expect(history.slice(0, 2)).toMatchObject([
      { role: 'assistant', content: first.content },
      { role: 'user', content: input },
    ]);
  }, 60_000);
});

describe('a realtime call with OpenAI Realtime (wire-protocol fake)', () => {
  let fake: FakeOpenAiRealtime | null = null;
  let s: CallingServer | null = null;
  afterEach(async () => {
    await s?.close();
    await fake?.close();
    s = null;
    fake = null;
  });

  async function setUp(script: FakeRealtimeScript, llmConfig: Record<string, unknown> = {}) {
    fake = await startFakeOpenAiRealtime(script);
    s = await startCallingServer({ OPENAI_API_BASE: fake.url, OPENAI_API_KEY: 'sk-test' });
    const { number } = await s.setUpNumber({
      assistant: { name: 'OpenAI receptionist', llm_config: { provider: 'openai-realtime', ...llmConfig } },
      definition: frontDesk,
    });
    return { fake, s, call: s.caller(number) };
  }

  /** μ-law bytes that are easy to recognise (never the silence byte). */
  const tone = (bytes: number) => Buffer.from(Array.from({ length: bytes }, (_, i) => i % 200));

  it('connects in pcmu with the node prompt and transition functions, plays the audio, and moves on a function call', async () => {
    const { fake, s, call } = await setUp({
      responses: [
        { audio: tone(1600), transcript: 'Hello, this is Acme Dental.' },
        { audio: tone(800), transcript: 'Sure thing.' },
        { audio: tone(800), transcript: 'Let us book your appointment.' },
        { audio: tone(1200), transcript: 'Thank you for calling, goodbye.' },
      ],
      turns: [
        {
          afterAudioBytes: 16_000,
          userTranscript: 'I would like to book an appointment.',
          response: { functionCall: { name: 'go_to_booking', arguments: '{}', callId: 'call_booking' } },
        },
        {
          afterAudioBytes: 40_000,
          userTranscript: 'That is all, goodbye.',
          response: { functionCall: { name: 'go_to_bye', arguments: '{}', callId: 'call_bye' } },
        },
      ],
    });
    const outcome = await call.dial();
    expect(outcome.kind).toBe('connected');

    const first = await fake.waitForEvent('session.update');
    const session = first.session as any;
    expect(session.audio.input.format).toEqual({ type: 'audio/pcmu' });
    expect(session.audio.output.format).toEqual({ type: 'audio/pcmu' });
    expect(session.instructions).toContain('You are the front desk of Acme Dental.');
    expect(session.instructions).toContain('Find out what the caller needs.');
    expect(session.tools.map((t: { name: string }) => t.name)).toEqual(['go_to_booking']);
    expect(session.tools[0].description).toBe('the caller wants to book an appointment');
    expect(session.audio.input.turn_detection).toMatchObject({ type: 'server_vad', silence_duration_ms: 500 });

    // the entry node's first line, said by the model verbatim
    const say = await fake.waitForEvent('response.create');
    expect((say.response as any).instructions).toBe('Say exactly: "Hello, this is Acme Dental."');
    // its audio reaches the caller as 160-byte media frames
    await until(() => call.frameTimes.length >= 10, 'the first line\'s media frames');

    // the model calls the transition: the function is answered without a response of its own,
    // the session switches to the booking node, and the edge message and first line follow
    const output = await fake.waitForEvent('conversation.item.create', 1, 10_000);
    expect(output.item).toMatchObject({ type: 'function_call_output', call_id: 'call_booking' });
    const booking = await fake.waitForEvent('session.update', 2, 10_000);
    expect((booking.session as any).instructions).toContain('Book it.');
    expect((booking.session as any).tools.map((t: { name: string }) => t.name)).toEqual(['go_to_bye']);
    await fake.waitForEvent('response.create', 3, 10_000);
    const says = fake.eventsOfType('response.create').map((e) => (e.response as any)?.instructions);
    expect(says).toEqual([
      'Say exactly: "Hello, this is Acme Dental."',
      'Say exactly: "Sure thing."',
      'Say exactly: "Let us book your appointment."',
    ]);

    // the end node: its line is said, played, and the call hangs up
    await call.ended(20_000);
    expect(fake.eventsOfType('response.create').at(-1)?.response).toEqual({ instructions: 'Say exactly: "Thank you for calling, goodbye."' });
    const callId = outcome.kind === 'connected' ? outcome.callId : '';
    await until(() => receivedMessages(s.receiver, 'end-of-call-report').some((m) => m.call.id === callId), 'the report');
    const report = receivedMessages(s.receiver, 'end-of-call-report').find((m) => m.call.id === callId);
    expect(report).toMatchObject({ ended_reason: 'assistant-ended-call', nodes_visited: ['greeting', 'booking', 'bye'] });
    const roles = report.messages.map((m: { role: string; content: string }) => `${m.role}: ${m.content}`);
    expect(roles).toContain('user: I would like to book an appointment.');
    expect(roles).toContain('assistant: Sure thing.');
    expect(roles.at(-1)).toBe('assistant: Thank you for calling, goodbye.');
    // the realtime socket was closed with the call
    await until(() => fake.openSockets() === 0, 'the realtime socket to close', 5_000);
  }, 60_000);

  it("answers the model's call of an assistant tool through the tool-calls exchange", async () => {
    const { fake, s, call } = await setUp(
      {
        responses: [{ audio: tone(800), transcript: 'Hello, this is Acme Dental.' }],
        turns: [
          {
            afterAudioBytes: 12_000,
            userTranscript: 'When are you open?',
            response: { functionCall: { name: 'opening_hours', arguments: '{"day":"monday"}', callId: 'call_hours' } },
          },
        ],
      },
      {
        tools: [
          {
            name: 'opening_hours',
            description: 'Opening hours for a day',
            parameters: { type: 'object', properties: { day: { type: 'string' } }, required: ['day'] },
          },
        ],
      },
    );
    s.receiver.setDefault((req) => {
      const message = JSON.parse(req.body).message;
      if (message?.type !== 'tool-calls') return { status: 200, body: '' };
      return { status: 200, body: { results: [{ tool_call_id: message.tool_calls[0].id, result: '9 to 5' }] } };
    });
    await call.dial();
    const first = await fake.waitForEvent('session.update');
    expect((first.session as any).tools.map((t: { name: string }) => t.name)).toEqual(['go_to_booking', 'opening_hours']);
    const output = await fake.waitForEvent('conversation.item.create', 1, 10_000);
    expect(output.item).toEqual({ type: 'function_call_output', call_id: 'call_hours', output: '9 to 5' });
    // the model is asked to answer with the result
    const reply = await fake.waitForEvent('response.create', 2, 5_000);
    expect(reply.response).toBeUndefined();
    const toolCalls = receivedMessages(s.receiver, 'tool-calls');
    expect(toolCalls).toHaveLength(1);
    expect(toolCalls[0].tool_calls[0]).toMatchObject({ id: 'call_hours', name: 'opening_hours', arguments: { day: 'monday' } });
    await call.hangUp();
  }, 60_000);

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

  it('on speech over the assistant audio: clear to the caller, response.cancel and conversation.item.truncate to the model', async () => {
    const { fake, s, call } = await setUp({
      // a 3 s first line; the caller starts speaking about 1 s in
      responses: [{ audio: tone(24_000), transcript: 'Hello, this is Acme Dental, the friendliest dentist in town, how can I help you today?' }],
      turns: [{ afterAudioBytes: 8_000, speechStops: false }],
    });
    const outcome = await call.dial();
    expect(outcome.kind).toBe('connected');
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
