/**
 * OpenAI text-to-speech (`POST /v1/audio/speech`). The endpoint takes whole texts, so a session
 * buffers the streamed text and asks for one sentence at a time, in order. The answer is raw
 * PCM (`response_format: "pcm"`: 24 kHz, 16-bit little-endian, mono), which we low-pass and
 * decimate to 8 kHz with the streaming resampler and encode as μ-law as it arrives.
 *
 * `createSpeechTts` serves any server of that endpoint (`openai-compatible`, whose answers are
 * `wav`, read from their header at whatever rate they come). Errors name `openai-tts`, apart from
 * the chat model's `openai`.
 */
import { Agent, request } from 'undici';
import { defaultCatalog, findProvider } from '../../../engine/catalog.js';
import { mulawEncode } from '../../audio/mulaw.js';
import { Resampler } from '../../audio/resample.js';
import type { TtsConfig } from '../../../engine/schema.js';
import { ProviderError, type ProviderSettings, type TtsEvents, type TtsProvider, type TtsSession } from '../types.js';
import { declareProvider, vendorEndpoint } from '../declare.js';
import { OPENAI } from '../llm/openai.js';
import { DEFAULT_CONNECT_MS, DEFAULT_FIRST_AUDIO_MS, httpError, requireKeyAndVoice, TtsSessionBase, type TtsVendor } from './common.js';

/** The catalog id (`tts_config.provider`). */
const ID = 'openai';
/** As errors and `ended_reason` name it: the chat model is `openai`. */
const PROVIDER = 'openai-tts';

const OPENAI_TTS_VOICES = [
  'alloy', 'ash', 'ballad', 'coral', 'echo', 'fable', 'nova', 'onyx', 'sage', 'shimmer', 'verse',
];

export const provider = declareProvider({
  catalog: {
    id: ID,
    kind: 'tts',
    description: 'OpenAI text-to-speech (/v1/audio/speech), converted to μ-law 8 kHz.',
    models: ['gpt-4o-mini-tts', 'tts-1', 'tts-1-hd'],
    default_model: 'gpt-4o-mini-tts',
    voices: OPENAI_TTS_VOICES,
  },
  account: OPENAI,
  create: (settings) => createOpenAiTts(settings),
});
const VENDOR: TtsVendor = { provider: PROVIDER, name: 'OpenAI', keyEnv: 'OPENAI_API_KEY', voiceHint: 'one of the OpenAI voices' };
/** `response_format: "pcm"` is always this rate. */
export const OPENAI_PCM_RATE = 24_000;
const TELEPHONY_RATE = 8_000;
/** The endpoint's limit on `input`. */
export const MAX_INPUT_CHARS = 4_096;

export interface OpenAiTtsProvider extends TtsProvider {
  /** Closes the pooled connections (process shutdown, tests). Open sessions fail. */
  close(): Promise<void>;
}

export function createOpenAiTts(settings: ProviderSettings): OpenAiTtsProvider {
  const openai = vendorEndpoint(settings, OPENAI);
  return createSpeechTts(settings, {
    id: ID,
    provider: PROVIDER,
    defaultModel: findProvider(defaultCatalog, 'tts', ID)?.default_model ?? 'gpt-4o-mini-tts',
    format: 'pcm',
    target(config) {
      const apiKey = requireKeyAndVoice(VENDOR, openai.apiKey, config.voice_id);
      return { baseUrl: openai.baseUrl, apiKey };
    },
  });
}

/** A server of `POST /v1/audio/speech`, as one provider uses it. */
export interface SpeechServer {
  /** The catalog id. */
  id: string;
  /** As errors name it. */
  provider: string;
  /** When `tts_config.model` names none; `null`: the block must name one. */
  defaultModel: string | null;
  /** `pcm`: raw 24 kHz; `wav`: the rate read from each answer's header. */
  format: 'pcm' | 'wav';
  /** Where a session's requests go and the key they carry (throws a `ProviderError` when it cannot). */
  target(config: TtsConfig): { baseUrl: string; apiKey?: string | undefined };
}

