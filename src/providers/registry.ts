/**
 * Every provider this server has, one declaration each (`declare.ts`), in the catalog's order:
 * a new vendor's file adds one line here. Everything else about providers is derived from this
 * list: the catalog (`engine/catalog-providers.ts`, written from `catalogEntries()` by
 * test/providers/registry.test.ts), the configuration's `<VENDOR>_API_KEY` and `<VENDOR>_API_BASE`
 * (`src/config.ts`), the adapters (`index.ts`), the key checks (`keys.ts`) and docs/vendors.md.
 */
import type { CatalogProvider, ProviderKind } from '../../engine/catalog.js';
import { apiKeyVariable, type ProviderDeclaration, type VendorAccount } from './declare.js';
import { provider as openAiLlm } from './llm/openai.js';
import { provider as anthropicLlm } from './llm/anthropic.js';
import { provider as googleLlm } from './llm/google.js';
import { provider as customLlm } from './llm/custom-llm.js';
import { provider as sandboxLlm } from './sandbox/llm.js';
import { provider as openAiRealtime } from './realtime/openai.js';
import { provider as googleLive } from './realtime/google-live.js';
import { provider as sandboxRealtime } from './sandbox/realtime.js';
import { provider as deepgramStt } from './stt/deepgram.js';
import { provider as openAiStt } from './stt/openai.js';
import { provider as openAiCompatibleStt } from './stt/openai-compatible.js';
import { provider as sandboxStt } from './sandbox/stt.js';
import { provider as elevenLabsTts } from './tts/elevenlabs.js';
import { provider as openAiTts } from './tts/openai.js';
import { provider as cartesiaTts } from './tts/cartesia.js';
import { provider as deepgramTts } from './tts/deepgram.js';
import { provider as openAiCompatibleTts } from './tts/openai-compatible.js';
import { provider as sandboxTts } from './sandbox/tts.js';

export const PROVIDERS: readonly ProviderDeclaration[] = [
  openAiLlm,
  anthropicLlm,
  googleLlm,
  customLlm,
  sandboxLlm,
  openAiRealtime,
  googleLive,
  sandboxRealtime,
  deepgramStt,
  openAiStt,
  openAiCompatibleStt,
  sandboxStt,
  elevenLabsTts,
  openAiTts,
  cartesiaTts,
  deepgramTts,
  openAiCompatibleTts,
  sandboxTts,
];

/** The declaration of a provider by kind and catalog id. */
export function findDeclaration(kind: ProviderKind, id: string): ProviderDeclaration | undefined {
  return PROVIDERS.find((p) => p.catalog.kind === kind && p.catalog.id === id);
}

/**
 * Every vendor account the providers read, once each, in the order first named. Two providers of
 * one account must agree on it (same label and base URL), and two kinds never share an id twice.
 */
export function vendorAccounts(providers: readonly ProviderDeclaration[] = PROVIDERS): VendorAccount[] {
  const accounts = new Map<string, VendorAccount>();
  const seen = new Set<string>();
  for (const p of providers) {
    const key = `${p.catalog.kind}/${p.catalog.id}`;
    if (seen.has(key)) throw new Error(`provider ${key} is declared twice`);
    seen.add(key);
    const account = p.account;
    if (!account) continue;
    if (!/^[a-z][a-z0-9-]*$/.test(account.name)) throw new Error(`vendor account name "${account.name}" (${key}): lower case letters, digits and "-" only`);
    const known = accounts.get(account.name);
    if (!known) accounts.set(account.name, account);
    else if (known.label !== account.label || known.baseUrl !== account.baseUrl) {
      throw new Error(`vendor account "${account.name}" is declared two ways (${key})`);
    }
  }
  return [...accounts.values()];
}

/** The variables of the vendors' keys: `DEEPGRAM_API_KEY`, `OPENAI_API_KEY`, … */
export function keyVariables(): string[] {
  return vendorAccounts().map(apiKeyVariable);
}

/** The catalog's providers, as `engine/catalog-providers.ts` holds them. */
export function catalogEntries(providers: readonly ProviderDeclaration[] = PROVIDERS): CatalogProvider[] {
  return providers.map((p) => p.catalog);
}
