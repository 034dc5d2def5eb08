/**
 * The `openai-compatible` STT (src/providers/stt/openai-compatible.ts) against a real HTTP server
 * speaking OpenAI's `POST /v1/audio/transcriptions` (test/fakes/openai-transcriptions-http.ts),
 * itself checked with the official `openai` SDK: the caller's speech cut by our detector, each
 * stretch sent as a WAV, its text back as a final result and the end of speech, in order; each
 * way the server can fail is a ProviderError of `openai-compatible-stt`.
 */
import OpenAI, { toFile } from 'openai';
import { afterEach, describe, expect, it } from 'vitest';
import { catalogProblems } from '../../engine/catalog.js';
import { SttConfig } from '../../engine/schema.js';
import {
  clipWav,
  createOpenAiCompatibleStt,
  transcriptionFields,
  transcriptionsUrl,
  type OpenAiCompatibleSttOptions,
} from '../../src/providers/stt/openai-compatible.js';
import { ProviderError, type ProviderErrorCode, type SttSession, type Transcript } from '../../src/providers/types.js';
import { startFakeTranscriptions, type FakeTranscriptions, type FakeTranscriptionsScript } from '../fakes/openai-transcriptions-http.js';
import { VAD_FIXTURES } from '../helpers/vad-fixtures.js';

const FRAME = 160;
const SPEECH = VAD_FIXTURES.find((f) => f.file === 'speech-short.wav')!;
const BOOKING = VAD_FIXTURES.find((f) => f.file === 'speech-booking.wav')!;
const MODEL = 'Systran/faster-whisper-small';

let fake: FakeTranscriptions | undefined;
afterEach(async () => {
  await fake?.close();
  fake = undefined;
});

async function start(script: Partial<FakeTranscriptionsScript> = {}): Promise<FakeTranscriptions> {
  fake = await startFakeTranscriptions(script);
  return fake;
}

function recorder() {
  const r = { transcripts: [] as Transcript[], events: [] as string[], errors: [] as ProviderError[], closes: 0 };
  return {
    r,
    events: {
      onTranscript: (t: Transcript) => {
        r.transcripts.push(t);
        r.events.push(`final:${t.text}`);
      },
      onSpeechStarted: () => r.events.push('speech-started'),
      onUtteranceEnd: () => r.events.push('utterance-end'),
      onError: (e: ProviderError) => {
        r.errors.push(e);
        r.events.push(`error:${e.code}`);
      },
      onClose: () => {
        r.closes += 1;
        r.events.push('close');
      },
    },
  };
}

