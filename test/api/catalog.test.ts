/** GET /catalog (DECISIONS 4): the providers validation uses, and validation agreeing with it. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { build, pipelineAssistant, sampleDefinition, type TestApp } from '../helpers/app.js';

interface Provider {
  id: string;
  description: string;
  models: string[] | null;
  default_model: string | null;
  languages?: Record<string, string[]> | null;
  default_language?: string;
  voices?: string[] | null;
  default_voice?: string;
  requires_url?: boolean;
}
type Catalog = Record<'llm' | 'realtime' | 'stt' | 'tts', Provider[]> & { background_clips: { id: string; description: string }[] };

let t: TestApp;
let catalog: Catalog;
beforeAll(async () => {
  t = await build();
  const res = await t.request('GET', '/catalog');
  expect(res.statusCode).toBe(200);
  catalog = res.json().catalog;
});
afterAll(async () => {
  await t.close();
});

const ids = (providers: Provider[]) => providers.map((p) => p.id);
const find = (kind: 'llm' | 'realtime' | 'stt' | 'tts', id: string) => catalog[kind].find((p) => p.id === id)!;

describe('GET /catalog', () => {
  it('lists the four kinds and at least the providers DECISIONS 4 names, and the background clips', () => {
    expect(Object.keys(catalog).sort()).toEqual(['background_clips', 'llm', 'realtime', 'stt', 'tts']);
    expect(catalog.background_clips.map((c) => c.id)).toEqual(['office', 'cafe']);
    expect(ids(catalog.llm)).toEqual(expect.arrayContaining(['openai', 'custom-llm', 'sandbox']));
    expect(ids(catalog.realtime)).toEqual(expect.arrayContaining(['openai-realtime', 'sandbox-realtime']));
    expect(ids(catalog.stt)).toEqual(expect.arrayContaining(['deepgram', 'sandbox']));
    expect(ids(catalog.tts)).toEqual(expect.arrayContaining(['elevenlabs', 'openai', 'sandbox']));
    for (const kind of ['llm', 'realtime', 'stt', 'tts'] as const) {
      expect(new Set(ids(catalog[kind])).size, kind).toBe(catalog[kind].length);
      for (const p of catalog[kind]) {
        expect(p.description.length, `${kind}/${p.id}`).toBeGreaterThan(0);
        expect(p).not.toHaveProperty('kind');
        if (p.models !== null) {
          expect(p.models.length).toBeGreaterThan(0);
          if (p.default_model !== null) expect(p.models).toContain(p.default_model);
        }
      }
    }
  });

  it('the providers have the models, languages and voices that DECISIONS 4 asks for', () => {
    const openai = find('llm', 'openai');
    expect(openai.models).toEqual(expect.arrayContaining(['gpt-4o', 'gpt-4o-mini', 'gpt-4.1', 'gpt-5']));
    expect(openai.default_model).toBe('gpt-4o-mini');
    expect(find('llm', 'custom-llm')).toMatchObject({ models: null, default_model: null, requires_url: true });
    expect(find('realtime', 'openai-realtime').models?.length).toBeGreaterThan(0);
    const deepgram = find('stt', 'deepgram');
    expect(deepgram.models).toEqual(expect.arrayContaining(['nova-2', 'nova-3']));
    expect(deepgram).toMatchObject({ default_model: 'nova-3', default_language: 'en' });
    expect(deepgram.languages?.['nova-3']).toContain('en');
    expect(deepgram.languages?.['nova-2']).toContain('en');
    expect(find('stt', 'openai')).toMatchObject({ models: ['gpt-4o-transcribe', 'gpt-4o-mini-transcribe'], default_model: 'gpt-4o-transcribe', default_language: 'en' });
    expect(find('stt', 'openai-compatible')).toMatchObject({ models: null, default_model: null, requires_url: true });
    expect(find('tts', 'elevenlabs').voices).toBeNull();
    const openaiTts = find('tts', 'openai');
    expect(Array.isArray(openaiTts.voices)).toBe(true);
    expect(openaiTts.voices).toContain('alloy');
    for (const kind of ['llm', 'stt', 'tts'] as const) {
      expect(find(kind, 'sandbox')).toMatchObject({ models: ['sandbox'], default_model: 'sandbox' });
    }
    expect(find('tts', 'sandbox').voices).toEqual(['sandbox']);
    expect(find('realtime', 'sandbox-realtime')).toMatchObject({ models: ['sandbox'], default_model: 'sandbox' });
  });

  it('is the same for every organization', async () => {
    const theirs = await t.request('GET', '/catalog', undefined, t.otherKey);
    expect(theirs.json().catalog).toEqual(catalog);
  });
});

describe('validation agrees with the catalog it publishes', () => {
  const assistant = (fields: Record<string, unknown>) => t.request('POST', '/assistants', { ...pipelineAssistant, ...fields });
  const withNode = (extra: Record<string, unknown>) => {
    const definition = sampleDefinition() as { nodes: Record<string, unknown>[] };
    definition.nodes[0] = { ...definition.nodes[0], ...extra };
    return t.request('POST', '/workflows', { name: 'catalog check', definition });
  };

  it('every listed llm model is accepted, on an assistant and on a node', async () => {
    for (const p of catalog.llm) {
      const models = p.models ?? ['any-model-name'];
      for (const model of models) {
        const block = { provider: p.id, model, ...(p.requires_url ? { url: 'http://127.0.0.1:11434/v1' } : {}) };
        expect((await assistant({ llm_config: block })).statusCode, `${p.id}/${model}`).toBe(201);
        expect((await withNode({ llm_config: block })).statusCode, `node ${p.id}/${model}`).toBe(201);
      }
      if (p.models) {
        const res = await assistant({ llm_config: { provider: p.id, model: 'not-a-model' } });
        expect(res.statusCode).toBe(400);
        expect(res.json().details[0]).toMatch(/^llm_config\.model: unknown model "not-a-model"/);
      }
    }
  });

  it('every realtime model is accepted on an assistant and refused on a node', async () => {
    for (const p of catalog.realtime) {
      for (const model of p.models ?? []) {
        const block = { provider: p.id, model };
        const res = await t.request('POST', '/assistants', { name: 'rt', llm_config: block });
        expect(res.statusCode, `${p.id}/${model}`).toBe(201);
        const node = await withNode({ llm_config: block });
        expect(node.statusCode).toBe(400);
        expect(node.json().details[0]).toMatch(/^nodes\[0\] \(step_0\)\.llm_config\.provider: .*realtime/);
      }
    }
  });

  it('every listed stt model and language is accepted; others are refused', async () => {
    for (const p of catalog.stt) {
      for (const model of p.models ?? []) {
        const languages = p.languages?.[model] ?? [p.default_language ?? 'en'];
        // every language on the node (cheap), a sample on the assistant
        for (const language of languages) {
          const res = await withNode({ stt_config: { provider: p.id, model, language } });
          expect(res.statusCode, `${p.id}/${model}/${language}`).toBe(201);
        }
        expect((await assistant({ stt_config: { provider: p.id, model, language: languages[0] } })).statusCode).toBe(201);
        if (p.languages) {
          const res = await assistant({ stt_config: { provider: p.id, model, language: 'xx-XX' } });
          expect(res.json().details[0]).toMatch(/^stt_config\.language: unknown language "xx-XX"/);
        }
      }
    }
  });

  it('openai-compatible STT needs its server (stt_config.base_url) and a model: 400 naming each, else 201', async () => {
    const missing = await assistant({ stt_config: { provider: 'openai-compatible' } });
    expect(missing.statusCode).toBe(400);
    expect(missing.json().details).toEqual([
      'stt_config.model: required for provider "openai-compatible"',
      'stt_config.base_url: required for provider "openai-compatible" (the server\'s base URL)',
    ]);
    const notUrl = await assistant({ stt_config: { provider: 'openai-compatible', model: 'whisper-1', base_url: 'whisper.local' } });
    expect(notUrl.statusCode).toBe(400);
    expect(notUrl.json().details[0]).toMatch(/^stt_config\.base_url: must be an absolute http\(s\) URL/);
    const ok = await assistant({ stt_config: { provider: 'openai-compatible', model: 'Systran/faster-whisper-small', base_url: 'http://whisper.local:8000' } });
    expect(ok.statusCode).toBe(201);
    expect(ok.json().assistant.stt_config).toEqual({ provider: 'openai-compatible', model: 'Systran/faster-whisper-small', base_url: 'http://whisper.local:8000' });
  });

  it('every listed voice is accepted; an unlisted voice only where voices are enumerated', async () => {
    for (const p of catalog.tts) {
      // what the provider needs besides a voice: a model when it has no default, its server's URL
      const needs = { ...(p.default_model === null ? { model: 'any-model' } : {}), ...(p.requires_url ? { base_url: 'http://127.0.0.1:8880' } : {}) };
      for (const voice of p.voices ?? ['any-voice-id']) {
        expect((await assistant({ tts_config: { provider: p.id, voice_id: voice, ...needs } })).statusCode, `${p.id}/${voice}`).toBe(201);
      }
      const unlisted = await assistant({ tts_config: { provider: p.id, voice_id: 'surely-not-a-voice', ...needs } });
      if (p.voices) {
        expect(unlisted.statusCode).toBe(400);
        expect(unlisted.json().details[0]).toMatch(/^tts_config\.voice_id: unknown voice "surely-not-a-voice"/);
      } else {
        expect(unlisted.statusCode).toBe(201);
      }
    }
  });

  it('a provider that is not listed is refused, naming the listed ones', async () => {
    const res = await assistant({ tts_config: { provider: 'acme-tts', voice_id: 'v' } });
    expect(res.statusCode).toBe(400);
    const detail: string = res.json().details[0];
    expect(detail).toMatch(/^tts_config\.provider: unknown tts provider "acme-tts"/);
    for (const id of ids(catalog.tts)) expect(detail).toContain(`"${id}"`);
  });
});
