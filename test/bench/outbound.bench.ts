/**
 * An outbound campaign on one server process:
 * `npm run bench:outbound -- --customers N --max-concurrent M --cps R`.
 *
 * This process is the server: the real app and runtime on a listening port, the embedded default
 * (PGlite in memory, in-process sessions, webhook queue and dialler; DATABASE_URL and REDIS_URL
 * are not used), sandbox providers, and a sandbox assistant with no workflow whose
 * `speech_config.first_message_outbound` is one short line. Twilio is the stand-in
 * (src/sim/twilio.ts) in a forked child process, so that the callees' work (a frame every 20 ms,
 * the sandbox "ear" decoding what they hear) is not counted as the server's; the child also takes
 * the account's webhooks. Every callee is a person who hears the greeting, says one line, hears
 * the sandbox model's reply ("Okay, I understand: …") and hangs up (after `--hold-ms`). It goes by
 * the audio arriving and going quiet; whether its ear (sandbox STT) could read the greeting and the
 * reply is counted apart, as in bench:calls (a frame late by more than the pacer's lead breaks it).
 *
 * One `POST /calls` with N customers, under `outbound: {max_concurrent_calls: M, calls_per_second: R}`.
 * Measured:
 * - the dial rate: the stand-in's REST creates (Calls.json) over the campaign, over the first
 *   min(N, M) dials (before the cap can hold dialling back), the smallest gap between consecutive
 *   dials and the most dials in any 1 s window, against R;
 * - the cap: the most calls live at once, counted over intervals that lie inside the time each
 *   call holds its slot (slot taken before the REST create, given back after the call ended):
 *   the stand-in's view (REST create → the callee hangs up) and the server's (`ringing_at` →
 *   `ended_at` of the call record), against M; also the stand-in's create → end of the call, which
 *   ends ~100 ms after the socket closed (shown, not judged);
 * - each customer dialled exactly once;
 * - latency: the greeting (not a turn in the turn accounting, src/calls/latency.ts: a turn starts
 *   at the caller's end of turn), at the callee: media stream `start` sent → first assistant audio
 *   frame, and the answer → first frame (the TwiML request and the WebSocket upgrade on top); the
 *   callee's one turn, on the server (`onTurnLatency`: end of turn → first frame, and the service
 *   share = that minus the model and TTS waits);
 * - totals: calls completed, ended reasons, wall time, CPU of the server process.
 *
 * Exit code 1 when the cap was exceeded, a customer was dialled twice or not at all, or a call did
 * not finish its script (the campaign did not end in time, no greeting or reply audio, a call that
 * did not end `customer-ended-call`).
 *
 * Also shown: the server's event-loop lag, its pauses over 100 ms with their times (PGlite runs on
 * this thread: `POST /calls` itself is one), GC, the pacer's late frames up to each first reply.
 *
 * Options: --customers N (200, at most 1000: one campaign)  --max-concurrent M (50)  --cps R (10)
 * --ring-ms MS (how long each callee's phone rings, 300)  --hold-ms MS (how long the callee stays
 * on after the reply before hanging up, 0; longer calls make the cap bind)  --timeout S (give up
 * on the campaign after S seconds; default from N, M and R)  --json FILE (results and every call)
 * --profile FILE (a V8 CPU profile of the server over the campaign, for Chrome DevTools).
 */
import { fork, type ChildProcess } from 'node:child_process';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import { monitorEventLoopDelay, performance, PerformanceObserver } from 'node:perf_hooks';
import { Session } from 'node:inspector/promises';
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { buildApp } from '../../src/app.js';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/logger.js';
import { openDb } from '../../src/store/db.js';
import { createStore } from '../../src/store/index.js';
import { createRuntime } from '../../src/runtime.js';
import { createProviders, providerSettings } from '../../src/providers/index.js';
import type { Providers, TtsProvider } from '../../src/providers/types.js';
import type { TurnLatency } from '../../src/calls/latency.js';
import type { CallRecord } from '../../src/calls/store.js';
import { percentiles, type Percentiles } from '../../src/calls/latency-recorder.js';
import { startTwilioStandIn, type StandInCall } from '../../src/sim/twilio.js';
import type { MediaLeg } from '../../src/sim/media-leg.js';
import { freePort } from '../../src/net.js';
import { sandboxSpeechBytes } from '../../src/providers/sandbox/tts.js';

const AUTH_TOKEN = 'bench-outbound-auth-token-0123456789';
const ACCOUNT_SID = `AC${'c'.repeat(32)}`;
const FROM_NUMBER = '+15550100200';
const MAX_CUSTOMERS = 1000;

/** What the assistant says first when a person answers, and the part of it the callee listens for. */
const GREETING = 'Hello, this is Acme Dental calling.';
const GREETING_HEARD = 'Acme Dental';
/** The callee's one line; the sandbox model answers "Okay, I understand: Yes, speaking." */
const CALLEE_LINE = 'Yes, speaking.';
const GREETING_FRAMES = sandboxSpeechBytes(GREETING) / 160;
const REPLY_HEARD = 'understand';
/** The assistant's audio counts as over once none has come for this long. */
const QUIET_MS = 400;

const customerNumber = (i: number) => `+1415555${String(i).padStart(4, '0')}`;

// ---------------------------------------------------------------------------------------------
// options

interface Options {
  customers: number;
  maxConcurrent: number;
  cps: number;
  ringMs: number;
  holdMs: number;
  timeoutS: number | null;
  json: string | null;
  profile: string | null;
}

