import { GoogleGenAI, Modality, type LiveServerMessage } from '@google/genai';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { mulawDecode, mulawEncode } from '../../src/audio/mulaw.js';
import { resample } from '../../src/audio/resample.js';
import { createGoogleLive } from '../../src/providers/realtime/google-live.js';
import { closeError, heardPart, liveUrl } from '../../src/providers/realtime/google-live-protocol.js';
import {
  ProviderError,
  type ProviderSettings,
  type RealtimeEvents,
  type RealtimeFunctionCall,
  type RealtimeSession,
  type RealtimeSessionOptions,
} from '../../src/providers/types.js';
import { FAKE_LIVE_KEY, startFakeGoogleLive, type ClientMessage, type FakeGoogleLive, type FakeLiveScript } from '../fakes/google-live.js';

/** μ-law 8 kHz of a loud 500 Hz tone (what the fake's VAD hears as speech). */
function speech(ms: number): Buffer {
  const pcm = new Int16Array(ms * 8);
  for (let i = 0; i < pcm.length; i++) pcm[i] = Math.round(9000 * Math.sin((2 * Math.PI * 500 * i) / 8000));
  return mulawEncode(pcm);
}

const OPTIONS: RealtimeSessionOptions = {
  instructions: 'You are the front desk of Acme Dental. Be brief.',
  tools: [
    {
      name: 'lookup_order',
      description: 'Find an order by its id',
      parameters: { type: 'object', properties: { order_id: { type: 'string' } }, required: ['order_id'] },
    },
    { name: 'end_call', parameters: { type: 'object', properties: {} } },
  ],
  turnDetection: { silenceDurationMs: 300, prefixPaddingMs: 200 },
};

function recorder() {
  const audio: Array<{ mulaw: Buffer; itemId: string }> = [];
  const transcripts: Array<{ role: string; text: string; final: boolean }> = [];
  const calls: RealtimeFunctionCall[] = [];
  const errors: ProviderError[] = [];
  const counts = { speechStarted: 0, speechStopped: 0, responseDone: 0, close: 0 };
  const events: RealtimeEvents = {
    onAudio: (mulaw, itemId) => audio.push({ mulaw, itemId }),
    onSpeechStarted: () => counts.speechStarted++,
    onSpeechStopped: () => counts.speechStopped++,
    onTranscript: (role, text, final) => transcripts.push({ role, text, final }),
    onFunctionCall: (call) => calls.push(call),
    onResponseDone: () => counts.responseDone++,
    onError: (err) => errors.push(err),
    onClose: () => counts.close++,
  };
  const until = (probe: () => boolean, what: string) => vi.waitFor(() => expect(probe(), what).toBe(true), { timeout: 5_000, interval: 5 });
  const bytes = (itemId?: string) => audio.filter((a) => itemId === undefined || a.itemId === itemId).reduce((n, a) => n + a.mulaw.length, 0);
  return { events, audio, transcripts, calls, errors, counts, until, bytes };
}

let fake: FakeGoogleLive | undefined;
let session: RealtimeSession | undefined;

afterEach(async () => {
  await session?.close();
  session = undefined;
  await fake?.close();
  fake = undefined;
});

const settings = (f: FakeGoogleLive, key: string | undefined = FAKE_LIVE_KEY): ProviderSettings => ({ google: { baseUrl: f.url, apiKey: key } });

async function connect(script: FakeLiveScript = {}, options = OPTIONS, model?: string) {
  fake = await startFakeGoogleLive(script);
  const rec = recorder();
  const debug = vi.fn();
  session = await createGoogleLive(settings(fake), { logger: { debug, warn: vi.fn() } }).connect({ provider: 'google-live', ...(model ? { model } : {}) }, options, rec.events);
  return { f: fake, rec, s: session, debug, conn: fake.connections[0]! };
}

const sent = (f: FakeGoogleLive, key: string): ClientMessage[] => f.connections.flatMap((c) => c.messages.filter((m) => key in m));

async function refusal(script: FakeLiveScript, key: string | undefined = FAKE_LIVE_KEY, model?: string): Promise<ProviderError> {
  fake = await startFakeGoogleLive(script);
  const rec = recorder();
  const err = await createGoogleLive({ ...settings(fake, key), timeouts: { connectMs: 300 } })
    .connect({ provider: 'google-live', ...(model ? { model } : {}) }, OPTIONS, rec.events)
    .then(() => null, (e: unknown) => e);
  expect(err).toBeInstanceOf(ProviderError);
  expect((err as ProviderError).provider).toBe('google-live');
  return err as ProviderError;
}

