/**
 * The chat service on the real store, providers and webhook sender of a running server, with the
 * settings the API does not expose: a tool that does not answer within a short `tool-calls`
 * deadline, chats that expire on the in-process store's clock, and what the model is sent (a
 * recording model in front of the sandbox's) with `{{variables}}` substituted.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ChatError, ChatService } from '../../src/chats/service.js';
import { CHAT_TTL_SECONDS, MemoryChatStore, createChatStore, type ChatStore } from '../../src/chats/store.js';
import type { LlmProvider, LlmRequest, Providers } from '../../src/providers/types.js';
import { createLogger } from '../../src/logger.js';
import { sandboxAssistant, startCallingServer, type CallingServer } from '../helpers/calls.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';

let s: CallingServer;
let tools: Receiver;
beforeAll(async () => {
  tools = await startReceiver();
  s = await startCallingServer();
}, 120_000);
afterAll(async () => {
  await s?.close();
  await tools?.close();
});

function service(options: { toolTimeoutMs?: number; now?: () => number } = {}) {
  return new ChatService({
    store: s.store,
    providers: s.runtime.providers,
    webhooks: s.runtime.webhooks,
    logger: createLogger('silent'),
    chats: new MemoryChatStore(options.now ? { now: options.now } : {}),
    ...(options.toolTimeoutMs !== undefined ? { toolTimeoutMs: options.toolTimeoutMs } : {}),
  });
}

async function assistantAndWorkflow(definition?: unknown) {
  const assistant = await s.api('POST', '/assistants', sandboxAssistant({ first_message: 'Hello.' }));
  if (!definition) return { assistant_id: assistant.json.assistant.id as string };
  const workflow = await s.api('POST', '/workflows', { name: 'Lookup', definition });
  return { assistant_id: assistant.json.assistant.id as string, workflow_id: workflow.json.workflow.id as string };
}

describe('a tool that does not answer in time', () => {
  it('the tool node fails with a timeout and the model takes the error edge; the chat goes on', async () => {
    const definition = {
      version: 1,
      entry_node: 'greeting',
      nodes: [
        { id: 'greeting', type: 'conversation', first_line: 'Acme parcels, hello.' },
        { id: 'lookup', type: 'tool', tool_name: 'crm_fetch', url: tools.url, arguments: { order: 'A1' } },
        { id: 'shipped', type: 'conversation', first_line: 'Your parcel shipped already.' },
        { id: 'problem', type: 'conversation', first_line: 'Sorry, I could not check your parcel.' },
      ],
      edges: [
        { from: 'greeting', to: 'lookup', description: 'the caller asks where their parcel is' },
        { from: 'lookup', to: 'shipped', description: 'the parcel shipped already' },
        { from: 'lookup', to: 'problem', description: 'the tool reported an error or did not answer' },
        { from: 'shipped', to: 'greeting', description: 'the caller has another question' },
        { from: 'problem', to: 'greeting', description: 'the caller has another question' },
      ],
    };
    const chats = service({ toolTimeoutMs: 300 });
    tools.script({ delayMs: 5_000, body: { results: [] } });
    const { chat } = await chats.start(s.orgId, await assistantAndWorkflow(definition));
    const started = Date.now();
    const { chat: after, reply } = await chats.message(s.orgId, chat.id, 'Where is my parcel?');
    const took = Date.now() - started;
    expect(took).toBeGreaterThanOrEqual(300);
    expect(took).toBeLessThan(3_000);
    expect(reply.map((m) => m.content)).toEqual(['Sorry, I could not check your parcel.']);
    expect(after).toMatchObject({ status: 'active', node_id: 'problem' });
    expect(after.messages.find((m) => m.role === 'tool')).toMatchObject({
      content: JSON.stringify({ error: 'the tool did not answer within 0.3 s' }),
      tool_name: 'crm_fetch',
    });
    await chats.close();
  });

  it("the assistant's own tool: the model reads the timeout and answers", async () => {
    const assistant = await s.api(
      'POST',
      '/assistants',
      sandboxAssistant({
        llm_config: { provider: 'sandbox', tools: [{ name: 'stock_check', description: 'check the stock of a part', url: tools.url }] },
      }),
    );
    const chats = service({ toolTimeoutMs: 200 });
    tools.script({ delayMs: 5_000, body: { results: [] } });
    const { chat } = await chats.start(s.orgId, { assistant_id: assistant.json.assistant.id });
    const { reply } = await chats.message(s.orgId, chat.id, 'Please check the stock of part 42');
    expect(reply.map((m) => m.content)).toEqual(['Thanks for waiting. The result is: {"error":"the tool did not answer within 0.2 s"}.']);
    await chats.close();
  });
});

describe('expiry', () => {
  it('a chat is gone 24 h after its last message', async () => {
    let now = Date.now();
    const chats = service({ now: () => now });
    const { chat } = await chats.start(s.orgId, await assistantAndWorkflow());
    now += (CHAT_TTL_SECONDS - 1) * 1000;
    await chats.message(s.orgId, chat.id, 'Still there?');
    now += (CHAT_TTL_SECONDS - 1) * 1000;
    expect((await chats.get(s.orgId, chat.id)).messages.map((m) => m.content)).toEqual(['Hello.', 'Still there?', 'Okay, I understand: Still there.']);
    now += 2_000;
    await expect(chats.get(s.orgId, chat.id)).rejects.toMatchObject({ code: 'CHAT_NOT_FOUND' });
    await expect(chats.message(s.orgId, chat.id, 'Hello?')).rejects.toBeInstanceOf(ChatError);
    expect(await chats.list(s.orgId, 10)).toEqual([]);
    await chats.close();
  });
});

describe('{{variables}} in what the model is sent', () => {
  /** The server's providers with a sandbox model that keeps every request it is sent. */
  function recordingProviders(): { providers: Providers; requests: LlmRequest[] } {
    const requests: LlmRequest[] = [];
    const sandbox = s.runtime.providers.llm.get('sandbox')!;
    const recording: LlmProvider = {
      id: sandbox.id,
      stream: (request) => {
        requests.push(structuredClone({ ...request, signal: undefined }));
        return sandbox.stream(request);
      },
    };
    return { providers: { ...s.runtime.providers, llm: new Map([...s.runtime.providers.llm, ['sandbox', recording]]) }, requests };
  }

  /** A service on `chats` (Redis when REDIS_URL is set, as the app's): two of them are two processes. */
  const serviceOn = (chats: ChatStore, providers: Providers) =>
    new ChatService({ store: s.store, providers, webhooks: s.runtime.webhooks, logger: createLogger('silent'), chats });

  const systemOf = (request: LlmRequest | undefined) => request?.messages[0];

  it('global_prompt and node instructions, with given values, built-ins and unknown names, at every turn and in another process', async () => {
    const definition = {
      version: 1,
      entry_node: 'greeting',
      global_prompt: 'You are the front desk of {{business_name}}. Today is {{today}}; it is {{now}}.',
      nodes: [
        { id: 'greeting', type: 'conversation', first_line: 'Hello {{customer_name}}.', instructions: 'Help {{customer_name}} (member {{member}}, vip {{vip}}). {{nobody}}' },
        { id: 'booking', type: 'conversation', instructions: 'Book a {{treatment}} for {{customer_name}} in chat {{call.id}}.' },
      ],
      edges: [
        { from: 'greeting', to: 'booking', description: 'the caller wants to book an appointment' },
        { from: 'booking', to: 'greeting', description: 'the caller wants to start over' },
      ],
    };
    const assistant = await s.api('POST', '/assistants', sandboxAssistant({ business_name: 'Acme Dental' }));
    const workflow = await s.api('POST', '/workflows', { name: 'Variables', definition });
    const { providers, requests } = recordingProviders();
    const store = createChatStore(process.env.REDIS_URL);
    const first = serviceOn(store, providers);
    const variables = { customer_name: 'Ada', member: 1234, vip: false, treatment: 'cleaning' };
    const { chat } = await first.start(s.orgId, { assistant_id: assistant.json.assistant.id, workflow_id: workflow.json.workflow.id, variables });
    expect(chat.messages.map((m) => m.content)).toEqual(['Hello Ada.']);

    await first.message(s.orgId, chat.id, 'What colour is the sky?');
    const day = chat.created_at.slice(0, 10);
    expect(systemOf(requests[0])).toEqual({
      role: 'system',
      content: expect.stringContaining(`You are the front desk of Acme Dental. Today is ${day}; it is ${chat.created_at}.`),
    });
    expect(systemOf(requests[0])!.content).toContain('Help Ada (member 1234, vip false). {{nobody}}');

    // the next turn in another process (a second service on the same store): the session is
    // restored on the template substituted again with the same values
    const second = serviceOn(store, providers);
    const turn = await second.message(s.orgId, chat.id, 'I would like to book an appointment');
    expect(turn.chat.node_id).toBe('booking');
    const bookingRequest = requests.at(-1);
    expect(systemOf(bookingRequest)!.content).toContain(`Book a cleaning for Ada in chat ${chat.id}.`);
    expect(systemOf(bookingRequest)!.content).toContain('You are the front desk of Acme Dental.');

    // what is kept: the templates and the values as given
    const kept = await second.get(s.orgId, chat.id);
    expect(kept.variables).toEqual(variables);
    expect((kept.definition as any).global_prompt).toBe(definition.global_prompt);
    expect((kept.definition as any).nodes[1].instructions).toBe(definition.nodes[1]!.instructions);
    await first.close();
  });

  it('the assistant alone: its system prompt and other llm_config.messages, a given value over a built-in', async () => {
    const assistant = await s.api(
      'POST',
      '/assistants',
      sandboxAssistant({
        business_name: 'Acme Dental',
        first_message: 'Hi, {{business_name}} here.',
        llm_config: {
          provider: 'sandbox',
          messages: [
            { role: 'system', content: 'You are {{agent}} of {{business_name}}. {{ nobody }}' },
            { role: 'assistant', content: 'Ask about {{topic}}.' },
          ],
        },
      }),
    );
    const { providers, requests } = recordingProviders();
    const store = createChatStore(process.env.REDIS_URL);
    const chats = serviceOn(store, providers);
    const { chat } = await chats.start(s.orgId, {
      assistant_id: assistant.json.assistant.id,
      variables: { agent: 'Max', topic: 'invoices', business_name: 'Acme Night Desk' },
    });
    expect(chat.messages.map((m) => m.content)).toEqual(['Hi, Acme Night Desk here.']);
    await chats.message(s.orgId, chat.id, 'Hello');
    expect(requests[0]!.messages.slice(0, 2)).toEqual([
      { role: 'system', content: expect.stringContaining('You are Max of Acme Night Desk. {{ nobody }}') },
      { role: 'assistant', content: 'Ask about invoices.' },
    ]);
    // the stored assistant is the template
    const kept = await chats.get(s.orgId, chat.id);
    expect((kept.assistant as any).first_message).toBe('Hi, {{business_name}} here.');
    await chats.close();
  });
});
