/**
 * `openai-compatible`: speech-to-text from any server speaking OpenAI's
 * `POST /v1/audio/transcriptions` (self-hosted Whisper servers: speaches / faster-whisper-server,
 * whisper.cpp's server, LocalAI, vLLM, ...) at the block's `stt_config.base_url`, any model name.
 *
 * Such a server transcribes whole clips, not a stream, so the caller's audio is cut into stretches
 * of speech by Switchboard's own voice-activity detector (src/calls/vad/, docs/turn-taking.md):
 * stretches less than `joinGapMs` apart make one clip (a sentence's commas are not its end, and
 * Whisper transcribes a sentence better than its pieces); each clip, with `paddingMs` of audio
 * either side, goes as a WAV (16-bit PCM at 8 kHz, the μ-law decoded, not resampled), and its text
 * comes back as one final result followed by the end of speech. Requests run side by side; their
 * results are delivered in the order spoken.
 * No key is sent: the server is the customer's (a proxy in front adds one if it needs it).
 */
import { Agent as HttpAgent, request as httpRequest, type ClientRequest, type IncomingMessage } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import type { SttConfig, VadKind } from '../../../engine/schema.js';
import { mulawDecode } from '../../audio/mulaw.js';
import { wavHeader } from '../../audio/wav.js';
import { createSpeechDetector, type SpeechDetector } from '../../calls/vad/index.js';
import { declareProvider } from '../declare.js';
import {
  ProviderError,
  type ProviderErrorCode,
  type ProviderSettings,
  type SttEvents,
  type SttProvider,
  type SttSession,
} from '../types.js';

const PROVIDER = 'openai-compatible';
/** The provider named in errors and `ended_reason` (`pipeline-error-openai-compatible-stt`). */
export const OPENAI_COMPATIBLE_STT_ERROR_ID = 'openai-compatible-stt';

export const provider = declareProvider({
  catalog: {
    id: PROVIDER,
    kind: 'stt',
    description:
      "Any server speaking OpenAI's /v1/audio/transcriptions (self-hosted Whisper, ...) at stt_config.base_url; " +
      "the caller's speech is cut into clips by Switchboard's voice-activity detector.",
    models: null,
    default_model: null,
    languages: null,
    requires_url: true,
  },
  account: null,
  needs: "its own `stt_config.base_url`, none of the server's keys",
  create: (settings) => createOpenAiCompatibleStt(settings),
});

const BYTES_PER_MS = 8; // μ-law 8 kHz mono
const MAX_ANSWER_BYTES = 1 << 20;

export interface OpenAiCompatibleSttOptions {
  /** The detector that cuts the speech (default `webrtc`, the cheaper one). */
  vad?: VadKind;
  /** Audio kept before a stretch's start and after its end (default 200 ms). */
  paddingMs?: number;
  /** Speech that starts again this soon after the detector's end of speech joins the same clip (default 300 ms). */
  joinGapMs?: number;
  /** A stretch longer than this is sent in parts (default 30 s): each part a final result. */
  maxSegmentMs?: number;
  /** How long one transcription may take (default `timeouts.firstTokenMs`, else 15 s). */
  requestTimeoutMs?: number;
  /** The clock the detector and the cuts read (default `performance`). */
  clock?: { now(): number };
}

const DEFAULTS = { vad: 'webrtc' as VadKind, paddingMs: 200, joinGapMs: 300, maxSegmentMs: 30_000, requestTimeoutMs: 15_000 };
/** Audio looked back on for a stretch's start: the detector confirms speech a little after it began. */
const LOOKBACK_MS = 1_500;
/** Clips shorter than this are not worth a request (the detector's shortest speech is longer). */
const MIN_CLIP_MS = 100;

export function createOpenAiCompatibleStt(
  settings: ProviderSettings,
  options: OpenAiCompatibleSttOptions = {},
): SttProvider {
  return {
    id: PROVIDER,
    async connect(config, events, signal) {
      if (!config.base_url) {
        throw sttError('PROVIDER_HTTP_ERROR', 'stt_config.base_url is required for openai-compatible (the server\'s base URL)', 400);
      }
      if (!config.model) throw sttError('PROVIDER_HTTP_ERROR', 'stt_config.model is required for openai-compatible', 400);
      if (signal?.aborted) throw sttError('PROVIDER_ABORTED', 'the stream was cancelled');
      return new ClipSession(transcriptionsUrl(config.base_url), config, events, {
        vad: options.vad ?? DEFAULTS.vad,
        paddingMs: options.paddingMs ?? DEFAULTS.paddingMs,
        joinGapMs: options.joinGapMs ?? DEFAULTS.joinGapMs,
        maxSegmentMs: options.maxSegmentMs ?? DEFAULTS.maxSegmentMs,
        requestTimeoutMs: options.requestTimeoutMs ?? settings.timeouts?.firstTokenMs ?? DEFAULTS.requestTimeoutMs,
        clock: options.clock ?? performance,
      }, signal);
    },
  };
}

