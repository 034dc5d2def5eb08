/**
 * A realtime call's protection against short noises (docs/turn-taking.md, Realtime calls), on both
 * detectors: the click and the cough of test/fixtures/vad/ played over the assistant's reply
 * neither clear nor cut it, and the reply the model's server VAD starts for them is dropped
 * unheard and forgotten; real speech cuts the reply `interruption_min_duration` after it starts
 * and is answered. The scripted model is a vendor whose VAD takes any sound for speech, answers
 * every turn (a noise too) and never cuts a response itself (OpenAI with `interrupt_response: false`).
 */
import { describe, expect, it } from 'vitest';
import { FRAME_BYTES } from '../../src/calls/outbound.js';
import { HOLD_MS } from '../../src/calls/realtime/caller-turns.js';
import { callHarness, useFastCalls, type CallHarness } from '../helpers/call-harness.js';
import { NOISE_REPLY } from '../helpers/scripted-providers.js';
import { VAD_FIXTURE_SETTINGS, VAD_FIXTURES, type VadFixture } from '../helpers/vad-fixtures.js';

useFastCalls();

const LONG_LINE = [
  'Welcome to the Acme Dental line, where we look after the teeth of the whole family.',
  'Our office is open from nine in the morning to five in the afternoon on every weekday.',
  'We are closed on weekends and on public holidays, and the emergency line takes those calls.',
].join(' ');
const SILENCE = 0xff;
const MIN_DURATION_MS = (VAD_FIXTURE_SETTINGS as { interruption_min_duration: number }).interruption_min_duration * 1000;
const fixture = (file: string): VadFixture => VAD_FIXTURES.find((f) => f.file === file)!;
const NOISES = [fixture('click-100ms.wav'), fixture('cough-300ms.wav')];
const SPEECH = [fixture('speech-short.wav'), fixture('speech-booking.wav')];

function call(vad: string, firstMessage: string): CallHarness {
  return callHarness({ kind: 'realtime', assistant: { first_message: firstMessage, speech_config: { turn_taking: { ...VAD_FIXTURE_SETTINGS, vad } } } });
}

/** The fixture in 20 ms frames, then a second of line silence (the model's VAD ends the turn in it). Returns when it started. */
async function play(h: CallHarness, f: VadFixture): Promise<number> {
  const startedAt = h.now();
  const frames = Math.ceil(f.mulaw.length / FRAME_BYTES) + 50;
  for (let i = 0; i < frames; i++) {
    const frame = Buffer.alloc(FRAME_BYTES, SILENCE);
    if (i * FRAME_BYTES < f.mulaw.length) f.mulaw.copy(frame, 0, i * FRAME_BYTES, Math.min((i + 1) * FRAME_BYTES, f.mulaw.length));
    h.transport.audio(frame);
    await h.advance(20);
  }
  return startedAt;
}

/** A call whose greeting (one realtime response) has played for a second. */
async function overTheLine(vad: string): Promise<CallHarness> {
  const h = call(vad, LONG_LINE);
  await h.start();
  await h.until('a second of the greeting heard', () => h.transport.marks.filter((m) => m.answeredAt !== null).length >= 10);
  return h;
}

const framesOf = (h: CallHarness, text: string) => h.transport.frames.filter((f) => h.voice.decode(f.frame)?.text === text);

describe.each([{ vad: 'webrtc' }, { vad: 'silero' }])('$vad detector, realtime call', ({ vad }) => {
  describe.each(NOISES.map((f) => ({ name: f.file, f })))('$name', ({ f }) => {
    it('over the reply: no clear, no gap, nothing cut; the reply the model started for it is dropped unheard and forgotten', async () => {
      const h = await overTheLine(vad);
      await play(h, f);
      await h.until('the whole greeting', () => h.heard().includes(LONG_LINE), 30_000);
      await h.advance(3_000);
      expect(h.transport.clears).toEqual([]);
      const line = framesOf(h, LONG_LINE);
      // no gap: every frame of the greeting starts where the one before it ended
      for (let i = 1; i < line.length; i++) expect(line[i]!.startsAt).toBe(line[i - 1]!.endsAt);
      const session = h.realtime.session!;
      expect(session.truncations).toEqual([]);
      // the model's VAD took the sound for a turn and answered it: the answer was dropped before any of it played
      expect(session.forgotten.flat()).toHaveLength(1);
      expect(framesOf(h, NOISE_REPLY)).toEqual([]);
      expect(h.heard()).toEqual([LONG_LINE]);
      expect(session.history.map((m) => m.content)).not.toContain(NOISE_REPLY);
      expect(h.messages()).toEqual([['assistant', LONG_LINE]]);
      expect(h.realtime.requests).toEqual([]);
    });

    it('with the assistant silent: no reply, no turn', async () => {
      const h = call(vad, 'Hi.');
      await h.start();
      await h.until('the greeting heard', () => h.heard().includes('Hi.'));
      await play(h, f);
      await h.advance(3_000);
      expect(h.realtime.session!.forgotten.flat()).toHaveLength(1);
      expect(h.heard()).toEqual(['Hi.']);
      expect(h.transport.clears).toEqual([]);
      expect(h.messages()).toEqual([['assistant', 'Hi.']]);
    });
  });

  describe.each(SPEECH.map((f) => ({ name: f.file, f })))('$name', ({ f }) => {
    it('over the reply: cut interruption_min_duration after the speech starts (our detector), then answered', async () => {
      const h = await overTheLine(vad);
      h.realtime.transcripts.push(f.words!);
      const startedAt = await play(h, f);
      await h.until('the answer heard', () => h.heard().some((t) => t.startsWith('You said')), 10_000);
      expect(h.transport.clears).toHaveLength(1);
      const clearAt = h.rel(h.transport.clears[0]!) - (startedAt + f.sound[0]);
      expect(clearAt).toBeGreaterThanOrEqual(MIN_DURATION_MS);
      expect(clearAt).toBeLessThanOrEqual(MIN_DURATION_MS + 400);
      const session = h.realtime.session!;
      expect(session.truncations).toHaveLength(1);
      const [role, kept] = h.messages()[0]!;
      expect(role).toBe('assistant');
      expect(LONG_LINE.startsWith(kept) && kept.length < LONG_LINE.length).toBe(true);
      expect(session.truncations[0]!.text).toBe(kept);
      expect(h.messages().slice(1)).toEqual([
        ['user', f.words],
        ['assistant', `You said: ${f.words!.replace(/[.!?]+$/, '')}.`],
      ]);
      expect(session.forgotten).toEqual([]);
    });
  });
});

