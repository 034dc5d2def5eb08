/**
 * The Anthropic Messages adapter (src/providers/llm/anthropic.ts) against test/fakes/anthropic.ts,
 * and the fake against the official SDK (@anthropic-ai/sdk): the fake speaks the wire protocol
 * the SDK reads, the adapter speaks it too.
 */
import Anthropic from '@anthropic-ai/sdk';
import { afterEach, describe, expect, it } from 'vitest';
import {
  ANTHROPIC_VERSION,
  createAnthropicLlm,
  DEFAULT_MAX_TOKENS,
  messagesBody,
  messagesUrl,
  provider,
} from '../../src/providers/llm/anthropic.js';
import type { LlmFunction, LlmMessage, LlmRequest } from '../../src/providers/types.js';
import { startFakeAnthropic, type FakeAnthropic, type FakeAnthropicScript } from '../fakes/anthropic.js';
import { collect, failure, llmFaultSuite } from './llm-faults.js';

let fake: FakeAnthropic | undefined;
afterEach(async () => {
  await fake?.close();
  fake = undefined;
});

async function start(script: FakeAnthropicScript = {}): Promise<FakeAnthropic> {
  fake = await startFakeAnthropic(script);
  return fake;
}

const adapter = (url: string, o: { apiKey?: string | null; firstTokenMs?: number; idleTimeoutMs?: number } = {}) =>
  createAnthropicLlm(
    {
      anthropic: { baseUrl: url, apiKey: o.apiKey === null ? undefined : (o.apiKey ?? 'sk-ant-test') },
      timeouts: { firstTokenMs: o.firstTokenMs ?? 2_000 },
    },
    o.idleTimeoutMs ? { idleTimeoutMs: o.idleTimeoutMs } : {},
  );

const sdk = (f: FakeAnthropic, apiKey = f.apiKey) => new Anthropic({ apiKey, baseURL: f.url, maxRetries: 0 });

const tools: LlmFunction[] = [
  {
    name: 'book_table',
    description: 'Book a table',
    parameters: { type: 'object', properties: { people: { type: 'integer' }, time: { type: 'string' } }, required: ['people'] },
  },
  { name: 'go_to_billing', description: 'the caller asks about a bill', parameters: { type: 'object', properties: {} } },
  { name: 'end_call' },
];

const messages: LlmMessage[] = [
  { role: 'system', content: 'You book tables.' },
  { role: 'assistant', content: 'Chez Marie, good evening.' },
  { role: 'user', content: 'A table for two, tonight.' },
  { role: 'assistant', content: 'Let me check.', tool_calls: [{ id: 'toolu_1', name: 'check_availability', arguments: '{"people":2}' }] },
  { role: 'tool', tool_call_id: 'toolu_1', content: '{"available":true}' },
];

function request(extra: Partial<LlmRequest> = {}): LlmRequest {
  return { config: { provider: 'anthropic' }, messages, tools, ...extra };
}

