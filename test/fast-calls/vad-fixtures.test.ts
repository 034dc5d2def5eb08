/**
 * The voice-activity fixtures (test/fixtures/vad/manifest.json: clicks, a cough, pink noise,
 * babble, speech, speech over noise) played into pipeline calls on both detectors, with the
 * default turn-taking settings: what each must do over the assistant's interruptible line, and
 * with the assistant silent (docs/turn-taking.md). The scripted STT gives the words of the speech
 * (interims across it, the final 150 ms after it, as a vendor would) and none for the noises.
 */
import { describe, expect, it } from 'vitest';
import { FRAME_BYTES } from '../../src/calls/outbound.js';
import { callHarness, useFastCalls, type CallHarness } from '../helpers/call-harness.js';
import { VAD_FIXTURE_SETTINGS, VAD_FIXTURES, type VadFixture } from '../helpers/vad-fixtures.js';

useFastCalls();

const LONG_LINE = [
  'Welcome to the Acme Dental line, where we look after the teeth of the whole family.',
  'Our office is open from nine in the morning to five in the afternoon on every weekday.',
  'We are closed on weekends and on public holidays, and the emergency line takes those calls.',
  'You can book, move or cancel an appointment with me at any time of the day or night.',
  'Tell me how I can help you today, and I will do my best to sort it out for you.',
];
const SILENCE = 0xff;
/** The vendor's final comes this long after the speech ends. */
const FINAL_LAG_MS = 150;
/** How far the detector may place the end of a sound from where it is (its classifier's own hangover, a weak last sound). */
const END_LAG_MS = 150;

const settings = VAD_FIXTURE_SETTINGS as { interruption_min_duration: number; false_interruption_timeout: number; endpointing_min_delay: number };
const MIN_DURATION_MS = settings.interruption_min_duration * 1000;
const RESUME_MS = settings.false_interruption_timeout * 1000;
const MIN_DELAY_MS = settings.endpointing_min_delay * 1000;

function call(vad: string, firstMessage: string): CallHarness {
  return callHarness({ assistant: { first_message: firstMessage, speech_config: { turn_taking: { ...VAD_FIXTURE_SETTINGS, vad } } } });
}

/**
 * Plays the fixture in 20 ms frames and then a second of line silence; the STT hears the vendor's
 * speech start at the sound, and for speech its words across it and the final after it. Returns
 * when the fixture started (`now()`).
 */
async function play(h: CallHarness, fixture: VadFixture): Promise<number> {
  const startedAt = h.now();
  const [from, to] = fixture.sound;
  const words = fixture.words?.split(' ') ?? [];
  const frames = Math.ceil(fixture.mulaw.length / FRAME_BYTES) + 50;
  let said = 0;
  let finalSent = false;
  for (let i = 0; i < frames; i++) {
    const t = i * 20;
    const frame = Buffer.alloc(FRAME_BYTES, SILENCE);
    if (i * FRAME_BYTES < fixture.mulaw.length) fixture.mulaw.copy(frame, 0, i * FRAME_BYTES, Math.min((i + 1) * FRAME_BYTES, fixture.mulaw.length));
    if (t === Math.floor(from / 20) * 20) h.stt.speechStarted();
    h.transport.audio(frame);
    if (words.length > 0 && t > from && t < to) {
      const due = Math.min(words.length - 1, Math.floor(((t - from) / (to - from)) * words.length));
      if (due > said) {
        said = due;
        h.stt.interim(words.slice(0, said).join(' '));
      }
    }
    if (words.length > 0 && !finalSent && t >= to + FINAL_LAG_MS) {
      finalSent = true;
      h.stt.final(fixture.words!);
    }
    await h.advance(20);
  }
  return startedAt;
}

const lineFrames = (h: CallHarness) => h.transport.frames.filter((f) => LONG_LINE.includes(h.voice.decode(f.frame)?.text ?? ''));

/** A call greeting with LONG_LINE, once its first sentence has been heard. */
async function overTheLine(vad: string): Promise<CallHarness> {
  const h = call(vad, LONG_LINE.join(' '));
  await h.start();
  await h.until('the first sentence heard', () => h.heard().includes(LONG_LINE[0]!));
  return h;
}

