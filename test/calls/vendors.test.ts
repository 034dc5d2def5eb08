/**
 * Whole calls through the real-vendor adapters, against the wire-protocol fakes of Deepgram,
 * OpenAI chat completions and ElevenLabs instead of the sandbox: the pipeline does not care which
 * vendor it runs, and μ-law goes from the caller to Deepgram and from ElevenLabs to the caller
 * byte for byte.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SimulatedCall } from '../../src/sim/caller.js';
import { ACCOUNT_SID, AUTH_TOKEN, frontDesk, receivedMessages, startCallingServer, type CallingServer, eventually } from '../helpers/calls.js';
import { startFakeDeepgram, type DeepgramFakeScript, type FakeDeepgram } from '../fakes/deepgram.js';
import { startFakeOpenAiChat, type FakeOpenAiChat, type FakeOpenAiChatScript } from '../fakes/openai-chat.js';
import { FAKE_ELEVENLABS_KEY, startFakeElevenLabs, textFromAudio, type FakeElevenLabs } from '../fakes/elevenlabs.js';

const DEEPGRAM_KEY = 'dg-test-key';
const OPENAI_KEY = 'sk-test';
/** What the caller says, as Deepgram will transcribe it. */
const CALLER_SAYS = 'I would like to book an appointment.';
/** Caller audio before Deepgram "hears" the words: after the assistant's opening line. */
const WORDS_AFTER_BYTES = 8_000 * 5;

let s: CallingServer;
let deepgram: FakeDeepgram;
let openai: FakeOpenAiChat;
let elevenlabs: FakeElevenLabs;
/** Read by the fakes at each connection / request: each test sets what it needs. */
const deepgramScript: DeepgramFakeScript = { apiKey: DEEPGRAM_KEY, idleTimeoutMs: 60_000 };
const openaiScript: FakeOpenAiChatScript = { apiKey: OPENAI_KEY, completions: [] };

beforeAll(async () => {
  deepgram = await startFakeDeepgram(deepgramScript);
  openai = await startFakeOpenAiChat(openaiScript);
  elevenlabs = await startFakeElevenLabs();
  s = await startCallingServer({
    DEEPGRAM_API_BASE: deepgram.url,
    DEEPGRAM_API_KEY: DEEPGRAM_KEY,
    OPENAI_API_BASE: openai.url,
    OPENAI_API_KEY: OPENAI_KEY,
    ELEVENLABS_API_BASE: elevenlabs.url,
    ELEVENLABS_API_KEY: FAKE_ELEVENLABS_KEY,
  });
}, 120_000);
afterAll(async () => {
  await s?.close();
  await deepgram?.close();
  await openai?.close();
  await elevenlabs?.close();
});


const vendorAssistant = (extra: Record<string, unknown> = {}) => ({
  name: 'Vendor receptionist',
  stt_config: { provider: 'deepgram' },
  llm_config: { provider: 'openai', model: 'gpt-4o-mini' },
  tts_config: { provider: 'elevenlabs', voice_id: 'fake-voice-1' },
  ...extra,
});

/** The caller speaks a few words after the opening line, as Deepgram hears them. */
function deepgramHears(words: string) {
  deepgramScript.connections = [
    {
      steps: [
        { type: 'speech-started', afterBytes: WORDS_AFTER_BYTES },
        { type: 'results', transcript: words.replace(/\.$/, ''), is_final: false, delayMs: 100 },
        { type: 'results', transcript: words, is_final: true, speech_final: true, delayMs: 200 },
        { type: 'utterance-end', delayMs: 200 },
      ],
    },
  ];
}

function dial(number: string) {
  const call = new SimulatedCall({ baseUrl: s.baseUrl, to: number, authToken: AUTH_TOKEN, accountSid: ACCOUNT_SID, recordAudio: true });
  return call;
}

/** What the caller heard: the fake's audio carries its text, one byte value per 20 ms frame. */
const heardText = (call: SimulatedCall) => textFromAudio(Buffer.concat(call.outboundAudio));

