/**
 * One text chat's turn: the engine session of the chat (restored from its record, on its assistant
 * and workflow with the chat's `{{variables}}` substituted), its commands carried out with no
 * audio, and the record brought up to date. A `say` is an assistant message at once (and "heard"
 * whole); `run_model` is the pipeline's model turn (`src/calls/model-turn.ts`);
 * `call_tool` is the tool node's `tool-calls` exchange; `transfer` and `hang_up` end the chat. The
 * turn is over when the engine waits for the customer again (or the chat has ended).
 */
import type { Logger } from 'pino';
import { conversationLogger } from '../logger.js';
import { createCallSession, restoreCallSession, type CallSession, type Command, type RunModelCommand } from '../../engine/session.js';
import type { ProviderOverrides } from '../../engine/compile.js';
import type { EffectiveAssistant } from '../../engine/assistant.js';
import { defaultCatalog, findProvider, isRealtimeProvider } from '../../engine/catalog.js';
import type { LlmConfig, WorkflowDefinition } from '../../engine/schema.js';
import { applyVariablesToAssistant, applyVariablesToDefinition, builtInVariables, resolveVariables } from '../../engine/variables.js';
import type { LlmProvider, Providers } from '../providers/types.js';
import { assistantOnlyDefinition, toolOutput } from '../calls/base-call.js';
import { runModelTurn } from '../calls/model-turn.js';
import type { ToolCallOutcome, ToolCallRequest } from '../calls/notifier.js';
import type { ChatMessage, ChatRecord } from './store.js';
import { callError, endedReasonFor, ErrorCodes, isSwitchboardError, type ErrorCode } from '../errors.js';

/**
 * The text model a realtime assistant chats with: the same vendor's chat model (the realtime
 * vendors have no text-only session worth its cost). Prompts, messages and tools stay the same.
 */
export const REALTIME_TEXT_MODELS: Readonly<Record<string, { provider: string; model: string }>> = {
  'openai-realtime': { provider: 'openai', model: 'gpt-4o-mini' },
  'sandbox-realtime': { provider: 'sandbox', model: 'sandbox' },
};

/** The model block a chat runs: a node's override or the assistant's, default model filled in. */
export function chatModelConfig(block: LlmConfig): LlmConfig {
  if (isRealtimeProvider(defaultCatalog, block.provider)) {
    const text = REALTIME_TEXT_MODELS[block.provider];
    if (text) return { ...block, ...text };
  }
  if (block.model !== undefined) return block;
  const provider = findProvider(defaultCatalog, 'llm', block.provider);
  return provider?.default_model ? { ...block, model: provider.default_model } : block;
}

/**
 * The values a chat's `{{name}}` placeholders take (DECISIONS 12): the built-ins of a chat (no
 * customer, no number; `now` and `today` from when it started) under the variables it was given.
 */
