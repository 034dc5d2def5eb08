/**
 * Listen-in's parts alone, on a hand-turned clock: the stereo mixer (src/calls/listen-mixer.ts:
 * the customer left, what the customer hears right, at the times they were heard, whole 640-byte
 * frames that are time), the call's tap (src/calls/listen.ts: frames on the tick to every output,
 * an output that throws dropped, the end), the hub's one-time tokens and its registry of calls, and
 * the tap behind a real pacer (what the pacer sends is what the right channel carries, at its slot).
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { pino } from 'pino';
import { MULAW_DECODE_TABLE } from '../../src/audio/mulaw.js';
import { LISTEN_FRAME_BYTES, StereoMixer } from '../../src/calls/listen-mixer.js';
import { ListenHub, ListenTap, type ListenOutput } from '../../src/calls/listen.js';
import { FRAME_BYTES, OutboundPacer, type PacerClock } from '../../src/calls/outbound.js';

const silent = pino({ level: 'silent' });
let now = 0;
let ticks = new Set<() => void>();
const clock: PacerClock = {
  now: () => now,
  subscribe: (fn) => {
    ticks.add(fn);
    return () => ticks.delete(fn);
  },
};

/** Lets `ms` pass, 10 ms a tick, as the shared tick does. */
function pass(ms: number): void {
  for (let t = 0; t < ms; t += 10) {
    now += 10;
    for (const tick of [...ticks]) tick();
  }
}

beforeEach(() => {
  now = 1_000;
  ticks = new Set();
});

/** A 20 ms μ-law frame of one byte value. */
const frame = (byte: number) => Buffer.alloc(FRAME_BYTES, byte);
const CALLER = 0x20;
const ASSISTANT = 0x90;
const L = MULAW_DECODE_TABLE[CALLER]!;
const R = MULAW_DECODE_TABLE[ASSISTANT]!;

/** Each sample of a stereo buffer: [left, right]. */
function samples(pcm: Buffer): Array<[number, number]> {
  const out: Array<[number, number]> = [];
  for (let i = 0; i < pcm.length; i += 4) out.push([pcm.readInt16LE(i), pcm.readInt16LE(i + 2)]);
  return out;
}

/** Where each channel carries sound: the sample ranges [from, to) of non-zero samples. */
function spans(pcm: Buffer, channel: 0 | 1): Array<[number, number]> {
  const out: Array<[number, number]> = [];
  samples(pcm).forEach((s, i) => {
    if (s[channel] === 0) return;
    const last = out.at(-1);
    if (last && last[1] === i) last[1] = i + 1;
    else out.push([i, i + 1]);
  });
  return out;
}

