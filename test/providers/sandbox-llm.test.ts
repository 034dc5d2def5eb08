import { describe, expect, it } from 'vitest';
import { ProviderError, type LlmEvent, type LlmFunction, type LlmMessage } from '../../src/providers/types.js';
import { contentWords, createSandboxLlm } from '../../src/providers/sandbox/index.js';
import { SANDBOX_CHECK_IN, SANDBOX_SUMMARY } from '../../src/providers/sandbox/llm.js';
import { SILENCE_CHECK_INSTRUCTION } from '../../engine/session.js';
import { TRANSFER_SUMMARY_INSTRUCTION } from '../../engine/prompt.js';

const llm = createSandboxLlm();
const config = { provider: 'sandbox' };

async function collect(messages: LlmMessage[], tools: LlmFunction[] = [], signal?: AbortSignal): Promise<LlmEvent[]> {
  const out: LlmEvent[] = [];
  for await (const e of llm.stream({ config, messages, tools, signal })) out.push(e);
  return out;
}

const text = (events: LlmEvent[]) => events.map((e) => (e.type === 'text' ? e.text : '')).join('');
const calls = (events: LlmEvent[]) => events.flatMap((e) => (e.type === 'tool_calls' ? e.calls : []));

const transitions: LlmFunction[] = [
  { name: 'go_to_billing', description: 'The caller has a question about a bill, an invoice or a payment.' },
  { name: 'go_to_support', description: 'The caller reports a technical problem with the internet connection.' },
  { name: 'go_to_human', description: 'The caller asks to speak to a person or a human agent.' },
];
const system: LlmMessage = { role: 'system', content: 'You are the front desk of an internet provider.' };

