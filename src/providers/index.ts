/**
 * Every adapter, by catalog provider id, built from the declarations in `registry.ts`, and the
 * vendors' endpoints they read, from `<VENDOR>_API_BASE` and `<VENDOR>_API_KEY`.
 */
import type { Config } from '../config.js';
import { apiBaseVariable, apiKeyVariable } from './declare.js';
import { PROVIDERS, vendorAccounts } from './registry.js';
import type { Providers, ProviderSettings, VendorEndpoint } from './types.js';

export function providerSettings(config: Config): ProviderSettings {
  const endpoints: Record<string, VendorEndpoint> = {};
  for (const account of vendorAccounts()) {
    endpoints[account.name] = {
      baseUrl: config[apiBaseVariable(account)] ?? account.baseUrl,
      apiKey: config[apiKeyVariable(account)],
    };
  }
  return endpoints as ProviderSettings;
}

export function createProviders(settings: ProviderSettings): Providers {
  const providers: Providers = { stt: new Map(), llm: new Map(), tts: new Map(), realtime: new Map() };
  for (const p of PROVIDERS) {
    const adapter = p.create(settings);
    // `create` of a declaration of kind K builds the adapter of kind K (declare.ts)
    (providers[p.catalog.kind] as Map<string, typeof adapter>).set(p.catalog.id, adapter);
  }
  return providers;
}