describe('a transcript that comes after the reply has begun (OpenAI)', () => {
  it('the reply to a short sound waits for it: played once it has words, dropped unheard when it has none', async () => {
    const h = call('webrtc', 'Hi.');
    h.realtime.transcriptDelayMs = 300;
    await h.start();
    await h.until('the greeting heard', () => h.heard().includes('Hi.'));

    await play(h, fixture('cough-300ms.wav'));
    await h.advance(2_000);
    expect(h.realtime.session!.forgotten.flat()).toHaveLength(1);
    expect(framesOf(h, NOISE_REPLY)).toEqual([]);
    expect(h.transport.clears).toEqual([]);

    // a short answer (the detector does not hear the harness's voice as speech): held, then played
    await h.caller.say('Yes.');
    const heardAt = await h.until('the answer heard', () => h.heard().includes('You said: Yes.'), 5_000);
    const first = framesOf(h, 'You said: Yes.')[0]!;
    // the turn ended 500 ms after the speech (the model's VAD), its transcript came 300 ms later
    expect(h.rel(first.sentAt)).toBeGreaterThanOrEqual(heardAt - 2_000);
    expect(h.messages()).toEqual([
      ['assistant', 'Hi.'],
      ['user', 'Yes.'],
      ['assistant', 'You said: Yes.'],
    ]);
    expect(h.realtime.session!.forgotten.flat()).toHaveLength(1);
  });

  it('words the vendor did not answer (a response of its own under way) cut that response, and the call asks for the reply', async () => {
    const h = call('webrtc', 'Hi.');
    h.realtime.transcriptDelayMs = 300;
    await h.start();
    await h.until('the greeting heard', () => h.heard().includes('Hi.'));
    h.realtime.firstAudioMs = 2_000;
    // a key: the model is asked to answer it, and takes 2 s to begin
    h.caller.press('5');
    await h.advance(100);
    await h.caller.say('Yes.');
    await h.until('the answer heard', () => h.heard().includes('You said: Yes.'), 10_000);
    // the answer to the key was cut by the words before any of it was heard; the model was asked again, after the words
    expect(h.realtime.requests).toHaveLength(2);
    expect(h.realtime.requests[0]!.instructions).toContain('The caller pressed 5');
    expect(h.realtime.requests[1]!.messages.at(-1)).toEqual({ role: 'user', content: 'Yes.' });
    expect(h.messages().slice(-2)).toEqual([
      ['user', 'Yes.'],
      ['assistant', 'You said: Yes.'],
    ]);
    expect(h.realtime.session!.forgotten).toEqual([]);
  });

  it(`no transcript within ${HOLD_MS} ms: the reply plays; an empty transcript after that cuts it`, async () => {
    const h = call('webrtc', 'Hi.');
    h.realtime.transcriptDelayMs = HOLD_MS + 500;
    await h.start();
    await h.until('the greeting heard', () => h.heard().includes('Hi.'));
    await play(h, fixture('click-100ms.wav'));
    await h.advance(3_000);
    // the caller heard the beginning of the answer to the click, then it was cleared: the part
    // heard stays as a cut reply does (record and model), only the click's turn is forgotten
    const reply = framesOf(h, NOISE_REPLY);
    expect(reply.length).toBeGreaterThan(0);
    expect(h.transport.clears).toHaveLength(1);
    expect(h.heard()).toEqual(['Hi.']);
    const session = h.realtime.session!;
    expect(session.forgotten).toEqual([[]]);
    const [, heard] = h.messages()[1]!;
    expect(NOISE_REPLY.startsWith(heard) && heard.length < NOISE_REPLY.length).toBe(true);
    expect(session.truncations.map((t) => t.text)).toEqual([heard]);
    expect(h.messages()).toHaveLength(2);
  });
});
