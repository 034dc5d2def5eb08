/**
 * The sandbox model's two parts in test suites (DECISIONS 20, docs/sandbox.md), recognised by
 * their instructions and played by fixed rules, so that a suite run on the sandbox is
 * deterministic:
 *  - the simulated caller says its goal one sentence per turn, then hangs up (`end_call`);
 *  - the judge checks the rubric's quoted phrases against the transcript (or, with none quoted,
 *    the rubric's content words) and gives its `verdict`.
 */
import {
  CALLER_END_FUNCTION,
  CALLER_INSTRUCTION,
  GOAL_LABEL,
  JUDGE_INSTRUCTION,
  JUDGE_VERDICT_FUNCTION,
  RUBRIC_LABEL,
  TRANSCRIPT_LABEL,
} from '../../suites/prompts.js';
import type { LlmFunction, LlmMessage } from '../types.js';

export type RoleDecision = { kind: 'call'; fn: LlmFunction; args: string } | { kind: 'say'; text: string };

/** The goal's lines: its sentences (ending in `.`, `!` or `?` before a space) and its lines, in order. */
export function goalLines(goal: string): string[] {
  return goal
    .split(/\r?\n|(?<=[.!?])\s+/)
    .map((s) => s.trim())
    .filter((s) => s !== '');
}

/** The phrases of a rubric in double quotes ("…" or “…”), each with whether it must be absent. */
export function rubricPhrases(rubric: string): { phrase: string; absent: boolean }[] {
  const out: { phrase: string; absent: boolean }[] = [];
  for (const match of rubric.matchAll(/"([^"]+)"|“([^”]+)”/g)) {
    const phrase = (match[1] ?? match[2] ?? '').trim();
    if (!phrase) continue;
    // the words before the phrase, back to the start of its sentence, say whether it must not be said
    const before = rubric.slice(0, match.index).split(/[.!?;\n]/).pop() ?? '';
    out.push({ phrase, absent: /\b(not|never|no|without|nothing)\b|n['’]t\b/i.test(before) });
  }
  return out;
}

const fnNamed = (tools: readonly LlmFunction[], name: string): LlmFunction => tools.find((t) => t.name === name) ?? { name };

function systemText(messages: readonly LlmMessage[]): string {
  return messages
    .filter((m) => m.role === 'system')
    .map((m) => m.content)
    .join('\n');
}

/** The caller's next line or its hang-up: the goal's line for this turn (turns so far: its own messages). */
function playCaller(messages: readonly LlmMessage[], tools: readonly LlmFunction[]): RoleDecision {
  const system = systemText(messages);
  const at = system.lastIndexOf(GOAL_LABEL);
  const lines = goalLines(at >= 0 ? system.slice(at + GOAL_LABEL.length) : '');
  const turn = messages.filter((m) => m.role === 'assistant').length;
  if (turn < lines.length) return { kind: 'say', text: lines[turn]! };
  return { kind: 'call', fn: fnNamed(tools, CALLER_END_FUNCTION), args: JSON.stringify({ reason: 'every line of the goal has been said' }) };
}

/** The judge's verdict: every quoted phrase said (or, after not/never/no, not said), else every content word present. */
function judge(messages: readonly LlmMessage[], tools: readonly LlmFunction[], contentWords: (text: string) => Set<string>): RoleDecision {
  const system = systemText(messages);
  const at = system.lastIndexOf(RUBRIC_LABEL);
  const rubric = at >= 0 ? system.slice(at + RUBRIC_LABEL.length) : '';
  const user = [...messages].reverse().find((m) => m.role === 'user');
  const raw = user && typeof user.content === 'string' ? user.content : '';
  const transcript = raw.startsWith(TRANSCRIPT_LABEL) ? raw.slice(TRANSCRIPT_LABEL.length) : raw;
  const said = transcript.toLowerCase();
  const verdict = (passed: boolean, reason: string): RoleDecision => ({
    kind: 'call',
    fn: fnNamed(tools, JUDGE_VERDICT_FUNCTION),
    args: JSON.stringify({ passed, reason }),
  });
  const phrases = rubricPhrases(rubric);
  if (phrases.length > 0) {
    for (const { phrase, absent } of phrases) {
      const found = said.includes(phrase.toLowerCase());
      if (absent && found) return verdict(false, `the transcript contains "${phrase}", which the rubric rules out`);
      if (!absent && !found) return verdict(false, `the transcript does not contain "${phrase}"`);
    }
    return verdict(true, `every quoted phrase of the rubric holds (${phrases.map((p) => `${p.absent ? 'not ' : ''}"${p.phrase}"`).join(', ')})`);
  }
  const heard = contentWords(transcript);
  const missing = [...contentWords(rubric)].filter((w) => !heard.has(w));
  if (missing.length > 0) return verdict(false, `the transcript lacks the rubric's words: ${missing.join(', ')}`);
  return verdict(true, "every content word of the rubric is in the transcript");
}

/** The part this request asks the sandbox to play, if it is one of the suites' (null: an assistant's turn). */
export function playRole(messages: readonly LlmMessage[], tools: readonly LlmFunction[], contentWords: (text: string) => Set<string>): RoleDecision | null {
  const system = systemText(messages);
  if (system.includes(CALLER_INSTRUCTION)) return playCaller(messages, tools);
  if (system.includes(JUDGE_INSTRUCTION)) return judge(messages, tools, contentWords);
  return null;
}
