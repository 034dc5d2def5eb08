/**
 * Sandbox language model (provider `sandbox`): an offline, deterministic stand-in that follows a
 * workflow without understanding anything. It is NOT intelligent:
 *  - after the caller speaks, it calls the function (a transition `go_to_…` or one of the
 *    assistant's tools) whose description shares the most content words with what the caller
 *    said (lowercased, stop words dropped, plural `s` ignored; ties go to the first listed);
 *  - when nothing shares a word, it acknowledges: "Okay, I understand: <the caller's words>.";
 *  - after a tool result, it takes a transition whose description shares words with the result,
 *    must take one when only transitions are offered (a tool node: the best match, else the
 *    first), and otherwise says one sentence quoting the result; after the result of a
 *    transition it only says that sentence (so it can never loop from transition to transition);
 *  - asked for a silence check-in (a system message carries Switchboard's check-in instruction,
 *    `SILENCE_CHECK_INSTRUCTION`), it says `SANDBOX_CHECK_IN` and calls nothing, whatever else
 *    the request holds;
 *  - offered `press_keys` (the keypad), it presses the keys the caller's words ask for ("press 1")
 *    or the system prompt names (`press_keys(12#)`), once; it never picks that function by words
 *    shared with its description, and after its result it says nothing (it listens).
 *  - asked to play a test suite's simulated caller or judge, it follows the rules of ./roles.ts.
 *  - asked for a warm transfer's summary (`TRANSFER_SUMMARY_INSTRUCTION`), it says `SANDBOX_SUMMARY`.
 * The same messages and tools always give the same events.
 */
import { SILENCE_CHECK_INSTRUCTION } from '../../../engine/session.js';
import { PRESS_KEYS_TOOL } from '../../../engine/schema.js';
import { TRANSFER_SUMMARY_INSTRUCTION } from '../../../engine/prompt.js';
import type { LlmEvent, LlmFunction, LlmMessage, LlmProvider, LlmRequest, LlmToolCall } from '../types.js';
import { ProviderError } from '../types.js';
import { declareProvider } from '../declare.js';
import { playRole } from './roles.js';

/** The sandbox model's summary for a warm transfer's operator: fixed, whatever the conversation. */
export const SANDBOX_SUMMARY = 'The caller asked to speak with a person.';

/** The sandbox model's silence check-in (not the engine's fallback line, so the two can be told apart). */
export const SANDBOX_CHECK_IN = 'Are you still with me? Take your time.';

const PROVIDER = 'sandbox';

export const provider = declareProvider({
  catalog: {
    id: PROVIDER,
    kind: 'llm',
    description:
      'Offline, deterministic stand-in for a language model (demo and tests). Not intelligent: it picks the transition whose description shares the most words with what the caller said.',
    models: ['sandbox'],
    default_model: 'sandbox',
  },
  account: null,
  needs: 'nothing',
  create: () => createSandboxLlm(),
});
const ECHO_WORDS = 8;
const RESULT_CHARS = 80;

const STOP_WORDS = new Set(
  (
    'a about above after again against all am an and any are as at be because been before being ' +
    'below between both but by can could did do does doing down during each few for from further ' +
    'had has have having he her here hers herself him himself his how i if in into is it its itself ' +
    'just let me more most my myself no nor not of off on once only or other our ours ourselves out ' +
    'over own same she should so some such than that the their theirs them themselves then there ' +
    'these they this those through to too under until up very was we were what when where which ' +
    'while who whom why will with would you your yours yourself yourselves im id ive ill dont ' +
    'please like want wants wanted need needs get got go going okay ok yeah well also caller user ' +
    'customer says said say asks asked ask tell tells told'
  ).split(' '),
);

