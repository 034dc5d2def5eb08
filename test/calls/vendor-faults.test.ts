/**
 * One vendor's failure never harms another call or the process. (The issue: an `openai-realtime`
 * assistant whose vendor could not be reached was answered, then the whole server exited.)
 *
 * For every vendor a call can use (Deepgram STT, OpenAI chat completions, ElevenLabs TTS, OpenAI
 * TTS, OpenAI Realtime) a faulty call meets each fault while a healthy call is live beside it on
 * the same server:
 *  - refuse:  nothing listens at the vendor's base URL (connection refused);
 *  - no-key:  the vendor's API key is not configured (refused before pickup, fail closed);
 *  - drop:    the vendor drops the connection once the call is under way;
 *  - garbage: the vendor answers something that is not its protocol (an HTML page, a frame that is not JSON);
 *  - hang:    the vendor takes the connection and never answers.
 * The faulty call ends `pipeline-error-<provider>` in bounded time, with its `status-update`
 * `ended` and its end-of-call-report; the healthy call keeps its frames on time and finishes its
 * conversation; the server still answers and takes calls; no error reaches the process (in
 * production an unhandled rejection or uncaught exception stops it, every call with it).
 *
 * Over real sockets: every vendor without its key, one refused vendor (Deepgram, the first a
 * pipeline call connects to; OpenAI Realtime refused: test/calls/isolation.test.ts), and every
 * vendor dropping its connection mid-call. The other faults of each vendor (garbage, hang, and
 * refused for the rest) are what its adapter reports (test/providers/*: each fault is a
 * ProviderError with its code) and what the call does with that error, beside a healthy call
 * (test/fast-calls/vendor-faults.test.ts, every vendor × every fault): docs/testing.md maps them.
 *
 * refuse and no-key hold for the whole server (one base URL and one key per vendor), so there
 * the healthy call runs on the sandbox providers. For the other faults each vendor fake chooses
 * per connection or request, by a marker of the faulty assistant (a Deepgram keyterm, a system
 * prompt, a voice, a model), so the healthy call talks to the same vendor through the same fake.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SimulatedCall } from '../../src/sim/caller.js';
import { synthesizeSandboxSpeech } from '../../src/providers/sandbox/tts.js';
import {
  ACCOUNT_SID,
  AUTH_TOKEN,
  callIdOf,
  eventually,
  receivedMessages,
  sandboxAssistant,
  startCallingServer,
  type CallingServer,
} from '../helpers/calls.js';
import { describeProcessErrors, frameTiming, REFUSED_PORT, watchProcessErrors, type ProcessErrors } from '../helpers/faults.js';
import { startFakeDeepgram, type DeepgramFakeConnectionScript, type FakeDeepgram } from '../fakes/deepgram.js';
import { startFakeOpenAiChat, type FakeCompletion } from '../fakes/openai-chat.js';
import { FAKE_ELEVENLABS_KEY, startFakeElevenLabs, textFromAudio, type FakeElevenLabsScript } from '../fakes/elevenlabs.js';
import { startFakeOpenAiTts, type FakeOpenAiTtsScript } from '../fakes/openai-tts.js';
import { startFakeOpenAiRealtime, type FakeRealtimeScript, type FakeResponse, type FakeTurn } from '../fakes/openai-realtime.js';

/**
 * Within one thing the assistant says, the caller hears no silence longer than this: a frame may
 * come at most 100 ms after its turn to play (20 ms frames, paced with a 60 ms lead). A raw gap
 * between two frames of 20 ms + 100 ms is not the limit: on 2 shared cores the in-process
 * database and the garbage collector hold the one event loop up for 80 to 160 ms now and then,
 * with no fault anywhere, and the lead is there to absorb that.
 */
const MAX_UNDERRUN_MS = 100;
/** A longer gap is the assistant being quiet (between its lines the caller speaks for ≥ 0.5 s). */
const SPURT_GAP_MS = 400;
/** Every adapter gives up on a silent vendor after 10 s (its connect / first-byte timeouts). */
const FAULT_BOUND_MS = 25_000;
/** Turns of the healthy caller while the faulty call lives (the hang cases last ~10 s). */
const MAX_TURNS_BESIDE = 8;

