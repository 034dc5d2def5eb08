/**
 * The pacer with a background (DECISIONS 13): the bed fills every gap between lines at 50 frames
 * a second, speech goes out mixed over it, a pause or clear cuts the speech and never the bed,
 * and the clock of lateness keeps counting while only the bed plays. A manual clock drives it.
 */
import { describe, expect, it } from 'vitest';
import { BACKGROUND_LEAD_MS, FRAME_BYTES, FRAME_MS, OutboundPacer, type PacerClock } from '../../src/calls/outbound.js';

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
  get subscribed() {
    return this.subs.size;
  }
  /** Moves time on in steps of 10 ms (the shared tick's period), ticking each. */
  advance(ms: number, step = FRAME_MS / 2) {
    for (let done = 0; done < ms; done += step) {
      this.t += step;
      for (const s of [...this.subs]) s();
    }
  }
}

interface Sent {
  kind: 'frame' | 'mark' | 'clear';
  speech?: boolean;
  byte?: number;
  at: number;
  name?: string;
}

function setup() {
  const clock = new ManualClock();
  const sent: Sent[] = [];
  const pacer = new OutboundPacer(
    {
      sendFrame: (frame, speech) => sent.push({ kind: 'frame', speech, byte: frame[0]!, at: clock.t }),
      sendMark: (name) => sent.push({ kind: 'mark', name, at: clock.t }),
      sendClear: () => sent.push({ kind: 'clear', at: clock.t }),
    },
    clock,
  );
  /** A bed whose frames are all 0x11, and which marks speech it mixes by writing 0x22. */
  const bed = {
    nexts: 0,
    mixes: 0,
    next() {
      this.nexts++;
      return Buffer.alloc(FRAME_BYTES, 0x11);
    },
    mix(speech: Buffer) {
      this.mixes++;
      const out = Buffer.from(speech);
      out[0] = 0x22;
      return out;
    },
  };
  return { clock, sent, pacer, bed };
}

const frames = (sent: Sent[]) => sent.filter((s) => s.kind === 'frame');

describe('OutboundPacer without a background', () => {
  it('sends only speech, and stops ticking once the queue is empty', () => {
    const { clock, sent, pacer } = setup();
    pacer.push(Buffer.alloc(FRAME_BYTES * 5, 0x55));
    clock.advance(400);
    expect(frames(sent)).toHaveLength(5);
    expect(frames(sent).every((f) => f.speech && f.byte === 0x55)).toBe(true);
    expect(clock.subscribed).toBe(0);
    expect(pacer.queuedMs()).toBe(0);
  });
});

