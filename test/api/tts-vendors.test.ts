/**
 * The voices of Cartesia, Deepgram Aura and OpenAI-compatible servers as the API sees them: in
 * the catalog, validated as their declarations say (`openai-compatible` needs `base_url` and a
 * model), and their keys checked by their accounts (a write warns; a call is refused at start).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { providerSettings } from '../../src/providers/index.js';
import { ProviderKeys } from '../../src/providers/keys.js';
import { build, pipelineAssistant, type TestApp } from '../helpers/app.js';

let t: TestApp;
beforeAll(async () => {
  t = await build({ env: { DEEPGRAM_API_KEY: 'dg-key' } });
});
afterAll(async () => {
  await t.close();
});

const create = (tts_config: Record<string, unknown>) => t.request('POST', '/assistants', { ...pipelineAssistant, tts_config });

describe('the new voices through the API', () => {
  it('GET /catalog lists them as their declarations say', async () => {
    const tts = (await t.request('GET', '/catalog')).json().catalog.tts as Array<Record<string, unknown>>;
    expect(tts.find((p) => p.id === 'cartesia')).toMatchObject({ models: expect.arrayContaining(['sonic-2', 'sonic-turbo']), default_model: 'sonic-2', voices: null });
    expect(tts.find((p) => p.id === 'deepgram')).toMatchObject({ default_model: 'aura-2', default_voice: 'aura-2-thalia-en', voices: expect.arrayContaining(['aura-2-thalia-en']) });
    expect(tts.find((p) => p.id === 'openai-compatible')).toMatchObject({ models: null, default_model: null, voices: null, requires_url: true });
  });

  it('cartesia without CARTESIA_API_KEY: saved with a warning, and a call would be refused at start', async () => {
    const res = await create({ provider: 'cartesia', voice_id: 'a0e99841-438c-4a64-b679-ae501e7d6091' });
    expect(res.statusCode).toBe(201);
    const line = 'tts_config.provider: provider "cartesia" needs CARTESIA_API_KEY, which is not set on this server';
    expect(res.json().warnings).toEqual([line]);
    // the call service refuses a call at start with these same lines (CALL_REJECTED_MISSING_PROVIDER_KEY)
    const fields = res.json().assistant;
    expect(new ProviderKeys(providerSettings(loadConfig({}))).problems(fields, null)).toEqual([line]);
    expect(new ProviderKeys(providerSettings(loadConfig({ CARTESIA_API_KEY: 'sk_car' }))).problems(fields, null)).toEqual([]);
  });

  it('deepgram speaks with the account\'s key (the transcriber\'s); an unlisted voice is refused', async () => {
    const res = await create({ provider: 'deepgram', voice_id: 'aura-2-orion-en' });
    expect(res.statusCode).toBe(201);
    expect(res.json().warnings).toEqual([]);
    expect(res.json().assistant.tts_config).toMatchObject({ provider: 'deepgram', model: 'aura-2' });
    const bad = await create({ provider: 'deepgram', voice_id: 'aura-asteria-en' });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().details[0]).toMatch(/^tts_config\.voice_id: unknown voice "aura-asteria-en" for provider "deepgram"/);
  });

  it('openai-compatible needs base_url (an http(s) URL) and a model; it needs no key', async () => {
    const missing = await create({ provider: 'openai-compatible', model: 'kokoro', voice_id: 'af_bella' });
    expect(missing.statusCode).toBe(400);
    expect(missing.json().details).toEqual(['tts_config.base_url: required for provider "openai-compatible" (the server\'s base URL)']);
    const badUrl = await create({ provider: 'openai-compatible', base_url: 'ftp://tts.local', model: 'kokoro', voice_id: 'af_bella' });
    expect(badUrl.statusCode).toBe(400);
    expect(badUrl.json().details).toEqual([expect.stringMatching(/^tts_config\.base_url: must be an absolute http\(s\) URL/)]);
    const noModel = await create({ provider: 'openai-compatible', base_url: 'http://127.0.0.1:8880', voice_id: 'af_bella' });
    expect(noModel.json().details).toEqual(['tts_config.model: required for provider "openai-compatible"']);
    const ok = await create({ provider: 'openai-compatible', base_url: 'http://127.0.0.1:8880', model: 'kokoro', voice_id: 'af_bella' });
    expect(ok.statusCode).toBe(201);
    expect(ok.json().warnings).toEqual([]);
    expect(ok.json().assistant.tts_config).toEqual({ provider: 'openai-compatible', base_url: 'http://127.0.0.1:8880', model: 'kokoro', voice_id: 'af_bella' });
  });

  it('credentials in base_url are write-only: masked on reads, kept when sent back masked', async () => {
    const real = 'https://tts:s3cret-pw@tts.example.com/';
    const res = await create({ provider: 'openai-compatible', base_url: real, model: 'kokoro', voice_id: 'af_bella' });
    expect(res.statusCode).toBe(201);
    const id = res.json().assistant.id;
    const got = (await t.request('GET', `/assistants/${id}`)).json().assistant;
    expect(got.tts_config.base_url).toBe('https://tts:****@tts.example.com/');
    expect(JSON.stringify(got)).not.toContain('s3cret-pw');
    const patched = await t.request('PATCH', `/assistants/${id}`, { tts_config: { ...got.tts_config, voice_id: 'af_sky' } });
    expect(patched.statusCode).toBe(200);
    expect((await t.store.assistants.get(t.orgId, id))!.fields.tts_config).toMatchObject({ base_url: real, voice_id: 'af_sky' });
    const forged = await t.request('PATCH', `/assistants/${id}`, { tts_config: { ...got.tts_config, base_url: 'https://tts:****@elsewhere.example.com/' } });
    expect(forged.statusCode).toBe(400);
  });

  it('base_url belongs to openai-compatible only', async () => {
    const res = await create({ provider: 'cartesia', voice_id: 'v', base_url: 'http://127.0.0.1:8880' });
    expect(res.statusCode).toBe(400);
    expect(res.json().details).toEqual([expect.stringMatching(/^tts_config\.base_url: only for a provider of one's own server/)]);
  });
});
