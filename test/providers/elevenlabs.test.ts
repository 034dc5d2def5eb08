import { ElevenLabsClient, ElevenLabsError } from '@elevenlabs/elevenlabs-js';
import { describe, expect, it } from 'vitest';
import type { TtsConfig } from '../../engine/schema.js';
import { createElevenLabsTts, FRAME_BYTES } from '../../src/providers/tts/elevenlabs.js';
import { ProviderError, type ProviderSettings, type TtsSession } from '../../src/providers/types.js';
import {
  audioForText,
  defaultElevenLabsScript,
  FAKE_ELEVENLABS_KEY,
  startFakeElevenLabs,
  textFromAudio,
  type FakeElevenLabs,
} from '../fakes/elevenlabs.js';
import { fakeSettings, quietHandles, recorder, sleep, useFake } from '../helpers/tts.js';

let fake: FakeElevenLabs;
useFake(
  async () => (fake = await startFakeElevenLabs()),
  (f) => {
    Object.assign(f.script, defaultElevenLabsScript());
    f.sockets.length = 0;
    f.httpRequests.length = 0;
  },
);

const VOICE = 'JBFqnCBsd6RMkjVDRZzb';
const config: TtsConfig = { provider: 'elevenlabs', voice_id: VOICE };

function settings(overrides: Partial<ProviderSettings['elevenlabs']> = {}, timeouts?: ProviderSettings['timeouts']): ProviderSettings {
  return fakeSettings('elevenlabs', { baseUrl: fake.url, apiKey: FAKE_ELEVENLABS_KEY, ...overrides }, timeouts);
}