function parseOptions(argv: string[]): Options {
  const o: Options = { customers: 200, maxConcurrent: 50, cps: 10, ringMs: 300, holdMs: 0, timeoutS: null, json: null, profile: null };
  for (let i = 0; i < argv.length; i++) {
    const [flag, inline] = argv[i]!.split('=', 2) as [string, string | undefined];
    const value = () => inline ?? argv[++i] ?? '';
    const num = () => {
      const n = Number(value());
      if (!Number.isFinite(n) || n <= 0) throw new Error(`${flag}: expected a positive number`);
      return n;
    };
    switch (flag) {
      case '--customers': o.customers = Math.floor(num()); break;
      case '--max-concurrent': o.maxConcurrent = Math.floor(num()); break;
      case '--cps': o.cps = num(); break;
      case '--ring-ms': o.ringMs = num(); break;
      case '--hold-ms': o.holdMs = Number(value()) || 0; break;
      case '--timeout': o.timeoutS = num(); break;
      case '--json': o.json = value(); break;
      case '--profile': o.profile = value(); break;
      case '--role': i++; break;
      default: throw new Error(`unknown option ${flag} (see the comment at the top of test/bench/outbound.bench.ts)`);
    }
  }
  if (o.customers < 1 || o.customers > MAX_CUSTOMERS) throw new Error(`--customers: 1 to ${MAX_CUSTOMERS} (one campaign)`);
  if (o.maxConcurrent < 1 || o.maxConcurrent > 1000) throw new Error('--max-concurrent: 1 to 1000 (the API\'s range)');
  if (o.cps > 100) throw new Error('--cps: at most 100 (the API\'s range)');
  return o;
}

// ---------------------------------------------------------------------------------------------
// messages between the server (this process) and the stand-in (the child)

/** One callee's script as it went, in the stand-in's clock (`Date.now()`). */
interface CalleeTimes {
  /** The media stream's `start` was sent (the callee's script begins). */
  streamAt: number | null;
  firstFrameAt: number | null;
  /** The longest wait between two frames of the greeting as they arrived (the server's lead of 60 ms hides less). */
  greetingMaxGapMs: number | null;
  /** The last frame with sound of the callee's line left. */
  saidEndAt: number | null;
  firstReplyFrameAt: number | null;
  /** The reply's audio went quiet. */
  replyEndedAt: number | null;
  /** The callee's ear (sandbox STT) could read the greeting, and the reply: their audio came whole and in time. */
  greetingUnderstood: boolean;
  replyUnderstood: boolean;
  /** The callee hung up (just before `stop` went out). */
  hangUpAt: number | null;
  error: string | null;
}

interface StandInCallReport {
  sid: string;
  to: string;
  createdAt: number;
  answeredAt: number | null;
  endedAt: number | null;
  status: string;
  legEndedBy: string | null;
  errors: string[];
  callee: CalleeTimes;
}

interface StandInReport {
  /** Every REST create (`POST .../Calls.json`): when it arrived, what it was answered, to whom. */
  creates: Array<{ at: number; status: number; to: string }>;
  calls: StandInCallReport[];
  /** Webhooks the account's URL got: status-updates by call, and end-of-call-reports. */
  statusUpdates: Record<string, string[]>;
  reports: Record<string, string | null>;
  webhooks: number;
  cpuMs: number;
  eventLoopP99Ms: number;
}

type ToStandIn = { type: 'collect' } | { type: 'stop' };
type FromStandIn =
  | { type: 'ready'; twilioUrl: string; hooksUrl: string }
  | { type: 'progress'; created: number; answered: number; ended: number }
  | { type: 'report'; report: StandInReport };

const ELD_RESOLUTION_MS = 10;
/** A pause of the server's event loop longer than this is listed with its time. */
const STALL_MS = 100;
/** perf_hooks records the whole timer interval: the lag is what exceeds the resolution. */
const lagMs = (ns: number) => Math.max(0, ns / 1e6 - ELD_RESOLUTION_MS);

// ---------------------------------------------------------------------------------------------
// the stand-in (child process)

