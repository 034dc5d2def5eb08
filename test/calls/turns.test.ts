/**
 * Turn-taking end to end: a simulated caller against the real server with the sandbox providers
 * (barge-in, interruption thresholds, false interruptions, endpointing). Timings are checked in
 * ranges wide enough for a loaded 2-core machine; what each behaviour needs is the order of
 * events (a `clear` before any further audio, a reply only after the caller stopped).
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { TurnTaking } from '../../src/calls/turn-taking.js';
import type { SimulatedCall } from '../../src/sim/caller.js';
import { eventually, orderLookupNodes, receivedMessages, toolResultAnswer, sandboxAssistant, startCallingServer, type CallingServer, callIdOf } from '../helpers/calls.js';
import { startFakeOpenAiChat, type FakeCompletion, type FakeOpenAiChat } from '../fakes/openai-chat.js';

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

  it('with interruption_min_words, fewer words do not interrupt; enough words do', async () => {
    const { number } = await s.setUpNumber({
      assistant: withTurnTaking({ interruption_min_duration: 0.3, interruption_min_words: 3, endpointing_min_delay: 0.3 }),
      definition: frontDesk,
    });
    const call = s.caller(number);
    const callId = callIdOf(await call.dial());
    await call.hear(LONG_LINE[0]!);
    await call.say('Hold on.');
    await call.hear(LONG_LINE[LONG_LINE.length - 1]!);
    // two words against a minimum of three: the greeting played to its end
    expect(call.clears).toEqual([]);
    expect(heardOfLine(call)).toEqual(LONG_LINE);
    // the caller's words were still a turn: the assistant answers them after its greeting
    await call.hear('Okay, I understand: Hold on');
    expect(call.clears).toEqual([]);
    await call.hangUp();
    const record = await callRecord(callId);
    // (the greeting is recorded once played, so after the caller's words that came during it)
    expect(record.messages.find((m) => m.role === 'assistant')!.content).toBe(LONG_LINE.join(' '));
    expect(record.messages.find((m) => m.role === 'user')!.content).toBe('Hold on.');

    // the same greeting, interrupted with enough words
    const second = s.caller(number);
    await second.dial();
    await second.hear(LONG_LINE[0]!);
    await second.say('I would like to book an appointment.');
    await second.hear('Sure thing');
    expect(second.clears.length).toBeGreaterThan(0);
    expect(second.clears[0]! - second.spoken.at(-1)!.startedAt).toBeLessThan(300 + 1500);
    expect(heardOfLine(second).length).toBeLessThan(LONG_LINE.length);
    await second.hangUp();
  }, 60_000);
});

describe('the model after a barge-in over the greeting', () => {
  // an OpenAI-compatible server (custom-llm) that records what the model is asked
  let chat: FakeOpenAiChat;
  beforeAll(async () => {
    chat = await startFakeOpenAiChat({ apiKey: null, completions: [{ text: ['Of course, ', 'which day suits you?'] }] });
  });
  afterAll(async () => {
    await chat?.close();
  });

  /**
   * A call whose greeting the caller cuts with `interrupt`; returns what the record kept of the
   * greeting, the record's messages, and the one model request of the call as [role, content].
   */
  async function cutTheGreeting(turnTaking: Parameters<typeof withTurnTaking>[0], interrupt: (call: SimulatedCall) => Promise<void>) {
    const { number } = await s.setUpNumber({
      assistant: withTurnTaking(turnTaking, { llm_config: { provider: 'custom-llm', url: chat.url, model: 'fake-model' } }),
      definition: frontDesk,
    });
    const requestsBefore = chat.requests.length;
    const call = s.caller(number);
    const callId = callIdOf(await call.dial());
    await call.hear(LONG_LINE[0]!);
    await interrupt(call);
    await call.hear('which day suits you');
    await call.quiet();
    await call.hangUp();

    expect(call.clears.length).toBeGreaterThan(0);
    const record = await callRecord(callId);
    const kept = record.messages[0]!;
    expect(kept.role).toBe('assistant');
    expect(kept.content.length).toBeGreaterThan(0);
    expect(kept.content.length).toBeLessThan(LONG_LINE.join(' ').length);
    expect(LONG_LINE.join(' ').startsWith(kept.content)).toBe(true);

    const requests = chat.requests.slice(requestsBefore);
    expect(requests).toHaveLength(1);
    const asked = (requests[0]!.body.messages as { role: string; content: string }[]).map((m) => [m.role, m.content]);
    expect(asked[0]![0]).toBe('system');
    return { kept: kept.content, messages: record.messages, asked: asked.slice(1) };
  }

  it('is given only the part of the greeting the caller heard, as the record keeps it', async () => {
    const { kept, asked } = await cutTheGreeting(
      { interruption_min_duration: 0.3, interruption_min_words: 0, endpointing_min_delay: 0.3 },
      (call) => call.say('I would like to book an appointment.'),
    );
    expect(asked).toEqual([
      ['assistant', kept],
      ['user', 'I would like to book an appointment.'],
    ]);
  }, 60_000);

  it('is given only the heard part when a key press confirms the interruption (the greeting is cut before the key reaches the engine)', async () => {
    const { kept, messages, asked } = await cutTheGreeting(
      { interruption_min_duration: 0.3, interruption_min_words: 0, false_interruption_timeout: 3 },
      async (call) => {
        // a noise pauses the greeting (a pending interruption); the key press then takes the turn
        await call.mumble(500);
        expect(call.clears.length).toBeGreaterThan(0);
        call.pressKey('1');
      },
    );
    expect(messages.map((m) => m.role)).toEqual(['assistant', 'user', 'assistant']);
    expect(messages[1]!.content).toBe('DTMF: 1');
    expect(asked).toEqual([
      ['assistant', kept],
      ['user', 'DTMF: 1'],
    ]);
  }, 60_000);
});