/** `<base>/v1/audio/transcriptions`, whether or not `base` already ends in `/v1`. */
export function transcriptionsUrl(base: string): string {
  const trimmed = base.replace(/\/+$/, '');
  return /\/v1$/.test(trimmed) ? `${trimmed}/audio/transcriptions` : `${trimmed}/v1/audio/transcriptions`;
}

/** The form fields sent beside the clip. */
export function transcriptionFields(config: SttConfig): Array<[string, string]> {
  const fields: Array<[string, string]> = [['model', config.model ?? ''], ['response_format', 'json']];
  // Whisper takes ISO-639-1 codes: `en-US` is sent as `en`
  if (config.language && config.language !== 'multi') fields.push(['language', config.language.split('-')[0]!.toLowerCase()]);
  if (config.keyterms?.length) fields.push(['prompt', config.keyterms.join(', ')]);
  return fields;
}

/** The clip as a 16-bit PCM WAV at 8 kHz (μ-law decoded, no resampling). */
export function clipWav(mulaw: Buffer): Buffer {
  const pcm = mulawDecode(mulaw);
  const data = Buffer.from(pcm.buffer, pcm.byteOffset, pcm.byteLength);
  return Buffer.concat([wavHeader({ sampleRate: 8000, channels: 1, dataBytes: data.length }), data]);
}

/** A `multipart/form-data` body: the fields, then the clip as `file`. */
export function multipartBody(fields: Array<[string, string]>, wav: Buffer, boundary: string): Buffer {
  const parts: Buffer[] = [];
  for (const [name, value] of fields) {
    parts.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`, 'utf8'));
  }
  parts.push(
    Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="speech.wav"\r\nContent-Type: audio/wav\r\n\r\n`, 'utf8'),
    wav,
    Buffer.from(`\r\n--${boundary}--\r\n`, 'utf8'),
  );
  return Buffer.concat(parts);
}

function sttError(code: ProviderErrorCode, message: string, status?: number, cause?: unknown): ProviderError {
  return new ProviderError(code, OPENAI_COMPATIBLE_STT_ERROR_ID, message, status, cause === undefined ? undefined : { cause });
}

interface SessionOptions {
  vad: VadKind;
  paddingMs: number;
  joinGapMs: number;
  maxSegmentMs: number;
  requestTimeoutMs: number;
  clock: { now(): number };
}

/** Audio as it came: `at` is the clock when its first byte arrived. */
interface Chunk {
  at: number;
  data: Buffer;
}

class ClipSession implements SttSession {
  private readonly detector: SpeechDetector;
  private chunks: Chunk[] = [];
  /** Where the stretch being spoken begins (padding included); null between stretches. */
  private segmentFrom: number | null = null;
  /** The end of the clip's speech so far, while it waits `joinGapMs` for more. */
  private pendingEnd: number | null = null;
  /** When the detector said the speech had ended (the clock). */
  private pendingSince = 0;
  private joinTimer: NodeJS.Timeout | undefined;
  /** The clock at the first audio: results' `start` counts from here. */
  private streamAt: number | null = null;
  private readonly inFlight = new Set<ClientRequest>();
  /** Results are delivered in the order spoken, each after the one before. */
  private delivery: Promise<void> = Promise.resolve();
  private state: 'open' | 'closing' | 'closed' = 'open';
  private readonly fields: Array<[string, string]>;
  /** The call's own connections to the server, kept between clips and closed with the session. */
  private readonly agent: HttpAgent;

  constructor(
    private readonly url: string,
    config: SttConfig,
    private readonly events: SttEvents,
    private readonly opts: SessionOptions,
    private readonly signal: AbortSignal | undefined,
  ) {
    this.fields = transcriptionFields(config);
    this.agent = url.startsWith('https:') ? new HttpsAgent({ keepAlive: true }) : new HttpAgent({ keepAlive: true });
    this.detector = createSpeechDetector(opts.vad, {
      onSpeechStart: (at) => this.speechStarted(at),
      onSpeechEnd: (at) => this.speechEnded(at),
    }, opts.clock);
    signal?.addEventListener('abort', this.onAbort, { once: true });
  }

