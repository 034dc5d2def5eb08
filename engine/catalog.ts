/**
 * The platform catalog: which providers, models, languages and voices exist.
 * Validation (workflows and assistants), call-start checks and `GET /catalog` all read it.
 * Every provider listed here has a working adapter in `src/providers/`, whose declaration is the
 * source of its entry (`catalog-providers.ts` is generated from them).
 */
import { CATALOG_PROVIDERS } from './catalog-providers.js';
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
  /** The block's server URL is required (`llm_config.url`, `stt_config.base_url`, `tts_config.base_url`: a server of the customer's). */
  requires_url?: boolean;
}

export interface Catalog {
  providers: CatalogProvider[];
}

/**
 * The catalog every validation and call-start check reads by default: the providers this server
 * has adapters for, as their declarations in `src/providers/` describe them (docs/providers.md,
 * "Adding a vendor"). The engine reads nothing from `src/`, so the entries come from
 * `catalog-providers.ts`, which the registry's test writes from the declarations.
 */
export const defaultCatalog: Catalog = { providers: CATALOG_PROVIDERS };

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
  const urlField = urlFieldOf(kind);
  if (provider.requires_url && b[urlField] === undefined) {
    problems.push(`${path}.${urlField}: required for provider ${quote(provider.id)} (the server's base URL)`);
  }
  if (urlField === 'base_url' && b.base_url !== undefined && !provider.requires_url) {
    problems.push(`${path}.base_url: only for a provider of one's own server (${quote(provider.id)} is reached at its vendor's)`);
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

/** Where a block names its server: `llm_config.url`, the other blocks' `base_url`. */
export function urlFieldOf(kind: ConfigBlockKind | ProviderKind): 'url' | 'base_url' {
  return kind === 'llm' || kind === 'realtime' ? 'url' : 'base_url';
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