async function standInMain({ ringMs, holdMs }: Options): Promise<void> {
  const send = (m: FromStandIn) => process.send!(m);
  const cpu0 = process.cpuUsage();
  const eld = monitorEventLoopDelay({ resolution: ELD_RESOLUTION_MS });
  eld.enable();
  const times = new Map<string, CalleeTimes>();
  const timesOf = (sid: string) => {
    let t = times.get(sid);
    if (!t) {
      t = {
        streamAt: null,
        firstFrameAt: null,
        greetingMaxGapMs: null,
        saidEndAt: null,
        firstReplyFrameAt: null,
        replyEndedAt: null,
        greetingUnderstood: false,
        replyUnderstood: false,
        hangUpAt: null,
        error: null,
      };
      times.set(sid, t);
    }
    return t;
  };

  // a person: hears the greeting, says one line, hears the reply, (holds), hangs up. Like the callers
  // of bench:calls it goes by the audio arriving and going quiet, not by its ear reading it: a late
  // frame breaks the sandbox modem's frame, and that is counted (understood), not a stuck call.
  const script = async (leg: MediaLeg, call: StandInCall) => {
    const t = timesOf(call.sid);
    t.streamAt = Date.now();
    try {
      await leg.until(() => leg.frameTimes.length > 0 || leg.closed, 30_000, 'the greeting');
      await leg.quiet(QUIET_MS, 30_000);
      if (leg.closed) throw new Error('the call ended during the greeting');
      const before = leg.frameTimes.length;
      await leg.say(CALLEE_LINE);
      t.saidEndAt = leg.spoken.at(-1)?.endedAt || null;
      await leg.until(() => leg.frameTimes.length > before || leg.closed, 30_000, 'the reply');
      t.firstReplyFrameAt = leg.frameTimes[before] ?? null;
      await leg.quiet(QUIET_MS, 30_000);
      if (leg.closed) throw new Error('the call ended during the reply');
      t.replyEndedAt = Date.now() - QUIET_MS;
      if (holdMs > 0) await new Promise((r) => setTimeout(r, holdMs));
    } catch (err) {
      t.error = (err as Error).message;
    }
    t.greetingUnderstood = leg.heard.some((h) => h.text.includes(GREETING_HEARD));
    t.replyUnderstood = leg.heard.some((h) => h.text.includes(REPLY_HEARD));
    t.firstFrameAt = leg.frameTimes[0] ?? null;
    const greeting = leg.frameTimes.slice(0, GREETING_FRAMES);
    if (greeting.length > 1) t.greetingMaxGapMs = Math.max(...greeting.slice(1).map((at, i) => at - greeting[i]!));
    if (!leg.endedBy) {
      t.hangUpAt = Date.now();
      await leg.hangUp().catch(() => undefined);
    }
  };
  const twilio = await startTwilioStandIn({
    accounts: { [ACCOUNT_SID]: AUTH_TOKEN },
    defaultCallee: { kind: 'person', ringMs, onAnswer: script },
  });

  // the account's webhooks: status-updates and reports, by call
  const statusUpdates: Record<string, string[]> = {};
  const reports: Record<string, string | null> = {};
  let webhooks = 0;
  const hooks = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      webhooks++;
      try {
        const m = (JSON.parse(Buffer.concat(chunks).toString('utf8')) as { message?: { type?: string; status?: string; ended_reason?: string | null; call?: { id?: string } } }).message;
        const id = m?.call?.id;
        if (id && m.type === 'status-update' && m.status) (statusUpdates[id] ??= []).push(m.status);
        if (id && m.type === 'end-of-call-report') reports[id] = m.ended_reason ?? null;
      } catch {
        // not JSON: counted, nothing else
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{}');
    });
  });
  await new Promise<void>((r) => hooks.listen(0, '127.0.0.1', () => r()));

  const progress = setInterval(() => {
    send({
      type: 'progress',
      created: twilio.calls.length,
      answered: twilio.calls.filter((c) => c.startedAt !== null).length,
      ended: twilio.calls.filter((c) => c.final).length,
    });
  }, 1000);

  process.on('message', (m: ToStandIn) => {
    if (m.type === 'collect') {
      const cpu = process.cpuUsage(cpu0);
      send({
        type: 'report',
        report: {
          creates: twilio.requests
            .filter((r) => r.method === 'POST' && /\/Calls\.json$/.test(r.path))
            .map((r) => ({ at: r.at, status: r.status, to: r.form.get('To') ?? '' })),
          calls: twilio.calls.map((c) => ({
            sid: c.sid,
            to: c.to,
            createdAt: c.createdAt,
            answeredAt: c.startedAt,
            endedAt: c.endedAt,
            status: c.status,
            legEndedBy: c.leg?.endedBy ?? null,
            errors: c.errors,
            callee: timesOf(c.sid),
          })),
          statusUpdates,
          reports,
          webhooks,
          cpuMs: (cpu.user + cpu.system) / 1000,
          eventLoopP99Ms: lagMs(eld.percentile(99)),
        },
      });
      return;
    }
    clearInterval(progress);
    eld.disable();
    void (async () => {
      await twilio.close();
      await new Promise((r) => hooks.close(r));
      hooks.closeAllConnections();
      process.disconnect();
    })();
  });
  send({ type: 'ready', twilioUrl: twilio.url, hooksUrl: `http://127.0.0.1:${(hooks.address() as AddressInfo).port}/hooks` });
}

interface StandInProcess {
  child: ChildProcess;
  ready: Promise<{ twilioUrl: string; hooksUrl: string }>;
  on(handler: (m: FromStandIn) => void): void;
  send(m: ToStandIn): void;
}

