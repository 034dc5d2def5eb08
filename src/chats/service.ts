/**
 * Chats (DECISIONS 14): a text conversation with an assistant running a workflow exactly as a call
 * would, with no audio. Starting one resolves the assistant and workflow and runs the call-start
 * checks; each message is one turn under the chat's lock. Chats send `tool-calls` and nothing else.
 */
import type { ProviderKeys } from '../providers/keys.js';
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { conversationLogger } from '../logger.js';
import { effectiveAssistant, type EffectiveAssistant } from '../../engine/assistant.js';
import { callStartChecks } from '../../engine/checks.js';
import type { WorkflowDefinition } from '../../engine/schema.js';
import type { VariableValue } from '../../engine/variables.js';
import type { Store } from '../store/index.js';
import type { Providers } from '../providers/types.js';
import type { WebhookService } from '../webhooks/service.js';
import { resolveWebhookTarget } from '../webhooks/target.js';
import { toolCallsMessage } from '../webhooks/envelope.js';
import type { ToolCallOutcome, ToolCallRequest } from '../calls/notifier.js';
import { chatModelConfig, chatTurn, openChat, type ChatDeps, type ReplyMessage } from './chat.js';
import type { ChatRecord, ChatStore } from './store.js';
import { ErrorCodes, SwitchboardError } from '../../engine/errors.js';

export type ChatErrorCode = 'CHAT_UNKNOWN_REFERENCE' | 'CHAT_REJECTED' | 'CHAT_NOT_FOUND' | 'CHAT_ENDED' | 'CHAT_BUSY';

export class ChatError extends SwitchboardError {
  static override readonly codes = [
    ErrorCodes.CHAT_UNKNOWN_REFERENCE,
    ErrorCodes.CHAT_REJECTED,
    ErrorCodes.CHAT_NOT_FOUND,
    ErrorCodes.CHAT_ENDED,
    ErrorCodes.CHAT_BUSY,
  ] as const;
  override name = 'ChatError';
  declare readonly code: ChatErrorCode;
  constructor(
    code: ChatErrorCode,
    message: string,
    /** Path-first reasons (`assistant_id: …`, `nodes[2] (booking).llm_config: …`). */
    readonly details: string[] = [],
  ) {
    super(code, message);
  }
}

export interface ChatServiceOptions {
  store: Store;
  providers: Providers;
  webhooks: Pick<WebhookService, 'callTools' | 'sendAsyncToolCalls'>;
  chats: ChatStore;
  logger: Logger;
  /** How long a tool has to answer `tool-calls` (DECISIONS 7: 10 s). */
  toolTimeoutMs?: number;
  /** The longest a turn holds its chat; a lock held longer (its process died) lapses. */
  turnLockMs?: number;
  /** The providers' keys this server has: a chat whose model needs one it lacks is refused. */
  keys?: ProviderKeys;
}

export interface StartChat {
  assistant_id: string;
  workflow_id?: string | null | undefined;
  /** Values for `{{name}}` placeholders, over the chat's built-ins (docs/variables.md). */
  variables?: Record<string, VariableValue> | undefined;
}

export interface ChatTurnResult {
  chat: ChatRecord;
  reply: ReplyMessage[];
}

/** Five tool rounds of 10 s each and the model's answers fit well inside. */
const DEFAULT_TURN_LOCK_MS = 120_000;

export class ChatService {
  private readonly log: Logger;
  private readonly deps: ChatDeps;

  constructor(private readonly o: ChatServiceOptions) {
    this.log = o.logger.child({ component: 'chats' });
    this.deps = {
      providers: o.providers,
      logger: this.log,
      toolCalls: (chat, calls, options) => this.toolCalls(chat, calls, options),
    };
  }