  sendAudio(mulaw: Buffer): void {
    if (this.state !== 'open' || mulaw.length === 0) return;
    const now = this.opts.clock.now();
    this.streamAt ??= now;
    // the caller may reuse its buffer
    this.chunks.push({ at: now, data: Buffer.from(mulaw) });
    // the pause outlasted the join gap: the clip goes (before this audio can start more speech)
    if (this.pendingEnd !== null && now - this.pendingSince >= this.opts.joinGapMs) this.flushClip();
    this.detector.push(mulaw);
    if (this.state !== 'open') return;
    if (this.segmentFrom !== null && this.pendingEnd === null && now - this.segmentFrom >= this.opts.maxSegmentMs) {
      // a long stretch goes in parts, so its words do not wait for its end
      this.sendClip(this.segmentFrom, now, false);
      this.segmentFrom = now;
    }
    this.prune(now);
  }

  /** The detector here marks the ends of speech itself: nothing to flush. */
  finalize(): void {}

  async close(): Promise<void> {
    if (this.state !== 'open') return this.delivery;
    this.state = 'closing';
    this.detector.close();
    // speech that had ended is not lost with the session: its clip goes before the close
    if (this.pendingEnd !== null) this.flushClip();
    this.chunks = [];
    // what was already sent is still delivered (each request has its deadline)
    await this.delivery;
    this.shutdown();
  }

  // ------------------------------------------------------------------------------------------

  private speechStarted(at: number): void {
    if (this.pendingEnd !== null) {
      // the caller goes on after a short pause: the same clip
      this.clearJoinTimer();
      this.pendingEnd = null;
    } else {
      this.segmentFrom = at - this.opts.paddingMs;
    }
    this.events.onSpeechStarted?.();
  }

  private speechEnded(at: number): void {
    if (this.segmentFrom === null) return;
    this.pendingEnd = at;
    this.pendingSince = this.opts.clock.now();
    if (this.opts.joinGapMs <= 0) return this.flushClip();
    this.armJoinTimer(this.opts.joinGapMs);
  }

  /** Audio that flows decides at each frame; this is for a line that stops sending (it is silent). */
  private armJoinTimer(ms: number): void {
    this.joinTimer = setTimeout(() => {
      this.joinTimer = undefined;
      if (this.pendingEnd === null) return;
      const left = this.opts.joinGapMs - (this.opts.clock.now() - this.pendingSince);
      if (left > 0) this.armJoinTimer(left);
      else this.flushClip();
    }, Math.max(1, Math.ceil(ms)));
  }

  /** The clip whose speech ended goes now. */
  private flushClip(): void {
    this.clearJoinTimer();
    const from = this.segmentFrom;
    const end = this.pendingEnd;
    this.segmentFrom = null;
    this.pendingEnd = null;
    if (from === null || end === null || this.state === 'closed') return;
    this.sendClip(from, end + this.opts.paddingMs, true);
  }

  private clearJoinTimer(): void {
    if (this.joinTimer) clearTimeout(this.joinTimer);
    this.joinTimer = undefined;
  }

  /** Drops audio no stretch can reach back to. */
  private prune(now: number): void {
    const keepFrom = this.segmentFrom ?? now - LOOKBACK_MS - this.opts.paddingMs;
    let drop = 0;
    while (drop < this.chunks.length) {
      const c = this.chunks[drop]!;
      if (c.at + c.data.length / BYTES_PER_MS >= keepFrom) break;
      drop++;
    }
    if (drop > 0) this.chunks.splice(0, drop);
  }

  /** The audio between two clock times, cut to the byte. */
  private audioBetween(from: number, to: number): Buffer {
    const parts: Buffer[] = [];
    for (const c of this.chunks) {
      const end = c.at + c.data.length / BYTES_PER_MS;
      if (end <= from || c.at >= to) continue;
      const first = Math.max(0, Math.round((from - c.at) * BYTES_PER_MS));
      const last = Math.min(c.data.length, Math.round((to - c.at) * BYTES_PER_MS));
      if (last > first) parts.push(c.data.subarray(first, last));
    }
    return Buffer.concat(parts);
  }

  private sendClip(from: number, to: number, endOfSpeech: boolean): void {
    const audio = this.audioBetween(from, to);
    if (audio.length < MIN_CLIP_MS * BYTES_PER_MS) return;
    const start = Math.max(0, (from - (this.streamAt ?? from)) / 1000);
    const duration = audio.length / BYTES_PER_MS / 1000;
    const answer = this.transcribe(clipWav(audio));
    answer.catch(() => {}); // awaited in turn below; a failure before its turn is not unhandled
    // the next result waits for this one: results come in the order spoken
    this.delivery = this.delivery.then(async () => {
      let text: string;
      try {
        text = await answer;
      } catch (err) {
        this.fail(err as ProviderError);
        return;
      }
      if (this.state === 'closed') return;
      this.events.onTranscript({ text, isFinal: true, speechFinal: endOfSpeech, start, duration });
      if (endOfSpeech && !this.isClosed()) this.events.onUtteranceEnd?.();
    });
  }

