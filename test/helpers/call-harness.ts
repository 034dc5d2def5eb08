/**
 * One call in memory, for the fast call tests (test/fast-calls/, docs/testing.md): the record a
 * call service would make (an effective assistant, a validated workflow), an in-memory notifier
 * and store, a silent logger, scripted providers and the call (the controller with the pipeline or
 * the realtime backend, as the service would pick) on a `MemoryTransport`, with a caller that speaks, makes noise, presses
 * keys and hangs up. Everything runs on fake timers (`useFastCalls()`): `advance(ms)` plays that
 * much of the call, in milliseconds of wall time.
 */
import type { CallError } from '../../src/errors.js';
import { afterEach, beforeEach, vi } from 'vitest';
import { pino } from 'pino';
import { AssistantCreate, assistantProblems, effectiveAssistant, type AssistantFields, type EffectiveAssistant } from '../../engine/assistant.js';
import { callStartChecks } from '../../engine/checks.js';
import { formatZodIssues, validateDefinition } from '../../engine/validate.js';
import type { ActiveCall } from '../../src/calls/active-call.js';
import { createCall } from '../../src/calls/call.js';
import type { TurnLatency } from '../../src/calls/latency.js';
import type { ListenHub } from '../../src/calls/listen.js';
import type { CallNotifier, ToolCallOutcome, ToolCallRequest } from '../../src/calls/notifier.js';
import { MemoryCallStore, newCallRecord, type CallRecord, type CallStatus } from '../../src/calls/store.js';
import type { Providers, RealtimeProvider, SttProvider, TtsProvider } from '../../src/providers/types.js';
import { MemoryTransport, type MemoryTransportOptions } from './memory-transport.js';
import { callerVoiceFrames } from './caller-voice.js';
import { framesOf, noiseFrames, ScriptedLlm, ScriptedRealtime, ScriptedStt, ScriptedTts, SyntheticVoice } from './scripted-providers.js';

/** Every clock a call reads: timers, immediates, `Date` and `performance.now()` (the pacer's tick, turn-taking). */
export const FAKE_CLOCK = ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'setImmediate', 'clearImmediate', 'Date', 'performance'] as const;

const harnesses = new Set<CallHarness>();

/**
 * Fake timers around each test of the file, and after it: every call it made ended, and no timer
 * left behind (a call that leaks one fails its test).
 */
export function useFastCalls(): void {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: [...FAKE_CLOCK] });
  });
  afterEach(async () => {
    try {
      for (const h of [...harnesses]) await h.dispose();
    } finally {
      harnesses.clear();
      vi.clearAllTimers();
      vi.useRealTimers();
    }
  });
}

// ---------------------------------------------------------------------------------------------
// the customer's servers

export type ToolAnswer = ({ result: unknown } | { error: string }) & { delayMs?: number };

/** Webhooks as the call sends them, kept in memory; `tool-calls` answered by `answer`. */
export class MemoryNotifier implements CallNotifier {
  readonly statuses: Array<{ status: CallStatus; extra?: Record<string, unknown>; at: number }> = [];
  /** End-of-call reports: the record as it was sent. */
  readonly reports: CallRecord[] = [];
  readonly toolRequests: Array<{ calls: ToolCallRequest[]; url?: string | undefined; nodeId?: string; async?: boolean; at: number }> = [];
  answer: (call: ToolCallRequest, options: { url?: string | undefined; nodeId?: string }) => ToolAnswer = () => ({ error: 'no answer scripted' });

  async statusUpdate(_call: CallRecord, status: CallStatus, extra?: { ended_reason?: string; errors?: CallError[]; destination?: string }): Promise<void> {
    this.statuses.push({ status, ...(extra ? { extra } : {}), at: performance.now() });
  }

  async endOfCallReport(call: CallRecord): Promise<void> {
    this.reports.push(structuredClone(call));
  }

  async toolCalls(
    _call: CallRecord,
    calls: ToolCallRequest[],
    options: { url?: string | undefined; nodeId?: string; async?: boolean },
  ): Promise<ToolCallOutcome[]> {
    this.toolRequests.push({ calls: structuredClone(calls), ...options, at: performance.now() });
    if (options.async) return [];
    return Promise.all(
      calls.map(async (c): Promise<ToolCallOutcome> => {
        const answer = this.answer(c, options);
        if (answer.delayMs) await new Promise((r) => setTimeout(r, answer.delayMs));
        return 'error' in answer ? { tool_call_id: c.id, error: answer.error } : { tool_call_id: c.id, result: answer.result };
      }),
    );
  }
}