describe('sandbox LLM', () => {
  it('picks the transition whose description shares the most words with what the caller said', async () => {
    const cases: [string, string][] = [
      ['I have a question about my last invoice', 'go_to_billing'],
      ['My internet connection keeps dropping, a technical problem', 'go_to_support'],
      ['Can I speak to a human please?', 'go_to_human'],
      ['PAYMENTS! Two payments went out.', 'go_to_billing'], // case and plural do not matter
    ];
    for (const [said, want] of cases) {
      const events = await collect([system, { role: 'user', content: said }], transitions);
      expect(calls(events).map((c) => c.name), said).toEqual([want]);
      expect(events.at(-1)).toEqual(expect.objectContaining({ type: 'done', finishReason: 'tool_calls' }));
      expect(calls(events)[0]!.arguments).toBe('{}');
    }
  });

  it('breaks ties by the order of the functions', async () => {
    const tied: LlmFunction[] = [
      { name: 'go_to_a', description: 'red apples' },
      { name: 'go_to_b', description: 'red cars' },
    ];
    expect(calls(await collect([{ role: 'user', content: 'something red' }], tied))[0]!.name).toBe('go_to_a');
    expect(calls(await collect([{ role: 'user', content: 'something red' }], [...tied].reverse()))[0]!.name).toBe('go_to_b');
  });

  it('acknowledges in a few streamed chunks when nothing matches (stop words never match)', async () => {
    const events = await collect([system, { role: 'user', content: 'Well, I would like to say that the weather is lovely today!' }], transitions);
    expect(calls(events)).toEqual([]);
    expect(events.filter((e) => e.type === 'text').length).toBeGreaterThanOrEqual(2);
    expect(text(events)).toBe('Okay, I understand: Well, I would like to say that the.');
    expect(events.at(-1)).toEqual(expect.objectContaining({ type: 'done', finishReason: 'stop' }));
    expect(text(await collect([system]))).toBe('Okay, how can I help?');
    expect(contentWords('I would like to do it, please')).toEqual(new Set());
  });

  it('calls an assistant tool with arguments taken from what was said', async () => {
    const tools: LlmFunction[] = [
      ...transitions,
      {
        name: 'check_order_status',
        description: 'Look up the delivery status of an order',
        parameters: {
          type: 'object',
          properties: { order_number: { type: 'integer' }, note: { type: 'string' }, rush: { type: 'boolean' } },
          required: ['order_number', 'note'],
        },
      },
    ];
    const said = 'What is the status of order 4711?';
    const [call] = calls(await collect([{ role: 'user', content: said }], tools));
    expect(call).toMatchObject({ name: 'check_order_status' });
    expect(JSON.parse(call!.arguments)).toEqual({ order_number: 4711, note: said });
  });

  it('after a tool result: mentions it, or takes a matching transition, or must choose in a tool node', async () => {
    const toolCall = { id: 'call_1', name: 'check_order_status', arguments: '{}' };
    const history: LlmMessage[] = [
      system,
      { role: 'user', content: 'Where is my order?' },
      { role: 'assistant', content: null, tool_calls: [toolCall] },
    ];
    const lookup: LlmFunction = { name: 'check_order_status', description: 'order status' };
    const said = await collect(
      [...history, { role: 'tool', tool_call_id: 'call_1', content: '{"status":"shipped"}' }],
      [...transitions, lookup],
    );
    expect(text(said)).toBe('Thanks for waiting. The result is: {"status":"shipped"}.');

    const matching = await collect(
      [...history, { role: 'tool', tool_call_id: 'call_1', content: 'The payment failed' }],
      [...transitions, lookup],
    );
    expect(calls(matching).map((c) => c.name)).toEqual(['go_to_billing']);

    // A tool node offers only its ways out: the model has to take one, even without a match.
    const toolNode = await collect([...history, { role: 'tool', tool_call_id: 'call_1', content: '42' }], transitions);
    expect(calls(toolNode).map((c) => c.name)).toEqual(['go_to_billing']);
  });

  it("answers a silence check-in with its check-in line, calling nothing, whatever the caller said", async () => {
    const checkIn: LlmMessage = { role: 'system', content: SILENCE_CHECK_INSTRUCTION };
    for (const said of ['I have a question about my last invoice', 'Good morning']) {
      const events = await collect([system, { role: 'user', content: said }, { role: 'assistant', content: 'Sure.' }, checkIn], transitions);
      expect(calls(events)).toEqual([]);
      expect(text(events)).toBe(SANDBOX_CHECK_IN);
      expect(events.at(-1)).toEqual(expect.objectContaining({ type: 'done', finishReason: 'stop' }));
    }
  });

  it('writes a warm transfer\'s summary: a fixed one, calling nothing, whatever the conversation', async () => {
    const ask: LlmMessage = { role: 'system', content: TRANSFER_SUMMARY_INSTRUCTION };
    for (const conversation of ['Caller: I have a question about my last invoice', 'Caller: Good morning\nAssistant: Hello.']) {
      const events = await collect([ask, { role: 'user', content: `The conversation so far:\n${conversation}` }]);
      expect(calls(events)).toEqual([]);
      expect(text(events)).toBe(SANDBOX_SUMMARY);
    }
  });

  it('is deterministic: the same input gives the same events', async () => {
    const messages: LlmMessage[] = [system, { role: 'user', content: 'I need help with an invoice' }];
    const a = await collect(messages, transitions);
    const b = await collect(structuredClone(messages), structuredClone(transitions));
    expect(b).toEqual(a);
    const ack: LlmMessage[] = [system, { role: 'user', content: 'Good morning to you' }];
    expect(await collect(ack, transitions)).toEqual(await collect(ack, transitions));
  });

  it('an abort throws PROVIDER_ABORTED, before the first event or mid-stream', async () => {
    const before = await collect([{ role: 'user', content: 'hello there' }], [], AbortSignal.abort()).catch((e: unknown) => e);
    expect(before).toBeInstanceOf(ProviderError);
    expect(before).toMatchObject({ code: 'PROVIDER_ABORTED', provider: 'sandbox' });

    const ac = new AbortController();
    const seen: LlmEvent[] = [];
    const mid = await (async () => {
      for await (const e of llm.stream({ config, messages: [{ role: 'user', content: 'hello there friend' }], tools: [], signal: ac.signal })) {
        seen.push(e);
        ac.abort();
      }
    })().catch((e: unknown) => e);
    expect(seen).toHaveLength(1);
    expect(mid).toMatchObject({ code: 'PROVIDER_ABORTED' });
  });
});

describe('sandbox LLM after a transition', () => {
  it('answers the result of a transition with a sentence, never another transition', async () => {
    const events = await collect(
      [
        { role: 'user', content: 'A question about my invoice' },
        { role: 'assistant', content: null, tool_calls: [{ id: 'c1', name: 'go_to_billing', arguments: '{}' }] },
        { role: 'tool', tool_call_id: 'c1', content: 'moved to billing' },
      ],
      transitions,
    );
    expect(calls(events)).toEqual([]);
    expect(text(events)).toBe('Thanks for waiting. The result is: moved to billing.');
  });
});