  /** A new chat with its opening lines; refused (`ChatError`) as a call would be refused before pickup. */
  async start(organizationId: string, input: StartChat): Promise<ChatTurnResult> {
    const [stored, workflow] = await Promise.all([
      this.o.store.assistants.get(organizationId, input.assistant_id),
      input.workflow_id ? this.o.store.workflows.get(organizationId, input.workflow_id) : Promise.resolve(null),
    ]);
    const unknown = [
      ...(stored ? [] : [`assistant_id: no assistant with id "${input.assistant_id}"`]),
      ...(input.workflow_id && !workflow ? [`workflow_id: no workflow with id "${input.workflow_id}"`] : []),
    ];
    if (!stored || unknown.length > 0) throw new ChatError('CHAT_UNKNOWN_REFERENCE', 'The request is not valid.', unknown);

    // an inactive workflow: the assistant alone, as a number running it would answer
    const definition: WorkflowDefinition | null = workflow?.is_active ? workflow.definition : null;
    const note = workflow && !workflow.is_active ? `workflow ${workflow.id} is inactive; the assistant ran alone` : null;
    const assistant = effectiveAssistant(stored.fields);
    const problems = callStartChecks(stored.fields, definition).map((p) => `${p.message} (${p.code})`);
    const model = chatModelConfig(assistant.llm_config);
    if (!this.o.providers.llm.has(model.provider)) problems.push(`llm_config.provider: no chat adapter for "${model.provider}"`);
    for (const p of this.o.keys?.problems(stored.fields, definition, { chat: true }) ?? []) problems.push(`${p} (CALL_REJECTED_MISSING_PROVIDER_KEY)`);
    if (problems.length > 0) {
      throw new ChatError('CHAT_REJECTED', 'A call with this assistant and workflow would be refused at start; so is the chat.', problems);
    }

    // `created_at` is also the chat's `now` and `today` (built-ins), at every turn
    const now = new Date().toISOString();
    const record: ChatRecord = {
      id: randomUUID(),
      type: 'chat',
      organization_id: organizationId,
      status: 'active',
      assistant_id: stored.id,
      assistant: assistant as unknown as Record<string, unknown>,
      workflow_id: definition ? workflow!.id : null,
      workflow_note: note,
      definition: definition as unknown as Record<string, unknown> | null,
      engine: null,
      node_id: null,
      nodes_visited: [],
      ended_reason: null,
      errors: [],
      variables: { ...input.variables },
      messages: [],
      created_at: now,
      updated_at: now,
    };
    const reply = await openChat(record, this.deps);
    await this.o.chats.save(record);
    this.log.info({ chatId: record.id, assistantId: record.assistant_id, workflowId: record.workflow_id }, 'chat started');
    return { chat: record, reply };
  }

  /** The customer's message and the assistant's whole answer to it. */
  async message(organizationId: string, id: string, text: string): Promise<ChatTurnResult> {
    await this.current(organizationId, id);
    const release = await this.o.chats.lock(id, this.o.turnLockMs ?? DEFAULT_TURN_LOCK_MS);
    if (!release) {
      throw new ChatError('CHAT_BUSY', 'The assistant is still answering the previous message of this chat; send this one once it has answered.');
    }
    try {
      // read again under the lock: the turn before may have just ended the chat
      const record = await this.current(organizationId, id);
      const reply = await chatTurn(record, text, this.deps);
      await this.o.chats.save(record);
      return { chat: record, reply };
    } finally {
      await release();
    }
  }

  async get(organizationId: string, id: string): Promise<ChatRecord> {
    const record = await this.o.chats.get(id);
    if (!record || record.organization_id !== organizationId) throw new ChatError('CHAT_NOT_FOUND', `No chat with id ${JSON.stringify(id)}.`);
    return record;
  }

  list(organizationId: string, limit: number): Promise<ChatRecord[]> {
    return this.o.chats.list(organizationId, limit);
  }

  close(): Promise<void> {
    return this.o.chats.close();
  }

  /** The chat, still active. */
  private async current(organizationId: string, id: string): Promise<ChatRecord> {
    const record = await this.get(organizationId, id);
    if (record.status === 'ended') {
      throw new ChatError('CHAT_ENDED', `Chat ${id} has ended (${record.ended_reason ?? 'ended'}); start a new one with POST /chats.`);
    }
    return record;
  }

  /**
   * `tool-calls` for a chat: the tool's `url`, else the assistant's webhook, else the account's
   * (a chat has no number). The message names the chat as its `call` (`type: "chat"`), with no
   * phone number and no customer number.
   */
  private async toolCalls(
    chat: ChatRecord,
    calls: ToolCallRequest[],
    options: { url?: string | undefined; nodeId?: string; async?: boolean },
  ): Promise<ToolCallOutcome[]> {
    const account = await this.o.store.account.get(chat.organization_id);
    const assistant = chat.assistant as unknown as EffectiveAssistant;
    const target = resolveWebhookTarget({ event: 'tool-calls', tool: { url: options.url }, assistant, account });
    if (!target) return calls.map((c) => ({ tool_call_id: c.id, error: 'no webhook is configured for tool-calls' }));
    const body = toolCallsMessage(
      { call: { id: chat.id, type: 'chat', status: 'in-progress' }, phone_number: null, customer: null },
      { tool_calls: calls, node_id: options.nodeId ?? null },
    );
    const who = { organizationId: chat.organization_id, logger: conversationLogger(this.log.child({ chatId: chat.id }), assistant.gdpr_mode) };
    const input = { target, body, ...(this.o.toolTimeoutMs !== undefined ? { timeoutMs: this.o.toolTimeoutMs } : {}) };
    if (options.async) {
      this.o.webhooks.sendAsyncToolCalls(who, input);
      return [];
    }
    return this.o.webhooks.callTools(who, input);
  }
}