async function until(check: () => boolean, what: string, timeoutMs = 3_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`${what}: not in time`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** A clock the test moves: 20 ms per frame pushed, so seconds of audio take no time. */
function manualClock() {
  let t = 1_000;
  return { now: () => t, advance: (ms: number) => (t += ms) };
}

const silence = (ms: number) => Buffer.alloc(ms * 8, 0xff);

/** Plays `audio` in 20 ms frames on the manual clock. */
function play(session: SttSession, clock: ReturnType<typeof manualClock>, audio: Buffer): void {
  for (let i = 0; i < audio.length; i += FRAME) {
    session.sendAudio(audio.subarray(i, i + FRAME));
    clock.advance(20);
  }
}

async function open(f: { url: string }, options: OpenAiCompatibleSttOptions = {}, config: Partial<SttConfig> = {}) {
  const clock = manualClock();
  const { r: rec, events } = recorder();
  const stt = createOpenAiCompatibleStt({ timeouts: { firstTokenMs: 2_000 } }, { clock, ...options });
  const session = await stt.connect({ provider: 'openai-compatible', model: MODEL, base_url: f.url, ...config }, events);
  return { clock, rec, session };
}

describe('openai-compatible request', () => {
  it('posts to <base_url>/v1/audio/transcriptions, whether or not the base ends in /v1', () => {
    expect(transcriptionsUrl('http://whisper.local:8000')).toBe('http://whisper.local:8000/v1/audio/transcriptions');
    expect(transcriptionsUrl('https://h.example/api/v1/')).toBe('https://h.example/api/v1/audio/transcriptions');
  });

  it('sends the model, json, the language as ISO-639-1 and the keyterms as the prompt', () => {
    expect(transcriptionFields({ provider: 'openai-compatible', model: 'whisper-1' })).toEqual([['model', 'whisper-1'], ['response_format', 'json']]);
    expect(transcriptionFields({ provider: 'openai-compatible', model: 'm', language: 'en-US', keyterms: ['Switchboard', 'Tuesday'] })).toEqual([
      ['model', 'm'],
      ['response_format', 'json'],
      ['language', 'en'],
      ['prompt', 'Switchboard, Tuesday'],
    ]);
  });

  it('a block without base_url is refused by validation, naming the field', () => {
    expect(catalogProblems('stt', { provider: 'openai-compatible', model: MODEL }, 'stt_config', { allowRealtime: false })).toEqual([
      'stt_config.base_url: required for provider "openai-compatible" (the server\'s base URL)',
    ]);
    expect(catalogProblems('stt', { provider: 'openai-compatible', base_url: 'http://w:8000' }, 'stt_config', { allowRealtime: false })).toEqual([
      'stt_config.model: required for provider "openai-compatible"',
    ]);
    expect(SttConfig.safeParse({ provider: 'openai-compatible', base_url: 'ftp://x' }).success).toBe(false);
  });

  it('connect without base_url is a PROVIDER_HTTP_ERROR 400 of openai-compatible-stt', async () => {
    const stt = createOpenAiCompatibleStt({});
    const err = await stt.connect({ provider: 'openai-compatible', model: MODEL }, recorder().events).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'PROVIDER_HTTP_ERROR', provider: 'openai-compatible-stt', status: 400 });
  });
});

describe('the transcriptions fake against the official openai SDK', () => {
  it('audio.transcriptions.create sends a WAV with its fields and reads json, text and verbose_json', async () => {
    const f = await start({ apiKey: 'sk-local', transcribe: (r) => `heard ${Math.round(r.durationMs)} ms` });
    const client = new OpenAI({ apiKey: 'sk-local', baseURL: `${f.url}/v1` });
    const wav = clipWav(SPEECH.mulaw);
    const json = await client.audio.transcriptions.create({ file: await toFile(wav, 'speech.wav', { type: 'audio/wav' }), model: MODEL, language: 'en' });
    expect(json.text).toBe(`heard ${Math.round(SPEECH.mulaw.length / 8)} ms`);
    expect(f.requests[0]).toMatchObject({ fields: { model: MODEL, language: 'en' }, filename: 'speech.wav', sampleRate: 8000 });
    // the clip arrives as it was made: the μ-law decoded to 16-bit PCM
    expect(f.requests[0]!.pcm.length).toBe(SPEECH.mulaw.length);

    const text = await client.audio.transcriptions.create({ file: await toFile(wav, 'a.wav'), model: MODEL, response_format: 'text' });
    expect(text.trim()).toBe(json.text);
    const verbose = await client.audio.transcriptions.create({ file: await toFile(wav, 'a.wav'), model: MODEL, response_format: 'verbose_json' });
    expect(verbose.duration).toBeCloseTo(SPEECH.mulaw.length / 8000, 2);

    const refused = await new OpenAI({ apiKey: 'wrong', baseURL: `${f.url}/v1`, maxRetries: 0 }).audio.transcriptions
      .create({ file: await toFile(wav, 'a.wav'), model: MODEL })
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(OpenAI.AuthenticationError);
  });
});

