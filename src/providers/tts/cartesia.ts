/**
 * Cartesia text-to-speech over its WebSocket (`/tts/websocket`), one socket and one context per
 * TTS session (one per reply).
 *
 * Every generation request asks for `output_format: {container: "raw", encoding: "pcm_mulaw",
 * sample_rate: 8000}`, which is already what the call's media stream carries: the audio is passed
 * through untouched, only re-cut into whole 160-byte (20 ms) frames.
 */
import { randomUUID } from 'node:crypto';
import type WebSocket from 'ws';
import { defaultCatalog, findProvider } from '../../../engine/catalog.js';
import type { TtsConfig } from '../../../engine/schema.js';
import { ProviderError, type ProviderSettings, type TtsEvents, type TtsProvider, type TtsSession, type VendorEndpoint } from '../types.js';
import { declareProvider, vendorEndpoint, type VendorAccount } from '../declare.js';
import { DEFAULT_CONNECT_MS, DEFAULT_FIRST_AUDIO_MS, requireKeyAndVoice, type TtsVendor } from './common.js';
import { abortedBeforeOpen, jsonObject, lastWhitespace, serverError, SocketTtsSession, socketUrl, type SocketSessionOptions } from './socket.js';

declare module '../types.js' {
  interface ProviderSettings {
    cartesia?: VendorEndpoint;
  }
}

const PROVIDER = 'cartesia';
/** Cartesia's account: `CARTESIA_API_KEY`, `CARTESIA_API_BASE`. */
export const CARTESIA: VendorAccount = { name: 'cartesia', label: 'Cartesia', baseUrl: 'https://api.cartesia.ai' };
/** The API version we speak (the `Cartesia-Version` header), the one `@cartesia/cartesia-js` 4 sends. */
export const CARTESIA_VERSION = '2026-08-14';

export const provider = declareProvider({
  catalog: {
    id: PROVIDER,
    kind: 'tts',
    description: 'Cartesia Sonic streaming text-to-speech (WebSocket, raw pcm_mulaw 8 kHz out).',
    models: ['sonic-2', 'sonic-turbo', 'sonic-3', 'sonic-3.5'],
    default_model: 'sonic-2',
    voices: null,
  },
  account: CARTESIA,
  create: (settings) => createCartesiaTts(settings),
});
const VENDOR: TtsVendor = { provider: PROVIDER, name: 'Cartesia', keyEnv: 'CARTESIA_API_KEY', voiceHint: 'a Cartesia voice id; Cartesia has no default voice' };
/** Text is sent at sentence ends; a sentence longer than this goes out at its last word end. */
const MAX_PENDING_CHARS = 250;

export function createCartesiaTts(settings: ProviderSettings): TtsProvider {
  const defaultModel = findProvider(defaultCatalog, 'tts', PROVIDER)?.default_model ?? 'sonic-2';
  return {
    id: PROVIDER,
    async open(config, events, signal) {
      const endpoint = vendorEndpoint(settings, CARTESIA);
      const apiKey = requireKeyAndVoice(VENDOR, endpoint.apiKey, config.voice_id);
      if (signal?.aborted) throw abortedBeforeOpen(PROVIDER);
      const session = new CartesiaSession(
        events,
        {
          provider: PROVIDER,
          url: cartesiaUrl(endpoint.baseUrl),
          headers: { authorization: `Bearer ${apiKey}`, 'cartesia-version': CARTESIA_VERSION },
          connectMs: settings.timeouts?.connectMs ?? DEFAULT_CONNECT_MS,
          firstAudioMs: settings.timeouts?.firstTokenMs ?? DEFAULT_FIRST_AUDIO_MS,
          httpDetail,
        },
        generationFields(config, config.model ?? defaultModel),
      );
      await session.connect(signal);
      return session;
    },
  };
}

export function cartesiaUrl(baseUrl: string): string {
  return socketUrl(baseUrl, '/tts/websocket').toString();
}

