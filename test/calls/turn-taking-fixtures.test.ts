/**
 * Turn-taking of our own end to end (docs/turn-taking.md): the fixtures of test/fixtures/vad/
 * played by a simulated caller into live calls over the Twilio protocol (Silero) and over SIP
 * (WebRTC's detector; RTP, where there is no `clear`: the server stops sending), with
 * the default turn-taking settings. Deepgram's fake gives the words of the speech (an interim
 * while it is said, the final once it has been), as a vendor would; the sandbox model and voice
 * answer, and the caller's ear decodes what it hears. Times are real: ranges, wide enough for a
 * loaded 2-core machine, around the targets of §17.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SipCaller, SipSignalling } from '../../src/sim/sip-caller.js';
import { startFakeDeepgram, type DeepgramFakeScript, type FakeDeepgram } from '../fakes/deepgram.js';
import { callIdOf, eventually, startCallingServer, type CallingServer } from '../helpers/calls.js';
import { VAD_FIXTURE_SETTINGS, VAD_FIXTURES } from '../helpers/vad-fixtures.js';

const DEEPGRAM_KEY = 'dg-test-key';
const settings = VAD_FIXTURE_SETTINGS as { interruption_min_duration: number; endpointing_min_delay: number };
const MIN_DURATION_MS = settings.interruption_min_duration * 1000;
const MIN_DELAY_MS = settings.endpointing_min_delay * 1000;

/** Five sentences to talk over, each its own TTS session. */
const LONG_LINE = [
  'Welcome to the Acme Dental line, where we look after the whole family.',
  'Our office is open from nine in the morning to five in the afternoon on weekdays.',
  'We are closed on weekends and on public holidays, when the emergency line answers.',
  'You can book, move or cancel an appointment with me at any time.',
  'Tell me how I can help you today.',
];

let s: CallingServer;
let deepgram: FakeDeepgram;
let signalling: SipSignalling;
const deepgramScript: DeepgramFakeScript = { apiKey: DEEPGRAM_KEY, idleTimeoutMs: 120_000 };

beforeAll(async () => {
  deepgram = await startFakeDeepgram(deepgramScript);
  s = await startCallingServer(
    { DEEPGRAM_API_BASE: deepgram.url, DEEPGRAM_API_KEY: DEEPGRAM_KEY, RTP_PORT_MIN: '32600', RTP_PORT_MAX: '32800' },
    { sip: { port: 0 } },
  );
  const account = await s.api('PATCH', '/account', { sip: { inbound: { allowed_addresses: ['127.0.0.1'] } } });
  expect(account.status).toBe(200);
  signalling = await SipSignalling.open();
}, 120_000);
afterAll(async () => {
  signalling?.close();
  await s?.close();
  await deepgram?.close();
});

const fixture = (file: string) => VAD_FIXTURES.find((f) => f.file === file)!;

const assistantFor = (vad: string) => ({
  name: `Turn-taking (${vad})`,
  stt_config: { provider: 'deepgram' },
  llm_config: { provider: 'sandbox' },
  tts_config: { provider: 'sandbox', voice_id: 'sandbox' },
  first_message: LONG_LINE.join(' '),
  speech_config: { turn_taking: { ...VAD_FIXTURE_SETTINGS, vad } },
});

async function greetedCall(vad: string) {
  const { number } = await s.setUpNumber({ assistant: assistantFor(vad) });
  const call = s.caller(number);
  const before = deepgram.connections.length;
  const callId = callIdOf(await call.dial());
  await call.hear(LONG_LINE[0]!, 30_000);
  const stt = deepgram.connections[before]!;
  return { call, callId, stt };
}

/** The longest wait between two frames of the assistant's audio arriving within [from, to]. */
function longestGap(frameTimes: number[], from: number, to: number): number {
  const inside = frameTimes.filter((t) => t >= from && t <= to);
  let gap = 0;
  for (let i = 1; i < inside.length; i++) gap = Math.max(gap, inside[i]! - inside[i - 1]!);
  return gap;
}

