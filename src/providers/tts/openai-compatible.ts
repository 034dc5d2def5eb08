/**
 * `openai-compatible`: any server speaking OpenAI's `POST /v1/audio/speech` (self-hosted Kokoro,
 * Piper or openedai-speech servers) at the block's `tts_config.base_url`, any model and voice
 * name. The OpenAI voice's adapter serves it (`tts/openai.ts`) asking for `wav`, whose header
 * gives the server's rate, resampled once to 8 kHz and encoded as μ-law. No key is sent: the
 * server's OpenAI key is never sent there. Errors name `openai-compatible-tts`.
 */
import { ProviderError } from '../types.js';
import { declareProvider } from '../declare.js';
import { createSpeechTts } from './openai.js';

const ID = 'openai-compatible';
const PROVIDER = 'openai-compatible-tts';

export const provider = declareProvider({
  catalog: {
    id: ID,
    kind: 'tts',
    description:
      'Any server of OpenAI\'s /v1/audio/speech (Kokoro, Piper, openedai-speech, ...) at tts_config.base_url; WAV resampled to μ-law 8 kHz.',
    models: null,
    default_model: null,
    voices: null,
    requires_url: true,
  },
  account: null,
  needs: 'its own `tts_config.base_url`, none of the server\'s keys',
  create: (settings) =>
    createSpeechTts(settings, {
      id: ID,
      provider: PROVIDER,
      defaultModel: null,
      format: 'wav',
      target(config) {
        if (!config.base_url) throw new ProviderError('PROVIDER_HTTP_ERROR', PROVIDER, 'tts_config.base_url is required for openai-compatible');
        return { baseUrl: config.base_url };
      },
    }),
});
