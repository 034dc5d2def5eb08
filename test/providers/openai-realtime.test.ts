import { createHook } from 'node:async_hooks';
import { execFileSync } from 'node:child_process';
import OpenAI from 'openai';
import { OpenAIRealtimeWS } from 'openai/realtime/ws';
import type {
  RealtimeConversationItemSystemMessage,
  RealtimeConversationItemUserMessage,
  RealtimeServerEvent,
} from 'openai/resources/realtime/realtime';
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  createOpenAiRealtime,
  realtimeUrl,
} from '../../src/providers/realtime/openai.js';
import {
  ProviderError,
  type ProviderSettings,
  type RealtimeEvents,
  type RealtimeFunctionCall,
  type RealtimeSession,
  type RealtimeSessionOptions,
} from '../../src/providers/types.js';
import {
  startFakeOpenAiRealtime,
  type FakeOpenAiRealtime,
  type FakeRealtimeScript,
} from '../fakes/openai-realtime.js';

const KEY = 'sk-test';

/** μ-law bytes that are easy to recognise: 0, 1, 2, ... wrapping at 256. */
function tone(bytes: number, offset = 0): Buffer {
  const b = Buffer.alloc(bytes);
  for (let i = 0; i < bytes; i++) b[i] = (i + offset) % 256;
  return b;
}

const OPTIONS: RealtimeSessionOptions = {
  instructions: 'You are the front desk of Acme Dental. Be brief.',
  tools: [
    {
      name: 'lookup_order',
      description: 'Find an order by its id',
      parameters: {
        type: 'object',
        properties: { order_id: { type: 'string' } },
        required: ['order_id'],
      },
    },
    { name: 'end_call' },
  ],
  voice: 'cedar',
  turnDetection: { threshold: 0.6, prefixPaddingMs: 250, silenceDurationMs: 700 },
};

/** Everything the adapter reported, with a way to wait for it. */
function recorder() {
  const audio: Array<{ mulaw: Buffer; itemId: string }> = [];
  const transcripts: Array<{ role: string; text: string; final: boolean }> = [];
  const calls: RealtimeFunctionCall[] = [];
  const errors: ProviderError[] = [];
  const counts = { speechStarted: 0, speechStopped: 0, responseDone: 0, close: 0 };
  const waiters = new Set<() => void>();
  const changed = () => {
    for (const w of [...waiters]) w();
  };
  const events: RealtimeEvents = {
    onAudio: (mulaw, itemId) => (audio.push({ mulaw, itemId }), changed()),
    onSpeechStarted: () => (counts.speechStarted++, changed()),
    onSpeechStopped: () => (counts.speechStopped++, changed()),
    onTranscript: (role, text, final) => (transcripts.push({ role, text, final }), changed()),
    onFunctionCall: (call) => (calls.push(call), changed()),
    onResponseDone: () => (counts.responseDone++, changed()),
    onError: (err) => (errors.push(err), changed()),
    onClose: () => (counts.close++, changed()),
  };
  function until(probe: () => boolean, what: string, timeoutMs = 5_000): Promise<void> {
    return new Promise((resolve, reject) => {
      const check = () => {
        if (!probe()) return;
        waiters.delete(check);
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(() => {
        waiters.delete(check);
        reject(new Error(`timed out waiting for ${what}`));
      }, timeoutMs);
      waiters.add(check);
      check();
    });
  }
  const audioBytes = () => audio.reduce((n, a) => n + a.mulaw.length, 0);
  return { events, audio, transcripts, calls, errors, counts, until, audioBytes };
}

let fake: FakeOpenAiRealtime | undefined;
let session: RealtimeSession | undefined;

afterEach(async () => {
  await session?.close();
  session = undefined;
  await fake?.close();
  fake = undefined;
});

async function start(script: FakeRealtimeScript = {}) {
  fake = await startFakeOpenAiRealtime(script);
  return fake;
}

function settings(f: FakeOpenAiRealtime, extra: Partial<ProviderSettings> = {}): ProviderSettings {
  return {
    deepgram: { baseUrl: 'http://127.0.0.1:1' },
    openai: { baseUrl: f.url, apiKey: KEY },
    elevenlabs: { baseUrl: 'http://127.0.0.1:1' },
    ...extra,
  };
}

async function connect(
  script: FakeRealtimeScript = {},
  opts: { model?: string; options?: RealtimeSessionOptions; logger?: { debug: () => void; warn: () => void } } = {},
) {
  const f = await start(script);
  const rec = recorder();
  const provider = createOpenAiRealtime(settings(f), opts.logger ? { logger: opts.logger } : {});
  session = await provider.connect(
    { provider: 'openai-realtime', ...(opts.model ? { model: opts.model } : {}) },
    opts.options ?? OPTIONS,
    rec.events,
  );
  return { fake: f, rec, session, conn: f.connections[0]! };
}

async function rejection(p: Promise<unknown>): Promise<ProviderError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(ProviderError);
    return err as ProviderError;
  }
  throw new Error('expected a rejection');
}

