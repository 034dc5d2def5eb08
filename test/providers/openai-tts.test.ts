import OpenAI from 'openai';
import { Agent, fetch as undiciFetch } from 'undici';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { TtsConfig } from '../../engine/schema.js';
import { mulawDecode, mulawEncode } from '../../src/audio/mulaw.js';
import { resample } from '../../src/audio/resample.js';
import { createOpenAiTts, splitSentences, type OpenAiTtsProvider } from '../../src/providers/tts/openai.js';
import type { ProviderSettings } from '../../src/providers/types.js';
import {
  defaultOpenAiTtsScript,
  FAKE_OPENAI_KEY,
  FAKE_PCM_RATE,
  startFakeOpenAiTts,
  toneSamples,
  type FakeOpenAiTts,
} from '../fakes/openai-tts.js';
import { fakeSettings, quietHandles, recorder, sleep, useFake } from '../helpers/tts.js';

let fake: FakeOpenAiTts;
const providers: OpenAiTtsProvider[] = [];
useFake(
  async () => (fake = await startFakeOpenAiTts()),
  async (f) => {
    await Promise.all(providers.splice(0).map((p) => p.close()));
    Object.assign(f.script, defaultOpenAiTtsScript());
    f.requests.length = 0;
  },
);

const config: TtsConfig = { provider: 'openai', voice_id: 'alloy' };

function provider(overrides: Partial<ProviderSettings['openai']> = {}, timeouts?: ProviderSettings['timeouts']) {
  const p = createOpenAiTts(fakeSettings('openai', { baseUrl: fake.url, apiKey: FAKE_OPENAI_KEY, ...overrides }, timeouts));
  providers.push(p);
  return p;
}

/** Share of the signal's energy at `hz` (Goertzel), 0..1. */
function toneShare(pcm: Int16Array, hz: number, rate: number): number {
  const w = (2 * Math.PI * hz) / rate;
  const coeff = 2 * Math.cos(w);
  let s1 = 0;
  let s2 = 0;
  let energy = 0;
  for (const x of pcm) {
    const s0 = x + coeff * s1 - s2;
    s2 = s1;
    s1 = s0;
    energy += x * x;
  }
  const power = s1 * s1 + s2 * s2 - coeff * s1 * s2;
  return energy === 0 ? 0 : (2 * power) / (pcm.length * energy);
}

function rms(pcm: Int16Array): number {
  let sum = 0;
  for (const x of pcm) sum += x * x;
  return Math.sqrt(sum / Math.max(1, pcm.length));
}

const padTo = (n: number, frame = 160) => Math.ceil(n / frame) * frame;