// ---------------------------------------------------------------------------------------------
// the harness

export interface CallHarnessOptions {
  /** `pipeline` (STT → LLM → TTS, the default) or `realtime` (one speech-to-speech model). */
  kind?: 'pipeline' | 'realtime';
  /** Assistant fields over the kind's providers (`speech_config`, `first_message`, `llm_config` with its provider, …). */
  assistant?: Record<string, unknown>;
  /** A workflow (validated as the API would); none: the assistant alone. */
  definition?: unknown;
  transport?: MemoryTransportOptions;
  /** Fake ms of speech per character (default 20: one frame per character). */
  msPerChar?: number;
  /** Listen-in: the call registers with this hub (src/calls/listen.ts). */
  listen?: ListenHub;
  /** A real STT adapter, under its id, in place of the scripted one (the caller's audio reaches it). */
  sttAdapter?: SttProvider;
  /** A vendor's own realtime adapter (against its wire fake), under its id beside the scripted ones. */
  realtimeAdapter?: RealtimeProvider;
  /** A real TTS adapter (at its vendor's fake) in place of the scripted voice, for every TTS id. */
  tts?: TtsProvider;
}

export interface SayOptions {
  /** How long the caller speaks (default: the voice's length for the text). */
  ms?: number;
  /** Pipeline: the final transcript carries `speechFinal` (the vendor heard the pause; default true). */
  speechFinal?: boolean;
  /** Pipeline: interim transcripts word by word while speaking (default true). */
  interims?: boolean;
  /** Pipeline: the final transcript at the end (default true; false: the test sends it, or none comes). */
  final?: boolean;
}

const PROVIDER_IDS = {
  stt: ['sandbox', 'deepgram', 'openai', 'openai-compatible'],
  llm: ['sandbox', 'openai', 'custom-llm'],
  tts: ['sandbox', 'elevenlabs', 'openai', 'cartesia', 'deepgram', 'openai-compatible'],
  realtime: ['sandbox-realtime', 'openai-realtime', 'google-live'],
};

export class CallHarness {
  readonly voice: SyntheticVoice;
  readonly stt: ScriptedStt;
  readonly llm: ScriptedLlm;
  readonly tts: ScriptedTts;
  readonly realtime: ScriptedRealtime;
  readonly notifier = new MemoryNotifier();
  readonly store = new MemoryCallStore();
  readonly transport: MemoryTransport;
  readonly record: CallRecord;
  readonly assistant: EffectiveAssistant;
  readonly call: ActiveCall;
  /** Each caller turn's latency, as the runtime's metrics get it (the runtime always asks for them). */
  readonly latencies: TurnLatency[] = [];
  /** Fake performance.now() when the harness was made: `now()` counts from here. */
  readonly t0: number;

  constructor(options: CallHarnessOptions = {}) {
    if (!vi.isFakeTimers()) throw new Error('callHarness() runs on fake timers: call useFastCalls() in the test file');
    this.t0 = performance.now();
    this.voice = new SyntheticVoice(options.msPerChar ?? 20);
    this.stt = new ScriptedStt();
    this.llm = new ScriptedLlm();
    this.tts = new ScriptedTts(this.voice);
    this.realtime = new ScriptedRealtime(this.voice);
    this.transport = new MemoryTransport(options.transport);

    const base =
      options.kind === 'realtime'
        ? { name: 'Fast realtime call', llm_config: { provider: 'sandbox-realtime' } }
        : {
            name: 'Fast pipeline call',
            llm_config: { provider: 'sandbox' },
            stt_config: { provider: 'sandbox' },
            tts_config: { provider: 'sandbox', voice_id: 'sandbox' },
          };
    const parsed = AssistantCreate.safeParse({ ...base, ...options.assistant });
    if (!parsed.success) throw new Error(`the test's assistant is not valid: ${formatZodIssues(parsed.error.issues).join('; ')}`);
    const fields = parsed.data as AssistantFields;
    const fieldProblems = assistantProblems(fields);
    if (fieldProblems.length > 0) throw new Error(`the test's assistant is not valid: ${fieldProblems.join('; ')}`);
    let definition = null;
    if (options.definition !== undefined) {
      const valid = validateDefinition(options.definition);
      if (!valid.ok) throw new Error(`the test's workflow is not valid: ${valid.details.join('; ')}`);
      definition = valid.definition;
    }
    const refused = callStartChecks(fields, definition);
    if (refused.length > 0) throw new Error(`the call would be refused at start: ${refused.map((p) => p.message).join('; ')}`);
    this.assistant = effectiveAssistant(fields);

    const record = newCallRecord({
      organization_id: 'org_fast',
      number_id: 'num_fast',
      phone_number: { number: '+15550100100', name: null },
      customer: { number: '+15005550006' },
      transport: this.transport.kind,
      transport_ids: {},
    });
    record.status = 'in-progress';
    record.started_at = new Date().toISOString();
    record.assistant_id = 'asst_fast';
    record.assistant = this.assistant as unknown as Record<string, unknown>;
    record.workflow_id = definition ? 'wf_fast' : null;
    record.definition = definition as unknown as Record<string, unknown> | null;
    this.record = record;

    const byIds = <T>(ids: string[], provider: T) => new Map(ids.map((id) => [id, provider]));
    const providers: Providers = {
      stt: byIds<SttProvider>(PROVIDER_IDS.stt, this.stt),
      llm: byIds(PROVIDER_IDS.llm, this.llm),
      tts: byIds<TtsProvider>(PROVIDER_IDS.tts, options.tts ?? this.tts),
      realtime: byIds<RealtimeProvider>(PROVIDER_IDS.realtime, this.realtime),
    };
    if (options.sttAdapter) providers.stt.set(options.sttAdapter.id, options.sttAdapter);
    if (options.realtimeAdapter) providers.realtime.set(options.realtimeAdapter.id, options.realtimeAdapter);
    const deps = {
      providers,
      notifier: this.notifier,
      store: this.store,
      logger: pino({ level: 'silent' }),
      onTurnLatency: (latency: TurnLatency) => this.latencies.push(latency),
      ...(options.listen ? { listen: options.listen } : {}),
    };
    this.call = createCall(record, this.transport, deps);
    this.transport.attach(this.call);
    harnesses.add(this);
  }

