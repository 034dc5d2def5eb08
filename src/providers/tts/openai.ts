/**
 * OpenAI text-to-speech (`POST /v1/audio/speech`). The endpoint takes whole texts, so a session
 * buffers the streamed text and asks for one sentence at a time, in order. The answer is raw
 * PCM (`response_format: "pcm"`: 24 kHz, 16-bit little-endian, mono), which we low-pass and
 * decimate to 8 kHz with the streaming resampler and encode as μ-law as it arrives.
 */
import { Agent, request } from 'undici';
import { defaultCatalog, findProvider } from '../../../engine/catalog.js';
import { mulawEncode } from '../../audio/mulaw.js';
import { Resampler } from '../../audio/resample.js';
import { ProviderError, type ProviderSettings, type TtsEvents, type TtsProvider, type TtsSession } from '../types.js';
import { DEFAULT_CONNECT_MS, DEFAULT_FIRST_AUDIO_MS, httpError, requireKeyAndVoice, TtsSessionBase, type TtsVendor } from './common.js';

const PROVIDER = 'openai';
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
  const defaultModel = findProvider(defaultCatalog, 'tts', PROVIDER)?.default_model ?? 'gpt-4o-mini-tts';
  const connectMs = settings.timeouts?.connectMs ?? DEFAULT_CONNECT_MS;
  const firstByteMs = settings.timeouts?.firstTokenMs ?? DEFAULT_FIRST_AUDIO_MS;
  // One pool per provider: keep-alive connections save a TLS handshake per sentence.
  const agent = new Agent({ connect: { timeout: connectMs }, keepAliveTimeout: 30_000 });
  const endpoint = `${settings.openai.baseUrl.replace(/\/+$/, '')}/v1/audio/speech`;
  return {
    id: PROVIDER,
    async open(config, events, signal) {
      const apiKey = requireKeyAndVoice(VENDOR, settings.openai.apiKey, config.voice_id);
      if (signal?.aborted) {
        throw new ProviderError('PROVIDER_ABORTED', PROVIDER, 'cancelled before the session was open');
      }
      const session = new OpenAiTtsSession(events, {
        endpoint,
        agent,
        apiKey,
        firstByteMs,
        body: {
          model: config.model ?? defaultModel,
          voice: config.voice_id,
          response_format: 'pcm',
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
  endpoint: string;
  agent: Agent;
  apiKey: string;
  firstByteMs: number;
  body: Record<string, unknown>;
}

class OpenAiTtsSession extends TtsSessionBase implements TtsSession {
  private text = '';
  private readonly queue: string[] = [];
  private pumping = false;
  private inflight: AbortController | undefined;
  private readonly resampler = new Resampler(OPENAI_PCM_RATE, TELEPHONY_RATE);
  /** The first byte of a 16-bit sample split across two network chunks. */
  private oddByte = -1;

  constructor(
    events: TtsEvents,
    private readonly options: SessionOptions,
  ) {
    super(events, 'open');
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
      this.fail(err instanceof ProviderError ? err : toProviderError(err));
      return;
    } finally {
      this.pumping = false;
    }
    if (this.state === 'ending') this.finish();
  }

  private async speak(input: string): Promise<void> {
    const controller = new AbortController();
    this.inflight = controller;
    try {
      const res = await request(this.options.endpoint, {
        method: 'POST',
        dispatcher: this.options.agent,
        headers: {
          authorization: `Bearer ${this.options.apiKey}`,
          'content-type': 'application/json',
          accept: 'audio/pcm, application/octet-stream',
        },
        body: JSON.stringify({ ...this.options.body, input }),
        signal: controller.signal,
        headersTimeout: this.options.firstByteMs,
        bodyTimeout: this.options.firstByteMs,
      });
      if (res.statusCode < 200 || res.statusCode >= 300) {
        const text = await res.body.text().catch(() => '');
        throw httpError(PROVIDER, res.statusCode, httpDetail(text));
      }
      const type = String(res.headers['content-type'] ?? '');
      if (/^(application\/json|text\/)/i.test(type)) {
        await res.body.dump().catch(() => {});
        throw new ProviderError('PROVIDER_PROTOCOL', PROVIDER, `expected PCM audio, got ${type}`);
      }
      for await (const chunk of res.body as AsyncIterable<Buffer>) {
        if (!this.live) break;
        this.onPcm(chunk);
      }
      if (!this.live) return;
      // The sentence is complete: the filter's tail belongs to it.
      this.oddByte = -1;
      this.emitPcm(this.resampler.flush());
    } catch (err) {
      if (!this.live) return; // cancelled: the abort is ours, not the vendor's failure
      throw err;
    } finally {
      if (this.inflight === controller) this.inflight = undefined;
    }
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
    this.emitPcm(this.resampler.process(samples));
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
function toProviderError(err: unknown): ProviderError {
  const code = (err as { code?: unknown } | null)?.code;
  const message = err instanceof Error ? err.message : String(err);
  switch (code) {
    case 'UND_ERR_CONNECT_TIMEOUT':
    case 'UND_ERR_HEADERS_TIMEOUT':
    case 'UND_ERR_BODY_TIMEOUT':
      return new ProviderError('PROVIDER_TIMEOUT', PROVIDER, `no answer in time (${message})`, undefined, { cause: err });
    case 'UND_ERR_DESTROYED':
    case 'UND_ERR_CLOSED':
      return new ProviderError('PROVIDER_ABORTED', PROVIDER, 'the provider was closed', undefined, { cause: err });
    case 'HPE_INVALID_CHUNK_SIZE':
    case 'HPE_INVALID_CONSTANT':
    case 'UND_ERR_INFO':
      return new ProviderError('PROVIDER_PROTOCOL', PROVIDER, `unreadable answer (${message})`, undefined, { cause: err });
    default:
      return new ProviderError('PROVIDER_DISCONNECTED', PROVIDER, `connection lost (${message})`, undefined, { cause: err });
  }
}