describe('the stereo mixer', () => {
  it('gives silence as whole 640-byte frames, as many as the time that passed (less the hold, until the end: then the frame under way too)', () => {
    const mixer = new StereoMixer({ now: () => now, holdMs: 100 });
    let taken = Buffer.alloc(0);
    for (let i = 0; i < 100; i++) {
      // an uneven clock: the frames still add up to the time
      now += 7 + (i % 5) * 3;
      const got = mixer.take();
      if (got) {
        expect(got.length % LISTEN_FRAME_BYTES).toBe(0);
        taken = Buffer.concat([taken, got]);
      }
    }
    const elapsed = now - 1_000;
    expect(taken.length / LISTEN_FRAME_BYTES).toBe(Math.floor((elapsed - 100) / 20));
    expect(taken.every((b) => b === 0)).toBe(true);
    const rest = mixer.drain()!;
    expect((taken.length + rest.length) / LISTEN_FRAME_BYTES).toBe(Math.ceil(elapsed / 20));
    expect(mixer.frames).toBe(Math.ceil(elapsed / 20));
    expect(mixer.take()).toBeNull();
  });

  it('puts the customer on the left and what the customer hears on the right, each at its time', () => {
    const mixer = new StereoMixer({ now: () => now, holdMs: 100 });
    // the assistant's frames 100–300 ms, scheduled ahead (as the pacer sends them: up to 60 ms early)
    for (let t = 100; t < 300; t += 20) mixer.heard(frame(ASSISTANT), 1_000 + t);
    // the customer's frames as they arrive, 400–600 ms (each at the end of the 20 ms it holds)
    now = 1_400;
    for (let t = 0; t < 200; t += 20) {
      now += 20;
      mixer.caller(frame(CALLER));
    }
    now = 2_000;
    const pcm = mixer.drain()!;
    expect(pcm.length).toBe(50 * LISTEN_FRAME_BYTES);
    // 8 samples a ms
    expect(spans(pcm, 1)).toEqual([[800, 2400]]);
    expect(spans(pcm, 0)).toEqual([[3200, 4800]]);
    const s = samples(pcm);
    expect(s[1000]).toEqual([0, R]);
    expect(s[4000]).toEqual([L, 0]);
  });

  it('blanks the right channel from a clear on: the far end dropped what it had not played', () => {
    const mixer = new StereoMixer({ now: () => now, holdMs: 100 });
    // 300 ms of reply queued ahead of time, then the caller barges in at 100 ms
    for (let t = 0; t < 300; t += 20) mixer.heard(frame(ASSISTANT), 1_000 + t);
    now = 1_100;
    mixer.cleared();
    // what the pacer sends after the clear is heard again
    mixer.heard(frame(ASSISTANT), 1_200);
    now = 1_400;
    expect(spans(mixer.drain()!, 1)).toEqual([
      [0, 800],
      [1600, 1760],
    ]);
  });

  it('lays a customer\'s late frames end to end, waiting for a late stream a while before it leaves a gap', async () => {
    const mixer = new StereoMixer({ now: () => now, holdMs: 100, maxWaitMs: 200 });
    let pcm = Buffer.alloc(0);
    const take = () => {
      const got = mixer.take();
      if (got) pcm = Buffer.concat([pcm, got]);
    };
    const frames = () => pcm.length / LISTEN_FRAME_BYTES;
    // 200 ms of steady frames
    for (let i = 0; i < 10; i++) {
      now += 20;
      mixer.caller(frame(CALLER));
      take();
    }
    // 60 ms without a frame, then the three in a burst
    now += 60;
    take();
    for (let i = 0; i < 3; i++) mixer.caller(frame(CALLER));
    // 250 ms without one (longer than the hold, not than the hold and the wait): nothing is taken
    // past the stream meanwhile; then its frames come, late, and are laid end to end
    const before = frames();
    for (let i = 0; i < 25; i++) {
      now += 10;
      take();
    }
    expect(frames() - before).toBeLessThan(25 / 2);
    for (let i = 0; i < 13; i++) mixer.caller(frame(CALLER));
    // 600 ms without one: past the wait, the frames taken are silence, and the next ones come after a gap
    for (let i = 0; i < 60; i++) {
      now += 10;
      take();
    }
    for (let i = 0; i < 5; i++) {
      now += 20;
      mixer.caller(frame(CALLER));
      take();
    }
    pcm = Buffer.concat([pcm, mixer.drain()!]);
    const left = spans(pcm, 0);
    expect(left).toHaveLength(2);
    expect(left[0]![1] - left[0]![0]).toBe(26 * 160);
    expect(left[1]![1] - left[1]![0]).toBe(5 * 160);
    // the frames are time all the same
    expect(frames()).toBe(Math.ceil((now - 1_000) / 20));
  });

  it('brings a customer\'s drifting stream back to the clock in its quiet frames, never inside a line', () => {
    const mixer = new StereoMixer({ now: () => now, holdMs: 100 });
    let pcm = Buffer.alloc(0);
    // a stream 10% slower than real time: a frame every 22 ms; a line of 1 s, a second of quiet, a line of 1 s
    const send = (byte: number, count: number) => {
      for (let i = 0; i < count; i++) {
        now += 22;
        mixer.caller(frame(byte));
        const got = mixer.take();
        if (got) pcm = Buffer.concat([pcm, got]);
      }
    };
    send(0xff, 10);
    const firstAt = now;
    send(CALLER, 50);
    send(0xff, 50);
    const secondAt = now;
    send(CALLER, 50);
    pcm = Buffer.concat([pcm, mixer.drain()!]);
    const left = spans(pcm, 0);
    // each line whole, with no gap inside it
    expect(left.map(([a, b]) => b - a)).toEqual([50 * 160, 50 * 160]);
    // and each where it was spoken: the quiet between them took the drift up
    expect(Math.abs(left[0]![0] - (firstAt - 1_000) * 8)).toBeLessThanOrEqual(2 * 160);
    expect(Math.abs(left[1]![0] - (secondAt - 1_000) * 8)).toBeLessThanOrEqual(2 * 160);
  });

  it('never lets a customer who sends faster than real time run far ahead, nor hold more than its ring', () => {
    const mixer = new StereoMixer({ now: () => now, holdMs: 100, capacityMs: 1_000 });
    // ten seconds of audio in one go, then a second of silence from the customer
    for (let i = 0; i < 500; i++) mixer.caller(frame(CALLER));
    now += 1_000;
    const pcm = mixer.drain()!;
    expect(pcm.length).toBe(50 * LISTEN_FRAME_BYTES);
    // at most the 200 ms it may be ahead of the clock (and what the ring held) came through
    const sound = spans(pcm, 0).reduce((n, [a, b]) => n + b - a, 0);
    expect(sound).toBeLessThanOrEqual(200 * 8 + 160);
  });

  it('keeps time through a stall longer than its ring: the missing stretch is silence', () => {
    const mixer = new StereoMixer({ now: () => now, holdMs: 100, capacityMs: 500 });
    mixer.heard(frame(ASSISTANT), 1_000);
    now += 3_000;
    const pcm = mixer.take()!;
    expect(pcm.length).toBe(((3_000 - 100) / 20) * LISTEN_FRAME_BYTES);
    expect(spans(pcm, 1)).toEqual([[0, 160]]);
  });

  it('drops what is laid in the past (taken already) or beyond its ring', () => {
    const mixer = new StereoMixer({ now: () => now, holdMs: 0, capacityMs: 500 });
    now += 200;
    mixer.take();
    mixer.heard(frame(ASSISTANT), 1_100); // already taken
    mixer.heard(frame(ASSISTANT), 1_900); // past the ring (200 + 500 ms)
    mixer.heard(frame(ASSISTANT), 1_300);
    now += 800;
    expect(spans(mixer.take()!, 1)).toEqual([[800, 960]]);
  });
});

