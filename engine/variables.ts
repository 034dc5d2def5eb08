/**
 * `{{name}}` variables (DECISIONS 12): the built-in values of a call, the values a call runs with
 * (given ones over built-ins), and the substitution into the assistant and the workflow at call
 * start. Pure: the clock comes in as `now`, and nothing given is changed (the call's snapshot
 * keeps the template, the call keeps its values).
 */
import type { EffectiveAssistant } from './assistant.js';
import type { LlmConfig, WorkflowDefinition, WorkflowEdge, WorkflowNode } from './schema.js';

/** A value given for a variable (`POST /chats`, `POST /calls`, an `assistant-request` answer). */
export type VariableValue = string | number | boolean;

/**
 * A variable name: a letter or `_`, then letters, digits, `_`, `.` and `-`, 64 characters at most
 * (built-ins such as `customer.name` have dots). The API refuses other names; in a text, only
 * `{{name}}` with a name of this form is a placeholder.
 */
export const VARIABLE_NAME_PATTERN = /^[A-Za-z_][A-Za-z0-9_.-]{0,63}$/;

/** `{{name}}`, spaces or tabs allowed inside the braces. */
const PLACEHOLDER = /\{\{[ \t]*([A-Za-z_][A-Za-z0-9_.-]*)[ \t]*\}\}/g;

export interface BuiltInContext {
  businessName?: string | null;
  customer?: { number?: string | null; name?: string | null } | null;
  phoneNumber?: { number?: string | null } | null;
  call: { id: string; type: string };
  /** When the call started. */
  now: Date;
}

/**
 * The built-in variables that have a value: `business_name`, `customer.number`, `customer.name`,
 * `phone_number.number`, `call.id`, `call.type`, `now` (ISO 8601 UTC) and `today` (YYYY-MM-DD,
 * UTC). One with no value (no customer name) is absent, so its placeholder stays as written.
 */
export function builtInVariables(ctx: BuiltInContext): Record<string, string> {
  const iso = ctx.now.toISOString();
  const candidates: [string, string | null | undefined][] = [
    ['business_name', ctx.businessName],
    ['customer.number', ctx.customer?.number],
    ['customer.name', ctx.customer?.name],
    ['phone_number.number', ctx.phoneNumber?.number],
    ['call.id', ctx.call.id],
    ['call.type', ctx.call.type],
    ['now', iso],
    ['today', iso.slice(0, 10)],
  ];
  const values: Record<string, string> = {};
  for (const [name, value] of candidates) {
    if (value !== null && value !== undefined && value !== '') values[name] = value;
  }
  return values;
}

/** The values a call runs with: the given ones win over built-ins of the same name; all text. */
export function resolveVariables(
  builtIns: Readonly<Record<string, string>>,
  given?: Readonly<Record<string, VariableValue>> | null,
): Record<string, string> {
  const values: Record<string, string> = { ...builtIns };
  for (const [name, value] of Object.entries(given ?? {})) values[name] = String(value);
  return values;
}

/**
 * `text` with each `{{name}}` that has a value replaced by it, in one pass (a value that holds
 * `{{x}}` is not expanded again); a name with no value is left exactly as written.
 */
export function substitute(text: string, values: Readonly<Record<string, string>>): string {
  if (!text.includes('{{')) return text;
  // own names only: `{{constructor}}` must not find Object.prototype's
  return text.replace(PLACEHOLDER, (whole, name: string) =>
    Object.hasOwn(values, name) ? values[name]! : whole,
  );
}

const substituteMessages = <M extends { content: string }>(messages: readonly M[], values: Readonly<Record<string, string>>): M[] =>
  messages.map((m) => ({ ...m, content: substitute(m.content, values) }));

function substituteLlmConfig(config: LlmConfig, values: Readonly<Record<string, string>>): LlmConfig {
  return config.messages ? { ...config, messages: substituteMessages(config.messages, values) } : config;
}

