/**
 * A vendor failing mid-call, each way an adapter reports it (test/providers/*: a dropped
 * connection is PROVIDER_DISCONNECTED, an answer that is not the protocol PROVIDER_PROTOCOL, a
 * vendor that never answers PROVIDER_TIMEOUT), for every vendor a call can use: the faulty call
 * ends `pipeline-error-<provider>` with the vendor named in `errors`, its `ended` status update
 * and its report, the carrier leg hung up and the vendor's session closed; a healthy call beside
 * it, on the same fake clock, keeps its frames back to back and finishes its conversation.
 * Over real sockets, one fault per vendor beside a healthy call: test/calls/vendor-faults.test.ts;
 * the new STT adapters' own faults reaching a call: test/fast-calls/stt-vendors.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { ProviderError, type ProviderErrorCode } from '../../src/providers/types.js';
import { callHarness, useFastCalls, type CallHarness } from '../helpers/call-harness.js';

useFastCalls();

const GREETING = 'Hello from the healthy line.';
const FAULTY_GREETING = 'Faulty line here, please hold on.';

const FAULTS: Array<{ fault: string; code: ProviderErrorCode; message: string }> = [
  { fault: 'drop', code: 'PROVIDER_DISCONNECTED', message: 'the connection dropped mid-stream' },
  { fault: 'garbage', code: 'PROVIDER_PROTOCOL', message: 'an answer that is not the protocol' },
  { fault: 'hang', code: 'PROVIDER_TIMEOUT', message: 'no answer for 10 s' },
];

interface Vendor {
  name: string;
  provider: string;
  kind: 'pipeline' | 'realtime';
  assistant: Record<string, unknown>;
  /** Makes the vendor fail with `error` (the call reaches it as its caller speaks, where it must). */
  fail(h: CallHarness, error: ProviderError): Promise<void>;
}

const VENDORS: Vendor[] = [
  {
    name: 'Deepgram STT',
    provider: 'deepgram',
    kind: 'pipeline',
    assistant: { stt_config: { provider: 'deepgram' } },
    fail: async (h, error) => h.stt.fail(error),
  },
  {
    name: 'OpenAI STT',
    provider: 'openai-stt',
    kind: 'pipeline',
    assistant: { stt_config: { provider: 'openai', model: 'gpt-4o-transcribe' } },
    fail: async (h, error) => h.stt.fail(error),
  },
  {
    name: 'OpenAI-compatible STT',
    provider: 'openai-compatible-stt',
    kind: 'pipeline',
    assistant: { stt_config: { provider: 'openai-compatible', model: 'whisper-1', base_url: 'http://whisper.example:8000' } },
    fail: async (h, error) => h.stt.fail(error),
  },
  {
    name: 'OpenAI chat completions LLM',
    provider: 'openai',
    kind: 'pipeline',
    assistant: { llm_config: { provider: 'openai', model: 'gpt-4o-mini' } },
    async fail(h, error) {
      h.llm.reply({ text: ['Let me ', 'check that '], chunkMs: 50, error });
      await h.caller.say('Hello there, can you help me?');
    },
  },
  ...(
    [
      ['ElevenLabs TTS', 'elevenlabs', { provider: 'elevenlabs', voice_id: 'EXAVITQu4vr4xnSDxMaL' }],
      ['OpenAI TTS', 'openai-tts', { provider: 'openai', voice_id: 'onyx' }],
      ['Cartesia TTS', 'cartesia', { provider: 'cartesia', voice_id: 'a0e99841-438c-4a64-b679-ae501e7d6091' }],
      ['Deepgram Aura TTS', 'deepgram-tts', { provider: 'deepgram', voice_id: 'aura-2-thalia-en' }],
      ['OpenAI-compatible TTS', 'openai-compatible-tts', { provider: 'openai-compatible', base_url: 'http://127.0.0.1:8880', model: 'kokoro', voice_id: 'af_bella' }],
    ] as const
  ).map(([name, provider, tts_config]): Vendor => ({
    name,
    // a voice's errors name it apart from its vendor's other kinds (`deepgram-tts`, `openai-tts`)
    provider,
    kind: 'pipeline',
    assistant: { tts_config },
    async fail(h, error) {
      h.tts.failOn = (text) => (text.includes('moment') ? error : null);
      h.llm.reply({ text: 'One moment please.' });
      await h.caller.say('Hello there, can you help me?');
    },
  })),
  {
    name: 'OpenAI Realtime',
    provider: 'openai-realtime',
    kind: 'realtime',
    assistant: { llm_config: { provider: 'openai-realtime', model: 'gpt-realtime-mini' } },
    fail: async (h, error) => h.realtime.session!.fail(error),
  },
  {
    name: 'Google Gemini Live',
    provider: 'google-live',
    kind: 'realtime',
    assistant: { llm_config: { provider: 'google-live', model: 'gemini-2.5-flash-native-audio-preview-09-2025' } },
    fail: async (h, error) => h.realtime.session!.fail(error),
  },
];

