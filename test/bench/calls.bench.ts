/**
 * Concurrent calls on one server process: `npm run bench:calls -- --calls N --duration S`.
 *
 * This process is the server: the real app and runtime on a listening port (embedded PGlite and
 * in-process sessions by default; DATABASE_URL / REDIS_URL when set), sandbox providers (or the
 * real vendor adapters against their fakes in another process: `--providers vendors`). The
 * simulated callers (src/sim/caller.ts) run in a forked child process, so the server's figures
 * are its own: each caller dials over the Twilio protocol, hears the greeting, then speaks a
 * line, waits for the whole reply, pauses a little, and speaks again, through a workflow of three
 * conversation nodes (transitions and plain answers alternate). The child also answers the
 * webhooks and the Twilio REST API.
 *
 * Once every call is up, a measurement window of S seconds: per-turn latency (src/calls/latency.ts:
 * service share = end of turn → first media frame, minus the time waiting on the model and the TTS)
 * p50/p95/p99, event-loop delay p99 (perf_hooks), CPU, RSS and heap per live call; over the whole
 * run, frames sent and late (the pacer's figures). `--sweep 50,100,200` runs several N and reports
 * the largest N with service p99 < 10 ms and no late frame.
 *
 * The bare baseline (test/bench/echo-server.ts), at each N before the service: the same callers'
 * process opens N media streams to a minimal Twilio media-stream echo server in this process, which
 * only parses every message and returns every audio frame. Measured the same way (CPU, event-loop
 * lag, memory per stream) plus the echo's round trip seen by the callers; the service's capacity is
 * printed as a ratio of it: calls one core holds (100% ÷ CPU per call), service ÷ baseline.
 *
 * Options: --calls N (100)  --duration S (30)  --ramp S (calls dialled over S seconds, default N/25,
 * at least 2)  --sweep [list]  --llm-ms MS, --tts-ms MS (added provider latency, default 0)
 * --baseline-duration S (the baseline's window, default min(S, 10))  --no-baseline
 * --repeat K: K steps at the same N, each the baseline then the service, back to back; the capacity
 * line gives each pair's ratio and the median (the machine's speed moves from run to run)
 * --json FILE (results as JSON)  --chart FILE (SVG of latency and CPU against concurrent calls)
 * --profile FILE (a V8 CPU profile of the server over the last step's window, for Chrome DevTools)
 * --heap-profile FILE (a V8 sampling heap profile of the same window, freed objects included: where
 * the server allocates, for the Memory panel of Chrome DevTools; summed by `scripts/heap-sites.mjs`)
 * --replot FILE --chart SVG (draw the chart again from a --json file, without running anything).
 * --web: the callers make web calls (POST /calls/web, 16 kHz PCM through AudioBridge) instead of
 * dialling over Twilio media streams; the bare baseline stays the Twilio echo.
 * --sip: the callers are SIP phones (src/sim/sip-caller.ts) calling the server's SIP endpoint over
 * UDP (started on a free port; the account takes INVITEs from 127.0.0.1, the number is a `sip` one):
 * a hand-built INVITE, then RTP PCMU, a 20 ms packet every 20 ms both ways, and a BYE; one signalling
 * socket per callers' process, an RTP/RTCP pair per call. The bare baseline stays the Twilio echo.
 * --background CLIP: the assistant plays background audio (`office`, `cafe`, DECISIONS 13) at
 * volume 0.5: every call sends 50 frames a second from pickup to hang-up, speech mixed over the
 * bed; the callers then tell a reply's start and end by the voice their ear hears, not by audio.
 * --record: every call is recorded (the assistant asks for consent), into a temporary DATA_DIR.
 * --vad webrtc|silero: the caller's voice-activity detector (`speech_config.turn_taking.vad`;
 * unset: the assistant's default).
 * --listen: one listener on every call (POST /calls/{id}/listen, then its WebSocket, opened by the
 * callers' process once the greeting is over): the server mixes and sends each call's stereo
 * frames, 50 a second, and its events (docs/listen.md); the listeners count what they got.
 * --generators K: the simulated callers run in K processes, the calls split between them (one
 * process decodes about 500 calls' audio before it falls behind: 1,000 calls want 2 or more).
 * --providers vendors: the assistant runs the real Deepgram (STT), OpenAI (chat completions) and
 * ElevenLabs (TTS) adapters, against their wire fakes in another process (test/bench/vendor-fakes.ts:
 * they transcribe, answer and speak as the sandbox does), with dummy keys: every call opens a
 * Deepgram stream, a model stream per turn and a TTS socket per reply, as a deployment does. Then
 * --stt-ms, --llm-ms, --tts-ms are the fakes' latency (each Deepgram message, the completion's
 * first byte, each generation's first audio). `--providers sandbox` (in process) is the default.
 * --stt-chunk-ms MS (vendors): the Deepgram adapter's `audioChunkMs` (its default 50; 0 sends every
 * 20 ms frame as its own message, as the adapter did before).
 * --tts elevenlabs|cartesia|deepgram|openai-compatible (vendors): the voice the assistant speaks
 * with, each adapter at its wire fake (ElevenLabs by default; `--tts-ms` is ElevenLabs' only).
 */