/** Content words: lowercased letters/digits runs, stop words and 1-letter words dropped, plural `s` cut. */
export function contentWords(text: string): Set<string> {
  const words = new Set<string>();
  for (const match of text.toLowerCase().replace(/['’]/g, '').matchAll(/[\p{L}\p{N}]+/gu)) {
    let w = match[0];
    if (w.length < 2 || STOP_WORDS.has(w)) continue;
    if (w.length > 4 && w.endsWith('ies')) w = `${w.slice(0, -3)}y`;
    else if (w.length > 3 && w.endsWith('s') && !w.endsWith('ss')) w = w.slice(0, -1);
    words.add(w);
  }
  return words;
}

/** What a function is about: its description, or its name's words when it has none. */
function functionWords(fn: LlmFunction): Set<string> {
  return contentWords(fn.description?.trim() ? fn.description : fn.name.replace(/[_-]+/g, ' '));
}

/** The function sharing the most content words with `text` (first on ties), and how many. */
export function bestFunction(
  text: string,
  functions: readonly LlmFunction[],
): { fn: LlmFunction; shared: number } | undefined {
  const said = contentWords(text);
  let best: { fn: LlmFunction; shared: number } | undefined;
  for (const fn of functions) {
    let shared = 0;
    for (const w of functionWords(fn)) if (said.has(w)) shared++;
    if (!best || shared > best.shared) best = { fn, shared };
  }
  return best;
}

export function isTransitionFunction(fn: LlmFunction): boolean {
  return fn.name.startsWith('go_to_');
}

/** Arguments for a tool call: each required parameter filled from what was said, or a default. */
function argumentsFor(fn: LlmFunction, text: string): string {
  const params = fn.parameters as
    | { properties?: Record<string, { type?: string; enum?: unknown[] }>; required?: string[] }
    | undefined;
  const args: Record<string, unknown> = {};
  for (const name of params?.required ?? []) {
    const schema = params?.properties?.[name] ?? {};
    if (Array.isArray(schema.enum) && schema.enum.length > 0) args[name] = schema.enum[0];
    else if (schema.type === 'number' || schema.type === 'integer') {
      const n = /-?\d+(?:\.\d+)?/.exec(text);
      args[name] = n ? Number(schema.type === 'integer' ? Number.parseInt(n[0], 10) : n[0]) : 0;
    } else if (schema.type === 'boolean') args[name] = true;
    else if (schema.type === 'array') args[name] = [];
    else if (schema.type === 'object') args[name] = {};
    else args[name] = text;
  }
  return JSON.stringify(args);
}

/** Name of the function an assistant message called with this id, if any. */
function calledFunction(messages: readonly LlmMessage[], callId: string): string | undefined {
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i]!;
    if (m.role !== 'assistant' || !m.tool_calls) continue;
    const call = m.tool_calls.find((c) => c.id === callId);
    if (call) return call.name;
  }
  return undefined;
}

function lastUserText(messages: readonly LlmMessage[]): string {
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i]!;
    if (m.role === 'user') return m.content;
  }
  return '';
}

/** "Okay, I understand: <the first few words>." — the caller's own words, never invented ones. */
export function acknowledgement(said: string): string {
  const words = said
    .trim()
    .split(/\s+/)
    .filter((w) => w !== '')
    .slice(0, ECHO_WORDS);
  const echo = words.join(' ').replace(/[\s.,;:!?…]+$/u, '');
  return echo ? `Okay, I understand: ${echo}.` : 'Okay, how can I help?';
}

function resultSentence(content: string): string {
  const flat = content.replace(/\s+/g, ' ').trim();
  const cut = flat.length > RESULT_CHARS ? `${flat.slice(0, RESULT_CHARS)}…` : flat;
  return cut ? `Thanks for waiting. The result is: ${cut}.` : 'Thanks for waiting, that is done.';
}

// ---------------------------------------------------------------------------------------------
// the keypad

const KEY_WORDS: Readonly<Record<string, string>> = {
  zero: '0', one: '1', two: '2', three: '3', four: '4', five: '5', six: '6', seven: '7', eight: '8', nine: '9',
  star: '*', pound: '#', hash: '#',
};

/**
 * The keys `text` asks to press: what follows its first "press" (digits, `*`, `#`, or the words
 * zero to nine, star, pound and hash), up to the first other word or the end of the sentence.
 * "For sales, press 1. For support, press 2." → "1"; "press one two #" → "12#".
 */
