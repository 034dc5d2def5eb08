/**
 * The vendors of a real deployment, as one process of fakes that behave like the sandbox:
 * `node --import tsx test/bench/vendor-fakes.ts [--deepgram-ms MS] [--openai-ms MS] [--elevenlabs-ms MS]`.
 * `npm run bench:calls -- --providers vendors` forks it, so that the server's adapters talk to
 * vendors over real sockets in another process, as they would in production.
 *
 * - **Deepgram** (live `/v1/listen` WebSocket, test/fakes/deepgram.ts): each stream's μ-law audio
 *   goes through the sandbox STT's decoder (`SandboxSttSession`, with the stream's `endpointing`,
 *   10 ms when not given, as Deepgram's, and `utterance_end_ms`), and what it hears goes back as
 *   Deepgram does: `SpeechStarted`, interim and final `Results` (`speech_final` when the caller
 *   paused), `UtteranceEnd` (only when `utterance_end_ms` is set), and a `from_finalize` final
 *   for each `Finalize`.
 * - **OpenAI chat completions** (SSE, test/fakes/openai-chat.ts): the request's messages and tools
 *   go to the sandbox model (`createSandboxLlm`), and its text pieces or function call are streamed
 *   back as `chat.completion.chunk`s.
 * - **ElevenLabs** (stream-input WebSocket, test/fakes/elevenlabs.ts): each generation's text is
 *   spoken with the sandbox TTS (`synthesizeSandboxSpeech`) and streamed as base64 `ulaw_8000`
 *   audio messages of `--tts-chunk-bytes` (1,000 by default) with their alignment.
 *
 * - **Cartesia** (`/tts/websocket`, test/fakes/cartesia.ts), **Deepgram Aura** (`/v1/speak`,
 *   test/fakes/deepgram-speak.ts) and **a server of OpenAI's speech endpoint** (test/fakes/
 *   openai-tts.ts, no key, WAV at 24 kHz: the sandbox speech upsampled, which the adapter brings
 *   back to 8 kHz): the voices `--tts cartesia|deepgram|openai-compatible` of the benchmark.
 *
 * Latency (each 0 by default): `--deepgram-ms` delays every Deepgram message (transcription lag),
 * `--openai-ms` the response headers of each completion (time to first byte), `--elevenlabs-ms`
 * the first audio of each generation.
 *
 * Keys: `DEEPGRAM_KEY`, `OPENAI_KEY`, `ELEVENLABS_KEY`, `CARTESIA_KEY` below. Run by hand it prints its addresses
 * as one line of JSON; forked, it sends them as `{type: 'ready', ...}` and answers `{type: 'cpu'}`
 * with its own CPU time and counts (so the benchmark can say what the fakes cost the machine).
 */
import { fileURLToPath } from 'node:url';
import type { LlmConfig, SttConfig } from '../../engine/schema.js';
import { mulawDecode } from '../../src/audio/mulaw.js';
import { resample } from '../../src/audio/resample.js';
import { SandboxSttSession, createSandboxLlm, synthesizeSandboxSpeech } from '../../src/providers/sandbox/index.js';
import type { LlmFunction, LlmMessage, LlmToolCall } from '../../src/providers/types.js';
import { startFakeCartesia } from '../fakes/cartesia.js';
import { startFakeDeepgramSpeak } from '../fakes/deepgram-speak.js';
import { startFakeOpenAiTts } from '../fakes/openai-tts.js';
import { startFakeDeepgram, type DeepgramFakeStep, type DeepgramFakeTranscriber, type DeepgramFakeTranscriberContext } from '../fakes/deepgram.js';
import { startFakeElevenLabs } from '../fakes/elevenlabs.js';
import { startFakeOpenAiChat, type FakeCompletion } from '../fakes/openai-chat.js';

export const DEEPGRAM_KEY = 'dg-bench-key';
export const OPENAI_KEY = 'sk-bench-key';
export const ELEVENLABS_KEY = 'xi-bench-key';
export const CARTESIA_KEY = 'sk_car_bench';
const DEEPGRAM_DEFAULT_ENDPOINTING_MS = 10;

export interface VendorFakesOptions {
  deepgramMs: number;
  openaiMs: number;
  elevenlabsMs: number;
  ttsChunkBytes: number;
}

export interface VendorFakesAddresses {
  deepgram: string;
  openai: string;
  elevenlabs: string;
  cartesia: string;
  /** Deepgram's `/v1/speak` (Aura), a fake of its own beside the `/v1/listen` one. */
  deepgramSpeak: string;
  /** A server of OpenAI's `/v1/audio/speech` (`openai-compatible`). */
  speech: string;
}

/** What the fakes process tells its parent. */
export type FromVendorFakes =
  | ({ type: 'ready'; pid: number } & VendorFakesAddresses)
  | { type: 'cpu'; userUs: number; systemUs: number; counts: VendorFakesCounts };
export type ToVendorFakes = { type: 'cpu' } | { type: 'stop' };