  // ------------------------------------------------------------------------------------------
  // time

  /** Fake ms since the harness was made. */
  now(): number {
    return performance.now() - this.t0;
  }

  /** A fake performance.now() reading as ms since the harness was made. */
  rel(at: number): number {
    return at - this.t0;
  }

  /** Plays `ms` more of the call (every timer due meanwhile fires, promises settle between them). */
  async advance(ms: number): Promise<void> {
    await vi.advanceTimersByTimeAsync(ms);
  }

  /** Advances in `stepMs` steps until `probe` holds; returns when (`now()`). Fails naming `what` after `maxMs`. */
  async until(what: string, probe: () => unknown, maxMs = 60_000, stepMs = 1): Promise<number> {
    const deadline = this.now() + maxMs;
    while (!probe()) {
      if (this.now() >= deadline) throw new Error(`${what}: not after ${maxMs} fake ms; heard ${JSON.stringify(this.heard())}`);
      await this.advance(stepMs);
    }
    return this.now();
  }

  // ------------------------------------------------------------------------------------------
  // the call

  /** The media stream started, as the call service starts a call (not waited for: a failure ends it). */
  async start(): Promise<void> {
    await this.store.create(this.record);
    this.call.start().catch((err: unknown) => this.call.fail(err, 'start'));
    await this.advance(0);
  }

  /** Plays the call until it has ended and its report was sent; returns the report. */
  async untilEnded(maxMs = 120_000): Promise<CallRecord> {
    await this.until('the end of the call', () => this.notifier.reports.length > 0, maxMs, 10);
    return this.notifier.reports[0]!;
  }

  get endedReason(): string | null {
    return this.record.ended_reason;
  }

  /** The record's messages as `[role, content]`. */
  messages(): Array<[string, string]> {
    return this.record.messages.map((m) => [m.role, m.content]);
  }

  /** The lines (TTS texts; realtime: whole responses) the caller heard whole by now, in the order they ended. */
  heard(): string[] {
    const now = performance.now();
    const lines = new Map<number, { text: string; count: number; played: Set<number>; doneAt: number }>();
    for (const f of this.transport.frames) {
      const v = this.voice.decode(f.frame);
      if (!v || !this.transport.playedWhole(f, now)) continue;
      const line = lines.get(v.line) ?? { text: v.text, count: v.count, played: new Set<number>(), doneAt: 0 };
      line.played.add(v.index);
      line.doneAt = Math.max(line.doneAt, f.endsAt);
      lines.set(v.line, line);
    }
    return [...lines.values()]
      .filter((l) => l.played.size === l.count)
      .sort((a, b) => a.doneAt - b.doneAt)
      .map((l) => l.text);
  }