  /** One `POST /v1/audio/transcriptions`; resolves with the text, rejects with a ProviderError. */
  private transcribe(wav: Buffer): Promise<string> {
    const boundary = `switchboard-${Math.random().toString(36).slice(2)}${Date.now().toString(36)}`;
    const body = multipartBody(this.fields, wav, boundary);
    return new Promise<string>((resolve, reject) => {
      const url = new URL(this.url);
      const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
      let settled = false;
      const finish = (err: ProviderError | null, text?: string) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        this.inFlight.delete(req);
        if (err) reject(err);
        else resolve(text!);
      };
      const req = send(url, {
        agent: this.agent,
        method: 'POST',
        headers: {
          'content-type': `multipart/form-data; boundary=${boundary}`,
          'content-length': String(body.length),
          accept: 'application/json',
        },
      });
      this.inFlight.add(req);
      // a timer on the call's clock, not the socket's: a server that never answers is a timeout
      const timer = setTimeout(() => {
        finish(sttError('PROVIDER_TIMEOUT', `no transcription within ${this.opts.requestTimeoutMs} ms`));
        req.destroy();
      }, this.opts.requestTimeoutMs);
      req.on('error', (err: NodeJS.ErrnoException) => {
        finish(sttError('PROVIDER_DISCONNECTED', `the transcription server could not be reached or dropped the request: ${err.code ?? err.message}`, undefined, err));
      });
      req.on('response', (res: IncomingMessage) => {
        readAnswer(res).then(
          (text) => finish(...answerOf(res.statusCode ?? 0, text)),
          (err: Error) => finish(sttError('PROVIDER_DISCONNECTED', `the answer broke off: ${err.message}`, undefined, err)),
        );
      });
      req.end(body);
    });
  }

  /** Read anew after each callback: a handler may have closed the session. */
  private isClosed(): boolean {
    return this.state === 'closed';
  }

  private readonly onAbort = (): void => {
    if (this.state === 'closed') return;
    this.shutdown();
  };

  private fail(err: ProviderError): void {
    if (this.state === 'closed') return;
    this.shutdown(err);
  }

  /** Releases everything now; idempotent. Reports `err` (if any), then `onClose`. */
  private shutdown(err?: ProviderError): void {
    if (this.state === 'closed') return;
    this.state = 'closed';
    this.detector.close();
    this.clearJoinTimer();
    this.chunks = [];
    this.signal?.removeEventListener('abort', this.onAbort);
    for (const req of this.inFlight) req.destroy();
    this.inFlight.clear();
    this.agent.destroy();
    if (err) this.events.onError(err);
    this.events.onClose?.();
  }
}

/** The server's answer: `{"text": ...}` on 2xx, an error naming its status otherwise. */
function answerOf(status: number, body: string): [ProviderError | null, string?] {
  if (status < 200 || status >= 300) {
    const code: ProviderErrorCode = status === 401 || status === 403 ? 'PROVIDER_AUTH' : 'PROVIDER_HTTP_ERROR';
    return [sttError(code, `the transcription server answered ${status}: ${errorDetail(body)}`.trim(), status)];
  }
  try {
    const parsed = JSON.parse(body) as { text?: unknown };
    if (typeof parsed.text === 'string') return [null, parsed.text.trim()];
  } catch {
    // not JSON: reported below
  }
  return [sttError('PROVIDER_PROTOCOL', `the transcription server's answer has no text: ${body.slice(0, 200)}`)];
}

/** OpenAI's `{"error":{"message"}}`, FastAPI's `{"detail"}`, or the body's start. */
function errorDetail(body: string): string {
  try {
    const parsed = JSON.parse(body) as { error?: { message?: unknown } | string; detail?: unknown; message?: unknown };
    if (typeof parsed.error === 'object' && typeof parsed.error?.message === 'string') return parsed.error.message;
    if (typeof parsed.error === 'string') return parsed.error;
    if (typeof parsed.detail === 'string') return parsed.detail;
    if (typeof parsed.message === 'string') return parsed.message;
  } catch {
    // not JSON
  }
  return body.trim().slice(0, 300);
}

function readAnswer(res: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    res.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_ANSWER_BYTES) {
        res.destroy(new Error(`answer over ${MAX_ANSWER_BYTES} bytes`));
        return;
      }
      chunks.push(chunk);
    });
    res.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    res.on('error', reject);
    res.on('close', () => {
      if (!res.complete) reject(new Error('the connection closed before the answer ended'));
    });
  });
}
