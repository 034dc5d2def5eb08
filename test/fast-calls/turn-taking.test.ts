/**
 * Turn-taking in a pipeline call, on the memory transport and fake timers: the end of the
 * caller's turn (endpointing_min_delay / endpointing_max_delay), barge-in thresholds
 * (interruption_min_duration, interruption_min_words), false interruptions, and lines that may
 * not be cut. Times are exact: the fake clock does not drift. The caller's voice is heard by the
 * call's own voice-activity detector (the default, `webrtc`) from its first frame to its last
 * (docs/testing.md); real speech and noises, on both detectors: vad-fixtures.test.ts. (A realtime
 * call leaves its turns to the model's server VAD; see barge-in.test.ts for what both kinds do alike.)
 */
import { describe, expect, it } from 'vitest';
import { callHarness, useFastCalls, type CallHarness } from '../helpers/call-harness.js';

useFastCalls();

/** A greeting long enough to talk over: five sentences, each its own TTS session and mark. */
const LONG_LINE = [
  'Welcome to the Acme Dental line.',
  'Our office is open from nine to five on weekdays.',
  'We are closed on weekends and on public holidays.',
  'You can book, move or cancel an appointment with me.',
  'Tell me how I can help you today.',
];

const turnTaking = (settings: Record<string, number>, extra: Record<string, unknown> = {}) => ({
  speech_config: { turn_taking: settings },
  ...extra,
});

/** A call that greets with LONG_LINE; resolves once the caller has heard its first sentence. */
async function longGreeting(settings: Record<string, number>): Promise<CallHarness> {
  const h = callHarness({ assistant: turnTaking(settings, { first_message: LONG_LINE.join(' ') }) });
  await h.start();
  await h.until('the first sentence heard', () => h.heard().includes(LONG_LINE[0]!));
  return h;
}

const heardOfLine = (h: CallHarness) => h.heard().filter((t) => LONG_LINE.includes(t));

describe('endpointing', () => {
  const settings = { endpointing_min_delay: 0.5, endpointing_max_delay: 2.5 };

  async function greeted() {
    const h = callHarness({ assistant: turnTaking(settings, { first_message: 'Hi.' }) });
    await h.start();
    await h.until('the greeting heard', () => h.heard().includes('Hi.'));
    return h;
  }

  it('ends the turn endpointing_min_delay after a final transcript that ends a sentence', async () => {
    const h = await greeted();
    await h.caller.say('What time do you open?');
    const finalAt = h.now();
    await h.advance(499);
    expect(h.llm.requests).toHaveLength(0);
    await h.advance(1);
    expect(h.llm.requests).toHaveLength(1);
    expect(h.rel(h.llm.requests[0]!.at) - finalAt).toBe(500);
    expect(h.llm.asked(0)).toEqual([
      ['assistant', 'Hi.'],
      ['user', 'What time do you open?'],
    ]);
  });

  it('the final text in, endpointing_min_delay after the end of speech, a sentence end or the vendor endpoint or not', async () => {
    const h = await greeted();
    await h.caller.say('I have a question about my bill', { speechFinal: false });
    const endAt = h.now();
    await h.advance(499);
    expect(h.llm.requests).toHaveLength(0);
    await h.advance(1);
    expect(h.llm.requests).toHaveLength(1);
    expect(h.rel(h.llm.requests[0]!.at) - endAt).toBe(500);
    expect(h.messages()[1]).toEqual(['user', 'I have a question about my bill']);
  });

  it('a final that comes after endpointing_min_delay ends the turn when it comes', async () => {
    const h = await greeted();
    // the vendor is slow: interims while speaking, the final 1.2 s after the end of speech
    await h.caller.say('What time do you open?', { final: false });
    const endAt = h.now();
    await h.advance(1200);
    expect(h.llm.requests).toHaveLength(0);
    h.stt.final('What time do you open?');
    await h.advance(0);
    expect(h.llm.requests).toHaveLength(1);
    expect(h.rel(h.llm.requests[0]!.at) - endAt).toBe(1200);
  });

  it('a final that came while the caller still spoke, and nothing from the vendor since: endpointing_max_delay (its last words may be on their way)', async () => {
    const h = await greeted();
    const speaking = h.caller.say('I want to book a table', { final: false, interims: false });
    await h.advance(200);
    h.stt.final('I want to', false);
    await speaking;
    const endAt = h.now();
    await h.until('the model asked', () => h.llm.requests.length > 0, 5_000);
    expect(h.now() - endAt).toBe(2500);
    expect(h.messages()[1]).toEqual(['user', 'I want to']);
  });

  it('a final the vendor marked as the end of speech, while the caller still spoke: endpointing_min_delay after the end', async () => {
    const h = await greeted();
    const speaking = h.caller.say('I want to book a table', { final: false, interims: false });
    await h.advance(200);
    h.stt.final('I want to book a table', true);
    await speaking;
    const endAt = h.now();
    await h.until('the model asked', () => h.llm.requests.length > 0, 5_000);
    expect(h.now() - endAt).toBe(500);
  });

  it('no final: endpointing_max_delay after the end of speech, with the interim words; the vendor utterance end neither shortens nor restarts it', async () => {
    const h = await greeted();
    await h.caller.say('I need help with my booking', { final: false });
    const endAt = h.now();
    await h.advance(1000);
    h.stt.utteranceEnd();
    await h.advance(1499);
    expect(h.llm.requests).toHaveLength(0);
    await h.advance(1);
    expect(h.llm.requests).toHaveLength(1);
    expect(h.rel(h.llm.requests[0]!.at) - endAt).toBe(2500);
    // the last interim (the scripted STT gives the last word only with the final)
    expect(h.messages()[1]).toEqual(['user', 'I need help with my']);
  });

  it('words the detector did not hear (interims, no final) end the turn endpointing_max_delay after the last words, with those words', async () => {
    const h = await greeted();
    h.stt.speechStarted();
    await h.advance(200);
    h.stt.interim('I need');
    await h.advance(300);
    h.stt.interim('I need help');
    const lastWordsAt = h.now();
    await h.until('the model asked', () => h.llm.requests.length > 0, 5_000);
    expect(h.now() - lastWordsAt).toBe(2500);
    expect(h.messages()[1]).toEqual(['user', 'I need help']);
  });

  it('the caller going on within the delay makes one turn of both finals', async () => {
    const h = await greeted();
    await h.caller.say('I want to book.');
    await h.advance(300);
    const secondAt = await h.caller.say('For Tuesday please.');
    expect(h.llm.requests).toHaveLength(0);
    await h.until('the model asked', () => h.llm.requests.length > 0, 5_000);
    expect(h.llm.requests).toHaveLength(1);
    expect(h.llm.asked(0).at(-1)).toEqual(['user', 'I want to book. For Tuesday please.']);
    expect(h.now() - secondAt).toBe(h.voice.msOf('For Tuesday please.') + 500);
  });
});