  /** Fake time (`now()` scale) when the caller had heard the line `text` whole. */
  heardAt(text: string): number {
    const now = performance.now();
    let line: number | null = null;
    let doneAt = 0;
    for (const f of this.transport.frames) {
      const v = this.voice.decode(f.frame);
      if (!v || v.text !== text || !this.transport.playedWhole(f, now)) continue;
      line ??= v.line;
      if (v.line === line) doneAt = Math.max(doneAt, f.endsAt);
    }
    if (line === null) throw new Error(`the caller never heard "${text}"; heard ${JSON.stringify(this.heard())}`);
    return this.rel(doneAt);
  }

  // ------------------------------------------------------------------------------------------
  // the caller

  readonly caller = {
    /**
     * The caller speaks `text`: pipeline, the caller's voice through the transport (the call's
     * voice-activity detector hears it, `callerVoiceFrames`), the vendor's speech start, interim
     * words and the final transcript at the end (from the STT); realtime, the voice's audio
     * through the transport (server VAD).
     * Resolves once it has been said; returns when the speech started (`now()`).
     */
    say: async (text: string, options: SayOptions = {}): Promise<number> => {
      const startedAt = this.now();
      const ms = options.ms ?? this.voice.msOf(text);
      const spoken = framesOf(this.voice.speak(text));
      const frames = Math.max(1, Math.ceil(ms / 20));
      if (this.assistant.realtime) {
        for (let i = 0; i < frames; i++) {
          this.transport.audio(spoken[i % spoken.length]!);
          await this.advance(20);
        }
        return startedAt;
      }
      const words = text.trim().split(/\s+/);
      const interimAt = words.slice(0, -1).map((_, i) => Math.round(((i + 1) * ms) / words.length));
      const voice = callerVoiceFrames(ms);
      this.stt.speechStarted();
      let at = 0;
      for (let i = 0; i < frames; i++) {
        this.transport.audio(voice[i]!);
        const next = Math.min(ms, at + 20);
        for (const [w, t] of interimAt.entries()) {
          if (options.interims !== false && t > at && t <= next && t < ms) {
            await this.advance(t - at);
            at = t;
            this.stt.interim(words.slice(0, w + 1).join(' '));
          }
        }
        await this.advance(next - at);
        at = next;
      }
      if (options.final !== false) this.stt.final(text, options.speechFinal ?? true);
      return startedAt;
    },

    /**
     * Sound without words for `ms` (a cough, an "uh"): the vendor's speech start and no transcript;
     * pipeline: the caller's voice (the detector hears it), realtime: noise (the model's VAD does).
     */
    noise: async (ms: number): Promise<number> => {
      const startedAt = this.now();
      if (!this.assistant.realtime) this.stt.speechStarted();
      for (const frame of this.assistant.realtime ? noiseFrames(ms) : callerVoiceFrames(ms)) {
        this.transport.audio(frame);
        await this.advance(20);
      }
      return startedAt;
    },

    /**
     * μ-law 8 kHz audio (a fixture of test/fixtures/vad/) in 20 ms frames, in real time, with no
     * transcript: what the STT says of it, if anything, the test scripts. Returns when it started.
     */
    play: async (mulaw: Buffer): Promise<number> => {
      const startedAt = this.now();
      for (const frame of framesOf(mulaw)) {
        this.transport.audio(frame);
        await this.advance(20);
      }
      return startedAt;
    },

    press: (digit: string): void => this.transport.dtmf(digit),

    hangUp: (): void => this.transport.callerHangsUp(),
  };

  // ------------------------------------------------------------------------------------------

  /** Ends the call if it is still up, plays it out, and fails when a timer is left behind. */
  async dispose(): Promise<void> {
    harnesses.delete(this);
    if (!this.call.isEnded()) void this.call.terminate('test-over');
    await this.until('the call to end at dispose', () => this.notifier.reports.length > 0, 30_000, 10);
    // one-shot stragglers (a save coalesced just before the end: it finds the ledger closed) run out;
    // a 0 ms timer made inside a fake tick is due 1 ms later
    await this.advance(100);
    const left = vi.getTimerCount();
    if (left > 0) {
      const clock = (globalThis.setTimeout as unknown as { clock?: { timers?: Record<string, { callAt: number; interval?: number; func: () => void }> } }).clock;
      const timers = Object.values(clock?.timers ?? {}).map((t) => `at ${Math.round(t.callAt - performance.now())} ms${t.interval ? ` every ${t.interval} ms` : ''}: ${String(t.func).slice(0, 300)}`);
      throw new Error(`${left} timer(s) left behind once the call had ended:\n${timers.join('\n')}`);
    }
  }
}

/** A call in memory: see `CallHarness`. */
export function callHarness(options: CallHarnessOptions = {}): CallHarness {
  return new CallHarness(options);
}