export function createSpeechTts(settings: ProviderSettings, server: SpeechServer): OpenAiTtsProvider {
  const connectMs = settings.timeouts?.connectMs ?? DEFAULT_CONNECT_MS;
  const firstByteMs = settings.timeouts?.firstTokenMs ?? DEFAULT_FIRST_AUDIO_MS;
  // One pool per provider: keep-alive connections save a TLS handshake per sentence.
  const agent = new Agent({ connect: { timeout: connectMs }, keepAliveTimeout: 30_000 });
  return {
    id: server.id,
    async open(config, events, signal) {
      const { baseUrl, apiKey } = server.target(config);
      if (!config.voice_id) {
        throw new ProviderError('PROVIDER_HTTP_ERROR', server.provider, 'tts_config.voice_id is required (the server\'s voice name)');
      }
      const model = config.model ?? server.defaultModel;
      if (!model) throw new ProviderError('PROVIDER_HTTP_ERROR', server.provider, 'tts_config.model is required (the server\'s model name)');
      if (signal?.aborted) {
        throw new ProviderError('PROVIDER_ABORTED', server.provider, 'cancelled before the session was open');
      }
      const session = new SpeechSession(events, {
        provider: server.provider,
        endpoint: `${baseUrl.replace(/\/+$/, '')}/v1/audio/speech`,
        agent,
        apiKey,
        firstByteMs,
        format: server.format,
        body: {
          model,
          voice: config.voice_id,
          response_format: server.format,
          ...(config.speed !== undefined ? { speed: config.speed } : {}),
        },
      });
      if (signal) session.bindSignal(signal);
      return session;
    },
    async close() {
      await agent.destroy();
    },
  };
}

/** Splits buffered text into sentences (each under the endpoint's limit), for earlier audio. */
export function splitSentences(text: string): string[] {
  const sentences = text
    .split(/(?<=[.!?…。！？])\s+/u)
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
  const out: string[] = [];
  for (let s of sentences) {
    while (s.length > MAX_INPUT_CHARS) {
      const cut = s.lastIndexOf(' ', MAX_INPUT_CHARS);
      const at = cut > 0 ? cut : MAX_INPUT_CHARS;
      out.push(s.slice(0, at).trim());
      s = s.slice(at).trim();
    }
    if (s.length > 0) out.push(s);
  }
  return out;
}

interface SessionOptions {
  provider: string;
  endpoint: string;
  agent: Agent;
  apiKey: string | undefined;
  firstByteMs: number;
  format: 'pcm' | 'wav';
  body: Record<string, unknown>;
}

/** A WAV answer's header is read whole before its samples; a longer one is not a WAV we read. */
const MAX_WAV_HEADER = 64 * 1024;

class SpeechSession extends TtsSessionBase implements TtsSession {
  private text = '';
  private readonly queue: string[] = [];
  private pumping = false;
  private inflight: AbortController | undefined;
  private resampler: Resampler | undefined = undefined;
  private rate = 0;
  /** The first byte of a 16-bit sample split across two network chunks. */
  private oddByte = -1;
  /** `wav`: the answer's bytes before its samples, until its `data` chunk is found. */
  private header: Buffer | null = null;

  constructor(
    events: TtsEvents,
    private readonly options: SessionOptions,
  ) {
    super(events, 'open');
    if (options.format === 'pcm') this.useRate(OPENAI_PCM_RATE);
  }

  private get provider(): string {
    return this.options.provider;
  }

  sendText(text: string): void {
    if (this.state !== 'open') return;
    this.text += text;
  }

  flush(): void {
    if (this.state !== 'open') return;
    this.enqueueBuffered();
  }

  end(): void {
    if (this.state !== 'open') return;
    this.enqueueBuffered();
    this.state = 'ending';
    if (!this.pumping) this.finish();
  }

  private enqueueBuffered(): void {
    const sentences = splitSentences(this.text);
    this.text = '';
    if (sentences.length === 0) return;
    this.queue.push(...sentences);
    if (!this.pumping) void this.pump();
  }

  private get live(): boolean {
    return this.state === 'open' || this.state === 'ending';
  }