/** When the line ends with nothing played over it (the same call, the same moment, silence instead). */
const undisturbedEnd = new Map<string, number>();
async function lineEndWithoutSound(vad: string, fixture: VadFixture): Promise<number> {
  const key = `${vad} ${fixture.mulaw.length}`;
  const known = undisturbedEnd.get(key);
  if (known !== undefined) return known;
  const h = await overTheLine(vad);
  await play(h, { ...fixture, mulaw: Buffer.alloc(fixture.mulaw.length, SILENCE), words: undefined });
  await h.until('the whole line', () => h.heard().length === LONG_LINE.length, 30_000);
  const end = h.heardAt(LONG_LINE.at(-1)!);
  await h.dispose();
  undisturbedEnd.set(key, end);
  return end;
}

describe.each([{ vad: 'webrtc' }, { vad: 'silero' }])('$vad detector', ({ vad }) => {
  describe.each(VAD_FIXTURES.map((f) => ({ name: f.file, fixture: f })))('$name', ({ fixture }) => {
    const [from, to] = fixture.sound;

    it(`over the assistant's line: ${fixture.expect}`, async () => {
      const expected = fixture.expect === 'ignored' ? await lineEndWithoutSound(vad, fixture) : null;
      const h = await overTheLine(vad);
      const startedAt = await play(h, fixture);
      const soundAt = startedAt + from;
      const soundEnd = startedAt + to;

      if (fixture.expect === 'ignored') {
        await h.until('the whole line', () => h.heard().length === LONG_LINE.length, 30_000);
        expect(h.transport.clears).toEqual([]);
        expect(h.heard()).toEqual(LONG_LINE);
        // no pause and no gap: the line ends when it would have with silence on the line
        expect(h.heardAt(LONG_LINE.at(-1)!)).toBe(expected);
        expect(h.llm.requests).toEqual([]);
        return;
      }

      expect(h.transport.clears).toHaveLength(1);
      const clearAt = h.rel(h.transport.clears[0]!);
      expect(clearAt - soundAt).toBeGreaterThanOrEqual(MIN_DURATION_MS);
      if (fixture.expect === 'cuts') {
        // interruption_min_words 0: cut at once, before the sound ends, never resumed, and no turn
        expect(clearAt).toBeLessThan(soundEnd);
        expect(clearAt - soundAt).toBeLessThanOrEqual(MIN_DURATION_MS + 400);
        await h.advance(RESUME_MS + END_LAG_MS + 1_000);
        expect(lineFrames(h).filter((f) => f.sentAt > h.transport.clears[0]!)).toEqual([]);
        expect(h.heard().filter((t) => LONG_LINE.includes(t)).length).toBeLessThan(LONG_LINE.length);
        expect(h.transport.clears).toHaveLength(1);
        expect(h.llm.requests).toEqual([]);
        return;
      }

      // interrupts: cut, never resumed, the caller's words answered
      expect(clearAt - soundAt).toBeLessThanOrEqual(MIN_DURATION_MS + 400);
      await h.until('the reply heard', () => h.heard().some((t) => t.startsWith('You said')), 10_000);
      expect(lineFrames(h).filter((f) => f.sentAt > h.transport.clears[0]!)).toEqual([]);
      expect(h.heard().filter((t) => LONG_LINE.includes(t)).length).toBeLessThan(LONG_LINE.length);
      expect(h.llm.requests).toHaveLength(1);
      expect(h.llm.asked(0).at(-1)).toEqual(['user', fixture.words]);
      expect(h.transport.clears).toHaveLength(1);
    });

    it(`with the assistant silent: ${fixture.expect === 'interrupts' ? 'a turn, answered in time' : 'no turn'}`, async () => {
      const h = call(vad, 'Hi.');
      await h.start();
      await h.until('the greeting heard', () => h.heard().includes('Hi.'));
      const startedAt = await play(h, fixture);
      if (fixture.expect !== 'interrupts') {
        await h.advance(5_000);
        expect(h.llm.requests).toEqual([]);
        expect(h.messages()).toEqual([['assistant', 'Hi.']]);
        return;
      }
      await h.until('the reply heard', () => h.heard().some((t) => t.startsWith('You said')), 10_000);
      const reply = h.transport.frames.find((f) => h.voice.decode(f.frame)?.text.startsWith('You said'))!;
      // the speech ended at `to`; its final came 150 ms later
      expect(h.rel(reply.startsAt) - (startedAt + to)).toBeLessThanOrEqual(MIN_DELAY_MS + 700);
      // not before the caller has finished (the detector may place the end of a weak last sound a little early)
      expect(h.rel(h.llm.requests[0]!.at) - (startedAt + to)).toBeGreaterThanOrEqual(MIN_DELAY_MS - END_LAG_MS);
      expect(h.messages()[1]).toEqual(['user', fixture.words]);
    });
  });
});