describe('liveUrl and helpers', () => {
  it('turns GOOGLE_API_BASE into the BidiGenerateContent WebSocket with the key', () => {
    expect(liveUrl('https://generativelanguage.googleapis.com', 'k1')).toBe(
      'wss://generativelanguage.googleapis.com/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent?key=k1',
    );
    expect(liveUrl('http://127.0.0.1:9/proxy/v1alpha/', 'a b')).toBe(
      'ws://127.0.0.1:9/proxy/ws/google.ai.generativelanguage.v1alpha.GenerativeService.BidiGenerateContent?key=a+b',
    );
  });

  it('what was heard of a reply: its words spread evenly over its audio', () => {
    expect(heardPart('one two three four', 500, 1000)).toBe('one two');
    expect(heardPart('one two three four', 0, 1000)).toBe('');
    expect(heardPart('', 500, 1000)).toBe('');
  });

  it('close frames map to codes: a bad key is AUTH, 1011/1013 vendor errors, others a drop', () => {
    expect(closeError(1008, 'API key not valid. Please pass a valid API key.').code).toBe('PROVIDER_AUTH');
    expect(closeError(1008, 'models/x is not found').status).toBe(400);
    expect(closeError(1011, 'Resource has been exhausted (e.g. check quota).').status).toBe(429);
    expect(closeError(1011, 'Internal error encountered.').status).toBe(500);
    expect(closeError(1013, '').status).toBe(503);
    expect(closeError(1006, '').code).toBe('PROVIDER_DISCONNECTED');
  });
});