  /** One request at a time, so the audio stays in the order of the text. */
  private async pump(): Promise<void> {
    this.pumping = true;
    try {
      while (this.live && this.queue.length > 0) {
        await this.speak(this.queue.shift()!);
      }
    } catch (err) {
      this.fail(err instanceof ProviderError ? err : toProviderError(this.provider, err));
      return;
    } finally {
      this.pumping = false;
    }
    if (this.state === 'ending') this.finish();
  }

  private async speak(input: string): Promise<void> {
    const controller = new AbortController();
    this.inflight = controller;
    if (this.options.format === 'wav') this.header = Buffer.alloc(0);
    try {
      const res = await request(this.options.endpoint, {
        method: 'POST',
        dispatcher: this.options.agent,
        headers: {
          ...(this.options.apiKey ? { authorization: `Bearer ${this.options.apiKey}` } : {}),
          'content-type': 'application/json',
          accept: this.options.format === 'wav' ? 'audio/wav, application/octet-stream' : 'audio/pcm, application/octet-stream',
        },
        body: JSON.stringify({ ...this.options.body, input }),
        signal: controller.signal,
        headersTimeout: this.options.firstByteMs,
        bodyTimeout: this.options.firstByteMs,
      });
      if (res.statusCode < 200 || res.statusCode >= 300) {
        const text = await res.body.text().catch(() => '');
        throw httpError(this.provider, res.statusCode, httpDetail(text));
      }
      const type = String(res.headers['content-type'] ?? '');
      if (/^(application\/json|text\/)/i.test(type)) {
        await res.body.dump().catch(() => {});
        throw new ProviderError('PROVIDER_PROTOCOL', this.provider, `expected ${this.options.format === 'wav' ? 'WAV' : 'PCM'} audio, got ${type}`);
      }
      // a server that answers raw PCM though WAV was asked: OpenAI's own `pcm` rate, or the one it names
      if (this.header && /^audio\/(pcm|l16)\b/i.test(type)) {
        this.header = null;
        this.useRate(Number(/rate=(\d+)/i.exec(type)?.[1] ?? OPENAI_PCM_RATE));
      }
      for await (const chunk of res.body as AsyncIterable<Buffer>) {
        if (!this.live) break;
        const samples = this.header ? this.readHeader(chunk) : chunk;
        if (samples.length > 0) this.onPcm(samples);
      }
      if (!this.live) return;
      if (this.header) throw new ProviderError('PROVIDER_PROTOCOL', this.provider, 'the WAV answer ended before its samples');
      // The sentence is complete: the filter's tail belongs to it.
      this.oddByte = -1;
      if (this.resampler) this.emitPcm(this.resampler.flush());
    } catch (err) {
      if (!this.live) return; // cancelled: the abort is ours, not the vendor's failure
      throw err;
    } finally {
      if (this.inflight === controller) this.inflight = undefined;
    }
  }

  /** `wav`: gathers the header until the `data` chunk; returns the samples after it (if any yet). */
  private readHeader(chunk: Buffer): Buffer {
    const all = Buffer.concat([this.header!, chunk]);
    const found = wavData(all);
    if (found === 'more') {
      if (all.length > MAX_WAV_HEADER) throw new ProviderError('PROVIDER_PROTOCOL', this.provider, 'no WAV data chunk in the first 64 KiB');
      this.header = all;
      return Buffer.alloc(0);
    }
    if (typeof found === 'string') throw new ProviderError('PROVIDER_PROTOCOL', this.provider, found);
    this.header = null;
    this.useRate(found.rate);
    return all.subarray(found.offset);
  }

  private useRate(rate: number): void {
    if (rate === this.rate) return;
    this.rate = rate;
    this.resampler = new Resampler(rate, TELEPHONY_RATE);
  }

  /** Network chunks may split a 16-bit sample: the odd byte waits for the next chunk. */
  private onPcm(chunk: Buffer): void {
    let offset = 0;
    const startsWithCarry = this.oddByte >= 0 && chunk.length > 0;
    const count = (chunk.length + (startsWithCarry ? 1 : 0)) >> 1;
    const samples = new Int16Array(count);
    let i = 0;
    if (startsWithCarry) {
      const v = this.oddByte | (chunk[0]! << 8);
      samples[i++] = v > 0x7fff ? v - 0x10000 : v;
      offset = 1;
      this.oddByte = -1;
    }
    for (; i < count; i++, offset += 2) samples[i] = chunk.readInt16LE(offset);
    if (offset < chunk.length) this.oddByte = chunk[offset]!;
    this.emitPcm(this.resampler!.process(samples));
  }

