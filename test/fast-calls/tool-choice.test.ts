/**
 * Tool nodes on both kinds of call, on the memory transport and fake timers: the `tool-calls`
 * request (node, arguments), one way out followed whatever the result, several ways out chosen
 * by the model from the result (or the error), and caller input while the model chooses, which
 * is recorded and never cuts the choice short.
 */
import { describe, expect, it } from 'vitest';
import { callHarness, useFastCalls, type CallHarness, type ToolAnswer } from '../helpers/call-harness.js';
import type { ModelReply, ModelRequest } from '../helpers/scripted-providers.js';

useFastCalls();

const TOOL_URL = 'https://tools.example.com/crm';
const TOOL_ARGUMENTS = { order: 'A-1234', priority: 2, rush: false, note: null };
const SHIPPED = 'Good news, your parcel shipped already.';
const PROBLEM = 'Sorry, I could not check your parcel right now.';

/** Tool node first; one way out (`shipped`), or two the model chooses from (`shipped`, `problem`). */
function lookupFlow(ways: 'one' | 'two') {
  const nodes: Record<string, unknown>[] = [
    { id: 'lookup', type: 'tool', first_line: 'One moment while I check that.', tool_name: 'crm_fetch', url: TOOL_URL, arguments: TOOL_ARGUMENTS },
    { id: 'shipped', type: 'conversation', first_line: SHIPPED, instructions: 'Answer questions.' },
    { id: 'bye', type: 'end', first_line: 'Goodbye.' },
  ];
  const edges: Record<string, unknown>[] = [
    { from: 'lookup', to: 'shipped', ...(ways === 'two' ? { description: 'the parcel shipped already' } : {}) },
    { from: 'shipped', to: 'bye', description: 'the caller is finished' },
  ];
  if (ways === 'two') {
    nodes.push({ id: 'problem', type: 'conversation', first_line: PROBLEM });
    edges.push(
      { from: 'lookup', to: 'problem', description: 'the tool reported an error or did not answer' },
      { from: 'problem', to: 'bye', description: 'the caller is finished' },
    );
  }
  return { version: 1, entry_node: 'lookup', global_prompt: 'You are the order desk of Acme Parts.', nodes, edges };
}

/**
 * What the model read of the tool's outcome: the pipeline's last history line (`[crm_fetch result] …`),
 * or what follows "The tool's result:" in a realtime response's instructions.
 */
const toolOutcomeSeen = (r: ModelRequest) =>
  r.instructions !== undefined ? (r.instructions.split("The tool's result:")[1] ?? '') : String(r.messages.at(-1)?.content ?? '');

/** A model that reads the outcome: the error way out when it names an error, else the parcel's. */
const chooses = (r: ModelRequest): ModelReply => ({ calls: [{ name: /error/i.test(toolOutcomeSeen(r)) ? 'go_to_problem' : 'go_to_shipped' }] });

const kinds = [{ kind: 'pipeline' as const }, { kind: 'realtime' as const }];
const model = (h: CallHarness) => (h.assistant.realtime ? h.realtime : h.llm);

async function callTheToolNode(kind: 'pipeline' | 'realtime', ways: 'one' | 'two', answer: ToolAnswer): Promise<CallHarness> {
  const h = callHarness({ kind, definition: lookupFlow(ways) });
  h.notifier.answer = () => answer;
  model(h).reply(chooses);
  await h.start();
  return h;
}

