/**
 * Deepgram Aura text-to-speech over its WebSocket (`/v1/speak`), one socket per TTS session (one
 * per reply), on the same Deepgram account as the transcriber (`DEEPGRAM_API_KEY`).
 *
 * The socket is opened with `encoding=mulaw&sample_rate=8000`: the binary audio messages are
 * already what the call's media stream carries, passed through untouched, only re-cut into whole
 * 160-byte (20 ms) frames. Text goes as `Speak`, each sentence end as `Flush`; the reply is over
 * when every `Flush` has been answered with `Flushed`. Errors name `deepgram-tts`, apart from the
 * transcriber's `deepgram`.
 */
import type WebSocket from 'ws';
import { defaultCatalog, findProvider } from '../../../engine/catalog.js';
import { ProviderError, type ProviderSettings, type TtsEvents, type TtsProvider, type TtsSession } from '../types.js';
import { declareProvider, vendorEndpoint } from '../declare.js';
import { DEEPGRAM, deepgramErrorMessage } from '../stt/deepgram.js';
import { DEFAULT_CONNECT_MS, DEFAULT_FIRST_AUDIO_MS, requireKeyAndVoice, type TtsVendor } from './common.js';
import { abortedBeforeOpen, jsonObject, rawToBuffer, serverError, SocketTtsSession, socketUrl, type SocketSessionOptions } from './socket.js';

/** The catalog id (`tts_config.provider`). */
const ID = 'deepgram';
/** As errors and `ended_reason` name it: the transcriber is `deepgram`. */
const PROVIDER = 'deepgram-tts';

const AURA_2_VOICES = [
  'amalthea', 'andromeda', 'apollo', 'arcas', 'aries', 'asteria', 'athena', 'atlas', 'aurora', 'callista',
  'cora', 'cordelia', 'delia', 'draco', 'electra', 'harmonia', 'helena', 'hera', 'hermes', 'hyperion',
  'iris', 'janus', 'juno', 'jupiter', 'luna', 'mars', 'minerva', 'neptune', 'odysseus', 'ophelia',
  'orion', 'orpheus', 'pandora', 'phoebe', 'pluto', 'saturn', 'selene', 'thalia', 'theia', 'vesta', 'zeus',
].map((v) => `aura-2-${v}-en`).concat(
  ['alvaro', 'aquila', 'carina', 'celeste', 'diana', 'estrella', 'javier', 'nestor', 'selena', 'sirio'].map((v) => `aura-2-${v}-es`),
);

export const provider = declareProvider({
  catalog: {
    id: ID,
    kind: 'tts',
    description: 'Deepgram Aura-2 streaming text-to-speech (/v1/speak WebSocket, μ-law 8 kHz out); the voice is the Aura model name.',
    models: ['aura-2'],
    default_model: 'aura-2',
    voices: AURA_2_VOICES,
    default_voice: 'aura-2-thalia-en',
  },
  account: DEEPGRAM,
  create: (settings) => createDeepgramTts(settings),
});
const VENDOR: TtsVendor = { provider: PROVIDER, name: 'Deepgram', keyEnv: 'DEEPGRAM_API_KEY', voiceHint: 'an Aura-2 voice' };
/** Deepgram's limit on the text of one `Speak`. */
const MAX_SPEAK_CHARS = 2_000;

export function createDeepgramTts(settings: ProviderSettings): TtsProvider {
  const defaultVoice = findProvider(defaultCatalog, 'tts', ID)?.default_voice ?? 'aura-2-thalia-en';
  return {
    id: ID,
    async open(config, events, signal) {
      const endpoint = vendorEndpoint(settings, DEEPGRAM);
      const voice = config.voice_id ?? defaultVoice;
      const apiKey = requireKeyAndVoice(VENDOR, endpoint.apiKey, voice);
      if (signal?.aborted) throw abortedBeforeOpen(PROVIDER);
      const session = new DeepgramSpeakSession(events, {
        provider: PROVIDER,
        url: deepgramSpeakUrl(endpoint.baseUrl, voice),
        headers: { authorization: `Token ${apiKey}` },
        connectMs: settings.timeouts?.connectMs ?? DEFAULT_CONNECT_MS,
        firstAudioMs: settings.timeouts?.firstTokenMs ?? DEFAULT_FIRST_AUDIO_MS,
        httpDetail: (body) => deepgramErrorMessage(body) ?? '',
      });
      await session.connect(signal);
      return session;
    },
  };
}

/** `<base>/v1/speak?encoding=mulaw&sample_rate=8000&model=<voice>`, `http` → `ws`. */
export function deepgramSpeakUrl(baseUrl: string, voice: string): string {
  const url = socketUrl(baseUrl, '/v1/speak');
  url.searchParams.set('encoding', 'mulaw');
  url.searchParams.set('sample_rate', '8000');
  url.searchParams.set('model', voice);
  return url.toString();
}

class DeepgramSpeakSession extends SocketTtsSession implements TtsSession {
  /** Text since the last `Flush`. */
  private spoken = false;
  /** `Flush`es not yet answered with `Flushed`. */
  private flushes = 0;

  constructor(events: TtsEvents, options: SocketSessionOptions) {
    super(events, options);
  }

  protected onOpen(): void {
    // the text comes with the reply
  }

  sendText(text: string): void {
    if (this.state !== 'open' || text.length === 0) return;
    for (let at = 0; at < text.length; at += MAX_SPEAK_CHARS) {
      this.send({ type: 'Speak', text: text.slice(at, at + MAX_SPEAK_CHARS) });
    }
    if (/\S/.test(text)) this.spoken = true;
  }

  flush(): void {
    if (this.state !== 'open') return;
    this.flushSpoken();
  }

  end(): void {
    if (this.state !== 'open') return;
    this.flushSpoken();
    this.state = 'ending';
    if (this.flushes === 0) this.finish();
    else this.armAudioTimer();
  }

  /** A `Flush` only when there is text to speak: Deepgram answers each with `Flushed`. */
  private flushSpoken(): void {
    if (!this.spoken) return;
    this.spoken = false;
    this.flushes++;
    this.send({ type: 'Flush' });
    this.armAudioTimer();
  }

  protected onMessage(data: WebSocket.RawData, isBinary: boolean): void {
    if (isBinary) {
      this.rearm();
      this.emitAudio(rawToBuffer(data));
      return;
    }
    const message = jsonObject(data);
    if (!message || typeof message.type !== 'string') {
      this.fail(new ProviderError('PROVIDER_PROTOCOL', PROVIDER, 'unreadable message (not a JSON object with a type)'));
      return;
    }
    switch (message.type) {
      case 'Flushed':
        this.flushes = Math.max(0, this.flushes - 1);
        if (this.state === 'ending' && this.flushes === 0) this.finish();
        else if (this.flushes === 0) this.clearAudioTimer();
        return;
      case 'Error': {
        const text = [message.err_code ?? message.code, message.description ?? message.err_msg ?? message.message]
          .filter((x) => typeof x === 'string' && x)
          .join(': ');
        this.fail(serverError(PROVIDER, text || 'error'));
        return;
      }
      default:
        // Metadata, Warning, Cleared: the vendor is at work
        this.rearm();
    }
  }

  /** Audio or a note came: wait for the next answer only while a `Flushed` is due. */
  private rearm(): void {
    if (this.flushes > 0) this.armAudioTimer();
    else this.clearAudioTimer();
  }
}