describe('Gemini Live adapter against the fake', () => {
  it('sends setup with the model, voice, instructions, non-blocking functions, VAD and transcription; resolves on setupComplete', async () => {
    const { conn } = await connect({}, { ...OPTIONS, voice: 'Kore' }, 'gemini-2.5-flash-native-audio-preview-09-2025');
    expect(conn.messages[0]).toEqual({
      setup: {
        model: 'models/gemini-2.5-flash-native-audio-preview-09-2025',
        generationConfig: { responseModalities: ['AUDIO'], speechConfig: { voiceConfig: { prebuiltVoiceConfig: { voiceName: 'Kore' } } } },
        systemInstruction: { parts: [{ text: OPTIONS.instructions }] },
        tools: [
          {
            functionDeclarations: [
              { name: 'lookup_order', description: 'Find an order by its id', parametersJsonSchema: OPTIONS.tools[0]!.parameters, behavior: 'NON_BLOCKING' },
              { name: 'end_call', behavior: 'NON_BLOCKING' },
            ],
          },
        ],
        realtimeInputConfig: {
          automaticActivityDetection: { disabled: false, prefixPaddingMs: 200, silenceDurationMs: 300 },
          activityHandling: 'START_OF_ACTIVITY_INTERRUPTS',
        },
        inputAudioTranscription: {},
        outputAudioTranscription: {},
        contextWindowCompression: { slidingWindow: {} },
        sessionResumption: {},
      },
    });
    expect(conn.url.searchParams.get('key')).toBe(FAKE_LIVE_KEY);
    expect(conn.functions).toEqual(['lookup_order', 'end_call']);
  });

  it('uses the catalog default model and Puck by default; no tools field without functions', async () => {
    const { conn } = await connect({}, { instructions: 'Hi.', tools: [] });
    const setup = conn.messages[0]!.setup as Record<string, unknown>;
    expect(setup.model).toBe('models/gemini-live-2.5-flash-preview');
    expect(setup.generationConfig).toMatchObject({ speechConfig: { voiceConfig: { prebuiltVoiceConfig: { voiceName: 'Puck' } } } });
    expect(setup).not.toHaveProperty('tools');
  });

  it('audio both ways: μ-law 8 kHz goes up as PCM16 16 kHz, PCM16 24 kHz comes down as μ-law 8 kHz, one resampling each way', async () => {
    const reply = new Int16Array(24_000); // one second of a 300 Hz tone at 24 kHz
    for (let i = 0; i < reply.length; i++) reply[i] = Math.round(6000 * Math.sin((2 * Math.PI * 300 * i) / 24_000));
    const { rec, s, conn, debug } = await connect({ replies: [{ pcm: reply, transcript: 'Hello, how can I help?' }], userTranscripts: ['Hi there'] });
    const input = speech(400);
    for (let i = 0; i < input.length; i += 160) s.sendAudio(input.subarray(i, i + 160));
    await rec.until(() => rec.counts.responseDone === 1, 'the reply');

    // up: every chunk as audio/pcm;rate=16000, the same samples as one resampling of the whole
    expect([...conn.mimeTypes]).toEqual(['audio/pcm;rate=16000']);
    const up = Buffer.concat(conn.audio);
    const expectedUp = resample(mulawDecode(input), 8000, 16_000);
    expect(up.length / 2).toBeGreaterThan(expectedUp.length - 100); // the filter's delay is held back
    const upSamples = new Int16Array(up.buffer.slice(up.byteOffset, up.byteOffset + up.length));
    expect([...upSamples.subarray(0, 2000)]).toEqual([...expectedUp.subarray(0, 2000)]);

    // down: one item, exactly the one-shot resampling of the reply, μ-law encoded
    const itemIds = new Set(rec.audio.map((a) => a.itemId));
    expect(itemIds.size).toBe(1);
    const down = Buffer.concat(rec.audio.map((a) => a.mulaw));
    expect(down).toEqual(mulawEncode(resample(reply, 24_000, 8000)));
    expect(down.length).toBe(8000);

    // no voiceActivity from this server, and nothing to interrupt: the caller's speech is the server's own affair
    expect(rec.counts).toMatchObject({ speechStarted: 0, speechStopped: 0 });
    expect(rec.transcripts.filter((t) => t.final)).toEqual([
      { role: 'user', text: 'Hi there', final: true },
      { role: 'assistant', text: 'Hello, how can I help?', final: true },
    ]);
    // usage goes to the log (the call meters audio seconds itself)
    await vi.waitFor(() => expect(debug).toHaveBeenCalledWith(expect.objectContaining({ provider: 'google-live', usage: expect.objectContaining({ totalTokenCount: expect.any(Number) }) }), 'realtime usage'));
    expect(rec.errors).toEqual([]);
  });

  it('a function call is reported once; its result goes back as toolResponse (WHEN_IDLE) and the model answers it', async () => {
    const { rec, s, f } = await connect({
      replies: [
        { audioMs: 200, transcript: 'Let me check.', functionCalls: [{ name: 'lookup_order', args: { order_id: 'A-17' }, id: 'fc-1' }] },
        { audioMs: 300, transcript: 'It has shipped.' },
      ],
    });
    s.sendAudio(speech(200));
    await rec.until(() => rec.calls.length === 1, 'the function call');
    expect(rec.calls).toEqual([{ callId: 'fc-1', name: 'lookup_order', arguments: '{"order_id":"A-17"}' }]);
    // the call ends the reply as the owner sees it
    expect(rec.counts.responseDone).toBe(1);
    s.sendFunctionResult('fc-1', '{"status":"shipped"}');
    await rec.until(() => rec.transcripts.some((t) => t.final && t.text === 'It has shipped.'), 'the answer to the result');
    expect(sent(f, 'toolResponse')).toEqual([
      { toolResponse: { functionResponses: [{ id: 'fc-1', name: 'lookup_order', response: { status: 'shipped' }, scheduling: 'WHEN_IDLE' }] } },
    ]);
    const items = [...new Set(rec.audio.map((a) => a.itemId))];
    expect(items).toHaveLength(2);
    expect(rec.errors).toEqual([]);
  });

  it('a result taken silently (respond=false) is SILENT: the model says nothing; a non-object result is wrapped', async () => {
    const { rec, s, f } = await connect({ replies: [{ audioMs: 100, functionCalls: [{ name: 'end_call', id: 'fc-9' }] }] });
    s.sendAudio(speech(200));
    await rec.until(() => rec.calls.length === 1, 'the function call');
    await rec.until(() => rec.counts.responseDone >= 1, 'the turn');
    const done = rec.counts.responseDone;
    s.sendFunctionResult('fc-9', 'done', false);
    await new Promise((r) => setTimeout(r, 100));
    expect(sent(f, 'toolResponse')[0]).toEqual({ toolResponse: { functionResponses: [{ id: 'fc-9', name: 'end_call', response: { output: 'done' }, scheduling: 'SILENT' }] } });
    expect(rec.counts.responseDone).toBe(done);
    expect(rec.errors).toEqual([]);
  });

  it('barge-in: the caller speaking over the model is speech started; the turn ends there; truncate tells the model what was heard', async () => {
    const { rec, s, f, conn } = await connect({ replies: [{ audioMs: 3000, transcript: 'one two three four five six seven eight nine ten', intervalMs: 20 }, { audioMs: 100 }] });
    s.createResponse('Say exactly: "one two three four five six seven eight nine ten"');
    await rec.until(() => rec.bytes() >= 8 * 500, 'half a second of the reply');
    s.sendAudio(speech(100));
    await rec.until(() => rec.counts.speechStarted === 1, 'speech started');
    expect(conn.interruptions).toBe(1);
    expect(rec.counts.responseDone).toBe(1);
    const itemId = rec.audio[0]!.itemId;
    const before = rec.bytes(itemId);
    await new Promise((r) => setTimeout(r, 60));
    expect(rec.bytes(itemId)).toBe(before); // nothing more of the cut turn
    s.cancelResponse();
    const totalMs = before / 8;
    const said = rec.transcripts.filter((t) => t.role === 'assistant').at(-1)!.text;
    const heard = heardPart(said, totalMs / 2, totalMs);
    expect(heard).toMatch(/^one\b/);
    s.truncate(itemId, totalMs / 2);
    await vi.waitFor(() => expect(sent(f, 'clientContent').at(-1)).toEqual({
      clientContent: { turns: [{ role: 'user', parts: [{ text: `[The caller interrupted you and heard only this much of your last reply: "${heard}"]` }] }], turnComplete: false },
    }));
    // all of it heard: nothing to say
    const notes = sent(f, 'clientContent').length;
    s.truncate(itemId, 60_000);
    await new Promise((r) => setTimeout(r, 30));
    expect(sent(f, 'clientContent')).toHaveLength(notes);
    await rec.until(() => rec.counts.responseDone === 2, 'the reply to the caller');
    expect(rec.errors).toEqual([]);
  });

  it("voiceActivity, when the server sends it, is the caller's speech start and end", async () => {
    const { rec, s } = await connect({ voiceActivity: true, replies: [{ audioMs: 100 }] });
    s.sendAudio(speech(200));
    await rec.until(() => rec.counts.responseDone === 1, 'the reply');
    expect(rec.counts).toMatchObject({ speechStarted: 1, speechStopped: 1 });
  });

  it('createResponse is a client turn, one at a time (never cutting the model); its own tools are swapped in and back', async () => {
    const { rec, s, f, conn } = await connect({ replies: [{ audioMs: 400, intervalMs: 10 }, { audioMs: 100 }, { audioMs: 100 }] });
    s.createResponse('Say exactly: "Welcome."');
    s.createResponse(undefined);
    s.createResponse('Check in with the caller.', { tools: [] });
    await rec.until(() => rec.counts.responseDone === 3, 'three replies');
    expect(conn.interruptions).toBe(0);
    await vi.waitFor(() => expect(conn.messages).toHaveLength(6)); // the last contextUpdate is on its way
    expect(conn.messages.slice(1)).toEqual([
      { clientContent: { turns: [{ role: 'user', parts: [{ text: 'Say exactly: "Welcome."' }] }], turnComplete: true } },
      { clientContent: { turnComplete: true } },
      { contextUpdate: { tools: { tools: [] } } },
      { clientContent: { turns: [{ role: 'user', parts: [{ text: 'Check in with the caller.' }] }], turnComplete: true } },
      { contextUpdate: { tools: { tools: [{ functionDeclarations: [expect.objectContaining({ name: 'lookup_order' }), expect.objectContaining({ name: 'end_call' })] }] } } },
    ]);
    expect(conn.functions).toEqual(['lookup_order', 'end_call']); // back after the check-in
    expect(sent(f, 'contextUpdate')).toHaveLength(2);
  });

  it('a model turn that never completes holds our next turn only until the model has been quiet for a while', async () => {
    fake = await startFakeGoogleLive({ replies: [{ audioMs: 2000, intervalMs: 50 }] });
    const rec = recorder();
    const warn = vi.fn();
    session = await createGoogleLive(settings(fake), { logger: { debug: vi.fn(), warn }, blockedGiveUpMs: 200 }).connect({ provider: 'google-live' }, OPTIONS, rec.events);
    const conn = fake.connections[0]!;
    // the server starts a turn and says no more (no turnComplete)
    conn.send({ serverContent: { outputTranscription: { text: 'Hmm' } } });
    await rec.until(() => rec.transcripts.length === 1, 'the turn started');
    session.createResponse('Say exactly: "Still there?"');
    await new Promise((r) => setTimeout(r, 80));
    expect(sent(fake, 'clientContent')).toEqual([]); // waits while the turn may go on
    await vi.waitFor(() => expect(sent(fake!, 'clientContent')).toHaveLength(1), { timeout: 2_000 });
    expect(warn).toHaveBeenCalledWith(expect.objectContaining({ serverOpen: true }), expect.stringContaining('quiet'));
    expect(rec.counts.responseDone).toBe(1); // the stalled turn is over for the owner
  });

  it('update() is a contextUpdate of the instructions and functions; addMessage a note that asks no reply', async () => {
    const { s, f, conn } = await connect();
    s.update({ instructions: 'Now take a booking.', tools: [{ name: 'book', parameters: { type: 'object', properties: { day: { type: 'string' } } } }] });
    s.addMessage!('system', 'The caller is a VIP.');
    s.addMessage!('user', 'I am in a hurry.');
    await vi.waitFor(() => expect(conn.messages).toHaveLength(4));
    expect(conn.instructions).toBe('Now take a booking.');
    expect(conn.functions).toEqual(['book']);
    expect(sent(f, 'clientContent')).toEqual([
      { clientContent: { turns: [{ role: 'user', parts: [{ text: '[System note: The caller is a VIP.]' }] }], turnComplete: false } },
      { clientContent: { turns: [{ role: 'user', parts: [{ text: 'I am in a hurry.' }] }], turnComplete: false } },
    ]);
  });

  it('close() ends the socket cleanly (1000), once; nothing goes out afterwards', async () => {
    const { rec, s, conn } = await connect({ replies: [{ audioMs: 100 }] });
    s.sendAudio(speech(100));
    await rec.until(() => rec.counts.responseDone === 1, 'a reply');
    await s.close();
    await s.close();
    await conn.whenClosed;
    expect(conn.closeCode).toBe(1000);
    expect(rec.counts.close).toBe(1);
    expect(rec.errors).toEqual([]);
    const count = conn.messages.length;
    s.sendAudio(speech(100));
    s.createResponse('x');
    await new Promise((r) => setTimeout(r, 20));
    expect(conn.messages.length).toBe(count);
  });
});