describe('OutboundPacer with a background', () => {
  it('fills the silence with the bed at 50 frames a second, a little ahead of real time', () => {
    const { clock, sent, pacer, bed } = setup();
    pacer.setBackground(bed);
    clock.advance(2_000);
    const f = frames(sent);
    // 2 s of real time, plus the lead sent ahead
    expect(f.length).toBeGreaterThanOrEqual(100);
    expect(f.length).toBeLessThanOrEqual(100 + BACKGROUND_LEAD_MS / FRAME_MS + 1);
    expect(f.every((x) => x.speech === false && x.byte === 0x11)).toBe(true);
    expect(pacer.queuedMs()).toBe(0);
    expect(pacer.stats.framesLate).toBe(0);
  });

  it('mixes speech over the bed, marks it as speech, and goes back to the bed after it', () => {
    const { clock, sent, pacer, bed } = setup();
    pacer.setBackground(bed);
    clock.advance(200);
    pacer.push(Buffer.alloc(FRAME_BYTES * 10, 0x55));
    pacer.mark('m1');
    expect(pacer.queuedMs()).toBeGreaterThan(0); // speech still to go
    clock.advance(1_000);
    const f = frames(sent);
    const speech = f.filter((x) => x.speech);
    expect(speech).toHaveLength(10);
    expect(speech.every((x) => x.byte === 0x22)).toBe(true);
    expect(bed.mixes).toBe(10);
    // one stream: bed, then the ten frames of speech together, then bed again
    const firstSpeech = f.findIndex((x) => x.speech);
    expect(f.slice(firstSpeech, firstSpeech + 10).every((x) => x.speech)).toBe(true);
    expect(f.slice(firstSpeech + 10).every((x) => !x.speech)).toBe(true);
    expect(f.slice(firstSpeech + 10).length).toBeGreaterThan(30);
    // the mark follows the last frame of speech, before any bed frame after it
    const markAt = sent.findIndex((s) => s.kind === 'mark');
    expect(sent.slice(0, markAt).filter((s) => s.kind === 'frame' && s.speech)).toHaveLength(10);
    expect(pacer.queuedMs()).toBe(0);
    // 50 frames a second throughout, whatever was in them
    const span = f.at(-1)!.at - f[0]!.at;
    expect(f.length).toBeGreaterThanOrEqual(Math.floor(span / FRAME_MS));
  });

  it('a clear cuts the speech and the bed resumes at once; a pause keeps the bed going', () => {
    const { clock, sent, pacer, bed } = setup();
    pacer.setBackground(bed);
    pacer.push(Buffer.alloc(FRAME_BYTES * 50, 0x55));
    clock.advance(200);
    pacer.clear();
    const clearedAt = clock.t;
    clock.advance(20);
    const after = frames(sent).filter((x) => x.at >= clearedAt);
    expect(after.length).toBeGreaterThan(0);
    expect(after.every((x) => !x.speech)).toBe(true);
    expect(after[0]!.at - clearedAt).toBeLessThanOrEqual(FRAME_MS / 2);

    pacer.push(Buffer.alloc(FRAME_BYTES * 50, 0x55));
    clock.advance(100);
    pacer.pause();
    const pausedAt = clock.t;
    clock.advance(500);
    const duringPause = frames(sent).filter((x) => x.at > pausedAt);
    expect(duringPause.length).toBeGreaterThanOrEqual(24);
    expect(duringPause.every((x) => !x.speech)).toBe(true);
    pacer.resume();
    clock.advance(100);
    expect(frames(sent).filter((x) => x.at > pausedAt + 500).some((x) => x.speech)).toBe(true);
  });

  it('counts frames late while only the bed plays, and not after a clear', () => {
    const { clock, pacer, bed } = setup();
    pacer.setBackground(bed);
    clock.advance(200);
    // the event loop is held up for 100 ms
    clock.t += 100;
    clock.advance(10);
    expect(pacer.stats.framesLate).toBe(1);
    expect(pacer.stats.maxLateMs).toBeGreaterThan(60);
    pacer.clear();
    clock.t += 100;
    clock.advance(10);
    expect(pacer.stats.framesLate).toBe(1);
  });

  it('close stops the bed for good', () => {
    const { clock, sent, pacer, bed } = setup();
    pacer.setBackground(bed);
    clock.advance(100);
    pacer.close();
    const n = frames(sent).length;
    clock.advance(500);
    expect(frames(sent)).toHaveLength(n);
    expect(clock.subscribed).toBe(0);
    pacer.setBackground(bed);
    clock.advance(100);
    expect(frames(sent)).toHaveLength(n);
  });
});

describe('OutboundPacer: speech under a background goes at once', () => {
  it('the first frame of a reply leaves when it is pushed, not at the next tick', () => {
    const { clock, sent, pacer, bed } = setup();
    pacer.setBackground(bed);
    clock.advance(200);
    clock.t += 5; // between two ticks
    pacer.push(Buffer.alloc(FRAME_BYTES * 3, 0x55));
    const speech = frames(sent).filter((f) => f.speech);
    expect(speech.length).toBeGreaterThan(0);
    expect(speech[0]!.at).toBe(clock.t);
  });
});