function startStandIn(o: Options): StandInProcess {
  const child = fork(fileURLToPath(import.meta.url), ['--role', 'twilio', '--ring-ms', String(o.ringMs), '--hold-ms', String(o.holdMs)], {
    execArgv: ['--import', 'tsx'],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const handlers: ((m: FromStandIn) => void)[] = [];
  child.on('message', (m: FromStandIn) => {
    for (const h of handlers) h(m);
  });
  const ready = new Promise<{ twilioUrl: string; hooksUrl: string }>((resolve, reject) => {
    handlers.push((m) => m.type === 'ready' && resolve({ twilioUrl: m.twilioUrl, hooksUrl: m.hooksUrl }));
    child.once('exit', (code) => reject(new Error(`the stand-in's process exited (${code}) before it was ready`)));
  });
  return { child, ready, on: (h) => handlers.push(h), send: (m) => child.send(m) };
}

// ---------------------------------------------------------------------------------------------
// the figures

/** The most intervals open at once (an end at the same moment as a start counts as before it). */
function mostAtOnce(intervals: ReadonlyArray<readonly [start: number, end: number]>): { most: number; at: number | null } {
  const edges = intervals.flatMap(([s, e]) => [
    { at: s, d: 1 },
    { at: e, d: -1 },
  ]);
  edges.sort((x, y) => x.at - y.at || x.d - y.d);
  let live = 0;
  let most = 0;
  let at: number | null = null;
  for (const e of edges) {
    live += e.d;
    if (live > most) [most, at] = [live, e.at];
  }
  return { most, at };
}

/** The most timestamps in any window [t, t + windowMs). */
function mostInWindow(sortedAt: readonly number[], windowMs: number): number {
  let most = 0;
  let lo = 0;
  for (let hi = 0; hi < sortedAt.length; hi++) {
    while (sortedAt[hi]! - sortedAt[lo]! >= windowMs) lo++;
    most = Math.max(most, hi - lo + 1);
  }
  return most;
}

interface DialFigures {
  dials: number;
  /** Dials per second from the first dial to the last: (dials − 1) ÷ span. */
  overallPerSecond: number;
  /** The same over the first min(N, M) dials, which only the rate holds back. */
  firstDialsPerSecond: number;
  firstDials: number;
  minGapMs: number;
  gapMs: Percentiles;
  maxIn1s: number;
  /** The server's own view: gaps between the calls' `ringing_at`. */
  serverMinGapMs: number;
  serverMaxIn1s: number;
}

function dialFigures(createdAt: number[], ringingAt: number[], maxConcurrent: number): DialFigures {
  const at = [...createdAt].sort((a, b) => a - b);
  const gaps = at.slice(1).map((t, i) => t - at[i]!);
  const rate = (xs: number[]) => (xs.length < 2 ? 0 : (xs.length - 1) / ((xs[xs.length - 1]! - xs[0]!) / 1000));
  const first = at.slice(0, Math.min(at.length, maxConcurrent));
  const server = [...ringingAt].sort((a, b) => a - b);
  const serverGaps = server.slice(1).map((t, i) => t - server[i]!);
  return {
    dials: at.length,
    overallPerSecond: rate(at),
    firstDialsPerSecond: rate(first),
    firstDials: first.length,
    minGapMs: gaps.length ? Math.min(...gaps) : 0,
    gapMs: percentiles(gaps),
    maxIn1s: mostInWindow(at, 1000),
    serverMinGapMs: serverGaps.length ? Math.min(...serverGaps) : 0,
    serverMaxIn1s: mostInWindow(server, 1000),
  };
}

interface Results {
  machine: string;
  options: Options;
  wallS: number;
  /** How long `POST /calls` took to answer (every call created, logged and queued). */
  postMs: number;
  finished: boolean;
  dial: DialFigures & { askedPerSecond: number; askedGapMs: number };
  cap: {
    max: number;
    /** Stand-in: REST create → the callee hangs up (else the call's end). */
    standIn: number;
    /** Server: `ringing_at` → `ended_at`. */
    server: number;
    /** Stand-in: REST create → the call's end (~100 ms after the socket closed): shown, not judged. */
    standInToEnd: number;
    /** The server's live outbound calls (ringing or later, not ended), sampled every second. */
    sampled: number;
    exceeded: boolean;
  };
  customers: { dialledOnce: number; dialledTwice: string[]; notDialled: string[] };
  latency: {
    /** Callee: media stream `start` sent → first assistant frame (the greeting). */
    greetingFromStreamMs: Percentiles;
    /** Callee: the answer → first assistant frame (TwiML request + WebSocket upgrade + the above). */
    greetingFromAnswerMs: Percentiles;
    /** Callee: the longest wait between two frames of the greeting, per call. */
    greetingMaxGapMs: Percentiles;
    /** Server, the callee's one turn: end of turn → first frame, and its split. */
    turn: Record<'totalMs' | 'serviceMs' | 'providerWaitMs' | 'modelWaitMs' | 'ttsWaitMs', Percentiles>;
    /** Callee: the end of its line → first reply frame (the endpointing delay included). */
    replyFromCalleeMs: Percentiles;
    /** Sandbox TTS, every session: first text flushed → first audio (the provider's part of a greeting). */
    ttsFlushToFirstAudioMs: Percentiles;
    /** The server: the stream's answer → the call `in-progress` is not measured; dial → answer at the stand-in. */
    dialToAnswerMs: Percentiles;
  };
  totals: {
    calls: number;
    completed: number;
    scriptErrors: string[];
    /** Greetings and replies the callee's ear could read (a late frame breaks the sandbox modem's frame). */
    understood: { greetings: number; replies: number };
    /** Frames the server's pacer sent, and sent late, up to each call's first reply frame (the greeting's). */
    greetingFrames: { sent: number; late: number; maxLateMs: number };
    endedReasons: Record<string, number>;
    standInStatuses: Record<string, number>;
    webhooks: { received: number; statusUpdates: Record<string, number>; reports: number };
    serverCpuPercent: number;
    serverCpuMsPerCall: number;
    serverEventLoopP99Ms: number;
    serverEventLoopMaxMs: number;
    /** The server's event loop held up more than STALL_MS: when (s after POST /calls) and how long. */
    serverStalls: Array<{ atS: number; ms: number }>;
    /** Garbage-collection pauses in the server over the campaign. */
    serverGc: { count: number; totalMs: number; maxMs: number };
    serverRssMb: number;
    standInCpuPercent: number;
    standInEventLoopP99Ms: number;
    loadAverage: number;
  };
  pass: boolean;
}

const ms = (v: number) => (v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2));
const count = (xs: readonly string[]) => xs.reduce<Record<string, number>>((acc, x) => ((acc[x] = (acc[x] ?? 0) + 1), acc), {});
const parseTime = (iso: string | null | undefined) => (iso ? Date.parse(iso) : null);

/** Sandbox TTS that notes, per session, when its first text was flushed and its first audio came. */
function timedTts(providers: Providers, samples: number[]): Providers {
  const tts = providers.tts.get('sandbox')!;
  const timed: TtsProvider = {
    id: 'sandbox',
    open: async (config, events, signal) => {
      let flushedAt: number | null = null;
      let heard = false;
      const session = await tts.open(
        config,
        {
          ...events,
          onAudio: (audio) => {
            if (!heard && flushedAt !== null) {
              heard = true;
              samples.push(performance.now() - flushedAt);
            }
            events.onAudio(audio);
          },
        },
        signal,
      );
      return {
        sendText: (text) => session.sendText(text),
        flush: () => {
          flushedAt ??= performance.now();
          session.flush();
        },
        end: () => {
          flushedAt ??= performance.now();
          session.end();
        },
        cancel: () => session.cancel(),
      };
    },
  };
  providers.tts.set('sandbox', timed);
  return providers;
}

// ---------------------------------------------------------------------------------------------
// the server (this process)

async function serverMain(o: Options): Promise<Results> {
  const logLevel = process.env.LOG_LEVEL ?? 'silent';
  const db = await openDb({ dataDir: null });
  const store = createStore(db);
  const standIn = startStandIn(o);
  const { twilioUrl, hooksUrl } = await standIn.ready;
  let standInProgress = { created: 0, answered: 0, ended: 0 };
  standIn.on((m) => {
    if (m.type === 'progress') standInProgress = m;
  });

  const port = await freePort();
  const config = loadConfig({
    LOG_LEVEL: logLevel,
    WEBHOOK_ALLOW_PRIVATE: 'true',
    RATE_LIMIT_PER_MINUTE: '0',
    PORT: String(port),
    HOST: '127.0.0.1',
    TWILIO_API_BASE: twilioUrl,
  });
  const logger = createLogger(config.LOG_LEVEL);
  const firstTurns = new Map<string, TurnLatency>();
  const ttsSamples: number[] = [];
  const providers = timedTts(createProviders(providerSettings(config)), ttsSamples);
  const runtime = await createRuntime({
    config,
    store,
    logger,
    providers,
    webhookQueueName: `bench-outbound-${Date.now()}`,
    onTurnLatency: (t) => {
      if (!firstTurns.has(t.callId)) firstTurns.set(t.callId, t);
    },
  });
  const app = await buildApp({ config, store, logger, runtime });
  await app.listen({ port, host: '127.0.0.1' });

  const { key } = await store.keys.createKey('Outbound benchmark');
  const api = async (method: 'POST' | 'PATCH', url: string, body: unknown) => {
    const res = await app.inject({ method, url, headers: { authorization: `Bearer ${key}` }, payload: body as Record<string, unknown> });
    if (res.statusCode >= 300) throw new Error(`${method} ${url}: ${res.statusCode} ${res.body}`);
    return res.json();
  };
  await api('PATCH', '/account', {
    webhook: { url: hooksUrl, secret: 'whsec_YmVuY2gtb3V0Ym91bmQtYmVuY2gtb3V0Ym91bmQ=' },
    telephony: { twilio: { account_sid: ACCOUNT_SID, auth_token: AUTH_TOKEN } },
    outbound: { max_concurrent_calls: o.maxConcurrent, calls_per_second: o.cps },
  });
  const assistant = await api('POST', '/assistants', {
    name: 'Outbound benchmark caller',
    llm_config: { provider: 'sandbox' },
    stt_config: { provider: 'sandbox' },
    tts_config: { provider: 'sandbox', voice_id: 'sandbox' },
    speech_config: { first_message_outbound: GREETING },
  });
  const number = await api('POST', '/numbers', { number: FROM_NUMBER, assistant_id: assistant.assistant.id });

  const machine = `${os.cpus()[0]?.model.trim() ?? 'unknown CPU'}, ${os.cpus().length} cores, ${Math.round(os.totalmem() / 2 ** 30)} GiB, Node ${process.version}`;
  process.stdout.write(
    `bench:outbound on ${machine}\n` +
      `  server: this process (pid ${process.pid}), PGlite in memory, in-process sessions and dialler, sandbox providers; ` +
      `Twilio stand-in and webhook receiver: a child process\n` +
      `  campaign: ${o.customers} customers, max_concurrent_calls ${o.maxConcurrent}, calls_per_second ${o.cps}; ` +
      `each callee rings ${o.ringMs} ms, hears "${GREETING}", says "${CALLEE_LINE}", hears the reply, ` +
      `${o.holdMs ? `stays on ${o.holdMs} ms, ` : ''}hangs up\n`,
  );

  // a rough length of one call (ring, greeting, line, endpointing, reply), for the deadline only
  const callS = 8 + (o.ringMs + o.holdMs) / 1000;
  const expectedS = Math.max(o.customers / o.cps, Math.ceil(o.customers / o.maxConcurrent) * callS);
  const timeoutS = o.timeoutS ?? Math.ceil(60 + 3 * expectedS);

  const eld = monitorEventLoopDelay({ resolution: ELD_RESOLUTION_MS });
  eld.enable();
  const gcPauses: number[] = [];
  const gcObserver = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) gcPauses.push(e.duration);
  });
  gcObserver.observe({ entryTypes: ['gc'] });
  const profiler = o.profile ? new Session() : null;
  if (profiler) {
    profiler.connect();
    await profiler.post('Profiler.enable');
    await profiler.post('Profiler.start');
  }
  const cpu0 = process.cpuUsage();
  const started = Date.now();
  const stalls: Array<{ atS: number; ms: number }> = [];
  let tick = performance.now();
  const stallWatch = setInterval(() => {
    const now = performance.now();
    if (now - tick > 20 + STALL_MS) stalls.push({ atS: Math.max(0, Date.now() - started - (now - tick)) / 1000, ms: now - tick - 20 });
    tick = now;
  }, 20);
  const customers = Array.from({ length: o.customers }, (_, i) => ({ number: customerNumber(i) }));
  const placed = (await api('POST', '/calls', { number_id: number.number.id, customers })) as { calls: Array<{ id: string }> };
  const postMs = Date.now() - started;
  const ids = placed.calls.map((c) => c.id);

  // until every call has ended (or the deadline), sampling the server's live outbound calls
  const tty = process.stderr.isTTY;
  let sampledMost = 0;
  let endedCount = 0;
  const records = new Map<string, CallRecord>();
  const deadline = started + timeoutS * 1000;
  for (;;) {
    const byStatus: Record<string, number> = {};
    for (const id of ids) {
      const r = await runtime.callStore.get(id);
      if (r) records.set(id, r);
      const status = r?.status ?? 'unknown';
      byStatus[status] = (byStatus[status] ?? 0) + 1;
    }
    endedCount = byStatus.ended ?? 0;
    sampledMost = Math.max(sampledMost, o.customers - endedCount - (byStatus.queued ?? 0) - (byStatus.unknown ?? 0));
    const elapsed = ((Date.now() - started) / 1000).toFixed(0);
    const line =
      `[${elapsed}s] queued ${byStatus.queued ?? 0} · ringing ${byStatus.ringing ?? 0} · in progress ${byStatus['in-progress'] ?? 0} · ended ${endedCount}/${o.customers}` +
      ` · stand-in: created ${standInProgress.created}, answered ${standInProgress.answered}, ended ${standInProgress.ended}`;
    if (tty) process.stderr.write(`\r${line.padEnd(130)}`);
    else if (Number(elapsed) % 5 === 0) process.stderr.write(`${line}\n`);
    if (endedCount >= o.customers || Date.now() > deadline) break;
    await new Promise((r) => setTimeout(r, 1000));
  }
  if (tty) process.stderr.write('\n');
  const finished = endedCount >= o.customers;
  const lastEnd = Math.max(started, ...[...records.values()].map((r) => parseTime(r.ended_at) ?? 0));
  const cpu = process.cpuUsage(cpu0);
  const wallMs = Date.now() - started;
  eld.disable();
  clearInterval(stallWatch);
  gcObserver.disconnect();
  if (profiler && o.profile) {
    const { profile } = await profiler.post('Profiler.stop');
    writeFileSync(o.profile, JSON.stringify(profile));
    profiler.disconnect();
  }
  const campaignMs = Math.max(1, finished ? lastEnd - started : wallMs);
  if (!finished) process.stderr.write(`the campaign did not end within ${timeoutS} s: ${endedCount} of ${o.customers} calls ended\n`);

  // the last webhooks (the reports) reach the receiver and the stand-in's calls wind down, then its view
  const hooksDeadline = Date.now() + 10_000;
  let report: StandInReport;
  for (;;) {
    const got = new Promise<StandInReport>((resolve) => standIn.on((m) => m.type === 'report' && resolve(m.report)));
    standIn.send({ type: 'collect' });
    report = await got;
    const settled = Object.keys(report.reports).length >= endedCount && report.calls.every((c) => c.endedAt !== null);
    if (settled || Date.now() > hooksDeadline) break;
    await new Promise((r) => setTimeout(r, 500));
  }

  // --- the figures
  const created = report.calls;
  const answered = created.filter((c) => c.status !== 'queued');
  const dial = dialFigures(
    report.creates.filter((c) => c.status === 201).map((c) => c.at),
    [...records.values()].map((r) => parseTime(r.ringing_at)).filter((t): t is number => t !== null),
    o.maxConcurrent,
  );
  const standInView = mostAtOnce(
    created.map((c) => [c.createdAt, c.legEndedBy === 'callee' && c.callee.hangUpAt !== null ? c.callee.hangUpAt : (c.endedAt ?? Date.now())] as const),
  );
  const standInToEnd = mostAtOnce(created.map((c) => [c.createdAt, c.endedAt ?? Date.now()] as const));
  const serverView = mostAtOnce(
    [...records.values()]
      .filter((r) => r.ringing_at)
      .map((r) => [parseTime(r.ringing_at)!, parseTime(r.ended_at) ?? Date.now()] as const),
  );
  const capMax = Math.max(standInView.most, serverView.most, sampledMost);

  const perCustomer = count(report.creates.filter((c) => c.status === 201).map((c) => c.to));
  const dialledTwice = customers.map((c) => c.number).filter((n) => (perCustomer[n] ?? 0) > 1);
  const notDialled = customers.map((c) => c.number).filter((n) => (perCustomer[n] ?? 0) === 0);

  const diffs = (f: (c: StandInCallReport) => number | null) => created.map(f).filter((v): v is number => v !== null);
  const turns = ids.map((id) => firstTurns.get(id)).filter((t): t is TurnLatency => t !== undefined);
  const turnPart = (part: 'totalMs' | 'serviceMs' | 'providerWaitMs' | 'modelWaitMs' | 'ttsWaitMs') => percentiles(turns.map((t) => t[part]));

  const scriptErrors = created
    .filter((c) => c.callee.error !== null)
    .map((c) => `${c.to} (${c.sid}): ${c.callee.error}${c.errors.length ? `; stand-in: ${c.errors.join('; ')}` : ''}`);
  // the pacer's own count, as of each call's first reply frame: the greeting's frames (and that one)
  const greetingFrames = turns.reduce(
    (acc, t) => ({ sent: acc.sent + t.outbound.framesSent, late: acc.late + t.outbound.framesLate, maxLateMs: Math.max(acc.maxLateMs, t.outbound.maxLateMs) }),
    { sent: 0, late: 0, maxLateMs: 0 },
  );
  const endedReasons = count([...records.values()].map((r) => (r.status === 'ended' ? (r.ended_reason ?? 'unknown') : `(still ${r.status})`)));
  const completed = [...records.values()].filter((r) => r.status === 'ended' && r.ended_reason === 'customer-ended-call').length;
  const statusUpdates = count(Object.values(report.statusUpdates).flat());

  const cpuMs = (cpu.user + cpu.system) / 1000;
  const results: Results = {
    machine,
    options: o,
    wallS: campaignMs / 1000,
    postMs,
    finished,
    dial: { ...dial, askedPerSecond: o.cps, askedGapMs: Math.ceil(1000 / o.cps) },
    cap: {
      max: capMax,
      standIn: standInView.most,
      server: serverView.most,
      standInToEnd: standInToEnd.most,
      sampled: sampledMost,
      exceeded: capMax > o.maxConcurrent,
    },
    customers: { dialledOnce: customers.length - dialledTwice.length - notDialled.length, dialledTwice, notDialled },
    latency: {
      greetingFromStreamMs: percentiles(diffs((c) => (c.callee.firstFrameAt !== null && c.callee.streamAt !== null ? c.callee.firstFrameAt - c.callee.streamAt : null))),
      greetingFromAnswerMs: percentiles(diffs((c) => (c.callee.firstFrameAt !== null && c.answeredAt !== null ? c.callee.firstFrameAt - c.answeredAt : null))),
      greetingMaxGapMs: percentiles(diffs((c) => c.callee.greetingMaxGapMs)),
      turn: {
        totalMs: turnPart('totalMs'),
        serviceMs: turnPart('serviceMs'),
        providerWaitMs: turnPart('providerWaitMs'),
        modelWaitMs: turnPart('modelWaitMs'),
        ttsWaitMs: turnPart('ttsWaitMs'),
      },
      replyFromCalleeMs: percentiles(diffs((c) => (c.callee.firstReplyFrameAt !== null && c.callee.saidEndAt !== null ? c.callee.firstReplyFrameAt - c.callee.saidEndAt : null))),
      ttsFlushToFirstAudioMs: percentiles(ttsSamples),
      dialToAnswerMs: percentiles(diffs((c) => (c.answeredAt !== null ? c.answeredAt - c.createdAt : null))),
    },
    totals: {
      calls: ids.length,
      completed,
      scriptErrors,
      understood: { greetings: created.filter((c) => c.callee.greetingUnderstood).length, replies: created.filter((c) => c.callee.replyUnderstood).length },
      greetingFrames,
      endedReasons,
      standInStatuses: count(created.map((c) => c.status)),
      webhooks: { received: report.webhooks, statusUpdates, reports: Object.keys(report.reports).length },
      serverCpuPercent: (cpuMs / wallMs) * 100,
      serverCpuMsPerCall: cpuMs / Math.max(1, answered.length),
      serverEventLoopP99Ms: lagMs(eld.percentile(99)),
      serverEventLoopMaxMs: lagMs(eld.max),
      serverStalls: stalls,
      serverGc: { count: gcPauses.length, totalMs: gcPauses.reduce((a, b) => a + b, 0), maxMs: Math.max(0, ...gcPauses) },
      serverRssMb: process.memoryUsage().rss / 2 ** 20,
      standInCpuPercent: (report.cpuMs / (Date.now() - started)) * 100,
      standInEventLoopP99Ms: report.eventLoopP99Ms,
      loadAverage: os.loadavg()[0]!,
    },
    pass: false,
  };
  results.pass =
    finished && !results.cap.exceeded && dialledTwice.length === 0 && notDialled.length === 0 && scriptErrors.length === 0 && completed === o.customers;

  printResults(results);
  if (o.json) {
    const calls = created.map((c) => ({ ...c, record: pickRecord(records.get(ids.find((id) => records.get(id)?.transport_ids.call_sid === c.sid) ?? '')) }));
    writeFileSync(o.json, `${JSON.stringify({ ...results, calls }, null, 2)}\n`);
    process.stdout.write(`results written to ${o.json}\n`);
  }

  standIn.send({ type: 'stop' });
  await new Promise<void>((r) => (standIn.child.exitCode !== null ? r() : standIn.child.once('exit', () => r())));
  await runtime.close(5_000);
  await app.close();
  await db.close();
  return results;
}