describe('Gemini Live: a session outlives its connection', () => {
  it('goAway: the session resumes on a new connection with its handle and current instructions; the old one is left', async () => {
    const { rec, s, f, conn } = await connect({ goAwayAfterTurns: 1, replies: [{ audioMs: 200, transcript: 'First.', intervalMs: 10 }, { audioMs: 200, transcript: 'Second.' }] });
    s.createResponse('Say exactly: "First."');
    s.update({ instructions: 'Now take a booking.' });
    await vi.waitFor(() => expect(f.connections[1]?.setup).toBeTruthy(), { timeout: 3_000 });
    const next = f.connections[1]!;
    expect(next.resumedFrom).toMatch(/^live-handle-/);
    expect(next.instructions).toBe('Now take a booking.');
    await conn.whenClosed;
    s.createResponse('Say exactly: "Second."');
    await rec.until(() => rec.counts.responseDone === 2, 'the reply on the new connection');
    expect(rec.transcripts.filter((t) => t.final).map((t) => t.text)).toEqual(['First.', 'Second.']);
    expect(sent(f, 'clientContent').map((m) => f.connections.findIndex((c) => c.messages.includes(m)))).toEqual([0, 1]);
    expect(rec.errors).toEqual([]);
    expect(rec.counts.close).toBe(0);
    await s.close();
    await next.whenClosed;
    expect(next.closeCode).toBe(1000);
    expect(rec.counts.close).toBe(1);
  });

  it('a session that cannot be resumed ends when its connection closes (PROVIDER_DISCONNECTED)', async () => {
    let upgrades = 0;
    const { rec, s } = await connect({
      goAwayAfterTurns: 1,
      replies: [{ audioMs: 100 }],
      perConnection: ({ model }) => (model === null && ++upgrades === 2 ? { refuseUpgrade: { status: 503 } } : undefined),
    });
    s.createResponse();
    await rec.until(() => rec.counts.close === 1, 'the close');
    expect(upgrades).toBe(2);
    expect(rec.errors.map((e) => e.code)).toEqual(['PROVIDER_DISCONNECTED']);
  });
});