describe('turn latency', () => {
  it('the provider waits are the scripted model and TTS delays; on a fake clock the service share is nothing', async () => {
    const h = callHarness({ assistant: { first_message: 'Hi.' } });
    h.llm.reply({ text: ['We open ', 'at nine.'], firstTokenMs: 200, chunkMs: 50 });
    h.tts.firstAudioMs = 300;
    await h.start();
    await h.until('the greeting', () => h.heard().includes('Hi.'));
    await h.caller.say('What time do you open?');
    await h.until('the reply', () => h.heard().includes('We open at nine.'), 5_000);
    expect(h.latencies).toHaveLength(1);
    const turn = h.latencies[0]!;
    expect(turn).toMatchObject({ callId: h.record.id, nodeId: 'assistant', modelFirstTokenMs: 200, modelWaitMs: 250, ttsWaitMs: 300, serviceMs: 0 });
    expect(turn.totalMs).toBe(550);
    expect(turn.providerWaitMs).toBe(550);
    expect(turn.outbound.framesLate).toBe(0);
  });

  it('a tool call in the turn: the model waits, then the tool, then the model again; the turn closes on the reply\'s first audio', async () => {
    const h = callHarness({
      assistant: {
        first_message: 'Hi.',
        llm_config: { provider: 'sandbox', tools: [{ name: 'lookup', url: 'http://127.0.0.1:9/tools', parameters: { type: 'object', properties: {} } }] },
      },
    });
    h.notifier.answer = () => ({ result: 'open at nine', delayMs: 100 });
    h.llm.reply({ calls: [{ name: 'lookup' }], firstTokenMs: 100 }, { text: ['We open at nine.'], firstTokenMs: 200 });
    h.tts.firstAudioMs = 300;
    await h.start();
    await h.until('the greeting', () => h.heard().includes('Hi.'));
    await h.caller.say('What time do you open?');
    await h.until('the reply', () => h.heard().includes('We open at nine.'), 5_000);
    expect(h.latencies).toHaveLength(1);
    // the first stream's function call (100 ms), the tool (100 ms), the second stream's first
    // sentence (200 ms: its TTS request), then the TTS (300 ms): all of it waiting on others
    expect(h.latencies[0]).toMatchObject({ modelFirstTokenMs: 100, modelWaitMs: 400, ttsWaitMs: 300, totalMs: 700, serviceMs: 0 });
  });

  it('a realtime turn: from the end of the caller\'s speech (the model is asked then) to its first audio, all of it the model\'s', async () => {
    const h = callHarness({ kind: 'realtime', assistant: { first_message: 'Hi.' } });
    await h.start();
    await h.until('the greeting', () => h.heard().includes('Hi.'));
    h.realtime.firstAudioMs = 250;
    h.realtime.reply({ text: ['We open at nine.'] });
    await h.caller.say('What time do you open?');
    await h.until('the reply', () => h.heard().includes('We open at nine.'), 5_000);
    expect(h.latencies).toHaveLength(1);
    const turn = h.latencies[0]!;
    expect(turn.modelRequestedAt).toBe(turn.endOfTurnAt);
    expect(turn).toMatchObject({ modelFirstTokenMs: 250, modelWaitMs: 250, ttsWaitMs: 0, totalMs: 250, serviceMs: 0 });
  });
});

