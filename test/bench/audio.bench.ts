/**
 * The cost per 20 ms frame of what background audio and recordings add to a call's media path:
 * `npm run bench:audio`. Each figure is the mean over many frames in a warm loop, in nanoseconds,
 * and what it is as a share of one core at 50 frames a second for 300 calls.
 *
 * - bed alone: `BackgroundBed.next()` (a slice of the clip encoded once per volume)
 * - mix: `BackgroundBed.mix()` (160 samples: μ-law decode, add, clamp, encode)
 * - recorder: `CallRecorder.caller()` + `heard()` for one frame each way (decode into the block;
 *   the file writes themselves are asynchronous and not in the figure)
 * - listen-in: `StereoMixer.caller()` + `heard()` for one frame each way and the stereo frame
 *   taken (`take()`, a new 640-byte buffer), what a call with listeners adds before its sockets
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { BackgroundAudio } from '../../src/audio/background.js';
import { CallRecorder } from '../../src/recordings/recorder.js';
import { StereoMixer } from '../../src/calls/listen-mixer.js';
import { LocalRecordingStore } from '../../src/recordings/storage.js';

const FRAMES = 200_000;

function measure(what: string, fn: (i: number) => void): number {
  for (let i = 0; i < 20_000; i++) fn(i); // warm-up
  const started = process.hrtime.bigint();
  for (let i = 0; i < FRAMES; i++) fn(i);
  const ns = Number(process.hrtime.bigint() - started) / FRAMES;
  const share = ((ns * 50 * 300) / 1e9) * 100;
  process.stdout.write(`  ${what.padEnd(44)} ${ns.toFixed(0).padStart(6)} ns/frame   ${share.toFixed(2).padStart(5)}% of a core for 300 calls at 50 frames/s\n`);
  return ns;
}

async function main() {
  process.stdout.write(`bench:audio on Node ${process.version}: per 20 ms frame (160 μ-law bytes)\n`);
  const clips = new BackgroundAudio({ fetcher: null, allowPrivate: false });
  const bed = await clips.bed('office', 0.5);
  const speech = Buffer.alloc(160);
  for (let i = 0; i < 160; i++) speech[i] = (i * 37) & 0xff;
  let sink = 0;
  measure('background alone (BackgroundBed.next)', () => {
    sink ^= bed.next()[0]!;
  });
  measure('speech mixed over it (BackgroundBed.mix)', () => {
    sink ^= bed.mix(speech)[0]!;
  });

  {
    let t = 0;
    const mixer = new StereoMixer({ now: () => t });
    measure('listen-in, one frame each way and taken (StereoMixer)', (i) => {
      t = i * 20;
      mixer.caller(speech);
      mixer.heard(speech, t + 40);
      sink ^= mixer.take()?.[0] ?? 0;
    });
  }

  const dir = await mkdtemp(join(tmpdir(), 'sb-bench-audio-'));
  try {
    let t = 0;
    const recorder = new CallRecorder(new LocalRecordingStore(dir).begin('org_bench/call_bench.wav'), { log: pino({ level: 'silent' }), now: () => t });
    // one "frame" of the call: 20 ms later, one frame each way; flushes every second, as a call does
    measure('recording, one frame each way (CallRecorder)', (i) => {
      t = i * 20;
      recorder.caller(speech);
      recorder.heard(speech, t + 40);
    });
    await recorder.discard();
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  if (sink === -1) process.stdout.write('');
}

await main();
