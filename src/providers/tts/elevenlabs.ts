/**
 * ElevenLabs text-to-speech over the stream-input WebSocket
 * (`/v1/text-to-speech/{voice_id}/stream-input`), one socket per TTS session (one per reply).
 *
 * We ask for `output_format=ulaw_8000`, which is already what the call's media stream carries:
 * the audio is passed through untouched, only re-cut into whole 160-byte (20 ms) frames.
 */
import type WebSocket from 'ws';
import { defaultCatalog, findProvider } from '../../../engine/catalog.js';
import type { TtsConfig } from '../../../engine/schema.js';
import {
  ProviderError,
  type ProviderErrorCode,
  type ProviderSettings,
  type TtsEvents,
  type TtsProvider,
  type TtsSession,
  type VendorEndpoint,
} from '../types.js';
import { declareProvider, vendorEndpoint, type VendorAccount } from '../declare.js';
import { DEFAULT_CONNECT_MS, DEFAULT_FIRST_AUDIO_MS, requireKeyAndVoice, type TtsVendor } from './common.js';
import { abortedBeforeOpen, jsonObject, lastWhitespace, looksLikeAuth, SocketTtsSession, socketUrl, type SocketSessionOptions } from './socket.js';

export { FRAME_BYTES } from './common.js';

declare module '../types.js' {
  interface ProviderSettings {
    elevenlabs?: VendorEndpoint;
  }
}

const PROVIDER = 'elevenlabs';
/** ElevenLabs' account: `ELEVENLABS_API_KEY`, `ELEVENLABS_API_BASE`. */
export const ELEVENLABS: VendorAccount = { name: 'elevenlabs', label: 'ElevenLabs', baseUrl: 'https://api.elevenlabs.io' };

export const provider = declareProvider({
  catalog: {
    id: PROVIDER,
    kind: 'tts',
    description: 'ElevenLabs streaming text-to-speech (stream-input WebSocket, ulaw_8000 out).',
    models: [
      'eleven_flash_v2_5', 'eleven_turbo_v2_5', 'eleven_multilingual_v2', 'eleven_flash_v2',
      'eleven_turbo_v2',
    ],
    default_model: 'eleven_flash_v2_5',
    voices: null,
  },
  account: ELEVENLABS,
  create: (settings) => createElevenLabsTts(settings),
});
const VENDOR: TtsVendor = { provider: PROVIDER, name: 'ElevenLabs', keyEnv: 'ELEVENLABS_API_KEY', voiceHint: 'ElevenLabs has no default voice' };
/**
 * Seconds the vendor keeps a quiet socket open (its default is 20): a reply may pause for a
 * tool call; our own cancel/end closes the socket long before.
 */
const INACTIVITY_TIMEOUT_S = 60;
/**
 * Characters ElevenLabs buffers before generating (its default is [120, 160, 250, 290]): smaller
 * first chunks for a quicker first word on the phone; sentence-end flushes do the rest.
 */
const CHUNK_LENGTH_SCHEDULE = [50, 120, 160, 250];
/** Text without whitespace longer than this (CJK) is sent without waiting for a word end. */
const MAX_WORD_CHARS = 100;

export interface ElevenLabsTtsOptions {
  /** Overrides for tests; the defaults suit production. */
  inactivityTimeoutSeconds?: number;
  chunkLengthSchedule?: number[];
}

export function createElevenLabsTts(
  settings: ProviderSettings,
  options: ElevenLabsTtsOptions = {},
): TtsProvider {
  const defaultModel = findProvider(defaultCatalog, 'tts', PROVIDER)?.default_model ?? 'eleven_flash_v2_5';
  return {
    id: PROVIDER,
    async open(config, events, signal) {
      const endpoint = vendorEndpoint(settings, ELEVENLABS);
      const apiKey = requireKeyAndVoice(VENDOR, endpoint.apiKey, config.voice_id);
      if (signal?.aborted) throw abortedBeforeOpen(PROVIDER);
      const url = streamInputUrl(endpoint.baseUrl, config, config.model ?? defaultModel, options);
      const session = new ElevenLabsSession(
        events,
        {
          provider: PROVIDER,
          url,
          headers: { 'xi-api-key': apiKey },
          connectMs: settings.timeouts?.connectMs ?? DEFAULT_CONNECT_MS,
          firstAudioMs: settings.timeouts?.firstTokenMs ?? DEFAULT_FIRST_AUDIO_MS,
          httpDetail,
        },
        initMessage(config, options),
      );
      await session.connect(signal);
      return session;
    },
  };
}

/** The socket address, with every setting that the vendor takes as a query parameter. */
export function streamInputUrl(
  baseUrl: string,
  config: TtsConfig,
  model: string,
  options: ElevenLabsTtsOptions = {},
): string {
  const url = socketUrl(baseUrl, `/v1/text-to-speech/${encodeURIComponent(config.voice_id ?? '')}/stream-input`);
  const q = url.searchParams;
  q.set('model_id', model);
  q.set('output_format', 'ulaw_8000');
  q.set('inactivity_timeout', String(options.inactivityTimeoutSeconds ?? INACTIVITY_TIMEOUT_S));
  if (config.language) q.set('language_code', config.language);
  if (config.apply_text_normalization) q.set('apply_text_normalization', config.apply_text_normalization);
  if (config.apply_language_text_normalization !== undefined) {
    q.set('apply_language_text_normalization', String(config.apply_language_text_normalization));
  }
  return url.toString();
}

