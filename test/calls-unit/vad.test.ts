/**
 * The voice-activity detectors alone (src/calls/vad/), on an injected clock: the fixtures of
 * test/fixtures/vad/ through each, where speech starts and ends, what the noises give, the Silero
 * session shared by every call with each call's own state, chunking, a line that stops sending,
 * and nothing left behind by `close()`.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createSpeechDetector, type SpeechDetector } from '../../src/calls/vad/index.js';
import { sileroModel } from '../../src/calls/vad/silero.js';
import { VAD_FIXTURE_SETTINGS, VAD_FIXTURES, type VadFixture } from '../helpers/vad-fixtures.js';

type Stretch = { start: number; end: number | null };
const SILENCE = Buffer.alloc(160, 0xff);
const LEAD_MS = 400;
const MIN_DURATION_MS = (VAD_FIXTURE_SETTINGS as { interruption_min_duration: number }).interruption_min_duration * 1000;

interface Run {
  t: number;
  stretches: Stretch[];
  detector: SpeechDetector;
}

function detector(vad: 'webrtc' | 'silero'): Run {
  const run: Run = { t: 0, stretches: [], detector: null as unknown as SpeechDetector };
  run.detector = createSpeechDetector(
    vad,
    {
      onSpeechStart: (at) => run.stretches.push({ start: at, end: null }),
      onSpeechEnd: (at, startedAt) => {
        const last = run.stretches.at(-1)!;
        expect(last.start).toBe(startedAt);
        last.end = at;
      },
    },
    { now: () => run.t },
  );
  return run;
}

/** Line silence, the fixture, a second of line silence, in `chunk`-byte messages every chunk/8 ms. */
function feed(run: Run, audio: Buffer, chunk = 160): void {
  const all = Buffer.concat([Buffer.alloc(LEAD_MS * 8, 0xff), audio, Buffer.alloc(8000, 0xff)]);
  for (let i = 0; i < all.length; i += chunk) {
    run.detector.push(all.subarray(i, i + chunk));
    run.t += chunk / 8;
  }
}

const heard = (vad: 'webrtc' | 'silero', fixture: VadFixture, chunk?: number) => {
  const run = detector(vad);
  feed(run, fixture.mulaw, chunk);
  run.detector.close();
  // times from the fixture's first sample
  return run.stretches.map((s) => ({ start: s.start - LEAD_MS, end: s.end === null ? null : s.end - LEAD_MS }));
};

afterEach(() => {
  vi.useRealTimers();
});

