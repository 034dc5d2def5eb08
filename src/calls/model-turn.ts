/**
 * One turn of the pipeline's model, as a `run_model` command asks for it: the functions offered
 * (the node's transition functions, then the assistant's tools), the messages (system prompt, the
 * assistant's own `llm_config.messages`, the conversation so far), the model streamed, the
 * assistant's tools run through the `tool-calls` exchange for up to five rounds, and the
 * transition the model chose. A pipeline call speaks the text as it streams (`onText`); a chat
 * writes it. Neither the speaker nor the engine is touched here: the caller reports the outcome.
 */
import type { RunModelCommand } from '../../engine/session.js';
import type { TransitionFunction } from '../../engine/prompt.js';
import type { LlmConfig, Tool } from '../../engine/schema.js';
import { PRESS_KEYS_FUNCTION, PRESS_KEYS_TOOL } from './keypad.js';
import type { LlmFunction, LlmMessage, LlmProvider, LlmToolCall } from '../providers/types.js';
import type { ToolCallOutcome, ToolCallRequest } from './notifier.js';
import type { ToolCaller } from './backend.js';

/** Rounds of the assistant's own tools in one turn; the model's words after the last one stand. */
export const MAX_TOOL_ROUNDS = 5;

/** What the model is offered in a node: functions, and what each name means. */
export interface FunctionOffer {
  /** Transition functions first (no arguments), then the assistant's tools as they are, then the builtins. */
  functions: LlmFunction[];
  /** Names that are transition functions (a call moves the conversation). */
  transitions: Set<string>;
  /** The assistant's tools by name (a call runs the `tool-calls` exchange). */
  tools: Map<string, Tool>;
  /** Builtin functions offered (`llm_config.builtin_tools`: Switchboard carries them out). */
  builtins: Set<string>;
}

/**
 * The functions of a model turn. `builtins`: the `llm_config.builtin_tools` offered here (a call's
 * conversation turn; a chat has no keypad, a tool node's choice and a silence check-in offer none).
 */
export function functionOffer(transitionFunctions: readonly TransitionFunction[], tools: readonly Tool[], builtins: readonly string[] = []): FunctionOffer {
  const offered = builtins.includes(PRESS_KEYS_TOOL) ? [PRESS_KEYS_FUNCTION] : [];
  return {
    functions: [
      ...transitionFunctions.map((f) => ({
        name: f.name,
        description: f.description,
        parameters: { type: 'object', properties: {} },
      })),
      ...tools.map((t) => ({
        name: t.name,
        ...(t.description ? { description: t.description } : {}),
        ...(t.parameters ? { parameters: t.parameters as Record<string, unknown> } : {}),
      })),
      ...offered,
    ],
    transitions: new Set(transitionFunctions.map((f) => f.name)),
    tools: new Map(tools.map((t) => [t.name, t])),
    builtins: new Set(offered.map((f) => f.name)),
  };
}

/** The builtins a model turn offers: the block's `builtin_tools` in a call's conversation turn, none elsewhere. */
export function builtinsFor(command: Pick<RunModelCommand, 'mode' | 'fallback'>, config: LlmConfig, keypad: boolean): readonly string[] {
  if (!keypad || command.mode !== 'conversation' || command.fallback !== undefined) return [];
  return config.builtin_tools ?? [];
}

/**
 * The request's messages: the node's system prompt, the assistant's own non-system messages, then
 * the history (a tool node's result as a user line naming the tool: the history has no tool call
 * for it to answer), then the turn's own instruction if it has one (a silence check-in).
 */
export function modelMessages(command: Pick<RunModelCommand, 'system' | 'messages' | 'instruction'>, config: LlmConfig): LlmMessage[] {
  return [
    { role: 'system', content: command.system },
    ...(config.messages ?? []).filter((m) => m.role !== 'system').map((m) => ({ role: m.role, content: m.content }) as LlmMessage),
    ...command.messages.map((m): LlmMessage =>
      m.role === 'tool'
        ? { role: 'user', content: `[${m.tool_name ?? 'tool'} result] ${m.content}` }
        : { role: m.role, content: m.content },
    ),
    ...(command.instruction ? [{ role: 'system' as const, content: command.instruction }] : []),
  ];
}

export type { ToolCaller };

