/**
 * A pipeline call speaks through each socket and HTTP voice: the real Cartesia, Deepgram Aura and
 * OpenAI-compatible adapters, at their wire fakes over real sockets, in place of the scripted
 * voice. The fakes speak the harness's synthetic voice (Cartesia, Deepgram: μ-law passed
 * through), so the caller hears the greeting and the reply word for word; the OpenAI-compatible
 * server answers a tone in WAV, resampled to 8 kHz, so its lines are checked as sound.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { MULAW_SILENCE } from '../../src/audio/mulaw.js';
import { createCartesiaTts } from '../../src/providers/tts/cartesia.js';
import { createDeepgramTts } from '../../src/providers/tts/deepgram.js';
import { provider as openAiCompatible } from '../../src/providers/tts/openai-compatible.js';
import type { TtsProvider } from '../../src/providers/types.js';
import { FAKE_CARTESIA_KEY, startFakeCartesia } from '../fakes/cartesia.js';
import { FAKE_DEEPGRAM_SPEAK_KEY, startFakeDeepgramSpeak } from '../fakes/deepgram-speak.js';
import { startFakeOpenAiTts } from '../fakes/openai-tts.js';
import { callHarness, useFastCalls, type CallHarness } from '../helpers/call-harness.js';
import { fakeSettings } from '../helpers/tts.js';

useFastCalls();

const GREETING = 'Hello, this is the front desk.';
const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const close of closers.splice(0)) await close();
});

/** Every harness's voice, so that a fake can speak the one of the call it serves. */
let voiceOf: CallHarness | undefined;
const speakAs = (text: string) => voiceOf!.voice.speak(text.trim());

async function converse(h: CallHarness): Promise<void> {
  await h.start();
  await h.until('the greeting', () => h.heard().includes(GREETING), 20_000);
  await h.caller.say('I would like a table');
  await h.until('the reply', () => h.heard().some((t) => t.includes('I would like a table')), 20_000);
  h.caller.hangUp();
  const report = await h.untilEnded(5_000);
  expect(report.ended_reason).toBe('customer-ended-call');
  expect(report.errors).toEqual([]);
}

describe('a pipeline call speaks through the real adapter at its fake', () => {
  it('cartesia', async () => {
    const fake = await startFakeCartesia({ synthesize: speakAs });
    closers.push(() => fake.close());
    const tts = createCartesiaTts(fakeSettings('cartesia', { baseUrl: fake.url, apiKey: FAKE_CARTESIA_KEY }));
    const h = callHarness({ tts, assistant: { tts_config: { provider: 'cartesia', voice_id: 'a0e99841-438c-4a64-b679-ae501e7d6091' }, first_message: GREETING } });
    voiceOf = h;
    await converse(h);
    expect(fake.sockets.map((s) => s.generated.join('').trim())).toEqual([GREETING, 'You said: I would like a table.']);
  });

  it('deepgram (Aura)', async () => {
    const fake = await startFakeDeepgramSpeak({ synthesize: speakAs });
    closers.push(() => fake.close());
    const tts = createDeepgramTts(fakeSettings('deepgram', { baseUrl: fake.url, apiKey: FAKE_DEEPGRAM_SPEAK_KEY }));
    const h = callHarness({ tts, assistant: { tts_config: { provider: 'deepgram', voice_id: 'aura-2-thalia-en' }, first_message: GREETING } });
    voiceOf = h;
    await converse(h);
    expect(fake.sockets.map((s) => s.query.get('model'))).toEqual(['aura-2-thalia-en', 'aura-2-thalia-en']);
  });

  it('openai-compatible', async () => {
    const fake = await startFakeOpenAiTts({ apiKey: null, models: null, voices: null, wavRate: 22_050, samplesPerChar: 480 });
    closers.push(() => fake.close());
    const tts = openAiCompatible.create(fakeSettings('openai', { baseUrl: 'http://127.0.0.1:9' })) as TtsProvider & { close(): Promise<void> };
    closers.push(() => tts.close());
    const h = callHarness({
      tts,
      assistant: { tts_config: { provider: 'openai-compatible', base_url: fake.url, model: 'kokoro', voice_id: 'af_bella' }, first_message: GREETING },
    });
    await h.start();
    // a tone, not the synthetic voice: the greeting is heard as sound, as long as the fake made it
    const toneFrames = () => h.transport.frames.filter((f) => f.frame.some((b) => b !== MULAW_SILENCE)).length;
    const greetingMs = (GREETING.length * 480 * 1000) / 24_000;
    await h.until('the greeting', () => toneFrames() >= Math.floor(greetingMs / 20) - 1, 20_000);
    await h.advance(1_000);
    h.caller.hangUp();
    const report = await h.untilEnded(5_000);
    expect(report.errors).toEqual([]);
    expect(report.messages[0]).toMatchObject({ role: 'assistant', content: GREETING });
    expect(fake.requests.map((r) => r.body?.input)).toEqual([GREETING]);
  });
});
