import OpenAI from 'openai';
import { afterEach, describe, expect, it } from 'vitest';
import type { LlmConfig } from '../../engine/schema.js';
import {
  chatCompletionsBody,
  chatCompletionsUrl,
  createOpenAiLlm,
  type OpenAiLlmOptions,
} from '../../src/providers/llm/openai.js';
import {
  ProviderError,
  type LlmEvent,
  type LlmFunction,
  type LlmMessage,
  type LlmRequest,
  type ProviderSettings,
} from '../../src/providers/types.js';
import { startFakeOpenAiChat, type FakeOpenAiChat, type FakeOpenAiChatScript } from '../fakes/openai-chat.js';

let fake: FakeOpenAiChat | undefined;
afterEach(async () => {
  await fake?.close();
  fake = undefined;
});

async function start(script: FakeOpenAiChatScript = {}): Promise<FakeOpenAiChat> {
  fake = await startFakeOpenAiChat(script);
  return fake;
}

function settings(f: FakeOpenAiChat, overrides: Partial<ProviderSettings> = {}): ProviderSettings {
  return {
    deepgram: { baseUrl: 'http://127.0.0.1:9', apiKey: undefined },
    openai: { baseUrl: f.url, apiKey: f.apiKey ?? undefined },
    elevenlabs: { baseUrl: 'http://127.0.0.1:9', apiKey: undefined },
    timeouts: { firstTokenMs: 2_000 },
    ...overrides,
  };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Active handles by kind, sampled after a short sleep so that samples compare. */
async function sampleResources(): Promise<Record<string, number>> {
  await sleep(10);
  const counts: Record<string, number> = {};
  for (const r of process.getActiveResourcesInfo()) counts[r] = (counts[r] ?? 0) + 1;
  return Object.fromEntries(Object.entries(counts).sort());
}

/** Two samples 150 ms apart agree (vitest's own 100 ms task-update timer has fired). */
async function settledResources(): Promise<Record<string, number>> {
  let before = await sampleResources();
  for (let i = 0; i < 20; i++) {
    await sleep(150);
    const now = await sampleResources();
    if (JSON.stringify(now) === JSON.stringify(before)) return now;
    before = now;
  }
  return before;
}

async function backToBaseline(baseline: Record<string, number>): Promise<void> {
  let now = await sampleResources();
  for (let i = 0; i < 100 && JSON.stringify(now) !== JSON.stringify(baseline); i++) {
    now = await sampleResources();
  }
  expect(now).toEqual(baseline);
}

async function collect(stream: AsyncIterable<LlmEvent>): Promise<LlmEvent[]> {
  const events: LlmEvent[] = [];
  for await (const e of stream) events.push(e);
  return events;
}

async function failure(stream: AsyncIterable<LlmEvent>, seen: LlmEvent[] = []): Promise<ProviderError> {
  try {
    for await (const e of stream) seen.push(e);
  } catch (err) {
    expect(err).toBeInstanceOf(ProviderError);
    return err as ProviderError;
  }
  throw new Error('the stream did not fail');
}

const messages: LlmMessage[] = [
  { role: 'system', content: 'You book tables.' },
  { role: 'user', content: 'A table for two, tonight.' },
  {
    role: 'assistant',
    content: null,
    tool_calls: [{ id: 'call_1', name: 'check_availability', arguments: '{"people":2}' }],
  },
  { role: 'tool', tool_call_id: 'call_1', content: '{"available":true}' },
];

const tools: LlmFunction[] = [
  {
    name: 'book_table',
    description: 'Book a table',
    parameters: { type: 'object', properties: { people: { type: 'integer' }, time: { type: 'string' } }, required: ['people'] },
  },
  { name: 'end_call' },
];

function request(config: Partial<LlmConfig> = {}, extra: Partial<LlmRequest> = {}): LlmRequest {
  return { config: { provider: 'openai', ...config }, messages, tools, ...extra };
}

describe('the OpenAI chat fake against the official SDK (openai v6)', () => {
  it('streams text chunks', async () => {
    const f = await start({ completions: [{ text: ['Hel', 'lo', ' there'] }] });
    const client = new OpenAI({ baseURL: `${f.url}/v1`, apiKey: f.apiKey!, maxRetries: 0 });
    const stream = await client.chat.completions.create({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'hi' }],
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks.every((c) => c.object === 'chat.completion.chunk')).toBe(true);
    expect(chunks.map((c) => c.choices[0]?.delta.content ?? '').join('')).toBe('Hello there');
    expect(chunks.at(-2)?.choices[0]?.finish_reason).toBe('stop');
    expect(chunks.at(-1)?.choices).toEqual([]);
    expect(chunks.at(-1)?.usage?.total_tokens).toBeGreaterThan(0);
    expect(f.requests[0]!.headers.authorization).toBe(`Bearer ${f.apiKey}`);
  });

  it('streams tool calls that the stream helper of the SDK assembles', async () => {
    const f = await start({
      completions: [
        {
          toolCalls: [
            { name: 'book_table', arguments: '{"people":2,"time":"19:00"}', argumentChunks: 4 },
            { name: 'end_call', arguments: '{}' },
          ],
        },
      ],
    });
    const client = new OpenAI({ baseURL: `${f.url}/v1`, apiKey: f.apiKey!, maxRetries: 0 });
    const runner = client.chat.completions.stream({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'book it' }],
      tools: [{ type: 'function', function: { name: 'book_table', parameters: { type: 'object' } } }],
    });
    const final = await runner.finalChatCompletion();
    const calls = final.choices[0]!.message.tool_calls!;
    expect(final.choices[0]!.finish_reason).toBe('tool_calls');
    expect(calls.map((c) => (c.type === 'function' ? [c.function.name, JSON.parse(c.function.arguments)] : null))).toEqual([
      ['book_table', { people: 2, time: '19:00' }],
      ['end_call', {}],
    ]);
    expect(calls.every((c) => c.id.startsWith('call_'))).toBe(true);
  });

  it('answers non-streaming requests with a chat.completion', async () => {
    const f = await start({ completions: [{ text: ['Hi', '!'] }] });
    const client = new OpenAI({ baseURL: `${f.url}/v1`, apiKey: f.apiKey!, maxRetries: 0 });
    const completion = await client.chat.completions.create({
      model: 'gpt-4o',
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect(completion.object).toBe('chat.completion');
    expect(completion.model).toBe('gpt-4o');
    expect(completion.choices[0]!.message.content).toBe('Hi!');
  });

  it('gives the SDK OpenAI\'s errors: 401 and a mid-stream error', async () => {
    const f = await start({ completions: [{ streamErrorAfter: 2, text: ['a', 'b', 'c'], error: { message: 'overloaded' } }] });
    const bad = new OpenAI({ baseURL: `${f.url}/v1`, apiKey: 'wrong', maxRetries: 0 });
    await expect(
      bad.chat.completions.create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }] }),
    ).rejects.toBeInstanceOf(OpenAI.AuthenticationError);

    const client = new OpenAI({ baseURL: `${f.url}/v1`, apiKey: f.apiKey!, maxRetries: 0 });
    const stream = await client.chat.completions.create({
      model: 'gpt-4o',
      messages: [{ role: 'user', content: 'hi' }],
      stream: true,
    });
    const err = await (async () => {
      try {
        for await (const _ of stream) {
          // read on
        }
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    expect(err).toBeInstanceOf(OpenAI.APIError);
    expect((err as Error).message).toContain('overloaded');
  });
});