/** What every generation request of a session carries besides its transcript and context. */
export function generationFields(config: TtsConfig, model: string): Record<string, unknown> {
  return {
    model_id: model,
    voice: { mode: 'id', id: config.voice_id },
    output_format: { container: 'raw', encoding: 'pcm_mulaw', sample_rate: 8000 },
    // we send whole sentences: the vendor need not wait for more text before it speaks
    max_buffer_delay_ms: 0,
    ...(config.language ? { language: config.language } : {}),
    ...(config.speed !== undefined ? { generation_config: { speed: config.speed } } : {}),
  };
}

class CartesiaSession extends SocketTtsSession implements TtsSession {
  private readonly contextId = randomUUID();
  /** Text not yet sent: it goes at a sentence end (`flush`), or at a word end once it is long. */
  private pendingText = '';
  /** A transcript went out: the context exists at the vendor. */
  private started = false;

  constructor(
    events: TtsEvents,
    options: SocketSessionOptions,
    private readonly fields: Record<string, unknown>,
  ) {
    super(events, options);
  }

  protected onOpen(): void {
    // the context starts with the first transcript
  }

  sendText(text: string): void {
    if (this.state !== 'open' || text.length === 0) return;
    this.pendingText += text;
    if (this.pendingText.length <= MAX_PENDING_CHARS) return;
    const cut = lastWhitespace(this.pendingText);
    if (cut > 0) {
      this.transcript(this.pendingText.slice(0, cut + 1), true);
      this.pendingText = this.pendingText.slice(cut + 1);
    }
  }

  flush(): void {
    if (this.state !== 'open') return;
    this.sendPending();
  }

  end(): void {
    if (this.state !== 'open') return;
    this.sendPending();
    this.state = 'ending';
    if (!this.started) {
      this.finish(); // nothing was said: no context to close
      return;
    }
    // An empty transcript with `continue: false` closes the context; `done` follows the last audio.
    this.transcript('', false);
    this.armAudioTimer();
  }

  private sendPending(): void {
    // the vendor joins a context's transcripts as they are: a sentence ends with its space
    if (/\S/.test(this.pendingText)) {
      this.transcript(/\s$/.test(this.pendingText) ? this.pendingText : `${this.pendingText} `, true);
      this.armAudioTimer();
    }
    this.pendingText = '';
  }

  private transcript(text: string, more: boolean): void {
    this.started = true;
    this.send({ ...this.fields, transcript: text, context_id: this.contextId, continue: more });
  }

  protected onMessage(data: WebSocket.RawData, isBinary: boolean): void {
    const message = isBinary ? undefined : jsonObject(data);
    if (!message || typeof message.type !== 'string') {
      this.fail(new ProviderError('PROVIDER_PROTOCOL', PROVIDER, 'unreadable message (not a JSON object with a type)'));
      return;
    }
    if (message.context_id !== undefined && message.context_id !== this.contextId) return;
    switch (message.type) {
      case 'chunk': {
        if (typeof message.data !== 'string') {
          this.fail(new ProviderError('PROVIDER_PROTOCOL', PROVIDER, 'a chunk without base64 `data`'));
          return;
        }
        this.rearm();
        this.emitAudio(Buffer.from(message.data, 'base64'));
        return;
      }
      case 'done':
        if (this.state === 'ending') this.finish();
        else this.clearAudioTimer();
        return;
      case 'error': {
        const status = typeof message.status_code === 'number' ? message.status_code : undefined;
        const text = [message.title, message.message, message.error].filter((x) => typeof x === 'string' && x).join(': ');
        this.fail(serverError(PROVIDER, text || 'error', status));
        return;
      }
      default:
        // flush_done, timestamps, phoneme_timestamps: the vendor is at work
        this.rearm();
    }
  }

  /** The vendor answered: wait for the next answer only while one is due. */
  private rearm(): void {
    if (this.state === 'ending') this.armAudioTimer();
    else this.clearAudioTimer();
  }
}

/** What Cartesia said when it refused the upgrade (`{error}`, `{message}` or `{title, message}`). */
function httpDetail(body: string): string {
  let detail = body.trim();
  try {
    const parsed = JSON.parse(body) as { error?: unknown; message?: unknown; title?: unknown };
    const text = [parsed.title, parsed.message ?? parsed.error].filter((x) => typeof x === 'string' && x).join(': ');
    if (text) detail = text;
  } catch {
    // not JSON: keep the text
  }
  return detail.slice(0, 300);
}
