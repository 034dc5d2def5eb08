/**
 * What the suite's model is asked when it plays a simulated caller or judges a conversation
 * (DECISIONS 20): the instructions, the one function each may call, and the conversation as the
 * model reads it. Any catalog LLM reads these; the sandbox model recognises the instructions and
 * plays both parts by fixed rules (docs/sandbox.md).
 */
import type { LlmFunction, LlmMessage } from '../providers/types.js';
import type { TranscriptLine } from './store.js';

export const CALLER_INSTRUCTION =
  'You are testing a voice assistant by playing a customer who calls it. Stay in the persona below and work toward the goal. ' +
  'Say only what the customer says next: one or two short spoken sentences, no stage directions, no quotes. ' +
  `When the goal is reached, or clearly cannot be reached, call the ${'`end_call`'} function instead of saying anything.`;

/** Where the persona and the goal start in the caller's instructions (the goal comes last). */
export const PERSONA_LABEL = '\n\nYour persona:\n';
export const GOAL_LABEL = '\n\nYour goal:\n';

export const CALLER_END_FUNCTION = 'end_call';

export const callerFunctions: LlmFunction[] = [
  {
    name: CALLER_END_FUNCTION,
    description: 'Hang up: the goal is reached, or it cannot be reached.',
    parameters: { type: 'object', properties: { reason: { type: 'string', description: 'why the customer hangs up' } }, required: ['reason'] },
  },
];

export const JUDGE_INSTRUCTION =
  'You are judging a conversation between a voice assistant and a customer, from its transcript, against the rubric below. ' +
  `Decide whether the conversation meets every point of the rubric, and call the ${'`verdict`'} function once with your decision and a one-sentence reason.`;

export const RUBRIC_LABEL = '\n\nRubric:\n';
export const TRANSCRIPT_LABEL = 'Transcript:\n';

export const JUDGE_VERDICT_FUNCTION = 'verdict';

export const judgeFunctions: LlmFunction[] = [
  {
    name: JUDGE_VERDICT_FUNCTION,
    description: 'Give the verdict on the conversation.',
    parameters: {
      type: 'object',
      properties: {
        passed: { type: 'boolean', description: 'true when the conversation meets the rubric' },
        reason: { type: 'string', description: 'why, in one sentence' },
      },
      required: ['passed', 'reason'],
    },
  },
];

/** The conversation as text: "Assistant: …", "Caller: …" and "Tool <name>: …" lines. */
export function transcriptOf(lines: readonly TranscriptLine[]): string {
  return lines
    .map((l) => (l.role === 'assistant' ? `Assistant: ${l.content}` : l.role === 'user' ? `Caller: ${l.content}` : `Tool ${l.tool_name ?? ''}: ${l.content}`))
    .join('\n');
}

/** The spoken lines only ("Assistant: …" and "Caller: …"), as `transcript_matches` reads them. */
export function spokenTranscript(lines: readonly TranscriptLine[]): string {
  return transcriptOf(lines.filter((l) => l.role !== 'tool'));
}

/**
 * The caller's request: the instructions with the persona and goal, then the conversation from
 * the caller's side (the assistant's lines are what it is told, its own lines what it said).
 */
export function callerMessages(caller: { persona: string; goal: string }, lines: readonly TranscriptLine[]): LlmMessage[] {
  const messages: LlmMessage[] = [{ role: 'system', content: `${CALLER_INSTRUCTION}${PERSONA_LABEL}${caller.persona}${GOAL_LABEL}${caller.goal}` }];
  for (const line of lines) {
    if (line.role === 'tool') continue;
    const role = line.role === 'assistant' ? 'user' : 'assistant';
    const last = messages[messages.length - 1]!;
    // one message per side's turn: an edge message and a first line are one thing said
    if (last.role === role && typeof last.content === 'string') last.content = `${last.content} ${line.content}`;
    else messages.push({ role, content: line.content });
  }
  if (messages.length === 1) messages.push({ role: 'user', content: '(The call has connected; the assistant has said nothing yet.)' });
  return messages;
}

export function judgeMessages(rubric: string, lines: readonly TranscriptLine[]): LlmMessage[] {
  return [
    { role: 'system', content: `${JUDGE_INSTRUCTION}${RUBRIC_LABEL}${rubric}` },
    { role: 'user', content: `${TRANSCRIPT_LABEL}${spokenTranscript(lines) || '(nothing was said)'}` },
  ];
}