describe('request shape', () => {
  it('builds the URL with or without /v1', () => {
    expect(chatCompletionsUrl('https://api.openai.com')).toBe('https://api.openai.com/v1/chat/completions');
    expect(chatCompletionsUrl('https://api.openai.com/')).toBe('https://api.openai.com/v1/chat/completions');
    expect(chatCompletionsUrl('http://localhost:11434/v1')).toBe('http://localhost:11434/v1/chat/completions');
    expect(chatCompletionsUrl('http://gpu:8000/v1/')).toBe('http://gpu:8000/v1/chat/completions');
  });

  it('maps messages and tools to OpenAI\'s format', () => {
    const body = chatCompletionsBody('openai', request({ max_completion_tokens: 200, temperature: 0.3 }));
    expect(body).toEqual({
      model: 'gpt-4o-mini',
      stream: true,
      stream_options: { include_usage: true },
      max_completion_tokens: 200,
      temperature: 0.3,
      messages: [
        { role: 'system', content: 'You book tables.' },
        { role: 'user', content: 'A table for two, tonight.' },
        {
          role: 'assistant',
          content: null,
          tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'check_availability', arguments: '{"people":2}' } }],
        },
        { role: 'tool', tool_call_id: 'call_1', content: '{"available":true}' },
      ],
      tools: [
        {
          type: 'function',
          function: {
            name: 'book_table',
            description: 'Book a table',
            parameters: { type: 'object', properties: { people: { type: 'integer' }, time: { type: 'string' } }, required: ['people'] },
          },
        },
        { type: 'function', function: { name: 'end_call', parameters: { type: 'object', properties: {} } } },
      ],
    });
    const bare = chatCompletionsBody('custom-llm', { config: { provider: 'custom-llm', max_completion_tokens: 50 }, messages: [], tools: [] });
    expect(bare).not.toHaveProperty('model');
    expect(bare).not.toHaveProperty('tools');
    expect(bare).toMatchObject({ max_completion_tokens: 50, max_tokens: 50 });
  });
});

