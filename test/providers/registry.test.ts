import { describe, expect, it } from 'vitest';
import { defaultCatalog } from '../../engine/catalog.js';
import { createProviders, providerSettings } from '../../src/providers/index.js';
import { loadConfig } from '../../src/config.js';

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
});