describe('the model after caller input over its own reply', () => {
  /** A model reply long enough to talk over: five sentences, each its own TTS session and mark. */
  const LONG_REPLY = [
    'I can help you move your appointment.',
    'Your next visit is on Tuesday the fourth at ten in the morning.',
    'We have openings on Wednesday, Thursday and Friday this week.',
    'Mornings are usually quieter than afternoons at our office.',
    'Please tell me which of those days would suit you best.',
  ];
  const GREETING = 'Hello, this is Acme Dental.';
  const ASKED = 'I need to move my appointment.';
  const EAGER = { interruption_min_duration: 0.3, interruption_min_words: 0, endpointing_min_delay: 0.3, false_interruption_timeout: 3 };

  /**
   * A call to an OpenAI-compatible server (custom-llm) whose first answer is the long reply: the
   * caller asks, hears the reply's first sentence, does `act`, and hangs up after the second answer.
   */
  async function overTheReply(
    turnTaking: Record<string, number>,
    act: (call: SimulatedCall) => Promise<void>,
    reply: Partial<FakeCompletion> = {},
    options: { hangUpAfter?: boolean } = {},
  ) {
    const chat = await startFakeOpenAiChat({
      apiKey: null,
      completions: [{ text: LONG_REPLY.map((l) => `${l} `), ...reply }, { text: ['Of course, ', 'which day suits you?'] }],
    });
    try {
      const { number } = await s.setUpNumber({
        assistant: withTurnTaking(turnTaking, {
          first_message: GREETING,
          llm_config: { provider: 'custom-llm', url: chat.url, model: 'fake-model' },
        }),
      });
      const call = s.caller(number);
      const callId = callIdOf(await call.dial());
      await call.hear(GREETING);
      await call.quiet();
      await call.say(ASKED);
      await call.hear(LONG_REPLY[0]!);
      await act(call);
      if (options.hangUpAfter) {
        await call.hangUp();
        // the report is built once the call has ended: everything the call kept is in it
        const report = await endOfCallReport(callId);
        const messages = report.messages as Awaited<ReturnType<typeof callRecord>>['messages'];
        return { call, record: { ...(await callRecord(callId)), messages }, asked: [] };
      }
      await call.hear('which day suits you');
      await call.quiet();
      await call.hangUp();
      const record = await callRecord(callId);
      expect(chat.requests).toHaveLength(2);
      const asked = (chat.requests[1]!.body.messages as { role: string; content: string }[]).map((m) => [m.role, m.content]);
      return { call, record, asked: asked.slice(1) };
    } finally {
      await chat.close();
    }
  }

  /** The record, then the second model request, hold `reply` (what was heard of the long one) before `after`. */
  function expectReplyBefore(outcome: Awaited<ReturnType<typeof overTheReply>>, after: string, whole: boolean) {
    const { record, asked } = outcome;
    expect(record.messages.map((m) => m.role)).toEqual(['assistant', 'user', 'assistant', 'user', 'assistant']);
    const kept = record.messages[2]!.content;
    if (whole) {
      expect(kept).toBe(LONG_REPLY.join(' '));
    } else {
      expect(kept.length).toBeGreaterThan(0);
      expect(kept.length).toBeLessThan(LONG_REPLY.join(' ').length);
      expect(LONG_REPLY.join(' ').startsWith(kept)).toBe(true);
    }
    expect(record.messages[3]!.content).toBe(after);
    expect(asked).toEqual([
      ['assistant', GREETING],
      ['user', ASKED],
      ['assistant', kept],
      ['user', after],
    ]);
  }

  it('is given the heard part of its cut reply before the key press that confirmed the interruption', async () => {
    const outcome = await overTheReply(EAGER, async (call) => {
      // a noise pauses the reply (a pending interruption); the key press then takes the turn
      await call.mumble(500);
      expect(call.clears.length).toBeGreaterThan(0);
      call.pressKey('1');
    });
    expect(outcome.call.heard.map((h) => h.text)).not.toContain(LONG_REPLY.at(-1));
    expectReplyBefore(outcome, 'DTMF: 1', false);
  }, 60_000);

  it('is given the heard part of its cut reply before the words that cut it', async () => {
    const outcome = await overTheReply(EAGER, (call) => call.say('Sorry, can it be next week?'));
    expect(outcome.call.clears.length).toBeGreaterThan(0);
    expectReplyBefore(outcome, 'Sorry, can it be next week?', false);
  }, 60_000);

  it('a key press alone cuts the reply at once, and the model is given the heard part before the key', async () => {
    // with interruption_min_words 3 no noise or short word could cut it: the key does
    const outcome = await overTheReply({ ...EAGER, interruption_min_words: 3 }, async (call) => {
      const clearsBefore = call.clears.length;
      call.pressKey('2');
      await eventually('a clear', () => call.clears.length > clearsBefore, 5_000);
    });
    expect(outcome.call.heard.map((h) => h.text)).not.toContain(LONG_REPLY.at(-1));
    expectReplyBefore(outcome, 'DTMF: 2', false);
  }, 60_000);

  it('a short answer too short to cut the reply waits for it: the model is asked with the whole reply before the answer', async () => {
    const outcome = await overTheReply({ ...EAGER, interruption_min_words: 3 }, (call) => call.say('Yes.'));
    // the reply played to its end, uncut, and only then was the model asked again
    expect(outcome.call.clears).toEqual([]);
    const heard = outcome.call.heard.map((h) => h.text);
    expect(heard).toContain(LONG_REPLY.at(-1));
    expect(heard.indexOf(LONG_REPLY.at(-1)!)).toBeLessThan(heard.findIndex((t) => t.includes('which day suits you')));
    expectReplyBefore(outcome, 'Yes.', true);
  }, 60_000);

  it('a short answer over the reply is kept in the record, after what was heard, when the caller hangs up before the reply ends', async () => {
    const outcome = await overTheReply(
      { ...EAGER, interruption_min_words: 3 },
      async (call) => {
        await call.say('Yes.');
        // the answer has been taken as a turn (and waits for the reply) once the endpointing delay is over
        await new Promise((r) => setTimeout(r, 800));
      },
      {},
      { hangUpAfter: true },
    );
    expect(outcome.call.clears).toEqual([]);
    const { messages } = outcome.record;
    expect(messages.map((m) => m.role)).toEqual(['assistant', 'user', 'assistant', 'user']);
    expect(LONG_REPLY.join(' ').startsWith(messages[2]!.content)).toBe(true);
    expect(messages[2]!.content.length).toBeLessThan(LONG_REPLY.join(' ').length);
    expect(messages[3]!.content).toBe('Yes.');
  }, 60_000);

  it('a short answer while the reply is still being written supersedes it: the model is given the heard part before the answer', async () => {
    // the model writes a sentence every 4 s: the caller answers after the first, long before the last
    const outcome = await overTheReply({ ...EAGER, interruption_min_words: 3 }, (call) => call.say('Yes.'), { delayMs: 4_000 });
    expect(outcome.call.heard.map((h) => h.text)).not.toContain(LONG_REPLY.at(-1));
    expectReplyBefore(outcome, 'Yes.', false);
  }, 60_000);
});