describe('OpenAI TTS adapter', () => {
  it('speaks each sentence in order as μ-law 8 kHz, a third of the 24 kHz samples, in whole frames', async () => {
    const tts = provider();
    const rec = recorder();
    const session = await tts.open(config, rec.events);
    session.sendText('Hello');
    session.sendText(' there.');
    session.flush();
    session.sendText(' How are');
    session.sendText(' you today?');
    session.end();
    expect(await rec.ended).toBe('done');
    expect(rec.doneCount).toBe(1);

    expect(fake.requests.map((r) => r.body?.input)).toEqual(['Hello there.', 'How are you today?']);
    const first = fake.requests[0]!;
    expect(first.headers.authorization).toBe(`Bearer ${FAKE_OPENAI_KEY}`);
    expect(first.body).toEqual({ model: 'gpt-4o-mini-tts', voice: 'alloy', response_format: 'pcm', input: 'Hello there.' });

    const in24k = ['Hello there.', 'How are you today?'].map((t) => toneSamples(fake.script, t).length);
    const out8k = in24k.map((n) => Math.ceil(n / 3));
    const audio = rec.audio();
    expect(audio.length).toBe(padTo(out8k[0]! + out8k[1]!));
    for (const c of rec.chunks) expect(c.length % 160).toBe(0);
    // Exactly what one-shot conversion of each sentence gives: chunk boundaries changed nothing.
    const expected = Buffer.concat(
      ['Hello there.', 'How are you today?'].map((t) => mulawEncode(resample(toneSamples(fake.script, t), FAKE_PCM_RATE, 8000))),
    );
    expect(audio.subarray(0, expected.length).equals(expected)).toBe(true);
    expect([...audio.subarray(expected.length)].every((b) => b === 0xff)).toBe(true);
  });

  it('a 1 kHz tone stays a 1 kHz tone at 8 kHz', async () => {
    const tts = provider();
    const rec = recorder();
    const session = await tts.open(config, rec.events);
    session.sendText('A single sentence of test tone.');
    session.end();
    expect(await rec.ended).toBe('done');
    const pcm = mulawDecode(rec.audio());
    const body = pcm.subarray(100, pcm.length - 300); // away from the edges
    expect(toneShare(body, 1000, 8000)).toBeGreaterThan(0.95);
    expect(rms(body)).toBeGreaterThan(8000 * 0.7 * 0.9); // a sine's RMS is 0.707 of its peak
  });

  it('low-passes before decimating: a 5 kHz tone does not fold back into the 8 kHz band', async () => {
    fake.script.toneHz = 5000; // above the 4 kHz Nyquist of telephone audio; dropping samples would alias it to 3 kHz
    const tts = provider();
    const rec = recorder();
    const session = await tts.open(config, rec.events);
    session.sendText('Too high to keep.');
    session.end();
    expect(await rec.ended).toBe('done');
    const pcm = mulawDecode(rec.audio());
    expect(rms(pcm.subarray(100, pcm.length - 300))).toBeLessThan(8000 * 0.707 * 0.02);
  });

  it('handles a 16-bit sample split across network chunks, even one byte at a time', async () => {
    fake.script.chunkSizes = [1, 3, 2, 5];
    const tts = provider();
    const rec = recorder();
    const session = await tts.open(config, rec.events);
    session.sendText('Odd.');
    session.end();
    expect(await rec.ended).toBe('done');
    const expected = mulawEncode(resample(toneSamples(fake.script, 'Odd.'), FAKE_PCM_RATE, 8000));
    expect(rec.audio().subarray(0, expected.length).equals(expected)).toBe(true);
  });

  it('sends model and speed from the config, and splits buffered text into sentences', async () => {
    const tts = provider();
    const rec = recorder();
    const session = await tts.open({ provider: 'openai', voice_id: 'coral', model: 'tts-1', speed: 1.5 }, rec.events);
    session.sendText('One. Two! Three?');
    session.end();
    expect(await rec.ended).toBe('done');
    expect(fake.requests.map((r) => r.body)).toEqual(
      ['One.', 'Two!', 'Three?'].map((input) => ({ model: 'tts-1', voice: 'coral', response_format: 'pcm', speed: 1.5, input })),
    );
    expect(splitSentences('  ')).toEqual([]);
    expect(splitSentences('x'.repeat(5000)).map((s) => s.length)).toEqual([4096, 904]);
  });

  it('gives the audio of a flushed sentence before the reply ends', async () => {
    const tts = provider();
    const rec = recorder();
    const session = await tts.open(config, rec.events);
    session.sendText('First part.');
    session.flush();
    await rec.audioAtLeast(160);
    expect(rec.doneCount).toBe(0);
    session.end();
    expect(await rec.ended).toBe('done');
    expect(fake.requests).toHaveLength(1);
  });

  it('an empty reply ends at once', async () => {
    const tts = provider();
    const rec = recorder();
    const session = await tts.open(config, rec.events);
    session.sendText('   ');
    session.end();
    expect(await rec.ended).toBe('done');
    expect(fake.requests).toHaveLength(0);
    expect(rec.audio().length).toBe(0);
  });

  it('cancel (barge-in) aborts the request: no more audio, the fake sees it closed, nothing left behind', async () => {
    fake.script.chunkDelayMs = 10;
    const before = await quietHandles();
    const tts = provider();
    const rec = recorder();
    const session = await tts.open(config, rec.events);
    session.sendText('A long sentence that the caller interrupts before it is over, as callers do.');
    session.flush();
    session.sendText('And a second sentence that is never asked for.');
    session.flush();
    await rec.audioAtLeast(160);
    session.cancel();
    const heard = rec.audio().length;
    await fake.waitForNoConnections();
    await sleep(60);
    expect(rec.audio().length).toBe(heard);
    expect(rec.doneCount).toBe(0);
    expect(rec.errors).toEqual([]);
    expect(fake.requests).toHaveLength(1);
    expect(fake.requests[0]!.aborted).toBe(true);
    expect(fake.requests[0]!.completed).toBe(false);
    expect(fake.openConnections()).toBe(0);
    expect(await quietHandles()).toEqual(before);
    session.sendText('ignored');
    session.end();
    await sleep(20);
    expect(fake.requests).toHaveLength(1);
  });

  it('cancel while waiting for the answer gives the request up at once', async () => {
    fake.script.headersDelayMs = 5_000;
    const tts = provider();
    const rec = recorder();
    const session = await tts.open(config, rec.events);
    session.sendText('Never answered.');
    session.end();
    while (fake.requests.length === 0) await sleep(5);
    session.cancel();
    await fake.waitForNoConnections();
    expect(fake.requests[0]!.aborted).toBe(true);
    expect(rec.audio().length).toBe(0);
    expect(rec.doneCount + rec.errors.length).toBe(0);
  });

  it('cancel through the AbortSignal', async () => {
    fake.script.chunkDelayMs = 10;
    const tts = provider();
    const rec = recorder();
    const controller = new AbortController();
    const session = await tts.open(config, rec.events, controller.signal);
    session.sendText('Interrupted through the signal.');
    session.end();
    await rec.audioAtLeast(160);
    controller.abort();
    const heard = rec.audio().length;
    await fake.waitForNoConnections();
    await sleep(40);
    expect(rec.audio().length).toBe(heard);
    expect(rec.doneCount).toBe(0);
    expect(fake.requests[0]!.aborted).toBe(true);
  });

  it('refuses to open without an API key, or without a voice', async () => {
    await expect(provider({ apiKey: undefined }).open(config, recorder().events)).rejects.toMatchObject({
      name: 'ProviderError',
      code: 'PROVIDER_AUTH',
      // the chat model's errors say `openai`: the voice's are told apart
      provider: 'openai-tts',
    });
    await expect(provider().open({ provider: 'openai' }, recorder().events)).rejects.toMatchObject({
      code: 'PROVIDER_HTTP_ERROR',
    });
  });

  it('a wrong key is PROVIDER_AUTH with the vendor message, reported once', async () => {
    const rec = recorder();
    const session = await provider({ apiKey: 'sk-wrong' }).open(config, rec.events);
    session.sendText('One. Two.');
    session.end();
    const err = await rec.ended;
    expect(err).toMatchObject({ code: 'PROVIDER_AUTH', status: 401 });
    expect((err as Error).message).toContain('Incorrect API key');
    await sleep(20);
    expect(rec.errors).toHaveLength(1);
    expect(fake.requests).toHaveLength(1); // the second sentence is not asked for
  });

  it('a vendor error is PROVIDER_HTTP_ERROR with its status and message', async () => {
    fake.script.error = { status: 500, message: 'The server had an error while processing your request.' };
    const rec = recorder();
    const session = await provider().open(config, rec.events);
    session.sendText('Hello.');
    session.end();
    expect(await rec.ended).toMatchObject({ code: 'PROVIDER_HTTP_ERROR', status: 500 });
    expect(rec.errors[0]!.message).toContain('The server had an error');

    const bad = recorder();
    const s2 = await provider().open({ provider: 'openai', voice_id: 'nobody' }, bad.events);
    fake.script.error = null;
    s2.sendText('Hello.');
    s2.end();
    expect(await bad.ended).toMatchObject({ code: 'PROVIDER_HTTP_ERROR', status: 400 });
    expect(bad.errors[0]!.message).toContain("Invalid value for 'voice'");
  });

  it('a JSON answer where audio was expected is PROVIDER_PROTOCOL', async () => {
    fake.script.jsonInsteadOfAudio = true;
    const rec = recorder();
    const session = await provider().open(config, rec.events);
    session.sendText('Hello.');
    session.end();
    expect(await rec.ended).toMatchObject({ code: 'PROVIDER_PROTOCOL' });
  });

  it('no answer in time is PROVIDER_TIMEOUT, and the request is given up', async () => {
    fake.script.headersDelayMs = Infinity;
    const rec = recorder();
    const session = await provider({}, { firstTokenMs: 150 }).open(config, rec.events);
    const started = Date.now();
    session.sendText('Hello?');
    session.end();
    expect(await rec.ended).toMatchObject({ code: 'PROVIDER_TIMEOUT' });
    expect(Date.now() - started).toBeLessThan(2_000);
    await fake.waitForNoConnections();
    expect(fake.requests[0]!.aborted).toBe(true);
  });

  it('a body that stalls mid-stream is PROVIDER_TIMEOUT', async () => {
    // undici checks its headers/body timers on a ~0.5 s tick, so the stall must be longer than that.
    fake.script.chunkDelayMs = 2_500;
    const rec = recorder();
    const session = await provider({}, { firstTokenMs: 150 }).open(config, rec.events);
    session.sendText('Slow.');
    session.end();
    expect(await rec.ended).toMatchObject({ code: 'PROVIDER_TIMEOUT' });
  });

  it('a connection dropped mid-stream is PROVIDER_DISCONNECTED, with no onDone', async () => {
    fake.script.dropAfterBytes = 3001;
    const rec = recorder();
    const session = await provider().open(config, rec.events);
    session.sendText('This answer is cut off by the network.');
    session.end();
    expect(await rec.ended).toMatchObject({ code: 'PROVIDER_DISCONNECTED' });
    expect(rec.doneCount).toBe(0);
  });

  it('a refused connection is PROVIDER_DISCONNECTED', async () => {
    const rec = recorder();
    const session = await provider({ baseUrl: 'http://127.0.0.1:9' }).open(config, rec.events);
    session.sendText('Anyone?');
    session.end();
    expect(await rec.ended).toMatchObject({ code: 'PROVIDER_DISCONNECTED' });
  });
});