export function chatVariableValues(record: Pick<ChatRecord, 'id' | 'assistant' | 'variables' | 'created_at'>): Record<string, string> {
  const assistant = record.assistant as unknown as Pick<EffectiveAssistant, 'business_name'>;
  const builtIns = builtInVariables({
    businessName: assistant.business_name,
    customer: null,
    phoneNumber: null,
    call: { id: record.id, type: 'chat' },
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
  const turn = new ChatTurn(record, deps, null);
  return turn.run(() => turn.session.start());
}

/** The customer's message, and the assistant's whole answer to it. */
export function chatTurn(record: ChatRecord, text: string, deps: ChatDeps): Promise<ReplyMessage[]> {
  const turn = new ChatTurn(record, deps, record.engine);
  return turn.run(() => {
    turn.message('user', text, turn.session.state().node_id);
    return turn.session.send({ type: 'caller.said', text });
  });
}

class ChatTurn {
  readonly session: CallSession;
  private readonly assistant: EffectiveAssistant;
  private readonly log: Logger;
  private readonly reply: ReplyMessage[] = [];
  private overrides: ProviderOverrides;
  private ended = false;
  /** Never aborted: a chat's turn is not cut; it ends with the request. */
  private readonly signal = new AbortController().signal;

  constructor(
    private readonly record: ChatRecord,
    private readonly deps: ChatDeps,
    saved: Record<string, unknown> | null,
  ) {
    // the record keeps the templates; each turn runs them with the chat's values (the same
    // values every turn, so the restored session's definition is the one its snapshot was taken on)
    const values = chatVariableValues(record);
    this.assistant = applyVariablesToAssistant(record.assistant as unknown as EffectiveAssistant, values);
    this.log = conversationLogger(deps.logger.child({ chatId: record.id, workflowId: record.workflow_id }), this.assistant.gdpr_mode);
    const template = record.definition as unknown as WorkflowDefinition | null;
    const definition = template ? applyVariablesToDefinition(template, values) : assistantOnlyDefinition(this.assistant);
    const options = {
      tools: this.assistant.llm_config.tools ?? [],
      end_call_message: this.assistant.speech_config.end_call_message,
      silence: this.assistant.speech_config.silence,
    };
    this.session = saved ? restoreCallSession(definition, saved as never, options) : createCallSession(definition, options);
    this.overrides = saved ? this.session.state().provider_overrides : {};
  }

  async run(first: () => Command[]): Promise<ReplyMessage[]> {
    await this.carryOut(first());
    const state = this.session.state();
    this.record.engine = this.session.snapshot() as unknown as Record<string, unknown>;
    this.record.node_id = state.node_id;
    this.record.nodes_visited = [...this.session.nodesVisited()];
    this.session.stop();
    this.record.updated_at = new Date().toISOString();
    if (this.ended && this.assistant.gdpr_mode) {
      // as after a call: nothing of the conversation is kept once it is over
      this.record.messages = [];
      this.record.engine = null;
    }
    return this.reply;
  }

  message(role: ChatMessage['role'], content: string, nodeId: string | null, toolName?: string): void {
    this.record.messages.push({
      role,
      content,
      node_id: nodeId,
      time: new Date().toISOString(),
      ...(toolName !== undefined ? { tool_name: toolName } : {}),
    });
  }

  private said(content: string, nodeId: string | null): void {
    this.message('assistant', content, nodeId);
    this.reply.push({ role: 'assistant', content, node_id: nodeId });
  }

  /** Commands in order; what the events they cause give is carried out after the batch before it. */
  private async carryOut(commands: Command[]): Promise<void> {
    const queue = [...commands];
    while (queue.length > 0 && !this.ended) {
      const command = queue.shift()!;
      this.log.debug({ command: command.type, node: 'node_id' in command ? command.node_id : undefined }, 'engine command');
      switch (command.type) {
        case 'say':
          this.said(command.text, command.node_id);
          // text is read whole: the line is "heard" the moment it is written
          queue.push(...this.session.send({ type: 'assistant.done_speaking', say_id: command.say_id }));
          break;
        case 'set_provider_overrides': {
          const { type: _t, node_id: _n, ...blocks } = command;
          this.overrides = blocks;
          break;
        }
        case 'run_model':
          queue.push(...(await this.runModel(command)));
          break;
        case 'call_tool':
          queue.push(...(await this.callToolNode(command)));
          break;
        case 'transfer':
          // nothing to dial: the `hang_up` that follows ends the chat `call-transferred`
          this.log.debug({ destination: command.destination }, 'transfer node reached; the chat ends');
          break;
        case 'hang_up':
          this.end(command.reason);
          break;
        case 'event_rejected':
          this.log.debug({ rejected: command }, 'engine ignored an event');
          break;
      }
    }
  }

  private async runModel(command: RunModelCommand): Promise<Command[]> {
    const config = chatModelConfig(this.overrides.llm_config ?? this.assistant.llm_config);
    const provider: LlmProvider | undefined = this.deps.providers.llm.get(config.provider);
    if (!provider) {
      this.fail(config.provider, `no llm adapter for "${config.provider}"`, ErrorCodes.PROVIDER_NO_ADAPTER);
      return [];
    }
    let words = '';
    let pending = '';
    // the model's words before a tool round are a message of their own, before the tool's answer
    const flush = () => {
      const text = pending.trim();
      pending = '';
      if (text) this.said(text, command.node_id);
    };
    let transition: string | null;
    try {
      ({ transition } = await runModelTurn({
        provider,
        config,
        command,
        signal: this.signal,
        callTools: (calls, options) => this.deps.toolCalls(this.record, calls, options),
        onText: (piece) => {
          words += piece;
          pending += piece;
        },
        onToolCalls: flush,
        onToolResult: (call, content) => this.message('tool', content, command.node_id, call.name),
      }));
    } catch (err) {
      flush();
      this.fail((err as { provider?: string }).provider ?? config.provider, (err as Error).message, isSwitchboardError(err) ? err.code : undefined);
      return [];
    }
    flush();
    const out: Command[] = [];
    if (words.trim()) out.push(...this.session.send({ type: 'model.replied', text: words.trim() }));
    if (transition) out.push(...this.session.send({ type: 'model.chose_transition', function_name: transition, node_id: command.node_id }));
    return out;
  }

  private async callToolNode(command: Extract<Command, { type: 'call_tool' }>): Promise<Command[]> {
    const [outcome] = await this.deps.toolCalls(
      this.record,
      [{ id: command.tool_call_id, name: command.tool_name, arguments: command.arguments }],
      { url: command.url, nodeId: command.node_id },
    );
    this.message('tool', toolOutput(outcome), command.node_id, command.tool_name);
    return this.session.send(
      outcome && 'result' in outcome
        ? { type: 'tool.result', tool_call_id: command.tool_call_id, result: outcome.result }
        : { type: 'tool.failed', tool_call_id: command.tool_call_id, error: outcome?.error ?? 'no result' },
    );
  }

  /** The model could not answer: the chat ends as a call would, `pipeline-error-<provider>`. */
  private fail(provider: string, why: string, code: ErrorCode = ErrorCodes.PROVIDER_FAILED): void {
    this.log.warn({ provider, why }, 'the model failed; ending the chat');
    const error = callError(code, `${provider}: ${why}`, provider);
    this.record.errors.push(error);
    this.end(endedReasonFor(error));
  }

  private end(reason: string): void {
    if (this.ended) return;
    this.ended = true;
    this.record.status = 'ended';
    this.record.ended_reason = reason;
  }
}
