/**
 * What every streamed language-model adapter must do with its vendor's fake, whatever the
 * vendor: stream text as it arrives, release or keep its connection as it should, and end with a
 * `ProviderError` of its own provider, never anything else, on every fault (aborts, HTTP errors,
 * an error in the stream, timeouts, a dropped or truncated stream, unreadable data, a page that
 * is not an event stream, a refused connection, no key). The Anthropic and Gemini tests run it.
 */
import { expect, it } from 'vitest';
import type { LlmConfig } from '../../engine/schema.js';
import { ProviderError, type LlmEvent, type LlmMessage, type LlmProvider, type LlmRequest } from '../../src/providers/types.js';
import type { FakeStreamRequest, StreamFaults } from '../fakes/sse.js';

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export async function collect(stream: AsyncIterable<LlmEvent>): Promise<LlmEvent[]> {
  const events: LlmEvent[] = [];
  for await (const e of stream) events.push(e);
  return events;
}

/** The error the stream ends with (a `ProviderError`, or the test fails), and the events before it in `seen`. */
export async function failure(stream: AsyncIterable<LlmEvent>, seen: LlmEvent[] = []): Promise<ProviderError> {
  try {
    for await (const e of stream) seen.push(e);
  } catch (err) {
    expect(err).toBeInstanceOf(ProviderError);
    return err as ProviderError;
  }
  throw new Error('the stream did not fail');
}

/** Active handles by kind, sampled after a short sleep so that samples compare. */
async function sampleResources(): Promise<Record<string, number>> {
  await sleep(10);
  const counts: Record<string, number> = {};
  for (const r of process.getActiveResourcesInfo()) counts[r] = (counts[r] ?? 0) + 1;
  return Object.fromEntries(Object.entries(counts).sort());
}

/** Two samples 150 ms apart agree (vitest's own 100 ms task-update timer has fired). */
export async function settledResources(): Promise<Record<string, number>> {
  let before = await sampleResources();
  for (let i = 0; i < 20; i++) {
    await sleep(150);
    const now = await sampleResources();
    if (JSON.stringify(now) === JSON.stringify(before)) return now;
    before = now;
  }
  return before;
}

export async function backToBaseline(baseline: Record<string, number>): Promise<void> {
  let now = await sampleResources();
  for (let i = 0; i < 100 && JSON.stringify(now) !== JSON.stringify(baseline); i++) now = await sampleResources();
  expect(now).toEqual(baseline);
}

/** One scripted answer, in the words both fakes share. */
export type FaultAnswer = StreamFaults & { text?: string[]; status?: number; error?: { message: string } };

export interface FaultSuite {
  provider: string;
  /** Starts the vendor's fake with these answers (the last repeats); closed by the suite's caller. */
  start(answers: FaultAnswer[]): Promise<{ url: string; requests: FakeStreamRequest[] }>;
  /** The adapter against the fake at `url`; `apiKey: null` leaves the key unset, `idleTimeoutMs` shortens the idle limit. */
  adapter(url: string, o?: { apiKey?: string | null; firstTokenMs?: number; idleTimeoutMs?: number }): LlmProvider;
  /** An event that is not JSON, in the vendor's framing. */
  malformedEvent: string;
  /** How many events the fake sends before the first text (Anthropic's message_start, ping, content_block_start). */
  lead: number;
  /** The vendor's words in its 429 answer. */
  rateLimitMessage: string;
}

export const faultMessages: LlmMessage[] = [
  { role: 'system', content: 'You book tables.' },
  { role: 'user', content: 'A table for two, tonight.' },
];

export function faultRequest(provider: string, extra: Partial<LlmRequest> = {}, config: Partial<LlmConfig> = {}): LlmRequest {
  return { config: { provider, ...config }, messages: faultMessages, tools: [], ...extra };
}