describe('a call through Deepgram, OpenAI and ElevenLabs (fakes)', () => {
  it('the caller is heard, the model streams a reply, and the caller hears it in μ-law untouched', async () => {
    deepgramHears(CALLER_SAYS);
    openaiScript.completions = [{ text: ['Sure, ', 'I can help ', 'with that. ', 'What day ', 'suits you?'], delayMs: 20 }];
    const { number } = await s.setUpNumber({ assistant: vendorAssistant({ first_message: 'Hello from the vendor path.' }) });
    const call = dial(number);
    const requestsBefore = openai.requests.length;
    const dgBefore = deepgram.connections.length;
    const outcome = await call.dial();
    expect(outcome.kind).toBe('connected');
    const callId = outcome.kind === 'connected' ? outcome.callId : '';

    await eventually('the opening line', () => heardText(call).includes('Hello from the vendor path.'), 30_000);
    // caller audio reaches Deepgram byte for byte (the caller sends this pattern, then silence)
    await call.mumble(200);
    await eventually('the reply', () => heardText(call).includes('What day suits you?'), 30_000);
    // played out (marks echoed): the history keeps what the caller heard
    await call.quiet();
    await call.hangUp();
    await call.close();

    const text = heardText(call);
    expect(text.startsWith('Hello from the vendor path.')).toBe(true);
    expect(text.indexOf('Sure, I can help with that.')).toBeGreaterThan(text.indexOf('Hello from the vendor path.'));
    // every message is 40 ms of μ-law, two whole frames, but where a reply ends on an odd frame
    expect(call.outboundAudio.every((f) => f.length === 320 || f.length === 160)).toBe(true);
    expect(call.outboundAudio.filter((f) => f.length === 320).length).toBeGreaterThan(call.outboundAudio.length / 2);

    const dg = deepgram.connections[dgBefore]!;
    expect(dg.headers.authorization).toBe(`Token ${DEEPGRAM_KEY}`);
    expect(Object.fromEntries(dg.query)).toMatchObject({ encoding: 'mulaw', sample_rate: '8000', channels: '1', model: 'nova-3' });
    const sent = Buffer.concat(call.inboundAudio);
    const pattern = sent.subarray(sent.findIndex((b) => b !== 0xff), sent.findIndex((b) => b !== 0xff) + 160 * 10);
    expect(pattern.length).toBe(1_600);
    expect(dg.audio().includes(pattern)).toBe(true);

    const request = openai.requests[requestsBefore]!;
    expect(request.headers.authorization).toBe(`Bearer ${OPENAI_KEY}`);
    expect(request.body).toMatchObject({ model: 'gpt-4o-mini', stream: true });
    const messages = request.body.messages as { role: string; content: string }[];
    expect(messages.at(-1)).toEqual({ role: 'user', content: CALLER_SAYS });
    expect(messages.some((m) => m.role === 'assistant' && m.content === 'Hello from the vendor path.')).toBe(true);

    const socket = elevenlabs.sockets.find((x) => x.generated.join('').includes('Sure,'))!;
    expect(socket.voiceId).toBe('fake-voice-1');
    expect(socket.query.get('output_format')).toBe('ulaw_8000');

    // the call leaves no vendor connection behind
    await eventually('the Deepgram stream to close', () => dg.closed, 20_000);
    await eventually('the ElevenLabs sockets to close', () => elevenlabs.sockets.every((x) => x.closed), 20_000);

    const report = await eventually(
      'the report',
      () => receivedMessages(s.receiver, 'end-of-call-report').find((m) => m.call.id === callId),
      20_000,
    );
    expect(report.ended_reason).toBe('customer-ended-call');
    expect(report.messages.map((m: { role: string; content: string }) => [m.role, m.content])).toEqual([
      ['assistant', 'Hello from the vendor path.'],
      ['user', CALLER_SAYS],
      ['assistant', 'Sure, I can help with that. What day suits you?'],
    ]);
  }, 90_000);

  it('the model calls a transition function: the workflow moves and the next node speaks', async () => {
    deepgramHears(CALLER_SAYS);
    openaiScript.completions = [{ toolCalls: [{ name: 'go_to_booking', arguments: '{}' }] }];
    const { number, workflowId } = await s.setUpNumber({ assistant: vendorAssistant(), definition: frontDesk });
    const call = dial(number);
    const requestsBefore = openai.requests.length;
    const outcome = await call.dial();
    const callId = outcome.kind === 'connected' ? outcome.callId : '';
    await eventually('the booking line', () => heardText(call).includes('Let us book your appointment.'), 30_000);
    await call.quiet();
    await call.hangUp();
    await call.close();

    expect(heardText(call).trim()).toBe('Hello, this is Acme Dental. Sure thing. Let us book your appointment.');
    const request = openai.requests[requestsBefore]!;
    const tools = request.body.tools as { type: string; function: { name: string; description: string } }[];
    expect(tools).toEqual([
      expect.objectContaining({ type: 'function', function: expect.objectContaining({ name: 'go_to_booking', description: 'the caller wants to book an appointment' }) }),
    ]);
    const system = (request.body.messages as { role: string; content: string }[])[0]!;
    expect(system.role).toBe('system');
    expect(system.content).toContain('You are the front desk of Acme Dental.');
    expect(system.content).toContain('Find out what the caller needs.');
    // the booking node's own model run has not happened: one request only
    expect(openai.requests.length).toBe(requestsBefore + 1);

    const report = await eventually(
      'the report',
      () => receivedMessages(s.receiver, 'end-of-call-report').find((m) => m.call.id === callId),
      20_000,
    );
    expect(report).toMatchObject({ workflow_id: workflowId, nodes_visited: ['greeting', 'booking'] });
    expect(report.transcript).toContain('Let us book your appointment.');
    expect(report.messages.map((m: { role: string }) => m.role)).toEqual(['assistant', 'user', 'assistant', 'assistant']);
  }, 90_000);
});