describe.each(kinds)('a tool node ($kind call)', ({ kind }) => {
  it('sends tool-calls with its node and arguments; two ways out: the model chooses from the result', async () => {
    const h = await callTheToolNode(kind, 'two', { result: { parcel: 'shipped', carrier: 'UPS' }, delayMs: 700 });
    await h.until('the next node', () => h.heard().includes(SHIPPED), 10_000);
    expect(h.notifier.toolRequests).toHaveLength(1);
    expect(h.notifier.toolRequests[0]).toMatchObject({
      url: TOOL_URL,
      nodeId: 'lookup',
      calls: [{ id: expect.any(String), name: 'crm_fetch', arguments: TOOL_ARGUMENTS }],
    });
    // the tool runs while its line plays; the model is asked once the result is in
    expect(h.rel(h.notifier.toolRequests[0]!.at)).toBe(0);
    const choice = model(h).requests[0]!;
    expect(h.rel(choice.at)).toBe(700);
    expect(choice.functions).toEqual(['go_to_shipped', 'go_to_problem']);
    expect(toolOutcomeSeen(choice)).toContain('{"parcel":"shipped","carrier":"UPS"}');
    expect(h.heard()).toEqual(['One moment while I check that.', SHIPPED]);
    await h.advance(10);
    expect(h.record.nodes_visited).toEqual(['lookup', 'shipped']);
    h.caller.hangUp();
    expect(await h.untilEnded()).toMatchObject({ ended_reason: 'customer-ended-call', nodes_visited: ['lookup', 'shipped'] });
  });

  it('an error result: the model takes the error way out and the call goes on', async () => {
    const h = await callTheToolNode(kind, 'two', { error: 'database unavailable' });
    await h.until('the error node', () => h.heard().includes(PROBLEM), 10_000);
    expect(toolOutcomeSeen(model(h).requests[0]!)).toContain('database unavailable');
    expect(h.heard()).not.toContain(SHIPPED);
    expect(h.call.isEnded()).toBe(false);
    await h.advance(10);
    expect(h.record.nodes_visited).toEqual(['lookup', 'problem']);
    // the call goes on: the caller is still connected (nothing hung up or closed) until they hang up
    await h.advance(5_000);
    expect(h.call.isEnded()).toBe(false);
    expect(h.transport.hangUps).toEqual([]);
    expect(h.transport.closedAt).toBeNull();
    h.caller.hangUp();
    expect(await h.untilEnded()).toMatchObject({ ended_reason: 'customer-ended-call', nodes_visited: ['lookup', 'problem'] });
  });

  it('a tool that never answers: the exchange gives up at 10 s with an error result, and the call goes on', async () => {
    // the notifier's own deadline and its error (test/webhooks/exchanges.test.ts, real): here the outcome it gives
    const h = await callTheToolNode(kind, 'two', { error: 'the tool did not answer within 10 s', delayMs: 10_000 });
    await h.until('the tool-calls request', () => h.notifier.toolRequests.length > 0);
    const askedAt = h.rel(h.notifier.toolRequests[0]!.at);
    await h.until('the error node', () => h.heard().includes(PROBLEM), 20_000);
    expect(h.rel(model(h).requests[0]!.at) - askedAt).toBeGreaterThanOrEqual(10_000);
    expect(toolOutcomeSeen(model(h).requests[0]!)).toContain('the tool did not answer within 10 s');
    await h.advance(1_000);
    expect(h.call.isEnded()).toBe(false);
    expect(h.transport.hangUps).toEqual([]);
    h.caller.hangUp();
    expect(await h.untilEnded()).toMatchObject({ ended_reason: 'customer-ended-call', nodes_visited: ['lookup', 'problem'] });
  });

  it('one way out and an error: the edge is followed with no model choice', async () => {
    const h = await callTheToolNode(kind, 'one', { error: 'database unavailable' });
    await h.until('the next node', () => h.heard().includes(SHIPPED), 10_000);
    // no request offered the tool node's way out: nothing was chosen
    expect(model(h).requests.filter((r) => r.functions.includes('go_to_shipped'))).toEqual([]);
    await h.advance(10);
    expect(h.record.nodes_visited).toEqual(['lookup', 'shipped']);
    h.caller.hangUp();
    expect(await h.untilEnded()).toMatchObject({ ended_reason: 'customer-ended-call', nodes_visited: ['lookup', 'shipped'] });
  });

  it('a key press while the model chooses is recorded and does not cut the choice', async () => {
    const h = callHarness({ kind, definition: lookupFlow('two') });
    h.notifier.answer = () => ({ result: { parcel: 'shipped' } });
    // the choice takes 2 s
    model(h).reply((r) => ({ ...chooses(r), firstTokenMs: 2_000 }));
    await h.start();
    await h.until('the line heard', () => h.heard().includes('One moment while I check that.'), 5_000);
    await h.until('the model choosing', () => model(h).requests.length === 1, 5_000);
    await h.advance(500);
    h.caller.press('5');
    await h.until('the next node', () => h.heard().includes(SHIPPED), 10_000);
    // nothing the caller was hearing was cut (a pipeline call may still send a `clear` for the
    // choice's empty utterance: nothing is buffered at the far end then)
    expect(h.transport.frames.filter((f) => f.dropped || f.cutAt !== null)).toEqual([]);
    expect(h.heard()).toEqual(['One moment while I check that.', SHIPPED]);
    expect(model(h).requests).toHaveLength(1);
    expect(model(h).requests[0]!.aborted).toBe(false);
    expect(h.messages().filter(([role]) => role === 'user')).toEqual([['user', 'DTMF: 5']]);
    await h.advance(10);
    expect(h.record.nodes_visited).toEqual(['lookup', 'shipped']);
  });
});

