/**
 * The keypad's audio (src/calls/keypad.ts): Q.23 tone pairs, 100 ms of tone and 100 ms of
 * silence a key, `w` half a second, read back by an independent Goertzel receiver
 * (test/helpers/dtmf.ts); the frame tags a transport sends as RFC 4733 events; the keys the
 * model may ask for; and the pacer sending tagged frames in order, alone (no background under them).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { mulawDecode } from '../../src/audio/mulaw.js';
import { checkKeys, dtmfFrequencies, keypadAudio, keysDurationMs, keysFrom, type KeyFrame } from '../../src/calls/keypad.js';
import { builtinsFor, functionOffer } from '../../src/calls/model-turn.js';
import { FRAME_BYTES, FRAME_MS, OutboundPacer, type PacerClock } from '../../src/calls/outbound.js';
import { synthesizeSandboxSpeech } from '../../src/providers/sandbox/tts.js';
import { detectKeys, detectKeysMulaw } from '../helpers/dtmf.js';

describe('the tones', () => {
  it('every key decodes back, 100 ms of tone then 100 ms of silence each', () => {
    const keys = '1234567890*#';
    const { audio, frames } = keypadAudio(keys);
    expect(audio.length).toBe(keys.length * 200 * 8);
    expect(frames).toHaveLength(keys.length * 10);
    const heard = detectKeysMulaw(audio);
    expect(heard.map((k) => k.key).join('')).toBe(keys);
    for (const [i, k] of heard.entries()) {
      expect(k.startMs).toBeCloseTo(i * 200, -1); // within 5 ms
      expect(k.endMs - k.startMs).toBeGreaterThanOrEqual(90);
      expect(k.endMs - k.startMs).toBeLessThanOrEqual(110);
    }
  });

  it('the receiver hears no key in other sound: the sandbox voice, a tone pair that is not a key', () => {
    expect(detectKeysMulaw(synthesizeSandboxSpeech('For sales press 1, for support press 2.'))).toEqual([]);
    const notAKey = new Int16Array(4000).map((_, i) => 8000 * Math.sin((2 * Math.PI * 697 * i) / 8000) + 8000 * Math.sin((2 * Math.PI * 1000 * i) / 8000));
    expect(detectKeys(notAKey)).toEqual([]);
  });

  it('w is half a second of silence between keys', () => {
    const heard = detectKeysMulaw(keypadAudio('1w2ww#').audio);
    expect(heard.map((k) => k.key)).toEqual(['1', '2', '#']);
    expect(heard[1]!.startMs - heard[0]!.startMs).toBeCloseTo(200 + 500, -1);
    expect(heard[2]!.startMs - heard[1]!.startMs).toBeCloseTo(200 + 1000, -1);
    expect(keysDurationMs('1w2ww#')).toBe(3 * 200 + 3 * 500);
  });

  it('the two frequencies of a key, at Q.23 levels: the high one louder, the pair well under full scale', () => {
    expect(dtmfFrequencies('5')).toEqual([770, 1336]);
    expect(dtmfFrequencies('#')).toEqual([941, 1477]);
    const pcm = mulawDecode(keypadAudio('1').audio);
    const peak = Math.max(...[...pcm].map(Math.abs));
    expect(peak).toBeGreaterThan(15_000);
    expect(peak).toBeLessThan(24_000);
    // the silence after the tone is digital silence
    expect(pcm.subarray(800).every((s) => Math.abs(s) < 8)).toBe(true);
  });

  it('any sequence of keys and pauses decodes back to its keys, each where the plan puts it', () => {
    fc.assert(
      fc.property(fc.array(fc.constantFrom(...'0123456789*#w'), { minLength: 1, maxLength: 12 }), (chars) => {
        const keys = chars.join('');
        const heard = detectKeysMulaw(keypadAudio(keys).audio);
        expect(heard.map((k) => k.key).join('')).toBe(keys.replaceAll('w', ''));
        let at = 0;
        let i = 0;
        for (const c of keys) {
          if (c === 'w') {
            at += 500;
            continue;
          }
          expect(Math.abs(heard[i++]!.startMs - at)).toBeLessThanOrEqual(5);
          at += 200;
        }
      }),
      { numRuns: 40 },
    );
  });
});

describe('the frames a transport sends as RFC 4733 events', () => {
  it('each tone frame names its key and the duration so far; the last ends the event, and the two slots after repeat the end', () => {
    const { frames } = keypadAudio('#');
    const ev = (duration: number, end = false, repeat = 0): KeyFrame => ({ key: '#', event: 11, duration, end, repeat });
    expect(frames).toEqual([ev(160), ev(320), ev(480), ev(640), ev(800, true), ev(800, true, 1), ev(800, true, 2), null, null, null]);
    const pause = keypadAudio('0w');
    expect(pause.frames.slice(10)).toEqual(new Array(25).fill(null));
    expect(pause.frames[0]).toMatchObject({ key: '0', event: 0 });
    expect(keypadAudio('*').frames[0]).toMatchObject({ event: 10 });
  });
});

describe('the keys the model may press', () => {
  it('takes 0-9, * and # with w for pauses; anything else is an error naming it, and nothing is sent', () => {
    expect(keysFrom('{"digits":"12#"}')).toEqual({ keys: '12#' });
    expect(keysFrom('{"digits":"1w*0"}')).toEqual({ keys: '1w*0' });
    expect(keysFrom('{"digits":"12a"}')).toEqual({ error: expect.stringMatching(/"a" cannot be pressed.*no key was sent/) });
    expect(keysFrom('{"digits":"1 2"}')).toEqual({ error: expect.stringContaining('" " cannot be pressed') });
    expect(keysFrom('{"digits":12}')).toEqual({ error: expect.stringContaining('digits: required') });
    expect(keysFrom('{}')).toEqual({ error: expect.stringContaining('digits: required') });
    expect(keysFrom('not json')).toEqual({ error: 'arguments were not valid JSON' });
    expect(checkKeys('')).toEqual({ error: 'digits: no keys given' });
    expect(checkKeys('ww')).toEqual({ error: expect.stringContaining('only pauses') });
    expect(checkKeys('1'.repeat(65))).toEqual({ error: expect.stringContaining('at most 64') });
  });
});

describe('where the function is offered', () => {
  const config = { provider: 'sandbox', builtin_tools: ['press_keys' as const] };
  it('in a call\'s conversation turn whose block asks for it; not in a silence check-in, a tool node\'s choice, a chat (no keypad) or a block without it', () => {
    expect(builtinsFor({ mode: 'conversation' }, config, true)).toEqual(['press_keys']);
    expect(builtinsFor({ mode: 'conversation', fallback: 'Are you still there?' }, config, true)).toEqual([]);
    expect(builtinsFor({ mode: 'tool_choice' }, config, true)).toEqual([]);
    expect(builtinsFor({ mode: 'conversation' }, config, false)).toEqual([]);
    expect(builtinsFor({ mode: 'conversation' }, { provider: 'sandbox' }, true)).toEqual([]);
  });

  it('after the transitions and the assistant\'s tools, with its one string parameter', () => {
    const offer = functionOffer([{ name: 'go_to_bye', description: 'done', target: 'bye' }], [{ name: 'lookup' }], ['press_keys']);
    expect(offer.functions.map((f) => f.name)).toEqual(['go_to_bye', 'lookup', 'press_keys']);
    expect(offer.builtins).toEqual(new Set(['press_keys']));
    expect(offer.functions[2]!.parameters).toMatchObject({ type: 'object', required: ['digits'], properties: { digits: { type: 'string' } } });
    expect(functionOffer([], [], []).functions).toEqual([]);
  });
});

class ManualClock implements PacerClock {
  t = 1_000;
  private subs = new Set<() => void>();
  now() {
    return this.t;
  }
  subscribe(tick: () => void) {
    this.subs.add(tick);
    return () => this.subs.delete(tick);
  }
  advance(ms: number) {
    for (let done = 0; done < ms; done += FRAME_MS / 2) {
      this.t += FRAME_MS / 2;
      for (const s of [...this.subs]) s();
    }
  }
}

describe('the pacer', () => {
  it('sends a key press in order after the speech before it, frame by frame with its tags, and no background under it', () => {
    const clock = new ClockedSink();
    const { audio, frames } = keypadAudio('1');
    clock.pacer.setBackground({ next: () => Buffer.alloc(FRAME_BYTES, 0x11), mix: () => Buffer.alloc(FRAME_BYTES, 0x22) });
    clock.pacer.push(Buffer.alloc(FRAME_BYTES * 2 + 10, 0x33)); // speech with a partial last frame
    clock.pacer.push(audio, frames);
    clock.pacer.push(Buffer.alloc(FRAME_BYTES, 0x44));
    clock.clock.advance(1_000);
    const speechFrames = clock.sent.filter((s) => s.speech);
    // the speech (mixed), its padded last frame, the ten frames of the key alone, the speech after
    expect(speechFrames.map((s) => s.first)).toEqual([0x22, 0x22, 0x22, ...[...frames.keys()].map((i) => audio[i * FRAME_BYTES]), 0x22]);
    expect(speechFrames.slice(3, 13).map((s) => s.key ?? null)).toEqual(frames);
    expect(speechFrames.filter((s) => s.key).map((s) => s.key!.duration)).toEqual([160, 320, 480, 640, 800, 800, 800]);
    clock.pacer.close();
  });
});

class ClockedSink {
  readonly clock = new ManualClock();
  readonly sent: Array<{ speech: boolean; first: number; key?: KeyFrame }> = [];
  readonly pacer = new OutboundPacer(
    {
      sendFrame: (frame, speech, key) => this.sent.push({ speech, first: frame[0]!, ...(key ? { key } : {}) }),
      sendMark: () => undefined,
      sendClear: () => undefined,
    },
    this.clock,
  );
}