describe("caller input while the model chooses a tool node's way out", () => {
  it('a turn that cuts what the choice says, and a key press, are recorded; the choice still moves the call', async () => {
    s.receiver.setDefault(toolResultAnswer({ status: 'shipped' }));
    const chat = await startFakeOpenAiChat({
      apiKey: null,
      completions: [
        { toolCalls: [{ name: 'go_to_lookup', arguments: '{}' }] },
        // the choice is slow: a sentence, then the function call, 700 ms between events
        { text: ['Let me see. ', 'Good news about your order. '], toolCalls: [{ name: 'go_to_shipped', arguments: '{}' }], delayMs: 700 },
      ],
    });
    try {
      const { number } = await s.setUpNumber({
        assistant: withTurnTaking(
          { interruption_min_duration: 0.3, interruption_min_words: 0, endpointing_min_delay: 0.3 },
          { llm_config: { provider: 'custom-llm', url: chat.url, model: 'fake-model' } },
        ),
        definition: {
          version: 1,
          entry_node: 'greeting',
          nodes: [
            ...orderLookupNodes(s.receiver.url),
            { id: 'shipped', type: 'end', first_line: 'Your order is on its way, goodbye.' },
            { id: 'lost', type: 'end', first_line: 'Your order is lost, goodbye.' },
          ],
          edges: [
            { from: 'greeting', to: 'lookup', description: 'the caller asks where their order is' },
            { from: 'lookup', to: 'shipped', description: 'the order has shipped' },
            { from: 'lookup', to: 'lost', description: 'the order is lost' },
          ],
        },
      });
      const call = s.caller(number);
      const callId = callIdOf(await call.dial());
      await call.hear('Acme orders');
      await call.quiet();
      await call.say('Where is my order?');
      await call.hear('One moment');
      // the model is choosing now: the caller talks over what it says, then presses a key
      await call.say('Hello?');
      await eventually('the turn recorded', async () => (await callRecord(callId)).messages.some((m) => m.content === 'Hello?'), 5_000);
      call.pressKey('5');
      await call.hear('on its way', 20_000);
      await call.ended();

      const report = await endOfCallReport(callId);
      expect(report).toMatchObject({ ended_reason: 'assistant-ended-call', nodes_visited: ['greeting', 'lookup', 'shipped'] });
      const said = (report.messages as { role: string; content: string }[]).filter((m) => m.role === 'user').map((m) => m.content);
      expect(said).toEqual(['Where is my order?', 'Hello?', 'DTMF: 5']);
      expect(chat.requests).toHaveLength(2);
    } finally {
      s.receiver.setDefault({ status: 200, body: '' });
      await chat.close();
    }
  }, 60_000);
});

