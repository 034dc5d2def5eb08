/**
 * How a provider declares itself (DECISIONS 18): one file under `src/providers/<kind>/` exports a
 * `provider` made with `declareProvider`, holding its catalog entry, the vendor account whose key
 * and base URL it reads, and its adapter factory. `registry.ts` lists the declarations; the
 * catalog (`engine/catalog-providers.ts`, generated), the configuration's variables, the key checks,
 * the OpenAPI descriptions and docs/vendors.md are derived from them. docs/providers.md, "Adding a
 * vendor", says which files a new vendor touches.
 */
import type { CatalogProvider, ProviderKind } from '../../engine/catalog.js';
import type {
  LlmProvider,
  ProviderSettings,
  RealtimeProvider,
  SttProvider,
  TtsProvider,
  VendorEndpoint,
} from './types.js';

/** The adapter each kind of provider builds. */
export interface Adapters {
  llm: LlmProvider;
  realtime: RealtimeProvider;
  stt: SttProvider;
  tts: TtsProvider;
}

/**
 * A vendor account: the key and base URL its providers share (OpenAI's chat model, voice and
 * realtime model all read `OPENAI_API_KEY` and `OPENAI_API_BASE`).
 */
export interface VendorAccount {
  /**
   * Lower case (`a-z`, `0-9`, `-`): the field of `ProviderSettings` and the variables' prefix,
   * upper-cased with `-` as `_` (`openai` → `OPENAI_API_KEY`, `OPENAI_API_BASE`).
   */
  name: string;
  /** As people write it, for messages and docs: `OpenAI`. */
  label: string;
  /** The default of `<VENDOR>_API_BASE`. */
  baseUrl: string;
}

export interface ProviderDeclaration<K extends ProviderKind = ProviderKind> {
  /** The catalog entry exactly as `GET /catalog` serves it, with its kind. */
  catalog: CatalogProvider & { kind: K };
  /** The account whose key and base URL the adapter reads; `null`: none of the server's. */
  account: VendorAccount | null;
  /** What a provider without an account needs instead (docs/vendors.md), e.g. its own URL. */
  needs?: string;
  /** The adapter, built once per process from the configuration's endpoints. */
  create(settings: ProviderSettings): Adapters[K];
}

/** Checks the declaration's shape at compile time; returns it as it is. */
export function declareProvider<K extends ProviderKind>(declaration: ProviderDeclaration<K>): ProviderDeclaration<K> {
  return declaration;
}

const prefix = (account: VendorAccount) => account.name.toUpperCase().replaceAll('-', '_');

/** `<VENDOR>_API_KEY`: the account's key, unset by default. */
export function apiKeyVariable(account: VendorAccount): `${string}_API_KEY` {
  return `${prefix(account)}_API_KEY`;
}

/** `<VENDOR>_API_BASE`: where the vendor is, the account's `baseUrl` by default. */
export function apiBaseVariable(account: VendorAccount): `${string}_API_BASE` {
  return `${prefix(account)}_API_BASE`;
}

/**
 * The account's endpoint in `settings`; a settings object that has none (one built by hand for a
 * test of another vendor) gives the vendor's own base URL and no key.
 */
export function vendorEndpoint(settings: ProviderSettings, account: VendorAccount): VendorEndpoint {
  const endpoints = settings as unknown as Readonly<Record<string, VendorEndpoint | undefined>>;
  return endpoints[account.name] ?? { baseUrl: account.baseUrl };
}