export interface VendorFakesCounts {
  deepgramStreams: number;
  deepgramMessages: number;
  completions: number;
  ttsGenerations: number;
}

export function parseVendorFakesOptions(argv: string[]): VendorFakesOptions {
  const o: VendorFakesOptions = { deepgramMs: 0, openaiMs: 0, elevenlabsMs: 0, ttsChunkBytes: 1000 };
  for (let i = 0; i < argv.length; i++) {
    const [flag, inline] = argv[i]!.split('=', 2) as [string, string | undefined];
    const num = () => {
      const n = Number(inline ?? argv[++i]);
      if (!Number.isFinite(n) || n < 0) throw new Error(`${flag}: expected a number`);
      return n;
    };
    switch (flag) {
      case '--deepgram-ms': o.deepgramMs = num(); break;
      case '--openai-ms': o.openaiMs = num(); break;
      case '--elevenlabs-ms': o.elevenlabsMs = num(); break;
      case '--tts-chunk-bytes': o.ttsChunkBytes = Math.max(1, Math.floor(num())); break;
      default: throw new Error(`unknown option ${flag} (see the comment at the top of test/bench/vendor-fakes.ts)`);
    }
  }
  return o;
}

/** A query parameter as a whole number, or undefined (absent, `false` or not a number). */
function intParam(query: URLSearchParams, name: string): number | undefined {
  const v = query.get(name);
  if (v === null || v === 'false' || v === 'true') return undefined;
  const n = Number.parseInt(v, 10);
  return Number.isFinite(n) && n >= 0 ? n : undefined;
}

/** One Deepgram stream transcribed by the sandbox STT, answered in Deepgram's messages. */
function sandboxTranscriber(ctx: DeepgramFakeTranscriberContext, delayMs: number, counts: VendorFakesCounts): DeepgramFakeTranscriber {
  counts.deepgramStreams++;
  const timers = new Set<NodeJS.Timeout>();
  const send = (step: DeepgramFakeStep) => {
    counts.deepgramMessages++;
    if (delayMs <= 0) return ctx.act(step);
    const t = setTimeout(() => {
      timers.delete(t);
      ctx.act(step);
    }, delayMs);
    timers.add(t);
  };
  // Deepgram's defaults: endpointing after 10 ms of silence (`endpointing=false`: never
  // `speech_final`), and `UtteranceEnd` only when `utterance_end_ms` asks for it
  const endpointingOff = ctx.query.get('endpointing') === 'false';
  const endpointing = intParam(ctx.query, 'endpointing') ?? DEEPGRAM_DEFAULT_ENDPOINTING_MS;
  const utteranceEndMs = intParam(ctx.query, 'utterance_end_ms');
  const config: SttConfig = {
    provider: 'sandbox',
    endpointing,
    ...(utteranceEndMs !== undefined ? { utterance_end_ms: utteranceEndMs } : {}),
  };
  /** A `Finalize` is waiting for its final result. */
  let finalizing = false;
  const session = new SandboxSttSession(config, {
    onTranscript: (t) => {
      const fromFinalize = finalizing && t.isFinal;
      if (fromFinalize) finalizing = false;
      send({
        type: 'results',
        transcript: t.text,
        is_final: t.isFinal,
        speech_final: t.speechFinal && !endpointingOff,
        ...(t.confidence !== undefined ? { confidence: t.confidence } : {}),
        ...(t.start !== undefined ? { start: t.start } : {}),
        ...(t.duration !== undefined ? { duration: t.duration } : {}),
        ...(fromFinalize ? { onFinalize: true } : {}),
      });
    },
    onSpeechStarted: () => send({ type: 'speech-started', timestamp: ctx.audioSeconds() }),
    onUtteranceEnd: () => {
      if (utteranceEndMs !== undefined) send({ type: 'utterance-end' });
    },
    onError: () => undefined,
  });
  return {
    audio: (frame) => session.sendAudio(frame),
    finalize: () => {
      finalizing = true;
      session.finalize();
      // the sandbox delivers what it flushed in a microtask queued before this one: if nothing
      // came, Deepgram still answers a Finalize with an empty final result
      queueMicrotask(() => {
        if (!finalizing) return;
        finalizing = false;
        send({ type: 'results', transcript: '', is_final: true, onFinalize: true });
      });
    },
    close: () => {
      for (const t of timers) clearTimeout(t);
      timers.clear();
      void session.close();
    },
  };
}

