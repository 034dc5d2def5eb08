/**
 * The Gemini adapter (src/providers/llm/google.ts) against test/fakes/google.ts, and the fake
 * against the official SDK (@google/genai): the fake speaks the wire protocol the SDK reads, the
 * adapter speaks it too.
 */
import { ApiError, GoogleGenAI, type Content } from '@google/genai';
import { afterEach, describe, expect, it } from 'vitest';
import { createGoogleLlm, generateBody, streamGenerateUrl } from '../../src/providers/llm/google.js';
import type { LlmEvent, LlmFunction, LlmMessage, LlmRequest, LlmToolCall } from '../../src/providers/types.js';
import { startFakeGoogle, type FakeGoogle, type FakeGoogleScript } from '../fakes/google.js';
import { collect, failure, llmFaultSuite } from './llm-faults.js';

let fake: FakeGoogle | undefined;
afterEach(async () => {
  await fake?.close();
  fake = undefined;
});

async function start(script: FakeGoogleScript = {}): Promise<FakeGoogle> {
  fake = await startFakeGoogle(script);
  return fake;
}

const adapter = (url: string, o: { apiKey?: string | null; firstTokenMs?: number; idleTimeoutMs?: number } = {}) =>
  createGoogleLlm(
    {
      google: { baseUrl: url, apiKey: o.apiKey === null ? undefined : (o.apiKey ?? 'AIza-test') },
      timeouts: { firstTokenMs: o.firstTokenMs ?? 2_000 },
    },
    o.idleTimeoutMs ? { idleTimeoutMs: o.idleTimeoutMs } : {},
  );

const sdk = (f: FakeGoogle, apiKey = f.apiKey) => new GoogleGenAI({ apiKey, httpOptions: { baseUrl: f.url } });

const tools: LlmFunction[] = [
  {
    name: 'book_table',
    description: 'Book a table',
    parameters: { type: 'object', properties: { people: { type: 'integer' }, time: { type: 'string' } }, required: ['people'] },
  },
  { name: 'go_to_billing', description: 'the caller asks about a bill', parameters: { type: 'object', properties: {} } },
];