function pickRecord(r: CallRecord | undefined) {
  if (!r) return null;
  return {
    id: r.id,
    status: r.status,
    ended_reason: r.ended_reason,
    ringing_at: r.ringing_at ?? null,
    started_at: r.started_at,
    ended_at: r.ended_at,
    errors: r.errors,
    transcript: r.messages.map((m) => `${m.time} ${m.role}: ${m.content}`),
  };
}

function printResults(r: Results): void {
  const row = (name: string, p: Percentiles) =>
    `  ${name.padEnd(52)} ${ms(p.p50).padStart(8)} ${ms(p.p95).padStart(8)} ${ms(p.p99).padStart(8)} ${ms(p.max).padStart(8)} ${String(p.count).padStart(6)}`;
  const l = r.latency;
  const t = r.totals;
  const d = r.dial;
  const o = r.options;
  const yes = (ok: boolean) => (ok ? 'yes' : 'NO');
  process.stdout.write(
    [
      '',
      `${t.calls} calls: ${t.completed} completed as scripted (customer-ended-call), ${r.finished ? 'every call ended' : 'NOT every call ended'}; ` +
        `campaign ${r.wallS.toFixed(1)} s from POST /calls to the last call's end; POST /calls answered in ${r.postMs} ms`,
      '',
      `dial rate (the stand-in's REST creates; asked: ${o.cps}/s, at least ${d.askedGapMs} ms apart)`,
      `  ${d.dials} dials; ${d.overallPerSecond.toFixed(2)}/s over the campaign; ${d.firstDialsPerSecond.toFixed(2)}/s over the first ${d.firstDials} (before the cap could hold dialling back)`,
      `  gap between dials: smallest ${ms(d.minGapMs)} ms, p50 ${ms(d.gapMs.p50)} ms, p99 ${ms(d.gapMs.p99)} ms; most dials in any 1 s window: ${d.maxIn1s} ` +
        `(server's ringing_at: smallest gap ${ms(d.serverMinGapMs)} ms, most in 1 s ${d.serverMaxIn1s})`,
      `  rate held at the carrier (at most ${Math.ceil(o.cps)} creates in any 1 s window): ${yes(d.maxIn1s <= Math.ceil(o.cps))}; ` +
        `no two creates closer than ${d.askedGapMs} ms: ${yes(d.minGapMs >= d.askedGapMs)} (reported, not judged: see docs/benchmarks.md)`,
      '',
      `concurrency (asked: max_concurrent_calls ${o.maxConcurrent})`,
      `  most live at once: ${r.cap.max} (stand-in, create → callee hangs up: ${r.cap.standIn}; server, ringing_at → ended_at: ${r.cap.server}; ` +
        `server sampled each second: ${r.cap.sampled}); stand-in create → call resource ended (~100 ms after the socket): ${r.cap.standInToEnd}`,
      `  cap never exceeded: ${yes(!r.cap.exceeded)}`,
      `  customers dialled exactly once: ${r.customers.dialledOnce} of ${t.calls}` +
        (r.customers.dialledTwice.length ? `; TWICE OR MORE: ${r.customers.dialledTwice.slice(0, 10).join(', ')}` : '') +
        (r.customers.notDialled.length ? `; NOT DIALLED: ${r.customers.notDialled.slice(0, 10).join(', ')}${r.customers.notDialled.length > 10 ? ', …' : ''}` : ''),
      '',
      `latency (ms)                                                    p50      p95      p99      max  count`,
      row('greeting: media stream start → first frame (callee)', l.greetingFromStreamMs),
      row('greeting: answer → first frame (callee)', l.greetingFromAnswerMs),
      row('greeting: longest wait between two of its frames (callee)', l.greetingMaxGapMs),
      row("callee's turn: end of turn → first frame (server)", l.turn.totalMs),
      row("callee's turn: service share (server)", l.turn.serviceMs),
      row("callee's turn: provider wait (model + TTS)", l.turn.providerWaitMs),
      row("callee's line ended → first reply frame (callee)", l.replyFromCalleeMs),
      row('sandbox TTS: text flushed → first audio (all sessions)', l.ttsFlushToFirstAudioMs),
      row('dial → answer (stand-in, ring time included)', l.dialToAnswerMs),
      '  The greeting is not a turn in the turn accounting; its figures are taken at the callee (ms clock) and include',
      "  the server's call start (session, STT open, TTS of the line, the first frame paced out), the sandbox TTS's own time",
      "  (the TTS row), loopback WebSocket delivery and the stand-in process's event loop. The answer row adds the TwiML",
      "  request and the WebSocket upgrade. The callee's end of line → first reply includes the endpointing delay (a wait by design).",
      '',
      `totals`,
      `  ended reasons: ${Object.entries(t.endedReasons).map(([k, v]) => `${k} ${v}`).join(', ')}; stand-in statuses: ${Object.entries(t.standInStatuses).map(([k, v]) => `${k} ${v}`).join(', ')}`,
      `  webhooks received: ${t.webhooks.received} (status-updates ${Object.entries(t.webhooks.statusUpdates).map(([k, v]) => `${k} ${v}`).join(', ')}; end-of-call-reports ${t.webhooks.reports})`,
      `  server CPU: ${t.serverCpuPercent.toFixed(0)}% of one core over the campaign, ${t.serverCpuMsPerCall.toFixed(1)} ms per answered call; ` +
        `event-loop lag p99 ${ms(t.serverEventLoopP99Ms)} ms, max ${ms(t.serverEventLoopMaxMs)} ms; RSS ${t.serverRssMb.toFixed(0)} MB`,
      `  server event loop held up over ${STALL_MS} ms: ${t.serverStalls.length} times` +
        (t.serverStalls.length ? ` (${t.serverStalls.slice(0, 8).map((x) => `${x.ms.toFixed(0)} ms at ${x.atS.toFixed(1)} s`).join(', ')}${t.serverStalls.length > 8 ? ', …' : ''})` : '') +
        `; GC: ${t.serverGc.count} pauses, ${ms(t.serverGc.totalMs)} ms in all, longest ${ms(t.serverGc.maxMs)} ms`,
      `  stand-in process: CPU ${t.standInCpuPercent.toFixed(0)}% of one core, event-loop lag p99 ${ms(t.standInEventLoopP99Ms)} ms; machine load average ${t.loadAverage.toFixed(1)}`,
      `  the callee's ear read ${t.understood.greetings} greetings and ${t.understood.replies} replies of ${t.calls}; ` +
        `the server's pacer sent ${t.greetingFrames.late} of ${t.greetingFrames.sent} greeting frames late (max ${ms(t.greetingFrames.maxLateMs)} ms)`,
      ...t.scriptErrors.slice(0, 10).map((e) => `  script error: ${e}`),
      ...(t.scriptErrors.length > 10 ? [`  … and ${t.scriptErrors.length - 10} more script errors`] : []),
      '',
      `pass (every call ended and completed its script, cap never exceeded, every customer dialled once): ${yes(r.pass)}`,
      '',
    ].join('\n'),
  );
}

// ---------------------------------------------------------------------------------------------

const argv = process.argv.slice(2);
const role = argv.includes('--role') ? argv[argv.indexOf('--role') + 1] : 'server';
if (role === 'twilio') {
  await standInMain(parseOptions(argv));
} else {
  const results = await serverMain(parseOptions(argv));
  process.exitCode = results.pass ? 0 : 1;
}