/**
 * Timers and sockets created from now on (by the adapter, `ws` and the fake alike) that are
 * still alive: `live()` lists their kinds. Built on async_hooks, so it sees what the code under
 * test cannot hide, and ignores what existed before (the test runner's own timers).
 */
function trackResources() {
  const kinds = new Set(['Timeout', 'TCPWRAP', 'TCPCONNECTWRAP', 'TLSWRAP']);
  const alive = new Map<number, string>();
  const hook = createHook({
    init(asyncId, type) {
      if (kinds.has(type)) alive.set(asyncId, type);
    },
    destroy(asyncId) {
      alive.delete(asyncId);
    },
  }).enable();
  return {
    /** Waits a little for closing sockets to finish closing, then lists what is left. */
    async live(): Promise<string[]> {
      for (let i = 0; i < 50 && alive.size > 0; i++) {
        await new Promise((r) => setImmediate(r));
        await new Promise((r) => alive.delete(Number(setTimeout(r, 5)))); // not our own wait
      }
      return [...alive.values()].sort();
    },
    stop: () => hook.disable(),
  };
}

describe('realtimeUrl', () => {
  it('turns the API base into the GA WebSocket URL', () => {
    expect(realtimeUrl('https://api.openai.com', 'gpt-realtime')).toBe(
      'wss://api.openai.com/v1/realtime?model=gpt-realtime',
    );
    expect(realtimeUrl('https://api.openai.com/v1/', 'gpt-realtime-mini')).toBe(
      'wss://api.openai.com/v1/realtime?model=gpt-realtime-mini',
    );
    expect(realtimeUrl('http://127.0.0.1:9999', 'gpt-realtime')).toBe(
      'ws://127.0.0.1:9999/v1/realtime?model=gpt-realtime',
    );
    expect(realtimeUrl('https://proxy.example/openai', 'gpt-realtime')).toBe(
      'wss://proxy.example/openai/v1/realtime?model=gpt-realtime',
    );
  });
});