const DEEPGRAM_KEY = 'dg-test-key';
const OPENAI_KEY = 'sk-test';
const GREETING = 'Hello from the healthy line.';
const FAULTY_GREETING = 'Faulty line here, please hold on for a moment while I check.';
const HTML_PAGE = '<html><head><title>502 Bad Gateway</title></head><body><h1>502 Bad Gateway</h1></body></html>';
/** What marks the faulty assistant to a fake that serves both calls. */
const FAULTY_KEYTERM = 'faulty-line';
const FAULTY_PROMPT = 'FAULTY LINE';
const FAULTY_ELEVENLABS_VOICE = 'faulty-voice';
const FAULTY_OPENAI_VOICE = 'onyx';
const FAULTY_REALTIME_MODEL = 'gpt-realtime-mini';

type MidCallFault = 'drop' | 'garbage' | 'hang';
/** Over sockets, the drop of each vendor; garbage and hang: test/fast-calls/vendor-faults.test.ts with the adapters' tests. */
const MID_CALL_FAULTS: MidCallFault[] = ['drop'];

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

// ---------------------------------------------------------------------------------------------
// the healthy call: how it is greeted and how one turn of its caller goes

interface HealthyLine {
  assistant: Record<string, unknown>;
  /** Record the frames' bytes (to read ElevenLabs' fake audio, which carries its text). */
  recordAudio?: boolean;
  /** Before the healthy call is dialed: a fresh script for its vendor connection. */
  reset?(): void;
  /** Resolves once the greeting has been heard whole. */
  greeted(call: SimulatedCall): Promise<void>;
  /** The caller's turn `n`: resolves once the reply (which says "question n") has been heard whole. */
  turn(call: SimulatedCall, n: number): Promise<void>;
}

const pipeline = (blocks: Record<string, unknown>) => ({
  name: 'Healthy line',
  stt_config: { provider: 'sandbox' },
  llm_config: { provider: 'sandbox' },
  tts_config: { provider: 'sandbox', voice_id: 'sandbox' },
  first_message: GREETING,
  ...blocks,
});

/** The caller says "Question n please." and the sandbox STT hears it; the reply is heard by the caller's sandbox ear. */
const sayAndHear = async (call: SimulatedCall, n: number) => {
  await call.say(`Question ${n} please.`);
  await call.hear(`question ${n}`);
  await call.quiet();
};

const heardByEar = async (call: SimulatedCall) => {
  await call.hear('healthy line');
  await call.quiet();
};

const sandboxHealthy: HealthyLine = {
  assistant: sandboxAssistant({ name: 'Healthy line', first_message: GREETING }),
  greeted: heardByEar,
  turn: sayAndHear,
};

/** A realtime response that speaks `text` in sandbox audio (the caller's ear can read it). */
const spoken = (text: string): FakeResponse => ({ audio: synthesizeSandboxSpeech(text), transcript: text });

// ---------------------------------------------------------------------------------------------
// the vendors

interface RigFake {
  env: Record<string, string>;
  healthy: HealthyLine;
  /** WebSocket vendors: connections still open to the fake (none once both calls are over). */
  openSockets?(): number;
  close(): Promise<void>;
}

interface VendorRig {
  name: string;
  /** `ended_reason` is `pipeline-error-<provider>`. */
  provider: string;
  /** The faulty call's assistant: this vendor, the sandbox for the rest. */
  faulty: Record<string, unknown>;
  /** What the faulty caller does for the call to reach the vendor (the model runs after the caller speaks). */
  provoke?(call: SimulatedCall): Promise<void>;
  /** The vendor's fake, serving the healthy call and (with `fault.current`) the faulty one. */
  startFake(fault: { current: MidCallFault }): Promise<RigFake>;
}

const deepgramFault = (fault: MidCallFault): DeepgramFakeConnectionScript => {
  switch (fault) {
    // the adapter reconnects once after a drop: the new stream drops too
    case 'drop':
      return { steps: [{ type: 'disconnect', delayMs: 300 }] };
    case 'garbage':
      return { steps: [{ type: 'raw', data: HTML_PAGE, delayMs: 300 }] };
    case 'hang':
      return { hang: true };
  }
};

