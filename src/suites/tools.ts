/**
 * Tools in a test (DECISIONS 20): a test's `tool_results` answer the tools they name, at the
 * controller's `tool-calls` exchange, so that no URL of theirs is ever called (hermetic tests);
 * the other tools are called as in a chat (the tool's `url`, else the assistant's webhook, else
 * the account's). Every call is kept for the result, with who answered it.
 */
import type { Logger } from 'pino';
import { conversationLogger } from '../logger.js';
import type { EffectiveAssistant } from '../../engine/assistant.js';
import type { Store } from '../store/index.js';
import type { WebhookService } from '../webhooks/service.js';
import { resolveWebhookTarget } from '../webhooks/target.js';
import { toolCallsMessage } from '../webhooks/envelope.js';
import type { ToolCallOutcome, ToolCallRequest } from '../calls/notifier.js';
import type { ToolCaller } from '../calls/backend.js';
import type { ToolCallRecord } from './store.js';

type ToolOptions = Parameters<ToolCaller>[1];

/** What a test's conversation is, to the customer's tool server. */
export interface TestConversation {
  id: string;
  type: 'test_chat' | 'test_call';
  organization_id: string;
  assistant: EffectiveAssistant;
}

export interface ToolExchangeDeps {
  store: Pick<Store, 'account'>;
  webhooks: Pick<WebhookService, 'callTools' | 'sendAsyncToolCalls'>;
  logger: Logger;
}

/** The `tool-calls` exchange of a test's conversation, as a chat's (the conversation is its `call`, with no number and no customer). */
export async function exchangeToolCalls(
  deps: ToolExchangeDeps,
  conversation: TestConversation,
  calls: ToolCallRequest[],
  options: ToolOptions,
): Promise<ToolCallOutcome[]> {
  const account = await deps.store.account.get(conversation.organization_id);
  const assistant = conversation.assistant;
  const target = resolveWebhookTarget({ event: 'tool-calls', tool: { url: options.url }, assistant, account });
  if (!target) return calls.map((c) => ({ tool_call_id: c.id, error: 'no webhook is configured for tool-calls' }));
  const body = toolCallsMessage(
    { call: { id: conversation.id, type: conversation.type, status: 'in-progress' }, phone_number: null, customer: null },
    { tool_calls: calls, node_id: options.nodeId ?? null },
  );
  const who = {
    organizationId: conversation.organization_id,
    logger: conversationLogger(deps.logger.child({ [conversation.type === 'test_chat' ? 'chatId' : 'callId']: conversation.id }), assistant.gdpr_mode),
  };
  if (options.async) {
    deps.webhooks.sendAsyncToolCalls(who, { target, body });
    return [];
  }
  return deps.webhooks.callTools(who, { target, body });
}

/**
 * The controller's `callTools` for one test: `tool_results` first, the exchange for the rest.
 * `calls` keeps every call in order; `since(n)` are those after the first `n`.
 */
export class TestTools {
  readonly calls: ToolCallRecord[] = [];

  constructor(
    private readonly results: Readonly<Record<string, unknown>> | undefined,
    private readonly exchange: ToolCaller,
  ) {}

  readonly call: ToolCaller = async (requests, options) => {
    const answered = (request: ToolCallRequest) => this.results !== undefined && Object.hasOwn(this.results, request.name);
    const records = new Map<string, ToolCallRecord>();
    for (const request of requests) {
      const record: ToolCallRecord = {
        name: request.name,
        arguments: structuredClone(request.arguments),
        node_id: options.nodeId ?? null,
        answered_by: answered(request) ? 'tool_results' : 'url',
      };
      if (record.answered_by === 'tool_results') record.result = structuredClone(this.results![request.name]);
      records.set(request.id, record);
      this.calls.push(record);
    }
    const forwarded = requests.filter((r) => !answered(r));
    const fromUrl = forwarded.length > 0 ? await this.exchange(forwarded, options) : [];
    for (const outcome of fromUrl) {
      const record = records.get(outcome.tool_call_id);
      if (!record) continue;
      if ('error' in outcome) record.error = outcome.error;
      else record.result = outcome.result;
    }
    // async tools are not waited for: no results go back, whoever answers them
    if (options.async) return [];
    const byId = new Map(fromUrl.map((o) => [o.tool_call_id, o]));
    return requests.map(
      (r): ToolCallOutcome =>
        answered(r) ? { tool_call_id: r.id, result: structuredClone(this.results![r.name]) } : (byId.get(r.id) ?? { tool_call_id: r.id, error: 'the tool gave no result' }),
    );
  };

  since(count: number): ToolCallRecord[] {
    return this.calls.slice(count);
  }
}