/** Each frame of a line plays right as the one before it ends: no gap inside what the assistant says. */
function gapsInsideLines(h: CallHarness): number[] {
  const gaps: number[] = [];
  let prev: { line: number; endsAt: number } | null = null;
  for (const f of h.transport.frames) {
    const v = h.voice.decode(f.frame);
    if (!v) continue;
    if (prev && prev.line === v.line && f.startsAt !== prev.endsAt) gaps.push(f.startsAt - prev.endsAt);
    prev = { line: v.line, endsAt: f.endsAt };
  }
  return gaps;
}

describe.each(VENDORS)('$name failing mid-call, a healthy call beside', (vendor) => {
  it.each(FAULTS)('$fault ($code): the faulty call ends pipeline-error-<provider>; the healthy call goes on', async ({ code, message }) => {
    const healthy = callHarness({ kind: vendor.kind, assistant: { ...vendor.assistant, first_message: GREETING } });
    await healthy.start();
    await healthy.advance(200);
    // the faulty call starts while the healthy one speaks its greeting
    const faulty = callHarness({ kind: vendor.kind, assistant: { ...vendor.assistant, first_message: FAULTY_GREETING } });
    await faulty.start();
    await faulty.until('the faulty greeting', () => faulty.heard().includes(FAULTY_GREETING));
    const failing = vendor.fail(faulty, new ProviderError(code, vendor.provider, message));
    await healthy.until('the healthy greeting', () => healthy.heard().includes(GREETING));
    await healthy.caller.say('Question 1 please.');
    await failing;
    const report = await faulty.untilEnded(10_000);
    await healthy.until('the reply to question 1', () => healthy.heard().some((t) => t.includes('Question 1')), 10_000);
    await healthy.caller.say('Question 2 please.');
    await healthy.until('the reply to question 2', () => healthy.heard().some((t) => t.includes('Question 2')), 10_000);
    healthy.caller.hangUp();
    const healthyReport = await healthy.untilEnded(5_000);

    const reason = `pipeline-error-${vendor.provider}`;
    expect(faulty.record).toMatchObject({ status: 'ended', ended_reason: reason });
    expect(report).toMatchObject({ ended_reason: reason, errors: [{ code, message: `${vendor.provider}: ${message}`, provider: vendor.provider }] });
    expect(faulty.notifier.statuses.at(-1)).toMatchObject({ status: 'ended', extra: { ended_reason: reason } });
    expect(faulty.transport.hangUps).toHaveLength(1);
    expect(faulty.transport.sentAfterClose).toBe(0);
    const sessions = vendor.kind === 'realtime' ? faulty.realtime.sessions : faulty.stt.sessions;
    expect(sessions.every((s) => s.closed)).toBe(true);

    expect(healthyReport.ended_reason).toBe('customer-ended-call');
    expect(healthyReport.errors).toEqual([]);
    expect(healthyReport.messages.map((m) => [m.role, m.content.replace(/^You said: /, '')])).toEqual([
      ['assistant', GREETING],
      ['user', 'Question 1 please.'],
      ['assistant', 'Question 1 please.'],
      ['user', 'Question 2 please.'],
      ['assistant', 'Question 2 please.'],
    ]);
    expect(gapsInsideLines(healthy)).toEqual([]);

    // afterwards, a new call to the same vendor is taken and carried through
    const next = callHarness({ kind: vendor.kind, assistant: { ...vendor.assistant, first_message: GREETING } });
    await next.start();
    await next.until('the new greeting', () => next.heard().includes(GREETING));
    await next.caller.say('Question 3 please.');
    await next.until('the reply to question 3', () => next.heard().some((t) => t.includes('Question 3')), 10_000);
    next.caller.hangUp();
    expect((await next.untilEnded(5_000)).ended_reason).toBe('customer-ended-call');
  });
});
