import { DeepgramClient } from '@deepgram/sdk';
import { afterEach, describe, expect, it } from 'vitest';
import type { SttConfig } from '../../engine/schema.js';
import { createDeepgramStt, deepgramListenUrl, type DeepgramSttOptions } from '../../src/providers/stt/deepgram.js';
import {
  ProviderError,
  type ProviderSettings,
  type SttSession,
  type Transcript,
} from '../../src/providers/types.js';
import { startFakeDeepgram, type DeepgramFakeScript, type FakeDeepgram } from '../fakes/deepgram.js';

const FRAME = 160; // 20 ms of μ-law 8 kHz

let fake: FakeDeepgram | undefined;
afterEach(async () => {
  await fake?.close();
  fake = undefined;
});

async function start(script: DeepgramFakeScript = {}): Promise<FakeDeepgram> {
  fake = await startFakeDeepgram(script);
  return fake;
}

function settings(f: FakeDeepgram, overrides: Partial<ProviderSettings> = {}): ProviderSettings {
  return {
    deepgram: { baseUrl: f.url, apiKey: f.apiKey },
    openai: { baseUrl: 'http://127.0.0.1:9', apiKey: undefined },
    elevenlabs: { baseUrl: 'http://127.0.0.1:9', apiKey: undefined },
    timeouts: { connectMs: 2_000 },
    ...overrides,
  };
}

