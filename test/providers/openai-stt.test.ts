/**
 * The `openai` STT (src/providers/stt/openai.ts): a Realtime transcription session against the
 * local fake (test/fakes/openai-transcription.ts), itself checked with the official `openai` SDK's
 * realtime WebSocket client. Turns cut by the server VAD or committed at `finalize()`, interim
 * deltas, finals in the order committed, and every way the vendor fails as a ProviderError of
 * `openai-stt`.
 */
import OpenAI from 'openai';
import { OpenAIRealtimeWS } from 'openai/realtime/ws';
import type { RealtimeServerEvent } from 'openai/resources/realtime/realtime';
import { afterEach, describe, expect, it } from 'vitest';
import type { SttConfig } from '../../engine/schema.js';
import { createOpenAiStt, transcriptionSession, transcriptionUrl, type OpenAiSttOptions } from '../../src/providers/stt/openai.js';
import { ProviderError, type ProviderErrorCode, type ProviderSettings, type SttSession, type Transcript } from '../../src/providers/types.js';
import {
  startFakeOpenAiTranscription,
  type FakeOpenAiTranscription,
  type FakeTranscriptionScript,
} from '../fakes/openai-transcription.js';
import { hasOpenssl } from '../fakes/self-signed.js';
import { VAD_FIXTURES } from '../helpers/vad-fixtures.js';

const FRAME = 160;
const SPEECH = VAD_FIXTURES.find((f) => f.file === 'speech-short.wav')!;
const silence = (ms: number) => Buffer.alloc(ms * 8, 0xff);
/** Speech, then enough quiet for the server VAD (500 ms) to end the turn. */
const TURN = Buffer.concat([silence(300), SPEECH.mulaw, silence(700)]);

let fake: FakeOpenAiTranscription | undefined;
afterEach(async () => {
  await fake?.close();
  fake = undefined;
});

async function start(script: Partial<FakeTranscriptionScript> = {}, options: { tls?: boolean } = {}) {
  fake = await startFakeOpenAiTranscription(script, options);
  return fake;
}

const settings = (f: { url: string; apiKey: string }, over: Partial<ProviderSettings> = {}): ProviderSettings => ({
  openai: { baseUrl: f.url, apiKey: f.apiKey },
  timeouts: { connectMs: 2_000 },
  ...over,
});

