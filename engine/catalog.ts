/**
 * The platform catalog: which providers, models, languages and voices exist.
 * Validation (workflows and assistants), call-start checks and `GET /catalog` all read it.
 * Every provider listed here must have a working adapter in `src/providers/`.
 */
import { own, quote } from './paths.js';

export type ProviderKind = 'llm' | 'realtime' | 'stt' | 'tts';

export interface CatalogProvider {
  /** The value of `provider` in a config block. */
  id: string;
  kind: ProviderKind;
  description: string;
  /** Known model ids, or `null` when any model name is accepted (OpenAI-compatible servers). */
  models: string[] | null;
  /** Model used when a config block names none; `null` when the block must name one. */
  default_model: string | null;
  /** STT only: languages by model, or `null` when not enumerated. */
  languages?: Record<string, string[]> | null;
  default_language?: string;
  /** TTS and realtime: voices, or `null` when the provider's voices are not enumerated. */
  voices?: string[] | null;
  default_voice?: string;
  /** `llm_config.url` is required (OpenAI-compatible server of the customer's). */
  requires_url?: boolean;
}

export interface Catalog {
  providers: CatalogProvider[];
}

const DEEPGRAM_NOVA3_LANGUAGES = [
  'multi', 'en', 'en-US', 'en-AU', 'en-GB', 'en-IN', 'en-NZ', 'es', 'es-419', 'fr', 'fr-CA', 'de',
  'de-CH', 'hi', 'it', 'ja', 'nl', 'nl-BE', 'pt', 'pt-BR', 'pt-PT', 'ru', 'sv', 'sv-SE', 'da',
  'da-DK', 'no', 'fi', 'pl', 'tr', 'uk', 'cs', 'ro', 'ko', 'ko-KR', 'id', 'vi', 'bg', 'ca', 'el',
  'et', 'hu', 'lt', 'lv', 'ms', 'sk',
];

const DEEPGRAM_NOVA2_LANGUAGES = [
  'multi', 'en', 'en-US', 'en-AU', 'en-GB', 'en-IN', 'en-NZ', 'es', 'es-419', 'fr', 'fr-CA', 'de',
  'de-CH', 'hi', 'hi-Latn', 'it', 'ja', 'nl', 'nl-BE', 'pt', 'pt-BR', 'pt-PT', 'ru', 'sv', 'sv-SE',
  'da', 'da-DK', 'no', 'fi', 'pl', 'tr', 'uk', 'cs', 'ro', 'ko', 'ko-KR', 'id', 'vi', 'bg', 'ca',
  'el', 'et', 'hu', 'lt', 'lv', 'ms', 'sk', 'th', 'th-TH', 'zh', 'zh-CN', 'zh-Hans', 'zh-TW',
  'zh-Hant', 'zh-HK',
];

const OPENAI_TTS_VOICES = [
  'alloy', 'ash', 'ballad', 'coral', 'echo', 'fable', 'nova', 'onyx', 'sage', 'shimmer', 'verse',
];

const OPENAI_REALTIME_VOICES = [
  'alloy', 'ash', 'ballad', 'cedar', 'coral', 'echo', 'marin', 'sage', 'shimmer', 'verse',
];

export const defaultCatalog: Catalog = {
  providers: [
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
      id: 'custom-llm',
      kind: 'llm',
      description:
        'Any OpenAI-compatible chat completions server (Ollama, vLLM, llama.cpp, ...) at llm_config.url.',
      models: null,
      default_model: null,
      requires_url: true,
    },
    {
      id: 'sandbox',
      kind: 'llm',
      description:
        'Offline, deterministic stand-in for a language model (demo and tests). Not intelligent: it picks the transition whose description shares the most words with what the caller said.',
      models: ['sandbox'],
      default_model: 'sandbox',
    },
    {
      id: 'openai-realtime',
      kind: 'realtime',
      description: 'OpenAI Realtime speech-to-speech (GA protocol, audio/pcmu).',
      models: ['gpt-realtime', 'gpt-realtime-mini'],
      default_model: 'gpt-realtime',
      voices: OPENAI_REALTIME_VOICES,
      default_voice: 'marin',
    },
    {
      id: 'sandbox-realtime',
      kind: 'realtime',
      description:
        'Offline speech-to-speech stand-in built from the sandbox STT, model and TTS (demo and tests).',
      models: ['sandbox'],
      default_model: 'sandbox',
      voices: ['sandbox'],
      default_voice: 'sandbox',
    },
    {
      id: 'deepgram',
      kind: 'stt',
      description: 'Deepgram live streaming speech-to-text (μ-law 8 kHz in).',
      models: ['nova-3', 'nova-2'],
      default_model: 'nova-3',
      languages: { 'nova-3': DEEPGRAM_NOVA3_LANGUAGES, 'nova-2': DEEPGRAM_NOVA2_LANGUAGES },
      default_language: 'en',
    },
    {
      id: 'sandbox',
      kind: 'stt',
      description: 'Offline speech-to-text that reads back the text carried by sandbox TTS audio.',
      models: ['sandbox'],
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
      models: ['gpt-4o-mini-tts', 'tts-1', 'tts-1-hd'],
      default_model: 'gpt-4o-mini-tts',
      voices: OPENAI_TTS_VOICES,
    },
    {
      id: 'sandbox',
      kind: 'tts',
      description: 'Offline text-to-speech whose μ-law audio carries its text (demo and tests).',
      models: ['sandbox'],
      default_model: 'sandbox',
      voices: ['sandbox'],
      default_voice: 'sandbox',
    },
  ],
};

