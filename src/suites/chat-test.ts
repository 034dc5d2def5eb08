/**
 * A chat-mode test (DECISIONS 20): a chat driven turn by turn, exactly as `POST /chats` runs one
 * (`openChat` and `chatTurn`: the call controller with the text backend), its tools answered by
 * the test (`TestTools`). The script's steps are said and checked in order, or the simulated
 * caller talks until it hangs up, the chat ends, or its `max_turns` are said. The chat is kept
 * in the chat store as a `test_chat`.
 */
import { randomUUID } from 'node:crypto';
import { chatTurn, openChat, type ChatDeps, type ReplyMessage } from '../chats/chat.js';
import type { ChatRecord, ChatStore } from '../chats/store.js';
import type { ConversationView, Progress, TestContext } from './context.js';
import { stepFailure } from './expectations.js';
import { nextCallerMove } from './model.js';
import type { ToolCallRecord } from './store.js';

/** The chat as the test's result shows it. */
function chatView(record: ChatRecord): ConversationView {
  return {
    transcript: record.messages.map((m) => ({
      role: m.role,
      content: m.content,
      node_id: m.node_id,
      ...(m.tool_name !== undefined ? { tool_name: m.tool_name } : {}),
    })),
    nodes_visited: [...record.nodes_visited],
    node_id: record.node_id,
    status: record.status,
    ended_reason: record.ended_reason,
    errors: [...record.errors],
  };
}

export async function runChatConversation(ctx: TestContext, progress: Progress, chats: ChatStore): Promise<void> {
  const { plan, test, signal } = ctx;
  const now = new Date().toISOString();
  const record: ChatRecord = {
    id: randomUUID(),
    type: 'test_chat',
    organization_id: plan.organizationId,
    status: 'active',
    assistant_id: plan.assistantId,
    assistant: plan.assistant as unknown as Record<string, unknown>,
    workflow_id: plan.workflowId,
    workflow_note: plan.workflowNote,
    definition: plan.definition as unknown as Record<string, unknown> | null,
    engine: null,
    node_id: null,
    nodes_visited: [],
    ended_reason: null,
    errors: [],
    variables: { ...test.variables },
    messages: [],
    created_at: now,
    updated_at: now,
  };
  progress.chat_id = record.id;
  progress.view = () => chatView(record);
  const deps: ChatDeps = {
    providers: ctx.providers,
    logger: ctx.logger,
    toolCalls: (_chat, calls, options) => ctx.tools.call(calls, options),
  };
  // the test is over (the script's last step or a failed one, the caller's hang-up or last turn): a chat
  // has no hang-up of its own, so the test chat ends as a call whose caller hung up, as a voice test's does
  const hangUp = () => {
    if (record.status !== 'active') return;
    record.status = 'ended';
    record.ended_reason = 'customer-ended-call';
  };
  const keep = () =>
    chats.save(record).catch((err: unknown) => ctx.logger.warn({ err, chatId: record.id }, 'could not keep a test chat'));

  try {
    let reply: ReplyMessage[] = await openChat(record, deps);
    let turnTools: ToolCallRecord[] = ctx.tools.since(0);
    await keep();
    if (test.script) {
      for (const [j, step] of test.script.entries()) {
        signal.throwIfAborted();
        const at = `script[${j}]`;
        if (step.say !== undefined) {
          if (record.status === 'ended') {
            progress.failure = `${at}.say: the conversation had ended (${record.ended_reason ?? 'ended'}) before this step`;
            return;
          }
          const before = ctx.tools.calls.length;
          reply = await chatTurn(record, step.say, deps);
          progress.caller_turns++;
          turnTools = ctx.tools.since(before);
        }
        const failure = stepFailure(step, at, {
          node_id: record.node_id,
          status: record.status,
          ended_reason: record.ended_reason,
          reply: reply.map((m) => m.content),
          tools: turnTools,
        });
        if (failure) {
          progress.failure = failure;
          return;
        }
      }
      return;
    }
    const caller = test.caller!;
    while (record.status === 'active' && progress.caller_turns < caller.max_turns) {
      signal.throwIfAborted();
      const move = await nextCallerMove(ctx.providers, plan.model, caller, chatView(record).transcript, signal);
      if (move.kind === 'hang-up') break;
      await chatTurn(record, move.text, deps);
      progress.caller_turns++;
    }
  } finally {
    hangUp();
    record.updated_at = new Date().toISOString();
    await keep();
  }
}