import { fork, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import { createHistogram, monitorEventLoopDelay, performance, PerformanceObserver, type RecordableHistogram } from 'node:perf_hooks';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import v8 from 'node:v8';
import { Session } from 'node:inspector/promises';
import vm from 'node:vm';
import { buildApp } from '../../src/app.js';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/logger.js';
import { openDb } from '../../src/store/db.js';
import { createStore } from '../../src/store/index.js';
import { createRuntime } from '../../src/runtime.js';
import { createProviders, providerSettings } from '../../src/providers/index.js';
import { createDeepgramStt } from '../../src/providers/stt/deepgram.js';
import { createDeepgramTts } from '../../src/providers/tts/deepgram.js';
import type { Providers } from '../../src/providers/types.js';
import { percentiles, TurnLatencyRecorder, type Percentiles } from '../../src/calls/latency-recorder.js';
import { SimulatedCall } from '../../src/sim/caller.js';
import { WebCaller } from '../../src/sim/web-caller.js';
import { SipCaller } from '../../src/sim/sip-caller.js';
import { WebSocket } from 'ws';
import { startEchoServer, type EchoServer } from './echo-server.js';
import { renderChart } from './chart.js';
import { freePort } from '../../src/net.js';
import { startTracing, stopTracing } from '../../src/observability/tracing.js';
import { startOtlpSink } from './otlp-sink.js';
import { CARTESIA_KEY, DEEPGRAM_KEY, ELEVENLABS_KEY, OPENAI_KEY, type FromVendorFakes, type ToVendorFakes, type VendorFakesAddresses, type VendorFakesCounts } from './vendor-fakes.js';

const TARGET_SERVICE_P99_MS = 10;
const AUTH_TOKEN = 'bench-auth-token-0123456789';
const ACCOUNT_SID = `AC${'b'.repeat(32)}`;

// ---------------------------------------------------------------------------------------------
// options

interface Options {
  calls: number;
  durationS: number;
  rampS: number | null;
  sweep: number[] | null;
  llmMs: number;
  ttsMs: number;
  json: string | null;
  chart: string | null;
  baseline: boolean;
  baselineDurationS: number | null;
  profile: string | null;
  heapProfile: string | null;
  replot: string | null;
  /** Web calls (the browser's transport, 16 kHz PCM through AudioBridge) instead of Twilio media streams. */
  web: boolean;
  /** SIP calls (`--sip`: SIP over UDP, RTP PCMU) instead of Twilio media streams; the server's SIP port once it is up. */
  sip?: { port: number };
  /** A background clip every call plays (`--background office`), or null. */
  background: string | null;
  /** Every call is recorded (`--record`: the assistant asks for recording consent). */
  record: boolean;
  /** One listener on every call (`--listen`: POST /calls/{id}/listen and its socket). */
  listen: boolean;
  /** `--repeat K`: K steps at the same N, each its baseline then the service; medians reported. */
  repeat: number;
  /** Caller processes the calls are split between (`--generators K`): one holds about 500 calls. */
  generators: number;
  /** `sandbox` (in process) or `vendors`: the real adapters against wire fakes in another process. */
  providers: 'sandbox' | 'vendors';
  /** With vendors: the Deepgram fake's delay on each message. */
  sttMs: number;
  /** With vendors: the Deepgram adapter's `audioChunkMs` (null: its default). */
  sttChunkMs: number | null;
  /** `--vad`: the voice-activity detector the assistant asks for (null: its default). */
  vad: string | null;
  /** `--tracing`: OpenTelemetry on, exporting to an OTLP receiver in another process (docs/observability.md). */
  tracing: boolean;
  /** With vendors: the voice (`--tts`), each at its fake. */
  tts: BenchTts;
}

const BENCH_TTS = ['elevenlabs', 'cartesia', 'deepgram', 'openai-compatible'] as const;
type BenchTts = (typeof BENCH_TTS)[number];

function parseOptions(argv: string[]): Options {
  const o: Options = { calls: 100, durationS: 30, rampS: null, sweep: null, llmMs: 0, ttsMs: 0, json: null, chart: null, baseline: true, baselineDurationS: null, profile: null, heapProfile: null, replot: null, web: false, background: null, record: false, listen: false, generators: 1, providers: 'sandbox', sttMs: 0, sttChunkMs: null, repeat: 1, vad: null, tracing: false, tts: 'elevenlabs' };
  let ttsGiven = false;
  for (let i = 0; i < argv.length; i++) {
    const [flag, inline] = argv[i]!.split('=', 2) as [string, string | undefined];
    const value = () => inline ?? argv[++i] ?? '';
    const num = () => {
      const n = Number(value());
      if (!Number.isFinite(n) || n < 0) throw new Error(`${flag}: expected a number`);
      return n;
    };
    switch (flag) {
      case '--calls': o.calls = Math.max(1, Math.floor(num())); break;
      case '--duration': o.durationS = num(); break;
      case '--ramp': o.rampS = num(); break;
      case '--llm-ms': o.llmMs = num(); break;
      case '--stt-ms': o.sttMs = num(); break;
      case '--stt-chunk-ms': o.sttChunkMs = num(); break;
      case '--providers': {
        const v = value();
        if (v !== 'sandbox' && v !== 'vendors') throw new Error(`--providers: sandbox or vendors, not "${v}"`);
        o.providers = v;
        break;
      }
      case '--tts-ms': o.ttsMs = num(); break;
      case '--tts': {
        const v = value();
        if (!(BENCH_TTS as readonly string[]).includes(v)) throw new Error(`--tts: one of ${BENCH_TTS.join(', ')}, not "${v}"`);
        o.tts = v as BenchTts;
        ttsGiven = true;
        break;
      }
      case '--json': o.json = value(); break;
      case '--chart': o.chart = value(); break;
      case '--no-baseline': o.baseline = false; break;
      case '--web': o.web = true; break;
      case '--sip': o.sip = { port: 0 }; break;
      case '--background': o.background = value(); break;
      case '--record': o.record = true; break;
      case '--vad': o.vad = value(); break;
      case '--listen': o.listen = true; break;
      case '--tracing': o.tracing = true; break;
      case '--generators': o.generators = Math.max(1, Math.floor(num())); break;
      case '--profile': o.profile = value(); break;
      case '--heap-profile': o.heapProfile = value(); break;
      case '--replot': o.replot = value(); break;
      case '--baseline-duration': o.baselineDurationS = num(); break;
      case '--repeat': o.repeat = Math.max(1, Math.floor(num())); break;
      case '--sweep': {
        const next = inline ?? argv[i + 1];
        if (next && /^\d+(,\d+)*$/.test(next)) {
          if (!inline) i++;
          o.sweep = next.split(',').map(Number);
        } else {
          o.sweep = [50, 100, 150, 200, 250, 300, 400];
        }
        break;
      }
      case '--role': i++; break;
      default: throw new Error(`unknown option ${flag} (see the comment at the top of test/bench/calls.bench.ts)`);
    }
  }
  if (o.sttMs > 0 && o.providers !== 'vendors') throw new Error('--stt-ms needs --providers vendors');
  if (o.sttChunkMs !== null && o.providers !== 'vendors') throw new Error('--stt-chunk-ms needs --providers vendors');
  if (ttsGiven && o.providers !== 'vendors') throw new Error('--tts needs --providers vendors');
  if (o.providers === 'vendors' && o.ttsMs > 0 && o.tts !== 'elevenlabs') throw new Error('--tts-ms: the ElevenLabs fake\'s latency only');
  if (o.sip && o.web) throw new Error('--sip and --web: one kind of call at a time');
  if (o.sip && o.listen) throw new Error('--listen: Twilio or web calls (a SIP phone does not know the call\'s id)');
  if (o.repeat > 1 && o.sweep) throw new Error('--repeat and --sweep: one or the other');
  return o;
}

// ---------------------------------------------------------------------------------------------
// the workload

/** Three conversation nodes, each reachable from the others by what the caller says. */
export const loopDefinition = {
  version: 1,
  entry_node: 'greeting',
  global_prompt: 'You are the front desk of Acme Dental. Keep answers short.',
  nodes: [
    { id: 'greeting', type: 'conversation', first_line: 'Hello, this is Acme Dental.', instructions: 'Find out what the caller needs.' },
    { id: 'hours', type: 'conversation', first_line: 'We are open from nine to five.', instructions: 'Answer questions about opening hours.' },
    { id: 'booking', type: 'conversation', first_line: 'Let us book your appointment.', instructions: 'Book an appointment.' },
  ],
  edges: [
    { from: 'greeting', to: 'hours', description: 'the caller asks about opening hours', message: 'Sure.' },
    { from: 'greeting', to: 'booking', description: 'the caller wants to book an appointment' },
    { from: 'hours', to: 'booking', description: 'the caller wants to book an appointment' },
    { from: 'hours', to: 'greeting', description: 'the caller wants the main menu' },
    { from: 'booking', to: 'hours', description: 'the caller asks about opening hours' },
    { from: 'booking', to: 'greeting', description: 'the caller wants the main menu' },
  ],
};

/** Transitions and plain answers ("Okay, I understand: …") alternate. */
const LINES = [
  'What are your opening hours?',
  'Can you repeat that please?',
  'I would like to book an appointment.',
  'Is that right?',
  'Take me back to the main menu.',
];

/** Sandbox providers with added latency: the model's first event and the TTS's first audio wait. */
function withLatency(providers: Providers, llmMs: number, ttsMs: number): Providers {
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
  const llm = providers.llm.get('sandbox')!;
  const tts = providers.tts.get('sandbox')!;
  if (llmMs > 0) {
    providers.llm.set('sandbox', {
      id: 'sandbox',
      stream: (request) =>
        (async function* () {
          await sleep(llmMs);
          yield* llm.stream(request);
        })(),
    });
  }
  if (ttsMs > 0) {
    providers.tts.set('sandbox', {
      id: 'sandbox',
      open: async (config, events, signal) => {
        await sleep(ttsMs);
        return tts.open(config, events, signal);
      },
    });
  }
  return providers;
}

// ---------------------------------------------------------------------------------------------
// messages between the server (this process) and the callers (the child)

type ToCallers =
  | { type: 'run'; baseUrl: string; number: string; calls: number; rampMs: number; web?: { apiKey: string; assistantId: string; workflowId: string }; background?: boolean; sip?: { host: string; port: number }; listen?: { apiKey: string } }
  | { type: 'stop' }
  | { type: 'echo'; url: string; calls: number; rampMs: number }
  | { type: 'echo-window' }
  | { type: 'echo-stop' };
type FromCallers =
  | { type: 'ready'; url: string }
  | { type: 'echo-up'; connected: number; failed: number }
  | { type: 'echo-done'; sent: number; echoed: number; lost: number; late: number; rtt: Percentiles; eventLoopP99Ms: number; errors: string[] }
  | { type: 'progress'; connected: number; failed: number; turns: number }
  | { type: 'all-dialled'; connected: number; failed: number }
  | { type: 'done'; connected: number; failed: number; turns: number; understood: number; errors: string[]; eventLoopP99Ms: number; requests: number; rtp?: PhoneRtp; listen?: ListenTally };

/** With --listen: what the listeners got, summed over the calls. */
interface ListenTally {
  listeners: number;
  /** Binary frames received (640 bytes each: 20 ms of stereo). */
  frames: number;
  /** Frames the listeners' time on their sockets called for (open to close, 20 ms each). */
  expectedFrames: number;
  /** JSON events received. */
  events: number;
  /** Sockets closed by the server with 1000 after `ended`; any other end (a drop, an error) is counted apart. */
  closedAtEnd: number;
  otherEnds: number;
  /** Frames that were not 640 bytes. */
  badFrames: number;
}

/** With --sip: the server's RTP as the phones received it (RtpSession's figures, summed over the calls). */
interface PhoneRtp {
  calls: number;
  sent: number;
  received: number;
  lost: number;
  late: number;
  /** Each call's RFC 3550 interarrival jitter at its end: the mean over the calls and the largest. */
  jitterMeanMs: number;
  jitterMaxMs: number;
}

const ELD_RESOLUTION_MS = 10;
/** perf_hooks records the whole timer interval: the lag is what exceeds the resolution. */
function eventLoopLag(h: ReturnType<typeof monitorEventLoopDelay>): { p99: number; max: number } {
  const lag = (ns: number) => Math.max(0, ns / 1e6 - ELD_RESOLUTION_MS);
  return { p99: lag(h.percentile(99)), max: lag(h.max) };
}

// ---------------------------------------------------------------------------------------------
// the callers (child process)

async function callersMain(): Promise<void> {
  const send = (m: FromCallers) => process.send!(m);
  let requests = 0;
  const server = createServer((req, res) => {
    requests++;
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{}');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const eld = monitorEventLoopDelay({ resolution: ELD_RESOLUTION_MS });
  eld.enable();
  let stopping = false;
  let connected = 0;
  let failed = 0;
  let turns = 0;
  let understood = 0;
  let rtp: PhoneRtp | null = null;
  let listenTally: ListenTally | null = null;
  const errors: string[] = [];
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
  const until = async (test: () => boolean, timeoutMs: number, what: string) => {
    const deadline = Date.now() + timeoutMs;
    while (!test()) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await sleep(20);
    }
  };

  const runCaller = async (i: number, run: Extract<ToCallers, { type: 'run' }>) => {
    const web = run.web;
    const call = web
      ? new WebCaller({ baseUrl: run.baseUrl, apiKey: web.apiKey })
      : run.sip
        ? new SipCaller({ host: run.sip.host, port: run.sip.port, to: run.number, from: `+1500555${String(i).padStart(4, '0')}` })
        : new SimulatedCall({ baseUrl: run.baseUrl, to: run.number, authToken: AUTH_TOKEN, accountSid: ACCOUNT_SID });
    let up = false;
    let callId = '';
    let listener: BenchListener | null = null;
    try {
      if (call instanceof WebCaller) callId = await call.start({ assistant_id: web!.assistantId, workflow_id: web!.workflowId });
      else if (call instanceof SipCaller) {
        const outcome = await call.dial();
        if (outcome.kind !== 'connected') throw new Error(`refused: ${outcome.status} ${outcome.reason}`);
      } else {
        const outcome = await call.dial();
        if (outcome.kind !== 'connected') throw new Error(`rejected: ${outcome.twiml}`);
        callId = outcome.callId;
      }
      // the greeting: audio arrives (under a background: the voice is heard), then the line goes quiet
      const voiceSince = (t: number) => () => call.lastVoiceAt > t || call.closed;
      await until(run.background ? voiceSince(0) : () => call.frameTimes.length > 0 || call.closed, 30_000, 'the greeting');
      await call.quiet(400, 30_000, run.background ? 'voice' : 'audio');
      if (call.closed) throw new Error('the call ended');
      up = true;
      connected++;
      if (run.listen) listener = await openListener(run.baseUrl, run.listen.apiKey, callId);
      let line = i;
      while (!stopping) {
        const frames = call.frameTimes.length;
        const heard = call.heard.length;
        await call.say(LINES[line++ % LINES.length]!);
        const saidAt = Date.now();
        await until(run.background ? voiceSince(saidAt) : () => call.frameTimes.length > frames || call.closed, 30_000, 'a reply');
        await call.quiet(400, 30_000, run.background ? 'voice' : 'audio');
        if (call.closed) throw new Error('the call ended');
        turns++;
        // the caller's ear (sandbox STT) could read the reply: the audio arrived whole and in time
        if (call.heard.length > heard) understood++;
        await sleep(Math.random() * 500);
      }
      // a last turn, then hang up as its reply starts
      const frames = call.frameTimes.length;
      await call.say(LINES[line % LINES.length]!);
      const saidAt = Date.now();
      await until(run.background ? voiceSince(saidAt) : () => call.frameTimes.length > frames || call.closed, 30_000, 'the last reply');
      await call.hangUp();
    } catch (err) {
      failed++;
      if (up) connected--;
      if (errors.length < 10) errors.push(`call ${i}: ${(err as Error).message}`);
    } finally {
      await call.close().catch(() => undefined);
      if (listener) {
        const l = listener;
        await Promise.race([l.closed, sleep(5_000)]);
        if (l.closedAt === null) l.ws.terminate();
        listenTally ??= { listeners: 0, frames: 0, expectedFrames: 0, events: 0, closedAtEnd: 0, otherEnds: 0, badFrames: 0 };
        listenTally.listeners++;
        listenTally.frames += l.frames;
        listenTally.expectedFrames += ((l.closedAt ?? performance.now()) - l.openedAt) / 20;
        listenTally.events += l.events;
        listenTally.badFrames += l.badFrames;
        if (l.code === 1000) listenTally.closedAtEnd++;
        else listenTally.otherEnds++;
      }
      const s = call instanceof SipCaller ? call.rtpStats : null;
      if (s) {
        rtp ??= { calls: 0, sent: 0, received: 0, lost: 0, late: 0, jitterMeanMs: 0, jitterMaxMs: 0 };
        rtp.jitterMeanMs = (rtp.jitterMeanMs * rtp.calls + s.jitterMs) / (rtp.calls + 1);
        rtp.jitterMaxMs = Math.max(rtp.jitterMaxMs, s.jitterMs);
        rtp.calls++;
        rtp.sent += s.sent;
        rtp.received += s.received;
        rtp.lost += s.lost;
        rtp.late += s.late;
      }
    }
  };

  const echo = echoCallers(send, until, sleep);
  const callers: Promise<void>[] = [];
  const progress = setInterval(() => send({ type: 'progress', connected, failed, turns }), 1000);
  process.on('message', (m: ToCallers) => {
    if (m.type === 'echo' || m.type === 'echo-window' || m.type === 'echo-stop') {
      echo(m);
      return;
    }
    if (m.type === 'stop') {
      stopping = true;
      void Promise.all(callers).then(async () => {
        clearInterval(progress);
        await new Promise((r) => server.close(r));
        send({ type: 'done', connected, failed, turns, understood, errors, eventLoopP99Ms: eventLoopLag(eld).p99, requests, ...(rtp ? { rtp } : {}), ...(listenTally ? { listen: listenTally } : {}) });
        process.disconnect();
      });
      return;
    }
    const dialled: Promise<void>[] = [];
    for (let i = 0; i < m.calls; i++) {
      dialled.push(
        sleep((m.rampMs * i) / m.calls).then(() => {
          if (!stopping) callers.push(runCaller(i, m));
        }),
      );
    }
    void (async () => {
      await Promise.all(dialled);
      await until(() => connected + failed >= m.calls || stopping, 120_000, 'every call to connect').catch(() => undefined);
      send({ type: 'all-dialled', connected, failed });
    })();
  });
  send({ type: 'ready', url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` });
}

/** A listener of one call (--listen), counting what it gets. */
interface BenchListener {
  ws: WebSocket;
  frames: number;
  badFrames: number;
  events: number;
  openedAt: number;
  closedAt: number | null;
  code: number | null;
  closed: Promise<void>;
}

/** POST /calls/{id}/listen, then its socket: frames and events are counted, not kept. */
async function openListener(baseUrl: string, apiKey: string, callId: string): Promise<BenchListener> {
  const res = await fetch(`${baseUrl}/calls/${callId}/listen`, { method: 'POST', headers: { authorization: `Bearer ${apiKey}` } });
  const body = (await res.json()) as { url?: string };
  if (res.status !== 201 || !body.url) throw new Error(`POST /calls/${callId}/listen: ${res.status} ${JSON.stringify(body)}`);
  const ws = new WebSocket(body.url);
  const l: BenchListener = { ws, frames: 0, badFrames: 0, events: 0, openedAt: 0, closedAt: null, code: null, closed: Promise.resolve() };
  ws.on('message', (data, isBinary) => {
    if (!isBinary) l.events++;
    else if ((data as Buffer).length === 640) l.frames++;
    else l.badFrames++;
  });
  l.closed = new Promise((resolve) =>
    ws.on('close', (code) => {
      l.closedAt = performance.now();
      l.code = code;
      resolve();
    }),
  );
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  l.openedAt = performance.now();
  return l;
}

/**
 * The baseline's callers: each opens a media stream to the echo server and sends a 20 ms frame
 * every 20 ms (what a Twilio caller sends), counting the frames that come back and their round trip.
 */
function echoCallers(
  send: (m: FromCallers) => void,
  until: (test: () => boolean, timeoutMs: number, what: string) => Promise<void>,
  sleep: (ms: number) => Promise<unknown>,
): (m: Extract<ToCallers, { type: 'echo' | 'echo-window' | 'echo-stop' }>) => void {
  const FRAME_BYTES = 160;
  const streams: Array<{ ws: WebSocket; timer: NodeJS.Timeout | null; sentAt: Array<[at: number, counted: boolean]> }> = [];
  const eld = monitorEventLoopDelay({ resolution: ELD_RESOLUTION_MS });
  let rtt: RecordableHistogram = createHistogram();
  let measuring = false;
  let connected = 0;
  let failed = 0;
  let sent = 0;
  let echoed = 0;
  let late = 0;
  const errors: string[] = [];
  const open = (url: string, i: number) => {
    const streamSid = `MZ${randomBytes(16).toString('hex')}`;
    const ws = new WebSocket(url);
    const s: (typeof streams)[number] = { ws, timer: null, sentAt: [] };
    streams.push(s);
    ws.on('open', () => {
      connected++;
      const opened = performance.now();
      ws.send(JSON.stringify({ event: 'connected', protocol: 'Call', version: '1.0.0' }));
      ws.send(
        JSON.stringify({
          event: 'start',
          sequenceNumber: '1',
          streamSid,
          start: { streamSid, callSid: `CA${randomBytes(16).toString('hex')}`, tracks: ['inbound'], mediaFormat: { encoding: 'audio/x-mulaw', sampleRate: 8000, channels: 1 } },
        }),
      );
      s.timer = setInterval(() => {
        if (ws.readyState !== WebSocket.OPEN) return;
        const frame = Buffer.alloc(FRAME_BYTES, 0xff);
        s.sentAt.push([performance.now(), measuring]);
        if (measuring) sent++;
        const timestamp = String(Math.round(performance.now() - opened));
        ws.send(JSON.stringify({ event: 'media', streamSid, media: { track: 'inbound', timestamp, payload: frame.toString('base64') } }));
      }, 20);
    });
    ws.on('message', (data) => {
      const m = JSON.parse(data.toString()) as { event?: string; media?: { payload?: string } };
      if (m.event !== 'media' || !m.media?.payload) return;
      const [at, counted] = s.sentAt.shift() ?? [0, false];
      if (!counted || !measuring) return;
      const ms = performance.now() - at;
      echoed++;
      rtt.record(Math.max(1, Math.round(ms * 1000)));
      if (ms > 20) late++;
    });
    ws.on('error', (err) => {
      failed++;
      if (errors.length < 10) errors.push(`stream ${i}: ${err.message}`);
    });
  };
  const pct = (h: RecordableHistogram): Percentiles => {
    const q = (p: number) => (h.count ? h.percentile(p) / 1000 : 0);
    return { count: h.count, p50: q(50), p95: q(95), p99: q(99), max: h.count ? h.max / 1000 : 0, mean: h.count ? h.mean / 1000 : 0 };
  };
  return (m) => {
    if (m.type === 'echo') {
      void (async () => {
        for (let i = 0; i < m.calls; i++) {
          open(m.url, i);
          await sleep(m.rampMs / m.calls);
        }
        await until(() => connected + failed >= m.calls, 60_000, 'every echo stream to open').catch(() => undefined);
        send({ type: 'echo-up', connected, failed });
      })();
    } else if (m.type === 'echo-window') {
      rtt = createHistogram();
      sent = echoed = late = 0;
      eld.enable();
      eld.reset();
      measuring = true;
    } else {
      void (async () => {
        for (const s of streams) if (s.timer) clearInterval(s.timer);
        // frames still on their way back count as echoed if they arrive within half a second
        await sleep(500);
        measuring = false;
        eld.disable();
        const lost = Math.max(0, sent - echoed);
        for (const s of streams) s.ws.close();
        await sleep(200);
        for (const s of streams) s.ws.terminate();
        streams.length = 0;
        send({ type: 'echo-done', sent, echoed, lost, late, rtt: pct(rtt), eventLoopP99Ms: eventLoopLag(eld).p99, errors: errors.splice(0) });
        connected = failed = 0;
      })();
    }
  };
}

// ---------------------------------------------------------------------------------------------
// the server (this process)

interface StepResult {
  calls: number;
  connected: number;
  failed: number;
  windowS: number;
  rampS: number;
  turns: number;
  latency: Record<'totalMs' | 'serviceMs' | 'providerWaitMs' | 'modelWaitMs' | 'ttsWaitMs' | 'modelFirstTokenMs', Percentiles>;
  eventLoopP99Ms: number;
  eventLoopMaxMs: number;
  cpuPercent: number;
  cpuPercentPerCall: number;
  /** The whole process's RSS with the calls up, divided by the calls: an upper bound per call. */
  rssMbPerCallAtMost: number;
  /** JS heap + external + array buffers with the calls up minus before the step, per call. */
  jsMbPerCall: number;
  rssMb: { before: number; live: number; after: number };
  /** Outbound frames over the whole step (ramp included), and within the window. */
  frames: { sent: number; late: number; maxLateMs: number };
  windowFrames: { sent: number; late: number; maxLateMs: number };
  /** Garbage-collection pauses in the window. */
  gc: { count: number; totalMs: number; maxMs: number };
  callersEventLoopP99Ms: number;
  /** Turns the callers completed over the whole step, and how many replies their ear could read. */
  callerTurns: number;
  understood: number;
  /** 1-minute load average of the machine at the end of the window (other work on the cores). */
  loadAverage: number;
  errors: string[];
  pass: boolean;
  /** The bare baseline at the same N (absent with --no-baseline). */
  baseline?: BaselineResult;
  /** With `--providers vendors`: the fakes' process over the window (it shares the machine's cores). */
  vendorFakes?: { cpuPercent: number; counts: VendorFakesCounts };
  /** With --sip: the server's RTP as the phones received it, over the whole step. */
  phoneRtp?: PhoneRtp;
  /** With --listen: what the listeners got, over the whole step. */
  listen?: ListenTally;
  /** With --sip: the phones' RTP as the server received it (its metrics, counted as each call's dialog was released). */
  serverRtp?: ServerRtp;
}

interface BaselineResult {
  streams: number;
  connected: number;
  failed: number;
  windowS: number;
  /**
   * Frames the callers sent in the window, got back, and never got back; frames the server handled
   * more than 20 ms behind (`late`, its own view, as the service's pacer counts), and frames
   * whose round trip the callers saw take more than 20 ms (`slowRoundTrip`, both processes' lag).
   */
  frames: { sent: number; echoed: number; lost: number; late: number; maxLateMs: number; slowRoundTrip: number };
  /** Send → echo received, in the callers' process (its own event-loop lag included). */
  rttMs: Percentiles;
  eventLoopP99Ms: number;
  eventLoopMaxMs: number;
  cpuPercent: number;
  cpuPercentPerCall: number;
  jsMbPerCall: number;
  callersEventLoopP99Ms: number;
  errors: string[];
  /** Event-loop lag p99 < 10 ms, every frame back, none handled late, no failed stream. */
  pass: boolean;
}

const ms = (v: number) => (v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2));
const gc = (() => {
  v8.setFlagsFromString('--expose-gc');
  return vm.runInNewContext('gc') as () => void;
})();

async function serverMain(o: Options): Promise<void> {
  const steps = o.sweep ?? Array.from({ length: o.repeat }, () => o.calls);
  const logLevel = process.env.LOG_LEVEL ?? 'silent';
  const dbName = process.env.DATABASE_URL ? `sb_bench_${Date.now().toString(36)}` : null;
  let dbUrl: string | undefined;
  if (process.env.DATABASE_URL && dbName) {
    const pg = (await import('pg')).default;
    const admin = new pg.Client({ connectionString: process.env.DATABASE_URL });
    await admin.connect();
    await admin.query(`CREATE DATABASE ${dbName}`);
    await admin.end();
    const u = new URL(process.env.DATABASE_URL);
    u.pathname = `/${dbName}`;
    dbUrl = u.toString();
  }
  const db = await openDb(dbUrl ? { databaseUrl: dbUrl } : { dataDir: null });
  const store = createStore(db);

  // with vendors, their fakes in a process of their own
  const vendors = o.providers === 'vendors' ? await startVendorFakesProcess(o) : null;
  // the callers' process first: it answers webhooks and the Twilio REST API
  let callers = startCallers(o.generators);
  let hooksUrl = (await callers.ready).url;
  const port = await freePort();
  const dataDir = mkdtempSync(join(os.tmpdir(), 'sb-bench-calls-'));
  process.on('exit', () => rmSync(dataDir, { recursive: true, force: true }));
  const config = loadConfig({
    LOG_LEVEL: logLevel,
    WEBHOOK_ALLOW_PRIVATE: 'true',
    RATE_LIMIT_PER_MINUTE: '0',
    PORT: String(port),
    HOST: '127.0.0.1',
    TWILIO_API_BASE: hooksUrl,
    ...(vendors
      ? {
          DEEPGRAM_API_BASE: vendors.urls.deepgram,
          DEEPGRAM_API_KEY: DEEPGRAM_KEY,
          OPENAI_API_BASE: vendors.urls.openai,
          OPENAI_API_KEY: OPENAI_KEY,
          ELEVENLABS_API_BASE: vendors.urls.elevenlabs,
          ELEVENLABS_API_KEY: ELEVENLABS_KEY,
          CARTESIA_API_BASE: vendors.urls.cartesia,
          CARTESIA_API_KEY: CARTESIA_KEY,
        }
      : {}),
    // recordings (--record) go to a folder of the run's own, removed at the end
    DATA_DIR: dataDir,
    ...(process.env.REDIS_URL ? { REDIS_URL: process.env.REDIS_URL } : {}),
  });
  const logger = createLogger(config.LOG_LEVEL);
  // --tracing: the server's spans go to a receiver in a process of its own, as to a collector
  const otlp = o.tracing ? await startOtlpSink() : null;
  if (otlp) await startTracing({ ...process.env, OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf' });
  const recorder = new TurnLatencyRecorder();
  let recording = false;
  // with vendors the latency is the fakes' (their process was told at its start)
  const providers = vendors ? createProviders(providerSettings(config)) : withLatency(createProviders(providerSettings(config)), o.llmMs, o.ttsMs);
  if (vendors && o.sttChunkMs !== null) providers.stt.set('deepgram', createDeepgramStt(providerSettings(config), { audioChunkMs: o.sttChunkMs }));
  // Aura's fake is not the listen fake at DEEPGRAM_API_BASE: the voice is pointed at its own
  if (vendors) providers.tts.set('deepgram', createDeepgramTts({ deepgram: { baseUrl: vendors.urls.deepgramSpeak, apiKey: DEEPGRAM_KEY } }));
  const runtime = await createRuntime({
    config,
    store,
    logger,
    providers,
    webhookQueueName: `bench-calls-${Date.now()}`,
    onTurnLatency: (t) => (recording ? recorder.record(t) : recorder.noteOutbound(t)),
    // --sip: the SIP endpoint on a free port of HOST (127.0.0.1), RTP in RTP_PORT_MIN–MAX
    ...(o.sip ? { sip: { port: 0 } } : {}),
  });
  const app = await buildApp({ config, store, logger, runtime });
  await app.listen({ port, host: '127.0.0.1' });
  const baseUrl = `http://127.0.0.1:${port}`;
  if (o.sip) o.sip = { port: runtime.sip!.port };

  const { key } = await store.keys.createKey('Call benchmark');
  const api = async (method: 'POST' | 'PATCH', url: string, body: unknown) => {
    const res = await app.inject({ method, url, headers: { authorization: `Bearer ${key}` }, payload: body as Record<string, unknown> });
    if (res.statusCode >= 300) throw new Error(`${method} ${url}: ${res.statusCode} ${res.body}`);
    return res.json();
  };
  const setUpAccount = (url: string) =>
    api('PATCH', '/account', {
      webhook: { url: `${url}/hooks`, secret: 'whsec_YmVuY2gtc2VjcmV0LWJlbmNoLXNlY3JldC1iZW5jaA==' },
      telephony: { twilio: { account_sid: ACCOUNT_SID, auth_token: AUTH_TOKEN } },
      // --sip: INVITEs from the callers' processes (on this machine) need no credentials
      ...(o.sip ? { sip: { inbound: { allowed_addresses: ['127.0.0.1'] } } } : {}),
    });
  await setUpAccount(hooksUrl);
  const assistant = await api('POST', '/assistants', {
    name: 'Benchmark receptionist',
    ...(vendors
      ? {
          // the sandbox STT's endpointing and utterance end, so that both runs converse alike
          stt_config: { provider: 'deepgram', endpointing: 300, utterance_end_ms: 1000 },
          llm_config: { provider: 'openai', model: 'gpt-4o-mini' },
          tts_config: benchTtsConfig(o.tts, vendors.urls.speech),
        }
      : {
          llm_config: { provider: 'sandbox' },
          stt_config: { provider: 'sandbox' },
          tts_config: { provider: 'sandbox', voice_id: 'sandbox' },
        }),
    speech_config: {
      ...(o.background ? { background_audio: { enabled: true, clip: o.background, volume: 0.5 } } : {}),
      ...(o.vad ? { turn_taking: { vad: o.vad } } : {}),
    },
    ...(o.record ? { recording_consent: { enabled: true, message: 'This call is recorded.' } } : {}),
  });
  if (!assistant.assistant) throw new Error(`the assistant was refused: ${JSON.stringify(assistant)}`);
  const workflow = await api('POST', '/workflows', { name: 'Benchmark loop', definition: loopDefinition });
  const number = '+15550100100';
  await api('POST', '/numbers', { number, assistant_id: assistant.assistant.id, workflow_id: workflow.workflow.id, ...(o.sip ? { provider: 'sip' } : {}) });

  const machine = `${os.cpus()[0]?.model.trim() ?? 'unknown CPU'}, ${os.cpus().length} cores, ${Math.round(os.totalmem() / 2 ** 30)} GiB, Node ${process.version}`;
  process.stdout.write(
    `bench:calls on ${machine}\n` +
      `  server: this process (pid ${process.pid}); callers: ${o.generators === 1 ? 'a child process' : `${o.generators} child processes`}; ` +
      `storage ${dbUrl ? 'PostgreSQL' : 'PGlite in memory'}, sessions ${config.REDIS_URL ? 'Redis' : 'in process'}; ` +
      `${o.web ? 'web calls (16 kHz PCM), ' : ''}${o.sip ? `SIP calls (UDP to port ${o.sip.port}, RTP PCMU), ` : ''}${o.background ? `background audio "${o.background}" at 0.5, ` : ''}${o.record ? 'every call recorded, ' : ''}${o.listen ? 'a listener on every call, ' : ''}${o.vad ? `voice activity "${o.vad}", ` : ''}${o.tracing ? 'tracing on (OTLP/HTTP protobuf), ' : ''}` +
      (vendors
        ? `Deepgram, OpenAI and ${o.tts} adapters against their wire fakes (test/bench/vendor-fakes.ts, pid ${vendors.pid})` +
          `${o.sttMs || o.llmMs || o.ttsMs ? ` + ${o.sttMs} ms STT, ${o.llmMs} ms model, ${o.ttsMs} ms TTS latency` : ''}` +
          `${o.sttChunkMs !== null ? `; Deepgram audio in ${o.sttChunkMs ? `${o.sttChunkMs} ms chunks` : 'single frames'}` : ''}\n`
        : `sandbox providers${o.llmMs || o.ttsMs ? ` + ${o.llmMs} ms model, ${o.ttsMs} ms TTS latency` : ''}\n`),
  );

  const echo = o.baseline ? await startEchoServer() : null;
  const results: StepResult[] = [];
  for (let s = 0; s < steps.length; s++) {
    const n = steps[s]!;
    if (s > 0) {
      callers = startCallers(o.generators);
      hooksUrl = (await callers.ready).url;
      await setUpAccount(hooksUrl);
    }
    const baseline = echo ? await runBaseline(n, o, callers, echo) : undefined;
    const web = o.web ? { apiKey: key, assistantId: assistant.assistant.id as string, workflowId: workflow.workflow.id as string } : undefined;
    const rtpBefore = o.sip ? await serverRtp(app) : null;
    const result = await runStep(n, o, callers, baseUrl, number, web, recorder, (on) => (recording = on), () => runtime.calls.liveCount(), vendors, o.listen ? { apiKey: key } : undefined);
    if (baseline) result.baseline = baseline;
    if (rtpBefore) {
      // a SIP call's RTP figures are counted when its dialog is released
      const released = Date.now() + 10_000;
      while (runtime.sip!.dialogCount > 0 && Date.now() < released) await new Promise((r) => setTimeout(r, 100));
      result.serverRtp = rtpDelta(rtpBefore, await serverRtp(app));
    }
    results.push(result);
    printResult(result);
    // wait until the server has let go of every call before the next step
    const deadline = Date.now() + 30_000;
    while (runtime.calls.liveCount() > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    // a sweep goes one step past the first miss (the chart shows how it degrades), then stops
    if (o.sweep && !result.pass && results.length >= 2 && !results[results.length - 2]!.pass) break;
    if (o.sweep && result.failed > 0) break;
  }

  if (o.sweep) {
    const passing = results.filter((r) => r.pass).map((r) => r.calls);
    const baselinePassing = results.filter((r) => r.baseline?.pass).map((r) => r.calls);
    process.stdout.write(
      `\nsweep: ${results.map((r) => `${r.calls} calls → service p99 ${ms(r.latency.serviceMs.p99)} ms, ${r.windowFrames.late} late`).join('; ')}\n` +
        `largest N with service p99 < ${TARGET_SERVICE_P99_MS} ms and no late frame: ${passing.length ? Math.max(...passing) : 'none'}\n` +
        (echo
          ? `largest N the bare baseline held (loop lag p99 < ${TARGET_SERVICE_P99_MS} ms, every frame back, none handled late): ${baselinePassing.length ? Math.max(...baselinePassing) : 'none'}` +
            `${baselinePassing.length === results.length ? ' (every step: its limit is above the sweep)' : ''}\n`
          : ''),
    );
  }
  const capacity = capacityRatio(results);
  if (capacity) {
    const each = capacity.pairs.length > 1;
    process.stdout.write(
      `\ncapacity against the bare baseline (CPU per call in the measurement window, ${capacity.at} calls${each ? `, the median of ${capacity.pairs.length} pairs` : ''}): ` +
        `service ${capacity.serviceCallsPerCore.toFixed(0)} calls per core, baseline ${capacity.baselineCallsPerCore.toFixed(0)}: ` +
        `${(capacity.ratio * 100).toFixed(0)}% of the baseline\n` +
        (each
          ? `  pairs (service ÷ baseline, each pair measured one after the other): ${capacity.pairs.map((x) => `${(x.ratio * 100).toFixed(0)}%`).join(', ')}; ` +
            `service event-loop lag p99: ${capacity.pairs.map((x) => `${x.eventLoopP99Ms.toFixed(2)}`).join(', ')} ms (median ${capacity.eventLoopP99Ms.toFixed(2)} ms)\n`
          : ''),
    );
  }
  if (o.json) writeFileSync(o.json, `${JSON.stringify({ machine, options: o, capacity, results }, null, 2)}\n`);
  if (o.chart) {
    writeFileSync(o.chart, chart(results, machine, o));
    process.stdout.write(`chart written to ${o.chart}\n`);
  }
  await echo?.close();

  await runtime.close(5_000);
  await app.close();
  await db.close();
  await vendors?.close();
  if (otlp) {
    await stopTracing();
    const sent = await otlp.close();
    process.stdout.write(`tracing: ${sent.requests} exports, ${sent.bytes} bytes sent to the OTLP receiver\n`);
  }
  if (dbName && process.env.DATABASE_URL) {
    const pg = (await import('pg')).default;
    const admin = new pg.Client({ connectionString: process.env.DATABASE_URL });
    await admin.connect();
    await admin.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
    await admin.end();
  }
  process.exitCode = results.some((r) => r.failed > 0) ? 1 : 0;
}

/**
 * Calls one core holds = 100% ÷ CPU% per call (the window's CPU over its live calls), for the
 * service and for the baseline at the largest N the service passed (else the largest measured).
 * With several steps at that N (`--repeat`), each pair's ratio and the medians: the machine's own
 * speed moves run to run (docs/benchmarks.md), and a pair measured back to back shares it.
 */
function capacityRatio(results: StepResult[]): {
  at: number;
  serviceCallsPerCore: number;
  baselineCallsPerCore: number;
  ratio: number;
  eventLoopP99Ms: number;
  pairs: { ratio: number; eventLoopP99Ms: number }[];
} | null {
  const withBaseline = results.filter((r) => r.baseline && r.cpuPercentPerCall > 0 && r.baseline.cpuPercentPerCall > 0);
  const r = withBaseline.filter((x) => x.pass).at(-1) ?? withBaseline.at(-1);
  if (!r?.baseline) return null;
  const same = withBaseline.filter((x) => x.calls === r.calls);
  const pairs = same.map((x) => ({ ratio: x.baseline!.cpuPercentPerCall / x.cpuPercentPerCall, eventLoopP99Ms: x.eventLoopP99Ms }));
  return {
    at: r.calls,
    serviceCallsPerCore: median(same.map((x) => 100 / x.cpuPercentPerCall)),
    baselineCallsPerCore: median(same.map((x) => 100 / x.baseline!.cpuPercentPerCall)),
    ratio: median(pairs.map((x) => x.ratio)),
    eventLoopP99Ms: median(pairs.map((x) => x.eventLoopP99Ms)),
    pairs,
  };
}

/** The median, as the latency figures take it: nearest rank (of an even count, the lower middle). */
function median(values: number[]): number {
  return percentiles(values).p50;
}

function chart(results: StepResult[], machine: string, o: Options): string {
  const pts = (f: (r: StepResult) => number | undefined) =>
    results.flatMap((r) => {
      const y = f(r);
      return y === undefined ? [] : [[r.calls, y] as [number, number]];
    });
  return renderChart({
    title: `bench:calls: one server process, ${o.providers === 'vendors' ? 'vendor adapters against their wire fakes' : 'sandbox providers'}`,
    subtitle: `${machine}; ${o.durationS} s window per step${o.llmMs || o.ttsMs ? `; +${o.llmMs} ms model, +${o.ttsMs} ms TTS` : ''}`,
    xLabel: 'concurrent calls',
    panels: [
      {
        title: 'Latency (ms)',
        yLabel: 'ms',
        reference: { y: TARGET_SERVICE_P99_MS, label: `target: service share p99 < ${TARGET_SERVICE_P99_MS} ms` },
        series: [
          { name: 'service share p99', color: '#1f77b4', points: pts((r) => r.latency.serviceMs.p99) },
          { name: 'service share p50', color: '#1f77b4', dashed: true, points: pts((r) => r.latency.serviceMs.p50) },
          { name: 'end of turn → first frame p99', color: '#ff7f0e', points: pts((r) => r.latency.totalMs.p99) },
          { name: 'service event-loop lag p99', color: '#2ca02c', points: pts((r) => r.eventLoopP99Ms) },
          { name: 'baseline event-loop lag p99', color: '#7f7f7f', points: pts((r) => r.baseline?.eventLoopP99Ms) },
          { name: 'baseline echo round trip p99', color: '#7f7f7f', dashed: true, points: pts((r) => r.baseline?.rttMs.p99) },
        ],
      },
      {
        title: 'CPU of the server process (% of one core)',
        yLabel: '% of one core',
        series: [
          { name: 'service', color: '#1f77b4', points: pts((r) => r.cpuPercent) },
          { name: 'bare baseline (echo)', color: '#7f7f7f', points: pts((r) => r.baseline?.cpuPercent) },
        ],
      },
      {
        title: 'Frames late in the window',
        yLabel: 'frames',
        reference: { y: 0, label: 'target: none' },
        series: [
          { name: 'service (its pacer)', color: '#1f77b4', points: pts((r) => r.windowFrames.late) },
          { name: 'bare baseline (handled late)', color: '#7f7f7f', points: pts((r) => r.baseline?.frames.late) },
        ],
      },
    ],
  });
}

const jsBytes = (m: NodeJS.MemoryUsage) => m.heapUsed + m.external + m.arrayBuffers;

async function memoryAfterGc(): Promise<NodeJS.MemoryUsage> {
  gc();
  await new Promise((r) => setTimeout(r, 200));
  gc();
  return process.memoryUsage();
}

/** The phones' RTP as the server received it: its SIP metrics (counted per call as its dialog is released). */
interface ServerRtp {
  calls: number;
  lost: number;
  late: number;
  wrongSource: number;
  jitterMeanMs: number;
  /** The smallest jitter bucket (ms) every call's jitter was under, or null when some were above the largest. */
  jitterBoundMs: number | null;
}

interface RtpMetrics {
  lost: number;
  late: number;
  wrongSource: number;
  jitterSum: number;
  jitterCount: number;
  buckets: Map<string, number>;
}

async function serverRtp(app: { inject(o: { method: 'GET'; url: string }): Promise<{ body: string }> }): Promise<RtpMetrics> {
  const text = (await app.inject({ method: 'GET', url: '/metrics' })).body;
  const value = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? 0);
  const buckets = new Map<string, number>();
  for (const m of text.matchAll(/^switchboard_rtp_jitter_seconds_bucket\{le="([^"]+)"\} (\S+)$/gm)) buckets.set(m[1]!, Number(m[2]));
  return {
    lost: value('switchboard_rtp_packets_lost_total'),
    late: value('switchboard_rtp_packets_late_total'),
    wrongSource: value('switchboard_rtp_wrong_source_total'),
    jitterSum: value('switchboard_rtp_jitter_seconds_sum'),
    jitterCount: value('switchboard_rtp_jitter_seconds_count'),
    buckets,
  };
}

function rtpDelta(a: RtpMetrics, b: RtpMetrics): ServerRtp {
  const calls = b.jitterCount - a.jitterCount;
  let bound: number | null = null;
  for (const [le, n] of b.buckets) {
    if (le === '+Inf') continue;
    if (n - (a.buckets.get(le) ?? 0) >= calls) {
      bound = Number(le) * 1000;
      break;
    }
  }
  return {
    calls,
    lost: b.lost - a.lost,
    late: b.late - a.late,
    wrongSource: b.wrongSource - a.wrongSource,
    jitterMeanMs: calls > 0 ? ((b.jitterSum - a.jitterSum) / calls) * 1000 : 0,
    jitterBoundMs: bound,
  };
}

interface CallersProcess {
  ready: Promise<{ url: string }>;
  on(handler: (m: FromCallers) => void): void;
  send(m: ToCallers): void;
}

/**
 * The callers: one process, or `k` (`--generators`) splitting the calls between them, seen as one.
 * The first answers the webhooks and the Twilio REST API. What each reports once (the echo's
 * streams up and done, the calls dialled and done) is passed on when all have reported, summed
 * (lags and round-trip percentiles: the worst of them); progress is the sum of each one's latest.
 */
function startCallers(k: number): CallersProcess {
  if (k <= 1) return startCallerProcess();
  const pool = Array.from({ length: k }, () => startCallerProcess());
  const handlers: ((m: FromCallers) => void)[] = [];
  const emit = (m: FromCallers) => {
    for (const h of handlers) h(m);
  };
  const latest = new Map<number, Extract<FromCallers, { type: 'progress' }>>();
  const pending = new Map<string, FromCallers[]>();
  const worst = (a: Percentiles, b: Percentiles): Percentiles => ({
    count: a.count + b.count,
    p50: Math.max(a.p50, b.p50),
    p95: Math.max(a.p95, b.p95),
    p99: Math.max(a.p99, b.p99),
    max: Math.max(a.max, b.max),
    mean: (a.mean * a.count + b.mean * b.count) / Math.max(1, a.count + b.count),
  });
  const combine = (all: FromCallers[]): FromCallers => {
    const sum = (f: (m: any) => number) => all.reduce((t, m) => t + f(m), 0);
    const most = (f: (m: any) => number) => Math.max(...all.map(f));
    const first = all[0]!;
    switch (first.type) {
      case 'echo-up':
      case 'all-dialled':
        return { type: first.type, connected: sum((m) => m.connected), failed: sum((m) => m.failed) } as FromCallers;
      case 'echo-done':
        return {
          type: 'echo-done',
          sent: sum((m) => m.sent),
          echoed: sum((m) => m.echoed),
          lost: sum((m) => m.lost),
          late: sum((m) => m.late),
          rtt: (all as Extract<FromCallers, { type: 'echo-done' }>[]).map((m) => m.rtt).reduce(worst),
          eventLoopP99Ms: most((m) => m.eventLoopP99Ms),
          errors: all.flatMap((m) => (m as { errors: string[] }).errors),
        };
      case 'done':
        return {
          type: 'done',
          connected: sum((m) => m.connected),
          failed: sum((m) => m.failed),
          turns: sum((m) => m.turns),
          understood: sum((m) => m.understood),
          errors: all.flatMap((m) => (m as { errors: string[] }).errors),
          eventLoopP99Ms: most((m) => m.eventLoopP99Ms),
          requests: sum((m) => m.requests),
          ...(() => {
            const tallies = all.flatMap((m) => ((m as { listen?: ListenTally }).listen ? [(m as { listen: ListenTally }).listen] : []));
            if (tallies.length === 0) return {};
            const total = (f: (t: ListenTally) => number) => tallies.reduce((t, x) => t + f(x), 0);
            return {
              listen: {
                listeners: total((t) => t.listeners),
                frames: total((t) => t.frames),
                expectedFrames: total((t) => t.expectedFrames),
                events: total((t) => t.events),
                closedAtEnd: total((t) => t.closedAtEnd),
                otherEnds: total((t) => t.otherEnds),
                badFrames: total((t) => t.badFrames),
              },
            };
          })(),
          ...(() => {
            const rtps = all.flatMap((m) => ((m as { rtp?: PhoneRtp }).rtp ? [(m as { rtp: PhoneRtp }).rtp] : []));
            if (rtps.length === 0) return {};
            const calls = rtps.reduce((t, r) => t + r.calls, 0);
            const total = (f: (r: PhoneRtp) => number) => rtps.reduce((t, r) => t + f(r), 0);
            return {
              rtp: {
                calls,
                sent: total((r) => r.sent),
                received: total((r) => r.received),
                lost: total((r) => r.lost),
                late: total((r) => r.late),
                jitterMeanMs: total((r) => r.jitterMeanMs * r.calls) / Math.max(1, calls),
                jitterMaxMs: Math.max(...rtps.map((r) => r.jitterMaxMs)),
              },
            };
          })(),
        };
      default:
        return first;
    }
  };
  pool.forEach((p, i) =>
    p.on((m) => {
      if (m.type === 'ready') return;
      if (m.type === 'progress') {
        latest.set(i, m);
        const all = [...latest.values()];
        emit({ type: 'progress', connected: all.reduce((t, x) => t + x.connected, 0), failed: all.reduce((t, x) => t + x.failed, 0), turns: all.reduce((t, x) => t + x.turns, 0) });
        return;
      }
      const got = [...(pending.get(m.type) ?? []), m];
      if (got.length < k) {
        pending.set(m.type, got);
        return;
      }
      pending.delete(m.type);
      emit(combine(got));
    }),
  );
  // each process takes its share of the calls (and of the echo's streams)
  const share = (n: number, i: number) => Math.floor(n / k) + (i < n % k ? 1 : 0);
  return {
    ready: Promise.all(pool.map((p) => p.ready)).then((urls) => urls[0]!),
    on: (h) => handlers.push(h),
    send: (m) => {
      pool.forEach((p, i) => p.send(m.type === 'run' || m.type === 'echo' ? { ...m, calls: share(m.calls, i) } : m));
    },
  };
}

/** The assistant's voice in a vendors run. */
function benchTtsConfig(tts: BenchTts, speechUrl: string): Record<string, unknown> {
  switch (tts) {
    case 'elevenlabs':
      return { provider: 'elevenlabs', voice_id: 'bench-voice' };
    case 'cartesia':
      return { provider: 'cartesia', voice_id: 'bench-voice' };
    case 'deepgram':
      return { provider: 'deepgram', voice_id: 'aura-2-thalia-en' };
    case 'openai-compatible':
      return { provider: 'openai-compatible', base_url: speechUrl, model: 'bench-model', voice_id: 'bench-voice' };
  }
}

interface VendorFakesProcess {
  pid: number;
  urls: VendorFakesAddresses;
  /** The fakes' process CPU time so far (µs) and what it served. */
  cpu(): Promise<{ cpuUs: number; counts: VendorFakesCounts }>;
  close(): Promise<void>;
}

/** test/bench/vendor-fakes.ts in a child process, with the run's latency. */
async function startVendorFakesProcess(o: Options): Promise<VendorFakesProcess> {
  const script = fileURLToPath(new URL('./vendor-fakes.ts', import.meta.url));
  const args = ['--deepgram-ms', String(o.sttMs), '--openai-ms', String(o.llmMs), '--elevenlabs-ms', String(o.ttsMs)];
  const child = fork(script, args, { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  process.on('exit', () => child.kill());
  const waiting: Array<(m: Extract<FromVendorFakes, { type: 'cpu' }>) => void> = [];
  const ready = new Promise<Extract<FromVendorFakes, { type: 'ready' }>>((resolve, reject) => {
    child.on('message', (m: FromVendorFakes) => {
      if (m.type === 'ready') resolve(m);
      else if (m.type === 'cpu') waiting.shift()?.(m);
    });
    void exited.then(() => reject(new Error("the vendor fakes' process exited before it was ready")));
  });
  const r = await ready;
  const send = (m: ToVendorFakes) => child.send(m);
  return {
    pid: r.pid,
    urls: { deepgram: r.deepgram, openai: r.openai, elevenlabs: r.elevenlabs, cartesia: r.cartesia, deepgramSpeak: r.deepgramSpeak, speech: r.speech },
    cpu: () =>
      new Promise((resolve, reject) => {
        if (child.exitCode !== null || child.signalCode !== null) return reject(new Error("the vendor fakes' process has exited"));
        waiting.push((m) => resolve({ cpuUs: m.userUs + m.systemUs, counts: m.counts }));
        void exited.then(() => reject(new Error("the vendor fakes' process exited")));
        send({ type: 'cpu' });
      }),
    close: async () => {
      if (child.exitCode === null) send({ type: 'stop' });
      await Promise.race([exited, new Promise((r) => setTimeout(r, 5_000))]);
      if (child.exitCode === null) child.kill();
    },
  };
}

function startCallerProcess(): CallersProcess & { child: ChildProcess } {
  const child = fork(fileURLToPath(import.meta.url), ['--role', 'callers'], {
    execArgv: ['--import', 'tsx'],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const handlers: ((m: FromCallers) => void)[] = [];
  child.on('message', (m: FromCallers) => {
    for (const h of handlers) h(m);
  });
  const ready = new Promise<{ url: string }>((resolve, reject) => {
    handlers.push((m) => m.type === 'ready' && resolve({ url: m.url }));
    child.once('exit', (code) => reject(new Error(`the callers' process exited (${code}) before it was ready`)));
  });
  return { child, ready, on: (h) => handlers.push(h), send: (m) => child.send(m) };
}

async function runBaseline(n: number, o: Options, callers: CallersProcess, echo: EchoServer): Promise<BaselineResult> {
  const rampMs = Math.min(2, o.rampS ?? Math.max(2, n / 25)) * 1000;
  const windowS = o.baselineDurationS ?? Math.min(o.durationS, 10);
  const up = new Promise<Extract<FromCallers, { type: 'echo-up' }>>((resolve) => callers.on((m) => m.type === 'echo-up' && resolve(m)));
  const done = new Promise<Extract<FromCallers, { type: 'echo-done' }>>((resolve) => callers.on((m) => m.type === 'echo-done' && resolve(m)));
  const base = await memoryAfterGc();
  process.stderr.write(`[${n} calls · bare baseline] opening ${n} echo streams, then a ${windowS} s window\n`);
  callers.send({ type: 'echo', url: echo.url, calls: n, rampMs });
  const opened = await up;
  await new Promise((r) => setTimeout(r, 1_000));
  const eld = monitorEventLoopDelay({ resolution: ELD_RESOLUTION_MS });
  eld.enable();
  eld.reset();
  const cpu0 = process.cpuUsage();
  const started = Date.now();
  echo.resetLateness();
  callers.send({ type: 'echo-window' });
  await new Promise((r) => setTimeout(r, windowS * 1000));
  const cpu = process.cpuUsage(cpu0);
  const measuredS = (Date.now() - started) / 1000;
  const handled = echo.lateness();
  eld.disable();
  const live = echo.live();
  const mem = await memoryAfterGc();
  callers.send({ type: 'echo-stop' });
  const final = await done;
  const deadline = Date.now() + 10_000;
  while (echo.live() > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  const cpuPercent = ((cpu.user + cpu.system) / 1000 / (measuredS * 1000)) * 100;
  const perCall = Math.max(1, live);
  const lag = eventLoopLag(eld);
  const result: BaselineResult = {
    streams: n,
    connected: opened.connected,
    failed: opened.failed,
    windowS: measuredS,
    frames: { sent: final.sent, echoed: final.echoed, lost: final.lost, late: handled.late, maxLateMs: handled.maxLateMs, slowRoundTrip: final.late },
    rttMs: final.rtt,
    eventLoopP99Ms: lag.p99,
    eventLoopMaxMs: lag.max,
    cpuPercent,
    cpuPercentPerCall: cpuPercent / perCall,
    jsMbPerCall: (jsBytes(mem) - jsBytes(base)) / perCall / 2 ** 20,
    callersEventLoopP99Ms: final.eventLoopP99Ms,
    errors: final.errors,
    pass: false,
  };
  result.pass = result.failed === 0 && result.connected === n && lag.p99 < TARGET_SERVICE_P99_MS && final.lost === 0 && handled.late === 0;
  return result;
}

async function runStep(
  n: number,
  o: Options,
  callers: CallersProcess,
  baseUrl: string,
  number: string,
  web: { apiKey: string; assistantId: string; workflowId: string } | undefined,
  recorder: TurnLatencyRecorder,
  setRecording: (on: boolean) => void,
  liveCount: () => number,
  vendors: VendorFakesProcess | null,
  listen?: { apiKey: string },
): Promise<StepResult> {
  const tty = process.stderr.isTTY;
  const rampMs = (o.rampS ?? Math.max(2, n / 25)) * 1000;
  let last: Extract<FromCallers, { type: 'progress' }> = { type: 'progress', connected: 0, failed: 0, turns: 0 };
  let phase = 'ramp';
  let windowStart = 0;
  const eld = monitorEventLoopDelay({ resolution: ELD_RESOLUTION_MS });
  const allDialled = new Promise<Extract<FromCallers, { type: 'all-dialled' }>>((resolve) => callers.on((m) => m.type === 'all-dialled' && resolve(m)));
  const done = new Promise<Extract<FromCallers, { type: 'done' }>>((resolve) => callers.on((m) => m.type === 'done' && resolve(m)));
  callers.on((m) => {
    if (m.type === 'progress') last = m;
  });

  const base = await memoryAfterGc();
  recorder.resetTurns();
  const started = Date.now();
  const progress = setInterval(() => {
    const elapsed = phase === 'window' ? `${((Date.now() - windowStart) / 1000).toFixed(0)}/${o.durationS}s` : `${((Date.now() - started) / 1000).toFixed(0)}s`;
    const sum = recorder.summary();
    const out = recorder.outboundTotals();
    const line =
      `[${n} calls · ${phase} ${elapsed}] live ${liveCount()} · up ${last.connected} · failed ${last.failed} · turns ${last.turns}` +
      (phase === 'window'
        ? ` · service p99 ${ms(sum.serviceMs.p99)} ms · total p50 ${ms(sum.totalMs.p50)} ms · loop lag p99 ${ms(eventLoopLag(eld).p99)} ms`
        : '') +
      ` · late frames ${out.framesLate}`;
    if (tty) process.stderr.write(`\r${line.padEnd(150)}`);
    else if (Math.round((Date.now() - started) / 1000) % 5 === 0) process.stderr.write(`${line}\n`);
  }, 1000);

  callers.send({ type: 'run', baseUrl, number, calls: n, rampMs, ...(web ? { web } : {}), ...(o.background ? { background: true } : {}), ...(o.sip ? { sip: { host: '127.0.0.1', port: o.sip.port } } : {}), ...(listen ? { listen } : {}) });
  const dialled = await allDialled;
  // a moment for the last greetings to finish, then measure (nothing to measure if no call is up)
  await new Promise((r) => setTimeout(r, 2_000));
  const windowMs = dialled.connected > 0 ? o.durationS * 1000 : 0;
  recorder.resetTurns();
  setRecording(true);
  eld.enable();
  eld.reset();
  const fakesAtStart = vendors ? await vendors.cpu() : null;
  const cpu0 = process.cpuUsage();
  const audioAtStart = recorder.outboundSnapshot();
  const gcPauses: number[] = [];
  const gcObserver = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) gcPauses.push(e.duration);
  });
  gcObserver.observe({ entryTypes: ['gc'] });
  const profiler = o.profile || o.heapProfile ? new Session() : null;
  if (profiler) {
    profiler.connect();
    if (o.profile) {
      await profiler.post('Profiler.enable');
      await profiler.post('Profiler.start');
    }
    if (o.heapProfile) {
      // every allocation site, including what the collector has freed since: the allocation rate
      await profiler.post('HeapProfiler.enable');
      await profiler.post('HeapProfiler.startSampling', { samplingInterval: 16384, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
    }
  }
  windowStart = Date.now();
  phase = 'window';
  await new Promise((r) => setTimeout(r, windowMs));
  if (profiler) {
    if (o.profile) {
      const { profile } = await profiler.post('Profiler.stop');
      writeFileSync(o.profile, JSON.stringify(profile));
    }
    if (o.heapProfile) {
      const { profile } = await profiler.post('HeapProfiler.stopSampling');
      writeFileSync(o.heapProfile, JSON.stringify(profile));
    }
    profiler.disconnect();
  }
  const windowS = (Date.now() - windowStart) / 1000;
  const cpu = process.cpuUsage(cpu0);
  const fakesAtEnd = vendors ? await vendors.cpu() : null;
  eld.disable();
  setRecording(false);
  const summary = recorder.summary();
  const turns = recorder.turns;
  const live = liveCount();
  gcObserver.disconnect();
  // frames as of each call's latest turn report (before the full GC below, which would hold the pacer up)
  const frames = recorder.outboundTotals();
  const windowFrames = recorder.outboundTotals(audioAtStart);
  // memory with every call still up, after a full collection
  const mem = await memoryAfterGc();
  phase = 'hanging up';
  callers.send({ type: 'stop' });
  const final = await done;
  const hungUp = Date.now() + 10_000;
  while (liveCount() > 0 && Date.now() < hungUp) await new Promise((r) => setTimeout(r, 100));
  const after = await memoryAfterGc();
  clearInterval(progress);
  if (tty) process.stderr.write('\n');
  const cpuPercent = ((cpu.user + cpu.system) / 1000 / (windowS * 1000)) * 100;
  const perCall = Math.max(1, live);
  const result: StepResult = {
    calls: n,
    connected: dialled.connected,
    failed: final.failed,
    windowS,
    rampS: rampMs / 1000,
    turns,
    latency: summary,
    eventLoopP99Ms: eventLoopLag(eld).p99,
    eventLoopMaxMs: eventLoopLag(eld).max,
    cpuPercent,
    cpuPercentPerCall: cpuPercent / perCall,
    rssMbPerCallAtMost: mem.rss / perCall / 2 ** 20,
    jsMbPerCall: (jsBytes(mem) - jsBytes(base)) / perCall / 2 ** 20,
    rssMb: { before: base.rss / 2 ** 20, live: mem.rss / 2 ** 20, after: after.rss / 2 ** 20 },
    frames: { sent: frames.framesSent, late: frames.framesLate, maxLateMs: frames.maxLateMs },
    windowFrames: { sent: windowFrames.framesSent, late: windowFrames.framesLate, maxLateMs: windowFrames.maxLateMs },
    gc: { count: gcPauses.length, totalMs: gcPauses.reduce((a, b) => a + b, 0), maxMs: Math.max(0, ...gcPauses) },
    callersEventLoopP99Ms: final.eventLoopP99Ms,
    callerTurns: final.turns,
    understood: final.understood,
    ...(final.rtp ? { phoneRtp: final.rtp } : {}),
    ...(final.listen ? { listen: final.listen } : {}),
    loadAverage: os.loadavg()[0]!,
    errors: final.errors,
    pass: false,
  };
  if (fakesAtStart && fakesAtEnd) {
    const c0 = fakesAtStart.counts;
    const c1 = fakesAtEnd.counts;
    result.vendorFakes = {
      cpuPercent: ((fakesAtEnd.cpuUs - fakesAtStart.cpuUs) / 1000 / (windowS * 1000)) * 100,
      counts: {
        deepgramStreams: c1.deepgramStreams - c0.deepgramStreams,
        deepgramMessages: c1.deepgramMessages - c0.deepgramMessages,
        completions: c1.completions - c0.completions,
        ttsGenerations: c1.ttsGenerations - c0.ttsGenerations,
      },
    };
  }
  // steady state with N calls up: the ramp's burst of call starts is reported apart (its rate is ours to pick)
  result.pass = result.failed === 0 && summary.serviceMs.p99 < TARGET_SERVICE_P99_MS && windowFrames.framesLate === 0;
  recorder.reset(); // audio totals belong to this step only
  return result;
}

function printResult(r: StepResult): void {
  const row = (name: string, p: Percentiles) =>
    `  ${name.padEnd(34)} ${ms(p.p50).padStart(8)} ${ms(p.p95).padStart(8)} ${ms(p.p99).padStart(8)} ${ms(p.max).padStart(8)}`;
  const l = r.latency;
  const b = r.baseline;
  process.stdout.write(
    [
      '',
      `${r.calls} concurrent calls: ${r.connected} connected, ${r.failed} failed; ${r.turns} turns in a ${r.windowS.toFixed(1)} s window`,
      `  per-turn latency (ms)                   p50      p95      p99      max`,
      row('service share', l.serviceMs),
      row('provider wait (model + TTS)', l.providerWaitMs),
      row('  model: request → output needed', l.modelWaitMs),
      row('  model: request → first token', l.modelFirstTokenMs),
      row('  TTS: request → first audio', l.ttsWaitMs),
      row('end of turn → first frame (total)', l.totalMs),
      `  event-loop lag: p99 ${ms(r.eventLoopP99Ms)} ms, max ${ms(r.eventLoopMaxMs)} ms (callers' process p99 ${ms(r.callersEventLoopP99Ms)} ms); machine load average ${r.loadAverage.toFixed(1)}`,
      `  CPU: ${r.cpuPercent.toFixed(0)}% of one core, ${r.cpuPercentPerCall.toFixed(2)}% per call`,
      `  memory per live call: JS heap + buffers ${r.jsMbPerCall.toFixed(2)} MB; RSS at most ${r.rssMbPerCallAtMost.toFixed(2)} MB (the whole process: ${r.rssMb.before.toFixed(0)} MB before, ${r.rssMb.live.toFixed(0)} MB with the calls up, ${r.rssMb.after.toFixed(0)} MB after, each after a full GC)`,
      `  outbound frames in the window: ${r.windowFrames.sent} sent, ${r.windowFrames.late} late (max ${ms(r.windowFrames.maxLateMs)} ms); ` +
        `during the ramp (${r.calls} calls dialled in ${r.rampS.toFixed(0)} s): ${r.frames.sent - r.windowFrames.sent} sent, ${r.frames.late - r.windowFrames.late} late`,
      `  replies the callers' ear could read: ${r.understood} of ${r.callerTurns}; GC in the window: ${r.gc.count} pauses, ${ms(r.gc.totalMs)} ms in all, longest ${ms(r.gc.maxMs)} ms`,
      ...(r.listen
        ? [
            `  listeners (one a call, whole step): ${r.listen.listeners}; ${r.listen.frames} frames of 20 ms stereo received, ` +
              `${(r.listen.expectedFrames ? (r.listen.frames / r.listen.expectedFrames) * 100 : 0).toFixed(1)}% of their time on the socket; ` +
              `${r.listen.events} events; ${r.listen.closedAtEnd} closed at the call's end, ${r.listen.otherEnds} otherwise; ${r.listen.badFrames} frames of the wrong size`,
          ]
        : []),
      ...(r.phoneRtp
        ? [
            `  RTP, server → phones (${r.phoneRtp.calls} calls, whole step): ${r.phoneRtp.received} packets received, ${r.phoneRtp.lost} lost, ${r.phoneRtp.late} late or twice; ` +
              `jitter (RFC 3550, at each call's end) mean ${ms(r.phoneRtp.jitterMeanMs)} ms, largest ${ms(r.phoneRtp.jitterMaxMs)} ms`,
          ]
        : []),
      ...(r.serverRtp
        ? [
            `  RTP, phones → server (${r.serverRtp.calls} calls, whole step; the phones sent ${r.phoneRtp?.sent ?? '?'}): ${r.serverRtp.lost} lost, ${r.serverRtp.late} late or twice, ` +
              `${r.serverRtp.wrongSource} from a wrong source; jitter mean ${ms(r.serverRtp.jitterMeanMs)} ms, every call's under ${r.serverRtp.jitterBoundMs === null ? '?' : `${r.serverRtp.jitterBoundMs} ms`}`,
          ]
        : []),
      ...(r.vendorFakes
        ? [
            `  vendor fakes (another process) in the window: ${r.vendorFakes.cpuPercent.toFixed(0)}% of one core; ` +
              `${r.vendorFakes.counts.deepgramMessages} Deepgram messages (results and events), ` +
              `${r.vendorFakes.counts.completions} completions, ${r.vendorFakes.counts.ttsGenerations} TTS generations`,
          ]
        : []),
      `  service p99 < ${TARGET_SERVICE_P99_MS} ms with no late frame in the window and no failed call: ${r.pass ? 'yes' : 'NO'}`,
      ...r.errors.map((e) => `  error: ${e}`),
      ...(b
        ? [
            `  bare baseline (media-stream echo) with ${b.streams} streams, ${b.windowS.toFixed(1)} s window: ${b.connected} open, ${b.failed} failed; ` +
              `frames ${b.frames.sent} sent, ${b.frames.echoed} back, ${b.frames.lost} lost, ${b.frames.late} handled late (max ${ms(b.frames.maxLateMs)} ms)`,
            `    round trip (callers' view) p50 ${ms(b.rttMs.p50)} / p99 ${ms(b.rttMs.p99)} / max ${ms(b.rttMs.max)} ms, ${b.frames.slowRoundTrip} over 20 ms; ` +
              `event-loop lag p99 ${ms(b.eventLoopP99Ms)} ms, max ${ms(b.eventLoopMaxMs)} ms (callers' process p99 ${ms(b.callersEventLoopP99Ms)} ms)`,
            `    CPU ${b.cpuPercent.toFixed(0)}% of one core, ${b.cpuPercentPerCall.toFixed(3)}% per stream; JS heap + buffers ${b.jsMbPerCall.toFixed(3)} MB per stream; held: ${b.pass ? 'yes' : 'NO'}`,
            `    service against baseline: ${(r.cpuPercentPerCall / b.cpuPercentPerCall).toFixed(1)}× the CPU per call, ` +
              `capacity ${((b.cpuPercentPerCall / r.cpuPercentPerCall) * 100).toFixed(0)}% of the baseline's ` +
              `(both take 50 frames/s per call in; the baseline returns ${(b.frames.echoed / Math.max(1, b.connected) / b.windowS).toFixed(0)}/s per stream, ` +
              `the service sent ${(r.windowFrames.sent / Math.max(1, r.connected) / r.windowS).toFixed(0)}/s per call of replies)`,
            ...b.errors.map((e) => `    error: ${e}`),
          ]
        : []),
      '',
    ].join('\n'),
  );
}

// ---------------------------------------------------------------------------------------------

const role = process.argv.includes('--role') ? process.argv[process.argv.indexOf('--role') + 1] : 'server';
if (role === 'callers') {
  await callersMain();
} else {
  const o = parseOptions(process.argv.slice(2));
  if (o.replot) {
    const saved = JSON.parse(readFileSync(o.replot, 'utf8')) as { machine: string; options: Options; results: StepResult[] };
    const out = o.chart ?? o.replot.replace(/\.json$/, '') + '.svg';
    writeFileSync(out, chart(saved.results, saved.machine, saved.options));
    process.stdout.write(`chart written to ${out}\n`);
  } else {
    await serverMain(o);
  }
}