describe('barge-in with a closing line queued', () => {
  it('cuts the interruptible edge message but still plays the end line queued behind it, then hangs up', async () => {
    const farewell = [
      'Before you go, remember that we now open on Saturdays.',
      'You can also book online at any time of the day.',
      'Our reception team is always happy to help you.',
    ];
    const { number } = await s.setUpNumber({
      assistant: withTurnTaking({ interruption_min_duration: 0.3, interruption_min_words: 0, endpointing_min_delay: 0.3 }),
      definition: {
        version: 1,
        entry_node: 'greeting',
        nodes: [
          { id: 'greeting', type: 'conversation', first_line: 'Hello, this is Acme Dental.' },
          { id: 'bye', type: 'end', first_line: 'Thank you for calling, goodbye.' },
        ],
        edges: [{ from: 'greeting', to: 'bye', description: 'the caller says goodbye', message: farewell.join(' ') }],
      },
    });
    const call = s.caller(number);
    const callId = callIdOf(await call.dial());
    await call.hear('Acme Dental');
    await call.quiet();
    await call.say('Goodbye now.');
    await call.hear(farewell[0]!);
    await call.say('Yes, thank you.');
    await call.ended();

    expect(call.clears.length).toBeGreaterThan(0);
    const texts = call.heard.map((h) => h.text);
    expect(texts).not.toContain(farewell[2]);
    expect(texts.at(-1)).toBe('Thank you for calling, goodbye.');
    const ended = await endOfCallReport(callId);
    expect(ended.ended_reason).toBe('assistant-ended-call');
    const said = ended.messages.filter((m: { role: string }) => m.role === 'assistant').map((m: { content: string }) => m.content);
    expect(said.at(-1)).toBe('Thank you for calling, goodbye.');
    expect(said.join(' ')).not.toContain(farewell[2]);
  }, 60_000);
});