export function findProvider(
  catalog: Catalog,
  kind: ProviderKind,
  id: unknown,
): CatalogProvider | undefined {
  if (typeof id !== 'string') return undefined;
  return catalog.providers.find((p) => p.kind === kind && p.id === id);
}

export function providerIds(catalog: Catalog, kind: ProviderKind): string[] {
  return catalog.providers.filter((p) => p.kind === kind).map((p) => p.id);
}

/** A realtime assistant is one whose `llm_config.provider` is a realtime provider. */
export function isRealtimeProvider(catalog: Catalog, id: unknown): boolean {
  return findProvider(catalog, 'realtime', id) !== undefined;
}

export type ConfigBlockKind = 'llm' | 'stt' | 'tts';

export interface CatalogCheckOptions {
  /** Realtime providers are allowed in `llm_config` (assistants: yes; workflow nodes: no). */
  allowRealtime: boolean;
}

const list = (xs: string[]) => xs.map(quote).join(', ');

/**
 * Every catalog problem of one config block, each prefixed with `path` (e.g. `nodes[2] (booking).tts_config`,
 * written by paths.ts).
 * Works on any JSON value; type problems of other fields are the schema's business.
 */
export function catalogProblems(
  kind: ConfigBlockKind,
  block: unknown,
  path: string,
  options: CatalogCheckOptions,
  catalog: Catalog = defaultCatalog,
): string[] {
  if (typeof block !== 'object' || block === null || Array.isArray(block)) return [];
  const b = block as Record<string, unknown>;
  if (b.provider === undefined || b.provider === null) {
    return [`${path}.provider: required (one of ${list(allowedProviders(catalog, kind, options))})`];
  }
  if (typeof b.provider !== 'string') return [];
  let provider = findProvider(catalog, kind, b.provider);
  if (kind === 'llm' && !provider) {
    const realtime = findProvider(catalog, 'realtime', b.provider);
    if (realtime && !options.allowRealtime) {
      return [
        `${path}.provider: ${quote(b.provider)} is a realtime (speech-to-speech) provider; realtime models cannot be set per node, only on the assistant`,
      ];
    }
    provider = realtime;
  }
  if (!provider) {
    return [
      `${path}.provider: unknown ${kind} provider ${quote(b.provider)} (one of ${list(allowedProviders(catalog, kind, options))})`,
    ];
  }
  const problems: string[] = [];
  const model = typeof b.model === 'string' ? b.model : undefined;
  if (model !== undefined && provider.models && !provider.models.includes(model)) {
    problems.push(
      `${path}.model: unknown model ${quote(model)} for provider ${quote(provider.id)} (one of ${list(provider.models)})`,
    );
  }
  if (b.model === undefined && provider.default_model === null) {
    problems.push(`${path}.model: required for provider ${quote(provider.id)}`);
  }
  if (provider.requires_url && b.url === undefined) {
    problems.push(`${path}.url: required for provider ${quote(provider.id)} (the server's base URL)`);
  }
  if (kind === 'stt' && typeof b.language === 'string' && provider.languages) {
    const effectiveModel = model ?? provider.default_model ?? '';
    const languages = own(provider.languages, effectiveModel);
    if (languages && !languages.includes(b.language)) {
      problems.push(
        `${path}.language: unknown language ${quote(b.language)} for ${provider.id} model ${quote(effectiveModel)}`,
      );
    }
  }
  if (kind === 'tts' && typeof b.voice_id === 'string' && provider.voices) {
    if (!provider.voices.includes(b.voice_id)) {
      problems.push(
        `${path}.voice_id: unknown voice ${quote(b.voice_id)} for provider ${quote(provider.id)} (one of ${list(provider.voices)})`,
      );
    }
  }
  return problems;
}

function allowedProviders(catalog: Catalog, kind: ConfigBlockKind, options: CatalogCheckOptions) {
  const ids = providerIds(catalog, kind);
  if (kind === 'llm' && options.allowRealtime) ids.push(...providerIds(catalog, 'realtime'));
  return [...new Set(ids)];
}

// ---------------------------------------------------------------------------------------------
// Background audio (DECISIONS 13)

/** The background clips shipped with Switchboard (`speech_config.background_audio.clip`). */
export const BACKGROUND_CLIPS: readonly { id: string; description: string }[] = [
  { id: 'office', description: 'A quiet office: room tone, keyboards, distant voices' },
  { id: 'cafe', description: 'A busy café: many voices at once, cups and spoons' },
];

/**
 * What is wrong with a `background_audio.clip` by its form alone, or null: a shipped clip's name,
 * or an https URL of a WAV file (http only where private addresses are allowed, for development).
 * Whether the URL gives a usable WAV is checked when the clip is loaded.
 */
export function backgroundClipProblem(clip: string, options: { allowHttp?: boolean } = {}): string | null {
  if (BACKGROUND_CLIPS.some((c) => c.id === clip)) return null;
  const names = BACKGROUND_CLIPS.map((c) => `"${c.id}"`).join(', ');
  let url: URL;
  try {
    url = new URL(clip);
  } catch {
    return `unknown clip "${clip}": one of ${names} (GET /catalog lists them), or an https URL of a WAV file`;
  }
  if (url.protocol !== 'https:' && !(options.allowHttp && url.protocol === 'http:')) {
    return `a clip URL must use https, not ${url.protocol.replace(/:$/, '')}`;
  }
  if (url.hostname === '') return 'the clip URL has no host';
  return null;
}
