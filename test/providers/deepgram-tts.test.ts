import { DeepgramClient } from '@deepgram/sdk';
import { describe, expect, it } from 'vitest';
import type { TtsConfig } from '../../engine/schema.js';
import { createDeepgramTts, deepgramSpeakUrl } from '../../src/providers/tts/deepgram.js';
import type { ProviderSettings } from '../../src/providers/types.js';
import {
  defaultDeepgramSpeakScript,
  FAKE_DEEPGRAM_SPEAK_KEY,
  startFakeDeepgramSpeak,
  type FakeDeepgramSpeak,
  type FakeDeepgramSpeakScript,
} from '../fakes/deepgram-speak.js';
import { audioForText, textFromAudio } from '../fakes/elevenlabs.js';
import { fakeSettings, quietHandles, recorder, sleep, useFake } from '../helpers/tts.js';
import { ALL_TTS_FAULTS, ttsFaultSuite, type TtsFault } from './tts-faults.js';

let fake: FakeDeepgramSpeak;
useFake(
  async () => (fake = await startFakeDeepgramSpeak()),
  (f) => {
    Object.assign(f.script, defaultDeepgramSpeakScript());
    delete f.script.perSocket;
    f.sockets.length = 0;
  },
);

const config: TtsConfig = { provider: 'deepgram', voice_id: 'aura-2-thalia-en' };

function settings(overrides: Partial<NonNullable<ProviderSettings['deepgram']>> = {}, timeouts?: ProviderSettings['timeouts']): ProviderSettings {
  return fakeSettings('deepgram', { baseUrl: fake.url, apiKey: FAKE_DEEPGRAM_SPEAK_KEY, ...overrides }, timeouts);
}

const until = async (probe: () => boolean, ms = 2_000) => {
  const deadline = Date.now() + ms;
  while (!probe()) {
    if (Date.now() > deadline) throw new Error('timed out');
    await sleep(5);
  }
};

describe('the Deepgram speak fake against the official SDK (@deepgram/sdk v5)', () => {
  it('Speak, Flush and Close: Metadata, binary audio in order, Flushed', async () => {
    const client = new DeepgramClient({ apiKey: FAKE_DEEPGRAM_SPEAK_KEY, baseUrl: fake.wsUrl });
    const socket = await client.speak.v1.connect({ model: 'aura-2-thalia-en', encoding: 'mulaw', sample_rate: '8000', reconnectAttempts: 0 });
    const messages: Array<Record<string, unknown>> = [];
    // the SDK hands binary audio over as Blobs, JSON messages parsed
    const audio: Blob[] = [];
    let closed = false;
    socket.on('message', (m: unknown) => {
      if (m instanceof Blob) audio.push(m);
      else messages.push(m as Record<string, unknown>);
    });
    socket.on('close', () => (closed = true));
    socket.connect();
    await socket.waitForOpen();
    socket.sendText({ type: 'Speak', text: 'Hello there. ' });
    socket.sendFlush({ type: 'Flush' });
    socket.sendText({ type: 'Speak', text: 'Bye.' });
    socket.sendFlush({ type: 'Flush' });
    await until(() => messages.filter((m) => m.type === 'Flushed').length === 2);
    socket.sendClose({ type: 'Close' });
    await until(() => closed);

    expect(messages.map((m) => m.type)).toEqual(['Metadata', 'Flushed', 'Flushed']);
    expect(messages[0]).toMatchObject({ model_name: 'aura-2-thalia-en' });
    const bytes = await Promise.all(audio.map(async (b) => Buffer.from(await b.arrayBuffer())));
    expect(textFromAudio(Buffer.concat(bytes))).toBe('Hello there. Bye.');
    const s = fake.sockets[0]!;
    expect(s.headers.authorization).toBe(`Token ${FAKE_DEEPGRAM_SPEAK_KEY}`);
    expect(s.query.get('encoding')).toBe('mulaw');
    expect(s.query.get('sample_rate')).toBe('8000');
    expect(s.messages.map((m) => m.type)).toEqual(['Speak', 'Flush', 'Speak', 'Flush', 'Close']);
  });

  it('refuses the SDK with a wrong key (401)', async () => {
    const client = new DeepgramClient({ apiKey: 'wrong', baseUrl: fake.wsUrl });
    const upgrades = fake.upgrades;
    const socket = await client.speak.v1.connect({ model: 'aura-2-thalia-en', reconnectAttempts: 0 });
    const failed = new Promise<void>((resolve) => {
      socket.on('error', () => resolve());
      socket.on('close', () => resolve());
    });
    socket.connect();
    await failed;
    socket.close();
    expect(fake.upgrades).toBe(upgrades + 1);
    expect(fake.sockets).toHaveLength(0);
  });
});