describe('ElevenLabs stream-input adapter', () => {
  it('streams text in, gets μ-law 8 kHz audio out in order, in whole frames, and ends with onDone', async () => {
    const tts = createElevenLabsTts(settings());
    const rec = recorder();
    const session = await tts.open(config, rec.events);
    for (const piece of ['Hello', ' there', '. How', ' are you', ' today?']) session.sendText(piece);
    session.end();
    expect(await rec.ended).toBe('done');
    expect(rec.doneCount).toBe(1);
    expect(rec.errors).toEqual([]);

    const expected = Buffer.concat(fake.sockets[0]!.generated.map((t) => audioForText(t)));
    expect(rec.audio().equals(expected)).toBe(true);
    expect(textFromAudio(rec.audio()).replace(/\s+/g, ' ').trim()).toBe('Hello there. How are you today?');
    for (const c of rec.chunks) expect(c.length % FRAME_BYTES).toBe(0);

    const socket = fake.sockets[0]!;
    expect(socket.voiceId).toBe(VOICE);
    expect(socket.headers['xi-api-key']).toBe(FAKE_ELEVENLABS_KEY);
    expect(socket.query.get('output_format')).toBe('ulaw_8000');
    expect(socket.query.get('model_id')).toBe('eleven_flash_v2_5');
    expect(socket.messages[0]).toMatchObject({ text: ' ' });
    expect(socket.messages[0]).not.toHaveProperty('xi-api-key');
    expect(socket.messages.at(-1)).toEqual({ text: '' });
    await fake.waitForNoConnections();
  });

  it('sends the model, language, normalization and voice settings the way the vendor takes them', async () => {
    const tts = createElevenLabsTts(settings());
    const rec = recorder();
    const session = await tts.open(
      {
        provider: 'elevenlabs',
        voice_id: 'voice with/slash',
        model: 'eleven_multilingual_v2',
        language: 'de',
        apply_text_normalization: 'on',
        stability: 0.3,
        similarity_boost: 0.8,
        style: 0.1,
        use_speaker_boost: false,
        speed: 1.1,
      },
      rec.events,
    );
    session.sendText('Guten Tag.');
    session.end();
    expect(await rec.ended).toBe('done');
    const socket = fake.sockets[0]!;
    expect(socket.voiceId).toBe('voice with/slash');
    expect(Object.fromEntries(socket.query)).toMatchObject({
      model_id: 'eleven_multilingual_v2',
      language_code: 'de',
      apply_text_normalization: 'on',
      output_format: 'ulaw_8000',
    });
    expect(socket.messages[0]).toEqual({
      text: ' ',
      voice_settings: { stability: 0.3, similarity_boost: 0.8, style: 0.1, use_speaker_boost: false, speed: 1.1 },
      generation_config: { chunk_length_schedule: expect.any(Array) },
    });
  });

  it('never splits a word across messages: every text message ends with whitespace', async () => {
    const tts = createElevenLabsTts(settings());
    const rec = recorder();
    const session = await tts.open(config, rec.events);
    for (const piece of ['Uns', 'een ', 'univ', 'ersity', ' diplo', 'mas', ' are ', 'rare', '.']) session.sendText(piece);
    session.end();
    expect(await rec.ended).toBe('done');
    const texts = fake.sockets[0]!.messages.slice(1, -1).map((m) => m.text as string);
    expect(texts.join('')).toBe('Unseen university diplomas are rare. ');
    for (const t of texts) expect(t).toMatch(/\s$/);
    expect(texts).toEqual(['Unseen ', 'university ', 'diplomas are ', 'rare. ']);
  });

  it('flushes at a sentence end: that sentence is spoken before the reply is over', async () => {
    const tts = createElevenLabsTts(settings());
    const rec = recorder();
    const session = await tts.open(config, rec.events);
    session.sendText('First sentence.');
    session.flush();
    // The vendor would otherwise wait for 50+ characters; the flush makes it speak now.
    await rec.audioAtLeast(audioForText('First sentence. ').length - FRAME_BYTES);
    expect(rec.doneCount).toBe(0);
    const flushMessage = fake.sockets[0]!.messages.find((m) => m.flush === true);
    expect(flushMessage).toEqual({ text: 'sentence. ', flush: true });

    session.sendText(' Second one.');
    session.flush();
    session.end();
    expect(await rec.ended).toBe('done');
    expect(fake.sockets[0]!.generated).toEqual(['First sentence. ', ' Second one. ']);
    expect(textFromAudio(rec.audio())).toBe('First sentence.  Second one. ');
  });

  it('completes the last frame with μ-law silence', async () => {
    fake.script.bytesPerChar = 100; // 3 characters = 300 bytes = 1 frame + 140 bytes
    const tts = createElevenLabsTts(settings());
    const rec = recorder();
    const session = await tts.open(config, rec.events);
    session.sendText('Hi!');
    session.end();
    expect(await rec.ended).toBe('done');
    const audio = rec.audio();
    const produced = audioForText('Hi! ', 100);
    expect(audio.length).toBe(Math.ceil(produced.length / FRAME_BYTES) * FRAME_BYTES);
    expect(audio.subarray(0, produced.length).equals(produced)).toBe(true);
    expect([...audio.subarray(produced.length)].every((b) => b === 0xff)).toBe(true);
  });

  it('treats a clean close after the end of input as done, even without isFinal', async () => {
    fake.script.omitFinal = true;
    const tts = createElevenLabsTts(settings());
    const rec = recorder();
    const session = await tts.open(config, rec.events);
    session.sendText('Bye now.');
    session.end();
    expect(await rec.ended).toBe('done');
    expect(textFromAudio(rec.audio())).toBe('Bye now. ');
  });

  it('cancel (barge-in) closes the socket at once: no more audio, nothing left behind', async () => {
    fake.script.audioDelayMs = 10;
    fake.script.chunkBytes = 320;
    const before = await quietHandles();
    const tts = createElevenLabsTts(settings());
    const rec = recorder();
    const session = await tts.open(config, rec.events);
    session.sendText('This is a long answer that the caller will interrupt halfway through.');
    session.flush();
    await rec.audioAtLeast(FRAME_BYTES);
    session.cancel();
    const heard = rec.audio().length;
    await fake.waitForNoConnections();
    await sleep(60); // several more audio intervals of the fake
    expect(rec.audio().length).toBe(heard);
    expect(heard).toBeLessThan(audioForText('This is a long answer that the caller will interrupt halfway through. ').length);
    expect(rec.doneCount).toBe(0);
    expect(rec.errors).toEqual([]);
    const socket = fake.sockets[0]!;
    expect(socket.closed).toBe(true);
    expect(socket.closeCode).toBe(1000);
    expect(fake.openConnections()).toBe(0);
    expect(await quietHandles()).toEqual(before);
    // Calls after cancel are ignored.
    session.sendText('more');
    session.flush();
    session.end();
    session.cancel();
    await sleep(20);
    expect(rec.audio().length).toBe(heard);
  });

  it('cancel through the AbortSignal, during the connection and after it', async () => {
    fake.script.handshakeDelayMs = 200;
    const tts = createElevenLabsTts(settings());
    const early = new AbortController();
    const opening = tts.open(config, recorder().events, early.signal);
    setTimeout(() => early.abort(), 20);
    await expect(opening).rejects.toMatchObject({ code: 'PROVIDER_ABORTED' });
    await fake.waitForNoConnections();

    fake.script.handshakeDelayMs = 0;
    fake.script.audioDelayMs = 10;
    const later = new AbortController();
    const rec = recorder();
    const session: TtsSession = await tts.open(config, rec.events, later.signal);
    session.sendText('Some words to say slowly.');
    session.flush();
    await rec.audioAtLeast(FRAME_BYTES);
    later.abort();
    const heard = rec.audio().length;
    await fake.waitForNoConnections();
    await sleep(40);
    expect(rec.audio().length).toBe(heard);
  });

  it('refuses to open without an API key (PROVIDER_AUTH), before any connection', async () => {
    const tts = createElevenLabsTts(settings({ apiKey: undefined }));
    await expect(tts.open(config, recorder().events)).rejects.toMatchObject({
      name: 'ProviderError',
      code: 'PROVIDER_AUTH',
      provider: 'elevenlabs',
    });
    expect(fake.sockets).toHaveLength(0);
  });

  it('a wrong key refused at the upgrade (HTTP 401) is PROVIDER_AUTH', async () => {
    const tts = createElevenLabsTts(settings({ apiKey: 'wrong' }));
    const err = await tts.open(config, recorder().events).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ProviderError);
    expect(err).toMatchObject({ code: 'PROVIDER_AUTH', status: 401 });
    expect((err as Error).message).toContain('Invalid API key');
  });

  it('a wrong key refused on the socket (error message, close 1008) is PROVIDER_AUTH', async () => {
    fake.script.authFailure = 'ws-error';
    const tts = createElevenLabsTts(settings({ apiKey: 'wrong' }));
    const rec = recorder();
    const session = await tts.open(config, rec.events);
    session.sendText('Hello.');
    const outcome = await rec.ended;
    expect(outcome).toMatchObject({ code: 'PROVIDER_AUTH' });
    expect(rec.errors).toHaveLength(1);
  });

  it("the vendor's error message mid-stream is PROVIDER_HTTP_ERROR, reported once, nothing after", async () => {
    fake.script.errorAfterAudioMessages = 1;
    fake.script.chunkBytes = 320;
    const tts = createElevenLabsTts(settings());
    const rec = recorder();
    const session = await tts.open(config, rec.events);
    session.sendText('An answer that fails on the way.');
    session.end();
    const outcome = await rec.ended;
    expect(outcome).toMatchObject({ code: 'PROVIDER_HTTP_ERROR' });
    expect((outcome as Error).message).toContain('something went wrong');
    await fake.waitForNoConnections();
    expect(rec.errors).toHaveLength(1);
    expect(rec.doneCount).toBe(0);
    expect(rec.audio().length).toBe(320);
  });

  it('a message that is not JSON is PROVIDER_PROTOCOL', async () => {
    fake.script.sendInvalidJson = true;
    const tts = createElevenLabsTts(settings());
    const rec = recorder();
    const session = await tts.open(config, rec.events);
    session.sendText('Hello.');
    session.end();
    expect(await rec.ended).toMatchObject({ code: 'PROVIDER_PROTOCOL' });
  });

  it('a connection that drops mid-stream is PROVIDER_DISCONNECTED', async () => {
    fake.script.dropAfterAudioMessages = 2;
    fake.script.chunkBytes = 320;
    const tts = createElevenLabsTts(settings());
    const rec = recorder();
    const session = await tts.open(config, rec.events);
    session.sendText('This reply will be cut off by the network.');
    session.end();
    expect(await rec.ended).toMatchObject({ code: 'PROVIDER_DISCONNECTED' });
    expect(rec.audio().length).toBe(640);
    expect(rec.doneCount).toBe(0);
  });

  it('a clean close before the end of input is PROVIDER_DISCONNECTED', async () => {
    fake.script.closeCleanlyAfterInit = true;
    const tts = createElevenLabsTts(settings());
    const rec = recorder();
    await tts.open(config, rec.events);
    expect(await rec.ended).toMatchObject({ code: 'PROVIDER_DISCONNECTED' });
  });

  it('a handshake that never completes is PROVIDER_TIMEOUT, and leaves no socket or timer', async () => {
    fake.script.handshakeDelayMs = Infinity;
    const before = await quietHandles();
    const tts = createElevenLabsTts(settings({}, { connectMs: 100 }));
    const started = Date.now();
    await expect(tts.open(config, recorder().events)).rejects.toMatchObject({ code: 'PROVIDER_TIMEOUT' });
    expect(Date.now() - started).toBeLessThan(1_000);
    await fake.waitForNoConnections();
    expect(await quietHandles()).toEqual(before);
  });

  it('no audio after a flush within the time limit is PROVIDER_TIMEOUT', async () => {
    fake.script.silent = true;
    const tts = createElevenLabsTts(settings({}, { firstTokenMs: 100 }));
    const rec = recorder();
    const session = await tts.open(config, rec.events);
    session.sendText('Anyone there?');
    session.flush();
    expect(await rec.ended).toMatchObject({ code: 'PROVIDER_TIMEOUT' });
    await fake.waitForNoConnections();
  });

  it('a refused connection is PROVIDER_DISCONNECTED', async () => {
    const tts = createElevenLabsTts(settings({ baseUrl: 'http://127.0.0.1:9' }));
    await expect(tts.open(config, recorder().events)).rejects.toMatchObject({ code: 'PROVIDER_DISCONNECTED' });
  });
});