const chatFault = (fault: MidCallFault): FakeCompletion => {
  switch (fault) {
    case 'drop':
      return { text: ['Let me ', 'check that ', 'for you, ', 'one moment. ', 'Still here.'], delayMs: 50, disconnectAfter: 3 };
    case 'garbage':
      return { garbage: { contentType: 'text/html; charset=utf-8', body: HTML_PAGE } };
    case 'hang':
      return { hang: true };
  }
};

const elevenLabsFault = (fault: MidCallFault): Partial<FakeElevenLabsScript> => {
  switch (fault) {
    case 'drop':
      return { dropAfterAudioMessages: 1 };
    case 'garbage':
      return { sendInvalidJson: true };
    case 'hang':
      return { handshakeDelayMs: Infinity };
  }
};

const openAiTtsFault = (fault: MidCallFault): Partial<FakeOpenAiTtsScript> => {
  switch (fault) {
    case 'drop':
      return { dropAfterBytes: 9_600, chunkDelayMs: 10 };
    case 'garbage':
      return { garbage: { contentType: 'text/html; charset=utf-8', body: HTML_PAGE } };
    case 'hang':
      return { headersDelayMs: Infinity };
  }
};

const realtimeFault = (fault: MidCallFault): Partial<FakeRealtimeScript> => {
  switch (fault) {
    case 'drop':
      return { responses: [spoken(FAULTY_GREETING)], dropAfterAudioDeltas: 2 };
    case 'garbage':
      return { responses: [spoken(FAULTY_GREETING)], garbageAfterAudioDeltas: 2 };
    case 'hang':
      return { silent: true };
  }
};