describe('the Anthropic fake against the official SDK (@anthropic-ai/sdk)', () => {
  it('streams text and a tool call that the SDK\'s message stream assembles', async () => {
    const f = await start({
      answers: [{ text: ['Let me ', 'book that.'], toolUses: [{ name: 'book_table', arguments: '{"people":2,"time":"19:00"}', argumentChunks: 4 }] }],
    });
    const stream = sdk(f).messages.stream({
      model: 'claude-sonnet-4-5',
      max_tokens: 256,
      system: 'You book tables.',
      messages: [{ role: 'user', content: 'Two at seven, please.' }],
      tools: [{ name: 'book_table', description: 'Book a table', input_schema: { type: 'object', properties: { people: { type: 'integer' } } } }],
    });
    const texts: string[] = [];
    stream.on('text', (t) => texts.push(t));
    const message = await stream.finalMessage();
    expect(texts).toEqual(['Let me ', 'book that.']);
    expect(message.stop_reason).toBe('tool_use');
    expect(message.content).toEqual([
      { type: 'text', text: 'Let me book that.' },
      { type: 'tool_use', id: expect.stringMatching(/^toolu_/), name: 'book_table', input: { people: 2, time: '19:00' } },
    ]);
    expect(message.usage.output_tokens).toBeGreaterThan(0);
    const sent = f.requests[0]!;
    expect(sent.path).toBe('/v1/messages');
    expect(sent.headers.authorization).toBe(`Bearer ${f.apiKey}`);
    // the SDK names a newer API version than the adapter's 2023-06-01; the events are the same
    expect(sent.headers['anthropic-version']).toMatch(/^\d{4}-\d{2}-\d{2}$/);
    expect(sent.body).toMatchObject({ model: 'claude-sonnet-4-5', stream: true, max_tokens: 256 });
  });

  it('gives the raw events in the API\'s order, and answers a non-streaming request', async () => {
    const f = await start({ answers: [{ text: ['Hi', '!'] }] });
    const events = [];
    for await (const e of await sdk(f).messages.create({ model: 'claude-haiku-4-5', max_tokens: 64, messages: [{ role: 'user', content: 'hi' }], stream: true })) {
      events.push(e.type === 'content_block_delta' && e.delta.type === 'text_delta' ? `delta:${e.delta.text}` : e.type);
    }
    expect(events).toEqual(['message_start', 'content_block_start', 'delta:Hi', 'delta:!', 'content_block_stop', 'message_delta', 'message_stop']);
    const message = await sdk(f).messages.create({ model: 'claude-haiku-4-5', max_tokens: 64, messages: [{ role: 'user', content: 'hi' }] });
    expect(message.content).toEqual([{ type: 'text', text: 'Hi!' }]);
    expect(message.stop_reason).toBe('end_turn');
  });

  it('gives the SDK the API\'s errors: a wrong key, a 429, a bad request and an error event mid-stream', async () => {
    // one answer per request, refused ones included: the wrong key, the 429, the bad request, the stream
    const f = await start({
      answers: [
        {},
        { status: 429, error: { message: 'Number of request tokens has exceeded your per-minute rate limit' } },
        {},
        { text: ['a', 'b'], streamErrorAfter: 4 },
      ],
    });
    await expect(sdk(f, 'sk-ant-wrong').messages.create({ model: 'claude-haiku-4-5', max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] })).rejects.toBeInstanceOf(
      Anthropic.AuthenticationError,
    );
    await expect(sdk(f).messages.create({ model: 'claude-haiku-4-5', max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] })).rejects.toBeInstanceOf(
      Anthropic.RateLimitError,
    );
    const bad = sdk(f).messages.create({
      model: 'claude-haiku-4-5',
      max_tokens: 8,
      messages: [{ role: 'user', content: 'hello' }],
      tools: [{ name: 'no spaces allowed', input_schema: { type: 'object' } }],
    });
    await expect(bad).rejects.toBeInstanceOf(Anthropic.BadRequestError);
    await expect(bad).rejects.toThrow(/tools\.0\.name/);
    const stream = sdk(f).messages.stream({ model: 'claude-haiku-4-5', max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] });
    const err = await stream.finalMessage().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(Anthropic.APIError);
    expect((err as Error).message).toContain('Overloaded');
  });
});

describe('request shape', () => {
  it('builds the URL with or without /v1', () => {
    expect(messagesUrl('https://api.anthropic.com')).toBe('https://api.anthropic.com/v1/messages');
    expect(messagesUrl('https://api.anthropic.com/')).toBe('https://api.anthropic.com/v1/messages');
    expect(messagesUrl('http://proxy:8080/anthropic/v1/')).toBe('http://proxy:8080/anthropic/v1/messages');
  });

  it('maps the system prompt, the turns, tool calls and results, and the tools', () => {
    const body = messagesBody(request({ config: { provider: 'anthropic', model: 'claude-sonnet-4-5', temperature: 1.6, max_completion_tokens: 300 } }));
    expect(body).toEqual({
      model: 'claude-sonnet-4-5',
      max_tokens: 300,
      stream: true,
      temperature: 1,
      system: 'You book tables.',
      messages: [
        { role: 'user', content: [{ type: 'text', text: '[the conversation starts]' }] },
        { role: 'assistant', content: [{ type: 'text', text: 'Chez Marie, good evening.' }] },
        { role: 'user', content: [{ type: 'text', text: 'A table for two, tonight.' }] },
        {
          role: 'assistant',
          content: [
            { type: 'text', text: 'Let me check.' },
            { type: 'tool_use', id: 'toolu_1', name: 'check_availability', input: { people: 2 } },
          ],
        },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: '{"available":true}' }] },
      ],
      tools: [
        {
          name: 'book_table',
          description: 'Book a table',
          input_schema: { type: 'object', properties: { people: { type: 'integer' }, time: { type: 'string' } }, required: ['people'] },
        },
        { name: 'go_to_billing', description: 'the caller asks about a bill', input_schema: { type: 'object', properties: {} } },
        { name: 'end_call', input_schema: { type: 'object', properties: {} } },
      ],
    });
  });

  it('sends a temperature only to the models that take one', async () => {
    for (const model of ['claude-haiku-4-5', 'claude-sonnet-4-5', 'claude-opus-4-6', 'claude-sonnet-4-6']) {
      expect(messagesBody(request({ config: { provider: 'anthropic', model, temperature: 0.4 } })).temperature, model).toBe(0.4);
    }
    for (const model of ['claude-opus-4-7', 'claude-opus-4-8', 'claude-sonnet-5', 'claude-haiku-5-5', 'claude-fable-5-2', 'claude-mythos-5']) {
      expect(messagesBody(request({ config: { provider: 'anthropic', model, temperature: 0.4 } })), model).not.toHaveProperty('temperature');
    }
    // the fake refuses a temperature where the API does, so the adapter's requests pass for every listed model
    const f = await start({ answers: [{ text: ['ok'] }] });
    for (const model of provider.catalog.models!) {
      const events = await collect(adapter(f.url).stream(request({ config: { provider: 'anthropic', model, temperature: 0.4 } })));
      expect(events.at(-1), model).toEqual(expect.objectContaining({ type: 'done', finishReason: 'stop' }));
    }
  });

  it('defaults the model and max_tokens; a later system message and a last assistant line become user turns', () => {
    const body = messagesBody({
      config: { provider: 'anthropic' },
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Hello?' },
        { role: 'assistant', content: 'Hi, how can I help?' },
        { role: 'system', content: 'The caller has been silent; check in.' },
      ],
      tools: [],
    });
    expect(body).toEqual({
      model: 'claude-haiku-4-5',
      max_tokens: DEFAULT_MAX_TOKENS,
      stream: true,
      system: 'Be brief.',
      messages: [
        { role: 'user', content: [{ type: 'text', text: 'Hello?' }] },
        { role: 'assistant', content: [{ type: 'text', text: 'Hi, how can I help?' }] },
        { role: 'user', content: [{ type: 'text', text: '[system] The caller has been silent; check in.' }] },
      ],
    });
    const ending = messagesBody({ config: { provider: 'anthropic' }, messages: [{ role: 'user', content: 'Hi' }, { role: 'assistant', content: 'Hello.' }], tools: [] });
    expect((ending.messages as unknown[]).at(-1)).toEqual({ role: 'user', content: [{ type: 'text', text: '[continue]' }] });
  });
});

