/**
 * A workflow on Google Gemini Live: the call's controller and realtime backend drive the real
 * `google-live` adapter over a socket to its wire fake (test/fakes/google-live.ts), on the fake
 * clock (the fake's timers are the call's). A conversation node's transition chosen by the model
 * (a `toolCall`, answered silently), the tool node's webhook, the next node's line, the caller's
 * words and the model's in the record; and a dropped Gemini connection ends only its own call
 * (`pipeline-error-google-live`), as does a frame that is not JSON, while another call on the same
 * fake goes on. (The scripted faults of every vendor, hang included: vendor-faults.test.ts.)
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createGoogleLive } from '../../src/providers/realtime/google-live.js';
import { FAKE_LIVE_KEY, startFakeGoogleLive, type FakeGoogleLive, type FakeLiveReply, type ReplyContext } from '../fakes/google-live.js';
import { callHarness, useFastCalls } from '../helpers/call-harness.js';

useFastCalls();

const GREETING = 'Hello, Acme Parts order desk.';
const HOLD = 'One moment while I check that.';
const SHIPPED = 'Good news, your parcel shipped already.';
const TOOL_URL = 'https://tools.example.com/crm';

const orderDesk = {
  version: 1,
  entry_node: 'greet',
  global_prompt: 'You are the order desk of Acme Parts.',
  nodes: [
    { id: 'greet', type: 'conversation', first_line: GREETING, instructions: 'Find out what the caller needs.' },
    { id: 'lookup', type: 'tool', first_line: HOLD, tool_name: 'crm_fetch', url: TOOL_URL, arguments: { order: 'A-1234' } },
    { id: 'shipped', type: 'conversation', first_line: SHIPPED, instructions: 'Answer questions about the parcel.' },
    { id: 'bye', type: 'end', first_line: 'Goodbye.' },
  ],
  edges: [
    { from: 'greet', to: 'lookup', description: 'the caller asks where their order is' },
    { from: 'lookup', to: 'shipped' },
    { from: 'shipped', to: 'bye', description: 'the caller is finished' },
  ],
};

/** A model that says the lines it is told to, and takes the caller's question to the lookup. */
function model(ctx: ReplyContext): FakeLiveReply {
  if (ctx.trigger === 'client') {
    const line = /Say exactly: "([^"]*)"/.exec(ctx.text)?.[1];
    return line ? { audioMs: line.length * 40, transcript: line } : { audioMs: 400, transcript: 'Anything else?' };
  }
  if (ctx.trigger === 'speech' && ctx.connection.functions.includes('go_to_lookup')) {
    return { audioMs: 400, transcript: 'Let me see.', functionCalls: [{ name: 'go_to_lookup' }] };
  }
  return { audioMs: 400, transcript: `You said: ${ctx.text}` };
}

let fake: FakeGoogleLive | undefined;
afterEach(async () => {
  await fake?.close();
  fake = undefined;
});

const adapter = (f: FakeGoogleLive) => createGoogleLive({ google: { baseUrl: f.url, apiKey: FAKE_LIVE_KEY } });
const liveCall = (f: FakeGoogleLive, definition?: unknown) =>
  callHarness({
    kind: 'realtime',
    assistant: { llm_config: { provider: 'google-live' }, ...(definition ? {} : { first_message: GREETING }) },
    ...(definition ? { definition } : {}),
    realtimeAdapter: adapter(f),
  });

describe('a workflow on google-live', () => {
  it('conversation node → the model chooses the tool node → its webhook → the next node speaks; the record has both sides', async () => {
    fake = await startFakeGoogleLive({ reply: model, userTranscripts: ['Where is my order?'] });
    const h = liveCall(fake, orderDesk);
    h.notifier.answer = () => ({ result: { parcel: 'shipped' }, delayMs: 300 });
    await h.start();
    await h.until('the greeting said', () => h.messages().some(([, c]) => c === GREETING), 20_000);
    const conn = fake.connections[0]!;
    expect(conn.instructions).toContain('Find out what the caller needs.');
    expect(conn.functions).toContain('go_to_lookup');

    await h.caller.say('Where is my order?');
    await h.until('the next node spoken', () => h.messages().some(([, c]) => c === SHIPPED), 20_000);
    expect(h.notifier.toolRequests).toHaveLength(1);
    expect(h.notifier.toolRequests[0]).toMatchObject({ url: TOOL_URL, nodeId: 'lookup', calls: [{ name: 'crm_fetch', arguments: { order: 'A-1234' } }] });
    expect(h.record.nodes_visited).toEqual(['greet', 'lookup', 'shipped']);

    // the transition was answered silently; the node's instructions and functions followed it
    const responses = conn.messages.flatMap((m) => ((m.toolResponse as { functionResponses?: unknown[] } | undefined)?.functionResponses ?? []));
    expect(responses).toEqual([expect.objectContaining({ name: 'go_to_lookup', response: { ok: true }, scheduling: 'SILENT' })]);
    expect(conn.instructions).toContain('Answer questions about the parcel.');
    expect(conn.functions).toContain('go_to_bye');
    expect(conn.functions).not.toContain('go_to_lookup');
    // caller audio went up as PCM16 16 kHz; the model's came down as μ-law frames to the caller
    expect([...conn.mimeTypes]).toEqual(['audio/pcm;rate=16000']);
    expect(h.transport.frames.length).toBeGreaterThan(50);

    h.caller.hangUp();
    const report = await h.untilEnded();
    expect(report.ended_reason).toBe('customer-ended-call');
    const said = report.messages.map((m) => [m.role, m.content]);
    expect(said).toEqual(expect.arrayContaining([['assistant', GREETING], ['user', 'Where is my order?'], ['assistant', HOLD], ['assistant', SHIPPED]]));
    expect(said.findIndex(([, c]) => c === GREETING)).toBeLessThan(said.findIndex(([, c]) => c === SHIPPED));
    await h.until('the Gemini socket closed', () => conn.closed, 5_000);
    expect(conn.closeCode).toBe(1000);
  });

  it.each([
    { fault: 'a dropped connection', code: 'PROVIDER_DISCONNECTED', cause: (f: FakeGoogleLive) => f.connections[1]!.drop() },
    { fault: 'a frame that is not JSON', code: 'PROVIDER_PROTOCOL', cause: (f: FakeGoogleLive) => f.connections[1]!.sendRaw('<html>502 Bad Gateway</html>') },
  ])('$fault ends only its call with pipeline-error-google-live ($code); the other call goes on', async ({ code, cause }) => {
    fake = await startFakeGoogleLive({ reply: model, userTranscripts: ['First question.', 'Second question.'] });
    const healthy = liveCall(fake);
    await healthy.start();
    await healthy.until('the healthy greeting', () => healthy.messages().some(([, c]) => c === GREETING), 20_000);
    const faulty = liveCall(fake);
    await faulty.start();
    await faulty.until('the faulty greeting', () => faulty.messages().some(([, c]) => c === GREETING), 20_000);
    cause(fake);
    const report = await faulty.untilEnded(10_000);
    expect(report).toMatchObject({ ended_reason: 'pipeline-error-google-live', errors: [{ code, provider: 'google-live' }] });
    expect(faulty.transport.hangUps).toHaveLength(1);

    await healthy.caller.say('First question.');
    await healthy.until('the reply', () => healthy.messages().some(([, c]) => c === 'You said: First question.'), 20_000);
    healthy.caller.hangUp();
    const ok = await healthy.untilEnded(5_000);
    expect(ok.ended_reason).toBe('customer-ended-call');
    expect(ok.errors).toEqual([]);
  });
});