const RIGS: VendorRig[] = [
  {
    name: 'Deepgram STT',
    provider: 'deepgram',
    faulty: pipeline({ name: 'Faulty line', first_message: FAULTY_GREETING, stt_config: { provider: 'deepgram', keyterms: [FAULTY_KEYTERM] } }),
    async startFake(fault) {
      const isFaulty = (query: URLSearchParams) => query.getAll('keyterm').includes(FAULTY_KEYTERM);
      const deepgram: FakeDeepgram = await startFakeDeepgram({
        apiKey: DEEPGRAM_KEY,
        idleTimeoutMs: 60_000,
        connectionFor: ({ query }) => (isFaulty(query) ? deepgramFault(fault.current) : undefined),
      });
      return {
        env: { DEEPGRAM_API_BASE: deepgram.url },
        healthy: {
          assistant: pipeline({ stt_config: { provider: 'deepgram' } }),
          greeted: heardByEar,
          // Deepgram "hears" the caller: the fake sends what it would transcribe
          async turn(call, n) {
            const stream = deepgram.connections.filter((c) => !isFaulty(c.query) && !c.closed).at(-1);
            if (!stream) throw new Error('the healthy call has no open Deepgram stream');
            const words = `Question ${n} please`;
            stream.act({ type: 'speech-started' });
            await sleep(100);
            stream.act({ type: 'results', transcript: words, is_final: false });
            await sleep(100);
            stream.act({ type: 'results', transcript: `${words}.`, is_final: true, speech_final: true });
            await sleep(100);
            stream.act({ type: 'utterance-end' });
            await call.hear(`question ${n}`);
            await call.quiet();
          },
        },
        openSockets: () => deepgram.openSockets(),
        close: () => deepgram.close(),
      };
    },
  },
  {
    name: 'OpenAI chat completions LLM',
    provider: 'openai',
    faulty: pipeline({
      name: 'Faulty line',
      first_message: FAULTY_GREETING,
      llm_config: { provider: 'openai', model: 'gpt-4o-mini', messages: [{ role: 'system', content: FAULTY_PROMPT }] },
    }),
    async provoke(call) {
      await call.hear('faulty line');
      await call.quiet();
      await call.say('Hello there, can you help me?');
    },
    async startFake(fault) {
      const openai = await startFakeOpenAiChat({
        apiKey: OPENAI_KEY,
        completionFor: ({ body }) => {
          const messages = (body.messages ?? []) as { role: string; content: string | null }[];
          if (JSON.stringify(messages).includes(FAULTY_PROMPT)) return chatFault(fault.current);
          const asked = [...messages].reverse().find((m) => m.role === 'user')?.content ?? '';
          return { text: ['You asked: ', asked], delayMs: 10 };
        },
      });
      return {
        env: { OPENAI_API_BASE: openai.url },
        healthy: {
          assistant: pipeline({ llm_config: { provider: 'openai', model: 'gpt-4o-mini' } }),
          greeted: heardByEar,
          turn: sayAndHear,
        },
        close: () => openai.close(),
      };
    },
  },
  {
    name: 'ElevenLabs TTS',
    provider: 'elevenlabs',
    faulty: pipeline({ name: 'Faulty line', first_message: FAULTY_GREETING, tts_config: { provider: 'elevenlabs', voice_id: FAULTY_ELEVENLABS_VOICE } }),
    async startFake(fault) {
      const elevenlabs = await startFakeElevenLabs({
        perSocket: ({ voiceId }) => (voiceId === FAULTY_ELEVENLABS_VOICE ? elevenLabsFault(fault.current) : undefined),
      });
      // the fake's audio carries its text: one byte value per 20 ms frame
      const heard = (call: SimulatedCall) => textFromAudio(Buffer.concat(call.outboundAudio)).toLowerCase();
      return {
        env: { ELEVENLABS_API_BASE: elevenlabs.url },
        healthy: {
          assistant: pipeline({ tts_config: { provider: 'elevenlabs', voice_id: 'healthy-voice' } }),
          recordAudio: true,
          async greeted(call) {
            await eventually('the greeting', () => heard(call).includes(GREETING.toLowerCase()), 20_000);
            await call.quiet();
          },
          async turn(call, n) {
            await call.say(`Question ${n} please.`);
            await eventually(`the reply to question ${n}`, () => heard(call).includes(`question ${n}`), 20_000);
            await call.quiet();
          },
        },
        openSockets: () => elevenlabs.openConnections(),
        close: () => elevenlabs.close(),
      };
    },
  },
  {
    name: 'OpenAI TTS',
    provider: 'openai-tts',
    faulty: pipeline({ name: 'Faulty line', first_message: FAULTY_GREETING, tts_config: { provider: 'openai', voice_id: FAULTY_OPENAI_VOICE } }),
    async startFake(fault) {
      const tts = await startFakeOpenAiTts({
        apiKey: OPENAI_KEY,
        samplesPerChar: 480, // 20 ms of tone per character: shorter lines, a quicker test
        perRequest: ({ body }) => (body?.voice === FAULTY_OPENAI_VOICE ? openAiTtsFault(fault.current) : undefined),
      });
      // a tone: the caller cannot read it, so a line is heard once its frames came and stopped
      const frames = async (call: SimulatedCall, before: number, what: string) => {
        await eventually(what, () => call.frameTimes.length >= before + 25, 20_000);
        await call.quiet();
      };
      return {
        env: { OPENAI_API_BASE: tts.url },
        healthy: {
          assistant: pipeline({ tts_config: { provider: 'openai', voice_id: 'alloy' } }),
          greeted: (call) => frames(call, 0, 'the greeting'),
          async turn(call, n) {
            const before = call.frameTimes.length;
            await call.say(`Question ${n} please.`);
            await frames(call, before, `the reply to question ${n}`);
          },
        },
        close: () => tts.close(),
      };
    },
  },
  {
    name: 'OpenAI Realtime',
    provider: 'openai-realtime',
    faulty: { name: 'Faulty line', llm_config: { provider: 'openai-realtime', model: FAULTY_REALTIME_MODEL }, first_message: FAULTY_GREETING },
    async startFake(fault) {
      // the healthy connection's caller turns: a test pushes one, the fake plays it on the next audio
      let turns: FakeTurn[] = [];
      const realtime = await startFakeOpenAiRealtime({
        apiKey: OPENAI_KEY,
        perConnection: ({ model }) =>
          model === FAULTY_REALTIME_MODEL ? realtimeFault(fault.current) : { responses: [spoken(GREETING)], turns },
      });
      return {
        env: { OPENAI_API_BASE: realtime.url },
        healthy: {
          assistant: { name: 'Healthy line', llm_config: { provider: 'openai-realtime', model: 'gpt-realtime' }, first_message: GREETING },
          reset: () => (turns = []),
          greeted: heardByEar,
          async turn(call, n) {
            turns.push({ afterAudioBytes: 0, userTranscript: `Question ${n} please.`, response: spoken(`You asked: question ${n} please.`) });
            await call.hear(`question ${n}`);
            await call.quiet();
          },
        },
        openSockets: () => realtime.openSockets(),
        close: () => realtime.close(),
      };
    },
  },
];