/**
 * The assistant with every line it says and every prompt it gives substituted: `first_message`,
 * `speech_config.first_message_outbound`, `voicemail_message`, `speech_config.end_call_message`,
 * `speech_config.silence.messages` and `final_message`, `recording_consent.message`, and
 * `llm_config.messages[].content` (its system messages are its prompt). Nothing else (the
 * analysis plan's `{{schema}}` is the analysis's own placeholder).
 */
export function applyVariablesToAssistant(
  assistant: EffectiveAssistant,
  values: Readonly<Record<string, string>>,
): EffectiveAssistant {
  const text = (t: string) => substitute(t, values);
  const maybe = (t: string | null) => (t === null ? null : text(t));
  const speech = assistant.speech_config;
  return {
    ...assistant,
    first_message: maybe(assistant.first_message),
    voicemail_message: maybe(assistant.voicemail_message),
    recording_consent: { ...assistant.recording_consent, message: text(assistant.recording_consent.message) },
    llm_config: substituteLlmConfig(assistant.llm_config, values),
    speech_config: {
      ...speech,
      end_call_message: text(speech.end_call_message),
      first_message_outbound: maybe(speech.first_message_outbound),
      silence: { ...speech.silence, messages: speech.silence.messages.map(text), final_message: text(speech.silence.final_message) },
    },
  };
}

/** String values substituted anywhere inside (objects and arrays walked; keys untouched). */
function substituteValues(value: unknown, values: Readonly<Record<string, string>>): unknown {
  if (typeof value === 'string') return substitute(value, values);
  if (Array.isArray(value)) return value.map((v) => substituteValues(v, values));
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, substituteValues(v, values)]));
  }
  return value;
}

function substituteNode(node: WorkflowNode, values: Readonly<Record<string, string>>): WorkflowNode {
  const common = {
    ...(node.first_line !== undefined ? { first_line: substitute(node.first_line, values) } : {}),
    ...(node.llm_config !== undefined ? { llm_config: substituteLlmConfig(node.llm_config, values) } : {}),
  };
  switch (node.type) {
    case 'conversation':
      return {
        ...node,
        ...common,
        ...(node.instructions !== undefined ? { instructions: substitute(node.instructions, values) } : {}),
      };
    case 'tool':
      return {
        ...node,
        ...common,
        ...(node.arguments !== undefined
          ? { arguments: substituteValues(node.arguments, values) as NonNullable<typeof node.arguments> }
          : {}),
      };
    case 'transfer': {
      // `{{summary}}` in `operator_message` is the warm transfer's own placeholder: filled when the operator answers
      const { summary: _summary, ...others } = values;
      return {
        ...node,
        ...common,
        ...(node.hold_message !== undefined ? { hold_message: substitute(node.hold_message, values) } : {}),
        ...(node.operator_message !== undefined ? { operator_message: substitute(node.operator_message, others) } : {}),
      };
    }
    case 'end':
      return { ...node, ...common };
  }
}

function substituteEdge(edge: WorkflowEdge, values: Readonly<Record<string, string>>): WorkflowEdge {
  return edge.message !== undefined ? { ...edge, message: substitute(edge.message, values) } : { ...edge };
}

/**
 * A new definition with `global_prompt`, node `instructions` and `first_line`, a warm transfer's
 * `hold_message` and `operator_message` (not its `{{summary}}`), a node's
 * `llm_config.messages[].content`, edge `message` and the string values of tool-node `arguments`
 * substituted. Ids, descriptions and everything else as they were; the input is not changed.
 */
export function applyVariablesToDefinition(
  definition: WorkflowDefinition,
  values: Readonly<Record<string, string>>,
): WorkflowDefinition {
  return {
    ...definition,
    ...(definition.global_prompt !== undefined ? { global_prompt: substitute(definition.global_prompt, values) } : {}),
    nodes: definition.nodes.map((n) => substituteNode(n, values)),
    edges: definition.edges.map((e) => substituteEdge(e, values)),
  };
}