/** An output that keeps what it gets. */
function keeper() {
  const got = { audio: [] as Buffer[], events: [] as any[], ended: 0 };
  const output: ListenOutput = {
    audio: (f) => void got.audio.push(f),
    event: (json) => void got.events.push(JSON.parse(json)),
    end: () => void got.ended++,
  };
  return { got, output, frames: () => Buffer.concat(got.audio).length / LISTEN_FRAME_BYTES };
}

describe('the tap', () => {
  it('gives every output the frames as the tick passes them, three at a time, and the events; at the end the held frames, then the end', () => {
    let idle = 0;
    const tap = new ListenTap(clock, silent, () => idle++);
    const a = keeper();
    const b = keeper();
    tap.add(a.output);
    tap.add(b.output);
    pass(1_000);
    // (the last 160 ms are held for the customer's late frames)
    expect(a.frames()).toBe(42);
    expect(a.got.audio.map((f) => f.length / LISTEN_FRAME_BYTES)).toEqual(Array(14).fill(3));
    expect(b.got.audio).toEqual(a.got.audio);
    tap.event({ type: 'node', node_id: 'booking', nodes_visited: ['greeting', 'booking'] });
    expect(a.got.events).toEqual([{ type: 'node', node_id: 'booking', nodes_visited: ['greeting', 'booking'] }]);
    tap.event({ type: 'ended', ended_reason: 'customer-ended-call' });
    expect(a.got.events.at(-1)).toEqual({ type: 'ended', ended_reason: 'customer-ended-call' });
    expect(a.frames()).toBe(50);
    expect([a.got.ended, b.got.ended, idle]).toEqual([1, 1, 1]);
    expect(ticks.size).toBe(0);
  });

  it('drops an output that throws, and goes on for the others', () => {
    const tap = new ListenTap(clock, silent, () => undefined);
    const good = keeper();
    let ended = 0;
    tap.add({
      audio: () => {
        throw new Error('a broken socket');
      },
      event: () => undefined,
      end: () => void ended++,
    });
    tap.add(good.output);
    pass(500);
    expect(ended).toBe(1);
    expect(tap.listeners).toBe(1);
    // (three frames at a time: 15 of the 17 due)
    expect(good.frames()).toBe(15);
  });

  it('leaves the tick once its last output is removed', () => {
    let idle = 0;
    const tap = new ListenTap(clock, silent, () => idle++);
    const a = keeper();
    tap.add(a.output);
    pass(200);
    tap.remove(a.output);
    expect(idle).toBe(1);
    expect(ticks.size).toBe(0);
  });
});