describe('false interruption', () => {
  it('a noise without words pauses the reply, which resumes after false_interruption_timeout and finishes', { timeout: 60_000 }, async () => {
    const { number } = await s.setUpNumber({
      assistant: withTurnTaking({ interruption_min_duration: 0.3, interruption_min_words: 0, false_interruption_timeout: 1 }),
      definition: frontDesk,
    });
    const call = s.caller(number);
    const callId = callIdOf(await call.dial());
    await call.hear(LONG_LINE[0]!);
    await call.mumble(500);
    const noise = call.spoken.at(-1)!;
    await call.hear(LONG_LINE[LONG_LINE.length - 1]!);
    await call.quiet();

    // the output was paused (a clear) once the noise had lasted interruption_min_duration
    expect(call.clears.length).toBeGreaterThan(0);
    const clearAt = call.clears[0]!;
    expect(clearAt - noise.startedAt).toBeGreaterThanOrEqual(300 - 40);
    expect(clearAt - noise.startedAt).toBeLessThan(300 + 1500);
    // ...and resumed after false_interruption_timeout, not before
    const resumedAt = call.frameTimes.find((t) => t > clearAt)!;
    expect(resumedAt - clearAt).toBeGreaterThanOrEqual(1000 - 100);
    expect(resumedAt - clearAt).toBeLessThan(1000 + 2000);
    // the caller heard the whole greeting, the sentence cut by the pause included
    expect(heardOfLine(call)).toEqual(LONG_LINE);

    const record = await callRecord(callId);
    expect(record.messages).toHaveLength(1);
    expect(record.messages[0]).toMatchObject({ role: 'assistant', content: LONG_LINE.join(' '), node_id: 'greeting' });
    await call.hangUp();
  });
});

describe('the interruption duration', () => {
  // A noise gives no transcript, so the duration timer is its only check. Node's timers count
  // whole milliseconds on the event loop's clock and may fire a fraction of a millisecond before
  // the delay has passed on performance.now(): the check then waits for the rest instead of
  // dropping the interruption (which left the noise above without a `clear` now and then).
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

describe('endpointing', () => {
  it('ends the turn no sooner than endpointing_min_delay, and at about endpointing_max_delay without a sentence end', async () => {
    const minDelayMs = 500;
    const maxDelayMs = 2500;
    const { number } = await s.setUpNumber({
      assistant: withTurnTaking(
        { endpointing_min_delay: minDelayMs / 1000, endpointing_max_delay: maxDelayMs / 1000 },
        {
          first_message: 'Hi.',
          // the vendor's utterance end comes while the long delay runs: it must not restart it
          stt_config: { provider: 'sandbox', utterance_end_ms: 2000 },
        },
      ),
    });
    const call = s.caller(number);
    await call.dial();
    await call.hear('Hi.');
    await call.quiet();

    const replyDelay = async (text: string) => {
      await call.say(text);
      const speech = call.spoken.at(-1)!;
      await call.hear('Okay, I understand');
      const firstFrame = call.frameTimes.find((t) => t > speech.endedAt)!;
      await call.quiet();
      call.heard.length = 0;
      return firstFrame - speech.endedAt;
    };

    // a final transcript that ends a sentence: the short delay (plus the STT's own 300 ms endpointing)
    const short = await replyDelay('What time do you open?');
    expect(short).toBeGreaterThanOrEqual(minDelayMs);
    expect(short).toBeLessThan(maxDelayMs);

    // no sentence end: the long delay, and not much more
    const long = await replyDelay('I have a question about my bill');
    expect(long).toBeGreaterThanOrEqual(maxDelayMs);
    expect(long).toBeLessThan(maxDelayMs + 300 + 1400);
    await call.hangUp();
  }, 60_000);
});