  private emitPcm(pcm8k: Int16Array): void {
    if (pcm8k.length === 0 || !this.live) return;
    this.emitAudio(mulawEncode(pcm8k));
  }

  protected override finish(): void {
    if (this.state !== 'ending') return;
    super.finish();
  }

  protected override cleanup(): void {
    this.queue.length = 0;
    this.text = '';
    super.cleanup();
    // Aborting destroys the request's body and its socket: the vendor stops at once.
    this.inflight?.abort();
    this.inflight = undefined;
  }
}

/**
 * Where a streamed WAV's samples start and their rate; `'more'` while the header is incomplete;
 * a sentence when it is not 16-bit mono PCM. A streamed answer's sizes may be 0 or 0xFFFFFFFF:
 * the `data` chunk runs to the end of the answer.
 */
export function wavData(bytes: Buffer): { offset: number; rate: number } | 'more' | string {
  if (bytes.length < 12) return 'more';
  if (bytes.toString('latin1', 0, 4) !== 'RIFF' || bytes.toString('latin1', 8, 12) !== 'WAVE') return 'the answer is not a WAV file';
  let at = 12;
  let rate = 0;
  while (at + 8 <= bytes.length) {
    const id = bytes.toString('latin1', at, at + 4);
    const size = bytes.readUInt32LE(at + 4);
    if (id === 'data') {
      if (rate === 0) return 'a WAV data chunk before its fmt chunk';
      return { offset: at + 8, rate };
    }
    if (at + 8 + size > bytes.length) return 'more';
    if (id === 'fmt ') {
      const format = bytes.readUInt16LE(at + 8);
      const channels = bytes.readUInt16LE(at + 10);
      const bits = bytes.readUInt16LE(at + 22);
      if ((format !== 1 && format !== 0xfffe) || bits !== 16 || channels !== 1) {
        return `the WAV answer is not 16-bit mono PCM (format ${format}, ${channels} channel(s), ${bits} bits)`;
      }
      rate = bytes.readUInt32LE(at + 12);
      if (rate < 8_000 || rate > 96_000) return `the WAV answer's rate ${rate} Hz is not one we read`;
    }
    at += 8 + size + (size % 2);
  }
  return 'more';
}

/** What a non-2xx answer says: OpenAI's `{error: {message, type, code}}` when there is one. */
function httpDetail(body: string): string {
  let detail = body.trim().slice(0, 300);
  try {
    const parsed = JSON.parse(body) as { error?: { message?: string; code?: string | null } };
    if (parsed.error?.message) detail = parsed.error.message;
  } catch {
    // not JSON: keep the text
  }
  return detail;
}

/** undici's errors, by their stable codes. */
function toProviderError(provider: string, err: unknown): ProviderError {
  const code = (err as { code?: unknown } | null)?.code;
  const message = err instanceof Error ? err.message : String(err);
  switch (code) {
    case 'UND_ERR_CONNECT_TIMEOUT':
    case 'UND_ERR_HEADERS_TIMEOUT':
    case 'UND_ERR_BODY_TIMEOUT':
      return new ProviderError('PROVIDER_TIMEOUT', provider, `no answer in time (${message})`, undefined, { cause: err });
    case 'UND_ERR_DESTROYED':
    case 'UND_ERR_CLOSED':
      return new ProviderError('PROVIDER_ABORTED', provider, 'the provider was closed', undefined, { cause: err });
    case 'HPE_INVALID_CHUNK_SIZE':
    case 'HPE_INVALID_CONSTANT':
    case 'UND_ERR_INFO':
      return new ProviderError('PROVIDER_PROTOCOL', provider, `unreadable answer (${message})`, undefined, { cause: err });
    default:
      return new ProviderError('PROVIDER_DISCONNECTED', provider, `connection lost (${message})`, undefined, { cause: err });
  }
}
