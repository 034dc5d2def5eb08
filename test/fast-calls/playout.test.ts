/**
 * What the caller heard when the far end never echoes marks (a browser that does not, a caller who
 * hangs up before the echoes came): at the end of the call, audio whose play time had passed counts
 * as heard, by the clock; audio still to play does not. Both backends, one playout (src/calls/playout.ts).
 */
import { describe, expect, it } from 'vitest';
import { callHarness, useFastCalls } from '../helpers/call-harness.js';

useFastCalls();

const greeting = 'Thank you for calling. How can I help?';

for (const kind of ['pipeline', 'realtime'] as const) {
  describe(`a ${kind} call whose far end never echoes marks`, () => {
    it('keeps the greeting in the transcript and the report when the caller hangs up a second after it played', async () => {
      const h = callHarness({ kind, assistant: { first_message: greeting }, transport: { echoMarks: false } });
      await h.start();
      await h.until('the greeting heard', () => h.heard().join(' ') === greeting);
      expect(h.transport.marks.every((m) => m.answeredAt === null)).toBe(true);
      await h.advance(1_000);
      h.caller.hangUp();
      const report = await h.untilEnded();
      expect(report.ended_reason).toBe('customer-ended-call');
      expect(report.messages.map((m) => [m.role, m.content])).toEqual([['assistant', greeting]]);
    });

    it('does not count a line the caller hung up in the middle of', async () => {
      const h = callHarness({ kind, assistant: { first_message: greeting }, transport: { echoMarks: false } });
      await h.start();
      await h.until('the line under way', () => h.transport.frames.length > 5);
      h.caller.hangUp();
      const report = await h.untilEnded();
      // the pipeline counts whole sentences; a realtime line counts the words whose audio had played
      const heard = report.messages.map((m) => m.content).join(' ');
      expect(heard).not.toBe(greeting);
      expect(greeting.startsWith(heard)).toBe(true);
    });
  });
}
