/**
 * The chat service on the real store, providers and webhook sender of a running server, with the
 * settings the API does not expose: a tool that does not answer within a short `tool-calls`
 * deadline, and chats that expire on the in-process store's clock.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ChatError, ChatService } from '../../src/chats/service.js';
import { CHAT_TTL_SECONDS, MemoryChatStore } from '../../src/chats/store.js';
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
