import { createRequire } from 'node:module';
import { connect as netConnect } from 'node:net';
import type CartesiaClient from '@cartesia/cartesia-js';
import { describe, expect, it } from 'vitest';
import type { TtsConfig } from '../../engine/schema.js';
import { CARTESIA_VERSION, createCartesiaTts } from '../../src/providers/tts/cartesia.js';
import type { ProviderSettings } from '../../src/providers/types.js';
import { defaultCartesiaScript, FAKE_CARTESIA_KEY, startFakeCartesia, type FakeCartesia, type FakeCartesiaScript } from '../fakes/cartesia.js';
import { audioForText, textFromAudio } from '../fakes/elevenlabs.js';
import { fakeSettings, quietHandles, recorder, sleep, useFake } from '../helpers/tts.js';
import { ALL_TTS_FAULTS, ttsFaultSuite, type TtsFault } from './tts-faults.js';

// The SDK's CommonJS build: its ESM build finds `ws` with a `require` that ES modules lack on Node 20.
const require = createRequire(import.meta.url);
const Cartesia = require('@cartesia/cartesia-js') as typeof CartesiaClient;
const { TTSWS } = require('@cartesia/cartesia-js/resources/tts/ws.js') as typeof import('@cartesia/cartesia-js/resources/tts/ws');
/** The SDK always dials wss: the same bytes go over plain TCP to the local fake. */
const plainTcp = { createConnection: (o: { port?: number | string; host?: string }) => netConnect(Number(o.port), o.host ?? '127.0.0.1') } as never;

let fake: FakeCartesia;
useFake(
  async () => (fake = await startFakeCartesia()),
  (f) => {
    Object.assign(f.script, defaultCartesiaScript());
    delete f.script.perSocket;
    f.sockets.length = 0;
  },
);

const VOICE = 'a0e99841-438c-4a64-b679-ae501e7d6091';
const config: TtsConfig = { provider: 'cartesia', voice_id: VOICE };

function settings(overrides: Partial<NonNullable<ProviderSettings['cartesia']>> = {}, timeouts?: ProviderSettings['timeouts']): ProviderSettings {
  return fakeSettings('cartesia', { baseUrl: fake.url, apiKey: FAKE_CARTESIA_KEY, ...overrides }, timeouts);
}

describe('the Cartesia fake against the official SDK (@cartesia/cartesia-js)', () => {
  it('a context speaks its transcripts in order, flushes and ends with done', async () => {
    const client = new Cartesia({ apiKey: FAKE_CARTESIA_KEY, baseURL: fake.url });
    const ws = await client.tts.websocket(plainTcp);
    const ctx = ws.context({
      model_id: 'sonic-2',
      voice: { mode: 'id', id: VOICE } as never,
      output_format: { container: 'raw', encoding: 'pcm_mulaw', sample_rate: 8000 },
    });
    await ctx.push({ transcript: 'Hello there. ', flush: true });
    await ctx.push({ transcript: 'How are you?' });
    await ctx.no_more_inputs();
    const types: string[] = [];
    const audio: Buffer[] = [];
    for await (const event of ctx.receive({ timeout: 2_000 })) {
      types.push(event.type);
      if (event.type === 'chunk') audio.push(Buffer.from(event.audio!));
    }
    ws.close();
    expect(types.at(-1)).toBe('done');
    expect(types).toContain('flush_done');
    expect(textFromAudio(Buffer.concat(audio))).toBe('Hello there. How are you?');
    const socket = fake.sockets[0]!;
    expect(socket.headers.authorization).toBe(`Bearer ${FAKE_CARTESIA_KEY}`);
    // the version the adapter sends is the SDK's
    expect(socket.headers['cartesia-version']).toBe(CARTESIA_VERSION);
    expect(socket.messages[0]).toMatchObject({ context_id: ctx.contextId, continue: true, model_id: 'sonic-2' });
    expect(socket.messages.at(-1)).toMatchObject({ transcript: '', continue: false });
  });

  it('refuses the SDK with a wrong key (401)', async () => {
    const client = new Cartesia({ apiKey: 'wrong', baseURL: fake.url });
    const upgrades = fake.upgrades;
    const ws = new TTSWS(client, plainTcp);
    const errors: unknown[] = [];
    ws.on('error', (e) => errors.push(e));
    await expect(ws.connect()).rejects.toThrow(/401/);
    expect(errors).toHaveLength(1);
    expect(fake.sockets).toHaveLength(0);
    expect(fake.upgrades).toBe(upgrades + 1);
  });
});

