/** The web-call audio budget (src/telephony/web/audio-budget.ts, docs/web-calls.md), on a clock the test moves. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  AUDIO_BYTES_PER_SECOND,
  AUDIO_SLACK_SECONDS,
  AudioBudget,
  DROPPED_AUDIO_CLOSE_SECONDS,
} from '../../src/telephony/web/audio-budget.js';

const SLACK = AUDIO_SLACK_SECONDS * AUDIO_BYTES_PER_SECOND;
/** Frames a browser may send: any even length up to 1 s. */
const frameBytes = fc.integer({ min: 1, max: AUDIO_BYTES_PER_SECOND / 2 }).map((n) => n * 2);

describe('the web-call audio budget', () => {
  it('a browser at real time (each frame sent once recorded, late by up to the slack less a frame) never loses a frame', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(frameBytes, fc.integer({ min: 0, max: (AUDIO_SLACK_SECONDS - 1) * 1000 - 50 })), { minLength: 1, maxLength: 300 }), (frames) => {
        // recording starts as the socket opens; a frame (at most 1 s) can be sent only once its audio is recorded
        let now = 0;
        const budget = new AudioBudget(() => now);
        let recordedMs = 0;
        for (const [bytes, lateMs] of frames) {
          recordedMs += (bytes / AUDIO_BYTES_PER_SECOND) * 1000;
          now = Math.max(now, recordedMs + lateMs);
          expect(budget.frame(bytes)).toBe('take');
        }
      }),
    );
  });

  it('whatever a browser sends, the call takes at most the slack plus real time', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(frameBytes, fc.integer({ min: 0, max: 200 })), { minLength: 1, maxLength: 2_000 }), (frames) => {
        let now = 0;
        const budget = new AudioBudget(() => now);
        let taken = 0;
        for (const [bytes, gapMs] of frames) {
          now += gapMs;
          const verdict = budget.frame(bytes);
          if (verdict === 'take') taken += bytes;
          expect(taken).toBeLessThanOrEqual(SLACK + (now / 1000) * AUDIO_BYTES_PER_SECOND + 1e-6);
          if (verdict === 'close') return;
        }
      }),
    );
  });

  it('3,000× real time: the slack taken, the rest dropped, closed once 30 s have been dropped', () => {
    let now = 0;
    const budget = new AudioBudget(() => now);
    const verdicts: string[] = [];
    // 1 s frames 1/3 ms apart: 3,000 s of audio a second
    for (let i = 0; i < 100 && verdicts[verdicts.length - 1] !== 'close'; i++) {
      verdicts.push(budget.frame(AUDIO_BYTES_PER_SECOND));
      now += 1 / 3;
    }
    expect(verdicts.filter((v) => v === 'take')).toHaveLength(AUDIO_SLACK_SECONDS);
    expect(verdicts.filter((v) => v === 'drop')).toHaveLength(DROPPED_AUDIO_CLOSE_SECONDS);
    expect(verdicts[verdicts.length - 1]).toBe('close');
  });

  it('tells the browser of drops at most once a second', () => {
    let now = 0;
    const budget = new AudioBudget(() => now);
    const told = [];
    for (let t = 0; t < 3_000; t += 100) {
      now = t;
      told.push(budget.tellNow());
    }
    expect(told.filter(Boolean)).toHaveLength(3);
  });
});
