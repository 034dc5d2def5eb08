/**
 * The web-call stream's messages (src/telephony/web/protocol.ts, docs/web-calls.md): what the
 * browser sends is parsed or refused with a reason, never thrown on; what the call tells the
 * browser is written as the contract says.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  checkAudio,
  MAX_AUDIO_BYTES,
  MAX_MESSAGE_BYTES,
  observationMessage,
  parseBrowserMessage,
  WEB_FRAME_BYTES,
  WEB_SAMPLE_RATE,
} from '../../src/telephony/web/protocol.js';
import type { TurnLatency } from '../../src/calls/latency.js';

describe('parseBrowserMessage', () => {
  it('takes the three messages of the contract', () => {
    expect(parseBrowserMessage('{"type":"mark","name":"m-1"}')).toEqual({ ok: true, message: { type: 'mark', name: 'm-1' } });
    expect(parseBrowserMessage('{"type":"hangup"}')).toEqual({ ok: true, message: { type: 'hangup' } });
    for (const digit of ['0', '5', '9', '*', '#', 'A', 'B', 'C', 'D']) {
      expect(parseBrowserMessage(JSON.stringify({ type: 'dtmf', digit }))).toEqual({ ok: true, message: { type: 'dtmf', digit } });
    }
  });

  it('keeps only the fields it knows (extra ones are dropped, not passed on)', () => {
    const parsed = parseBrowserMessage('{"type":"mark","name":"m","extra":{"a":1},"__proto__":{"x":1}}');
    expect(parsed).toEqual({ ok: true, message: { type: 'mark', name: 'm' } });
    expect(parseBrowserMessage('{"type":"hangup","reason":"bye"}')).toEqual({ ok: true, message: { type: 'hangup' } });
  });

  it('refuses text that is not JSON', () => {
    for (const text of ['', 'hello', '{', '{"type":', 'undefined', "{'type':'hangup'}"]) {
      expect(parseBrowserMessage(text)).toEqual({ ok: false, reason: 'not JSON' });
    }
  });

  it('refuses JSON that is not an object', () => {
    for (const text of ['[]', '[{"type":"hangup"}]', 'null', '1', '"hangup"', 'true']) {
      expect(parseBrowserMessage(text)).toEqual({ ok: false, reason: 'not a JSON object' });
    }
  });

  it('refuses an unknown or missing type, naming what it got and what it takes', () => {
    const unknown = parseBrowserMessage('{"type":"media","payload":"AAAA"}');
    expect(unknown.ok).toBe(false);
    expect(!unknown.ok && unknown.reason).toBe('unknown message type "media" (mark, dtmf, hangup)');
    const missing = parseBrowserMessage('{"name":"m"}');
    expect(!missing.ok && missing.reason).toBe('unknown message type null (mark, dtmf, hangup)');
    // a type that is not a string is named as JSON, not taken
    const numeric = parseBrowserMessage('{"type":7}');
    expect(!numeric.ok && numeric.reason).toBe('unknown message type 7 (mark, dtmf, hangup)');
    // the type's case matters
    expect(parseBrowserMessage('{"type":"HANGUP"}').ok).toBe(false);
  });

  it('keeps the echo of a long type short', () => {
    const parsed = parseBrowserMessage(JSON.stringify({ type: 'x'.repeat(10_000) }));
    expect(parsed.ok).toBe(false);
    expect(!parsed.ok && parsed.reason.length).toBeLessThan(100);
  });

  it('refuses a mark without a usable name', () => {
    for (const m of [{ type: 'mark' }, { type: 'mark', name: '' }, { type: 'mark', name: 3 }, { type: 'mark', name: null }, { type: 'mark', name: 'x'.repeat(201) }]) {
      const parsed = parseBrowserMessage(JSON.stringify(m));
      expect(parsed).toEqual({ ok: false, reason: 'mark: "name" must be the name of a mark the server sent' });
    }
    expect(parseBrowserMessage(JSON.stringify({ type: 'mark', name: 'x'.repeat(200) })).ok).toBe(true);
  });

  it('refuses a key press that is not one key of the keypad', () => {
    for (const digit of [undefined, '', '55', 'E', 'a', 'd', ' 5', '5\n', 5, null, '١']) {
      const parsed = parseBrowserMessage(JSON.stringify({ type: 'dtmf', digit }));
      expect(parsed).toEqual({ ok: false, reason: 'dtmf: "digit" must be one of 0-9, *, #, A-D' });
    }
  });
});

describe('checkAudio', () => {
  it('takes even lengths from 2 bytes to 1 s of 16 kHz 16-bit audio', () => {
    expect(WEB_SAMPLE_RATE).toBe(16_000);
    expect(WEB_FRAME_BYTES).toBe(640);
    expect(MAX_AUDIO_BYTES).toBe(32_000);
    for (const n of [2, 4, 320, WEB_FRAME_BYTES, 31_998, MAX_AUDIO_BYTES]) expect(checkAudio(Buffer.alloc(n))).toBeNull();
  });

  it('refuses an empty, odd-sized or over-long frame, saying which', () => {
    expect(checkAudio(Buffer.alloc(0))).toBe('an empty audio frame');
    expect(checkAudio(Buffer.alloc(1))).toBe('an audio frame of 1 bytes: 16-bit samples need an even length');
    expect(checkAudio(Buffer.alloc(641))).toMatch(/641 bytes: 16-bit samples need an even length/);
    expect(checkAudio(Buffer.alloc(MAX_AUDIO_BYTES + 2))).toBe('an audio frame of 32002 bytes: at most 32000 (1 s)');
    expect(checkAudio(Buffer.alloc(MAX_MESSAGE_BYTES))).toMatch(/at most 32000/);
  });
});

const latency = (over: Partial<TurnLatency> = {}): TurnLatency => ({
  callId: 'c1',
  nodeId: 'greeting',
  endOfTurnAt: 1000,
  modelRequestedAt: 1001,
  firstTokenAt: 1121.54,
  modelReadyAt: 1251,
  ttsRequestedAt: 1240,
  ttsFirstAudioAt: 1400,
  firstFrameAt: 1412.34,
  totalMs: 412.34,
  modelFirstTokenMs: 120.54,
  modelWaitMs: 250.04,
  ttsWaitMs: 160.06,
  providerWaitMs: 398.06,
  serviceMs: 14.28,
  outbound: { framesSent: 10, framesLate: 0, maxLateMs: 0 },
  ...over,
});

describe('observationMessage', () => {
  it('a transcript line, as the record keeps it', () => {
    const message = { role: 'user' as const, content: 'Hi "there"', node_id: 'greeting', time: '2025-01-01T00:00:00.000Z', seconds_from_start: 1.5 };
    expect(JSON.parse(observationMessage({ type: 'message', message }))).toEqual({ type: 'message', message });
  });

  it('a node, a turn (its node may be null) and the end', () => {
    expect(JSON.parse(observationMessage({ type: 'node', node_id: 'bye', nodes_visited: ['greeting', 'bye'] }))).toEqual({
      type: 'node',
      node_id: 'bye',
      nodes_visited: ['greeting', 'bye'],
    });
    expect(JSON.parse(observationMessage({ type: 'turn', node_id: null }))).toEqual({ type: 'turn', node_id: null });
    expect(JSON.parse(observationMessage({ type: 'ended', ended_reason: 'customer-ended-call' }))).toEqual({
      type: 'ended',
      ended_reason: 'customer-ended-call',
    });
  });

  it('latency: snake_case milliseconds to a tenth, nothing internal (call id, marks, pacer stats)', () => {
    const sent = JSON.parse(observationMessage({ type: 'latency', latency: latency() }));
    expect(sent).toEqual({
      type: 'latency',
      latency: {
        node_id: 'greeting',
        total_ms: 412.3,
        provider_wait_ms: 398.1,
        service_ms: 14.3,
        model_wait_ms: 250,
        tts_wait_ms: 160.1,
        model_first_token_ms: 120.5,
      },
    });
  });

  it('latency: a turn without a model token or a node keeps them null', () => {
    const sent = JSON.parse(observationMessage({ type: 'latency', latency: latency({ nodeId: null, modelFirstTokenMs: null }) }));
    expect(sent.latency.node_id).toBeNull();
    expect(sent.latency.model_first_token_ms).toBeNull();
  });
});

/** A parse result is ok with one of the three messages, or not ok with a non-empty reason. */
function expectWellFormed(parsed: ReturnType<typeof parseBrowserMessage>) {
  if (parsed.ok) {
    const m = parsed.message;
    expect(['mark', 'dtmf', 'hangup']).toContain(m.type);
    if (m.type === 'mark') expect(m.name.length).toBeGreaterThan(0);
    if (m.type === 'dtmf') expect(m.digit).toMatch(/^[0-9*#A-D]$/);
    expect(Object.keys(m).sort()).toEqual(m.type === 'hangup' ? ['type'] : m.type === 'mark' ? ['name', 'type'] : ['digit', 'type']);
  } else {
    expect(typeof parsed.reason).toBe('string');
    expect(parsed.reason.length).toBeGreaterThan(0);
    expect(parsed.reason.length).toBeLessThan(200);
  }
}

describe('fuzz: anything the browser sends', () => {
  it('JSON nested as deep as 64 KiB allows, in any field, never throws', () => {
    const nest = (depth: number, open: string, close: string) => open.repeat(depth) + close.repeat(depth);
    for (const depth of [100, 5_000, 10_000]) {
      for (const [open, close] of [['[', ']'], ['{"a":', '}']] as const) {
        const inner = open === '[' ? nest(depth, open, close) : `${open.repeat(depth)}1${close.repeat(depth)}`;
        for (const text of [`{"type":${inner}}`, `{"type":"mark","name":${inner}}`, `{"type":"dtmf","digit":${inner}}`, inner]) {
          expect(Buffer.byteLength(text)).toBeLessThanOrEqual(MAX_MESSAGE_BYTES);
          let parsed: ReturnType<typeof parseBrowserMessage> | undefined;
          expect(() => (parsed = parseBrowserMessage(text))).not.toThrow();
          expect(parsed?.ok).toBe(false);
          expectWellFormed(parsed!);
        }
      }
    }
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 16_000 }), fc.constantFrom('type', 'name', 'digit'), (depth, field) => {
        const text = `{"type":"mark","${field}":${'['.repeat(depth)}${']'.repeat(depth)}}`;
        expectWellFormed(parseBrowserMessage(text));
      }),
      { numRuns: 200 },
    );
  });

  it('arbitrary strings never throw and always give a message or a reason', () => {
    fc.assert(
      fc.property(fc.oneof(fc.string(), fc.string({ unit: 'binary' }), fc.string({ unit: 'grapheme', maxLength: 300 })), (text) => {
        expectWellFormed(parseBrowserMessage(text));
      }),
      { numRuns: 800 },
    );
  });

  it('arbitrary JSON (and near-messages) never throw and always give a message or a reason', () => {
    const nearMessage = fc.record(
      {
        type: fc.oneof(fc.constantFrom('mark', 'dtmf', 'hangup', 'media', '', 'Mark'), fc.jsonValue()),
        name: fc.oneof(fc.string({ maxLength: 250 }), fc.jsonValue()),
        digit: fc.oneof(fc.constantFrom(...'0123456789*#ABCDEabcd'.split(''), '', '12'), fc.jsonValue()),
      },
      { requiredKeys: [] },
    );
    fc.assert(
      fc.property(fc.oneof(fc.jsonValue(), nearMessage), (value) => {
        const parsed = parseBrowserMessage(JSON.stringify(value) ?? 'undefined');
        expectWellFormed(parsed);
        // what is taken is exactly what was sent
        if (parsed.ok) expect(value).toMatchObject(parsed.message);
      }),
      { numRuns: 800 },
    );
  });

  it('arbitrary buffers: as audio never throw and give null or a reason; as text the same', () => {
    fc.assert(
      fc.property(fc.oneof(fc.uint8Array({ maxLength: 2_000 }), fc.integer({ min: 0, max: MAX_MESSAGE_BYTES }).map((n) => new Uint8Array(n))), (bytes) => {
        const buffer = Buffer.from(bytes);
        const wrong = checkAudio(buffer);
        const fine = buffer.length > 0 && buffer.length % 2 === 0 && buffer.length <= MAX_AUDIO_BYTES;
        if (fine) expect(wrong).toBeNull();
        else expect(wrong).toMatch(/audio frame/);
        expectWellFormed(parseBrowserMessage(buffer.toString('utf8')));
      }),
      { numRuns: 400 },
    );
  });
});
