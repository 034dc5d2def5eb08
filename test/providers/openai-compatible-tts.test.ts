import OpenAI from 'openai';
import { afterEach, describe, expect, it } from 'vitest';
import type { TtsConfig } from '../../engine/schema.js';
import { mulawEncode } from '../../src/audio/mulaw.js';
import { resample } from '../../src/audio/resample.js';
import { provider as declaration } from '../../src/providers/tts/openai-compatible.js';
import { wavData, type OpenAiTtsProvider } from '../../src/providers/tts/openai.js';
import type { ProviderSettings } from '../../src/providers/types.js';
import { defaultOpenAiTtsScript, startFakeOpenAiTts, toneSamples, type FakeOpenAiTts, type FakeOpenAiTtsScript } from '../fakes/openai-tts.js';
import { fakeSettings, recorder, useFake } from '../helpers/tts.js';
import { ALL_TTS_FAULTS, ttsFaultSuite, type TtsFault } from './tts-faults.js';

/** A server of one's own: no key, any model and voice, WAV at Piper's 22.05 kHz. */
const OWN_SERVER: Partial<FakeOpenAiTtsScript> = { apiKey: null, models: null, voices: null, wavRate: 22_050 };

let fake: FakeOpenAiTts;
useFake(
  async () => (fake = await startFakeOpenAiTts(OWN_SERVER)),
  (f) => {
    Object.assign(f.script, defaultOpenAiTtsScript(), OWN_SERVER);
    delete f.script.perRequest;
    delete f.script.garbage;
    delete f.script.streamedWav;
    delete f.script.pcmAlways;
    f.requests.length = 0;
  },
);

const adapters: OpenAiTtsProvider[] = [];
afterEach(async () => {
  await Promise.all(adapters.splice(0).map((a) => a.close()));
});
function adapter(timeouts?: ProviderSettings['timeouts']): OpenAiTtsProvider {
  // the server's OpenAI key is set: it must never be sent to a server of one's own
  const a = declaration.create(fakeSettings('openai', { baseUrl: 'http://127.0.0.1:9', apiKey: 'sk-the-servers-own' }, timeouts)) as OpenAiTtsProvider;
  adapters.push(a);
  return a;
}
const config = (): TtsConfig => ({ provider: 'openai-compatible', base_url: fake.url, model: 'kokoro', voice_id: 'af_bella' });

describe('the fake as a server of one\'s own, against the official openai SDK', () => {
  it('speaks any model and voice as WAV at its own rate, without a key', async () => {
    const client = new OpenAI({ baseURL: `${fake.url}/v1`, apiKey: 'unused' });
    const res = await client.audio.speech.create({ model: 'kokoro', voice: 'af_bella' as never, input: 'Hello there.', response_format: 'wav' });
    const wav = Buffer.from(await res.arrayBuffer());
    const found = wavData(wav);
    expect(found).toEqual({ offset: 44, rate: 22_050 });
    expect((wav.length - 44) / 2).toBe(toneSamples(fake.script, 'Hello there.', 1, 22_050).length);
    expect(fake.requests[0]!.body).toMatchObject({ model: 'kokoro', voice: 'af_bella', response_format: 'wav' });
  });
});

