/**
 * Barge-in on both kinds of call, on the memory transport and fake timers: what the caller heard
 * of a cut line is what the record, the engine's history and the model keep; a key press cuts
 * speech at once; a closing line queued behind a cut message still plays; a hang-up keeps only
 * what was played. (Pipeline: turn-taking decides, see turn-taking.test.ts; realtime: the model's
 * server VAD, here the scripted model's, on the caller's audio.)
 */
import { describe, expect, it } from 'vitest';
import { callHarness, useFastCalls, type CallHarness } from '../helpers/call-harness.js';
import type { ModelRequest } from '../helpers/scripted-providers.js';

useFastCalls();

const LONG_LINE = [
  'Welcome to the Acme Dental line.',
  'Our office is open from nine to five on weekdays.',
  'We are closed on weekends and on public holidays.',
  'You can book, move or cancel an appointment with me.',
  'Tell me how I can help you today.',
];
const WHOLE = LONG_LINE.join(' ');

/** Speech cuts after 0.3 s with any words (pipeline); the realtime model cuts on speech at once. */
const EAGER = { interruption_min_duration: 0.3, interruption_min_words: 0, endpointing_min_delay: 0.3, false_interruption_timeout: 3 };

const kinds = [{ kind: 'pipeline' as const }, { kind: 'realtime' as const }];

/** The scripted model of either kind: its requests, and the messages of one as `[role, content]`. */
const model = (h: CallHarness) => (h.assistant.realtime ? h.realtime : h.llm);
const asked = (r: ModelRequest) => r.messages.filter((m) => m.role !== 'system').map((m) => [m.role, m.content]);
/** The engine's history as the call's last save has it (what another reader of the call gets). */
const engineHistory = async (h: CallHarness) =>
  (((await h.store.get(h.record.id))?.engine?.history ?? []) as Array<{ role: string; content: string }>).map((m) => [m.role, m.content]);

async function greetedLong(kind: 'pipeline' | 'realtime', turnTaking: Record<string, number> = EAGER): Promise<CallHarness> {
  const h = callHarness({ kind, assistant: { first_message: WHOLE, speech_config: { turn_taking: turnTaking } } });
  await h.start();
  // pipeline: sentence by sentence; realtime: one response, heard in 100 ms marks
  await h.until('the greeting playing for a while', () => h.transport.marks.filter((m) => m.answeredAt !== null).length >= (h.assistant.realtime ? 12 : 1));
  return h;
}