describe('the OpenAI TTS fake, checked with the official SDK', () => {
  // The SDK's connections live in a pool of the test's own, closed after each test, so that no
  // pooled socket that the fake has closed is picked up by the next test.
  let pool: Agent;
  beforeEach(() => {
    pool = new Agent();
  });
  afterEach(async () => {
    await pool.close();
  });
  const sdk = (apiKey: string) =>
    new OpenAI({
      apiKey,
      baseURL: `${fake.url}/v1`,
      maxRetries: 0,
      fetch: ((url: string, init: Record<string, unknown>) =>
        undiciFetch(url, { ...init, dispatcher: pool })) as unknown as typeof fetch,
    });

  it('audio.speech.create() gets 24 kHz PCM, or WAV when asked', async () => {
    const client = sdk(FAKE_OPENAI_KEY);
    const response = await client.audio.speech.create({
      model: 'gpt-4o-mini-tts',
      voice: 'alloy',
      input: 'Hello from the SDK.',
      response_format: 'pcm',
    });
    expect(response.headers.get('content-type')).toBe('audio/pcm');
    const pcm = Buffer.from(await response.arrayBuffer());
    const expected = toneSamples(fake.script, 'Hello from the SDK.');
    expect(pcm.length).toBe(expected.length * 2);
    expect(pcm.readInt16LE(2 * 7)).toBe(expected[7]);
    expect(fake.requests[0]!.body).toEqual({
      model: 'gpt-4o-mini-tts',
      voice: 'alloy',
      input: 'Hello from the SDK.',
      response_format: 'pcm',
    });

    const wav = Buffer.from(
      await (await client.audio.speech.create({ model: 'tts-1', voice: 'nova', input: 'Hi.', response_format: 'wav' })).arrayBuffer(),
    );
    expect(wav.toString('ascii', 0, 4)).toBe('RIFF');
    expect(wav.readUInt32LE(24)).toBe(24_000);
    expect(wav.length).toBe(44 + toneSamples(fake.script, 'Hi.').length * 2);
  });

  it("errors come back as the SDK's typed errors", async () => {
    const wrong = sdk('sk-wrong');
    const auth = await wrong.audio.speech
      .create({ model: 'tts-1', voice: 'alloy', input: 'x', response_format: 'pcm' })
      .catch((e: unknown) => e);
    expect(auth).toBeInstanceOf(OpenAI.AuthenticationError);
    expect(auth).toMatchObject({ status: 401, code: 'invalid_api_key', type: 'invalid_request_error' });

    const client = sdk(FAKE_OPENAI_KEY);
    const bad = await client.audio.speech
      .create({ model: 'tts-1', voice: 'nobody' as 'alloy', input: 'x', response_format: 'pcm' })
      .catch((e: unknown) => e);
    expect(bad).toBeInstanceOf(OpenAI.BadRequestError);
    expect(bad).toMatchObject({ status: 400, param: 'voice' });

    fake.script.error = { status: 429, message: 'Rate limit reached', type: 'requests', code: 'rate_limit_exceeded' };
    const limited = await client.audio.speech
      .create({ model: 'tts-1', voice: 'alloy', input: 'x', response_format: 'pcm' })
      .catch((e: unknown) => e);
    expect(limited).toBeInstanceOf(OpenAI.RateLimitError);
  });
});