describe('a real pacer with a tap behind it', () => {
  it('carries what the pacer sends on the right, at the slot each frame plays in', () => {
    const tap = new ListenTap(clock, silent, () => undefined);
    const out = keeper();
    tap.add(out.output);
    const pacer: OutboundPacer = new OutboundPacer(
      {
        sendFrame: (f) => tap.heard(f, pacer.slot),
        sendMark: () => undefined,
        sendClear: () => tap.cleared(),
      },
      clock,
    );
    pass(200);
    // 400 ms of reply from 200 ms on, then the caller cuts in at 400 ms
    pacer.push(Buffer.alloc(20 * FRAME_BYTES, ASSISTANT));
    pass(200);
    pacer.clear();
    pass(600);
    tap.event({ type: 'ended', ended_reason: 'x' });
    const pcm = Buffer.concat(out.got.audio);
    expect(pcm.length / LISTEN_FRAME_BYTES).toBe(50);
    // heard from 200 to 400 ms (the pacer's lead was never played: the clear dropped it)
    expect(spans(pcm, 1)).toEqual([[1600, 3200]]);
    pacer.close();
  });
});

describe('the hub', () => {
  afterEach(() => {
    vi.useRealTimers();
  });
  const callId = '6f1c2a3b-4d5e-4f60-8a7b-9c0d1e2f3a4b';
  const record = { id: callId, type: 'inbound_phone_call', assistant_id: 'a', workflow_id: null } as const;

  it('gives one-time tokens: a token works once, for its call, within 60 s', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    const hub = new ListenHub({ log: silent, clock });
    const token = await hub.issue(callId);
    expect(ListenHub.wellFormed(token)).toBe(true);
    expect(token.startsWith(`${callId}.`)).toBe(true);
    expect(await hub.claim(token)).toBe(callId);
    expect(await hub.claim(token)).toBeNull();
    // another call's id on a real secret is no token
    const other = await hub.issue(callId);
    expect(await hub.claim(other.replace(callId, '00000000-0000-4000-8000-000000000000'))).toBeNull();
    expect(await hub.claim('nonsense')).toBeNull();
    const late = await hub.issue(callId);
    vi.advanceTimersByTime(60_001);
    expect(await hub.claim(late)).toBeNull();
    await hub.close();
  });

  it('attaches listeners to a registered call, puts the tap on its audio path while they listen, and forgets the call at its end', async () => {
    const hub = new ListenHub({ log: silent, clock });
    const installed: Array<ListenTap | null> = [];
    const call = hub.register(record, (tap) => installed.push(tap));
    expect(await hub.find(callId)).toEqual({ id: callId, type: 'inbound_phone_call', assistant_id: 'a', workflow_id: null });
    const a = keeper();
    const detach = (await hub.attach(callId, a.output))!;
    expect(installed).toHaveLength(1);
    expect(installed[0]).toBeInstanceOf(ListenTap);
    detach();
    expect(installed).toEqual([installed[0], null]);
    const b = keeper();
    await hub.attach(callId, b.output);
    call.observed({ type: 'message', message: { role: 'assistant', content: 'Hello.', time: 't', seconds_from_start: 1, node_id: null } });
    call.observed({ type: 'ended', ended_reason: 'customer-ended-call' });
    expect(b.got.events.map((e) => e.type)).toEqual(['message', 'ended']);
    expect(b.got.ended).toBe(1);
    expect(installed.at(-1)).toBeNull();
    expect(await hub.find(callId)).toBeNull();
    expect(await hub.attach(callId, keeper().output)).toBeNull();
    await hub.close();
  });
});