describe('createOpenAiCompatibleStt', () => {
  it('sends a stretch of speech, with padding, as one WAV; its text comes back as a final and the end of speech', async () => {
    const f = await start({ transcribe: () => 'Yes, that is right.' });
    const { clock, rec, session } = await open(f, { paddingMs: 200 });
    play(session, clock, Buffer.concat([silence(600), SPEECH.mulaw, silence(800)]));
    await until(() => rec.events.includes('utterance-end'), 'the result');
    expect(rec.events).toEqual(['speech-started', 'final:Yes, that is right.', 'utterance-end']);
    expect(rec.transcripts[0]).toMatchObject({ isFinal: true, speechFinal: true });
    expect(f.requests).toHaveLength(1);
    const clip = f.requests[0]!;
    expect(clip).toMatchObject({ fields: { model: MODEL, response_format: 'json' }, fileType: 'audio/wav', sampleRate: 8000 });
    expect(clip.headers.authorization).toBeUndefined();
    // the speech (600 to 1744 ms) and 200 ms either side, as the detector placed it
    expect(clip.durationMs).toBeGreaterThan(1_144 + 200);
    expect(clip.durationMs).toBeLessThan(1_144 + 400 + 300);
    const t = rec.transcripts[0]!;
    expect(t.start! * 1000).toBeGreaterThan(200);
    expect(t.start! * 1000).toBeLessThan(600);
    expect(t.duration! * 1000).toBeCloseTo(clip.durationMs, 0);
    // silence alone sends nothing
    play(session, clock, silence(3_000));
    await new Promise((r) => setTimeout(r, 50));
    expect(f.requests).toHaveLength(1);
    await session.close();
    expect(rec.closes).toBe(1);
  });

  it('results come in the order spoken, whichever answer comes first', async () => {
    const f = await start({ perRequest: (r) => (r.index === 0 ? { delayMs: 300 } : undefined) });
    const { clock, rec, session } = await open(f);
    play(session, clock, Buffer.concat([silence(400), SPEECH.mulaw, silence(900), BOOKING.mulaw, silence(900)]));
    await until(() => rec.events.filter((e) => e === 'utterance-end').length === 2, 'two results');
    expect(rec.events).toEqual(['speech-started', 'speech-started', 'final:clip 1', 'utterance-end', 'final:clip 2', 'utterance-end']);
    await session.close();
  });

  it('speech that starts again within joinGapMs of its end is one clip; with no gap, two', async () => {
    const sentence = Buffer.concat([silence(400), SPEECH.mulaw, silence(350), SPEECH.mulaw, silence(900)]);
    const f = await start();
    const joined = await open(f);
    play(joined.session, joined.clock, sentence);
    await until(() => joined.rec.events.includes('utterance-end'), 'the joined clip');
    await joined.session.close();
    expect(f.requests).toHaveLength(1);
    expect(f.requests[0]!.durationMs).toBeGreaterThan(2 * 1_144 + 350);
    expect(joined.rec.events.filter((e) => e === 'speech-started').length).toBeGreaterThanOrEqual(2);
    expect(joined.rec.events.filter((e) => e !== 'speech-started')).toEqual(['final:clip 1', 'utterance-end', 'close']);

    const apart = await open(f, { joinGapMs: 0 });
    play(apart.session, apart.clock, sentence);
    await until(() => apart.rec.events.filter((e) => e === 'utterance-end').length === 2, 'two clips');
    await apart.session.close();
    expect(f.requests).toHaveLength(3);
  });

  it('a long stretch goes in parts of maxSegmentMs, the last one ending the speech', async () => {
    const f = await start();
    const { clock, rec, session } = await open(f, { maxSegmentMs: 1_500 });
    play(session, clock, Buffer.concat([silence(400), BOOKING.mulaw, silence(900)]));
    await until(() => rec.events.includes('utterance-end'), 'the last part');
    expect(f.requests.length).toBeGreaterThanOrEqual(2);
    expect(rec.transcripts.slice(0, -1).every((t) => t.isFinal && !t.speechFinal)).toBe(true);
    expect(rec.transcripts.at(-1)).toMatchObject({ isFinal: true, speechFinal: true });
    expect(rec.events.filter((e) => e === 'utterance-end')).toHaveLength(1);
    await session.close();
  });

  it('close() delivers what was already sent, then closes', async () => {
    const f = await start({ delayMs: 150 });
    const { clock, rec, session } = await open(f);
    play(session, clock, Buffer.concat([silence(400), SPEECH.mulaw, silence(600)]));
    await until(() => f.requests.length === 1, 'the request');
    await session.close();
    expect(rec.events).toEqual(['speech-started', 'final:clip 1', 'utterance-end', 'close']);
  });

  it('an abort drops the request in flight and reports nothing more', async () => {
    const f = await start({ fault: { type: 'hang' } });
    const clock = manualClock();
    const { r: rec, events } = recorder();
    const controller = new AbortController();
    const session = await createOpenAiCompatibleStt({}, { clock }).connect({ provider: 'openai-compatible', model: MODEL, base_url: f.url }, events, controller.signal);
    play(session, clock, Buffer.concat([silence(400), SPEECH.mulaw, silence(600)]));
    await until(() => f.requests.length === 1, 'the request');
    controller.abort();
    await f.waitForNoConnections();
    expect(rec.events).toEqual(['speech-started', 'close']);
    await session.close();
  });

  const FAULTS: Array<{ name: string; script: Partial<FakeTranscriptionsScript>; code: ProviderErrorCode; status?: number; message: RegExp }> = [
    { name: 'a 429', script: { fault: { type: 'status', status: 429, message: 'Rate limit reached' } }, code: 'PROVIDER_HTTP_ERROR', status: 429, message: /answered 429: Rate limit reached/ },
    { name: 'a 5xx', script: { fault: { type: 'status', status: 503, message: 'model loading' } }, code: 'PROVIDER_HTTP_ERROR', status: 503, message: /answered 503: model loading/ },
    { name: 'a wrong key (401)', script: { apiKey: 'sk-other' }, code: 'PROVIDER_AUTH', status: 401, message: /answered 401/ },
    { name: 'garbage (an HTML page with 200)', script: { fault: { type: 'garbage' } }, code: 'PROVIDER_PROTOCOL', message: /has no text: <html>/ },
    { name: 'a dropped connection', script: { fault: { type: 'drop' } }, code: 'PROVIDER_DISCONNECTED', message: /dropped the request/ },
    { name: 'no answer (hang)', script: { fault: { type: 'hang' } }, code: 'PROVIDER_TIMEOUT', message: /no transcription within 300 ms/ },
  ];

  it.each(FAULTS)('$name is $code of openai-compatible-stt, reported once; the session is closed', async ({ script, code, status, message }) => {
    const f = await start(script);
    const { clock, rec, session } = await open(f, { requestTimeoutMs: 300 });
    play(session, clock, Buffer.concat([silence(400), SPEECH.mulaw, silence(600)]));
    await until(() => rec.errors.length === 1, 'the error');
    expect(rec.errors[0]).toBeInstanceOf(ProviderError);
    expect(rec.errors[0]).toMatchObject({ code, provider: 'openai-compatible-stt', ...(status ? { status } : {}) });
    expect(rec.errors[0]!.message).toMatch(message);
    expect(rec.events).toEqual(['speech-started', `error:${code}`, 'close']);
    // more audio after the failure goes nowhere
    play(session, clock, Buffer.concat([SPEECH.mulaw, silence(600)]));
    await new Promise((r) => setTimeout(r, 30));
    expect(f.requests).toHaveLength(1);
    await session.close();
    await f.waitForNoConnections();
  });

  it('a server that refuses connections is PROVIDER_DISCONNECTED', async () => {
    const f = await start();
    const url = f.url;
    await f.close();
    fake = undefined;
    const { clock, rec, session } = await open({ url });
    play(session, clock, Buffer.concat([silence(400), SPEECH.mulaw, silence(600)]));
    await until(() => rec.errors.length === 1, 'the error');
    expect(rec.errors[0]).toMatchObject({ code: 'PROVIDER_DISCONNECTED', provider: 'openai-compatible-stt' });
    expect(rec.errors[0]!.message).toMatch(/ECONNREFUSED/);
    await session.close();
  });
});