describe('createAnthropicLlm', () => {
  it('sends its key and version, and the fake accepts the conversation it writes', async () => {
    const f = await start({ answers: [{ text: ['Booked.'] }] });
    const events = await collect(adapter(f.url).stream(request({ config: { provider: 'anthropic', model: 'claude-opus-4-5' } })));
    expect(events).toEqual([{ type: 'text', text: 'Booked.' }, expect.objectContaining({ type: 'done', finishReason: 'stop' })]);
    const sent = f.requests[0]!;
    expect(sent.headers['x-api-key']).toBe('sk-ant-test');
    expect(sent.headers['anthropic-version']).toBe(ANTHROPIC_VERSION);
    expect(sent.body).toMatchObject({ model: 'claude-opus-4-5', stream: true });
  });

  it('joins each tool_use block\'s input_json_delta into one call, all yielded together at the end', async () => {
    const f = await start({
      answers: [
        {
          text: ['Let me book that.'],
          toolUses: [
            { id: 'toolu_abc', name: 'book_table', arguments: '{"people":2,"time":"19:00"}', argumentChunks: 5 },
            { id: 'toolu_def', name: 'go_to_billing', arguments: '{}' },
          ],
        },
      ],
    });
    expect(await collect(adapter(f.url).stream(request()))).toEqual([
      { type: 'text', text: 'Let me book that.' },
      {
        type: 'tool_calls',
        calls: [
          { id: 'toolu_abc', name: 'book_table', arguments: '{"people":2,"time":"19:00"}' },
          { id: 'toolu_def', name: 'go_to_billing', arguments: '{}' },
        ],
      },
      expect.objectContaining({ type: 'done', finishReason: 'tool_calls' }),
    ]);
  });

  it('a bad request is PROVIDER_HTTP_ERROR with the API\'s error type and message; 529 too', async () => {
    const f = await start({ answers: [{ status: 529, error: { message: 'Overloaded' } }] });
    const e529 = await failure(adapter(f.url).stream(request()));
    expect(e529).toMatchObject({ code: 'PROVIDER_HTTP_ERROR', status: 529, provider: 'anthropic' });
    expect(e529.message).toBe('anthropic answered 529: overloaded_error: Overloaded');
    const bad = await failure(adapter(f.url).stream(request({ config: { provider: 'anthropic', model: '' } })));
    expect(bad).toMatchObject({ code: 'PROVIDER_HTTP_ERROR', status: 400 });
    expect(bad.message).toContain('invalid_request_error: model: Field required');
  });

  llmFaultSuite({
    provider: 'anthropic',
    start: (answers) => start({ answers }),
    adapter,
    malformedEvent: 'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,\n\n',
    rateLimitMessage: 'Number of request tokens has exceeded your per-minute rate limit',
    lead: 3,
  });
});

describe('usage', () => {
  it("reads the message's tokens from message_start and message_delta: the call's usage (docs/usage.md)", async () => {
    // the fake counts 25 input tokens, and an output token per text chunk and five per tool use
    const f = await start({ answers: [{ text: ['One', ' two'] }, { toolUses: [{ name: 'lookup', arguments: '{}' }] }] });
    const text = await collect(adapter(f.url).stream(request()));
    expect(text.at(-1)).toEqual({ type: 'done', finishReason: 'stop', usage: { inputTokens: 25, outputTokens: 2 } });
    const tool = await collect(adapter(f.url).stream(request()));
    expect(tool.at(-1)).toEqual({ type: 'done', finishReason: 'tool_calls', usage: { inputTokens: 25, outputTokens: 5 } });
  });
});