/** Registers the shared tests in the current `describe`. */
export function llmFaultSuite(s: FaultSuite): void {
  const request = (extra: Partial<LlmRequest> = {}) => faultRequest(s.provider, extra);

  it('streams text as it arrives, and keeps the connection for the next request', async () => {
    const f = await s.start([{ text: ['Sure', ', ', 'two people', ' at seven.'], delayMs: 30 }]);
    const llm = s.adapter(f.url);
    expect(llm.id).toBe(s.provider);
    const arrivals: Array<[LlmEvent, number]> = [];
    const t0 = Date.now();
    for await (const e of llm.stream(request())) arrivals.push([e, Date.now() - t0]);
    expect(arrivals.map(([e]) => e)).toEqual([
      { type: 'text', text: 'Sure' },
      { type: 'text', text: ', ' },
      { type: 'text', text: 'two people' },
      { type: 'text', text: ' at seven.' },
      expect.objectContaining({ type: 'done', finishReason: 'stop' }),
    ]);
    // streamed, not buffered: the first text came well before the last
    expect(arrivals[3]![1] - arrivals[0]![1]).toBeGreaterThanOrEqual(60);
    await sleep(50); // undici puts the socket back in its pool just after the body's end
    await collect(llm.stream(request()));
    expect(f.requests[0]!.finished).toBe(true);
    expect(f.requests[1]!.remotePort).toBe(f.requests[0]!.remotePort);
  });

  it('no API key: PROVIDER_AUTH without a request', async () => {
    const f = await s.start([{ text: ['x'] }]);
    const err = await failure(s.adapter(f.url, { apiKey: null }).stream(request()));
    expect(err).toMatchObject({ code: 'PROVIDER_AUTH', provider: s.provider });
    expect(f.requests).toHaveLength(0);
  });

  it('a wrong key is PROVIDER_AUTH with the vendor\'s words', async () => {
    const f = await s.start([{ text: ['x'] }]);
    const err = await failure(s.adapter(f.url, { apiKey: 'wrong-key' }).stream(request()));
    expect(err).toMatchObject({ code: 'PROVIDER_AUTH', provider: s.provider });
    expect(err.message).toMatch(/key/i);
  });

  it('429 and 5xx are PROVIDER_HTTP_ERROR with the status and the vendor\'s message', async () => {
    const f = await s.start([
      { status: 429, error: { message: s.rateLimitMessage } },
      { status: 500, error: { message: 'Internal error encountered.' } },
      { status: 503, error: { message: 'The model is overloaded. Please try again later.' } },
    ]);
    const llm = s.adapter(f.url);
    const e429 = await failure(llm.stream(request()));
    expect(e429).toMatchObject({ code: 'PROVIDER_HTTP_ERROR', status: 429, provider: s.provider });
    expect(e429.message).toContain(s.rateLimitMessage);
    expect(await failure(llm.stream(request()))).toMatchObject({ code: 'PROVIDER_HTTP_ERROR', status: 500 });
    const e503 = await failure(llm.stream(request()));
    expect(e503).toMatchObject({ code: 'PROVIDER_HTTP_ERROR', status: 503 });
    expect(e503.message).toContain('overloaded');
  });

  it('an error event mid-stream is PROVIDER_HTTP_ERROR after the text before it', async () => {
    const f = await s.start([{ text: ['a', 'b', 'c'], streamErrorAfter: s.lead + 1, error: { message: 'model overloaded' } }]);
    const seen: LlmEvent[] = [];
    const err = await failure(s.adapter(f.url).stream(request()), seen);
    expect(err.code).toBe('PROVIDER_HTTP_ERROR');
    expect(err.message).toContain('model overloaded');
    expect(seen).toEqual([{ type: 'text', text: 'a' }]);
  });

  it('abort mid-stream: PROVIDER_ABORTED, the connection is closed, nothing left behind', async () => {
    const f = await s.start([{ text: Array.from({ length: 50 }, (_, i) => `w${i} `), delayMs: 20 }]);
    const baseline = await settledResources();
    const ac = new AbortController();
    const seen: LlmEvent[] = [];
    const err = await (async () => {
      try {
        for await (const e of s.adapter(f.url).stream(request({ signal: ac.signal }))) {
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

  it('abort while waiting for the answer: PROVIDER_ABORTED at once; an aborted signal sends nothing', async () => {
    const f = await s.start([{ hang: true }]);
    const baseline = await settledResources();
    const ac = new AbortController();
    const pending = failure(s.adapter(f.url).stream(request({ signal: ac.signal })));
    await sleep(50);
    const t0 = Date.now();
    ac.abort();
    expect((await pending).code).toBe('PROVIDER_ABORTED');
    expect(Date.now() - t0).toBeLessThan(200);
    await f.requests[0]!.whenClosed;
    await backToBaseline(baseline);
    expect((await failure(s.adapter(f.url).stream(request({ signal: ac.signal })))).code).toBe('PROVIDER_ABORTED');
    expect(f.requests).toHaveLength(1);
  });

  it('the consumer stopping early releases the connection', async () => {
    const f = await s.start([{ text: Array.from({ length: 50 }, () => 'x'), delayMs: 20 }]);
    for await (const e of s.adapter(f.url).stream(request())) {
      if (e.type === 'text') break;
    }
    await f.requests[0]!.whenClosed;
    expect(f.requests[0]!.finished).toBe(false);
  });

  it('no first byte in time (no headers, or headers then silence): PROVIDER_TIMEOUT', async () => {
    const f = await s.start([{ hang: true }, { hangAfterHeaders: true }]);
    const baseline = await settledResources();
    const llm = s.adapter(f.url, { firstTokenMs: 150 });
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
    const f = await s.start([{ text: ['a', 'b', 'c'], delayMs: 400 }]);
    const err = await failure(s.adapter(f.url, { idleTimeoutMs: 100 }).stream(request()));
    expect(err.code).toBe('PROVIDER_TIMEOUT');
    expect(err.message).toContain('stalled');
  });

  it('a dropped connection mid-stream is PROVIDER_DISCONNECTED', async () => {
    const f = await s.start([{ text: ['one', 'two', 'three'], disconnectAfter: s.lead + 2, delayMs: 10 }]);
    const seen: LlmEvent[] = [];
    const err = await failure(s.adapter(f.url).stream(request()), seen);
    expect(err.code).toBe('PROVIDER_DISCONNECTED');
    expect(seen).toEqual([{ type: 'text', text: 'one' }, { type: 'text', text: 'two' }]);
  });

  it('a stream that ends before the answer is complete is PROVIDER_DISCONNECTED', async () => {
    const f = await s.start([{ text: ['one', 'two', 'three'], endAfter: s.lead + 2 }]);
    const seen: LlmEvent[] = [];
    const err = await failure(s.adapter(f.url).stream(request()), seen);
    expect(err.code).toBe('PROVIDER_DISCONNECTED');
    expect(seen).toEqual([{ type: 'text', text: 'one' }, { type: 'text', text: 'two' }]);
  });

  it('malformed JSON in the stream is PROVIDER_PROTOCOL', async () => {
    const f = await s.start([{ text: ['fine', 'more'], raw: { after: s.lead + 1, text: s.malformedEvent } }]);
    const seen: LlmEvent[] = [];
    const err = await failure(s.adapter(f.url).stream(request()), seen);
    expect(err.code).toBe('PROVIDER_PROTOCOL');
    expect(seen).toEqual([{ type: 'text', text: 'fine' }]);
  });

  it('a 200 answer that is not an event stream (a proxy\'s page) is PROVIDER_PROTOCOL', async () => {
    const f = await s.start([{ garbage: { contentType: 'text/html', body: '<html><body>Gateway says hello</body></html>' } }]);
    const err = await failure(s.adapter(f.url).stream(request()));
    expect(err.code).toBe('PROVIDER_PROTOCOL');
    expect(err.message).toContain('text/html');
  });

  it('an error page that is not JSON is PROVIDER_HTTP_ERROR with its start', async () => {
    const f = await s.start([{ garbage: { status: 502, contentType: 'text/html', body: '<html>502 Bad Gateway</html>' } }]);
    const err = await failure(s.adapter(f.url).stream(request()));
    expect(err).toMatchObject({ code: 'PROVIDER_HTTP_ERROR', status: 502 });
    expect(err.message).toContain('502 Bad Gateway');
  });

  it('a refused connection is PROVIDER_DISCONNECTED', async () => {
    const err = await failure(s.adapter('http://127.0.0.1:1').stream(request()));
    expect(err).toMatchObject({ code: 'PROVIDER_DISCONNECTED', provider: s.provider });
  });
}
