/**
 * The call recorder (DECISIONS 13) on a manual clock, into a real folder: both channels on one
 * timeline, a `clear` blanks what was never heard, the file grows while the call runs (memory
 * does not), and the WAV's header gets its sizes at the end.
 */
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { linearToMulaw } from '../../src/audio/mulaw.js';
import { parseWav } from '../../src/audio/wav.js';
import { CallRecorder } from '../../src/recordings/recorder.js';
import { LocalRecordingStore } from '../../src/recordings/storage.js';

const log = pino({ level: 'silent' });
let dir: string;
let store: LocalRecordingStore;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sb-recorder-'));
  store = new LocalRecordingStore(dir);
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const frame = (level: number) => Buffer.alloc(160, linearToMulaw(level));

/** Reads a stereo recording back as its two channels. */
async function channels(key: string) {
  const bytes = await readFile(join(dir, key));
  expect(bytes.toString('latin1', 0, 4)).toBe('RIFF');
  expect(bytes.readUInt16LE(22)).toBe(2);
  expect(bytes.readUInt32LE(24)).toBe(8000);
  expect(bytes.readUInt32LE(40)).toBe(bytes.length - 44);
  expect(bytes.readUInt32LE(4)).toBe(bytes.length - 8);
  const n = (bytes.length - 44) / 4;
  const left = new Int16Array(n);
  const right = new Int16Array(n);
  for (let i = 0; i < n; i++) {
    left[i] = bytes.readInt16LE(44 + i * 4);
    right[i] = bytes.readInt16LE(46 + i * 4);
  }
  return { left, right, bytes };
}

describe('CallRecorder', () => {
  it('lays the customer on the left and what they heard on the right, on one timeline', async () => {
    let t = 0;
    const rec = new CallRecorder(store.begin('org_a/call_1.wav'), { log, now: () => t });
    // 3 s of the customer at 1000, the assistant heard at 8000 from 1.0 s to 1.4 s
    for (let f = 0; f < 150; f++) {
      t = (f + 1) * 20;
      rec.caller(frame(1000));
      if (t >= 1000 && t < 1400) rec.heard(frame(8000), t);
    }
    expect(await rec.finish()).toBe(true);
    const { left, right } = await channels('org_a/call_1.wav');
    expect(left.length).toBeGreaterThanOrEqual(3 * 8000 - 160);
    expect(left.length).toBeLessThanOrEqual(3 * 8000 + 320);
    // the left channel is the customer throughout
    expect(left.slice(200, 23_000).every((v) => Math.abs(v - 1000) < 40)).toBe(true);
    // the right channel has the 400 ms of speech where it was played
    const loud = right.reduce((n, v) => n + (Math.abs(v) > 4000 ? 1 : 0), 0);
    expect(loud).toBe(400 * 8);
    expect(right.findIndex((v) => Math.abs(v) > 4000)).toBe(8000);
    await expect(store.exists('org_a/call_1.wav')).resolves.toBe(true);
  });

  it('a clear blanks what was sent ahead and never played', async () => {
    let t = 0;
    const rec = new CallRecorder(store.begin('org_a/call_2.wav'), { log, now: () => t });
    for (let f = 0; f < 50; f++) {
      t = f * 20;
      rec.caller(frame(0));
      // sent 60 ms ahead, as the pacer does
      rec.heard(frame(8000), t + 60);
    }
    // at t = 980 the far end drops the 60 ms it had buffered
    rec.cleared(t);
    for (let f = 50; f < 100; f++) {
      t = f * 20;
      rec.caller(frame(0));
    }
    await rec.finish();
    const { right } = await channels('org_a/call_2.wav');
    const lastLoud = right.findLastIndex((v) => Math.abs(v) > 4000);
    expect(lastLoud).toBe(Math.round((980 * 8000) / 1000) - 1);
  });

  it('writes as the call goes: a long call holds a few seconds in memory at most', async () => {
    let t = 0;
    const rec = new CallRecorder(store.begin('org_a/call_3.wav'), { log, now: () => t });
    const pending = () => (rec as unknown as { pending: Map<number, unknown> }).pending.size;
    let most = 0;
    // ten minutes of both channels, 50 frames a second
    for (let f = 0; f < 30_000; f++) {
      t = f * 20;
      rec.caller(frame(500));
      rec.heard(frame(-500), t + 40);
      most = Math.max(most, pending());
      // a second of the call: the event loop turns (the file's writes run between frames)
      if (f % 50 === 0) await new Promise((r) => setTimeout(r, 1));
    }
    expect(most).toBeLessThanOrEqual(4);
    const part = await stat(join(dir, 'org_a/call_3.wav.part'));
    expect(part.size).toBeGreaterThan(500 * 8000 * 4);
    expect(await rec.finish()).toBe(true);
    const wav = parseWav(await readFile(join(dir, 'org_a/call_3.wav')));
    expect(wav.channels).toBe(2);
    expect(wav.pcm.length / 8000).toBeCloseTo(600, 0);
  });

  it('a stalled customer stream is realigned to the clock', async () => {
    let t = 0;
    const rec = new CallRecorder(store.begin('org_a/call_4.wav'), { log, now: () => t });
    for (let f = 0; f < 50; f++) {
      t = f * 20;
      rec.caller(frame(1000));
    }
    // 3 s of nothing, then the stream again
    for (let f = 200; f < 250; f++) {
      t = f * 20;
      rec.caller(frame(-1000));
    }
    await rec.finish();
    const { left } = await channels('org_a/call_4.wav');
    const firstNegative = left.findIndex((v) => v < -500);
    expect(Math.abs(firstNegative - 4 * 8000)).toBeLessThanOrEqual(320);
  });

  it('discard leaves nothing, and a store that fails makes finish say false', async () => {
    const rec = new CallRecorder(store.begin('org_a/call_5.wav'), { log });
    rec.caller(frame(10));
    await rec.discard();
    await expect(store.exists('org_a/call_5.wav')).resolves.toBe(false);

    const broken = new CallRecorder(Promise.reject(new Error('disk full')), { log });
    broken.caller(frame(10));
    expect(await broken.finish()).toBe(false);
  });
});
