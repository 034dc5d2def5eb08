/**
 * `llm_config.builtin_tools` through the API (DECISIONS 16, docs/keypad.md): `press_keys` is
 * taken on an assistant, its PATCH and a node's override, and shown back; an unknown builtin,
 * or an assistant tool that takes the builtin's name, is a 400 with details naming the field.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { build, type TestApp } from '../helpers/app.js';

let t: TestApp;
beforeAll(async () => {
  t = await build();
});
afterAll(async () => {
  await t.close();
});

const voice = { tts_config: { provider: 'elevenlabs', voice_id: 'voice-123' } };

const workflow = (llm: unknown) => ({
  name: 'IVR',
  definition: {
    version: 1,
    entry_node: 'menu',
    nodes: [
      { id: 'menu', type: 'conversation', first_line: 'Hello.', instructions: 'Choose the card desk.', llm_config: llm },
      { id: 'bye', type: 'end', first_line: 'Goodbye.' },
    ],
    edges: [{ from: 'menu', to: 'bye', description: 'done' }],
  },
});

describe('llm_config.builtin_tools', () => {
  it('press_keys is taken on an assistant (create and PATCH) and on a node\'s override, and shown back', async () => {
    const created = await t.request('POST', '/assistants', { name: 'Caller', ...voice, llm_config: { provider: 'openai', builtin_tools: ['press_keys'] } });
    expect(created.statusCode).toBe(201);
    expect(created.json().assistant.llm_config).toMatchObject({ provider: 'openai', builtin_tools: ['press_keys'] });
    const id = created.json().assistant.id;
    const patched = await t.request('PATCH', `/assistants/${id}`, { llm_config: { provider: 'openai' } });
    expect(patched.statusCode).toBe(200);
    expect(patched.json().assistant.llm_config.builtin_tools).toBeUndefined();
    const realtime = await t.request('POST', '/assistants', { name: 'Rt', llm_config: { provider: 'openai-realtime', builtin_tools: ['press_keys'] } });
    expect(realtime.statusCode).toBe(201);
    const wf = await t.request('POST', '/workflows', workflow({ provider: 'openai', builtin_tools: ['press_keys'] }));
    expect(wf.statusCode).toBe(201);
  });

  it('an unknown builtin: 400 with details naming it', async () => {
    const res = await t.request('POST', '/assistants', { name: 'Caller', ...voice, llm_config: { provider: 'openai', builtin_tools: ['press_keys', 'dial_out'] } });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ error: 'Invalid request', details: [expect.stringMatching(/^llm_config\.builtin_tools\[1\]: .*press_keys/)] });
    const notAList = await t.request('POST', '/assistants', { name: 'Caller', ...voice, llm_config: { provider: 'openai', builtin_tools: 'press_keys' } });
    expect(notAList.statusCode).toBe(400);
    expect(notAList.json().details).toContainEqual(expect.stringMatching(/^llm_config\.builtin_tools: .*array/));
    const node = await t.request('POST', '/workflows', workflow({ provider: 'openai', builtin_tools: ['keypad'] }));
    expect(node.statusCode).toBe(400);
    expect(node.json().details).toEqual([expect.stringMatching(/^nodes\[0\].*llm_config\.builtin_tools\[0\]: .*press_keys/)]);
  });

  it('an assistant tool named like a builtin it asks for: 400 naming the tool', async () => {
    const res = await t.request('POST', '/assistants', {
      name: 'Caller',
      ...voice,
      llm_config: { provider: 'openai', builtin_tools: ['press_keys'], tools: [{ name: 'lookup' }, { name: 'press_keys', url: 'https://example.com/keys' }] },
    });
    expect(res.statusCode).toBe(400);
    expect(res.json().details).toEqual([expect.stringMatching(/^llm_config\.tools\[1\]\.name: "press_keys" is the name of a builtin tool/)]);
    // without the builtin, a tool of that name is the assistant's own
    const own = await t.request('POST', '/assistants', { name: 'Caller', ...voice, llm_config: { provider: 'openai', tools: [{ name: 'press_keys' }] } });
    expect(own.statusCode).toBe(201);
  });
});