describe("caller input while the model chooses a tool node's way out (pipeline call)", () => {
  it('a turn that cuts what the choice says, and a key press, are recorded; the choice still moves the call', async () => {
    const h = callHarness({
      assistant: { speech_config: { turn_taking: { interruption_min_duration: 0.3, interruption_min_words: 0, endpointing_min_delay: 0.3 } } },
      definition: {
        version: 1,
        entry_node: 'greeting',
        nodes: [
          { id: 'greeting', type: 'conversation', first_line: 'Hello, this is Acme orders.' },
          { id: 'lookup', type: 'tool', first_line: 'One moment please.', tool_name: 'lookup_order', url: TOOL_URL, arguments: { order: 'A1' } },
          { id: 'shipped', type: 'end', first_line: 'Your order is on its way, goodbye.' },
          { id: 'lost', type: 'end', first_line: 'Your order is lost, goodbye.' },
        ],
        edges: [
          { from: 'greeting', to: 'lookup', description: 'the caller asks where their order is' },
          { from: 'lookup', to: 'shipped', description: 'the order has shipped' },
          { from: 'lookup', to: 'lost', description: 'the order is lost' },
        ],
      },
    });
    h.notifier.answer = () => ({ result: { status: 'shipped' } });
    h.llm.reply(
      { calls: [{ name: 'go_to_lookup' }] },
      // the choice is slow: a sentence, then another, then the function call, 700 ms apart
      { text: ['Let me see. ', 'Good news about your order. '], calls: [{ name: 'go_to_shipped' }], chunkMs: 700 },
    );
    await h.start();
    await h.until('the greeting', () => h.heard().includes('Hello, this is Acme orders.'));
    await h.caller.say('Where is my order?');
    await h.until('the tool line', () => h.heard().includes('One moment please.'), 5_000);
    // the model is choosing now: the caller talks over what it says, then presses a key
    await h.caller.say('Hello?');
    await h.until('the turn recorded', () => h.messages().some(([, c]) => c === 'Hello?'), 2_000);
    h.caller.press('5');
    const report = await h.untilEnded();

    expect(h.heard().at(-1)).toBe('Your order is on its way, goodbye.');
    expect(report).toMatchObject({ ended_reason: 'assistant-ended-call', nodes_visited: ['greeting', 'lookup', 'shipped'] });
    expect(report.messages.filter((m) => m.role === 'user').map((m) => m.content)).toEqual(['Where is my order?', 'Hello?', 'DTMF: 5']);
    expect(h.llm.requests).toHaveLength(2);
    expect(h.llm.requests[1]!.aborted).toBe(false);
  });
});

describe("the assistant's own tools (pipeline call)", () => {
  it('the model calls a tool: tool-calls without a node, and it answers from the result', async () => {
    const h = callHarness({
      assistant: {
        first_message: 'Weather desk, go ahead.',
        llm_config: {
          provider: 'sandbox',
          tools: [
            {
              name: 'weather_lookup',
              description: 'the weather forecast for a city',
              url: TOOL_URL,
              parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
            },
          ],
        },
      },
    });
    h.notifier.answer = () => ({ result: 'sunny and warm' });
    h.llm.reply({ calls: [{ name: 'weather_lookup', arguments: { city: 'Paris' } }] }, (r) => ({
      text: `The forecast: ${String(r.messages.at(-1)?.content)}.`,
    }));
    await h.start();
    await h.until('greeting', () => h.heard().length === 1);
    await h.caller.say('What is the weather forecast for Paris?');
    await h.until('the answer', () => h.heard().some((t) => t.includes('sunny and warm')), 5_000);
    expect(h.notifier.toolRequests).toHaveLength(1);
    expect(h.notifier.toolRequests[0]!.nodeId).toBeUndefined();
    expect(h.notifier.toolRequests[0]!.calls).toEqual([{ id: expect.any(String), name: 'weather_lookup', arguments: { city: 'Paris' } }]);
    // the second round saw the tool's answer to its call
    expect(h.llm.requests[1]!.messages.at(-1)).toMatchObject({ role: 'tool', content: 'sunny and warm' });
  });
});