/** The first message: a single space, the voice settings and the generation schedule. */
export function initMessage(config: TtsConfig, options: ElevenLabsTtsOptions = {}): Record<string, unknown> {
  const voiceSettings: Record<string, unknown> = {};
  if (config.stability !== undefined) voiceSettings.stability = config.stability;
  if (config.similarity_boost !== undefined) voiceSettings.similarity_boost = config.similarity_boost;
  if (config.style !== undefined) voiceSettings.style = config.style;
  if (config.use_speaker_boost !== undefined) voiceSettings.use_speaker_boost = config.use_speaker_boost;
  if (config.speed !== undefined) voiceSettings.speed = config.speed;
  return {
    text: ' ',
    ...(Object.keys(voiceSettings).length > 0 ? { voice_settings: voiceSettings } : {}),
    generation_config: { chunk_length_schedule: options.chunkLengthSchedule ?? CHUNK_LENGTH_SCHEDULE },
  };
}

class ElevenLabsSession extends SocketTtsSession implements TtsSession {
  /** Text not yet sent: we send whole words, each message ending with whitespace. */
  private pendingText = '';
  /** Spoken text was sent since the vendor last answered (so an answer is due after a flush). */
  private awaitingAudio = false;

  constructor(
    events: TtsEvents,
    options: SocketSessionOptions,
    private readonly init: Record<string, unknown>,
  ) {
    super(events, options);
  }

  protected onOpen(): void {
    this.send(this.init);
  }

  sendText(text: string): void {
    if (this.state !== 'open' || text.length === 0) return;
    this.pendingText += text;
    // Send up to the last whitespace: a word is never split across two messages.
    const cut = lastWhitespace(this.pendingText);
    if (cut >= 0) {
      this.sendChunk(this.pendingText.slice(0, cut + 1), false);
      this.pendingText = this.pendingText.slice(cut + 1);
    } else if (this.pendingText.length > MAX_WORD_CHARS) {
      this.sendChunk(this.pendingText, false);
      this.pendingText = '';
    }
  }

  flush(): void {
    if (this.state !== 'open') return;
    this.sendChunk(`${this.pendingText} `, true);
    this.pendingText = '';
    if (this.awaitingAudio) this.armAudioTimer();
  }

  end(): void {
    if (this.state !== 'open') return;
    if (this.pendingText.length > 0) this.sendChunk(`${this.pendingText} `, false);
    this.pendingText = '';
    // The empty text closes the input; the vendor then generates the rest and says isFinal.
    this.send({ text: '' });
    this.state = 'ending';
    this.armAudioTimer();
  }

  private sendChunk(text: string, flush: boolean): void {
    if (/\S/.test(text)) this.awaitingAudio = true;
    this.send(flush ? { text, flush: true } : { text });
  }

  protected onMessage(data: WebSocket.RawData, isBinary: boolean): void {
    if (isBinary) {
      this.fail(new ProviderError('PROVIDER_PROTOCOL', PROVIDER, 'unexpected binary message'));
      return;
    }
    const message = jsonObject(data);
    if (!message) {
      this.fail(new ProviderError('PROVIDER_PROTOCOL', PROVIDER, 'unreadable message (not a JSON object)'));
      return;
    }
    const serverError = errorFromMessage(message);
    if (serverError) {
      this.fail(serverError);
      return;
    }
    this.clearAudioTimer();
    this.awaitingAudio = false;
    const audio = message.audio;
    if (typeof audio === 'string' && audio.length > 0) {
      this.emitAudio(Buffer.from(audio, 'base64'));
    } else if (audio !== undefined && audio !== null && typeof audio !== 'string') {
      this.fail(new ProviderError('PROVIDER_PROTOCOL', PROVIDER, '`audio` is not a base64 string'));
      return;
    }
    if (this.state === 'ending') {
      if (message.isFinal === true) this.finish();
      else this.armAudioTimer();
    }
  }
}

/** What the vendor said when the upgrade was answered with an HTTP status instead of 101. */
function httpDetail(body: string): string {
  let detail = body.trim();
  try {
    const parsed = JSON.parse(body) as { detail?: { message?: string } | string; message?: string };
    const d = parsed.detail;
    detail = (typeof d === 'string' ? d : d?.message) ?? parsed.message ?? detail;
  } catch {
    // not JSON: keep the text
  }
  return detail.slice(0, 300);
}

/** An error the vendor reported in a message (`{message, error, code}`), or undefined. */
function errorFromMessage(message: Record<string, unknown>): ProviderError | undefined {
  const hasAudioFields = 'audio' in message || 'isFinal' in message;
  const error = message.error;
  const text = typeof message.message === 'string' ? message.message : undefined;
  if (error === undefined && (hasAudioFields || text === undefined)) return undefined;
  if (error === null && hasAudioFields) return undefined;
  const errorText = typeof error === 'string' ? error : error === undefined || error === null ? '' : JSON.stringify(error);
  const summary = [errorText, text].filter(Boolean).join(': ') || 'error';
  const code: ProviderErrorCode = looksLikeAuth(summary) ? 'PROVIDER_AUTH' : 'PROVIDER_HTTP_ERROR';
  return new ProviderError(code, PROVIDER, `server error: ${summary.slice(0, 300)}`);
}