describe('barge-in thresholds', () => {
  it('clears the line interruption_min_duration after the caller started speaking, not before', async () => {
    const h = await longGreeting({ interruption_min_duration: 0.3, interruption_min_words: 0, endpointing_min_delay: 0.3 });
    expect(h.transport.clears).toEqual([]);
    const startedAt = await h.caller.say('I would like to book an appointment.');
    expect(h.transport.clears.length).toBeGreaterThan(0);
    expect(h.rel(h.transport.clears[0]!) - startedAt).toBe(300);
    // nothing of the greeting after the clear; the next audio is the reply, after the caller's turn
    const clearAt = h.transport.clears[0]!;
    const after = h.transport.framesAfter(clearAt);
    await h.until('the reply heard', () => h.heard().some((t) => t.startsWith('You said')), 10_000);
    const firstAfter = h.transport.framesAfter(clearAt)[0]!;
    expect(after).toHaveLength(0);
    expect(h.rel(firstAfter.sentAt)).toBeGreaterThan(startedAt + h.voice.msOf('I would like to book an appointment.'));
    expect(heardOfLine(h).length).toBeLessThan(LONG_LINE.length);
  });

  it('interruption_min_words: fewer words never cut the line; the turn is answered after it', async () => {
    const h = await longGreeting({ interruption_min_duration: 0.3, interruption_min_words: 3, endpointing_min_delay: 0.3 });
    await h.caller.say('Hold on.');
    await h.until('the reply heard', () => h.heard().some((t) => t.startsWith('You said')), 20_000);
    expect(h.transport.clears).toEqual([]);
    expect(h.heard()).toEqual([...LONG_LINE, 'You said: Hold on.']);
    // the greeting is recorded once played: after the words said during it
    expect(h.messages()).toEqual([
      ['user', 'Hold on.'],
      ['assistant', LONG_LINE.join(' ')],
      ['assistant', 'You said: Hold on.'],
    ]);
  });

  it('interruption_min_words: the line is cut when the interim transcript reaches the minimum', async () => {
    const h = await longGreeting({ interruption_min_duration: 0.3, interruption_min_words: 3, endpointing_min_delay: 0.3 });
    h.stt.speechStarted();
    await h.advance(350);
    h.stt.interim('I would');
    await h.advance(150);
    expect(h.transport.clears).toEqual([]);
    h.stt.interim('I would like');
    const thirdWordAt = h.now();
    await h.advance(0);
    expect(h.transport.clears.map((t) => h.rel(t))).toEqual([thirdWordAt]);
    await h.advance(10_000);
    expect(heardOfLine(h).length).toBeLessThan(LONG_LINE.length);
  });

  it('interruption_min_words: a sentence said over the line pauses it at interruption_min_duration and cuts it at its third word; the rest of the line is never heard', async () => {
    const h = await longGreeting({ interruption_min_duration: 0.3, interruption_min_words: 3, endpointing_min_delay: 0.3 });
    const said = 'I would like to book an appointment.';
    const startedAt = await h.caller.say(said);
    // a sound that long pauses the line (the clear) at 300 ms; the interims come word by word
    // across the speech, and the third (of seven, 309 ms) cuts it: it never resumes
    expect(h.transport.clears.map((t) => h.rel(t) - startedAt)).toEqual([300]);
    await h.until('the reply heard', () => h.heard().some((t) => t.startsWith('You said')), 10_000);
    expect(heardOfLine(h).length).toBeLessThan(LONG_LINE.length);
    expect(heardOfLine(h)).toEqual(LONG_LINE.slice(0, heardOfLine(h).length));
    expect(h.transport.clears).toHaveLength(1);
  });

  it('interruption_min_words 0 (the default): a sound of interruption_min_duration cuts the line at once, words or not; it never resumes and is no turn', async () => {
    const h = await longGreeting({ interruption_min_duration: 0.3, interruption_min_words: 0, false_interruption_timeout: 1 });
    const noiseAt = await h.caller.noise(500);
    const clearAt = h.transport.clears[0]!;
    expect(h.rel(clearAt) - noiseAt).toBe(300);
    await h.advance(3_000);
    expect(h.transport.framesAfter(clearAt)).toEqual([]);
    expect(h.transport.clears).toHaveLength(1);
    expect(heardOfLine(h).length).toBeLessThan(LONG_LINE.length);
    expect(h.llm.requests).toHaveLength(0);
    // what the caller heard of the line is kept, and nothing of the caller (no words)
    expect(h.messages()).toEqual([['assistant', heardOfLine(h).join(' ')]]);
  });

  it('interruption_min_words 1: a noise without words pauses the line, which resumes false_interruption_timeout after the noise ends, from the cut sentence, and is heard whole', async () => {
    const h = await longGreeting({ interruption_min_duration: 0.3, interruption_min_words: 1, false_interruption_timeout: 1 });
    const noiseAt = await h.caller.noise(500);
    const clearAt = h.transport.clears[0]!;
    expect(h.rel(clearAt) - noiseAt).toBe(300);
    const resumedAt = await h.until('audio again', () => h.transport.framesAfter(clearAt).length > 0, 5_000);
    expect(resumedAt - (noiseAt + 500)).toBe(1000);
    await h.until('the whole line heard', () => heardOfLine(h).length === LONG_LINE.length, 20_000);
    expect(h.heard()).toEqual(LONG_LINE);
    expect(h.transport.clears).toHaveLength(1);
    // the sentence the pause cut was sent again from its start
    const cut = h.transport.frames.filter((f) => f.cutAt !== null || f.dropped);
    expect(cut.length).toBeGreaterThan(0);
    await h.advance(100);
    expect(h.messages()).toEqual([['assistant', LONG_LINE.join(' ')]]);
    // kept whole, under the node that said it (`assistant`: the call has no workflow)
    expect(h.record.messages[0]).toMatchObject({ role: 'assistant', content: LONG_LINE.join(' '), node_id: 'assistant' });
    expect(h.llm.requests).toHaveLength(0);
  });

  it('a sound shorter than interruption_min_duration neither pauses nor stops the line', async () => {
    const h = await longGreeting({ interruption_min_duration: 0.3, interruption_min_words: 0, false_interruption_timeout: 1 });
    await h.caller.noise(260);
    await h.until('the whole line heard', () => heardOfLine(h).length === LONG_LINE.length, 20_000);
    expect(h.transport.clears).toEqual([]);
    expect(h.transport.frames.filter((f) => f.cutAt !== null || f.dropped)).toEqual([]);
    expect(h.heard()).toEqual(LONG_LINE);
  });

  it('interruption_min_words: a long sound with too few words pauses the line, which resumes when the turn ends; the words are answered after the line', async () => {
    const h = await longGreeting({ interruption_min_duration: 0.3, interruption_min_words: 3, endpointing_min_delay: 0.3, false_interruption_timeout: 1 });
    const startedAt = await h.caller.say('Well, hmm.', { ms: 600 });
    const clearAt = h.transport.clears[0]!;
    expect(h.rel(clearAt) - startedAt).toBe(300);
    // two words of three: the turn ends endpointing_min_delay after the speech, and the line goes on then
    const resumedAt = await h.until('audio again', () => h.transport.framesAfter(clearAt).length > 0, 5_000);
    expect(resumedAt - (startedAt + 600)).toBe(300);
    await h.until('the reply heard', () => h.heard().some((t) => t.startsWith('You said')), 20_000);
    expect(h.transport.clears).toHaveLength(1);
    expect(h.heard()).toEqual([...LONG_LINE, 'You said: Well, hmm.']);
  });

  it('a key press during a pending interruption takes the turn: the line is cut at once', async () => {
    const h = await longGreeting({ interruption_min_duration: 0.3, interruption_min_words: 0, false_interruption_timeout: 3 });
    await h.caller.noise(400);
    expect(h.transport.clears).toHaveLength(1);
    h.caller.press('1');
    await h.until('the model asked', () => h.llm.requests.length > 0, 1_000);
    const kept = h.messages()[0]!;
    expect(kept[0]).toBe('assistant');
    expect(LONG_LINE.join(' ').startsWith(kept[1])).toBe(true);
    expect(kept[1].length).toBeLessThan(LONG_LINE.join(' ').length);
    expect(h.llm.asked(0)).toEqual([
      ['assistant', kept[1]],
      ['user', 'DTMF: 1'],
    ]);
    expect(h.llm.requests[0]!.messages[0]!.role).toBe('system');
    await h.until('the reply heard', () => h.heard().some((t) => t.startsWith('You said')), 5_000);
    expect(h.messages().map(([role]) => role)).toEqual(['assistant', 'user', 'assistant']);
    expect(h.messages()[1]).toEqual(['user', 'DTMF: 1']);
    expect(h.llm.requests).toHaveLength(1);
  });
});

