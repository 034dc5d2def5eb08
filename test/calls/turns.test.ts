/**
 * Turn-taking end to end: a simulated caller against the real server with the sandbox providers,
 * barge-in over a real socket (a `clear` the far end acts on, marks it echoes, what the caller's
 * own STT heard, the record and the report). Timings are checked in ranges wide enough for a
 * loaded 2-core machine. The thresholds, false interruptions, endpointing and what the model is
 * given after caller input are checked exactly in test/fast-calls (see docs/testing.md).
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { TurnTaking } from '../../src/calls/turn-taking.js';
import type { SimulatedCall } from '../../src/sim/caller.js';
import { receivedMessages, sandboxAssistant, startCallingServer, type CallingServer, callIdOf } from '../helpers/calls.js';

let s: CallingServer;
beforeAll(async () => {
  s = await startCallingServer();
});
afterAll(async () => {
  await s?.close();
});

/** A greeting long enough to talk over: five sentences, each its own TTS session and mark. */
const LONG_LINE = [
  'Welcome to the Acme Dental line.',
  'Our office is open from nine to five on weekdays.',
  'We are closed on weekends and on public holidays.',
  'You can book, move or cancel an appointment with me.',
  'Tell me how I can help you today.',
];

const frontDesk = {
  version: 1,
  entry_node: 'greeting',
  nodes: [
    { id: 'greeting', type: 'conversation', first_line: LONG_LINE.join(' '), instructions: 'Find out what the caller needs.' },
    { id: 'booking', type: 'conversation', first_line: 'Let us book your appointment.', instructions: 'Book it.' },
    { id: 'bye', type: 'end', first_line: 'Goodbye.' },
  ],
  edges: [
    { from: 'greeting', to: 'booking', description: 'the caller wants to book an appointment', message: 'Sure thing.' },
    { from: 'booking', to: 'bye', description: 'the caller is finished' },
  ],
};

const withTurnTaking = (turnTaking: Record<string, number>, extra: Record<string, unknown> = {}) =>
  sandboxAssistant({ speech_config: { turn_taking: turnTaking }, ...extra });

async function callRecord(callId: string) {
  const got = await s.api('GET', `/calls/${callId}`);
  expect(got.status).toBe(200);
  return got.json.call as { status: string; ended_reason: string | null; messages: { role: string; content: string; node_id: string | null }[] };
}

async function endOfCallReport(callId: string, timeoutMs = 15_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const report = receivedMessages(s.receiver, 'end-of-call-report').find((m) => m.call?.id === callId);
    if (report) return report;
    if (Date.now() > deadline) throw new Error(`no end-of-call-report for ${callId}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The sentences of LONG_LINE the caller's ear decoded, in order. */
const heardOfLine = (call: SimulatedCall) => call.heard.map((h) => h.text).filter((t) => LONG_LINE.includes(t));

describe('barge-in', () => {
  it('clears the line once the caller has spoken for interruption_min_duration, and keeps only what was heard', async () => {
    const { number } = await s.setUpNumber({
      assistant: withTurnTaking({ interruption_min_duration: 0.3, interruption_min_words: 0, endpointing_min_delay: 0.3 }),
      definition: frontDesk,
    });
    const call = s.caller(number);
    const callId = callIdOf(await call.dial());
    await call.hear(LONG_LINE[0]!);
    expect(call.clears).toEqual([]);
    await call.say('I would like to book an appointment.');
    const speech = call.spoken.at(-1)!;
    await call.hear('Sure thing');
    await call.hear('book your appointment');
    await call.quiet();

    // the clear came once the caller had spoken for about interruption_min_duration
    expect(call.clears.length).toBeGreaterThan(0);
    const clearAt = call.clears[0]!;
    expect(clearAt - speech.startedAt).toBeGreaterThanOrEqual(300 - 40);
    expect(clearAt - speech.startedAt).toBeLessThan(300 + 1500);
    // no assistant audio after the clear until the caller had finished: the reply to the caller
    const framesAfter = call.frameTimes.filter((t) => t > clearAt);
    expect(framesAfter.length).toBeGreaterThan(0);
    expect(framesAfter[0]!).toBeGreaterThanOrEqual(speech.endedAt);

    // the caller heard the start of the greeting, not its end, then the reply
    const heard = heardOfLine(call);
    expect(heard.length).toBeGreaterThanOrEqual(1);
    expect(heard.length).toBeLessThan(LONG_LINE.length);
    expect(heard).toEqual(LONG_LINE.slice(0, heard.length));
    const texts = call.heard.map((h) => h.text);
    expect(texts.indexOf('Sure thing.')).toBe(heard.length);

    // the history holds the sentences the caller heard (their marks came back), not the whole line
    const live = await callRecord(callId);
    const greeting = live.messages.filter((m) => m.role === 'assistant' && m.node_id === 'greeting');
    expect(greeting).toHaveLength(2); // the cut greeting, then the edge's message
    const kept = greeting[0]!.content;
    const keptSentences = LONG_LINE.filter((l) => kept.includes(l));
    expect(kept).toBe(keptSentences.join(' '));
    expect(keptSentences.length).toBeGreaterThanOrEqual(1);
    // a sentence whose tones had played but whose mark was still pending is counted as not heard
    expect(heard.length - keptSentences.length).toBeGreaterThanOrEqual(0);
    expect(heard.length - keptSentences.length).toBeLessThanOrEqual(1);
    expect(keptSentences).toEqual(LONG_LINE.slice(0, keptSentences.length));
    expect(live.messages.map((m) => m.role)).toEqual(['assistant', 'user', 'assistant', 'assistant']);
    expect(live.messages[1]!.content).toBe('I would like to book an appointment.');

    await call.hangUp();
    const report = await endOfCallReport(callId);
    expect(report.ended_reason).toBe('customer-ended-call');
    expect(report.messages[0].content).toBe(kept);
    expect(report.transcript).not.toContain(LONG_LINE[LONG_LINE.length - 1]);
  }, 60_000);
});

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
        { endpointing_min_delay: 0.5, endpointing_max_delay: 3, interruption_min_duration: 0.3, interruption_min_words: 0, false_interruption_timeout: 1 },
        {
          onEndOfTurn: (text) => events.push(`turn ${text}`),
          onInterruptionStart: () => events.push('pause'),
          onInterruptionConfirmed: () => events.push('interrupted'),
          onFalseInterruption: () => events.push('resume'),
        },
        { assistantSpeaking: () => true, now: () => clock },
      );
      turns.speechStarted();
      clock += 299.6; // the timer fires early on this clock
      vi.advanceTimersByTime(300);
      expect(events).toEqual([]);
      clock += 0.6;
      vi.advanceTimersByTime(1);
      expect(events).toEqual(['pause']);
      clock += 1000;
      vi.advanceTimersByTime(1000);
      expect(events).toEqual(['pause', 'resume']);
      turns.close();
    } finally {
      vi.useRealTimers();
    }
  });
});