describe('Gemini Live faults: each a ProviderError of google-live', () => {
  it('a wrong key is PROVIDER_AUTH (Google closes 1008); no key never dials', async () => {
    const err = await refusal({}, 'AIza-wrong');
    expect(err).toMatchObject({ code: 'PROVIDER_AUTH' });
    expect(err.message).toContain('API key not valid');
    await expect(createGoogleLive({ google: { baseUrl: fake!.url } }).connect({ provider: 'google-live' }, OPTIONS, recorder().events)).rejects.toMatchObject({ code: 'PROVIDER_AUTH', provider: 'google-live' });
  });

  it.each([429, 500, 503])('HTTP %i at the upgrade is PROVIDER_HTTP_ERROR with its status', async (status) => {
    const err = await refusal({ refuseUpgrade: { status } });
    expect(err).toMatchObject({ code: 'PROVIDER_HTTP_ERROR', status });
    expect(err.message).toContain(`HTTP ${status}`);
  });

  it('a model Google does not serve is refused (1008 → 400)', async () => {
    const err = await refusal({}, FAKE_LIVE_KEY, 'gemini-nope');
    expect(err).toMatchObject({ code: 'PROVIDER_HTTP_ERROR', status: 400 });
    expect(err.message).toContain('models/gemini-nope is not found');
  });

  it('no setupComplete in time is PROVIDER_TIMEOUT, and the socket is closed', async () => {
    const err = await refusal({ silent: true });
    expect(err.code).toBe('PROVIDER_TIMEOUT');
    await fake!.connections[0]!.whenClosed;
  });

  it('a connection refused at TCP level is PROVIDER_DISCONNECTED', async () => {
    fake = await startFakeGoogleLive();
    const url = fake.url;
    await fake.close();
    fake = undefined;
    const err = await createGoogleLive({ google: { baseUrl: url, apiKey: FAKE_LIVE_KEY } }).connect({ provider: 'google-live' }, OPTIONS, recorder().events).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'PROVIDER_DISCONNECTED', provider: 'google-live' });
  });

  it('a drop mid-reply is onError PROVIDER_DISCONNECTED, then onClose', async () => {
    const { rec, s } = await connect({ dropAfterChunks: 2, replies: [{ audioMs: 1000 }] });
    s.sendAudio(speech(100));
    await rec.until(() => rec.counts.close === 1, 'the close');
    expect(rec.errors.map((e) => e.code)).toEqual(['PROVIDER_DISCONNECTED']);
  });

  it('garbage mid-reply is PROVIDER_PROTOCOL', async () => {
    const { rec, s } = await connect({ garbageAfterChunks: 1, replies: [{ audioMs: 200 }] });
    s.sendAudio(speech(100));
    await rec.until(() => rec.errors.length > 0, 'the error');
    expect(rec.errors[0]).toMatchObject({ code: 'PROVIDER_PROTOCOL', provider: 'google-live' });
  });

  it('a close of Google after setup (quota exhausted, 1011) is a vendor error mid-call', async () => {
    fake = await startFakeGoogleLive({ closeAfterSetup: { code: 1011, reason: 'Resource has been exhausted (e.g. check quota).' } });
    const rec = recorder();
    const outcome = await createGoogleLive(settings(fake)).connect({ provider: 'google-live' }, OPTIONS, rec.events).then((s) => s, (e: unknown) => e);
    // the close may beat setupComplete to the adapter or follow it: either way it is this error
    const err = outcome instanceof ProviderError ? outcome : (await rec.until(() => rec.errors.length > 0, 'the error'), rec.errors[0]);
    expect(err).toMatchObject({ code: 'PROVIDER_HTTP_ERROR', status: 429, provider: 'google-live' });
  });

  it('an abort signal cancels a pending connect', async () => {
    fake = await startFakeGoogleLive({ silent: true });
    const abort = new AbortController();
    const pending = createGoogleLive(settings(fake)).connect({ provider: 'google-live' }, OPTIONS, recorder().events, abort.signal);
    setTimeout(() => abort.abort(), 20);
    await expect(pending).rejects.toMatchObject({ code: 'PROVIDER_ABORTED' });
  });
});