describe('Deepgram Aura adapter', () => {
  it('the socket address asks for μ-law 8 kHz and names the voice as the model', () => {
    expect(deepgramSpeakUrl('https://api.deepgram.com', 'aura-2-thalia-en')).toBe(
      'wss://api.deepgram.com/v1/speak?encoding=mulaw&sample_rate=8000&model=aura-2-thalia-en',
    );
  });

  it('streams text in, gets μ-law 8 kHz out in order, in whole frames, and ends once every Flush is answered', async () => {
    const rec = recorder();
    const session = await createDeepgramTts(settings()).open(config, rec.events);
    for (const piece of ['Hello', ' there', '. ']) session.sendText(piece);
    session.flush();
    for (const piece of ['How', ' are you', ' today?']) session.sendText(piece);
    session.end();
    expect(await rec.ended).toBe('done');
    expect(rec.doneCount).toBe(1);
    expect(rec.errors).toEqual([]);
    const s = fake.sockets[0]!;
    expect(s.generated).toEqual(['Hello there. ', 'How are you today?']);
    expect(rec.audio().equals(Buffer.concat(s.generated.map((t) => audioForText(t))))).toBe(true);
    for (const c of rec.chunks) expect(c.length % 160).toBe(0);
    expect(s.headers.authorization).toBe(`Token ${FAKE_DEEPGRAM_SPEAK_KEY}`);
    expect(Object.fromEntries(s.query)).toEqual({ encoding: 'mulaw', sample_rate: '8000', model: 'aura-2-thalia-en' });
    expect(s.messages.map((m) => m.type)).toEqual(['Speak', 'Speak', 'Speak', 'Flush', 'Speak', 'Speak', 'Speak', 'Flush']);
    await fake.waitForNoConnections();
  });

  it('with no voice, the catalog default (aura-2-thalia-en); a flush with nothing new sends nothing', async () => {
    const rec = recorder();
    const session = await createDeepgramTts(settings()).open({ provider: 'deepgram' }, rec.events);
    session.flush();
    session.sendText('Hi.');
    session.flush();
    session.flush();
    session.end();
    expect(await rec.ended).toBe('done');
    const s = fake.sockets[0]!;
    expect(s.query.get('model')).toBe('aura-2-thalia-en');
    expect(s.messages.map((m) => m.type)).toEqual(['Speak', 'Flush']);
  });

  it('a session that says nothing ends at once', async () => {
    const rec = recorder();
    const session = await createDeepgramTts(settings()).open(config, rec.events);
    session.end();
    expect(await rec.ended).toBe('done');
  });

  it('cancel (barge-in) closes the socket at once: no more audio, nothing left behind', async () => {
    fake.script.chunkDelayMs = 20;
    const before = await quietHandles();
    const rec = recorder();
    const session = await createDeepgramTts(settings()).open(config, rec.events);
    session.sendText('A rather long sentence that takes a while to speak.');
    session.flush();
    await rec.audioAtLeast(160);
    session.cancel();
    const heard = rec.audio().length;
    await sleep(100);
    expect(rec.audio().length).toBe(heard);
    expect(rec.doneCount).toBe(0);
    expect(rec.errors).toEqual([]);
    await fake.waitForNoConnections();
    expect(await quietHandles()).toEqual(before);
  });

  it('without DEEPGRAM_API_KEY it refuses to open, naming deepgram-tts (the transcriber stays deepgram)', async () => {
    await expect(createDeepgramTts(settings({ apiKey: undefined })).open(config, recorder().events)).rejects.toMatchObject({
      code: 'PROVIDER_AUTH',
      provider: 'deepgram-tts',
      message: expect.stringContaining('DEEPGRAM_API_KEY'),
    });
  });

  it('an unknown voice is refused at the upgrade with Deepgram\'s message', async () => {
    await expect(createDeepgramTts(settings()).open({ provider: 'deepgram', voice_id: 'nobody' }, recorder().events)).rejects.toMatchObject({
      code: 'PROVIDER_HTTP_ERROR',
      provider: 'deepgram-tts',
      status: 400,
      message: expect.stringContaining('No such model: nobody'),
    });
  });
});

const FAULTS: Record<TtsFault, Partial<FakeDeepgramSpeakScript>> = {
  'refuse-429': { refuseStatus: 429 },
  'refuse-503': { refuseStatus: 503 },
  'wrong-key': { apiKey: 'another-key' },
  hang: { hang: true },
  silent: { silent: true },
  drop: { dropAfterChunks: 1 },
  garbage: { garbageAfterChunks: 1 },
  'error-message': { errorAfterChunks: 1 },
};

ttsFaultSuite('Deepgram Aura', ALL_TTS_FAULTS, () => ({
  provider: 'deepgram-tts',
  config,
  adapter: (o = {}) => createDeepgramTts(settings(o.baseUrl ? { baseUrl: o.baseUrl } : {}, o.timeouts)),
  inject(fault) {
    let first = true;
    fake.script.perSocket = () => {
      const fields = first ? FAULTS[fault] : undefined;
      first = false;
      return fields;
    };
  },
}));