describe('the ElevenLabs fake, checked with the official SDK', () => {
  it('textToSpeech.stream() gets ulaw_8000 audio in chunks', async () => {
    fake.script.audioDelayMs = 5;
    const client = new ElevenLabsClient({ apiKey: FAKE_ELEVENLABS_KEY, baseUrl: fake.url });
    const stream = await client.textToSpeech.stream(VOICE, {
      text: 'Checked with the SDK.',
      modelId: 'eleven_flash_v2_5',
      outputFormat: 'ulaw_8000',
      voiceSettings: { stability: 0.5, similarityBoost: 0.75 },
      applyTextNormalization: 'auto',
    });
    const parts: Buffer[] = [];
    for await (const chunk of stream) parts.push(Buffer.from(chunk));
    expect(parts.length).toBeGreaterThan(1);
    expect(Buffer.concat(parts).equals(audioForText('Checked with the SDK.'))).toBe(true);
    const req = fake.httpRequests[0]!;
    expect(req.path).toBe(`/v1/text-to-speech/${VOICE}/stream`);
    expect(req.query.get('output_format')).toBe('ulaw_8000');
    expect(req.headers['xi-api-key']).toBe(FAKE_ELEVENLABS_KEY);
    expect(req.body).toMatchObject({
      text: 'Checked with the SDK.',
      model_id: 'eleven_flash_v2_5',
      voice_settings: { stability: 0.5, similarity_boost: 0.75 },
      apply_text_normalization: 'auto',
    });
  });

  it('textToSpeech.convert() works too, and a wrong key is the SDK\'s 401 error', async () => {
    const client = new ElevenLabsClient({ apiKey: FAKE_ELEVENLABS_KEY, baseUrl: fake.url });
    const stream = await client.textToSpeech.convert(VOICE, { text: 'Hi.', outputFormat: 'ulaw_8000' });
    const parts: Buffer[] = [];
    for await (const chunk of stream) parts.push(Buffer.from(chunk));
    expect(Buffer.concat(parts).equals(audioForText('Hi.'))).toBe(true);

    const wrong = new ElevenLabsClient({ apiKey: 'wrong', baseUrl: fake.url, maxRetries: 0 });
    const err = await wrong.textToSpeech
      .stream(VOICE, { text: 'Hi.', outputFormat: 'ulaw_8000' })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ElevenLabsError);
    expect(err).toMatchObject({ statusCode: 401 });
    expect(JSON.stringify((err as ElevenLabsError).body)).toContain('invalid_api_key');
  });
});