describe('the official @google/genai SDK against the fake', () => {
  it('ai.live.connect sets up, streams audio, gets audio and a function call back, answers it, updates the context', async () => {
    fake = await startFakeGoogleLive({
      userTranscripts: ['What is my order status?'],
      replies: [{ audioMs: 120, transcript: 'Checking.', functionCalls: [{ name: 'lookup_order', args: { order_id: 'A-1' } }] }, { audioMs: 80, transcript: 'Shipped.' }],
    });
    const ai = new GoogleGenAI({ apiKey: FAKE_LIVE_KEY, httpOptions: { baseUrl: fake.url } });
    const received: LiveServerMessage[] = [];
    const live = await ai.live.connect({
      model: 'gemini-live-2.5-flash-preview',
      config: {
        responseModalities: [Modality.AUDIO],
        speechConfig: { voiceConfig: { prebuiltVoiceConfig: { voiceName: 'Puck' } } },
        systemInstruction: 'Be brief.',
        tools: [{ functionDeclarations: [{ name: 'lookup_order', parametersJsonSchema: { type: 'object', properties: { order_id: { type: 'string' } } } }] }],
        realtimeInputConfig: { automaticActivityDetection: { silenceDurationMs: 200 } },
        inputAudioTranscription: {},
        outputAudioTranscription: {},
      },
      callbacks: { onmessage: (m) => received.push(m) },
    });
    try {
      const conn = fake.connections[0]!;
      // the SDK dials `<base>/ws/...` from `new URL(base)` (a double slash), key in the query
      expect(conn.url.pathname).toMatch(/^\/+ws\/google\.ai\.generativelanguage\.v1beta\.GenerativeService\.BidiGenerateContent$/);
      expect(conn.model).toBe('gemini-live-2.5-flash-preview');
      expect(conn.instructions).toBe('Be brief.');
      const pcm = resample(mulawDecode(speech(300)), 8000, 16_000);
      live.sendRealtimeInput({ audio: { data: Buffer.from(pcm.buffer).toString('base64'), mimeType: 'audio/pcm;rate=16000' } });
      await vi.waitFor(() => expect(received.some((m) => m.toolCall)).toBe(true), { timeout: 5_000 });
      expect(received.some((m) => m.data)).toBe(true); // the SDK's audio getter reads the inlineData
      expect(received.find((m) => m.serverContent?.inputTranscription?.text)?.serverContent?.inputTranscription?.text).toBe('What');
      const call = received.find((m) => m.toolCall)!.toolCall!.functionCalls![0]!;
      expect(call).toMatchObject({ name: 'lookup_order', args: { order_id: 'A-1' } });
      live.sendToolResponse({ functionResponses: [{ id: call.id!, name: call.name!, response: { status: 'shipped' } }] });
      // a blocking function: the model's turn goes on with the result, and ends once
      await vi.waitFor(() => expect(received.filter((m) => m.serverContent?.turnComplete).length).toBe(1), { timeout: 5_000 });
      expect(received.filter((m) => m.serverContent?.outputTranscription?.text).map((m) => m.serverContent!.outputTranscription!.text).join('')).toBe('Checking.Shipped.');
      expect(received.filter((m) => m.usageMetadata)).toHaveLength(1);
      live.sendContextUpdate({ systemInstruction: 'Now be verbose.' });
      live.sendClientContent({ turns: 'Hello?', turnComplete: false });
      await vi.waitFor(() => expect(conn.instructions).toBe('Now be verbose.'));
      await vi.waitFor(() => expect(conn.messages.at(-1)).toEqual({ clientContent: { turns: [{ role: 'user', parts: [{ text: 'Hello?' }] }], turnComplete: false } }));
      expect(conn.mimeTypes).toEqual(new Set(['audio/pcm;rate=16000']));
    } finally {
      live.close();
    }
    await fake.connections[0]!.whenClosed;
  });
});