function recorder() {
  const r = { transcripts: [] as Transcript[], events: [] as string[], errors: [] as ProviderError[], closes: 0 };
  return {
    r,
    events: {
      onTranscript: (t: Transcript) => {
        r.transcripts.push(t);
        r.events.push(`${t.isFinal ? 'final' : 'interim'}:${t.text}`);
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

function play(session: SttSession, audio: Buffer): void {
  for (let i = 0; i < audio.length; i += FRAME) session.sendAudio(audio.subarray(i, i + FRAME));
}

async function open(f: FakeOpenAiTranscription, config: Partial<SttConfig> = {}, options: OpenAiSttOptions = {}) {
  const { r: rec, events } = recorder();
  const session = await createOpenAiStt(settings(f), options).connect({ provider: 'openai', ...config }, events);
  return { rec, session };
}

const finals = (rec: { events: string[] }) => rec.events.filter((e) => !e.startsWith('interim:'));

describe('OpenAI transcription session', () => {
  it('dials /v1/realtime?intent=transcription (ws for http), whether or not the base ends in /v1', () => {
    expect(transcriptionUrl('https://api.openai.com')).toBe('wss://api.openai.com/v1/realtime?intent=transcription');
    expect(transcriptionUrl('http://127.0.0.1:9/v1/')).toBe('ws://127.0.0.1:9/v1/realtime?intent=transcription');
    expect(transcriptionUrl('https://proxy.example/openai')).toBe('wss://proxy.example/openai/v1/realtime?intent=transcription');
  });

  it('asks for audio/pcmu, the model, the language, keyterms as the prompt, and server VAD unless endpointing is 0', () => {
    expect(transcriptionSession({ provider: 'openai' })).toEqual({
      type: 'transcription',
      audio: { input: { format: { type: 'audio/pcmu' }, transcription: { model: 'gpt-4o-transcribe' }, turn_detection: { type: 'server_vad' } } },
    });
    expect(transcriptionSession({ provider: 'openai', model: 'gpt-4o-mini-transcribe', language: 'de', keyterms: ['Acme', 'Zahnarzt'], endpointing: 700 })).toEqual({
      type: 'transcription',
      audio: {
        input: {
          format: { type: 'audio/pcmu' },
          transcription: { model: 'gpt-4o-mini-transcribe', language: 'de', prompt: 'Acme, Zahnarzt' },
          turn_detection: { type: 'server_vad', silence_duration_ms: 700 },
        },
      },
    });
    expect((transcriptionSession({ provider: 'openai', endpointing: 0 }).audio as { input: { turn_detection: unknown } }).input.turn_detection).toBeNull();
  });
});

describe.skipIf(!hasOpenssl)('the transcription fake against the official openai SDK', () => {
  it('OpenAIRealtimeWS configures a transcription session, streams μ-law and gets the turn transcribed', async () => {
    const f = await start({ transcribe: () => 'Yes, that is right.' }, { tls: true });
    const client = new OpenAI({ apiKey: f.apiKey, baseURL: `${f.url}/v1` });
    const rt = new OpenAIRealtimeWS({ model: 'gpt-4o-transcribe', options: { ca: f.ca! } }, client);
    const received: RealtimeServerEvent[] = [];
    const errors: unknown[] = [];
    rt.on('event', (e) => received.push(e));
    rt.on('error', (e) => errors.push(e));
    const seen = (type: string) => until(() => received.some((e) => e.type === type), `the SDK seeing ${type}`);

    await seen('session.created');
    // typed by the SDK's GA client events, so tsc checks this literal too
    rt.send({
      type: 'session.update',
      session: {
        type: 'transcription',
        audio: { input: { format: { type: 'audio/pcmu' }, transcription: { model: 'gpt-4o-transcribe', language: 'en' }, turn_detection: { type: 'server_vad', silence_duration_ms: 500 } } },
      },
    });
    await seen('session.updated');
    for (let i = 0; i < TURN.length; i += 800) rt.send({ type: 'input_audio_buffer.append', audio: TURN.subarray(i, i + 800).toString('base64') });
    await seen('conversation.item.input_audio_transcription.completed');
    const types = received.map((e) => e.type);
    expect(types.indexOf('input_audio_buffer.speech_started')).toBeLessThan(types.indexOf('input_audio_buffer.speech_stopped'));
    expect(types.indexOf('input_audio_buffer.speech_stopped')).toBeLessThan(types.indexOf('input_audio_buffer.committed'));
    const deltas = received.flatMap((e) => (e.type === 'conversation.item.input_audio_transcription.delta' ? [e.delta ?? ''] : []));
    expect(deltas.join('')).toBe('Yes, that is right.');
    const completed = received.find((e) => e.type === 'conversation.item.input_audio_transcription.completed');
    const committed = received.find((e) => e.type === 'input_audio_buffer.committed');
    expect(completed).toMatchObject({ transcript: 'Yes, that is right.', item_id: committed && 'item_id' in committed ? committed.item_id : 'none' });
    const started = received.find((e) => e.type === 'input_audio_buffer.speech_started');
    // the speech starts 300 ms into the audio (the fake's detector works in 20 ms steps)
    expect(started && 'audio_start_ms' in started ? started.audio_start_ms : -1).toBeGreaterThanOrEqual(280);
    expect(f.connections[0]!.url.searchParams.get('model')).toBe('gpt-4o-transcribe');

    // turn detection off: the client commits, and an empty commit is refused as OpenAI does
    rt.send({ type: 'session.update', session: { type: 'transcription', audio: { input: { turn_detection: null } } } });
    rt.send({ type: 'input_audio_buffer.clear' });
    rt.send({ type: 'input_audio_buffer.commit' });
    await until(() => errors.length === 1, 'the empty commit refused');
    rt.send({ type: 'input_audio_buffer.append', audio: SPEECH.mulaw.toString('base64') });
    rt.send({ type: 'input_audio_buffer.commit' });
    await until(() => received.filter((e) => e.type === 'conversation.item.input_audio_transcription.completed').length === 2, 'the committed turn');
    rt.close();
    expect(errors).toHaveLength(1);
  });
});

describe('createOpenAiStt', () => {
  it('sends the key, the session and the audio; the server VAD turn comes back as interims, a final and the end of speech', async () => {
    const f = await start({ transcribe: () => 'Yes, that is right.' });
    const { rec, session } = await open(f, { language: 'en' });
    const conn = f.connections[0]!;
    expect(conn.headers.authorization).toBe(`Bearer ${f.apiKey}`);
    expect(conn.url.searchParams.get('intent')).toBe('transcription');
    expect(conn.url.searchParams.has('model')).toBe(false);
    expect(conn.events[0]).toMatchObject({ type: 'session.update', session: transcriptionSession({ provider: 'openai', language: 'en' }) });
    play(session, TURN);
    await until(() => rec.events.includes('utterance-end'), 'the turn');
    expect(rec.events).toEqual(['speech-started', 'interim:Yes,', 'interim:Yes, that', 'interim:Yes, that is', 'interim:Yes, that is right.', 'final:Yes, that is right.', 'utterance-end']);
    expect(rec.transcripts.at(-1)).toMatchObject({ isFinal: true, speechFinal: true });
    // the audio went untouched, in appends of about 100 ms (not one message a frame)
    await until(() => conn.audioBytes === TURN.length, 'all the audio');
    const appends = conn.events.filter((e) => e.type === 'input_audio_buffer.append').length;
    expect(appends).toBeLessThanOrEqual(Math.ceil(TURN.length / 800) + 1);
    await session.close();
    expect(rec.closes).toBe(1);
    await until(() => f.openConnections() === 0, 'no connection left');
  });

  it('endpointing 0: no server VAD; finalize() commits what was said, and not less than 100 ms', async () => {
    const f = await start();
    const { rec, session } = await open(f, { endpointing: 0 });
    expect(f.connections[0]!.session).toMatchObject({ audio: { input: { turn_detection: null } } });
    play(session, silence(40));
    session.finalize();
    play(session, SPEECH.mulaw);
    session.finalize();
    await until(() => rec.events.includes('utterance-end'), 'the committed turn');
    expect(finals(rec)).toEqual(['final:turn 1', 'utterance-end']);
    expect(f.connections[0]!.events.filter((e) => e.type === 'input_audio_buffer.commit')).toHaveLength(1);
    expect(f.connections[0]!.turns[0]!.audioMs).toBeCloseTo((40 * 8 + SPEECH.mulaw.length) / 8, 0);
    await session.close();
  });

  it('finals come in the order the turns were committed, whichever is transcribed first', async () => {
    const f = await start({ transcriptDelayMs: (turn) => (turn.index === 0 ? 300 : 0) });
    const { rec, session } = await open(f, { endpointing: 0 });
    play(session, SPEECH.mulaw);
    session.finalize();
    play(session, SPEECH.mulaw);
    session.finalize();
    await until(() => rec.events.filter((e) => e === 'utterance-end').length === 2, 'both turns');
    expect(finals(rec)).toEqual(['final:turn 1', 'utterance-end', 'final:turn 2', 'utterance-end']);
    await session.close();
  });

  it('an abort mid-stream closes the socket and reports nothing but the close', async () => {
    const f = await start();
    const controller = new AbortController();
    const { r: rec, events } = recorder();
    const session = await createOpenAiStt(settings(f)).connect({ provider: 'openai' }, events, controller.signal);
    play(session, SPEECH.mulaw);
    controller.abort();
    expect(rec.events).toEqual(['close']);
    await until(() => f.openConnections() === 0, 'no connection left');
    await session.close();
  });

  it('no key: PROVIDER_AUTH of openai-stt without connecting', async () => {
    const err = await createOpenAiStt({ openai: { baseUrl: 'http://127.0.0.1:9' } }).connect({ provider: 'openai' }, recorder().events).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'PROVIDER_AUTH', provider: 'openai-stt', message: 'no OpenAI API key configured (OPENAI_API_KEY)' });
  });

  const AT_CONNECT: Array<{ name: string; script?: Partial<FakeTranscriptionScript>; key?: string; config?: Partial<SttConfig>; code: ProviderErrorCode; status?: number; message: RegExp }> = [
    { name: 'a wrong key (401)', key: 'sk-wrong', code: 'PROVIDER_AUTH', status: 401, message: /refused the transcription session \(401\): Incorrect API key/ },
    { name: 'a 429 on the upgrade', script: { fault: { type: 'refuse', status: 429 } }, code: 'PROVIDER_HTTP_ERROR', status: 429, message: /\(429\)/ },
    { name: 'a 5xx on the upgrade', script: { fault: { type: 'refuse', status: 503 } }, code: 'PROVIDER_HTTP_ERROR', status: 503, message: /\(503\)/ },
    { name: 'an upgrade never answered (hang)', script: { fault: { type: 'hang-upgrade' } }, code: 'PROVIDER_TIMEOUT', message: /no session within 300 ms/ },
    { name: 'a session refused (unknown model)', config: { model: 'whisper-9' }, code: 'PROVIDER_HTTP_ERROR', status: 400, message: /invalid_request_error \(invalid_value\): unknown transcription model "whisper-9"/ },
  ];

  it.each(AT_CONNECT)('at connect, $name is $code of openai-stt', async ({ script, key, config, code, status, message }) => {
    const f = await start(script);
    const { events } = recorder();
    const err = await createOpenAiStt(settings({ url: f.url, apiKey: key ?? f.apiKey }, { timeouts: { connectMs: 300 } }))
      .connect({ provider: 'openai', ...config }, events)
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ProviderError);
    expect(err).toMatchObject({ code, provider: 'openai-stt', ...(status ? { status } : {}) });
    expect((err as Error).message).toMatch(message);
    await until(() => f.openConnections() === 0, 'no connection left');
  });

  it('a server that refuses connections is PROVIDER_DISCONNECTED', async () => {
    const f = await start();
    const { url, apiKey } = f;
    await f.close();
    fake = undefined;
    const err = await createOpenAiStt(settings({ url, apiKey })).connect({ provider: 'openai' }, recorder().events).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'PROVIDER_DISCONNECTED', provider: 'openai-stt' });
    expect((err as Error).message).toMatch(/ECONNREFUSED/);
  });

  const MID_CALL: Array<{ name: string; script: Partial<FakeTranscriptionScript>; code: ProviderErrorCode; status?: number; message: RegExp }> = [
    { name: 'a dropped connection', script: { fault: { type: 'drop', afterBytes: 1_600 } }, code: 'PROVIDER_DISCONNECTED', message: /closed the transcription session \(1006\)/ },
    { name: 'garbage', script: { fault: { type: 'garbage', afterBytes: 1_600 } }, code: 'PROVIDER_PROTOCOL', message: /unreadable message from OpenAI: <html>/ },
    { name: 'a rate limit (429)', script: { fault: { type: 'error', afterBytes: 1_600, error: { type: 'rate_limit_error', code: 'rate_limit_exceeded', message: 'Rate limit reached' } } }, code: 'PROVIDER_HTTP_ERROR', status: 429, message: /rate_limit_error \(rate_limit_exceeded\): Rate limit reached/ },
    { name: 'a server error (5xx)', script: { fault: { type: 'error', afterBytes: 1_600, error: { type: 'server_error', message: 'The server had an error' } } }, code: 'PROVIDER_HTTP_ERROR', status: 500, message: /server_error: The server had an error/ },
    { name: 'transcripts that never come (hang)', script: { fault: { type: 'no-transcripts' } }, code: 'PROVIDER_TIMEOUT', message: /no transcript within 300 ms of the caller's turn/ },
  ];

  it.each(MID_CALL)('mid-call, $name is $code of openai-stt, reported once; the session is closed', async ({ script, code, status, message }) => {
    const f = await start(script);
    const { rec, session } = await open(f, {}, { transcriptTimeoutMs: 300 });
    play(session, TURN);
    await until(() => rec.errors.length === 1, 'the error');
    expect(rec.errors[0]).toMatchObject({ code, provider: 'openai-stt', ...(status ? { status } : {}) });
    expect(rec.errors[0]!.message).toMatch(message);
    expect(rec.events.filter((e) => e.startsWith('error:') || e === 'close')).toEqual([`error:${code}`, 'close']);
    expect(rec.events.at(-1)).toBe('close');
    play(session, TURN); // nothing more goes anywhere
    await session.close();
    await until(() => f.openConnections() === 0, 'no connection left');
  });
});