/** `[name, ended_reason, rig]`, for the titles of `describe.each` / `it.each`. */
const RIG_CASES = RIGS.map((rig) => [rig.name, `pipeline-error-${rig.provider}`, rig] as const);
/** Refused over sockets: Deepgram here, OpenAI Realtime in isolation.test.ts; the rest, as the other faults. */
const REFUSED_CASES = RIG_CASES.filter(([name]) => name === 'Deepgram STT');

// ---------------------------------------------------------------------------------------------
// one case: a faulty call beside a healthy one

let processErrors: ProcessErrors;
beforeAll(() => {
  processErrors = watchProcessErrors();
});
afterAll(() => {
  const left = processErrors.dispose();
  // errors after the last check (a call's teardown) fail the file too
  if (left.length > 0) throw new Error(`errors reached the process after the last case:\n${describeProcessErrors(left)}`);
});

/** A number wired to a new assistant (set up before the calls, so that no API work runs beside them). */
const numberFor = async (s: CallingServer, assistant: Record<string, unknown>) => (await s.setUpNumber({ assistant })).number;

async function dial(s: CallingServer, number: string, recordAudio = false) {
  const call = new SimulatedCall({ baseUrl: s.baseUrl, to: number, authToken: AUTH_TOKEN, accountSid: ACCOUNT_SID, recordAudio });
  return { call, callId: callIdOf(await call.dial()) };
}

const messageFor = (s: CallingServer, type: string, callId: string, extra: (m: any) => boolean = () => true) =>
  receivedMessages(s.receiver, type).find((m) => m.call?.id === callId && extra(m));