/** OpenAI's request body as the sandbox model's messages and functions. */
function sandboxRequest(body: Record<string, unknown>): { messages: LlmMessage[]; tools: LlmFunction[] } {
  type WireMessage = {
    role: string;
    content?: string | null;
    tool_call_id?: string;
    tool_calls?: Array<{ id: string; function: { name: string; arguments: string } }>;
  };
  const messages = ((body.messages ?? []) as WireMessage[]).map((m): LlmMessage => {
    switch (m.role) {
      case 'assistant':
        return {
          role: 'assistant',
          content: m.content ?? null,
          ...(m.tool_calls?.length
            ? { tool_calls: m.tool_calls.map((c): LlmToolCall => ({ id: c.id, name: c.function.name, arguments: c.function.arguments })) }
            : {}),
        };
      case 'tool':
        return { role: 'tool', tool_call_id: m.tool_call_id ?? '', content: m.content ?? '' };
      case 'user':
        return { role: 'user', content: m.content ?? '' };
      default:
        return { role: 'system', content: m.content ?? '' };
    }
  });
  type WireTool = { function: { name: string; description?: string; parameters?: Record<string, unknown> } };
  const tools = ((body.tools ?? []) as WireTool[]).map((t): LlmFunction => ({
    name: t.function.name,
    ...(t.function.description !== undefined ? { description: t.function.description } : {}),
    ...(t.function.parameters !== undefined ? { parameters: t.function.parameters } : {}),
  }));
  return { messages, tools };
}

const sandboxLlm = createSandboxLlm();

/** What the sandbox model answers to this request, as the chat fake's completion. */
async function sandboxCompletion(body: Record<string, unknown>, delayMs: number, counts: VendorFakesCounts): Promise<FakeCompletion> {
  counts.completions++;
  const { messages, tools } = sandboxRequest(body);
  const config: LlmConfig = { provider: 'sandbox' };
  const text: string[] = [];
  const toolCalls: FakeCompletion['toolCalls'] = [];
  for await (const event of sandboxLlm.stream({ config, messages, tools })) {
    if (event.type === 'text') text.push(event.text);
    else if (event.type === 'tool_calls') toolCalls.push(...event.calls.map((c) => ({ id: c.id, name: c.name, arguments: c.arguments })));
  }
  return { text, toolCalls, ...(delayMs > 0 ? { headersDelayMs: delayMs } : {}) };
}

export async function startVendorFakes(o: VendorFakesOptions): Promise<VendorFakesAddresses & { counts: VendorFakesCounts; close(): Promise<void> }> {
  const counts: VendorFakesCounts = { deepgramStreams: 0, deepgramMessages: 0, completions: 0, ttsGenerations: 0 };
  const deepgram = await startFakeDeepgram({
    apiKey: DEEPGRAM_KEY,
    record: false,
    transcriber: (ctx) => sandboxTranscriber(ctx, o.deepgramMs, counts),
  });
  const openai = await startFakeOpenAiChat({
    apiKey: OPENAI_KEY,
    record: false,
    completionFor: ({ body }) => sandboxCompletion(body, o.openaiMs, counts),
  });
  // what a voice says: surrounding whitespace is not speech (as the sandbox TTS trims it)
  const speech = (text: string) => {
    counts.ttsGenerations++;
    return synthesizeSandboxSpeech(text.trim());
  };
  const elevenlabs = await startFakeElevenLabs({
    apiKey: ELEVENLABS_KEY,
    record: false,
    chunkBytes: o.ttsChunkBytes,
    generationDelayMs: o.elevenlabsMs,
    synthesize: speech,
  });
  const cartesia = await startFakeCartesia({ apiKey: CARTESIA_KEY, record: false, chunkBytes: o.ttsChunkBytes, synthesize: speech });
  const deepgramSpeak = await startFakeDeepgramSpeak({ apiKey: DEEPGRAM_KEY, record: false, chunkBytes: o.ttsChunkBytes, synthesize: speech });
  const speechServer = await startFakeOpenAiTts({
    apiKey: null,
    models: null,
    voices: null,
    record: false,
    synthesize: (text, rate) => resample(mulawDecode(speech(text)), 8000, rate),
  });
  const fakes = [deepgram, openai, elevenlabs, cartesia, deepgramSpeak, speechServer];
  return {
    deepgram: deepgram.url,
    openai: openai.url,
    elevenlabs: elevenlabs.url,
    cartesia: cartesia.url,
    deepgramSpeak: deepgramSpeak.url,
    speech: speechServer.url,
    counts,
    close: async () => {
      await Promise.all(fakes.map((f) => f.close()));
    },
  };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const fakes = await startVendorFakes(parseVendorFakesOptions(process.argv.slice(2)));
  const { counts: _counts, close: _close, ...addresses } = fakes;
  const stop = () => {
    void fakes.close().finally(() => process.exit(0));
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  if (process.send) {
    const send = (m: FromVendorFakes) => process.send!(m);
    process.on('message', (m: ToVendorFakes) => {
      if (m.type === 'cpu') {
        const cpu = process.cpuUsage();
        send({ type: 'cpu', userUs: cpu.user, systemUs: cpu.system, counts: { ...fakes.counts } });
      } else if (m.type === 'stop') stop();
    });
    // the parent going away takes the fakes with it
    process.on('disconnect', stop);
    send({ type: 'ready', pid: process.pid, ...addresses });
  } else {
    process.stdout.write(`${JSON.stringify({ pid: process.pid, ...addresses })}\n`);
  }
}