describe.each([{ vad: 'webrtc' as const }, { vad: 'silero' as const }])('$vad', ({ vad }) => {
  it.each(VAD_FIXTURES.filter((f) => f.expect === 'interrupts').map((f) => ({ name: f.file, f })))(
    '$name: speech from where it starts (within 150 ms) to where it ends (within 200 ms), in stretches no more than 300 ms apart',
    ({ f }) => {
      const stretches = heard(vad, f);
      const [from, to] = f.sound;
      expect(stretches.length).toBeGreaterThan(0);
      expect(Math.abs(stretches[0]!.start - from)).toBeLessThanOrEqual(150);
      expect(Math.abs(stretches.at(-1)!.end! - to)).toBeLessThanOrEqual(200);
      for (let i = 1; i < stretches.length; i++) expect(stretches[i]!.start - stretches[i - 1]!.end!).toBeLessThanOrEqual(300);
    },
  );

  it.each(VAD_FIXTURES.filter((f) => f.expect === 'ignored').map((f) => ({ name: f.file, f })))(
    '$name: nothing as long as interruption_min_duration',
    ({ f }) => {
      for (const s of heard(vad, f)) expect(s.end! - s.start).toBeLessThan(MIN_DURATION_MS);
    },
  );

  it('babble: someone speaking, from its start to its end', () => {
    const babble = VAD_FIXTURES.find((f) => f.file === 'babble.wav')!;
    const stretches = heard(vad, babble);
    expect(stretches[0]!.start).toBeLessThanOrEqual(100);
    expect(stretches.at(-1)!.end! - stretches[0]!.start).toBeGreaterThan(2_500);
  });

  it('the same answer whatever the chunking (20 ms frames, 40 ms messages, odd sizes)', () => {
    const speech = VAD_FIXTURES.find((f) => f.file === 'speech-over-noise.wav')!;
    const frames = heard(vad, speech, 160);
    expect(heard(vad, speech, 320)).toEqual(frames);
    // a chunk that splits windows: the times may move by less than a chunk
    const odd = heard(vad, speech, 100);
    expect(odd).toHaveLength(frames.length);
    odd.forEach((s, i) => {
      expect(Math.abs(s.start - frames[i]!.start)).toBeLessThan(13);
      expect(Math.abs(s.end! - frames[i]!.end!)).toBeLessThan(13);
    });
  });

  it('calls side by side keep their own state: interleaved, each hears what it would alone', () => {
    const speech = VAD_FIXTURES.find((f) => f.file === 'speech-booking.wav')!;
    const babble = VAD_FIXTURES.find((f) => f.file === 'babble.wav')!;
    const a = detector(vad);
    const b = detector(vad);
    const audioA = Buffer.concat([Buffer.alloc(LEAD_MS * 8, 0xff), speech.mulaw, Buffer.alloc(8000, 0xff)]);
    const audioB = Buffer.concat([Buffer.alloc(LEAD_MS * 8, 0xff), babble.mulaw, Buffer.alloc(8000, 0xff)]);
    for (let i = 0; i < Math.max(audioA.length, audioB.length); i += 160) {
      if (i < audioA.length) a.detector.push(audioA.subarray(i, i + 160));
      if (i < audioB.length) b.detector.push(audioB.subarray(i, i + 160));
      a.t += 20;
      b.t += 20;
    }
    a.detector.close();
    b.detector.close();
    const shift = (r: Run) => r.stretches.map((s) => ({ start: s.start - LEAD_MS, end: s.end === null ? null : s.end - LEAD_MS }));
    expect(shift(a)).toEqual(heard(vad, speech));
    expect(shift(b)).toEqual(heard(vad, babble));
  });

  it('a line that stops sending mid-speech: speech ends at its last voiced audio once a hangover has passed, and close() leaves no timer', () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const speech = VAD_FIXTURES.find((f) => f.file === 'speech-booking.wav')!;
    const run = detector(vad);
    for (let i = 0; i < 1_500 * 8; i += 160) {
      run.detector.push(speech.mulaw.subarray(i, i + 160));
      run.t += 20;
      vi.advanceTimersByTime(20);
    }
    expect(run.stretches).toHaveLength(1);
    expect(run.detector.speaking).toBe(true);
    const lastAudio = run.t;
    for (let ms = 0; ms < 600 && run.stretches[0]!.end === null; ms++) {
      run.t++;
      vi.advanceTimersByTime(1);
    }
    expect(run.stretches[0]!.end).not.toBeNull();
    expect(run.stretches[0]!.end!).toBeLessThanOrEqual(lastAudio);
    expect(run.stretches[0]!.end!).toBeGreaterThan(lastAudio - 200);
    expect(run.detector.speaking).toBe(false);
    // mid-speech again, then closed: nothing pending
    run.detector.push(speech.mulaw.subarray(0, 160 * 30));
    run.t += 600;
    run.detector.close();
    expect(vi.getTimerCount()).toBe(0);
    run.detector.push(SILENCE);
  });
});

describe('silero', () => {
  it('one session for the process, loaded once, whatever the number of calls', () => {
    const first = sileroModel();
    const runs = [detector('silero'), detector('silero'), detector('silero')];
    expect(sileroModel()).toBe(first);
    for (const r of runs) r.detector.close();
    expect(first.loadMs).toBeGreaterThan(0);
  });
});