describe('createOpenAiLlm', () => {
  it('streams text as it arrives, then done', async () => {
    const f = await start({ completions: [{ text: ['Sure', ', ', 'two people', ' at seven.'], delayMs: 30 }] });
    const llm = createOpenAiLlm(settings(f), 'openai');
    expect(llm.id).toBe('openai');
    const arrivals: Array<[LlmEvent, number]> = [];
    const t0 = Date.now();
    for await (const e of llm.stream(request({ model: 'gpt-4.1', temperature: 0.2, max_completion_tokens: 100 }))) {
      arrivals.push([e, Date.now() - t0]);
    }
    expect(arrivals.map(([e]) => e)).toEqual([
      { type: 'text', text: 'Sure' },
      { type: 'text', text: ', ' },
      { type: 'text', text: 'two people' },
      { type: 'text', text: ' at seven.' },
      expect.objectContaining({ type: 'done', finishReason: 'stop' }),
    ]);
    // Streamed, not buffered: the first text came well before the last.
    expect(arrivals[3]![1] - arrivals[0]![1]).toBeGreaterThanOrEqual(60);
    const sent = f.requests[0]!;
    expect(sent.path).toBe('/v1/chat/completions');
    expect(sent.headers.authorization).toBe(`Bearer ${f.apiKey}`);
    expect(sent.body).toMatchObject({
      model: 'gpt-4.1',
      stream: true,
      stream_options: { include_usage: true },
      temperature: 0.2,
      max_completion_tokens: 100,
    });
    expect(sent.body).not.toHaveProperty('max_tokens');
  });

  it('merges tool-call deltas by index into one tool_calls event', async () => {
    const f = await start({
      completions: [
        {
          text: ['Let me book that.'],
          toolCalls: [
            { id: 'call_abc', name: 'book_table', arguments: '{"people":2,"time":"19:00"}', argumentChunks: 5 },
            { id: 'call_def', name: 'end_call', arguments: '{"reason":"done"}', argumentChunks: 3 },
          ],
        },
      ],
    });
    const events = await collect(createOpenAiLlm(settings(f)).stream(request()));
    expect(events).toEqual([
      { type: 'text', text: 'Let me book that.' },
      {
        type: 'tool_calls',
        calls: [
          { id: 'call_abc', name: 'book_table', arguments: '{"people":2,"time":"19:00"}' },
          { id: 'call_def', name: 'end_call', arguments: '{"reason":"done"}' },
        ],
      },
      expect.objectContaining({ type: 'done', finishReason: 'tool_calls' }),
    ]);
    expect(f.requests[0]!.body.tools).toHaveLength(2);
  });

  it('custom-llm: posts to config.url with or without /v1, never with the OpenAI key', async () => {
    const f = await start({ apiKey: null, completions: [{ text: ['ok'] }] });
    const llm = createOpenAiLlm(settings(f, { openai: { baseUrl: 'http://127.0.0.1:9', apiKey: 'sk-openai-secret' } }), 'custom-llm');
    expect(llm.id).toBe('custom-llm');
    for (const url of [f.url, `${f.url}/v1`, `${f.url}/v1/`]) {
      const events = await collect(llm.stream({ config: { provider: 'custom-llm', url, model: 'llama3.1:8b' }, messages, tools: [] }));
      expect(events).toEqual([{ type: 'text', text: 'ok' }, expect.objectContaining({ type: 'done', finishReason: 'stop' })]);
    }
    expect(f.requests.map((r) => r.path)).toEqual(Array(3).fill('/v1/chat/completions'));
    expect(f.requests.every((r) => r.headers.authorization === undefined)).toBe(true);
    expect(f.requests[0]!.body.model).toBe('llama3.1:8b');

    const keyed = createOpenAiLlm(settings(f), 'custom-llm', { customApiKey: 'vllm-key' });
    await collect(keyed.stream({ config: { provider: 'custom-llm', url: f.url, model: 'm' }, messages, tools: [] }));
    expect(f.requests[3]!.headers.authorization).toBe('Bearer vllm-key');
  });

  it('custom-llm without a url is refused before any request', async () => {
    const f = await start();
    const err = await failure(createOpenAiLlm(settings(f), 'custom-llm').stream({ config: { provider: 'custom-llm' }, messages, tools: [] }));
    expect(err.provider).toBe('custom-llm');
    expect(f.requests).toHaveLength(0);
  });

  it('no API key: PROVIDER_AUTH without a request', async () => {
    const f = await start();
    const err = await failure(createOpenAiLlm(settings(f, { openai: { baseUrl: f.url, apiKey: undefined } })).stream(request()));
    expect(err.code).toBe('PROVIDER_AUTH');
    expect(f.requests).toHaveLength(0);
  });

  it('abort mid-stream: PROVIDER_ABORTED, the connection is closed, nothing left behind', async () => {
    const f = await start({ completions: [{ text: Array.from({ length: 50 }, (_, i) => `w${i} `), delayMs: 20 }] });
    const baseline = await settledResources();
    const ac = new AbortController();
    const seen: LlmEvent[] = [];
    const stream = createOpenAiLlm(settings(f)).stream(request({}, { signal: ac.signal }));
    const err = await (async () => {
      try {
        for await (const e of stream) {
          seen.push(e);
          if (seen.length === 2) ac.abort();
        }
      } catch (e) {
        return e as ProviderError;
      }
      return undefined;
    })();
    expect(err).toBeInstanceOf(ProviderError);
    expect(err!.code).toBe('PROVIDER_ABORTED');
    expect(seen).toHaveLength(2);
    await f.requests[0]!.whenClosed;
    expect(f.requests[0]!.finished).toBe(false);
    await backToBaseline(baseline);
  });

  it('abort while waiting for the answer: PROVIDER_ABORTED at once', async () => {
    const f = await start({ completions: [{ hang: true }] });
    const baseline = await settledResources();
    const ac = new AbortController();
    const pending = failure(createOpenAiLlm(settings(f)).stream(request({}, { signal: ac.signal })));
    await sleep(50);
    const t0 = Date.now();
    ac.abort();
    const err = await pending;
    expect(err.code).toBe('PROVIDER_ABORTED');
    expect(Date.now() - t0).toBeLessThan(200);
    await f.requests[0]!.whenClosed;
    await backToBaseline(baseline);
  });

  it('an already aborted signal sends nothing', async () => {
    const f = await start();
    const ac = new AbortController();
    ac.abort();
    const err = await failure(createOpenAiLlm(settings(f)).stream(request({}, { signal: ac.signal })));
    expect(err.code).toBe('PROVIDER_ABORTED');
    expect(f.requests).toHaveLength(0);
  });

  it('the consumer stopping early releases the connection', async () => {
    const f = await start({ completions: [{ text: Array.from({ length: 50 }, () => 'x'), delayMs: 20 }] });
    for await (const e of createOpenAiLlm(settings(f)).stream(request())) {
      if (e.type === 'text') break;
    }
    await f.requests[0]!.whenClosed;
    expect(f.requests[0]!.finished).toBe(false);
  });

  it('HTTP errors carry the vendor\'s message; 401/403 are PROVIDER_AUTH', async () => {
    const f = await start({
      completions: [
        { status: 429, error: { message: 'Rate limit reached for gpt-4o-mini', type: 'requests', code: 'rate_limit_exceeded' } },
        { status: 500, error: { message: 'The server had an error while processing your request.' } },
        { status: 403, error: { message: 'Project does not have access to model gpt-5', code: 'model_not_found' } },
      ],
    });
    const llm = createOpenAiLlm(settings(f));
    const e429 = await failure(llm.stream(request()));
    expect(e429).toMatchObject({ code: 'PROVIDER_HTTP_ERROR', status: 429, provider: 'openai' });
    expect(e429.message).toContain('Rate limit reached for gpt-4o-mini');
    const e500 = await failure(llm.stream(request()));
    expect(e500).toMatchObject({ code: 'PROVIDER_HTTP_ERROR', status: 500 });
    const e403 = await failure(llm.stream(request()));
    expect(e403).toMatchObject({ code: 'PROVIDER_AUTH', status: 403 });
    expect(e403.message).toContain('does not have access');

    const wrongKey = createOpenAiLlm(settings(f, { openai: { baseUrl: f.url, apiKey: 'sk-wrong' } }));
    const e401 = await failure(wrongKey.stream(request()));
    expect(e401).toMatchObject({ code: 'PROVIDER_AUTH', status: 401 });
    expect(e401.message).toContain('Incorrect API key');
  });

  it('an error event mid-stream is PROVIDER_HTTP_ERROR with its message', async () => {
    const f = await start({ completions: [{ text: ['a', 'b', 'c'], streamErrorAfter: 2, error: { message: 'model overloaded' } }] });
    const seen: LlmEvent[] = [];
    const err = await failure(createOpenAiLlm(settings(f)).stream(request()), seen);
    expect(err.code).toBe('PROVIDER_HTTP_ERROR');
    expect(err.message).toContain('model overloaded');
    expect(seen).toEqual([{ type: 'text', text: 'a' }]);
  });

  it('no first byte in time: PROVIDER_TIMEOUT (no headers, or headers and then silence)', async () => {
    const f = await start({ completions: [{ hang: true }, { hangAfterHeaders: true }] });
    const baseline = await settledResources();
    const llm = createOpenAiLlm(settings(f, { timeouts: { firstTokenMs: 150 } }));
    for (let i = 0; i < 2; i++) {
      const t0 = Date.now();
      const err = await failure(llm.stream(request()));
      expect(err.code).toBe('PROVIDER_TIMEOUT');
      expect(Date.now() - t0).toBeGreaterThanOrEqual(140);
      expect(Date.now() - t0).toBeLessThan(1_000);
      await f.requests[i]!.whenClosed;
    }
    await backToBaseline(baseline);
  });

  it('a stream that stalls after starting: PROVIDER_TIMEOUT after the idle limit', async () => {
    const f = await start({ completions: [{ text: ['a', 'b'], delayMs: 400 }] });
    const options: OpenAiLlmOptions = { idleTimeoutMs: 100 };
    const seen: LlmEvent[] = [];
    const err = await failure(createOpenAiLlm(settings(f), 'openai', options).stream(request()), seen);
    expect(err.code).toBe('PROVIDER_TIMEOUT');
    expect(seen).toEqual([]);
  });

  it('a dropped connection mid-stream is PROVIDER_DISCONNECTED', async () => {
    const f = await start({ completions: [{ text: ['one', 'two', 'three'], disconnectAfter: 2, delayMs: 10 }] });
    const seen: LlmEvent[] = [];
    const err = await failure(createOpenAiLlm(settings(f)).stream(request()), seen);
    expect(err.code).toBe('PROVIDER_DISCONNECTED');
    expect(seen).toEqual([{ type: 'text', text: 'one' }]);
  });

  it('a stream that ends before finishing is PROVIDER_DISCONNECTED; one ending without [DONE] after finish_reason is fine', async () => {
    const f = await start({ completions: [{ text: ['one', 'two'], endAfter: 2 }, { text: ['ok'], omitDone: true }] });
    const llm = createOpenAiLlm(settings(f));
    const err = await failure(llm.stream(request()));
    expect(err.code).toBe('PROVIDER_DISCONNECTED');
    expect(await collect(llm.stream(request()))).toEqual([
      { type: 'text', text: 'ok' },
      expect.objectContaining({ type: 'done', finishReason: 'stop' }),
    ]);
  });

  it('malformed SSE JSON is PROVIDER_PROTOCOL', async () => {
    const f = await start({ completions: [{ text: ['fine'], raw: { after: 2, text: 'data: {"id":"x","choices":[\n\n' } }] });
    const seen: LlmEvent[] = [];
    const err = await failure(createOpenAiLlm(settings(f)).stream(request()), seen);
    expect(err.code).toBe('PROVIDER_PROTOCOL');
    expect(seen).toEqual([{ type: 'text', text: 'fine' }]);
  });

  it('a refused connection is PROVIDER_DISCONNECTED', async () => {
    const f = await start();
    const url = f.url;
    await f.close();
    fake = undefined;
    const err = await failure(
      createOpenAiLlm(settings(f, { openai: { baseUrl: url, apiKey: 'k' } })).stream(request()),
    );
    expect(err.code).toBe('PROVIDER_DISCONNECTED');
  });
});

describe('usage', () => {
  it("asks for the usage chunk (stream_options.include_usage) and reads the request's tokens from it: the call's usage (docs/usage.md)", async () => {
    // the fake counts 12 prompt tokens and a completion token per text chunk
    const f = await start({ completions: [{ text: ['We open ', 'at nine.'] }] });
    const events = await collect(createOpenAiLlm(settings(f)).stream(request()));
    expect(events.at(-1)).toEqual({ type: 'done', finishReason: 'stop', usage: { inputTokens: 12, outputTokens: 2 } });
    expect(f.requests[0]!.body).toMatchObject({ stream_options: { include_usage: true } });
  });
});