describe('lines that cannot be interrupted', () => {
  const CLOSING = [
    'Thank you for calling Acme Dental.',
    'Your appointment details will arrive by text message.',
    'We look forward to seeing you soon, goodbye.',
  ];
  const eager = { interruption_min_duration: 0.2, interruption_min_words: 0, endpointing_min_delay: 0.3 };

  it("the end node's line plays to its end over the caller's speech, then the call hangs up", async () => {
    const h = callHarness({
      assistant: turnTaking(eager),
      definition: {
        version: 1,
        entry_node: 'greeting',
        nodes: [
          { id: 'greeting', type: 'conversation', first_line: 'Hello, this is Acme Dental.' },
          { id: 'bye', type: 'end', first_line: CLOSING.join(' ') },
        ],
        edges: [{ from: 'greeting', to: 'bye', description: 'the caller says goodbye' }],
      },
    });
    h.llm.reply({ calls: [{ name: 'go_to_bye' }] });
    await h.start();
    await h.until('greeting', () => h.heard().length === 1);
    await h.caller.say('Goodbye now.');
    await h.until('the closing line begins', () => h.heard().includes(CLOSING[0]!), 5_000);
    await h.caller.say('Wait, I have one more question please.');
    const report = await h.untilEnded();
    expect(h.transport.clears).toEqual([]);
    expect(h.heard().slice(1)).toEqual(CLOSING);
    expect(report.ended_reason).toBe('assistant-ended-call');
    expect(h.notifier.statuses.at(-1)).toMatchObject({ status: 'ended', extra: { ended_reason: 'assistant-ended-call' } });
    expect(h.transport.hangUps).toHaveLength(1);
    // the hang-up came once the last sentence had played
    expect(h.rel(h.transport.hangUps[0]!)).toBeGreaterThanOrEqual(h.heardAt(CLOSING[2]!));
    expect(report.messages.at(-1)).toMatchObject({ role: 'assistant', content: CLOSING.join(' '), node_id: 'bye' });
  });

  it("the recording consent plays to its end over the caller's speech; words over it are no turn", async () => {
    const consent = ['This call may be recorded.', 'Recordings help us train our staff and improve our service.', 'Stay on the line if you agree.'];
    const h = callHarness({
      assistant: turnTaking(eager, { recording_consent: { enabled: true, message: consent.join(' ') }, first_message: 'Hi, how can I help?' }),
    });
    await h.start();
    await h.until('the consent begins', () => h.heard().includes(consent[0]!));
    await h.caller.say('Hello, is anybody there?');
    await h.until('the first line', () => h.heard().includes('Hi, how can I help?'), 10_000);
    await h.advance(2_000);
    expect(h.transport.clears).toEqual([]);
    expect(h.heard()).toEqual([...consent, 'Hi, how can I help?']);
    expect(h.llm.requests).toHaveLength(0);
    expect(h.messages()).toEqual([
      ['assistant', consent.join(' ')],
      ['assistant', 'Hi, how can I help?'],
    ]);
    h.caller.hangUp();
    const report = await h.untilEnded();
    expect(report.messages[0]).toMatchObject({ role: 'assistant', content: consent.join(' ') });
  });
});