async function faultBesideHealthy(
  s: CallingServer,
  rig: VendorRig,
  healthy: HealthyLine,
  fake: Pick<RigFake, 'openSockets'> = {},
): Promise<void> {
  processErrors.take(); // earlier errors were the earlier case's
  const expectedReason = `pipeline-error-${rig.provider}`;
  const healthyNumber = await numberFor(s, healthy.assistant);
  const faultyNumber = await numberFor(s, rig.faulty);
  healthy.reset?.();
  const h = await dial(s, healthyNumber, healthy.recordAudio);
  let f: Awaited<ReturnType<typeof dial>> | null = null;
  let healthyFailure: string | null = null;
  let faultyEnded = false;
  let faultyMs = 0;
  let turns = 0;
  try {
    // the faulty call starts while the healthy one speaks its greeting
    await eventually('the healthy call to speak', () => h.call.frameTimes.length > 0, 20_000);
    const started = Date.now();
    f = await dial(s, faultyNumber);
    const faulty = f.call;
    const provoked = rig.provoke?.(faulty).catch(() => undefined); // it may end before
    const ended = faulty.ended(FAULT_BOUND_MS).then(
      () => true,
      () => false,
    );
    let over = false;
    void ended.then(() => {
      over = true;
      faultyMs = Date.now() - started;
    });
    try {
      await healthy.greeted(h.call);
      // the healthy caller talks on while the faulty call fails and ends, and once more after
      do {
        await healthy.turn(h.call, ++turns);
      } while (!over && turns < MAX_TURNS_BESIDE);
      faultyEnded = await ended;
      await healthy.turn(h.call, ++turns);
      await h.call.hangUp();
    } catch (err) {
      healthyFailure = `turn ${turns}: ${(err as Error).message}`;
      faultyEnded = await ended;
    }
    await provoked;
  } finally {
    await h.call.close();
    await f?.call.close();
  }

  // 1. nothing reached the process
  await sleep(200);
  expect.soft(describeProcessErrors(processErrors.take()), 'errors that reached the process').toBe('');

  // 2. the faulty call ended, in bounded time, as a failure of its vendor, with its webhooks
  expect.soft(faultyEnded, `the faulty call's media stream closed by the server within ${FAULT_BOUND_MS} ms`).toBe(true);
  const faultyId = f?.callId ?? '';
  const statusEnded = await eventually('the faulty call\'s status-update "ended"', () =>
    messageFor(s, 'status-update', faultyId, (m) => m.status === 'ended'), 10_000).catch(() => null);
  const report = await eventually('the faulty call\'s end-of-call-report', () => messageFor(s, 'end-of-call-report', faultyId), 5_000).catch(
    () => null,
  );
  const record = (await s.api('GET', `/calls/${faultyId}`)).json?.call;
  expect.soft({ status: record?.status, ended_reason: record?.ended_reason, errors: record?.errors }, 'GET /calls/{faulty}').toMatchObject({
    status: 'ended',
    ended_reason: expectedReason,
  });
  expect.soft(statusEnded?.ended_reason ?? 'no status-update "ended" received', 'status-update "ended"').toBe(expectedReason);
  expect.soft(report?.ended_reason ?? 'no end-of-call-report received', 'end-of-call-report').toBe(expectedReason);
  expect.soft(report?.errors ?? [], "the report's errors name the vendor").toEqual(
    expect.arrayContaining([expect.objectContaining({ message: expect.stringMatching(new RegExp(`^${rig.provider}: `)), provider: rig.provider })]),
  );

  // 3. the healthy call went on, its frames on time, and ended as its caller hung up
  expect.soft(healthyFailure, 'the healthy call').toBeNull();
  const healthyReport = await eventually('the healthy call\'s report', () => messageFor(s, 'end-of-call-report', h.callId), 10_000).catch(
    () => null,
  );
  expect.soft(healthyReport?.ended_reason ?? 'no end-of-call-report received', "the healthy call's report").toBe('customer-ended-call');
  const lines: { role: string; content: string }[] = healthyReport?.messages ?? [];
  const expectedLines = [{ role: 'assistant', content: expect.stringMatching(/healthy line/i) }];
  for (let n = 1; n <= turns; n++) {
    expectedLines.push(
      { role: 'user', content: expect.stringMatching(new RegExp(`question ${n}\\b`, 'i')) },
      { role: 'assistant', content: expect.stringMatching(new RegExp(`question ${n}\\b`, 'i')) },
    );
  }
  expect.soft(lines.map(({ role, content }) => ({ role, content })), "the healthy call's conversation").toEqual(expectedLines);
  const timing = frameTiming(h.call.frameTimes, { maxUnderrunMs: MAX_UNDERRUN_MS, spurtGapMs: SPURT_GAP_MS });
  expect.soft(timing.underruns, `healthy frames late (worst gap between frames ${timing.worstGapMs} ms)`).toEqual([]);
  expect.soft(timing.spurts, 'healthy spurts of audio: the greeting and one reply per turn').toBe(1 + turns);

  // 4. the server: still answering, every call released, no vendor connection left open
  const health = await fetch(`${s.baseUrl}/healthz`).then(
    (r) => r.status,
    (err: Error) => err.message,
  );
  expect.soft(health, 'GET /healthz').toBe(200);
  const released = await eventually('every call released', () => s.runtime.calls.liveCount() === 0, 10_000).catch(() => false);
  expect.soft(released ? 0 : s.runtime.calls.liveCount(), 'live calls left on the server').toBe(0);
  if (fake.openSockets) {
    const closed = await eventually('no connection left to the fake', () => fake.openSockets!() === 0, 10_000).catch(() => false);
    expect.soft(closed ? 0 : fake.openSockets(), 'connections left open to the vendor fake').toBe(0);
  }
  // how long the vendor took to be given up on (shows in the test output)
  console.info(
    `${rig.name} / ${expectedReason}: the faulty call ${faultyEnded ? `ended after ${faultyMs} ms` : 'did not end'}; ` +
      `healthy: ${turns} turns, ${timing.frames} frames, worst gap ${timing.worstGapMs} ms, worst underrun ${timing.worstUnderrunMs} ms`,
  );
}

