/**
 * Realtime assistants on whole calls over the Twilio protocol: the sandbox speech-to-speech
 * provider end to end, and the OpenAI Realtime adapter against its wire-protocol fake. Nothing
 * here is timed (`calls-parallel`); barge-in and silence on a realtime call, which are, run in
 * test/calls/in-call.test.ts.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { orderLookupNodes, receivedMessages, toolResultAnswer, startCallingServer, type CallingServer, frontDesk, eventually, throughFrontDesk } from '../helpers/calls.js';
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
    await throughFrontDesk(call);

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

  // (barge-in on a realtime call: test/calls/in-call.test.ts over a socket with OpenAI Realtime's fake;
  // what the record, the engine and the model keep, and a key press: test/fast-calls/barge-in.test.ts,
  // on both kinds of call; the sandbox model's cancel and truncation: test/providers/sandbox-realtime.test.ts)
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

  // (a late caller transcript starting the silence count again, and speech over the model's audio:
  // test/calls/in-call.test.ts, which times them one file at a time)
});
