/**
 * The playout contract alone (src/calls/playout.ts), on a real pacer with a hand-turned clock:
 * audio tagged with its utterance, "played up to P of U" from the far end's echoes, `clear`
 * sending every open utterance back to what was played of it, `stop`, the end of the call by the
 * clock; and the heard words computed from an utterance's segments and the position played.
 */
import { beforeEach, describe, expect, it } from 'vitest';
import { FRAME_BYTES, OutboundPacer, type PacerClock } from '../../src/calls/outbound.js';
import { heardText, Playout, type PlaybackFinished } from '../../src/calls/playout.js';

let now = 0;
let tick: (() => void) | null = null;
const clock: PacerClock = {
  now: () => now,
  subscribe: (fn) => {
    tick = fn;
    return () => (tick = null);
  },
};
let sent: string[] = [];
let clears = 0;
let playout: Playout;

/** Lets `ms` of real time pass at the far end, 10 ms a tick (the pacer sends what is due). */
function pass(ms: number): void {
  for (let t = 0; t < ms; t += 10) {
    now += 10;
    tick?.();
  }
}

/** `ms` of audio (μ-law frames). */
const audio = (ms: number) => Buffer.alloc((ms / 20) * FRAME_BYTES, 0x7f);

beforeEach(() => {
  now = 0;
  tick = null;
  sent = [];
  clears = 0;
  const pacer: OutboundPacer = new OutboundPacer(
    {
      sendFrame: () => undefined,
      sendMark: (name) => {
        sent.push(name);
        playout.sent(name, pacer.slot);
      },
      sendClear: () => clears++,
    },
    clock,
  );
  playout = new Playout(pacer);
});

describe('the playout', () => {
  it('tells an utterance how far it was played, mark by mark, then that it finished uncut', () => {
    const progress: number[] = [];
    const finished: PlaybackFinished[] = [];
    const u = playout.begin({ progress: (p) => progress.push(p), finished: (f) => finished.push(f) });
    playout.push(u, audio(200));
    playout.mark(u);
    playout.push(u, audio(300));
    playout.mark(u);
    playout.end(u);
    pass(600);
    expect(sent).toHaveLength(2);
    playout.echoed(sent[0]!);
    expect(progress).toEqual([200]);
    expect(finished).toEqual([]);
    playout.echoed(sent[1]!);
    expect(progress).toEqual([200, 500]);
    expect(finished).toEqual([{ positionMs: 500, interrupted: false }]);
    // an echo that comes again changes nothing
    playout.echoed(sent[1]!);
    expect(finished).toHaveLength(1);
  });

  it('finishes an utterance that said nothing as soon as it ends', () => {
    const finished: PlaybackFinished[] = [];
    const u = playout.begin({ finished: (f) => finished.push(f) });
    playout.end(u);
    expect(finished).toEqual([{ positionMs: 0, interrupted: false }]);
  });

  it('a clear drops the marks out and sends each open utterance back to what was played: it must be pushed again to finish', () => {
    const finished: PlaybackFinished[] = [];
    const u = playout.begin({ finished: (f) => finished.push(f) });
    playout.push(u, audio(200));
    playout.mark(u);
    playout.push(u, audio(200));
    playout.mark(u);
    playout.end(u);
    pass(500);
    playout.echoed(sent[0]!);
    playout.clear();
    expect(clears).toBe(1);
    expect(u.pushedMs).toBe(200);
    // the second mark's echo comes back with the clear: not played
    playout.echoed(sent[1]!);
    expect(u.playedMs).toBe(200);
    expect(finished).toEqual([]);
    // sent again from where it was played
    playout.push(u, audio(200));
    playout.mark(u);
    playout.end(u);
    pass(300);
    playout.echoed(sent[2]!);
    expect(finished).toEqual([{ positionMs: 400, interrupted: false }]);
  });

  it('stop ends an utterance where it was played, interrupted; its later echoes count for nothing', () => {
    const progress: number[] = [];
    const finished: PlaybackFinished[] = [];
    const u = playout.begin({ progress: (p) => progress.push(p), finished: (f) => finished.push(f) });
    playout.push(u, audio(100));
    playout.mark(u);
    playout.push(u, audio(100));
    playout.mark(u);
    pass(300);
    playout.echoed(sent[0]!);
    playout.stop(u);
    playout.echoed(sent[1]!);
    expect(progress).toEqual([100]);
    expect(finished).toEqual([{ positionMs: 100, interrupted: true }]);
  });

  it('at the end of a call, the marks whose audio has played by then count as played, in order, and no later one', () => {
    const progress: number[] = [];
    const u = playout.begin({ progress: (p) => progress.push(p) });
    for (let i = 0; i < 4; i++) {
      playout.push(u, audio(100));
      playout.mark(u);
    }
    pass(250);
    // the far end never echoes; two marks' audio has played by 250 ms (the third goes out ahead, at 300)
    expect(sent.length).toBeGreaterThanOrEqual(3);
    playout.settleDue(250);
    expect(progress).toEqual([100, 200]);
    expect(u.playedMs).toBe(200);
  });

  it('tells its listeners of each utterance\'s first audio, once', () => {
    const started: string[] = [];
    playout.listen({ audioStarted: (u) => started.push(u.id) });
    const a = playout.begin();
    const b = playout.begin();
    playout.push(a, audio(20));
    playout.push(a, audio(20));
    playout.push(b, Buffer.alloc(0));
    playout.push(b, audio(20));
    expect(started).toEqual([a.id, b.id]);
  });
});

describe('heard text', () => {
  const sentences = [
    { text: 'Hello there.', endMs: 1_000 },
    { text: 'How can I help?', endMs: 2_000 },
  ];

  it('is every segment played to its end', () => {
    expect(heardText(sentences, 0)).toBe('');
    expect(heardText(sentences, 1_000)).toBe('Hello there.');
    expect(heardText(sentences, 2_000)).toBe('Hello there. How can I help?');
  });

  it('takes the share of whole words played of the segment the position falls in', () => {
    expect(heardText([{ text: 'one two three four', endMs: 1_000 }], 500)).toBe('one two');
    expect(heardText(sentences, 1_500)).toBe('Hello there. How can');
  });
});
