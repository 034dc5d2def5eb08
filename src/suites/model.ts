/**
 * The suite's model at work (DECISIONS 20): the simulated caller's next line, and the judge's
 * verdict. Any LLM adapter serves (`suite.llm_config`, default the assistant's own chat model);
 * an aborted `signal` (the test's timeout) ends the request.
 */
import type { LlmConfig } from '../../engine/schema.js';
import { ProviderError, type LlmFunction, type LlmMessage, type LlmToolCall, type Providers } from '../providers/types.js';
import { CALLER_END_FUNCTION, callerFunctions, callerMessages, JUDGE_VERDICT_FUNCTION, judgeFunctions, judgeMessages } from './prompts.js';
import type { TranscriptLine } from './store.js';

/** One whole answer of the model: its text and its function calls. */
export async function askModel(
  providers: Pick<Providers, 'llm'>,
  config: LlmConfig,
  messages: LlmMessage[],
  tools: LlmFunction[],
  signal: AbortSignal,
): Promise<{ text: string; calls: LlmToolCall[] }> {
  const provider = providers.llm.get(config.provider);
  if (!provider) throw new ProviderError('PROVIDER_NO_ADAPTER', config.provider, `no llm adapter for "${config.provider}"`);
  let text = '';
  const calls: LlmToolCall[] = [];
  for await (const event of provider.stream({ config, messages, tools, signal })) {
    if (event.type === 'text') text += event.text;
    else if (event.type === 'tool_calls') calls.push(...event.calls);
  }
  return { text: text.trim(), calls };
}

export type CallerMove = { kind: 'say'; text: string } | { kind: 'hang-up'; reason: string };

/** What the simulated caller does next: a line to say, or hang up (its goal reached, or out of reach). */
export async function nextCallerMove(
  providers: Pick<Providers, 'llm'>,
  config: LlmConfig,
  caller: { persona: string; goal: string },
  transcript: readonly TranscriptLine[],
  signal: AbortSignal,
): Promise<CallerMove> {
  const answer = await askModel(providers, config, callerMessages(caller, transcript), callerFunctions, signal);
  const end = answer.calls.find((c) => c.name === CALLER_END_FUNCTION);
  if (end) return { kind: 'hang-up', reason: stringField(end.arguments, 'reason') ?? 'the caller hung up' };
  // a line without words is the caller having nothing more to say
  const text = answer.text.replace(/^["“]|["”]$/g, '').trim();
  return text ? { kind: 'say', text: text.slice(0, 4_000) } : { kind: 'hang-up', reason: 'the caller had nothing to say' };
}

/** The judge's verdict on the transcript against the rubric. A verdict it cannot read is a failure saying so. */
export async function judgeTranscript(
  providers: Pick<Providers, 'llm'>,
  config: LlmConfig,
  rubric: string,
  transcript: readonly TranscriptLine[],
  signal: AbortSignal,
): Promise<{ passed: boolean; reason: string }> {
  const answer = await askModel(providers, config, judgeMessages(rubric, transcript), judgeFunctions, signal);
  const call = answer.calls.find((c) => c.name === JUDGE_VERDICT_FUNCTION);
  const verdict = readVerdict(call ? call.arguments : answer.text);
  return verdict ?? { passed: false, reason: `the judge's answer could not be read as a verdict: ${JSON.stringify(preview(call?.arguments ?? answer.text))}` };
}

/** `{"passed": boolean, "reason": string}`, from the function's arguments or from JSON in the text. */
export function readVerdict(text: string): { passed: boolean; reason: string } | null {
  const json = /\{[\s\S]*\}/.exec(text)?.[0];
  if (!json) return null;
  try {
    const value = JSON.parse(json) as { passed?: unknown; reason?: unknown };
    if (typeof value.passed !== 'boolean') return null;
    return { passed: value.passed, reason: typeof value.reason === 'string' && value.reason.trim() ? value.reason.trim() : '(no reason given)' };
  } catch {
    return null;
  }
}

function stringField(json: string, field: string): string | null {
  try {
    const value = (JSON.parse(json) as Record<string, unknown>)[field];
    return typeof value === 'string' && value.trim() ? value.trim() : null;
  } catch {
    return null;
  }
}

const preview = (text: string) => (text.length > 200 ? `${text.slice(0, 200)}…` : text);