describe('the pacer without a background', () => {
  it('property: every byte pushed goes out once, in order, in whole frames, with marks where they were put', async () => {
    const fc = (await import('fast-check')).default;
    type Op = { op: 'push'; n: number; seed: number } | { op: 'mark' } | { op: 'end' } | { op: 'wait'; ms: number };
    const op: import('fast-check').Arbitrary<Op> = fc.oneof(
      fc.record({ op: fc.constant('push' as const), n: fc.integer({ min: 1, max: 900 }), seed: fc.integer({ min: 0, max: 250 }) }),
      fc.constant({ op: 'mark' as const }),
      fc.constant({ op: 'end' as const }),
      fc.record({ op: fc.constant('wait' as const), ms: fc.integer({ min: 0, max: 200 }) }),
    );
    fc.assert(
      fc.property(fc.array(op, { maxLength: 25 }), fc.integer({ min: 1, max: 3 }), (ops, groupFrames) => {
        const clock = new ManualClock();
        const out: string[] = [];
        // frames given since the last flush: a tick that sends ends with one
        let unflushed = 0;
        const pacer = new OutboundPacer(
          {
            sendFrame: (frame) => {
              expect(frame.length).toBe(FRAME_BYTES);
              out.push(frame.toString('hex'));
              unflushed++;
            },
            flush: () => {
              unflushed = 0;
            },
            sendMark: (name) => out.push(`mark ${name}`),
            sendClear: () => out.push('clear'),
          },
          clock,
          undefined,
          groupFrames,
        );
        // the model: bytes in order, the partial frame padded with silence at a mark or the end
        const expected: string[] = [];
        let pending = Buffer.alloc(0);
        const flush = (pad: boolean) => {
          while (pending.length >= FRAME_BYTES) {
            expected.push(pending.subarray(0, FRAME_BYTES).toString('hex'));
            pending = pending.subarray(FRAME_BYTES);
          }
          if (pad && pending.length > 0) {
            const f = Buffer.alloc(FRAME_BYTES, 0xff);
            pending.copy(f);
            expected.push(f.toString('hex'));
            pending = Buffer.alloc(0);
          }
        };
        let marks = 0;
        for (const o of ops) {
          if (o.op === 'push') {
            const b = Buffer.alloc(o.n);
            for (let i = 0; i < o.n; i++) b[i] = (o.seed + i) & 0xff;
            pacer.push(b);
            pending = Buffer.concat([pending, b]);
            flush(false);
          } else if (o.op === 'mark') {
            const name = `m${++marks}`;
            pacer.mark(name);
            flush(true);
            expected.push(`mark ${name}`);
          } else if (o.op === 'end') {
            pacer.endOfAudio();
            flush(true);
          } else clock.advance(o.ms);
          expect(unflushed).toBe(0);
        }
        pacer.endOfAudio();
        flush(true);
        clock.advance(FRAME_MS * (expected.length + 5));
        expect(out).toEqual(expected);
        expect(pacer.queuedMs()).toBe(0);
      }),
      { numRuns: 300 },
    );
  });

  it('in groups of two frames: a due frame takes the next with it, the far end at most a group past the lead, flushed each tick', () => {
    const clock = new ManualClock();
    const ticks: { at: number; frames: number; flushed: boolean }[] = [];
    let current: { at: number; frames: number; flushed: boolean } | null = null;
    const pacer = new OutboundPacer(
      {
        sendFrame: () => {
          if (current?.at !== clock.t) ticks.push((current = { at: clock.t, frames: 0, flushed: false }));
          current.frames++;
          current.flushed = false;
        },
        flush: () => {
          if (current) current.flushed = true;
        },
        sendMark: () => undefined,
        sendClear: () => undefined,
      },
      clock,
      60,
      2,
    );
    const start = clock.t;
    pacer.push(Buffer.alloc(FRAME_BYTES * 51, 0x55)); // one second and a frame: the last group is short
    clock.advance(1_200);
    expect(ticks.reduce((n, t) => n + t.frames, 0)).toBe(51);
    expect(ticks.every((t) => t.flushed)).toBe(true);
    // the lead (60 ms: three frames) filled with two groups at once, then a group every 40 ms
    expect(ticks[0]).toMatchObject({ at: start, frames: 4 });
    expect(ticks.slice(1, -1).every((t) => t.frames === 2)).toBe(true);
    expect(ticks.at(-1)!.frames).toBe(1);
    let sent = 0;
    for (const t of ticks) {
      sent += t.frames;
      // what has been sent is never more than the lead plus one group ahead of real time
      expect(start + sent * FRAME_MS - t.at).toBeLessThanOrEqual(60 + 2 * FRAME_MS);
    }
  });

  it('a clear in the middle of a long reply drops the rest of it; what is pushed after goes out whole', () => {
    const clock = new ManualClock();
    const out: number[] = [];
    const pacer = new OutboundPacer({ sendFrame: (f) => out.push(f[0]!), sendMark: () => undefined, sendClear: () => out.push(-1) }, clock);
    const reply = Buffer.alloc(FRAME_BYTES * 50);
    for (let i = 0; i < 50; i++) reply.fill(i, i * FRAME_BYTES, (i + 1) * FRAME_BYTES);
    pacer.push(reply);
    clock.advance(100);
    const before = out.length;
    expect(before).toBeGreaterThan(3);
    expect(out).toEqual([...Array(before).keys()]);
    pacer.clear();
    expect(pacer.queuedMs()).toBe(0);
    pacer.push(Buffer.alloc(FRAME_BYTES * 2, 0xaa));
    clock.advance(200);
    expect(out.slice(before)).toEqual([-1, 0xaa, 0xaa]);
  });
});
