/**
 * Our conversation (`LlmMessage[]`, OpenAI's shape) as the turns of the vendors whose APIs hold
 * the system prompt apart and want the conversation to go user, assistant, user, ... (Anthropic's
 * Messages API, Gemini's `generateContent`). Each adapter maps the parts to its own blocks.
 *
 * - The system messages before the first other message are the system prompt, in order.
 * - A later system message (the turn's own instruction, e.g. a silence check-in) is written in a
 *   user turn as `[system] <text>`, where it stands in the conversation.
 * - Consecutive messages of one side are one turn; a tool's answer is a user turn's part, named
 *   after the call it answers (Gemini wants the function's name).
 * - The conversation starts and ends with a user turn: `[the conversation starts]` before an
 *   opening line of the assistant, `[continue]` after a last one (a last assistant turn would be
 *   continued, not answered, or refused by models that take no prefill).
 */
import type { LlmMessage, LlmToolCall } from '../types.js';

export type TurnPart =
  | { type: 'text'; text: string }
  | { type: 'tool_call'; call: LlmToolCall }
  | { type: 'tool_result'; callId: string; name: string; content: string; call?: LlmToolCall };

export interface Turn {
  role: 'user' | 'assistant';
  parts: TurnPart[];
}

export interface Conversation {
  /** The system prompt's paragraphs, in order (empty when there is none). */
  system: string[];
  turns: Turn[];
}

export const OPENING_NOTE = '[the conversation starts]';
export const CONTINUE_NOTE = '[continue]';

export function toTurns(messages: readonly LlmMessage[]): Conversation {
  const system: string[] = [];
  const turns: Turn[] = [];
  const calls = new Map<string, LlmToolCall>();
  const add = (role: Turn['role'], part: TurnPart) => {
    const last = turns.at(-1);
    if (last?.role === role) last.parts.push(part);
    else turns.push({ role, parts: [part] });
  };
  for (const m of messages) {
    switch (m.role) {
      case 'system':
        if (turns.length === 0) {
          if (m.content.trim()) system.push(m.content);
        } else if (m.content.trim()) add('user', { type: 'text', text: `[system] ${m.content}` });
        break;
      case 'user':
        if (m.content.trim()) add('user', { type: 'text', text: m.content });
        break;
      case 'assistant':
        if (m.content?.trim()) add('assistant', { type: 'text', text: m.content });
        for (const call of m.tool_calls ?? []) {
          calls.set(call.id, call);
          add('assistant', { type: 'tool_call', call });
        }
        break;
      case 'tool': {
        const call = calls.get(m.tool_call_id);
        add('user', { type: 'tool_result', callId: m.tool_call_id, name: call?.name ?? 'tool', content: m.content, ...(call ? { call } : {}) });
        break;
      }
    }
  }
  if (turns[0]?.role !== 'user') turns.unshift({ role: 'user', parts: [{ type: 'text', text: OPENING_NOTE }] });
  if (turns.at(-1)?.role !== 'user') turns.push({ role: 'user', parts: [{ type: 'text', text: CONTINUE_NOTE }] });
  return { system, turns };
}

/** A tool call's arguments as an object (a model's unreadable JSON becomes `{}`). */
export function argumentsObject(call: LlmToolCall): Record<string, unknown> {
  try {
    const parsed: unknown = JSON.parse(call.arguments || '{}');
    return parsed && typeof parsed === 'object' && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}
