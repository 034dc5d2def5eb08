/**
 * Pipeline calls that listen through the real `openai` and `openai-compatible` STT adapters, each
 * against its wire fake over a local socket (test/fakes/openai-transcription.ts,
 * openai-transcriptions-http.ts), on the fake clock: the caller's recorded speech
 * (test/fixtures/vad) makes a turn end to end (the reply comes, the record has the words), and a
 * vendor failing mid-call ends that call `pipeline-error-<vendor>-stt` while a call beside it, on
 * the same vendor and adapter, takes its turn.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createOpenAiStt } from '../../src/providers/stt/openai.js';
import { createOpenAiCompatibleStt } from '../../src/providers/stt/openai-compatible.js';
import type { SttProvider } from '../../src/providers/types.js';
import { startFakeOpenAiTranscription } from '../fakes/openai-transcription.js';
import { startFakeTranscriptions } from '../fakes/openai-transcriptions-http.js';
import { callHarness, useFastCalls, type CallHarness } from '../helpers/call-harness.js';
import { VAD_FIXTURES } from '../helpers/vad-fixtures.js';

useFastCalls();

const SPEECH = VAD_FIXTURES.find((f) => f.file === 'speech-short.wav')!;
const WORDS = SPEECH.words!;
const REPLY = `You said: ${WORDS.replace(/[.!?]+$/, '')}.`;
const GREETING = 'Hello, how can I help?';
/** The fixture, then a second of line silence (what a phone sends between words). */
const TURN = Buffer.concat([SPEECH.mulaw, Buffer.alloc(8_000, 0xff)]);

let closeFake: (() => Promise<void>) | null = null;
afterEach(async () => {
  await closeFake?.();
  closeFake = null;
});

interface Vendor {
  name: string;
  /** What `ended_reason` and `errors` name. */
  errorId: string;
  code: string;
  /**
   * Starts the fake (the n-th connection or request of a `faulty` call fails) and gives the
   * process's adapter and each call's `stt_config`.
   */
  setUp(): Promise<{ adapter: SttProvider; sttConfig(faulty: boolean): Record<string, unknown> }>;
}

const VENDORS: Vendor[] = [
  {
    name: 'openai (Realtime transcription)',
    errorId: 'openai-stt',
    code: 'PROVIDER_DISCONNECTED',
    async setUp() {
      // the healthy call connects first; the second connection drops once its caller has spoken a little
      const fake = await startFakeOpenAiTranscription({
        transcribe: () => WORDS,
        perConnection: ({ index }) => (index === 1 ? { fault: { type: 'drop', afterBytes: 4_000 } } : undefined),
      });
      closeFake = () => fake.close();
      return {
        adapter: createOpenAiStt({ openai: { baseUrl: fake.url, apiKey: fake.apiKey } }),
        sttConfig: () => ({ provider: 'openai', model: 'gpt-4o-mini-transcribe', language: 'en' }),
      };
    },
  },
  {
    name: 'openai-compatible (clips cut by our detector)',
    errorId: 'openai-compatible-stt',
    code: 'PROVIDER_HTTP_ERROR',
    async setUp() {
      const fake = await startFakeTranscriptions({
        transcribe: () => WORDS,
        perRequest: (r) => (r.fields.model === 'broken-whisper' ? { fault: { type: 'status', status: 503, message: 'model not loaded' } } : undefined),
      });
      closeFake = () => fake.close();
      return {
        adapter: createOpenAiCompatibleStt({}),
        sttConfig: (faulty) => ({ provider: 'openai-compatible', model: faulty ? 'broken-whisper' : 'whisper-small', base_url: fake.url }),
      };
    },
  },
];

async function startCall(adapter: SttProvider, sttConfig: Record<string, unknown>): Promise<CallHarness> {
  const h = callHarness({ assistant: { first_message: GREETING, stt_config: sttConfig }, sttAdapter: adapter });
  await h.start();
  await h.until('the greeting', () => h.heard().includes(GREETING), 10_000);
  return h;
}

describe.each(VENDORS)('a pipeline call listening through $name', (vendor) => {
  it('takes the caller\'s turn end to end: the words reach the model and the reply is heard', async () => {
    const { adapter, sttConfig } = await vendor.setUp();
    const h = await startCall(adapter, sttConfig(false));
    const spokeAt = await h.caller.play(TURN);
    const repliedAt = await h.until('the reply', () => h.heard().includes(REPLY), 10_000);
    // the reply follows the speech within the turn-taking delays (the vendor's answer over a local socket)
    expect(repliedAt - spokeAt).toBeLessThan(SPEECH.mulaw.length / 8 + 4_000);
    h.caller.hangUp();
    const report = await h.untilEnded(5_000);
    expect(report.ended_reason).toBe('customer-ended-call');
    expect(report.errors).toEqual([]);
    expect(report.messages.map((m) => [m.role, m.content])).toEqual([
      ['assistant', GREETING],
      ['user', WORDS],
      ['assistant', REPLY],
    ]);
  });

  it(`failing mid-call ends that call pipeline-error-${vendor.errorId}; a call beside it takes its turn`, async () => {
    const { adapter, sttConfig } = await vendor.setUp();
    const healthy = await startCall(adapter, sttConfig(false));
    const faulty = await startCall(adapter, sttConfig(true));
    await faulty.caller.play(TURN);
    const report = await faulty.untilEnded(10_000);
    expect(report.ended_reason).toBe(`pipeline-error-${vendor.errorId}`);
    expect(report.errors).toEqual([expect.objectContaining({ code: vendor.code, provider: vendor.errorId })]);
    expect(faulty.transport.hangUps).toHaveLength(1);

    await healthy.caller.play(TURN);
    await healthy.until('the healthy reply', () => healthy.heard().includes(REPLY), 10_000);
    healthy.caller.hangUp();
    const healthyReport = await healthy.untilEnded(5_000);
    expect(healthyReport.ended_reason).toBe('customer-ended-call');
    expect(healthyReport.errors).toEqual([]);
  });
});