describe('OpenAI Realtime adapter against the fake', () => {
  it('connects with a Bearer key and configures a GA session: pcmu both ways, server VAD, tools, voice', async () => {
    const { conn, fake: f } = await connect({}, { model: 'gpt-realtime-mini' });
    expect(conn.model).toBe('gpt-realtime-mini');
    expect(conn.headers.authorization).toBe(`Bearer ${KEY}`);
    expect(conn.headers['openai-beta']).toBeUndefined();

    const [update] = f.eventsOfType('session.update');
    expect(update).toMatchObject({ type: 'session.update', event_id: expect.any(String) });
    expect(update!.session).toEqual({
      type: 'realtime',
      model: 'gpt-realtime-mini',
      output_modalities: ['audio'],
      instructions: OPTIONS.instructions,
      tools: [
        {
          type: 'function',
          name: 'lookup_order',
          description: 'Find an order by its id',
          parameters: {
            type: 'object',
            properties: { order_id: { type: 'string' } },
            required: ['order_id'],
          },
        },
        { type: 'function', name: 'end_call', parameters: { type: 'object', properties: {} } },
      ],
      tool_choice: 'auto',
      audio: {
        input: {
          format: { type: 'audio/pcmu' },
          transcription: { model: 'gpt-4o-mini-transcribe' },
          turn_detection: {
            type: 'server_vad',
            threshold: 0.6,
            prefix_padding_ms: 250,
            silence_duration_ms: 700,
            create_response: true,
            interrupt_response: false,
          },
        },
        output: { format: { type: 'audio/pcmu' }, voice: 'cedar' },
      },
    });
    // The fake's effective session (what session.updated echoed) is μ-law both ways.
    expect(conn.session).toMatchObject({
      audio: { input: { format: { type: 'audio/pcmu' } }, output: { format: { type: 'audio/pcmu' }, voice: 'cedar' } },
    });
  });

  it('uses gpt-realtime and the catalog voice by default, and resolves only after session.updated', async () => {
    const started = Date.now();
    const { conn } = await connect(
      { sessionUpdatedDelayMs: 150 },
      { options: { instructions: 'Hi', tools: [] } },
    );
    expect(Date.now() - started).toBeGreaterThanOrEqual(140);
    expect(conn.model).toBe('gpt-realtime');
    const update = conn.events.find((e) => e.type === 'session.update')!;
    expect(update.session).toMatchObject({
      model: 'gpt-realtime',
      tools: [],
      audio: {
        input: { turn_detection: { type: 'server_vad', create_response: true, interrupt_response: false } },
        output: { voice: 'marin' },
      },
    });
  });

  it('streams caller audio as base64 appends and plays the model audio with its item id', async () => {
    const reply = tone(2_400, 7);
    const { fake: f, rec, session: s } = await connect({
      turns: [
        {
          afterAudioBytes: 1_600,
          userTranscript: 'Where is my order?',
          response: { audio: reply, transcript: 'It ships tomorrow.' },
        },
      ],
    });
    const sent = tone(1_600);
    s.sendAudio(Buffer.alloc(0)); // never an empty append
    for (let i = 0; i < sent.length; i += 160) s.sendAudio(sent.subarray(i, i + 160));

    await rec.until(() => rec.counts.responseDone === 1, 'response.done');
    const appends = f.eventsOfType('input_audio_buffer.append');
    expect(appends).toHaveLength(10);
    expect(Buffer.concat(appends.map((e) => Buffer.from(String(e.audio), 'base64')))).toEqual(sent);

    expect(rec.counts.speechStarted).toBe(1);
    expect(rec.counts.speechStopped).toBe(1);
    expect(Buffer.concat(rec.audio.map((a) => a.mulaw))).toEqual(reply);
    expect(rec.audio.length).toBe(3); // 800-byte deltas
    const itemIds = new Set(rec.audio.map((a) => a.itemId));
    expect(itemIds.size).toBe(1);
    expect([...itemIds][0]).toMatch(/^item_/);

    expect(rec.transcripts).toContainEqual({ role: 'user', text: 'Where is my order?', final: true });
    expect(rec.transcripts).toContainEqual({ role: 'assistant', text: 'It ships tomorrow.', final: true });
    const interim = rec.transcripts.filter((t) => t.role === 'assistant' && !t.final).map((t) => t.text);
    expect(interim).toEqual(['It ', 'It ships ', 'It ships tomorrow.']);
    expect(rec.errors).toEqual([]);
  });

  it('the fake places a turn after a reply: afterAudioBytes counts from the n-th response.create', async () => {
    const { fake: f, rec, session: s, conn } = await connect({
      turns: [{ afterResponses: 1, afterAudioBytes: 320, userTranscript: 'Hello?' }],
      responses: [{ audio: tone(160), transcript: 'Hi.' }],
    });
    for (let i = 0; i < 5; i++) s.sendAudio(tone(160)); // 800 bytes before any reply: no turn
    await f.waitForEvent('input_audio_buffer.append', 5);
    expect(conn.turns).toBe(0);
    s.createResponse();
    await rec.until(() => rec.counts.responseDone === 1, 'response.done');
    s.sendAudio(tone(160));
    await f.waitForEvent('input_audio_buffer.append', 6);
    expect(conn.turns).toBe(0);
    s.sendAudio(tone(160)); // 320 bytes after the reply was asked for
    await rec.until(() => rec.counts.speechStarted === 1, 'speech_started');
    expect(conn.turns).toBe(1);
  });

  it('barge-in: speech_started reaches the pipeline; cancel + truncate carry the item and what was heard', async () => {
    const logger = { debug: vi.fn(), warn: vi.fn() };
    const { fake: f, rec, session: s } = await connect(
      {
        turns: [
          {
            afterAudioBytes: 160,
            response: { audio: tone(16_000), audioChunkBytes: 160, deltaIntervalMs: 5 },
          },
          { afterAudioBytes: 320, speechStops: false }, // the caller talks over the model
        ],
        responses: [{ audio: tone(800), transcript: 'Sorry, go ahead.' }],
      },
      { logger },
    );
    s.sendAudio(tone(160));
    await rec.until(() => rec.audio.length >= 5, 'some model audio');
    const itemId = rec.audio[0]!.itemId;

    s.sendAudio(tone(160));
    await rec.until(() => rec.counts.speechStarted === 2, 'second speech_started');
    // server VAD does not cut the response itself (interrupt_response: false): the call decides
    const atSpeech = rec.audioBytes();
    await rec.until(() => rec.audioBytes() > atSpeech + 800, 'model audio after speech_started');

    // What the pipeline does on barge-in: stop the response, keep only what was played.
    const heardMs = rec.audioBytes() / 8 - 40; // the last 40 ms were still buffered
    s.cancelResponse();
    s.truncate(itemId, heardMs);

    const cancel = await f.waitForEvent('response.cancel');
    const truncate = await f.waitForEvent('conversation.item.truncate');
    expect(cancel).toEqual({ type: 'response.cancel', event_id: expect.any(String) });
    expect(truncate).toEqual({
      type: 'conversation.item.truncate',
      event_id: expect.any(String),
      item_id: itemId,
      content_index: 0,
      audio_end_ms: Math.round(heardMs),
    });
    await rec.until(() => rec.counts.responseDone >= 1, 'cancelled response.done');
    const heardBytes = rec.audioBytes();

    // our cancel is what stopped it (server VAD had not): no benign error, and the session goes on
    s.createResponse();
    await rec.until(() => rec.counts.responseDone === 2, 'the next response');
    expect(rec.errors).toEqual([]);
    expect(logger.debug).not.toHaveBeenCalledWith(
      expect.objectContaining({ code: 'response_cancel_not_active' }),
      'benign realtime error',
    );
    expect(rec.audioBytes()).toBe(heardBytes + 800);
    expect(rec.transcripts.at(-1)).toEqual({ role: 'assistant', text: 'Sorry, go ahead.', final: true });
  });

  it('cancelResponse stops the model audio at once, even deltas already on the wire', async () => {
    const { fake: f, rec, session: s } = await connect({
      responses: [{ audio: tone(16_000), audioChunkBytes: 160, deltaIntervalMs: 1 }],
    });
    s.createResponse();
    await rec.until(() => rec.audio.length >= 3, 'some model audio');
    s.cancelResponse();
    const atCancel = rec.audio.length;
    await rec.until(() => rec.counts.responseDone === 1, 'response.done');
    expect(rec.audio.length).toBe(atCancel);
    expect(rec.audioBytes()).toBeLessThan(16_000);
    expect(f.eventsOfType('response.cancel')).toHaveLength(1);
    expect(rec.errors).toEqual([]);
  });

  it('a function call is reported once; its result goes back as function_call_output + response.create', async () => {
    const logger = { debug: vi.fn(), warn: vi.fn() };
    const { fake: f, rec, session: s } = await connect({
      turns: [
        {
          afterAudioBytes: 160,
          response: {
            transcript: 'Let me check.',
            audio: tone(400),
            functionCall: { name: 'lookup_order', arguments: '{"order_id":"A-1234","verbose":true}' },
          },
        },
      ],
      responses: [{ audio: tone(800), transcript: 'It has shipped.' }],
    }, { logger });
    // Answer at once, as the engine does for a transition function: this lands before the
    // response that carried the call is done, so the adapter holds response.create until then.
    const answered = vi.fn((callId: string) => s.sendFunctionResult(callId, '{"status":"shipped"}'));
    const onFunctionCall = rec.events.onFunctionCall;
    rec.events.onFunctionCall = (call) => {
      onFunctionCall(call);
      answered(call.callId);
    };
    s.sendAudio(tone(160));
    await rec.until(() => rec.counts.responseDone === 2, 'the answer after the result');
    const [call] = rec.calls;
    expect(call).toEqual({
      callId: expect.stringMatching(/^call_/),
      name: 'lookup_order',
      arguments: '{"order_id":"A-1234","verbose":true}',
    });
    expect(answered).toHaveBeenCalledTimes(1);
    expect(logger.debug).not.toHaveBeenCalled(); // no "already has an active response"
    expect(rec.errors).toEqual([]);
    const create = f.eventsOfType('conversation.item.create');
    expect(create).toEqual([
      {
        type: 'conversation.item.create',
        event_id: expect.any(String),
        item: { type: 'function_call_output', call_id: call!.callId, output: '{"status":"shipped"}' },
      },
    ]);
    const order = f.events.map((e) => e.type);
    expect(order.indexOf('response.create')).toBeGreaterThan(order.indexOf('conversation.item.create'));
    expect(rec.calls).toHaveLength(1); // not again from response.done
    expect(rec.transcripts.at(-1)).toEqual({ role: 'assistant', text: 'It has shipped.', final: true });

    s.sendFunctionResult('call_other', 'ok', false);
    await f.waitForEvent('conversation.item.create', 2);
    expect(f.eventsOfType('response.create')).toHaveLength(1);
  });

  it('a noise: forgetTurn deletes the input transcribed with no words and the reply\'s items; server VAD does not interrupt', async () => {
    const { fake: f, rec, session: s } = await connect({
      turns: [{ afterAudioBytes: 160, userTranscript: '', response: { audio: tone(1_600), transcript: 'Sorry?' } }],
    });
    expect(s.interruptsOnSpeech).toBe(false);
    s.sendAudio(tone(160));
    await rec.until(() => rec.audio.length > 0 && rec.transcripts.some((t) => t.role === 'user'), 'the reply and the empty transcript');
    expect(rec.transcripts.find((t) => t.role === 'user')).toEqual({ role: 'user', text: '', final: true });
    const replyItem = rec.audio[0]!.itemId;
    s.forgetTurn!([replyItem]);
    await f.waitForEvent('conversation.item.delete', 2);
    const committed = f.eventsOfType('conversation.item.delete').map((e) => e.item_id);
    expect(committed).toHaveLength(2);
    expect(committed[0]).not.toBe(replyItem);
    expect(committed[0]).toMatch(/^item_/);
    expect(committed[1]).toBe(replyItem);
    // a second forget has no input left to delete
    s.forgetTurn!([]);
    await new Promise((r) => setTimeout(r, 30));
    expect(f.eventsOfType('conversation.item.delete')).toHaveLength(2);
    expect(rec.errors).toEqual([]);
    // `responding`: a response asked for or under way (server VAD would not start another)
    await rec.until(() => rec.counts.responseDone === 1, 'the reply done');
    expect(s.responding).toBe(false);
    s.createResponse();
    expect(s.responding).toBe(true);
    await rec.until(() => rec.counts.responseDone === 2, 'the next response done');
    expect(s.responding).toBe(false);
  });

  it('addMessage puts a system or user message in the model\'s conversation (input_text), asking for no response', async () => {
    const { fake: f, rec, session: s } = await connect({});
    s.addMessage!('system', 'The caller is a premium customer.');
    s.addMessage!('user', 'My order number is A-1234.');
    await f.waitForEvent('conversation.item.create', 2);
    // the items as the official SDK types them
    const system: RealtimeConversationItemSystemMessage = { type: 'message', role: 'system', content: [{ type: 'input_text', text: 'The caller is a premium customer.' }] };
    const user: RealtimeConversationItemUserMessage = { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'My order number is A-1234.' }] };
    expect(f.eventsOfType('conversation.item.create').map((e) => e.item)).toEqual([system, user]);
    await new Promise((r) => setTimeout(r, 50));
    expect(f.eventsOfType('response.create')).toEqual([]);
    // the fake took both (it refuses a message item of any other shape)
    expect(rec.errors).toEqual([]);
  });

  it('a response asked for right after a cancel waits for the cancelled one to finish', async () => {
    const logger = { debug: vi.fn(), warn: vi.fn() };
    const { fake: f, rec, session: s } = await connect(
      {
        responses: [
          { audio: tone(16_000), audioChunkBytes: 160, deltaIntervalMs: 2 },
          { audio: tone(480), transcript: 'Let me transfer you.' },
          { audio: tone(8_000), audioChunkBytes: 160 },
        ],
      },
      { logger },
    );
    s.createResponse();
    await rec.until(() => rec.audio.length >= 2, 'some model audio');
    s.cancelResponse();
    s.createResponse('Say exactly: Let me transfer you.');
    await rec.until(() => rec.counts.responseDone === 2, 'both responses done');
    expect(logger.debug).not.toHaveBeenCalled();
    expect(rec.errors).toEqual([]);
    expect(f.eventsOfType('response.create')).toHaveLength(2);
    expect(rec.transcripts.at(-1)).toEqual({ role: 'assistant', text: 'Let me transfer you.', final: true });
    expect(rec.audio.at(-1)!.mulaw).toEqual(tone(480));

    // Cancelled before the server even said response.created: none of it plays.
    const before = rec.audio.length;
    f.connections[0]!.send({ type: 'rate_limits.updated', rate_limits: [] }); // ignored
    s.createResponse();
    s.cancelResponse();
    await rec.until(() => rec.counts.responseDone === 3, 'third response done');
    expect(rec.audio.length).toBe(before);
    expect(rec.errors).toEqual([]);
  });

  it('a function call cut off by a cancel is not reported', async () => {
    const { rec, session: s } = await connect({
      responses: [
        {
          functionCall: { name: 'end_call', arguments: `{"reason":"${'x'.repeat(400)}"}` },
          deltaIntervalMs: 5,
        },
      ],
    });
    s.createResponse();
    await new Promise((r) => setTimeout(r, 30));
    s.cancelResponse();
    await rec.until(() => rec.counts.responseDone === 1, 'response.done');
    expect(rec.calls).toEqual([]);
  });

  it('update() sends only what changed; createResponse carries per-response instructions', async () => {
    const { fake: f, conn, session: s } = await connect();
    s.update({
      instructions: 'Now collect the caller’s address.',
      tools: [{ name: 'save_address', description: 'Save the address' }],
    });
    await f.waitForEvent('session.update', 2);
    expect(f.eventsOfType('session.update')[1]!.session).toEqual({
      type: 'realtime',
      instructions: 'Now collect the caller’s address.',
      tools: [
        {
          type: 'function',
          name: 'save_address',
          description: 'Save the address',
          parameters: { type: 'object', properties: {} },
        },
      ],
      tool_choice: 'auto',
    });
    s.update({ turnDetection: { silenceDurationMs: 900 } });
    await f.waitForEvent('session.update', 3);
    expect(f.eventsOfType('session.update')[2]!.session).toEqual({
      type: 'realtime',
      audio: {
        input: {
          turn_detection: {
            type: 'server_vad',
            silence_duration_ms: 900,
            create_response: true,
            interrupt_response: false,
          },
        },
      },
    });
    s.update({}); // nothing to change, nothing sent
    s.createResponse('Say exactly: Thanks, one moment.');
    await f.waitForEvent('response.create');
    expect(f.eventsOfType('session.update')).toHaveLength(3);
    expect(f.eventsOfType('response.create')[0]).toEqual({
      type: 'response.create',
      event_id: expect.any(String),
      response: { instructions: 'Say exactly: Thanks, one moment.' },
    });
    // tools for one response only (a silence check-in: none offered)
    s.createResponse('Check in with the caller.', { tools: [] });
    await f.waitForEvent('response.create', 2);
    expect(f.eventsOfType('response.create')[1]).toEqual({
      type: 'response.create',
      event_id: expect.any(String),
      response: { instructions: 'Check in with the caller.', tools: [], tool_choice: 'none' },
    });
    // The fake merged the updates: audio stays μ-law, instructions changed.
    expect(conn.session).toMatchObject({
      instructions: 'Now collect the caller’s address.',
      audio: { input: { format: { type: 'audio/pcmu' } }, output: { format: { type: 'audio/pcmu' } } },
    });
  });

  it('server error events become onError with a code; benign ones are only logged', async () => {
    const logger = { debug: vi.fn(), warn: vi.fn() };
    const { conn, rec, session: s } = await connect({}, { logger });

    conn.sendError({ type: 'server_error', code: 'internal_error', message: 'The server had an error.' });
    await rec.until(() => rec.errors.length === 1, 'server_error');
    expect(rec.errors[0]).toMatchObject({ code: 'PROVIDER_HTTP_ERROR', provider: 'openai-realtime', status: 500 });
    expect(rec.errors[0]!.message).toContain('internal_error');

    conn.sendError({ type: 'invalid_request_error', code: 'invalid_value', message: "Invalid value: 'x'." });
    await rec.until(() => rec.errors.length === 2, 'invalid_request_error');
    expect(rec.errors[1]).toMatchObject({ code: 'PROVIDER_HTTP_ERROR', status: 400 });

    // Cancel with nothing to cancel, and a truncate past the end: the session is unharmed.
    s.cancelResponse();
    s.truncate('item_unknown', 500);
    await new Promise((r) => setTimeout(r, 50));
    expect(rec.errors).toHaveLength(2);
    expect(logger.debug).toHaveBeenCalledTimes(2);

    conn.sendRaw('this is not json');
    await rec.until(() => rec.errors.length === 3, 'protocol error');
    expect(rec.errors[2]).toMatchObject({ code: 'PROVIDER_PROTOCOL' });
    expect(rec.counts.close).toBe(0);
  });

  it('a failed response is an error', async () => {
    const { rec, session: s } = await connect({
      responses: [{ audio: tone(160), fail: { type: 'server_error', code: 'overloaded' } }],
    });
    s.createResponse();
    await rec.until(() => rec.errors.length === 1, 'failed response');
    expect(rec.errors[0]).toMatchObject({ code: 'PROVIDER_HTTP_ERROR', status: 500 });
    expect(rec.errors[0]!.message).toContain('overloaded');
  });

  it('a refused key is PROVIDER_AUTH (401 on the upgrade); a missing key never dials', async () => {
    const f = await start({ refuseAuth: true });
    const provider = createOpenAiRealtime(settings(f));
    const err = await rejection(provider.connect({ provider: 'openai-realtime' }, OPTIONS, recorder().events));
    expect(err).toMatchObject({ code: 'PROVIDER_AUTH', status: 401, provider: 'openai-realtime' });
    expect(err.message).toContain('Incorrect API key');
    expect(f.refused).toEqual([{ status: 401, reason: 'wrong key' }]);

    const keyless = createOpenAiRealtime({ ...settings(f), openai: { baseUrl: f.url } });
    const err2 = await rejection(keyless.connect({ provider: 'openai-realtime' }, OPTIONS, recorder().events));
    expect(err2.code).toBe('PROVIDER_AUTH');
    expect(f.refused).toHaveLength(1);
  });

  it('the vendor refusing the session config fails connect() with its error', async () => {
    const f = await start({
      rejectSessionUpdate: { type: 'invalid_request_error', code: 'invalid_value', message: "Invalid value: 'audio/opus'." },
    });
    const provider = createOpenAiRealtime(settings(f));
    const err = await rejection(provider.connect({ provider: 'openai-realtime' }, OPTIONS, recorder().events));
    expect(err).toMatchObject({ code: 'PROVIDER_HTTP_ERROR', status: 400 });
    await f.connections[0]!.whenClosed;
  });

  it('an unknown model is refused by the server', async () => {
    const f = await start();
    const provider = createOpenAiRealtime(settings(f));
    const err = await rejection(
      provider.connect({ provider: 'openai-realtime', model: 'gpt-nope' }, OPTIONS, recorder().events),
    );
    expect(err.code).toBe('PROVIDER_HTTP_ERROR');
    expect(err.message).toContain('model_not_found');
  });

  it('no session.updated in time is PROVIDER_TIMEOUT, and the socket is closed', async () => {
    const f = await start({ silent: true });
    const resources = trackResources();
    const provider = createOpenAiRealtime(settings(f, { timeouts: { connectMs: 200 } }));
    const started = Date.now();
    const err = await rejection(provider.connect({ provider: 'openai-realtime' }, OPTIONS, recorder().events));
    expect(err.code).toBe('PROVIDER_TIMEOUT');
    expect(Date.now() - started).toBeGreaterThanOrEqual(190);
    await f.connections[0]!.whenClosed;
    expect(f.openSockets()).toBe(0);
    expect(await resources.live()).toEqual([]);
    resources.stop();
  });

  it('a dropped connection mid-response is PROVIDER_DISCONNECTED, then onClose', async () => {
    const { rec, session: s } = await connect({
      responses: [{ audio: tone(8_000), audioChunkBytes: 160 }],
      dropAfterAudioDeltas: 2,
    });
    s.createResponse();
    await rec.until(() => rec.counts.close === 1, 'close');
    expect(rec.audio).toHaveLength(2);
    expect(rec.errors).toHaveLength(1);
    expect(rec.errors[0]).toMatchObject({ code: 'PROVIDER_DISCONNECTED', provider: 'openai-realtime' });
    await s.close(); // harmless afterwards
    s.sendAudio(tone(160)); // ignored: nothing to send on
  });

  it('an abort signal cancels a pending connect, and closes a live session', async () => {
    const f = await start({ silent: true });
    const provider = createOpenAiRealtime(settings(f));
    const pre = new AbortController();
    pre.abort();
    expect((await rejection(provider.connect({ provider: 'openai-realtime' }, OPTIONS, recorder().events, pre.signal))).code).toBe('PROVIDER_ABORTED');
    expect(f.connections).toHaveLength(0);

    const during = new AbortController();
    const pending = provider.connect({ provider: 'openai-realtime' }, OPTIONS, recorder().events, during.signal);
    await f.waitForEvent('session.update');
    during.abort();
    expect((await rejection(pending)).code).toBe('PROVIDER_ABORTED');
    await f.connections[0]!.whenClosed;
    await f.close();

    const live = new AbortController();
    const f2 = await start();
    const rec = recorder();
    const s = await createOpenAiRealtime(settings(f2)).connect({ provider: 'openai-realtime' }, OPTIONS, rec.events, live.signal);
    live.abort();
    await f2.connections[0]!.whenClosed;
    await rec.until(() => rec.counts.close === 1, 'close');
    expect(f2.connections[0]!.closeCode).toBe(1000);
    expect(rec.errors).toEqual([]);
    await s.close();
  });

  it('close() ends the socket cleanly and leaves no timers or sockets behind', async () => {
    const f = await start({ turns: [{ afterAudioBytes: 160, response: { audio: tone(1_600) } }] });
    const resources = trackResources();
    const rec = recorder();
    const s = await createOpenAiRealtime(settings(f)).connect({ provider: 'openai-realtime' }, OPTIONS, rec.events);
    s.sendAudio(tone(160));
    await rec.until(() => rec.counts.responseDone === 1, 'a full exchange');
    await s.close();
    await s.close(); // idempotent
    await f.connections[0]!.whenClosed;
    expect(f.connections[0]!.closeCode).toBe(1000);
    expect(f.openSockets()).toBe(0);
    expect(rec.errors).toEqual([]);
    expect(rec.counts.close).toBe(1);
    expect(await resources.live()).toEqual([]);
    resources.stop();
    // Nothing goes out after close.
    const count = f.events.length;
    s.sendAudio(tone(160));
    s.createResponse();
    expect(f.events.length).toBe(count);
  });
});