describe('Cartesia WebSocket adapter', () => {
  it('streams text in, gets μ-law 8 kHz out in order, in whole frames, and ends with onDone', async () => {
    const tts = createCartesiaTts(settings());
    const rec = recorder();
    const session = await tts.open(config, rec.events);
    for (const piece of ['Hello', ' there', '.']) session.sendText(piece);
    session.flush();
    for (const piece of [' How', ' are you', ' today?']) session.sendText(piece);
    session.end();
    expect(await rec.ended).toBe('done');
    expect(rec.doneCount).toBe(1);
    expect(rec.errors).toEqual([]);
    const socket = fake.sockets[0]!;
    expect(socket.generated).toEqual(['Hello there. ', ' How are you today? ']);
    expect(rec.audio().equals(Buffer.concat(socket.generated.map((t) => audioForText(t))))).toBe(true);
    for (const c of rec.chunks) expect(c.length % 160).toBe(0);

    expect(socket.headers.authorization).toBe(`Bearer ${FAKE_CARTESIA_KEY}`);
    expect(socket.headers['cartesia-version']).toBe(CARTESIA_VERSION);
    const contextId = socket.messages[0]!.context_id;
    expect(socket.messages).toEqual([
      expect.objectContaining({ transcript: 'Hello there. ', continue: true }),
      expect.objectContaining({ transcript: ' How are you today? ', continue: true }),
      expect.objectContaining({ transcript: '', continue: false }),
    ]);
    for (const m of socket.messages) {
      expect(m).toMatchObject({
        context_id: contextId,
        model_id: 'sonic-2',
        voice: { mode: 'id', id: VOICE },
        output_format: { container: 'raw', encoding: 'pcm_mulaw', sample_rate: 8000 },
      });
    }
    await fake.waitForNoConnections();
  });

  it('sends the model, language and speed asked for', async () => {
    const rec = recorder();
    const session = await createCartesiaTts(settings()).open({ ...config, model: 'sonic-turbo', language: 'fr', speed: 1.2 }, rec.events);
    session.sendText('Bonjour.');
    session.end();
    expect(await rec.ended).toBe('done');
    expect(fake.sockets[0]!.messages[0]).toMatchObject({ model_id: 'sonic-turbo', language: 'fr', generation_config: { speed: 1.2 } });
  });

  it('a session that says nothing ends at once, with no context opened', async () => {
    const rec = recorder();
    const session = await createCartesiaTts(settings()).open(config, rec.events);
    session.end();
    expect(await rec.ended).toBe('done');
    expect(fake.sockets[0]?.messages ?? []).toEqual([]);
  });

  it('a long sentence goes out at a word end before its flush', async () => {
    const rec = recorder();
    const session = await createCartesiaTts(settings()).open(config, rec.events);
    const long = `${'word '.repeat(60)}end`;
    session.sendText(long);
    await sleep(50);
    expect(fake.sockets[0]!.messages).toHaveLength(1);
    expect(fake.sockets[0]!.messages[0]!.transcript).toBe('word '.repeat(60));
    session.end();
    expect(await rec.ended).toBe('done');
  });

  it('cancel (barge-in) closes the socket at once: no more audio, nothing left behind', async () => {
    fake.script.chunkDelayMs = 20;
    const before = await quietHandles();
    const rec = recorder();
    const session = await createCartesiaTts(settings()).open(config, rec.events);
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

  it('refuses to open without an API key or a voice, naming the provider', async () => {
    await expect(createCartesiaTts(settings({ apiKey: undefined })).open(config, recorder().events)).rejects.toMatchObject({
      code: 'PROVIDER_AUTH',
      provider: 'cartesia',
      message: expect.stringContaining('CARTESIA_API_KEY'),
    });
    await expect(createCartesiaTts(settings()).open({ provider: 'cartesia' }, recorder().events)).rejects.toMatchObject({
      code: 'PROVIDER_HTTP_ERROR',
      provider: 'cartesia',
    });
  });

  it('a bad request answered with an error message fails the session with its text', async () => {
    const rec = recorder();
    const session = await createCartesiaTts(settings()).open({ ...config, voice_id: ' ' }, rec.events);
    session.sendText('Hi.');
    session.end();
    const err = await rec.ended;
    expect(err).toMatchObject({ code: 'PROVIDER_HTTP_ERROR', provider: 'cartesia', status: 400 });
  });
});

/** The faults, each for the fake's next socket only. */
const FAULTS: Record<TtsFault, Partial<FakeCartesiaScript>> = {
  'refuse-429': { refuseStatus: 429 },
  'refuse-503': { refuseStatus: 503 },
  'wrong-key': { apiKey: 'another-key' },
  hang: { hang: true },
  silent: { silent: true },
  drop: { dropAfterChunks: 1 },
  garbage: { garbageAfterChunks: 1 },
  'error-message': { errorAfterChunks: 1 },
};

ttsFaultSuite('Cartesia', ALL_TTS_FAULTS, () => ({
  provider: 'cartesia',
  config,
  adapter: (o = {}) => createCartesiaTts(settings(o.baseUrl ? { baseUrl: o.baseUrl } : {}, o.timeouts)),
  inject(fault) {
    let first = true;
    fake.script.perSocket = () => {
      const fields = first ? FAULTS[fault] : undefined;
      first = false;
      return fields;
    };
  },
}));
