/**
 * The provider declarations (src/providers/registry.ts) and what is derived from them: the
 * adapters, the catalog the engine reads (engine/catalog-providers.ts, written from them), the
 * configuration's variables, the key checks and docs/vendors.md.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { AssistantCreate, type AssistantFields } from '../../engine/assistant.js';
import { defaultCatalog } from '../../engine/catalog.js';
import { createProviders, providerSettings } from '../../src/providers/index.js';
import { ProviderKeys } from '../../src/providers/keys.js';
import { apiBaseVariable, apiKeyVariable, type ProviderDeclaration } from '../../src/providers/declare.js';
import { catalogEntries, keyVariables, PROVIDERS, vendorAccounts } from '../../src/providers/registry.js';
import { loadConfig } from '../../src/config.js';
import { catalogModule, vendorsDoc } from './generated.js';

const repoFile = (path: string) => readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8');

describe('provider registry', () => {
  const providers = createProviders(providerSettings(loadConfig({})));

  it('has a working adapter for every provider in the catalog, and nothing else', () => {
    for (const p of defaultCatalog.providers) {
      const adapter = providers[p.kind].get(p.id);
      expect(adapter, `${p.kind}/${p.id}`).toBeDefined();
      expect(adapter!.id).toBe(p.id);
    }
    const listed = (kind: 'llm' | 'stt' | 'tts' | 'realtime') =>
      defaultCatalog.providers.filter((p) => p.kind === kind).map((p) => p.id).sort();
    for (const kind of ['llm', 'stt', 'tts', 'realtime'] as const) {
      expect([...providers[kind].keys()].sort()).toEqual(listed(kind));
    }
  });

  it('the engine catalog is the declarations\' (engine/catalog-providers.ts is written from them)', async () => {
    await expect(catalogModule(catalogEntries())).toMatchFileSnapshot('../../engine/catalog-providers.ts');
    expect(defaultCatalog.providers).toEqual(catalogEntries());
  });

  it('docs/vendors.md is the declarations\' table', async () => {
    await expect(vendorsDoc(PROVIDERS)).toMatchFileSnapshot('../../docs/vendors.md');
  });

  it('each vendor account is read from <VENDOR>_API_KEY and <VENDOR>_API_BASE, its own base URL by default', () => {
    const accounts = vendorAccounts();
    expect(accounts.map((a) => a.name)).toEqual(['openai', 'anthropic', 'google', 'deepgram', 'elevenlabs', 'cartesia']);
    expect(keyVariables()).toEqual(['OPENAI_API_KEY', 'ANTHROPIC_API_KEY', 'GOOGLE_API_KEY', 'DEEPGRAM_API_KEY', 'ELEVENLABS_API_KEY', 'CARTESIA_API_KEY']);
    const unset = providerSettings(loadConfig({}));
    const env = Object.fromEntries(accounts.flatMap((a) => [[apiBaseVariable(a), `https://${a.name}.example.com`], [apiKeyVariable(a), `${a.name}-key`]]));
    const set = providerSettings(loadConfig(env));
    for (const a of accounts) {
      expect(unset[a.name as keyof typeof unset], a.name).toEqual({ baseUrl: a.baseUrl, apiKey: undefined });
      expect(set[a.name as keyof typeof set], a.name).toEqual({ baseUrl: `https://${a.name}.example.com`, apiKey: `${a.name}-key` });
    }
    expect(() => loadConfig({ GOOGLE_API_BASE: 'not a url' })).toThrow(/GOOGLE_API_BASE: /);
  });

  it('a provider needs the key of its account, and none when it has no account', () => {
    const keys = new ProviderKeys(providerSettings(loadConfig({ ANTHROPIC_API_KEY: 'k' })));
    for (const p of PROVIDERS) {
      const missing = keys.missing(p.catalog.kind, p.catalog.id);
      if (!p.account) expect(missing, p.catalog.id).toBeNull();
      else if (p.account.name === 'anthropic') expect(missing).toBeNull();
      else expect(missing, `${p.catalog.kind}/${p.catalog.id}`).toBe(apiKeyVariable(p.account));
    }
    expect(keys.missing('llm', 'google')).toBe('GOOGLE_API_KEY');
    expect(keys.missing('llm', 'no-such-provider')).toBeNull();
  });

  it('an assistant listening through openai needs OPENAI_API_KEY (warned on writes, refused at start); openai-compatible needs none', () => {
    const keys = new ProviderKeys(providerSettings(loadConfig({ DEEPGRAM_API_KEY: 'k' })));
    const assistant = (stt_config: Record<string, unknown>) =>
      AssistantCreate.parse({ name: 'a', llm_config: { provider: 'sandbox' }, tts_config: { provider: 'sandbox', voice_id: 'sandbox' }, stt_config }) as AssistantFields;
    expect(keys.problems(assistant({ provider: 'openai', model: 'gpt-4o-mini-transcribe' }), null)).toEqual([
      'stt_config.provider: provider "openai" needs OPENAI_API_KEY, which is not set on this server',
    ]);
    expect(keys.problems(assistant({ provider: 'openai-compatible', model: 'whisper-1', base_url: 'http://whisper.local:8000' }), null)).toEqual([]);
  });

  it('refuses an account declared two ways, a provider declared twice and a bad account name', () => {
    const [openai] = PROVIDERS.filter((p) => p.account?.name === 'openai') as [ProviderDeclaration];
    const other = { ...openai, catalog: { ...openai.catalog, id: 'other' } };
    expect(() => vendorAccounts([openai, { ...other, account: { ...openai.account!, baseUrl: 'https://elsewhere' } }])).toThrow(/declared two ways/);
    expect(() => vendorAccounts([openai, openai])).toThrow(/declared twice/);
    expect(() => vendorAccounts([{ ...other, account: { ...openai.account!, name: 'Open AI' } }])).toThrow(/lower case/);
  });

  it('docker-compose.yml passes every vendor key through', () => {
    const compose = repoFile('docker-compose.yml');
    for (const variable of keyVariables()) expect(compose, variable).toContain(`${variable}: \${${variable}:-}`);
  });
});
