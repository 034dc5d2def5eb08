/**
 * One text chat's turn, on the call controller with the text backend (src/chats/text-backend.ts):
 * the engine session of the chat (restored from its record, on its assistant and workflow with the
 * chat's `{{variables}}` substituted), the customer's message, the controller's work until the
 * engine waits for the customer again (or the chat has ended), and the record brought up to date.
 */
import type { Logger } from 'pino';
import { conversationLogger } from '../logger.js';
import type { CallSession } from '../../engine/session.js';
import type { EffectiveAssistant } from '../../engine/assistant.js';
import type { WorkflowDefinition } from '../../engine/schema.js';
import { applyVariablesToAssistant, applyVariablesToDefinition, builtInVariables, resolveVariables } from '../../engine/variables.js';
import type { Providers } from '../providers/types.js';
import { assistantOnlyDefinition } from '../calls/call.js';
import { CallController } from '../calls/controller.js';
import { Conversation, type ConversationLog, type RecordLine } from '../calls/conversation.js';
import type { ToolCallOutcome, ToolCallRequest } from '../calls/notifier.js';
import type { CallError } from '../errors.js';
import type { ChatRecord } from './store.js';
import { TextBackend } from './text-backend.js';

export { chatModelConfig, REALTIME_TEXT_MODELS } from './text-backend.js';

/**
 * The values a chat's `{{name}}` placeholders take (DECISIONS 12): the built-ins of a chat (no
 * customer, no number; `now` and `today` from when it started) under the variables it was given.
 */
export function chatVariableValues(record: Pick<ChatRecord, 'id' | 'type' | 'assistant' | 'variables' | 'created_at'>): Record<string, string> {
  const assistant = record.assistant as unknown as Pick<EffectiveAssistant, 'business_name'>;
  const builtIns = builtInVariables({
    businessName: assistant.business_name,
    customer: null,
    phoneNumber: null,
    call: { id: record.id, type: record.type ?? 'chat' },
    now: new Date(record.created_at),
  });
  return resolveVariables(builtIns, record.variables);
}

export interface ChatDeps {
  providers: Providers;
  /** The `tool-calls` exchange for a chat (a tool node's `url`, an assistant tool's, or the webhook levels'). */
  toolCalls(chat: ChatRecord, calls: ToolCallRequest[], options: { url?: string | undefined; nodeId?: string; async?: boolean }): Promise<ToolCallOutcome[]>;
  logger: Logger;
}

/** An assistant message of the turn, as `reply` shows it. */
export interface ReplyMessage {
  role: 'assistant';
  content: string;
  node_id: string | null;
}

/** Starts the chat's engine: the opening lines (and a tool node at the entry, if any). */
export function openChat(record: ChatRecord, deps: ChatDeps): Promise<ReplyMessage[]> {
  return runChatTurn(record, deps, null, null);
}

/** The customer's message, and the assistant's whole answer to it. */
export function chatTurn(record: ChatRecord, text: string, deps: ChatDeps): Promise<ReplyMessage[]> {
  return runChatTurn(record, deps, record.engine, text);
}

async function runChatTurn(record: ChatRecord, deps: ChatDeps, saved: Record<string, unknown> | null, text: string | null): Promise<ReplyMessage[]> {
  // the record keeps the templates; each turn runs them with the chat's values (the same
  // values every turn, so the restored session's definition is the one its snapshot was taken on)
  const values = chatVariableValues(record);
  const assistant = applyVariablesToAssistant(record.assistant as unknown as EffectiveAssistant, values);
  const log: Logger = conversationLogger(deps.logger.child({ chatId: record.id, workflowId: record.workflow_id }), assistant.gdpr_mode);
  const template = record.definition as unknown as WorkflowDefinition | null;
  const definition = template ? applyVariablesToDefinition(template, values) : assistantOnlyDefinition(assistant);
  const ledger = new ChatLedger(record);
  const controller = new CallController<ChatRecord>({
    record,
    assistant,
    definition,
    log,
    conversation: ledger,
    openingLines: [],
    transport: null,
    audio: null,
    timed: false,
    callTools: (calls, options) => deps.toolCalls(record, calls, options),
    // our own failure (a store that cannot be read) fails the request; the chat goes on from its last saved turn
    rejectOnDefect: true,
    backend: (context) => new TextBackend(context, deps.providers),
  });
  await controller.start(saved ?? undefined);
  if (text !== null) controller.said(text);
  await controller.idle();
  const session = controller.engineSession();
  if (session) keepSession(record, session);
  record.updated_at = new Date().toISOString();
  if (record.status === 'ended' && assistant.gdpr_mode) {
    // as after a call: nothing of the conversation is kept once it is over
    record.messages = [];
    record.engine = null;
  }
  return ledger.reply;
}

/** The engine's state, kept in the chat's record for its next turn. */
function keepSession(record: ChatRecord, session: CallSession): void {
  const state = session.state();
  record.engine = session.snapshot() as unknown as Record<string, unknown>;
  record.node_id = state.node_id;
  record.nodes_visited = [...session.nodesVisited()];
  session.stop();
}

/** A chat's conversation log: its record's messages (the turn's assistant messages are its reply), errors and end. */
class ChatLedger implements ConversationLog {
  readonly reply: ReplyMessage[] = [];

  constructor(private readonly record: ChatRecord) {}

  readonly conversation = new Conversation((line) => this.add(line));

  private add({ role, content, nodeId, toolName }: RecordLine): void {
    // a chat is not controlled live: no line of a control's comes
    if (role === 'system') return;
    this.record.messages.push({
      role,
      content,
      node_id: nodeId,
      time: new Date().toISOString(),
      ...(toolName !== undefined ? { tool_name: toolName } : {}),
    });
    if (role === 'assistant') this.reply.push({ role: 'assistant', content, node_id: nodeId });
  }

  error(entry: CallError): void {
    this.record.errors.push(entry);
  }

  async close(reason: string): Promise<void> {
    this.record.status = 'ended';
    this.record.ended_reason = reason;
  }

  // a chat is saved by its service after each turn; it has no timers, no carrier and no recording
  persistSoon(): void {}
  noteNode(): void {}
  timer(): void {}
  clearTimers(): void {}
  answeredBy(): void {}
  forwarding(): void {}
  recording(): void {}
}