const messages: LlmMessage[] = [
  { role: 'system', content: 'You book tables.' },
  { role: 'assistant', content: 'Chez Marie, good evening.' },
  { role: 'user', content: 'A table for two, tonight.' },
  { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', name: 'check_availability', arguments: '{"people":2}' }] },
  { role: 'tool', tool_call_id: 'call_1', content: '{"available":true}' },
  { role: 'tool', tool_call_id: 'call_1', content: 'plain text' },
];

function request(extra: Partial<LlmRequest> = {}): LlmRequest {
  return { config: { provider: 'google' }, messages, tools, ...extra };
}

describe('the Gemini fake against the official SDK (@google/genai)', () => {
  it('streams text and a function call to generateContentStream', async () => {
    const f = await start({ answers: [{ text: ['Let me ', 'book that.'], functionCalls: [{ name: 'book_table', args: { people: 2, time: '19:00' } }] }] });
    const stream = await sdk(f).models.generateContentStream({
      model: 'gemini-2.5-flash',
      contents: 'Two at seven, please.',
      config: {
        systemInstruction: 'You book tables.',
        tools: [{ functionDeclarations: [{ name: 'book_table', description: 'Book a table', parametersJsonSchema: { type: 'object', properties: { people: { type: 'integer' } } } }] }],
      },
    });
    const texts: string[] = [];
    const calls: unknown[] = [];
    let finishReason: string | undefined;
    for await (const chunk of stream) {
      if (chunk.text) texts.push(chunk.text);
      calls.push(...(chunk.functionCalls ?? []));
      finishReason = chunk.candidates?.[0]?.finishReason ?? finishReason;
    }
    expect(texts).toEqual(['Let me ', 'book that.']);
    expect(calls).toEqual([{ name: 'book_table', args: { people: 2, time: '19:00' } }]);
    expect(finishReason).toBe('STOP');
    const sent = f.requests[0]!;
    expect(sent.url).toBe('/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse');
    expect(sent.headers['x-goog-api-key']).toBe(f.apiKey);
    expect(sent.body).toMatchObject({
      contents: [{ role: 'user', parts: [{ text: 'Two at seven, please.' }] }],
      systemInstruction: { parts: [{ text: 'You book tables.' }] },
      tools: [{ functionDeclarations: [{ name: 'book_table' }] }],
    });
  });

  it('takes back the thought signature of a gemini-3 function call, and answers generateContent', async () => {
    const f = await start({ answers: [{ functionCalls: [{ name: 'book_table', args: { people: 2 } }] }, { text: ['Booked', '.'] }] });
    const ai = sdk(f);
    const first = await ai.models.generateContent({ model: 'gemini-3-flash-preview', contents: 'Two, please.' });
    const modelTurn = first.candidates![0]!.content as Content;
    expect(modelTurn.parts![0]!.thoughtSignature).toBeTruthy();
    const history: Content[] = [
      { role: 'user', parts: [{ text: 'Two, please.' }] },
      modelTurn,
      { role: 'user', parts: [{ functionResponse: { name: 'book_table', response: { output: 'booked' } } }] },
    ];
    const second = await ai.models.generateContent({ model: 'gemini-3-flash-preview', contents: history });
    expect(second.text).toBe('Booked.');
    // without its signature Google refuses the history, as the fake does
    const unsigned = [history[0]!, { role: 'model', parts: [{ functionCall: modelTurn.parts![0]!.functionCall }] }, history[2]!];
    await expect(ai.models.generateContent({ model: 'gemini-3-flash-preview', contents: unsigned })).rejects.toThrow(/thought_signature/);
  });

  it('gives the SDK Google\'s errors: a wrong key, no key, a 429 and an error mid-stream', async () => {
    const f = await start({
      answers: [
        {},
        {},
        { status: 429, error: { message: 'You exceeded your current quota.', status: 'RESOURCE_EXHAUSTED' } },
        { text: ['a', 'b'], streamErrorAfter: 1, error: { message: 'The model is overloaded.', status: 'UNAVAILABLE' } },
      ],
    });
    const call = (ai: GoogleGenAI) => ai.models.generateContentStream({ model: 'gemini-2.5-flash', contents: 'hi' });
    const wrong = await call(sdk(f, 'AIza-wrong')).catch((e: unknown) => e);
    expect(wrong).toBeInstanceOf(ApiError);
    expect((wrong as ApiError).status).toBe(400);
    expect((wrong as ApiError).message).toContain('API_KEY_INVALID');
    const none = await fetch(`${f.url}/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse`, { method: 'POST', body: '{}' });
    expect(none.status).toBe(403);
    expect(((await none.json()) as { error: { status: string } }).error.status).toBe('PERMISSION_DENIED');
    const limited = await call(sdk(f)).catch((e: unknown) => e);
    expect(limited).toBeInstanceOf(ApiError);
    expect((limited as ApiError).status).toBe(429);
    const stream = await call(sdk(f));
    const midway = await (async () => {
      try {
        for await (const _ of stream) {
          // read on
        }
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    expect(midway).toBeInstanceOf(ApiError);
    expect((midway as ApiError).status).toBe(503);
  });
});

describe('request shape', () => {
  it('builds the URL with or without a version', () => {
    expect(streamGenerateUrl('https://generativelanguage.googleapis.com', 'gemini-2.5-flash')).toBe(
      'https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse',
    );
    expect(streamGenerateUrl('http://proxy:8080/gemini/v1beta/', 'gemini-2.5-pro')).toBe(
      'http://proxy:8080/gemini/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse',
    );
  });

  it('maps the system prompt, the turns, function calls and responses, and the declarations', () => {
    const signed: LlmToolCall = { id: 'call_9', name: 'check_availability', arguments: '{"people":2}', vendorData: { thoughtSignature: 'c2ln', functionCallId: 'fc-1' } };
    const body = generateBody(
      request({
        config: { provider: 'google', temperature: 1.5, max_completion_tokens: 300 },
        messages: [...messages.slice(0, 3), { role: 'assistant', content: 'Checking.', tool_calls: [signed] }, { role: 'tool', tool_call_id: 'call_9', content: '[1,2]' }],
      }),
    );
    expect(body).toEqual({
      systemInstruction: { parts: [{ text: 'You book tables.' }] },
      contents: [
        { role: 'user', parts: [{ text: '[the conversation starts]' }] },
        { role: 'model', parts: [{ text: 'Chez Marie, good evening.' }] },
        { role: 'user', parts: [{ text: 'A table for two, tonight.' }] },
        { role: 'model', parts: [{ text: 'Checking.' }, { functionCall: { name: 'check_availability', args: { people: 2 }, id: 'fc-1' }, thoughtSignature: 'c2ln' }] },
        { role: 'user', parts: [{ functionResponse: { name: 'check_availability', response: { output: [1, 2] }, id: 'fc-1' } }] },
      ],
      tools: [
        {
          functionDeclarations: [
            {
              name: 'book_table',
              description: 'Book a table',
              parametersJsonSchema: { type: 'object', properties: { people: { type: 'integer' }, time: { type: 'string' } }, required: ['people'] },
            },
            { name: 'go_to_billing', description: 'the caller asks about a bill' },
          ],
        },
      ],
      generationConfig: { temperature: 1.5, maxOutputTokens: 300 },
    });
    const plain = generateBody(request());
    expect((plain.contents as unknown[]).slice(3)).toEqual([
      { role: 'model', parts: [{ functionCall: { name: 'check_availability', args: { people: 2 } } }] },
      {
        role: 'user',
        parts: [
          { functionResponse: { name: 'check_availability', response: { available: true } } },
          { functionResponse: { name: 'check_availability', response: { output: 'plain text' } } },
        ],
      },
    ]);
    expect(plain).not.toHaveProperty('generationConfig');
  });
});

describe('createGoogleLlm', () => {
  it('sends its key in x-goog-api-key to the model\'s URL, and the fake accepts the conversation it writes', async () => {
    const f = await start({ answers: [{ text: ['Booked.'] }] });
    const events = await collect(adapter(f.url).stream(request({ config: { provider: 'google', model: 'gemini-2.5-pro' } })));
    expect(events).toEqual([{ type: 'text', text: 'Booked.' }, expect.objectContaining({ type: 'done', finishReason: 'stop' })]);
    const sent = f.requests[0]!;
    expect(sent.url).toBe('/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse');
    expect(sent.headers['x-goog-api-key']).toBe('AIza-test');
    await collect(adapter(f.url).stream(request()));
    expect(f.requests[1]!.url).toBe('/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse');
  });

  it('gathers the function calls, each with an id of its own, and sends a gemini-3 call back with its signature', async () => {
    const f = await start({
      answers: [
        { text: ['Let me book that.'], functionCalls: [{ name: 'book_table', args: { people: 2, time: '19:00' } }, { name: 'go_to_billing', args: {} }] },
        { text: ['Done.'] },
      ],
    });
    const llm = adapter(f.url);
    const config = { provider: 'google', model: 'gemini-3-flash-preview' };
    const events = await collect(llm.stream({ config, messages: [{ role: 'user', content: 'Two at seven.' }], tools }));
    expect(events.map((e) => e.type)).toEqual(['text', 'tool_calls', 'done']);
    expect(events.at(-1)).toEqual(expect.objectContaining({ type: 'done', finishReason: 'tool_calls' }));
    const calls = (events[1] as Extract<LlmEvent, { type: 'tool_calls' }>).calls;
    expect(calls.map((c) => [c.name, JSON.parse(c.arguments)])).toEqual([
      ['book_table', { people: 2, time: '19:00' }],
      ['go_to_billing', {}],
    ]);
    expect(new Set(calls.map((c) => c.id)).size).toBe(2);
    expect(calls[0]!.vendorData?.thoughtSignature).toBeTruthy();
    // the next round, as the model turn sends it: the calls and their answers
    const next = [
      { role: 'user' as const, content: 'Two at seven.' },
      { role: 'assistant' as const, content: 'Let me book that.', tool_calls: calls },
      ...calls.map((c) => ({ role: 'tool' as const, tool_call_id: c.id, content: '{"ok":true}' })),
    ];
    expect(await collect(llm.stream({ config, messages: next, tools }))).toEqual([{ type: 'text', text: 'Done.' }, expect.objectContaining({ type: 'done', finishReason: 'stop' })]);
  });

  it('a blocked prompt ends the answer with its reason; MAX_TOKENS is length', async () => {
    const f = await start({ answers: [{ blockReason: 'SAFETY' }, { text: ['Cut sh'], finishReason: 'MAX_TOKENS' }] });
    expect(await collect(adapter(f.url).stream(request()))).toEqual([expect.objectContaining({ type: 'done', finishReason: 'safety' })]);
    expect(await collect(adapter(f.url).stream(request()))).toEqual([{ type: 'text', text: 'Cut sh' }, expect.objectContaining({ type: 'done', finishReason: 'length' })]);
  });

  it('no key on Google\'s side (403) and a refused request (400) name Google\'s status', async () => {
    const f = await start({ answers: [{ status: 403, error: { message: 'Generative Language API has not been used in project 1234 before or it is disabled.' } }] });
    const e403 = await failure(adapter(f.url).stream(request()));
    expect(e403).toMatchObject({ code: 'PROVIDER_AUTH', status: 403, provider: 'google' });
    expect(e403.message).toContain('PERMISSION_DENIED: Generative Language API has not been used');
    const bad = await failure(adapter(f.url).stream(request({ tools: [{ name: '9 bad name' }] })));
    expect(bad).toMatchObject({ code: 'PROVIDER_HTTP_ERROR', status: 400 });
    expect(bad.message).toContain('INVALID_ARGUMENT');
  });

  llmFaultSuite({
    provider: 'google',
    start: (answers) => start({ answers }),
    adapter,
    malformedEvent: 'data: {"candidates": [{"content": \r\n\r\n',
    rateLimitMessage: 'You exceeded your current quota, please check your plan and billing details.',
    lead: 0,
  });
});

describe('usage', () => {
  it("reads the answer's tokens from usageMetadata: the call's usage (docs/usage.md)", async () => {
    const f = await start({ answers: [{ text: ['Booked.'] }] });
    const events = await collect(adapter(f.url).stream(request()));
    expect(events.at(-1)).toEqual({ type: 'done', finishReason: 'stop', usage: { inputTokens: 20, outputTokens: 5 } });
  });
});