/** The fake must be faithful enough for the vendor's own SDK (which always dials `wss://`). */
const hasOpenssl = (() => {
  try {
    execFileSync('openssl', ['version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();

describe.skipIf(!hasOpenssl)('the official openai SDK against the fake', () => {
  it('OpenAIRealtimeWS connects, updates the session, streams audio and gets model audio back', async () => {
    const reply = tone(1_600, 3);
    const f = await start({
      tls: true,
      turns: [{ afterAudioBytes: 320, response: { audio: reply, transcript: 'Hello there.' } }],
    });
    const client = new OpenAI({ apiKey: KEY, baseURL: `${f.url}/v1` });
    const rt = new OpenAIRealtimeWS({ model: 'gpt-realtime', options: { ca: f.ca! } }, client);
    expect(rt.url.toString()).toBe(`${f.url.replace('https', 'wss')}/v1/realtime?model=gpt-realtime`);

    const received: RealtimeServerEvent[] = [];
    const errors: unknown[] = [];
    rt.on('event', (e) => received.push(e));
    rt.on('error', (e) => errors.push(e));
    const seen = (type: string, count = 1) =>
      new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`SDK never saw ${type}`)), 5_000);
        const check = () => {
          if (received.filter((e) => e.type === type).length >= count) {
            clearTimeout(timer);
            rt.off('event', check);
            resolve();
          }
        };
        rt.on('event', check);
        check();
      });

    await seen('session.created');
    // Typed by the SDK's GA client-event types, so this literal is checked by tsc too.
    rt.send({
      type: 'session.update',
      session: {
        type: 'realtime',
        model: 'gpt-realtime',
        output_modalities: ['audio'],
        instructions: 'Be brief.',
        audio: {
          input: {
            format: { type: 'audio/pcmu' },
            turn_detection: { type: 'server_vad', silence_duration_ms: 500, create_response: true, interrupt_response: true },
          },
          output: { format: { type: 'audio/pcmu' }, voice: 'marin' },
        },
        tools: [{ type: 'function', name: 'end_call', description: 'Hang up', parameters: { type: 'object', properties: {} } }],
        tool_choice: 'auto',
      },
    });
    await seen('session.updated');
    const updated = received.find((e) => e.type === 'session.updated');
    expect(updated).toMatchObject({ session: { type: 'realtime', audio: { output: { format: { type: 'audio/pcmu' } } } } });

    rt.send({ type: 'input_audio_buffer.append', audio: tone(320).toString('base64') });
    await seen('response.done');
    const deltas = received.filter((e) => e.type === 'response.output_audio.delta');
    expect(Buffer.concat(deltas.map((d) => Buffer.from(d.delta, 'base64')))).toEqual(reply);
    expect(received.map((e) => e.type)).toEqual(
      expect.arrayContaining(['input_audio_buffer.speech_started', 'response.created', 'response.output_audio_transcript.done']),
    );

    // The SDK reads the fake's error events as OpenAI errors.
    rt.send({ type: 'response.cancel' });
    await new Promise<void>((resolve) => {
      const check = () => (errors.length > 0 ? resolve() : setTimeout(check, 5));
      check();
    });
    expect(String((errors[0] as Error).message)).toContain('code=response_cancel_not_active');

    expect(f.connections[0]!.headers.authorization).toBe(`Bearer ${KEY}`);
    expect(f.connections[0]!.headers['openai-beta']).toBeUndefined();
    rt.close();
    await f.connections[0]!.whenClosed;
    expect(f.connections[0]!.closeCode).toBe(1000);
  });
});
