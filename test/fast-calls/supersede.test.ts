/**
 * Caller input over the model's own reply in a pipeline call (the pipeline backend's afterReply): a reply cut
 * by words or a key press, a reply still being written superseded by a newer turn, and a short
 * answer that cannot cut a written reply waiting until it is over. Whatever happens, the record
 * and the next model request hold what the caller heard of the reply, before the input.
 */
import { describe, expect, it } from 'vitest';
import { callHarness, useFastCalls, type CallHarness } from '../helpers/call-harness.js';
import type { ModelReply } from '../helpers/scripted-providers.js';

useFastCalls();

/** A model reply long enough to talk over: five sentences, each its own TTS session and mark. */
const LONG_REPLY = [
  'I can help you move your appointment.',
  'Your next visit is on Tuesday the fourth at ten in the morning.',
  'We have openings on Wednesday, Thursday and Friday this week.',
  'Mornings are usually quieter than afternoons at our office.',
  'Please tell me which of those days would suit you best.',
];
const WHOLE = LONG_REPLY.join(' ');
const GREETING = 'Hello, this is Acme Dental.';
const ASKED = 'I need to move my appointment.';
const EAGER = { interruption_min_duration: 0.3, interruption_min_words: 0, endpointing_min_delay: 0.3, false_interruption_timeout: 3 };
/** Speech cannot cut anything (three words needed), a key press still can. */
const STUBBORN = { ...EAGER, interruption_min_words: 3 };

/**
 * The caller asks, the model answers with the long reply (`reply` changes how it is written), and
 * the caller has heard its first sentence.
 */
async function overTheReply(turnTaking: Record<string, number>, reply: Partial<ModelReply> = {}): Promise<CallHarness> {
  const h = callHarness({ assistant: { first_message: GREETING, speech_config: { turn_taking: turnTaking } } });
  h.llm.reply({ text: LONG_REPLY.map((l) => `${l} `), ...reply }, { text: ['Of course, ', 'which day suits you?'] });
  await h.start();
  await h.until('the greeting', () => h.heard().includes(GREETING));
  await h.caller.say(ASKED);
  await h.until('the first sentence of the reply', () => h.heard().includes(LONG_REPLY[0]!), 10_000);
  return h;
}

/** The record, then the second model request, hold `kept` (what was heard of the reply) before `after`. */
function expectReplyBefore(h: CallHarness, after: string, whole: boolean): string {
  const messages = h.messages();
  expect(messages.map(([role]) => role)).toEqual(['assistant', 'user', 'assistant', 'user', 'assistant']);
  const kept = messages[2]![1];
  if (whole) expect(kept).toBe(WHOLE);
  else {
    expect(kept.length).toBeGreaterThan(0);
    expect(kept.length).toBeLessThan(WHOLE.length);
    expect(WHOLE.startsWith(kept)).toBe(true);
  }
  expect(messages[3]).toEqual(['user', after]);
  expect(h.llm.requests).toHaveLength(2);
  expect(h.llm.asked(1)).toEqual([
    ['assistant', GREETING],
    ['user', ASKED],
    ['assistant', kept],
    ['user', after],
  ]);
  return kept;
}

const secondAnswer = (h: CallHarness) => h.until('the second answer', () => h.heard().includes('Of course, which day suits you?'), 20_000);