// One detector on each transport, the other's real-time run being the other transport's: Silero (a
// model that must keep up with the line) where the far end gets `clear`, WebRTC's over RTP. Every
// fixture on both detectors, with exact times: test/fast-calls/vad-fixtures.test.ts.
describe.each([{ vad: 'silero' }])('$vad detector, over the Twilio protocol', ({ vad }) => {
  it('a 100 ms click and a 300 ms cough over the greeting: no clear, no gap over 300 ms', async () => {
    const { call } = await greetedCall(vad);
    const from = Date.now();
    await call.play(fixture('click-100ms.wav').mulaw, 'click');
    await new Promise((r) => setTimeout(r, 700));
    await call.play(fixture('cough-300ms.wav').mulaw, 'cough');
    await new Promise((r) => setTimeout(r, 1_500));
    const to = Date.now();
    expect(call.clears).toEqual([]);
    expect(call.frameTimes.filter((t) => t >= from && t <= to).length).toBeGreaterThan(50);
    expect(longestGap(call.frameTimes, from, to)).toBeLessThanOrEqual(300);
    await call.hangUp();
  }, 90_000);

  it('real speech over the greeting: a clear within interruption_min_duration + 400 ms, its words cut it, the reply within endpointing_min_delay + 700 ms of its end', async () => {
    const { call, callId, stt } = await greetedCall(vad);
    const speech = fixture('speech-booking.wav');
    const playing = call.play(speech.mulaw, 'speech');
    // the vendor's words while it is said, and its final once it has been
    await new Promise((r) => setTimeout(r, 1_500));
    stt.act({ type: 'results', transcript: 'I would like to book', is_final: false });
    await playing;
    stt.act({ type: 'results', transcript: speech.words!, is_final: true, speech_final: true });
    const spoken = call.spoken.at(-1)!;
    await eventually('the reply', () => call.frameTimes.some((t) => t > spoken.endedAt), 10_000);

    expect(call.clears.length).toBeGreaterThan(0);
    const clearAt = call.clears[0]!;
    expect(clearAt - spoken.startedAt).toBeGreaterThanOrEqual(MIN_DURATION_MS - 40);
    expect(clearAt - spoken.startedAt).toBeLessThanOrEqual(MIN_DURATION_MS + 400);
    // cut, not paused: nothing more of the greeting while the caller spoke, then the reply
    expect(call.frameTimes.filter((t) => t > clearAt + 100 && t < spoken.endedAt)).toEqual([]);
    const replyAt = call.frameTimes.find((t) => t > spoken.endedAt)!;
    expect(replyAt - spoken.endedAt).toBeLessThanOrEqual(MIN_DELAY_MS + 700);
    expect(call.heard.map((h) => h.text)).not.toContain(LONG_LINE.at(-1));

    const record = await s.api('GET', `/calls/${callId}`);
    const messages = record.json.call.messages as Array<{ role: string; content: string }>;
    expect(messages.slice(0, 2).map((m) => m.role)).toEqual(['assistant', 'user']);
    expect(messages[1]!.content).toBe(speech.words);
    expect(LONG_LINE.join(' ').startsWith(messages[0]!.content)).toBe(true);
    await call.hangUp();
  }, 90_000);
});

/** The first frame after `from` that is followed by `gapMs` without any (a cut, or the end of what was said). */
function lastBeforeGap(frameTimes: number[], from: number, gapMs: number): number {
  const after = frameTimes.filter((t) => t >= from);
  for (let i = 0; i + 1 < after.length; i++) if (after[i + 1]! - after[i]! > gapMs) return after[i]!;
  return after.at(-1) ?? from;
}

describe.each([{ vad: 'webrtc' }])('$vad detector, over SIP', ({ vad }) => {
  it('a cough leaves no gap over 300 ms in the greeting; real speech stops it within interruption_min_duration + 400 ms and is answered within endpointing_min_delay + 700 ms of its end', async () => {
    // twice the greeting: it plays on past the cough and into the speech
    const { number } = await s.setUpNumber({ provider: 'sip', assistant: { ...assistantFor(vad), first_message: [...LONG_LINE, ...LONG_LINE].join(' ') } });
    const before = deepgram.connections.length;
    const phone = new SipCaller({ port: s.runtime.sip!.port, to: number, from: `+1500555${vad === 'webrtc' ? '0201' : '0202'}`, signalling });
    try {
      expect((await phone.dial()).kind).toBe('connected');
      await phone.hear(LONG_LINE[0]!, 30_000);
      const stt = deepgram.connections[before]!;

      const from = Date.now();
      await phone.play(fixture('cough-300ms.wav').mulaw, 'cough');
      await new Promise((r) => setTimeout(r, 1_000));
      const to = Date.now();
      // the greeting still playing at the end of the window, and never more than 300 ms apart in it
      expect(phone.frameTimes.some((t) => t > to - 200)).toBe(true);
      expect(longestGap(phone.frameTimes, from, to)).toBeLessThanOrEqual(300);

      const speech = fixture('speech-booking.wav');
      const playing = phone.play(speech.mulaw, 'speech');
      await new Promise((r) => setTimeout(r, 1_500));
      stt.act({ type: 'results', transcript: 'I would like to book', is_final: false });
      await playing;
      stt.act({ type: 'results', transcript: speech.words!, is_final: true, speech_final: true });
      const spoken = phone.spoken.at(-1)!;
      await eventually('the reply', () => phone.frameTimes.filter((t) => t > spoken.endedAt).length > 10, 10_000);
      // RTP has no clear: the greeting's packets stop coming (the server sends no silence; a lone
      // packet a second keeps the media path open)
      const stoppedAt = lastBeforeGap(phone.frameTimes, spoken.startedAt, 300);
      expect(stoppedAt - spoken.startedAt).toBeGreaterThanOrEqual(MIN_DURATION_MS - 100);
      expect(stoppedAt - spoken.startedAt).toBeLessThanOrEqual(MIN_DURATION_MS + 400);
      const replyAt = phone.frameTimes.filter((t) => t > spoken.endedAt).find((t, i, all) => all[i + 1] !== undefined && all[i + 1]! - t < 100)!;
      expect(replyAt - spoken.endedAt).toBeLessThanOrEqual(MIN_DELAY_MS + 700);
      await phone.hangUp();
    } finally {
      await phone.close();
    }
  }, 90_000);
});
