/**
 * Review of issue 29: a chat's turn on the controller (src/chats/chat.ts) against the turn it
 * replaced, without a server: the engine's work, the record and the reply, with scripted providers.
 */
import { describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { AssistantCreate, effectiveAssistant, type AssistantFields } from '../../engine/assistant.js';
import { validateDefinition } from '../../engine/validate.js';
import { openChat, chatTurn, type ChatDeps } from '../../src/chats/chat.js';
import type { ChatRecord } from '../../src/chats/store.js';
import type { Providers } from '../../src/providers/types.js';
import { ScriptedLlm } from '../helpers/scripted-providers.js';

function chatRecord(definition: unknown, fields: Record<string, unknown> = {}): ChatRecord {
  const parsed = AssistantCreate.parse({ name: 'Chat', llm_config: { provider: 'sandbox' }, stt_config: { provider: 'sandbox' }, tts_config: { provider: 'sandbox', voice_id: 'sandbox' }, ...fields });
  const valid = validateDefinition(definition);
  if (!valid.ok) throw new Error(valid.details.join('; '));
  const now = new Date().toISOString();
  return {
    id: '6f1c2a8e-0000-4000-8000-000000000001',
    organization_id: 'org_chat',
    status: 'active',
    assistant_id: 'asst_chat',
    assistant: effectiveAssistant(parsed as AssistantFields) as unknown as Record<string, unknown>,
    workflow_id: 'wf_chat',
    workflow_note: null,
    definition: valid.definition as unknown as Record<string, unknown>,
    engine: null,
    node_id: null,
    nodes_visited: [],
    ended_reason: null,
    errors: [],
    variables: {},
    messages: [],
    created_at: now,
    updated_at: now,
  };
}

function deps(toolCalls: ChatDeps['toolCalls']): ChatDeps {
  const llm = new ScriptedLlm();
  const providers = { stt: new Map(), llm: new Map([['sandbox', llm]]), tts: new Map(), realtime: new Map() } as unknown as Providers;
  return { providers, toolCalls, logger: pino({ level: 'silent' }) };
}

const lookupFirst = {
  version: 1,
  entry_node: 'lookup',
  nodes: [
    { id: 'lookup', type: 'tool', tool_name: 'crm_fetch', url: 'https://tools.example.com/crm', arguments: { order: 'A1' } },
    { id: 'found', type: 'conversation', first_line: 'Your parcel shipped already.' },
    { id: 'bye', type: 'end', first_line: 'Goodbye.' },
  ],
  edges: [
    { from: 'lookup', to: 'found', description: 'the tool answered' },
    { from: 'found', to: 'bye', description: 'the customer is done' },
  ],
};

describe("a chat's tool node whose tool-calls exchange fails inside Switchboard (the store cannot be read)", () => {
  it('fails the request, as before the controller: the chat is not ended by our own outage', async () => {
    const record = chatRecord(lookupFirst);
    const outage = new Error('the store is not reachable');
    const failing = deps(async () => {
      throw outage;
    });
    await expect(openChat(record, failing)).rejects.toThrow('the store is not reachable');
    expect(record.status).toBe('active');
    expect(record.ended_reason).toBeNull();
  });

  it('with a tool that answers, the chat goes on (the same workflow, for comparison)', async () => {
    const record = chatRecord(lookupFirst);
    const reply = await openChat(record, deps(async (_chat, calls) => calls.map((c) => ({ tool_call_id: c.id, result: { shipped: true } }))));
    expect(reply.map((m) => m.content)).toEqual(['Your parcel shipped already.']);
    expect(record.messages.map((m) => [m.role, m.content])).toEqual([
      ['tool', JSON.stringify({ shipped: true })],
      ['assistant', 'Your parcel shipped already.'],
    ]);
    expect(record).toMatchObject({ status: 'active', node_id: 'found' });
    void chatTurn;
  });
});