describe('openai-compatible TTS adapter', () => {
  it('asks base_url for WAV, sends no key, and resamples each sentence once to μ-law 8 kHz', async () => {
    const rec = recorder();
    const session = await adapter().open(config(), rec.events);
    session.sendText('Hello there.');
    session.flush();
    session.sendText(' How are you today?');
    session.end();
    expect(await rec.ended).toBe('done');
    expect(fake.requests.map((r) => r.body)).toEqual([
      { model: 'kokoro', voice: 'af_bella', response_format: 'wav', input: 'Hello there.' },
      { model: 'kokoro', voice: 'af_bella', response_format: 'wav', input: 'How are you today?' },
    ]);
    for (const r of fake.requests) expect(r.headers.authorization).toBeUndefined();
    // exactly one-shot conversion of each sentence from the header's rate: one resampling step
    const expected = Buffer.concat(
      ['Hello there.', 'How are you today?'].map((t) => mulawEncode(resample(toneSamples(fake.script, t, 1, 22_050), 22_050, 8000))),
    );
    const audio = rec.audio();
    expect(audio.length).toBe(Math.ceil(expected.length / 160) * 160);
    expect(audio.subarray(0, expected.length).equals(expected)).toBe(true);
    for (const c of rec.chunks) expect(c.length % 160).toBe(0);
  });

  it('reads a streamed WAV (unknown length) split byte by byte, and a 24 kHz one', async () => {
    Object.assign(fake.script, { streamedWav: true, chunkSizes: [1, 3, 2, 5, 41], wavRate: 24_000 });
    const rec = recorder();
    const session = await adapter().open(config(), rec.events);
    session.sendText('Odd.');
    session.end();
    expect(await rec.ended).toBe('done');
    const expected = mulawEncode(resample(toneSamples(fake.script, 'Odd.', 1, 24_000), 24_000, 8000));
    expect(rec.audio().subarray(0, expected.length).equals(expected)).toBe(true);
  });

  it('a server that answers raw PCM (audio/pcm) though WAV was asked is read as OpenAI\'s 24 kHz PCM', async () => {
    fake.script.pcmAlways = true;
    const rec = recorder();
    const session = await adapter().open(config(), rec.events);
    session.sendText('Raw.');
    session.end();
    expect(await rec.ended).toBe('done');
    const expected = mulawEncode(resample(toneSamples(fake.script, 'Raw.', 1, 24_000), 24_000, 8000));
    expect(rec.audio().subarray(0, expected.length).equals(expected)).toBe(true);
  });

  it('refuses to open without base_url, model or voice, naming openai-compatible-tts', async () => {
    const a = adapter();
    const { base_url: _, ...noUrl } = config();
    await expect(a.open(noUrl, recorder().events)).rejects.toMatchObject({ provider: 'openai-compatible-tts', message: expect.stringContaining('base_url') });
    await expect(a.open({ ...config(), model: undefined }, recorder().events)).rejects.toMatchObject({ provider: 'openai-compatible-tts', message: expect.stringContaining('model') });
    await expect(a.open({ ...config(), voice_id: undefined }, recorder().events)).rejects.toMatchObject({ provider: 'openai-compatible-tts', message: expect.stringContaining('voice_id') });
  });

  it('an answer that is not 16-bit mono WAV is PROVIDER_PROTOCOL', async () => {
    fake.script.garbage = { contentType: 'audio/wav', body: 'RIFF\u0000\u0000\u0000\u0000WAVEjunk' + 'x'.repeat(100) };
    const rec = recorder();
    const session = await adapter().open(config(), rec.events);
    session.sendText('Hi.');
    session.end();
    expect(await rec.ended).toMatchObject({ code: 'PROVIDER_PROTOCOL', provider: 'openai-compatible-tts' });
  });
});

const FAULTS: Record<Exclude<TtsFault, 'wrong-key'>, Partial<FakeOpenAiTtsScript>> = {
  'refuse-429': { error: { status: 429, message: 'Rate limit reached', type: 'requests' } },
  'refuse-503': { error: { status: 503, message: 'The server is overloaded' } },
  hang: { headersDelayMs: Infinity },
  silent: { chunkDelayMs: 5_000 },
  drop: { dropAfterBytes: 300 },
  garbage: { garbage: { contentType: 'text/html', body: '<html>502 Bad Gateway</html>' } },
  'error-message': { error: { status: 400, message: 'Unknown voice' } },
};

ttsFaultSuite('openai-compatible', ALL_TTS_FAULTS.filter((f) => f !== 'wrong-key'), () => ({
  provider: 'openai-compatible-tts',
  config: config(),
  adapter: (o = {}) => ({
    id: 'openai-compatible',
    open: (c, events, signal) => adapter(o.timeouts).open(o.baseUrl ? { ...c, base_url: o.baseUrl } : c, events, signal),
    close: () => Promise.all(adapters.splice(0).map((a) => a.close())).then(() => undefined),
  }),
  inject(fault) {
    // the first request fails: the faulty session's, which speaks first
    let first = true;
    fake.script.perRequest = () => {
      const fields = first ? FAULTS[fault as Exclude<TtsFault, 'wrong-key'>] : undefined;
      first = false;
      return fields;
    };
  },
}));