describe('the model after caller input over its own reply', () => {
  it('is given the heard part of its cut reply before the words that cut it', async () => {
    const h = await overTheReply(EAGER);
    await h.caller.say('Sorry, can it be next week?');
    await secondAnswer(h);
    expect(h.transport.clears.length).toBeGreaterThan(0);
    const kept = expectReplyBefore(h, 'Sorry, can it be next week?', false);
    // the record keeps whole sentences, those the caller heard whole
    expect(kept).toBe(h.heard().filter((t) => LONG_REPLY.includes(t)).join(' '));
  });

  it('is given the heard part of its cut reply before the key press that confirmed the interruption', async () => {
    const h = await overTheReply(EAGER);
    await h.caller.noise(500);
    expect(h.transport.clears).toHaveLength(1);
    h.caller.press('1');
    await secondAnswer(h);
    expect(h.heard()).not.toContain(LONG_REPLY.at(-1));
    expectReplyBefore(h, 'DTMF: 1', false);
  });

  it('a key press alone cuts the reply at once, and the model is given the heard part before the key', async () => {
    const h = await overTheReply(STUBBORN);
    h.caller.press('2');
    const pressedAt = h.now();
    await h.advance(0);
    expect(h.transport.clears.map((t) => h.rel(t))).toEqual([pressedAt]);
    await secondAnswer(h);
    expect(h.heard()).not.toContain(LONG_REPLY.at(-1));
    expectReplyBefore(h, 'DTMF: 2', false);
  });

  it('a short answer too short to cut a written reply waits for it: the model is asked once the whole reply was heard', async () => {
    const h = await overTheReply(STUBBORN);
    await h.caller.say('Yes.');
    await secondAnswer(h);
    expect(h.transport.clears).toEqual([]);
    expect(h.heard()).toEqual([GREETING, ...LONG_REPLY, 'Of course, which day suits you?']);
    // not one moment earlier: the input went on as the last sentence's mark came back
    expect(h.rel(h.llm.requests[1]!.at)).toBe(h.heardAt(LONG_REPLY.at(-1)!));
    expectReplyBefore(h, 'Yes.', true);
  });

  it('a short answer waiting for the reply is kept, after what was heard, when the caller hangs up before the reply ends', async () => {
    const h = await overTheReply(STUBBORN);
    await h.caller.say('Yes.');
    await h.advance(800); // the answer has been taken as a turn and waits
    h.caller.hangUp();
    const report = await h.untilEnded();
    expect(h.transport.clears).toEqual([]);
    const messages = report.messages.map((m) => [m.role, m.content]);
    expect(messages.map(([role]) => role)).toEqual(['assistant', 'user', 'assistant', 'user']);
    expect(WHOLE.startsWith(messages[2]![1]!)).toBe(true);
    expect(messages[2]![1]!.length).toBeLessThan(WHOLE.length);
    expect(messages[3]).toEqual(['user', 'Yes.']);
    expect(h.llm.requests).toHaveLength(1);
  });

  it('a short answer while the reply is still being written supersedes it: the rest is never asked for or said', async () => {
    // the model writes a sentence every 4 s: the caller answers after the first, long before the last
    const h = await overTheReply(STUBBORN, { chunkMs: 4_000 });
    await h.caller.say('Yes.');
    await secondAnswer(h);
    expect(h.llm.requests[0]!.aborted).toBe(true);
    expect(h.heard()).not.toContain(LONG_REPLY.at(-1));
    expect(h.tts.synthesized.map((s) => s.text)).not.toContain(LONG_REPLY.at(-1));
    const kept = expectReplyBefore(h, 'Yes.', false);
    expect(kept).toBe(LONG_REPLY[0]);
    // the second request went out as the caller's turn ended, not after a reply that never came
    expect(h.rel(h.llm.requests[1]!.at)).toBeLessThan(h.heardAt(LONG_REPLY[0]!) + 4_000);
  });

  it('a newer turn while the reply is being written asks the model again; the first request is aborted', async () => {
    // the model takes 3 s to start answering: the caller says more meanwhile
    const h = callHarness({ assistant: { first_message: GREETING, speech_config: { turn_taking: STUBBORN } } });
    h.llm.reply({ text: 'This answer is never heard.', firstTokenMs: 3_000 }, { text: 'Tuesday works, goodbye for now.' });
    await h.start();
    await h.until('the greeting', () => h.heard().includes(GREETING));
    await h.caller.say('I need to move my appointment.');
    await h.advance(1_000);
    await h.caller.say('To Tuesday.');
    await h.until('the answer', () => h.heard().includes('Tuesday works, goodbye for now.'), 10_000);
    expect(h.llm.requests).toHaveLength(2);
    expect(h.llm.requests[0]!.aborted).toBe(true);
    expect(h.tts.synthesized.map((s) => s.text)).not.toContain('This answer is never heard.');
    expect(h.llm.asked(1)).toEqual([
      ['assistant', GREETING],
      ['user', 'I need to move my appointment.'],
      ['user', 'To Tuesday.'],
    ]);
  });
});