/** Runs the assistant's tools the model called, together; one answer per call, in the calls' order. */
export async function runAssistantTools(
  calls: readonly LlmToolCall[],
  tools: ReadonlyMap<string, Tool>,
  callTools: ToolCaller,
): Promise<{ tool_call_id: string; content: string }[]> {
  return Promise.all(
    calls.map(async (call) => {
      const tool = tools.get(call.name);
      let args: Record<string, unknown>;
      try {
        args = JSON.parse(call.arguments || '{}') as Record<string, unknown>;
      } catch {
        return { tool_call_id: call.id, content: JSON.stringify({ error: 'arguments were not valid JSON' }) };
      }
      const request = { id: call.id, name: call.name, arguments: args };
      if (tool?.async) {
        void callTools([request], { url: tool.url, async: true });
        return { tool_call_id: call.id, content: JSON.stringify({ status: 'started' }) };
      }
      const [outcome] = await callTools([request], { url: tool?.url });
      return { tool_call_id: call.id, content: toolOutput(outcome) };
    }),
  );
}

export interface ModelTurnOptions {
  provider: LlmProvider;
  /** The model block in use (node override or the assistant's), with its default model filled in. */
  config: LlmConfig;
  command: RunModelCommand;
  /** Aborting stops the turn: no more of the model, no further tool round. */
  signal: AbortSignal;
  callTools: ToolCaller;
  /** The model's words as they stream, every piece in order. */
  onText?(text: string): void;
  /** The model answered with function calls (transitions or tools). */
  onToolCalls?(calls: readonly LlmToolCall[]): void;
  /** One of the assistant's tools answered: what the model reads of it. */
  onToolResult?(call: LlmToolCall, content: string): void;
  /**
   * The model called `press_keys` (offered when this is given and the block asks for it): what
   * it is told. Calls of one round run one after the other, after the round's other tools.
   */
  pressKeys?(argumentsJson: string): Promise<string>;
}

export interface ModelTurn {
  /** Everything the model wrote in the turn, over all its rounds. */
  text: string;
  /** The transition function it called, if it called one. */
  transition: string | null;
}

/**
 * Streams the model for one `run_model`, running the assistant's tools it calls (up to
 * `MAX_TOOL_ROUNDS` rounds) until it answers in words or calls a transition function. Throws what
 * the provider throws; once `signal` is aborted it stops and returns what it had (the caller
 * looks at the signal).
 */
export async function runModelTurn(o: ModelTurnOptions): Promise<ModelTurn> {
  const offer = functionOffer(o.command.transition_functions, o.command.tools, builtinsFor(o.command, o.config, o.pressKeys !== undefined));
  const messages = modelMessages(o.command, o.config);
  let text = '';
  for (let round = 0; round < MAX_TOOL_ROUNDS; round++) {
    const toolCalls: LlmToolCall[] = [];
    let roundText = '';
    for await (const event of o.provider.stream({ config: o.config, messages, tools: offer.functions, signal: o.signal })) {
      if (event.type === 'text') {
        text += event.text;
        roundText += event.text;
        o.onText?.(event.text);
      } else if (event.type === 'tool_calls') {
        toolCalls.push(...event.calls);
        o.onToolCalls?.(event.calls);
      }
    }
    const chosen = toolCalls.find((c) => offer.transitions.has(c.name));
    if (chosen) return { text, transition: chosen.name };
    const own = toolCalls.filter((c) => !offer.transitions.has(c.name));
    // nothing was offered (a silence check-in): a call is not run, the turn is its words alone
    if (own.length === 0 || offer.functions.length === 0) break;
    messages.push({ role: 'assistant', content: roundText || null, tool_calls: own });
    const keys = own.filter((c) => offer.builtins.has(c.name));
    const results = await runAssistantTools(own.filter((c) => !offer.builtins.has(c.name)), offer.tools, o.callTools);
    for (const call of keys) {
      if (o.signal.aborted) break;
      results.push({ tool_call_id: call.id, content: await o.pressKeys!(call.arguments) });
    }
    if (o.signal.aborted) break;
    // the answers in the calls' order
    results.sort((a, b) => own.findIndex((c) => c.id === a.tool_call_id) - own.findIndex((c) => c.id === b.tool_call_id));
    for (const [i, r] of results.entries()) {
      o.onToolResult?.(own[i]!, r.content);
      messages.push({ role: 'tool', tool_call_id: r.tool_call_id, content: r.content });
    }
  }
  return { text, transition: null };
}

/** A tool's outcome as the model reads it: its result (JSON unless a string), or `{"error": …}`. */
export function toolOutput(outcome: ToolCallOutcome | undefined): string {
  if (!outcome) return JSON.stringify({ error: 'no result' });
  if ('result' in outcome) return typeof outcome.result === 'string' ? outcome.result : JSON.stringify(outcome.result);
  return JSON.stringify({ error: outcome.error });
}