export function keysAskedFor(text: string): string | null {
  const after = /\bpress(?:ing)?\b(.*)$/is.exec(text)?.[1];
  if (after === undefined) return null;
  let keys = '';
  for (const token of after.split(/[\s,]+/)) {
    if (token === '') continue;
    const word = token.toLowerCase().replace(/[.!?;:…]+$/u, '');
    const key = /^[0-9*#]+$/.test(word) ? word : KEY_WORDS[word];
    if (key === undefined) break;
    keys += key;
    if (word !== token.toLowerCase()) break; // the sentence ended
  }
  return keys === '' ? null : keys;
}

/** `press_keys(1w2#)` (quotes allowed) in the system prompt: the keys it names. */
const PROMPTED_KEYS = /press_keys\(\s*["'“]?([0-9*#w]+)["'”]?\s*\)/;

/** The conversation already shows `keys` sent: the call's line for them, or a `press_keys` call with them. */
function keysSentBefore(messages: readonly LlmMessage[], keys: string): boolean {
  return messages.some(
    (m) =>
      m.role === 'assistant' &&
      // the transcript's line for keys sent (src/calls/keypad.ts), in the history a call gives
      (m.content === `Keys sent: ${keys}` ||
        (m.tool_calls ?? []).some((c) => c.name === PRESS_KEYS_TOOL && argumentsDigits(c.arguments) === keys)),
  );
}

function argumentsDigits(args: string): unknown {
  try {
    return (JSON.parse(args) as { digits?: unknown }).digits;
  } catch {
    return undefined;
  }
}

/** The keys to press now, if any: the caller's last words ask for them, or the prompt names keys not yet sent. */
function keysToPress(messages: readonly LlmMessage[]): string | null {
  const last = messages[messages.length - 1];
  if (last?.role === 'user') {
    const asked = keysAskedFor(last.content);
    if (asked) return asked;
  }
  const system = messages.find((m) => m.role === 'system')?.content ?? '';
  const prompted = PROMPTED_KEYS.exec(system)?.[1];
  return prompted && !keysSentBefore(messages, prompted) ? prompted : null;
}

// ---------------------------------------------------------------------------------------------

export type SandboxDecision = { kind: 'call'; fn: LlmFunction; args: string } | { kind: 'say'; text: string };

/** The whole policy, pure: what the sandbox model does with these messages and tools. */
export function decide(messages: readonly LlmMessage[], offered: readonly LlmFunction[]): SandboxDecision {
  if (messages.some((m) => m.role === 'system' && m.content.includes(SILENCE_CHECK_INSTRUCTION))) {
    return { kind: 'say', text: SANDBOX_CHECK_IN };
  }
  if (messages.some((m) => m.role === 'system' && m.content.includes(TRANSFER_SUMMARY_INSTRUCTION))) {
    return { kind: 'say', text: SANDBOX_SUMMARY };
  }
  // the keypad is pressed when asked to, never chosen by words shared with its description
  const keypad = offered.find((f) => f.name === PRESS_KEYS_TOOL);
  const tools = keypad ? offered.filter((f) => f !== keypad) : offered;
  // a test suite's simulated caller or judge (./roles.ts)
  const role = playRole(messages, tools, contentWords);
  if (role) return role;
  const last = messages[messages.length - 1];
  if (last?.role === 'tool') {
    // The result of a transition (the call has moved on) never leads to another transition.
    const answered = calledFunction(messages, last.tool_call_id);
    if (answered && isTransitionFunction({ name: answered })) {
      return { kind: 'say', text: resultSentence(last.content) };
    }
    const transitions = tools.filter(isTransitionFunction);
    const best = bestFunction(last.content, transitions);
    const mustChoose = offered.length > 0 && transitions.length === offered.length;
    if (best && (best.shared > 0 || mustChoose)) return { kind: 'call', fn: best.fn, args: '{}' };
    // keys pressed: it listens to what they bring
    if (answered === PRESS_KEYS_TOOL) return { kind: 'say', text: '' };
    return { kind: 'say', text: resultSentence(last.content) };
  }
  const keys = keypad ? keysToPress(messages) : null;
  if (keypad && keys) return { kind: 'call', fn: keypad, args: JSON.stringify({ digits: keys }) };
  const said = last?.role === 'user' ? last.content : lastUserText(messages);
  if (last?.role === 'user') {
    const best = bestFunction(said, tools);
    if (best && best.shared > 0) {
      const args = isTransitionFunction(best.fn) ? '{}' : argumentsFor(best.fn, said);
      return { kind: 'call', fn: best.fn, args };
    }
  }
  return { kind: 'say', text: acknowledgement(said) };
}

/** Splits a sentence into about three streamed pieces at word boundaries. */
function pieces(text: string): string[] {
  const words = text.split(/(?<= )/);
  const size = Math.max(1, Math.ceil(words.length / 3));
  const out: string[] = [];
  for (let i = 0; i < words.length; i += size) out.push(words.slice(i, i + size).join(''));
  return out;
}

function aborted(): ProviderError {
  return new ProviderError('PROVIDER_ABORTED', PROVIDER, 'request aborted');
}

async function* run(request: LlmRequest): AsyncGenerator<LlmEvent> {
  const { signal } = request;
  const check = () => {
    if (signal?.aborted) throw aborted();
  };
  check();
  const decision = decide(request.messages, request.tools);
  await Promise.resolve(); // a model never answers synchronously
  check();
  if (decision.kind === 'call') {
    const call: LlmToolCall = {
      id: `call_sandbox_${request.messages.length}`,
      name: decision.fn.name,
      arguments: decision.args,
    };
    yield { type: 'tool_calls', calls: [call] };
    check();
    yield { type: 'done', finishReason: 'tool_calls', usage: sandboxUsage(request, call.name + call.arguments) };
    return;
  }
  for (const text of decision.text === '' ? [] : pieces(decision.text)) {
    yield { type: 'text', text };
    check();
  }
  yield { type: 'done', finishReason: 'stop', usage: sandboxUsage(request, decision.text) };
}

/**
 * The sandbox's token counts, deterministic: a token per 4 characters (rounded up) of the
 * request's messages and function definitions, and of what it wrote (docs/sandbox.md).
 */
export function sandboxUsage(request: { messages: readonly { content?: unknown }[]; tools: readonly unknown[] }, output: string) {
  const chars = request.messages.reduce((n, m) => n + (typeof m.content === 'string' ? m.content.length : 0), 0) + JSON.stringify(request.tools).length;
  return { inputTokens: Math.ceil(chars / 4), outputTokens: Math.ceil(output.length / 4) };
}

export function createSandboxLlm(): LlmProvider {
  return {
    id: PROVIDER,
    stream: (request) => run(request),
  };
}