describe.each(kinds)('barge-in ($kind call)', ({ kind }) => {
  it('cuts the greeting; the record, the engine and the model keep only what the caller heard, then the words that cut it', async () => {
    const h = await greetedLong(kind);
    const startedAt = await h.caller.say('I would like to book an appointment.');
    expect(h.transport.clears.length).toBeGreaterThan(0);
    const clearAt = h.rel(h.transport.clears[0]!);
    // pipeline: after interruption_min_duration; realtime: as the model's VAD hears speech
    expect(clearAt - startedAt).toBe(kind === 'pipeline' ? 300 : 0);
    await h.until('the reply heard', () => h.heard().some((t) => t.startsWith('You said')), 10_000);

    const [role, kept] = h.messages()[0]!;
    expect(role).toBe('assistant');
    expect(kept.length).toBeGreaterThan(0);
    expect(kept.length).toBeLessThan(WHOLE.length);
    expect(WHOLE.startsWith(kept)).toBe(true);
    if (kind === 'pipeline') {
      // whole sentences: those whose mark came back before the clear, which the caller heard whole
      expect(kept).toBe(h.heard().filter((t) => LONG_LINE.includes(t)).join(' '));
    } else {
      // the model's own history is truncated to what was heard, as the record is
      expect(h.realtime.session!.truncations.map((t) => t.text)).toEqual([kept]);
    }
    expect(h.messages().slice(1)).toEqual([
      ['user', 'I would like to book an appointment.'],
      ['assistant', 'You said: I would like to book an appointment.'],
    ]);
    expect(asked(model(h).requests[0]!)).toEqual([
      ['assistant', kept],
      ['user', 'I would like to book an appointment.'],
    ]);
    expect(model(h).requests[0]!.messages[0]!.role).toBe('system');
    expect(model(h).requests).toHaveLength(1);
    await h.advance(10);
    expect((await engineHistory(h)).slice(0, 2)).toEqual([
      ['assistant', kept],
      ['user', 'I would like to book an appointment.'],
    ]);
  });

  it('a key press cuts the greeting at once; the model is given the heard part, then the key', async () => {
    // pipeline: no words could cut it (interruption_min_words 3); the key does
    const h = await greetedLong(kind, { ...EAGER, interruption_min_words: 3 });
    h.caller.press('2');
    const pressedAt = h.now();
    await h.advance(0);
    expect(h.transport.clears.map((t) => h.rel(t))).toEqual([pressedAt]);
    await h.until('the model asked', () => model(h).requests.length > 0, 5_000);
    const [, kept] = h.messages()[0]!;
    expect(WHOLE.startsWith(kept) && kept.length < WHOLE.length).toBe(true);
    expect(h.messages()[1]).toEqual(['user', 'DTMF: 2']);
    if (kind === 'pipeline') {
      expect(h.llm.asked(0)).toEqual([
        ['assistant', kept],
        ['user', 'DTMF: 2'],
      ]);
    } else {
      // the realtime model is asked to answer the key (it hears no words)
      expect(h.realtime.requests[0]!.instructions).toContain('The caller pressed 2 on the keypad.');
      expect(asked(h.realtime.requests[0]!)).toEqual([['assistant', kept]]);
    }
    await h.advance(10);
    expect((await engineHistory(h)).slice(0, 2)).toEqual([
      ['assistant', kept],
      ['user', 'DTMF: 2'],
    ]);
    // the model answers the key; the caller hangs up; the report keeps the same
    await h.until('the answer heard', () => h.messages().length === 3 && !h.transport.playing(), 10_000);
    expect(h.messages()[2]![0]).toBe('assistant');
    expect(h.heard().at(-1)).toBe(h.messages()[2]![1]);
    h.caller.hangUp();
    const report = await h.untilEnded();
    expect(report.ended_reason).toBe('customer-ended-call');
    expect(report.messages.slice(0, 2).map((m) => [m.role, m.content])).toEqual([
      ['assistant', kept],
      ['user', 'DTMF: 2'],
    ]);
  });

  // A realtime call used to lose the heard part of the line playing at the hang-up (its
  // release resolved its responses without settling them); it settles them now, as the pipeline does.
  it('a caller hanging up mid-line: only what was played is kept; no hang-up through the carrier', async () => {
    const h = await greetedLong(kind);
    h.caller.hangUp();
    const report = await h.untilEnded();
    expect(report.ended_reason).toBe('customer-ended-call');
    expect(h.transport.hangUps).toEqual([]);
    expect(h.transport.closedAt).not.toBeNull();
    expect(report.messages).toHaveLength(1);
    const kept = report.messages[0]!.content;
    expect(WHOLE.startsWith(kept) && kept.length < WHOLE.length).toBe(true);
    expect(h.notifier.statuses.map((s) => s.status)).toEqual(['ended']);
    expect(h.transport.sentAfterClose).toBe(0);
  });

  it("the end node's line is not cut by the caller's speech (realtime: the model hears silence over it)", async () => {
    const CLOSING = 'Thank you for calling Acme Dental. Your appointment details will arrive by text message. Goodbye.';
    const h = callHarness({
      kind,
      assistant: { speech_config: { turn_taking: EAGER } },
      definition: {
        version: 1,
        entry_node: 'greeting',
        nodes: [
          { id: 'greeting', type: 'conversation', first_line: 'Hello, this is Acme Dental.' },
          { id: 'bye', type: 'end', first_line: CLOSING },
        ],
        edges: [{ from: 'greeting', to: 'bye', description: 'the caller says goodbye' }],
      },
    });
    model(h).reply({ calls: [{ name: 'go_to_bye' }] });
    await h.start();
    await h.until('greeting', () => h.heard().length === 1);
    await h.caller.say('Goodbye now.');
    await h.until('the closing line playing', () => h.transport.playing() && h.messages().some(([r, c]) => r === 'user' && c === 'Goodbye now.'), 5_000);
    await h.advance(200);
    await h.caller.say('Wait, I have one more question please.');
    const report = await h.untilEnded();
    expect(h.transport.clears).toEqual([]);
    expect(report.ended_reason).toBe('assistant-ended-call');
    expect(report.messages.at(-1)).toMatchObject({ role: 'assistant', content: CLOSING, node_id: 'bye' });
    if (kind === 'pipeline') expect(h.heard().slice(1).join(' ')).toBe(CLOSING);
    else {
      expect(h.heard().at(-1)).toBe(CLOSING);
      expect(h.realtime.sessions[0]!.silentFrames).toBeGreaterThan(0);
    }
  });
});

describe('barge-in with a closing line queued (pipeline call)', () => {
  it('cuts the interruptible edge message but still plays the end line queued behind it, then hangs up', async () => {
    const farewell = [
      'Before you go, remember that we now open on Saturdays.',
      'You can also book online at any time of the day.',
      'Our reception team is always happy to help you.',
    ];
    const h = callHarness({
      assistant: { speech_config: { turn_taking: EAGER } },
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
    h.llm.reply({ calls: [{ name: 'go_to_bye' }] });
    await h.start();
    await h.until('greeting', () => h.heard().length === 1);
    await h.caller.say('Goodbye now.');
    await h.until('the farewell begins', () => h.heard().includes(farewell[0]!), 5_000);
    await h.caller.say('Yes, thank you.');
    const report = await h.untilEnded();
    expect(h.transport.clears.length).toBeGreaterThan(0);
    expect(h.heard()).not.toContain(farewell[2]);
    expect(h.heard().at(-1)).toBe('Thank you for calling, goodbye.');
    expect(report.ended_reason).toBe('assistant-ended-call');
    const said = report.messages.filter((m) => m.role === 'assistant').map((m) => m.content);
    expect(said.at(-1)).toBe('Thank you for calling, goodbye.');
    expect(said.join(' ')).not.toContain(farewell[2]);
  });
});