function recorder() {
  const r = {
    transcripts: [] as Transcript[],
    speechStarted: 0,
    utteranceEnds: 0,
    errors: [] as ProviderError[],
    closes: 0,
    events: [] as string[],
  };
  return {
    r,
    events: {
      onTranscript: (t: Transcript) => {
        r.transcripts.push(t);
        r.events.push(`transcript:${t.text}`);
      },
      onSpeechStarted: () => {
        r.speechStarted += 1;
        r.events.push('speech-started');
      },
      onUtteranceEnd: () => {
        r.utteranceEnds += 1;
        r.events.push('utterance-end');
      },
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

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function until(check: () => boolean, timeoutMs = 3_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await sleep(5);
  }
}

/**
 * Active handles by kind (sockets, servers, timers), sampled just after a short sleep: the
 * sleep's own timer is counted the same way in every sample, so samples compare.
 */
async function sampleResources(): Promise<Record<string, number>> {
  await sleep(10);
  const counts: Record<string, number> = {};
  for (const r of process.getActiveResourcesInfo()) counts[r] = (counts[r] ?? 0) + 1;
  return sorted(counts);
}

/**
 * Resources once what earlier tests left has wound down (closed servers, ended sockets) and
 * vitest's own 100 ms task-update timer has fired: two samples 150 ms apart agree.
 */
async function settledResources(): Promise<Record<string, number>> {
  let before = await sampleResources();
  for (let i = 0; i < 20; i++) {
    await sleep(150);
    const now = await sampleResources();
    if (JSON.stringify(now) === JSON.stringify(before)) return now;
    before = now;
  }
  return before;
}

/** Polls until the process holds no more sockets or timers than at `baseline`. */
async function backToBaseline(baseline: Record<string, number>): Promise<void> {
  let now = await sampleResources();
  for (let i = 0; i < 100 && JSON.stringify(now) !== JSON.stringify(baseline); i++) {
    now = await sampleResources();
  }
  expect(now).toEqual(baseline);
}
const sorted = (o: Record<string, number>) => Object.fromEntries(Object.entries(o).sort());

function frames(n: number, byte = 0xff): Buffer[] {
  return Array.from({ length: n }, () => Buffer.alloc(FRAME, byte));
}

const config: SttConfig = { provider: 'deepgram' };

describe('Deepgram query', () => {
  it('builds the listen URL from stt_config', () => {
    const url = new URL(
      deepgramListenUrl('https://api.deepgram.com', {
        provider: 'deepgram',
        model: 'nova-3',
        language: 'en-US',
        smart_format: true,
        endpointing: 300,
        numerals: true,
        filler_words: false,
        utterance_end_ms: 1000,
        keyterms: ['Switchboard', 'μ-law codec'],
        no_delay: true,
      }),
    );
    expect(url.protocol).toBe('wss:');
    expect(url.host).toBe('api.deepgram.com');
    expect(url.pathname).toBe('/v1/listen');
    const q = url.searchParams;
    expect(Object.fromEntries([...q.entries()].filter(([k]) => k !== 'keyterm'))).toEqual({
      model: 'nova-3',
      language: 'en-US',
      encoding: 'mulaw',
      sample_rate: '8000',
      channels: '1',
      interim_results: 'true',
      vad_events: 'true',
      smart_format: 'true',
      endpointing: '300',
      numerals: 'true',
      filler_words: 'false',
      utterance_end_ms: '1000',
      no_delay: 'true',
    });
    expect(q.getAll('keyterm')).toEqual(['Switchboard', 'μ-law codec']);
  });

  it('uses catalog defaults, ws for http, endpointing 0 as false, keywords before Nova-3', () => {
    const a = new URL(deepgramListenUrl('http://127.0.0.1:1234/', { provider: 'deepgram' }));
    expect(a.protocol).toBe('ws:');
    expect(a.searchParams.get('model')).toBe('nova-3');
    expect(a.searchParams.get('language')).toBe('en');
    expect(a.searchParams.has('endpointing')).toBe(false);
    expect(a.searchParams.has('utterance_end_ms')).toBe(false);
    const b = new URL(
      deepgramListenUrl('http://h', { provider: 'deepgram', model: 'nova-2', endpointing: 0, keyterms: ['Acme'] }),
    );
    expect(b.searchParams.get('endpointing')).toBe('false');
    expect(b.searchParams.getAll('keywords')).toEqual(['Acme']);
    expect(b.searchParams.has('keyterm')).toBe(false);
  });
});

describe('the Deepgram fake against the official SDK (@deepgram/sdk v5)', () => {
  it('streams audio and gets transcripts, Finalize and CloseStream answered', async () => {
    const f = await start({
      steps: [
        { type: 'speech-started', afterBytes: FRAME },
        { type: 'results', transcript: 'hello', afterBytes: 4 * FRAME },
        { type: 'results', transcript: 'hello world', is_final: true, speech_final: true, afterBytes: 8 * FRAME },
        { type: 'utterance-end' },
        { type: 'results', transcript: 'bye', is_final: true, onFinalize: true },
      ],
    });
    const client = new DeepgramClient({ apiKey: f.apiKey, baseUrl: f.wsUrl });
    const socket = await client.listen.v1.connect({
      model: 'nova-3',
      language: 'en',
      encoding: 'mulaw',
      sample_rate: 8000,
      interim_results: 'true',
      vad_events: 'true',
      reconnectAttempts: 0,
    });
    const messages: Array<{ type: string } & Record<string, unknown>> = [];
    let closed = false;
    socket.on('message', (m) => messages.push(m as unknown as { type: string }));
    socket.on('close', () => (closed = true));
    socket.connect();
    await socket.waitForOpen();
    for (const frame of frames(10)) socket.sendMedia(frame);
    await until(() => messages.some((m) => m.type === 'UtteranceEnd'));
    socket.sendFinalize({ type: 'Finalize' });
    await until(() => messages.some((m) => m.type === 'Results' && (m as { from_finalize?: boolean }).from_finalize === true));
    socket.sendCloseStream({ type: 'CloseStream' });
    await until(() => closed);

    expect(messages.map((m) => m.type)).toEqual([
      'SpeechStarted', 'Results', 'Results', 'UtteranceEnd', 'Results', 'Metadata',
    ]);
    const results = messages.filter((m) => m.type === 'Results') as unknown as Array<{
      is_final: boolean;
      speech_final: boolean;
      channel: { alternatives: Array<{ transcript: string }> };
    }>;
    expect(results.map((m) => [m.channel.alternatives[0]!.transcript, m.is_final, m.speech_final])).toEqual([
      ['hello', false, false],
      ['hello world', true, true],
      ['bye', true, false],
    ]);
    const conn = f.connections[0]!;
    expect(conn.headers.authorization).toBe(`Token ${f.apiKey}`);
    expect(conn.query.get('encoding')).toBe('mulaw');
    expect(conn.query.get('sample_rate')).toBe('8000');
    expect(conn.audioBytes).toBe(10 * FRAME);
    expect(conn.controls).toEqual(['Finalize', 'CloseStream']);
    expect(conn.closeCode).toBe(1000);
  });

  it('refuses the SDK with a wrong key (401)', async () => {
    const f = await start();
    const client = new DeepgramClient({ apiKey: 'wrong', baseUrl: f.wsUrl });
    const socket = await client.listen.v1.connect({ model: 'nova-3', reconnectAttempts: 0 });
    const failed = new Promise<void>((resolve) => {
      socket.on('error', () => resolve());
      socket.on('close', () => resolve());
    });
    socket.connect();
    await failed;
    socket.close();
    expect(f.upgrades).toBe(1);
    expect(f.connections).toHaveLength(0);
  });
});

describe('createDeepgramStt', () => {
  it('sends the key and the query, and delivers transcripts in order', async () => {
    const f = await start({
      steps: [
        { type: 'speech-started', afterBytes: FRAME },
        { type: 'results', transcript: 'I need', afterBytes: 3 * FRAME },
        { type: 'results', transcript: '', afterBytes: 4 * FRAME }, // empty interim: dropped
        { type: 'results', transcript: 'I need a table', is_final: true, afterBytes: 6 * FRAME },
        { type: 'results', transcript: 'for two', is_final: true, speech_final: true, afterBytes: 8 * FRAME },
        { type: 'utterance-end' },
      ],
    });
    const { r, events } = recorder();
    const stt = createDeepgramStt(settings(f));
    expect(stt.id).toBe('deepgram');
    const session = await stt.connect(
      { provider: 'deepgram', model: 'nova-3', language: 'en', keyterms: ['table', 'two'], utterance_end_ms: 1000 },
      events,
    );
    for (const frame of frames(10)) session.sendAudio(frame);
    await until(() => r.utteranceEnds === 1);
    await session.close();

    expect(r.events).toEqual([
      'speech-started',
      'transcript:I need',
      'transcript:I need a table',
      'transcript:for two',
      'utterance-end',
      'close',
    ]);
    expect(r.transcripts.map((t) => [t.isFinal, t.speechFinal])).toEqual([
      [false, false],
      [true, false],
      [true, true],
    ]);
    expect(r.transcripts[2]!.confidence).toBeCloseTo(0.98);
    expect(r.transcripts[2]!.start).toBeGreaterThan(0);
    expect(r.errors).toEqual([]);
    const conn = f.connections[0]!;
    expect(conn.headers.authorization).toBe(`Token ${f.apiKey}`);
    expect(conn.query.get('model')).toBe('nova-3');
    expect(conn.query.get('interim_results')).toBe('true');
    expect(conn.query.get('vad_events')).toBe('true');
    expect(conn.query.get('utterance_end_ms')).toBe('1000');
    expect(conn.query.getAll('keyterm')).toEqual(['table', 'two']);
    expect(conn.audioBytes).toBe(10 * FRAME);
    expect(conn.controls).toEqual(['CloseStream']);
    await conn.whenClosed;
    expect(conn.closeCode).toBe(1000);
  });

  it('finalize() sends Finalize and the flushed result arrives; never an empty binary frame', async () => {
    const f = await start({
      steps: [{ type: 'results', transcript: 'that is all', is_final: true, speech_final: true, onFinalize: true, delayMs: 20 }],
    });
    const { r, events } = recorder();
    const session = await createDeepgramStt(settings(f)).connect(config, events);
    session.sendAudio(Buffer.alloc(0));
    for (const frame of frames(3)) session.sendAudio(frame);
    session.sendAudio(Buffer.alloc(0));
    session.finalize();
    await until(() => r.transcripts.length === 1);
    await session.close();
    expect(r.transcripts[0]).toMatchObject({ text: 'that is all', isFinal: true, speechFinal: true });
    const conn = f.connections[0]!;
    // the three 20 ms frames go as one chunk (`audioChunkMs`, 50 by default)
    expect(conn.frameSizes).toEqual([3 * FRAME]);
    expect(conn.controls).toEqual(['Finalize', 'CloseStream']);
  });

  it('sends the audio in chunks of about audioChunkMs; what waits goes out in time, and before Finalize', async () => {
    let audioAtFinalize = -1;
    const f = await start({
      transcriber: (ctx) => ({
        audio: () => undefined,
        finalize: () => {
          audioAtFinalize = ctx.audioSeconds() * 8000;
          ctx.act({ type: 'results', transcript: '', is_final: true, onFinalize: true });
        },
      }),
    });
    const { r, events } = recorder();
    const session = await createDeepgramStt(settings(f), { audioChunkMs: 50 }).connect(config, events);
    const sent: Buffer[] = [];
    for (let i = 0; i < 7; i++) {
      const frame = Buffer.alloc(FRAME, i);
      sent.push(Buffer.from(frame));
      session.sendAudio(frame);
      frame.fill(0xee); // the caller may reuse its buffer: what was given is what goes out
    }
    const conn = f.connections[0]!;
    await until(() => conn.audioBytes === 6 * FRAME);
    expect(conn.frameSizes).toEqual([3 * FRAME, 3 * FRAME]);
    // the 7th frame waits for more; with none coming, it goes out after 50 ms on its own
    const t0 = Date.now();
    await until(() => conn.audioBytes === 7 * FRAME);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(30);
    expect(conn.frameSizes).toEqual([3 * FRAME, 3 * FRAME, FRAME]);
    // two frames waiting, then Finalize: they go first
    session.sendAudio(Buffer.alloc(FRAME, 7));
    session.sendAudio(Buffer.alloc(FRAME, 8));
    sent.push(Buffer.alloc(FRAME, 7), Buffer.alloc(FRAME, 8));
    session.finalize();
    await until(() => r.transcripts.length === 1);
    expect(audioAtFinalize).toBe(9 * FRAME);
    expect(conn.frameSizes).toEqual([3 * FRAME, 3 * FRAME, FRAME, 2 * FRAME]);
    expect(conn.audio()).toEqual(Buffer.concat(sent));
    // and what waits when the stream closes goes before CloseStream
    session.sendAudio(Buffer.alloc(FRAME, 9));
    await session.close();
    expect(conn.audioBytes).toBe(10 * FRAME);
    expect(conn.controls).toEqual(['Finalize', 'CloseStream']);
    expect(r.errors).toEqual([]);
  });

  it('audio held for a chunk when the stream drops goes to the next stream first', async () => {
    const f = await start();
    const { r, events } = recorder();
    const session = await createDeepgramStt(settings(f), { audioChunkMs: 1_000 }).connect(config, events);
    session.sendAudio(Buffer.alloc(FRAME, 1));
    session.sendAudio(Buffer.alloc(FRAME, 2));
    f.connections[0]!.act({ type: 'disconnect' });
    await until(() => f.connections.length === 2);
    session.sendAudio(Buffer.alloc(FRAME, 3));
    await session.close();
    expect(f.connections[0]!.audioBytes).toBe(0);
    expect(f.connections[1]!.audio()).toEqual(Buffer.concat([1, 2, 3].map((b) => Buffer.alloc(FRAME, b))));
    expect(r.errors).toEqual([]);
  });

  it('close() while reconnecting: the new stream gets the audio kept for it, then CloseStream', async () => {
    // the new stream answers its upgrade late, so the close surely comes while reconnecting
    const f = await start({ connections: [{}, { upgradeDelayMs: 150 }] });
    const { r, events } = recorder();
    const session = await createDeepgramStt(settings(f), { audioChunkMs: 1_000 }).connect(config, events);
    session.sendAudio(Buffer.alloc(FRAME, 1));
    f.connections[0]!.act({ type: 'disconnect' });
    await until(() => f.connections[0]!.closed);
    await sleep(30); // the adapter has seen the drop
    session.sendAudio(Buffer.alloc(FRAME, 2));
    await session.close();
    const second = f.connections[1]!;
    expect(second.audio()).toEqual(Buffer.concat([1, 2].map((b) => Buffer.alloc(FRAME, b))));
    expect(second.controls).toEqual(['CloseStream']);
    expect(r.errors).toEqual([]);
  });

  it('close() while reconnecting, and the reconnect fails: the close ends, the failure is reported', async () => {
    const f = await start({ connections: [{}, { refuseStatus: 503, upgradeDelayMs: 0 }] });
    const { r, events } = recorder();
    const session = await createDeepgramStt(settings(f)).connect(config, events);
    session.sendAudio(Buffer.alloc(FRAME, 1));
    f.connections[0]!.act({ type: 'disconnect' });
    await until(() => f.connections[0]!.closed);
    await sleep(30); // the adapter has seen the drop
    await session.close();
    expect(r.errors.map((e) => e.code)).toEqual(['PROVIDER_DISCONNECTED']);
  });

  it('audioChunkMs 0 sends each frame as it comes', async () => {
    const f = await start();
    const { events } = recorder();
    const session = await createDeepgramStt(settings(f), { audioChunkMs: 0 }).connect(config, events);
    for (const frame of frames(3)) session.sendAudio(frame);
    const conn = f.connections[0]!;
    await until(() => conn.audioBytes === 3 * FRAME);
    expect(conn.frameSizes).toEqual([FRAME, FRAME, FRAME]);
    await session.close();
  });

  it('sends KeepAlive while no audio flows, and not while it does', async () => {
    // The fake closes idle streams like Deepgram does (here after 1 s instead of 10 s).
    const f = await start({ idleTimeoutMs: 1_000 });
    const { r, events } = recorder();
    const keepAliveMs = 100;
    const options: DeepgramSttOptions = { keepAliveMs };
    const session = await createDeepgramStt(settings(f), options).connect(config, events);
    await sleep(700);
    const conn = f.connections[0]!;
    const idleKeepAlives = conn.controls.filter((c) => c === 'KeepAlive').length;
    expect(idleKeepAlives).toBeGreaterThanOrEqual(4);
    expect(conn.closed).toBe(false);

    // Audio every 10 ms for 300 ms: no KeepAlive needed, but where a loaded machine held a send up
    // for longer than keepAliveMs (each such gap may earn one)
    let last = Date.now();
    let longGaps = 0;
    for (let i = 0; i < 30; i++) {
      session.sendAudio(Buffer.alloc(FRAME, 0x7f));
      await sleep(10);
      const now = Date.now();
      if (now - last >= keepAliveMs) longGaps++;
      last = now;
    }
    const duringAudio = conn.controls.filter((c) => c === 'KeepAlive').length - idleKeepAlives;
    expect(duringAudio).toBeLessThanOrEqual(1 + longGaps); // at most one already due when audio resumed
    await session.close();
    expect(r.errors).toEqual([]);
    expect(f.upgrades).toBe(1);
  });

  it('reconnects once after a drop, replaying the audio sent meanwhile; a second drop is an error', async () => {
    const f = await start({
      connections: [
        {
          steps: [
            { type: 'results', transcript: 'first part', is_final: true, afterBytes: 2 * FRAME },
            { type: 'disconnect', afterBytes: 3 * FRAME },
          ],
        },
        {
          upgradeDelayMs: 100,
          steps: [
            { type: 'results', transcript: 'second part', is_final: true, speech_final: true, afterBytes: 5 * FRAME },
            { type: 'disconnect', afterBytes: 6 * FRAME },
          ],
        },
      ],
    });
    const { r, events } = recorder();
    const session = await createDeepgramStt(settings(f)).connect(config, events);
    for (const frame of frames(3)) session.sendAudio(frame);
    await until(() => f.connections[0]!.closed);
    await sleep(30); // the adapter has seen the drop and is reconnecting (the fake answers in 100 ms)
    for (const frame of frames(5)) session.sendAudio(frame); // buffered, then replayed
    await until(() => f.connections.length === 2);
    await until(() => r.transcripts.length === 2);
    expect(r.errors).toEqual([]);
    const second = f.connections[1]!;
    expect(second.audioBytes).toBe(5 * FRAME);
    // replayed in chunks, as any audio: 3 frames at once, then the 2 left when the chunk's time is up
    expect(second.frameSizes).toEqual([3 * FRAME, 2 * FRAME]);
    // Timestamps continue from the first stream's audio.
    expect(r.transcripts[1]!.start).toBeGreaterThanOrEqual((3 * FRAME) / 8000);

    session.sendAudio(Buffer.alloc(FRAME)); // the 6th frame: the second stream drops too
    await until(() => r.errors.length === 1);
    expect(r.errors[0]).toBeInstanceOf(ProviderError);
    expect(r.errors[0]!.code).toBe('PROVIDER_DISCONNECTED');
    expect(r.errors[0]!.provider).toBe('deepgram');
    expect(r.events.slice(-2)).toEqual(['error:PROVIDER_DISCONNECTED', 'close']);
    expect(f.upgrades).toBe(2);
    await session.close(); // already closed: resolves at once
    expect(r.closes).toBe(1);
  });

  it('an error close (1011 NET-0000) is survived once, then reported with its reason', async () => {
    const f = await start({ steps: [{ type: 'error-close', code: 1011, reason: 'NET-0000', afterBytes: FRAME }] });
    const { r, events } = recorder();
    const session = await createDeepgramStt(settings(f)).connect(config, events);
    session.sendAudio(Buffer.alloc(FRAME));
    await until(() => f.connections.length === 2);
    await sleep(20);
    session.sendAudio(Buffer.alloc(FRAME));
    await until(() => r.errors.length === 1);
    expect(r.errors[0]!.code).toBe('PROVIDER_DISCONNECTED');
    expect(r.errors[0]!.message).toContain('NET-0000');
    expect(r.closes).toBe(1);
  });

  it('a data error close (1002 DATA-0000) is reported at once, without reconnecting', async () => {
    const f = await start({ steps: [{ type: 'error-close', code: 1002, reason: 'DATA-0000', afterBytes: FRAME }] });
    const { r, events } = recorder();
    const session = await createDeepgramStt(settings(f)).connect(config, events);
    session.sendAudio(Buffer.alloc(FRAME));
    await until(() => r.errors.length === 1);
    expect(r.errors[0]!.code).toBe('PROVIDER_PROTOCOL');
    expect(r.errors[0]!.message).toContain('DATA-0000');
    expect(f.upgrades).toBe(1);
  });

  it('an unreadable message is a protocol error', async () => {
    const f = await start({ steps: [{ type: 'raw', data: '{"type":"Results",' }] });
    const { r, events } = recorder();
    await createDeepgramStt(settings(f)).connect(config, events);
    await until(() => r.errors.length === 1);
    expect(r.errors[0]!.code).toBe('PROVIDER_PROTOCOL');
    await until(() => f.connections[0]!.closed);
  });

  it('no API key: PROVIDER_AUTH without connecting', async () => {
    const f = await start();
    const { events } = recorder();
    const stt = createDeepgramStt(settings(f, { deepgram: { baseUrl: f.url, apiKey: undefined } }));
    await expect(stt.connect(config, events)).rejects.toMatchObject({ code: 'PROVIDER_AUTH' });
    expect(f.upgrades).toBe(0);
  });

  it('a wrong key: 401 on upgrade is PROVIDER_AUTH with Deepgram\'s message', async () => {
    const f = await start();
    const { events } = recorder();
    const stt = createDeepgramStt(settings(f, { deepgram: { baseUrl: f.url, apiKey: 'nope' } }));
    const err = (await stt.connect(config, events).catch((e: unknown) => e)) as ProviderError;
    expect(err).toBeInstanceOf(ProviderError);
    expect(err.code).toBe('PROVIDER_AUTH');
    expect(err.status).toBe(401);
    expect(err.message).toContain('Invalid credentials.');
  });

  it('another refused upgrade is PROVIDER_HTTP_ERROR', async () => {
    const f = await start({ refuseStatus: 400 });
    const { events } = recorder();
    const err = (await createDeepgramStt(settings(f)).connect(config, events).catch((e: unknown) => e)) as ProviderError;
    expect(err.code).toBe('PROVIDER_HTTP_ERROR');
    expect(err.status).toBe(400);
  });

  it('connect timeout: PROVIDER_TIMEOUT, and the half-open socket is closed', async () => {
    const f = await start({ hang: true });
    const baseline = await settledResources();
    const { events } = recorder();
    const stt = createDeepgramStt(settings(f, { timeouts: { connectMs: 150 } }));
    const t0 = Date.now();
    await expect(stt.connect(config, events)).rejects.toMatchObject({ code: 'PROVIDER_TIMEOUT' });
    expect(Date.now() - t0).toBeLessThan(1_000);
    await until(() => f.openSockets() === 0);
    await backToBaseline(baseline);
  });

  it('abort during connect: PROVIDER_ABORTED', async () => {
    const f = await start({ hang: true });
    const { events } = recorder();
    const ac = new AbortController();
    const pending = createDeepgramStt(settings(f)).connect(config, events, ac.signal);
    await until(() => f.upgrades === 1);
    ac.abort();
    await expect(pending).rejects.toMatchObject({ code: 'PROVIDER_ABORTED' });
    await until(() => f.openSockets() === 0);
  });

  it('abort mid-stream closes the socket and clears every timer', async () => {
    const f = await start();
    const baseline = await settledResources();
    const { r, events } = recorder();
    const ac = new AbortController();
    const session = await createDeepgramStt(settings(f), { keepAliveMs: 30 }).connect(config, events, ac.signal);
    for (const frame of frames(5)) session.sendAudio(frame);
    await until(() => f.connections[0]!.audioBytes === 5 * FRAME);
    ac.abort();
    await f.connections[0]!.whenClosed;
    expect(r.closes).toBe(1);
    expect(r.errors).toEqual([]);
    session.sendAudio(Buffer.alloc(FRAME)); // ignored after the end
    await session.close();
    await backToBaseline(baseline);
  });

  it('close() waits for the server to close, and cuts the stream after its timeout', async () => {
    const f = await start({ ignoreCloseStream: true });
    const baseline = await settledResources();
    const { r, events } = recorder();
    const session: SttSession = await createDeepgramStt(settings(f), { closeTimeoutMs: 120 }).connect(config, events);
    session.sendAudio(Buffer.alloc(FRAME));
    const t0 = Date.now();
    await session.close();
    const waited = Date.now() - t0;
    expect(waited).toBeGreaterThanOrEqual(100);
    expect(waited).toBeLessThan(1_000);
    expect(f.connections[0]!.controls).toEqual(['CloseStream']);
    await f.connections[0]!.whenClosed;
    expect(r.closes).toBe(1);
    await backToBaseline(baseline);
  });

  it('a graceful close leaves no socket or timer behind', async () => {
    const f = await start({ steps: [{ type: 'results', transcript: 'ok', is_final: true, afterBytes: FRAME }] });
    const baseline = await settledResources();
    const { r, events } = recorder();
    const session = await createDeepgramStt(settings(f), { keepAliveMs: 50 }).connect(config, events);
    session.sendAudio(Buffer.alloc(FRAME));
    await until(() => r.transcripts.length === 1);
    await session.close();
    await f.connections[0]!.whenClosed;
    expect(f.connections[0]!.closeCode).toBe(1000);
    expect(f.connections[0]!.sent.at(-1)?.type).toBe('Metadata');
    await backToBaseline(baseline);
  });
});
