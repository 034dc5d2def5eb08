/**
 * The catalog's providers, written from their declarations in src/providers/ (the `catalog` of
 * each `provider` that src/providers/registry.ts lists, in its order). Do not edit: change the
 * declaration, then `npx vitest run --project unit test/providers/registry.test.ts -u` writes this
 * file again (the test fails while it differs). The engine reads nothing from src/, so the data
 * lives here too.
 */
import type { CatalogProvider } from './catalog.js';

export const CATALOG_PROVIDERS: CatalogProvider[] = [
  {
    id: 'openai',
    kind: 'llm',
    description: 'OpenAI chat completions (streaming, tools).',
    models: [
      'gpt-4o', 'gpt-4o-mini', 'gpt-4.1', 'gpt-4.1-mini', 'gpt-4.1-nano', 'gpt-5', 'gpt-5-mini',
      'gpt-5-nano',
    ],
    default_model: 'gpt-4o-mini',
  },
  {
    id: 'anthropic',
    kind: 'llm',
    description: 'Anthropic Claude, Messages API (streaming, tools).',
    models: [
      'claude-opus-5-5', 'claude-sonnet-5-5', 'claude-haiku-5-5', 'claude-opus-5',
      'claude-sonnet-5', 'claude-fable-5-2', 'claude-fable-5-1', 'claude-fable-5',
      'claude-mythos-5-2', 'claude-mythos-5-1', 'claude-mythos-5', 'claude-opus-4-8',
      'claude-opus-4-7', 'claude-opus-4-6', 'claude-sonnet-4-6', 'claude-opus-4-5',
      'claude-sonnet-4-5', 'claude-haiku-4-5',
    ],
    default_model: 'claude-haiku-4-5',
  },
  {
    id: 'google',
    kind: 'llm',
    description: 'Google Gemini, Gemini API streamGenerateContent (streaming, function calling).',
    models: [
      'gemini-3.8-flash', 'gemini-3.7-flash', 'gemini-3.6-flash', 'gemini-3.5-flash',
      'gemini-3.5-flash-lite', 'gemini-3.1-pro-preview', 'gemini-3.1-flash-lite',
      'gemini-3-flash-preview', 'gemini-2.5-pro', 'gemini-2.5-flash', 'gemini-2.5-flash-lite',
      'gemini-pro-latest', 'gemini-flash-latest', 'gemini-flash-lite-latest',
    ],
    default_model: 'gemini-2.5-flash',
  },
  {
    id: 'custom-llm',
    kind: 'llm',
    description: 'Any OpenAI-compatible chat completions server (Ollama, vLLM, llama.cpp, ...) at llm_config.url.',
    models: null,
    default_model: null,
    requires_url: true,
  },
  {
    id: 'sandbox',
    kind: 'llm',
    description: 'Offline, deterministic stand-in for a language model (demo and tests). Not intelligent: it picks the transition whose description shares the most words with what the caller said.',
    models: [
      'sandbox',
    ],
    default_model: 'sandbox',
  },
  {
    id: 'openai-realtime',
    kind: 'realtime',
    description: 'OpenAI Realtime speech-to-speech (GA protocol, audio/pcmu).',
    models: [
      'gpt-realtime', 'gpt-realtime-mini',
    ],
    default_model: 'gpt-realtime',
    voices: [
      'alloy', 'ash', 'ballad', 'cedar', 'coral', 'echo', 'marin', 'sage', 'shimmer', 'verse',
    ],
    default_voice: 'marin',
  },
  {
    id: 'google-live',
    kind: 'realtime',
    description: 'Google Gemini Live speech-to-speech (BidiGenerateContent over WebSocket; PCM 16/24 kHz, converted).',
    models: [
      'gemini-live-2.5-flash-preview', 'gemini-2.5-flash-native-audio-preview-09-2025',
    ],
    default_model: 'gemini-live-2.5-flash-preview',
    voices: [
      'Puck', 'Charon', 'Kore', 'Fenrir', 'Aoede', 'Leda', 'Orus', 'Zephyr',
    ],
    default_voice: 'Puck',
  },
  {
    id: 'sandbox-realtime',
    kind: 'realtime',
    description: 'Offline speech-to-speech stand-in built from the sandbox STT, model and TTS (demo and tests).',
    models: [
      'sandbox',
    ],
    default_model: 'sandbox',
    voices: [
      'sandbox',
    ],
    default_voice: 'sandbox',
  },
  {
    id: 'deepgram',
    kind: 'stt',
    description: 'Deepgram live streaming speech-to-text (μ-law 8 kHz in).',
    models: [
      'nova-3', 'nova-2',
    ],
    default_model: 'nova-3',
    languages: {
      'nova-3': [
        'multi', 'en', 'en-US', 'en-AU', 'en-GB', 'en-IN', 'en-NZ', 'es', 'es-419', 'fr', 'fr-CA',
        'de', 'de-CH', 'hi', 'it', 'ja', 'nl', 'nl-BE', 'pt', 'pt-BR', 'pt-PT', 'ru', 'sv', 'sv-SE',
        'da', 'da-DK', 'no', 'fi', 'pl', 'tr', 'uk', 'cs', 'ro', 'ko', 'ko-KR', 'id', 'vi', 'bg',
        'ca', 'el', 'et', 'hu', 'lt', 'lv', 'ms', 'sk',
      ],
      'nova-2': [
        'multi', 'en', 'en-US', 'en-AU', 'en-GB', 'en-IN', 'en-NZ', 'es', 'es-419', 'fr', 'fr-CA',
        'de', 'de-CH', 'hi', 'hi-Latn', 'it', 'ja', 'nl', 'nl-BE', 'pt', 'pt-BR', 'pt-PT', 'ru',
        'sv', 'sv-SE', 'da', 'da-DK', 'no', 'fi', 'pl', 'tr', 'uk', 'cs', 'ro', 'ko', 'ko-KR', 'id',
        'vi', 'bg', 'ca', 'el', 'et', 'hu', 'lt', 'lv', 'ms', 'sk', 'th', 'th-TH', 'zh', 'zh-CN',
        'zh-Hans', 'zh-TW', 'zh-Hant', 'zh-HK',
      ],
    },
    default_language: 'en',
  },
  {
    id: 'openai',
    kind: 'stt',
    description: 'OpenAI Realtime transcription over WebSocket (audio/pcmu: μ-law 8 kHz in).',
    models: [
      'gpt-4o-transcribe', 'gpt-4o-mini-transcribe',
    ],
    default_model: 'gpt-4o-transcribe',
    languages: {
      'gpt-4o-transcribe': [
        'af', 'ar', 'hy', 'az', 'be', 'bs', 'bg', 'ca', 'zh', 'hr', 'cs', 'da', 'nl', 'en', 'et',
        'fi', 'fr', 'gl', 'de', 'el', 'he', 'hi', 'hu', 'is', 'id', 'it', 'ja', 'kn', 'kk', 'ko',
        'lv', 'lt', 'mk', 'ms', 'mr', 'mi', 'ne', 'no', 'fa', 'pl', 'pt', 'ro', 'ru', 'sr', 'sk',
        'sl', 'es', 'sw', 'sv', 'tl', 'ta', 'th', 'tr', 'uk', 'ur', 'vi', 'cy',
      ],
      'gpt-4o-mini-transcribe': [
        'af', 'ar', 'hy', 'az', 'be', 'bs', 'bg', 'ca', 'zh', 'hr', 'cs', 'da', 'nl', 'en', 'et',
        'fi', 'fr', 'gl', 'de', 'el', 'he', 'hi', 'hu', 'is', 'id', 'it', 'ja', 'kn', 'kk', 'ko',
        'lv', 'lt', 'mk', 'ms', 'mr', 'mi', 'ne', 'no', 'fa', 'pl', 'pt', 'ro', 'ru', 'sr', 'sk',
        'sl', 'es', 'sw', 'sv', 'tl', 'ta', 'th', 'tr', 'uk', 'ur', 'vi', 'cy',
      ],
    },
    default_language: 'en',
  },
  {
    id: 'openai-compatible',
    kind: 'stt',
    description: 'Any server speaking OpenAI\'s /v1/audio/transcriptions (self-hosted Whisper, ...) at stt_config.base_url; the caller\'s speech is cut into clips by Switchboard\'s voice-activity detector.',
    models: null,
    default_model: null,
    languages: null,
    requires_url: true,
  },
  {
    id: 'sandbox',
    kind: 'stt',
    description: 'Offline speech-to-text that reads back the text carried by sandbox TTS audio.',
    models: [
      'sandbox',
    ],
    default_model: 'sandbox',
    languages: null,
    default_language: 'en',
  },
  {
    id: 'elevenlabs',
    kind: 'tts',
    description: 'ElevenLabs streaming text-to-speech (stream-input WebSocket, ulaw_8000 out).',
    models: [
      'eleven_flash_v2_5', 'eleven_turbo_v2_5', 'eleven_multilingual_v2', 'eleven_flash_v2',
      'eleven_turbo_v2',
    ],
    default_model: 'eleven_flash_v2_5',
    voices: null,
  },
  {
    id: 'openai',
    kind: 'tts',
    description: 'OpenAI text-to-speech (/v1/audio/speech), converted to μ-law 8 kHz.',
    models: [
      'gpt-4o-mini-tts', 'tts-1', 'tts-1-hd',
    ],
    default_model: 'gpt-4o-mini-tts',
    voices: [
      'alloy', 'ash', 'ballad', 'coral', 'echo', 'fable', 'nova', 'onyx', 'sage', 'shimmer',
      'verse',
    ],
  },
  {
    id: 'cartesia',
    kind: 'tts',
    description: 'Cartesia Sonic streaming text-to-speech (WebSocket, raw pcm_mulaw 8 kHz out).',
    models: [
      'sonic-2', 'sonic-turbo', 'sonic-3', 'sonic-3.5',
    ],
    default_model: 'sonic-2',
    voices: null,
  },
  {
    id: 'deepgram',
    kind: 'tts',
    description: 'Deepgram Aura-2 streaming text-to-speech (/v1/speak WebSocket, μ-law 8 kHz out); the voice is the Aura model name.',
    models: [
      'aura-2',
    ],
    default_model: 'aura-2',
    voices: [
      'aura-2-amalthea-en', 'aura-2-andromeda-en', 'aura-2-apollo-en', 'aura-2-arcas-en',
      'aura-2-aries-en', 'aura-2-asteria-en', 'aura-2-athena-en', 'aura-2-atlas-en',
      'aura-2-aurora-en', 'aura-2-callista-en', 'aura-2-cora-en', 'aura-2-cordelia-en',
      'aura-2-delia-en', 'aura-2-draco-en', 'aura-2-electra-en', 'aura-2-harmonia-en',
      'aura-2-helena-en', 'aura-2-hera-en', 'aura-2-hermes-en', 'aura-2-hyperion-en',
      'aura-2-iris-en', 'aura-2-janus-en', 'aura-2-juno-en', 'aura-2-jupiter-en', 'aura-2-luna-en',
      'aura-2-mars-en', 'aura-2-minerva-en', 'aura-2-neptune-en', 'aura-2-odysseus-en',
      'aura-2-ophelia-en', 'aura-2-orion-en', 'aura-2-orpheus-en', 'aura-2-pandora-en',
      'aura-2-phoebe-en', 'aura-2-pluto-en', 'aura-2-saturn-en', 'aura-2-selene-en',
      'aura-2-thalia-en', 'aura-2-theia-en', 'aura-2-vesta-en', 'aura-2-zeus-en',
      'aura-2-alvaro-es', 'aura-2-aquila-es', 'aura-2-carina-es', 'aura-2-celeste-es',
      'aura-2-diana-es', 'aura-2-estrella-es', 'aura-2-javier-es', 'aura-2-nestor-es',
      'aura-2-selena-es', 'aura-2-sirio-es',
    ],
    default_voice: 'aura-2-thalia-en',
  },
  {
    id: 'openai-compatible',
    kind: 'tts',
    description: 'Any server of OpenAI\'s /v1/audio/speech (Kokoro, Piper, openedai-speech, ...) at tts_config.base_url; WAV resampled to μ-law 8 kHz.',
    models: null,
    default_model: null,
    voices: null,
    requires_url: true,
  },
  {
    id: 'sandbox',
    kind: 'tts',
    description: 'Offline text-to-speech whose μ-law audio carries its text (demo and tests).',
    models: [
      'sandbox',
    ],
    default_model: 'sandbox',
    voices: [
      'sandbox',
    ],
    default_voice: 'sandbox',
  },
];
