/**
 * What the text-to-speech adapters share: the frame size and default timeouts, the checks before
 * a session opens, the mapping of a vendor's HTTP refusal to a ProviderError, and the life of a
 * session (audio in whole frames, cancel on abort, one end reported).
 */
import { MULAW_SILENCE } from '../../audio/mulaw.js';
import { ProviderError, type ProviderErrorCode, type TtsEvents } from '../types.js';

/** 20 ms of μ-law at 8 kHz: the frame size the media stream sends. */
export const FRAME_BYTES = 160;
/** Wait for the connection, unless `settings.timeouts.connectMs` says otherwise. */
export const DEFAULT_CONNECT_MS = 10_000;
/** Wait for the vendor's first audio, unless `settings.timeouts.firstTokenMs` says otherwise. */
export const DEFAULT_FIRST_AUDIO_MS = 10_000;

/** A session speaks (`open`), finishes after `end()` (`ending`), then is over for good. */
export type TtsSessionState = 'open' | 'ending' | 'done' | 'failed' | 'cancelled';

/** How a vendor is named in the errors of `requireKeyAndVoice`. */
export interface TtsVendor {
  /** Catalog provider id. */
  provider: string;
  /** `no <name> API key configured (<keyEnv>)`. */
  name: string;
  keyEnv: string;
  /** `tts_config.voice_id is required (<voiceHint>)`. */
  voiceHint: string;
}

/** The checks before a session opens: an API key and a voice. Returns the key. */
export function requireKeyAndVoice(vendor: TtsVendor, apiKey: string | undefined, voiceId: string | undefined): string {
  if (!apiKey) {
    throw new ProviderError('PROVIDER_AUTH', vendor.provider, `no ${vendor.name} API key configured (${vendor.keyEnv})`);
  }
  if (!voiceId) {
    throw new ProviderError('PROVIDER_HTTP_ERROR', vendor.provider, `tts_config.voice_id is required (${vendor.voiceHint})`);
  }
  return apiKey;
}

/** A non-2xx answer: 401 and 403 are the key's fault, anything else an HTTP error. */
export function httpError(provider: string, status: number, detail: string): ProviderError {
  const code: ProviderErrorCode = status === 401 || status === 403 ? 'PROVIDER_AUTH' : 'PROVIDER_HTTP_ERROR';
  return new ProviderError(code, provider, `HTTP ${status}${detail ? `: ${detail}` : ''}`, status);
}

/**
 * What every TTS session does the same way: μ-law out in whole frames (an incomplete frame waits
 * for the next audio, the last one is completed with silence), cancel on the caller's abort
 * signal, and one end reported (`onDone` or `onError`), after which nothing is emitted.
 * `State` adds a vendor's own states (before `open`) to the shared ones.
 */
export abstract class TtsSessionBase<State extends string = never> {
  private partialFrame: Buffer = Buffer.alloc(0);
  private signal: AbortSignal | undefined;
  private readonly onAbort = () => this.cancel();

  constructor(
    protected readonly events: TtsEvents,
    protected state: TtsSessionState | State,
  ) {}

  /** Cancels the session when `signal` aborts (until the session is over). */
  bindSignal(signal: AbortSignal): void {
    this.signal = signal;
    signal.addEventListener('abort', this.onAbort, { once: true });
  }

  cancel(): void {
    if (this.over) return;
    this.state = 'cancelled';
    this.cleanup();
  }

  protected get over(): boolean {
    return this.state === 'done' || this.state === 'failed' || this.state === 'cancelled';
  }

  /** Whole frames go out at once; a trailing partial frame waits for the next audio. */
  protected emitAudio(mulaw: Buffer): void {
    const all = this.partialFrame.length > 0 ? Buffer.concat([this.partialFrame, mulaw]) : mulaw;
    const whole = all.length - (all.length % FRAME_BYTES);
    this.partialFrame = Buffer.from(all.subarray(whole));
    if (whole > 0) this.events.onAudio(all.subarray(0, whole));
  }

  /** The reply is all out: the last frame, then `onDone`. */
  protected finish(): void {
    if (this.partialFrame.length > 0) {
      // The last frame is completed with μ-law silence, so that every frame is whole.
      const last = Buffer.alloc(FRAME_BYTES, MULAW_SILENCE);
      this.partialFrame.copy(last);
      this.partialFrame = Buffer.alloc(0);
      this.events.onAudio(last);
    }
    this.state = 'done';
    this.cleanup();
    this.events.onDone();
  }

  protected fail(err: ProviderError): void {
    if (this.over) return;
    this.state = 'failed';
    this.cleanup();
    this.events.onError(err);
  }

  /** Drops the frame in progress and the abort signal; a vendor adds its sockets and timers. */
  protected cleanup(): void {
    this.partialFrame = Buffer.alloc(0);
    this.signal?.removeEventListener('abort', this.onAbort);
    this.signal = undefined;
  }
}