/** After the faults, the server still takes a call and carries it through. */
async function aNewCallWorks(s: CallingServer): Promise<void> {
  processErrors.take();
  const { call, callId } = await dial(s, await numberFor(s, sandboxHealthy.assistant));
  try {
    await sandboxHealthy.greeted(call);
    await sandboxHealthy.turn(call, 1);
    await call.hangUp();
  } finally {
    await call.close();
  }
  const report = await eventually('the report', () => messageFor(s, 'end-of-call-report', callId), 10_000);
  expect(report.ended_reason).toBe('customer-ended-call');
  expect(describeProcessErrors(processErrors.take())).toBe('');
}

/** A base URL nothing listens at. */
async function closedBaseUrl(): Promise<string> {
  return `http://127.0.0.1:${REFUSED_PORT}`;
}

// ---------------------------------------------------------------------------------------------

describe('a vendor nothing listens at (connection refused), a healthy sandbox call beside', () => {
  let s: CallingServer;
  beforeAll(async () => {
    const nowhere = await closedBaseUrl();
    s = await startCallingServer({
      DEEPGRAM_API_BASE: nowhere,
      DEEPGRAM_API_KEY: DEEPGRAM_KEY,
      OPENAI_API_BASE: nowhere,
      OPENAI_API_KEY: OPENAI_KEY,
      ELEVENLABS_API_BASE: nowhere,
      ELEVENLABS_API_KEY: FAKE_ELEVENLABS_KEY,
    });
  }, 120_000);
  afterAll(async () => {
    await s?.close();
  });

  it.each(REFUSED_CASES)('%s: the faulty call ends %s', (_name, _reason, rig) => faultBesideHealthy(s, rig, sandboxHealthy), 120_000);
  it('the server still takes a call afterwards', () => aNewCallWorks(s), 60_000);
});

describe('a vendor with no API key configured', () => {
  let s: CallingServer;
  beforeAll(async () => {
    const nowhere = await closedBaseUrl();
    s = await startCallingServer({ DEEPGRAM_API_BASE: nowhere, OPENAI_API_BASE: nowhere, ELEVENLABS_API_BASE: nowhere });
  }, 120_000);
  afterAll(async () => {
    await s?.close();
  });

  // a vendor without its key would fail only after pickup: the call is refused before it (fail closed)
  it.each(RIG_CASES)('%s: the call is refused before pickup, its report naming the missing key', async (_name, _reason, rig) => {
    const number = await numberFor(s, rig.faulty);
    const call = new SimulatedCall({ baseUrl: s.baseUrl, to: number, authToken: AUTH_TOKEN, accountSid: ACCOUNT_SID });
    try {
      expect((await call.dial()).kind).toBe('rejected');
    } finally {
      await call.close();
    }
    const report = await eventually('the report', () => receivedMessages(s.receiver, 'end-of-call-report').find((m) => m.phone_number?.number === number), 10_000);
    expect(report.ended_reason).toBe('rejected-at-start');
    expect(report.errors).toEqual([{ code: 'CALL_REJECTED_MISSING_PROVIDER_KEY', message: expect.stringMatching(/^CALL_REJECTED_MISSING_PROVIDER_KEY: .*provider ".*" needs (DEEPGRAM|OPENAI|ELEVENLABS)_API_KEY, which is not set on this server$/) }]);
  }, 60_000);
  it('the server still takes a call afterwards', () => aNewCallWorks(s), 60_000);
});

describe.each(RIG_CASES)('%s misbehaving mid-call (the faulty call ends %s), a healthy call to the same vendor beside', (_name, _reason, rig) => {
  const fault = { current: 'drop' as MidCallFault };
  let fake: RigFake;
  let s: CallingServer;
  beforeAll(async () => {
    fake = await rig.startFake(fault);
    s = await startCallingServer({
      DEEPGRAM_API_KEY: DEEPGRAM_KEY,
      OPENAI_API_KEY: OPENAI_KEY,
      ELEVENLABS_API_KEY: FAKE_ELEVENLABS_KEY,
      ...fake.env,
    });
  }, 120_000);
  afterAll(async () => {
    await s?.close();
    await fake?.close();
  });

  it.each(MID_CALL_FAULTS)('%s', async (f) => {
    fault.current = f;
    await faultBesideHealthy(s, rig, fake.healthy, fake);
  }, 120_000);
  // (a new call afterwards: the two describes above over sockets, test/fast-calls/vendor-faults.test.ts for every vendor)
});
