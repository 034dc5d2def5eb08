/**
 * Listen-in on a whole call, both backends, on the fake clock (src/calls/listen.ts): a listener
 * that joins a live call hears the assistant on the right exactly when the caller heard it (the
 * frames the transport played), the caller on the left when they spoke, one 20 ms frame per 20 ms
 * from joining to the end; it gets the lines, the node and the end as a browser would; and once
 * the last listener leaves, the call's audio path no longer carries a tap.
 */
import { describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { callHarness, useFastCalls, type CallHarness } from '../helpers/call-harness.js';
import { MULAW_DECODE_TABLE } from '../../src/audio/mulaw.js';
import { LISTEN_FRAME_BYTES } from '../../src/calls/listen-mixer.js';
import { ListenHub, type ListenOutput } from '../../src/calls/listen.js';

useFastCalls();

const greeting = 'Thank you for calling Acme. How can I help?';

function keeper() {
  const got = { audio: [] as Buffer[], events: [] as any[], ended: 0 };
  const output: ListenOutput = {
    audio: (f) => void got.audio.push(Buffer.from(f)),
    event: (json) => void got.events.push(JSON.parse(json)),
    end: () => void got.ended++,
  };
  return { got, output, pcm: () => Buffer.concat(got.audio) };
}

/** The timeline samples (8 per ms from `from`) where a channel of the listener's audio has sound. */
function soundOn(pcm: Buffer, channel: 0 | 1): Set<number> {
  const out = new Set<number>();
  for (let i = 0; i * 4 < pcm.length; i++) if (pcm.readInt16LE(i * 4 + channel * 2) !== 0) out.add(i);
  return out;
}

/**
 * The timeline samples (8 a ms from `from`) where the transport played sound to the caller, of the
 * frames from `first` on (a frame sent ahead of its time before the listener joined is not theirs).
 */
function played(h: CallHarness, from: number, first: number): Set<number> {
  const out = new Set<number>();
  for (const f of h.transport.frames.slice(first)) {
    if (f.dropped) continue;
    const end = f.cutAt ?? f.endsAt;
    const first = Math.round((f.startsAt - from) * 8);
    for (let k = 0; k < f.frame.length && f.startsAt + k / 8 < end; k++) {
      if (MULAW_DECODE_TABLE[f.frame[k]!] !== 0) out.add(first + k);
    }
  }
  return out;
}

for (const kind of ['pipeline', 'realtime'] as const) {
  describe(`a listener on a ${kind} call`, () => {
    it('hears the assistant on the right as the caller heard it, the caller on the left, one frame per 20 ms, then the end', async () => {
      const hub = new ListenHub({ log: pino({ level: 'silent' }) });
      const h = callHarness({ kind, assistant: { first_message: greeting }, listen: hub });
      await h.start();
      const listener = keeper();
      const joinedAt = performance.now();
      const sentBefore = h.transport.frames.length;
      expect(await hub.attach(h.record.id, listener.output)).not.toBeNull();

      await h.until('the greeting heard', () => h.heard().join(' ') === greeting, 10_000, 20);
      await h.advance(300);
      const spokeAt = performance.now();
      await h.caller.say('I would like to book an appointment.');
      await h.until('the reply heard', () => h.heard().some((l) => l.startsWith('You said') || l.includes('book')), 10_000, 20);
      await h.advance(500);
      h.caller.hangUp();
      await h.untilEnded();
      const endedAt = performance.now();

      const pcm = listener.pcm();
      // continuous: the frames are the time from joining to the end (whole frames)
      expect(pcm.length % LISTEN_FRAME_BYTES).toBe(0);
      const frames = pcm.length / LISTEN_FRAME_BYTES;
      expect(Math.abs(frames - (endedAt - joinedAt) / 20)).toBeLessThanOrEqual(1);
      // the right channel is what the caller heard, sample for sample, where they heard it
      const right = soundOn(pcm, 1);
      const heard = played(h, joinedAt, sentBefore);
      expect(heard.size).toBeGreaterThan(8 * 1000);
      expect([...right].filter((s) => !heard.has(s))).toEqual([]);
      expect([...heard].filter((s) => s < frames * 160 && !right.has(s))).toEqual([]);
      // the left channel is the caller: their line, starting as they spoke (laid from the end of its first frame back)
      const leftSound = soundOn(pcm, 0);
      const left = [...leftSound].sort((a, b) => a - b);
      expect(left.length).toBeGreaterThan(0);
      const leftStart = left[0]! / 8 + joinedAt;
      expect(leftStart).toBeGreaterThanOrEqual(spokeAt - 20);
      expect(leftStart).toBeLessThanOrEqual(spokeAt + 20);
      // nothing of the caller on the right, nor of the assistant on the left, while the other spoke alone
      const greetingSamples = [...heard].filter((s) => s < (spokeAt - joinedAt) * 8);
      expect(greetingSamples.some((s) => leftSound.has(s))).toBe(false);

      // the events a browser gets: the lines as the record keeps them, and the end, last
      const types = listener.got.events.map((e) => e.type);
      expect(types.at(-1)).toBe('ended');
      expect(listener.got.events.at(-1)).toEqual({ type: 'ended', ended_reason: 'customer-ended-call' });
      const lines = listener.got.events.filter((e) => e.type === 'message').map((e) => [e.message.role, e.message.content]);
      expect(lines).toEqual(h.messages());
      expect(listener.got.ended).toBe(1);
      await hub.close();
    });

    it('takes the tap off the audio path when the last listener leaves, and puts one back for the next', async () => {
      const hub = new ListenHub({ log: pino({ level: 'silent' }) });
      const h = callHarness({ kind, assistant: { first_message: greeting }, listen: hub });
      await h.start();
      const first = keeper();
      const detach = (await hub.attach(h.record.id, first.output))!;
      await h.advance(200);
      detach();
      const framesThen = first.got.audio.length;
      await h.advance(1_000);
      expect(first.got.audio.length).toBe(framesThen);
      const second = keeper();
      const joinedAt = performance.now();
      await hub.attach(h.record.id, second.output);
      await h.advance(1_000);
      h.caller.hangUp();
      await h.untilEnded();
      const frames = second.pcm().length / LISTEN_FRAME_BYTES;
      expect(Math.abs(frames - (performance.now() - joinedAt) / 20)).toBeLessThanOrEqual(1);
      expect(first.got.ended).toBe(0);
      expect(second.got.ended).toBe(1);
      // the call is over: nobody can join it
      expect(await hub.attach(h.record.id, keeper().output)).toBeNull();
      await hub.close();
    });
  });
}
