/**
 * TurnTaking (src/calls/turn-taking.ts) against the event loop's timers with a clock of its own:
 * what the controller's fake clock cannot show, because it fakes `performance.now()` together
 * with the timers (test/fast-calls/turn-taking.test.ts has the rules on whole calls).
 */
import { describe, expect, it, vi } from 'vitest';
import { TurnTaking } from '../../src/calls/turn-taking.js';

describe('the interruption duration', () => {
  // A noise gives no transcript, so the duration timer is its only check. Node's timers count
  // whole milliseconds on the event loop's clock and may fire a fraction of a millisecond before
  // the delay has passed on performance.now(): the check then waits for the rest instead of
  // dropping the interruption (which left a noise over a line without a `clear` now and then;
  // the fast layer fakes performance.now() too, so it cannot show this).
  it('is checked again when its timer fires before the duration has passed on the clock', () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    try {
      let clock = 1000;
      const events: string[] = [];
      const turns = new TurnTaking(
        // interruption_min_words 1: a sound without words pauses the reply and lets it resume (0 would cut it at once)
        { endpointing_min_delay: 0.5, endpointing_max_delay: 3, interruption_min_duration: 0.3, interruption_min_words: 1, false_interruption_timeout: 1 },
        {
          onEndOfTurn: (text) => events.push(`turn ${text}`),
          onInterruptionStart: () => events.push('pause'),
          onInterruptionConfirmed: () => events.push('interrupted'),
          onFalseInterruption: () => events.push('resume'),
        },
        // the detector hears the sound up to now
        { assistantSpeaking: () => true, now: () => clock, voiceHeardUntil: () => clock },
      );
      turns.voiceStarted(clock);
      clock += 299.6; // the timer fires early on this clock
      vi.advanceTimersByTime(300);
      expect(events).toEqual([]);
      clock += 0.6;
      vi.advanceTimersByTime(1);
      expect(events).toEqual(['pause']);
      // no words: the reply resumes false_interruption_timeout after the sound's end
      clock += 200;
      vi.advanceTimersByTime(200);
      turns.voiceEnded(clock);
      clock += 999;
      vi.advanceTimersByTime(999);
      expect(events).toEqual(['pause']);
      clock += 1;
      vi.advanceTimersByTime(1);
      expect(events).toEqual(['pause', 'resume']);
      turns.close();
    } finally {
      vi.useRealTimers();
    }
  });
});
