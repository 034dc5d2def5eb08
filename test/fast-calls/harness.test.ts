/**
 * The fast-call doubles themselves: the pacer's process-wide tick runs on the fake clock, and the
 * memory transport plays audio, answers marks and clears the way Twilio (and src/sim/caller.ts)
 * does. Every other fast call test rests on these.
 */
import { describe, expect, it, vi } from 'vitest';
import type { CallInput } from '../../src/calls/transport.js';
import { callHarness, useFastCalls } from '../helpers/call-harness.js';
import { MemoryTransport } from '../helpers/memory-transport.js';

useFastCalls();

/** A call that only listens to the transport: what `played` it got, and when. */
function listener() {
  const played: Array<[string, number]> = [];
  const input: CallInput = {
    audio: () => undefined,
    dtmf: () => undefined,
    played: (name) => played.push([name, performance.now()]),
    callerHungUp: () => undefined,
    farEndGone: () => undefined,
    fail: (err) => {
      throw err;
    },
    isEnded: () => false,
  };
  return { played, input };
}

const frame = () => Buffer.alloc(160, 0x55);

describe('the pacer on the fake clock', () => {
  it('sends a line at real-time pace, at most 60 ms ahead, each frame playing right after the one before', async () => {
    const line = 'Our office is open from nine to five on weekdays.';
    const h = callHarness({ assistant: { first_message: line } });
    await h.start();
    await h.until('the line heard', () => h.heard().includes(line));
    const frames = h.transport.frames;
    expect(frames).toHaveLength(h.voice.msOf(line) / 20);
    for (const [i, f] of frames.entries()) {
      expect(f.startsAt - f.sentAt).toBeGreaterThanOrEqual(0);
      expect(f.startsAt - f.sentAt).toBeLessThanOrEqual(60);
      if (i > 0) expect(f.startsAt).toBe(frames[i - 1]!.endsAt);
    }
    // the line plays for exactly its length, and its mark comes back as its last frame ends
    expect(frames.at(-1)!.endsAt - frames[0]!.startsAt).toBe(h.voice.msOf(line));
    expect(h.transport.marks.map((m) => m.answeredAt)).toEqual([frames.at(-1)!.endsAt]);
  });
});

describe('the memory transport', () => {
  it('answers a mark once the audio before it has played, on a later turn of the loop', async () => {
    const t = new MemoryTransport();
    const { played, input } = listener();
    t.attach(input);
    const start = performance.now();
    for (let i = 0; i < 3; i++) t.sendAudio(frame());
    t.mark('a');
    t.mark('b');
    expect(played).toEqual([]);
    await vi.advanceTimersByTimeAsync(59);
    expect(played).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(played).toEqual([
      ['a', start + 60],
      ['b', start + 60],
    ]);
    // nothing buffered: the answer still comes on a later turn, not inside mark()
    t.mark('c');
    expect(played).toHaveLength(2);
    await vi.advanceTimersByTimeAsync(0);
    expect(played.at(-1)).toEqual(['c', start + 60]);
  });

  it('a clear drops the audio not yet played, cuts the frame playing, and answers the pending marks as echoes of the clear', async () => {
    const t = new MemoryTransport();
    const { played, input } = listener();
    t.attach(input);
    for (let i = 0; i < 5; i++) t.sendAudio(frame());
    t.mark('after-five');
    await vi.advanceTimersByTimeAsync(50);
    t.clear();
    expect(t.frames.map((f) => (f.dropped ? 'dropped' : f.cutAt !== null ? 'cut' : 'played'))).toEqual(['played', 'played', 'cut', 'dropped', 'dropped']);
    expect(played).toEqual([]);
    await vi.advanceTimersByTimeAsync(0);
    expect(played.map(([name]) => name)).toEqual(['after-five']);
    expect(t.marks[0]).toMatchObject({ name: 'after-five', cleared: true });
    // audio after the clear plays at once
    const now = performance.now();
    t.sendAudio(frame());
    expect(t.frames.at(-1)!.startsAt).toBe(now);
  });

  it('after close: nothing more is answered, and what the call still sends is counted', async () => {
    const t = new MemoryTransport();
    const { played, input } = listener();
    t.attach(input);
    t.sendAudio(frame());
    t.mark('pending');
    t.close();
    t.sendAudio(frame());
    await vi.advanceTimersByTimeAsync(100);
    expect(played).toEqual([]);
    expect(t.sentAfterClose).toBe(1);
    // closed as it would have started: never heard
    expect(t.frames[0]).toMatchObject({ dropped: true, cutAt: null });
  });
});
