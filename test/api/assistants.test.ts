import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { build, pipelineAssistant, type TestApp } from '../helpers/app.js';

let t: TestApp;
beforeAll(async () => {
  t = await build();
});
afterAll(async () => {
  await t.close();
});

const create = (body: unknown) => t.request('POST', '/assistants', body);

describe('assistants API', () => {
  it('creates a pipeline assistant (201) and shows effective values with defaults', async () => {
    const res = await create({ name: 'Ada', tts_config: { provider: 'elevenlabs', voice_id: 'voice-123' } });
    expect(res.statusCode).toBe(201);
    const a = res.json().assistant;
    expect(a).toMatchObject({
      name: 'Ada',
      llm_config: { provider: 'openai', model: 'gpt-4o-mini' },
      stt_config: { provider: 'deepgram', model: 'nova-3', language: 'en' },
      tts_config: { provider: 'elevenlabs', voice_id: 'voice-123', model: 'eleven_flash_v2_5' },
      webhook_events: ['assistant-request', 'tool-calls', 'status-update', 'end-of-call-report'],
      silence_timeout_seconds: 30,
      max_duration_seconds: 600,
      is_active: true,
      webhook_url: null,
      webhook_secret: null,
      speech_config: {
        turn_taking: {
          endpointing_min_delay: 0.5,
          endpointing_max_delay: 3.0,
          interruption_min_duration: 0.5,
          interruption_min_words: 0,
          false_interruption_timeout: 2.0,
        },
        silence: { first_check_seconds: 10, interval_seconds: 10, max_attempts: 2 },
      },
    });
    expect(a.id).toMatch(/^[0-9a-f-]{36}$/);
    // the read says what a write said: the providers whose key this server lacks
    expect((await t.request('GET', `/assistants/${a.id}`)).json()).toEqual({ assistant: a, warnings: res.json().warnings });
  });

  it('requires name, and tts_config (with a voice) for a pipeline assistant', async () => {
    const res = await create({});
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toBe('Invalid request');
    expect(res.json().details[0]).toMatch(/^name: /);
    const noTts = await create({ name: 'x' });
    expect(noTts.statusCode).toBe(400);
    expect(noTts.json().details).toEqual([expect.stringMatching(/^tts_config: required for a pipeline assistant/)]);
    const noVoice = await create({ name: 'x', tts_config: { provider: 'openai' } });
    expect(noVoice.json().details).toEqual([expect.stringMatching(/^tts_config\.voice_id: required/)]);
  });

  it('a realtime assistant needs neither stt_config nor tts_config, and refuses them', async () => {
    const res = await create({ name: 'Rt', llm_config: { provider: 'openai-realtime' } });
    expect(res.statusCode).toBe(201);
    expect(res.json().assistant).toMatchObject({
      llm_config: { provider: 'openai-realtime', model: 'gpt-realtime' },
      stt_config: null,
      tts_config: null,
    });
    const both = await create({
      name: 'Rt2',
      llm_config: { provider: 'openai-realtime' },
      tts_config: { provider: 'openai', voice_id: 'alloy' },
    });
    expect(both.statusCode).toBe(400);
    expect(both.json().details[0]).toMatch(/^tts_config: not used by a realtime assistant/);
  });

  it('checks config blocks against the catalog, all problems at once', async () => {
    const res = await create({
      name: 'x',
      llm_config: { provider: 'openai', model: 'gpt-2' },
      stt_config: { provider: 'deepgram', language: 'xx' },
      tts_config: { provider: 'openai', voice_id: 'darth' },
    });
    expect(res.statusCode).toBe(400);
    const details: string[] = res.json().details;
    expect(details.some((d) => d.startsWith('llm_config.model: unknown model "gpt-2"'))).toBe(true);
    expect(details.some((d) => d.startsWith('stt_config.language: unknown language "xx"'))).toBe(true);
    expect(details.some((d) => d.startsWith('tts_config.voice_id: unknown voice "darth"'))).toBe(true);
    const unknown = await create({ name: 'x', tts_config: { provider: 'acme', voice_id: 'v' } });
    expect(unknown.json().details[0]).toMatch(/^tts_config\.provider: unknown tts provider "acme"/);
  });

  it('an STT model named like a prototype property, with a language: 400 naming the model, not a 500 (found by the API fuzzer)', async () => {
    const res = await create({ ...pipelineAssistant, stt_config: { provider: 'deepgram', model: 'constructor', language: 'en' } });
    expect(res.statusCode).toBe(400);
    expect(res.json().details).toEqual([expect.stringMatching(/^stt_config\.model: unknown model "constructor" for provider "deepgram"/)]);
  });

  it('type errors and unknown fields are named with their path', async () => {
    const res = await create({
      ...pipelineAssistant,
      silence_timeout_seconds: 'long',
      notification_email: 'not-an-email',
      speech_config: { turn_taking: { endpointing_min_delay: 99 } },
      favourite_colour: 'teal',
    });
    expect(res.statusCode).toBe(400);
    const joined = res.json().details.join('\n');
    expect(joined).toContain('silence_timeout_seconds:');
    expect(joined).toContain('notification_email:');
    expect(joined).toContain('speech_config.turn_taking.endpointing_min_delay:');
    expect(joined).toContain('favourite_colour');
  });

  it('speech_config.turn_taking.vad: "webrtc" by default, "silero" taken, anything else a 400 naming the field', async () => {
    const plain = await create(pipelineAssistant);
    expect(plain.json().assistant.speech_config.turn_taking.vad).toBe('webrtc');
    const silero = await create({ ...pipelineAssistant, speech_config: { turn_taking: { vad: 'silero' } } });
    expect(silero.statusCode).toBe(201);
    expect(silero.json().assistant.speech_config.turn_taking).toMatchObject({ vad: 'silero', interruption_min_duration: 0.5 });
    for (const vad of ['rnnoise', 'WebRTC', '', 3, null]) {
      const res = await create({ ...pipelineAssistant, speech_config: { turn_taking: { vad } } });
      expect(res.statusCode).toBe(400);
      expect(res.json().details).toEqual(['speech_config.turn_taking.vad: must be one of "webrtc", "silero"']);
    }
  });

  it('endpointing min must not exceed max, counting defaults', async () => {
    const res = await create({ ...pipelineAssistant, speech_config: { turn_taking: { endpointing_max_delay: 0.2 } } });
    expect(res.statusCode).toBe(400);
    expect(res.json().details[0]).toMatch(/^speech_config\.turn_taking: endpointing_min_delay/);
  });

  it('PATCH replaces top-level fields whole; null resets to the default; name cannot be null', async () => {
    const a = (
      await create({ ...pipelineAssistant, silence_timeout_seconds: 45, speech_config: { end_call_message: 'Bye now' } })
    ).json().assistant;
    expect(a.silence_timeout_seconds).toBe(45);
    const patched = await t.request('PATCH', `/assistants/${a.id}`, {
      speech_config: { pronunciation: [{ from: 'SQL', to: 'sequel' }] },
      silence_timeout_seconds: null,
      first_message: 'Hello!',
    });
    expect(patched.statusCode).toBe(200);
    const p = patched.json().assistant;
    expect(p.silence_timeout_seconds).toBe(30);
    expect(p.first_message).toBe('Hello!');
    expect(p.speech_config.pronunciation).toEqual([{ from: 'SQL', to: 'sequel' }]);
    expect(p.speech_config.end_call_message).toBe('Goodbye.');
    expect(p.name).toBe('Receptionist');
    const nullName = await t.request('PATCH', `/assistants/${a.id}`, { name: null });
    expect(nullName.statusCode).toBe(400);
    const breaking = await t.request('PATCH', `/assistants/${a.id}`, { tts_config: null });
    expect(breaking.statusCode).toBe(400);
    expect(breaking.json().details[0]).toMatch(/^tts_config: required/);
    expect((await t.request('GET', `/assistants/${a.id}`)).json().assistant.tts_config).not.toBeNull();
  });

  it('webhook_secret is write-only: generated one shown once, then masked; own one always masked', async () => {
    const res = await create({ ...pipelineAssistant, webhook_url: 'https://example.com/hooks' });
    const a = res.json().assistant;
    expect(a.webhook_secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    const got = (await t.request('GET', `/assistants/${a.id}`)).json().assistant;
    expect(got.webhook_secret).toBe(`whsec_…${a.webhook_secret.slice(-4)}`);
    const own = await t.request('PATCH', `/assistants/${a.id}`, { webhook_secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw' });
    expect(own.json().assistant.webhook_secret).toBe('whsec_…LaSw');
    const list = (await t.request('GET', '/assistants')).json().assistants;
    for (const x of list) expect(x.webhook_secret === null || x.webhook_secret.includes('…')).toBe(true);
  });

  it('a masked webhook_secret sent back as shown keeps the stored secret; one matching nothing is refused', async () => {
    const a = (await create({ ...pipelineAssistant, webhook_url: 'https://example.com/hooks' })).json().assistant;
    const shown = (await t.request('GET', `/assistants/${a.id}`)).json().assistant;
    const { id: _id, created_at: _c, updated_at: _u, ...whole } = shown;
    const back = await t.request('PATCH', `/assistants/${a.id}`, whole);
    expect(back.statusCode, back.body).toBe(200);
    expect((await t.store.assistants.get(t.orgId, a.id))!.fields.webhook_secret).toBe(a.webhook_secret);
    const wrong = await t.request('PATCH', `/assistants/${a.id}`, { webhook_secret: 'whsec_…zzzz' });
    expect(wrong.statusCode).toBe(400);
    expect(wrong.json().details[0]).toMatch(/^webhook_secret: is a masked secret/);
    const copy = await create({ ...pipelineAssistant, webhook_secret: shown.webhook_secret });
    expect(copy.statusCode).toBe(400);
    expect((await t.store.assistants.get(t.orgId, a.id))!.fields.webhook_secret).toBe(a.webhook_secret);
  });

  it('credentials in webhook_url, tool urls and the custom-llm url are shown masked; stored and used as written', async () => {
    const real = {
      webhook: 'https://hooks:w3bh00k-pass@example.com/hooks',
      llm: 'https://llm:llm-key-9@llm.example.com/v1',
      lookup: 'https://bot:t00l-pass@tools.example.com/lookup?x=1',
      token: 'https://tok_abc123@tools.example.com/t',
      plain: 'https://tools.example.com/plain',
    };
    const body = {
      ...pipelineAssistant,
      webhook_url: real.webhook,
      llm_config: {
        provider: 'custom-llm',
        model: 'house-model',
        url: real.llm,
        tools: [
          { name: 'lookup', url: real.lookup },
          { name: 'token', url: real.token },
          { name: 'plain', url: real.plain },
        ],
      },
    };
    const res = await create(body);
    expect(res.statusCode, res.body).toBe(201);
    const id = res.json().assistant.id;
    const shown = {
      webhook: 'https://hooks:****@example.com/hooks',
      llm: 'https://llm:****@llm.example.com/v1',
      tools: ['https://bot:****@tools.example.com/lookup?x=1', 'https://****@tools.example.com/t', real.plain],
    };
    for (const got of [
      res.json().assistant,
      (await t.request('GET', `/assistants/${id}`)).json().assistant,
      (await t.request('GET', '/assistants')).json().assistants.find((a: { id: string }) => a.id === id),
    ]) {
      expect(got.webhook_url).toBe(shown.webhook);
      expect(got.llm_config.url).toBe(shown.llm);
      expect(got.llm_config.tools.map((x: { url: string }) => x.url)).toEqual(shown.tools);
      expect(JSON.stringify(got)).not.toMatch(/w3bh00k-pass|llm-key-9|t00l-pass|tok_abc123/);
    }
    const stored = async () => (await t.store.assistants.get(t.orgId, id))!.fields;
    expect((await stored()).webhook_url).toBe(real.webhook);
    expect((await stored()).llm_config!.tools!.map((x) => x.url)).toEqual([real.lookup, real.token, real.plain]);

    // what a client read back and sends again whole keeps the credentials
    const got = (await t.request('GET', `/assistants/${id}`)).json().assistant;
    const tools = [...got.llm_config.tools].reverse();
    const patched = await t.request('PATCH', `/assistants/${id}`, {
      webhook_url: got.webhook_url,
      llm_config: { provider: 'custom-llm', model: 'house-model', url: got.llm_config.url, tools, temperature: 0.3 },
    });
    expect(patched.statusCode, patched.body).toBe(200);
    expect(patched.json().assistant.llm_config.temperature).toBe(0.3);
    expect((await stored()).webhook_url).toBe(real.webhook);
    expect((await stored()).llm_config!.url).toBe(real.llm);
    expect((await stored()).llm_config!.tools!.map((x) => x.url)).toEqual([real.plain, real.token, real.lookup]);

    // a masked URL matching nothing stored (another host, or a copy into a new assistant) is refused
    const moved = await t.request('PATCH', `/assistants/${id}`, {
      llm_config: { provider: 'custom-llm', model: 'house-model', url: got.llm_config.url, tools: [{ name: 'lookup', url: 'https://bot:****@evil.example.com/lookup?x=1' }] },
    });
    expect(moved.statusCode).toBe(400);
    expect(moved.json().details).toEqual([
      'llm_config.tools[0].url: has masked credentials (****) that match no stored URL; send the real user name and password',
    ]);
    const copy = await create({ ...pipelineAssistant, webhook_url: got.webhook_url });
    expect(copy.statusCode).toBe(400);
    expect(copy.json().details[0]).toMatch(/^webhook_url: has masked credentials/);
    expect((await stored()).llm_config!.tools).toHaveLength(3);

    // new credentials replace the old ones
    await t.request('PATCH', `/assistants/${id}`, { webhook_url: 'https://hooks:rotated@example.com/hooks' });
    expect((await stored()).webhook_url).toBe('https://hooks:rotated@example.com/hooks');
  });

  it('lists oldest first, deletes (204), 404s and isolates organizations', async () => {
    const a = (await create({ ...pipelineAssistant, name: 'One' })).json().assistant;
    const b = (await create({ ...pipelineAssistant, name: 'Two' })).json().assistant;
    const ids = (await t.request('GET', '/assistants')).json().assistants.map((x: { id: string }) => x.id);
    expect(ids.indexOf(a.id)).toBeLessThan(ids.indexOf(b.id));
    expect((await t.request('GET', `/assistants/${a.id}`, undefined, t.otherKey)).statusCode).toBe(404);
    expect((await t.request('PATCH', `/assistants/${a.id}`, { name: 'x' }, t.otherKey)).statusCode).toBe(404);
    expect((await t.request('DELETE', `/assistants/${a.id}`, undefined, t.otherKey)).statusCode).toBe(404);
    expect((await t.request('DELETE', `/assistants/${a.id}`)).statusCode).toBe(204);
    expect((await t.request('GET', `/assistants/${a.id}`)).statusCode).toBe(404);
    expect((await t.request('GET', '/assistants/nope')).statusCode).toBe(404);
  });
});
