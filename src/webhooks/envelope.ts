/**
 * Webhook bodies (SPEC 6.2, DECISIONS 7): `{ "message": { type, timestamp, call, phone_number,
 * customer, ...fields of the event } }`, and the structured data of an end-of-call report.
 * Pure except for the injected model in `extractStructuredData`.
 */
import type { CallObserved } from '../observability/observed.js';
import type { EffectiveAssistant } from '../../engine/assistant.js';
import type { WebhookEventType } from '../../engine/schema.js';
import { transcriptText } from '../calls/transcript.js';
import type { CallStatus } from '../calls/store.js';
import type { CallError } from '../errors.js';

export type { WebhookEventType };
/** `chat`: a text chat (`POST /chats`), which sends `tool-calls` only (docs/chats.md). */
/** `test_chat` and `test_call`: a test suite's conversations (DECISIONS 20), which send tool-calls and nothing else. */
export type CallType = 'inbound_phone_call' | 'outbound_phone_call' | 'web_call' | 'chat' | 'test_chat' | 'test_call';
export type { CallStatus };

/** DECISIONS 7 `ended_reason` values. */
export type EndedReason =
  | 'customer-ended-call'
  | 'customer-did-not-join'
  | 'assistant-ended-call'
  | 'call-transferred'
  | 'transfer-failed'
  | 'silence-timed-out'
  | 'exceeded-max-duration'
  | 'voicemail'
  | 'customer-busy'
  | 'customer-did-not-answer'
  | 'dial-failed'
  | 'canceled'
  | 'api-ended-call'
  | 'rejected-at-start'
  | 'assistant-request-failed'
  | `pipeline-error-${string}`
  | 'worker-lost';

/** What every message says about its call. A chat has no phone number and no customer number (`null`). */
export interface CallContext {
  call: { id: string; type: CallType; status: CallStatus };
  phone_number: { number: string; name: string | null } | null;
  /** `name` only when one was given (`POST /calls`). */
  customer: { number: string; name?: string | null } | null;
}

interface MessageBase<T extends WebhookEventType> extends CallContext {
  type: T;
  /** ISO 8601 UTC with milliseconds: when the message was made (the same on every retry). */
  timestamp: string;
}

export type AssistantRequestMessage = MessageBase<'assistant-request'>;

export interface StatusUpdateMessage extends MessageBase<'status-update'> {
  status: CallStatus;
  /** Only with `status: "ended"`. */
  ended_reason?: EndedReason;
}

export interface ToolCall {
  id: string;
  name: string;
  arguments: Record<string, unknown>;
}

export interface ToolCallsMessage extends MessageBase<'tool-calls'> {
  tool_calls: ToolCall[];
  /** The workflow's tool node that made the call (absent for the model's own tools). */
  node_id?: string;
}

export interface ReportMessage {
  role: 'assistant' | 'user' | 'tool' | 'system';
  content: string;
  /** ISO 8601 UTC. */
  time: string;
  seconds_from_start: number;
  node_id: string | null;
  /** `control`: a live control said or added it; absent otherwise. */
  source?: 'control';
}

export interface CallAnalysis {
  structured_data?: unknown;
  structured_data_error?: string;
}

export interface EndOfCallReportMessage extends MessageBase<'end-of-call-report'> {
  ended_reason: EndedReason;
  /** What went wrong (`{code, message, provider?}`); with `rejected-at-start` (and other rejections): every reason. */
  errors?: CallError[];
  started_at: string | null;
  ended_at: string;
  duration_seconds: number;
  /** `Assistant: ...` / `Caller: ...` lines. Absent with `gdpr_mode`. */
  transcript?: string;
  /** Absent with `gdpr_mode`. */
  messages?: ReportMessage[];
  nodes_visited: string[];
  assistant_id: string | null;
  workflow_id: string | null;
  /** Why no workflow ran although the number has one (e.g. it is inactive). */
  workflow_note?: string;
  /** Outbound calls only: `human`, `machine`, `unknown`, or null when nobody answered or detection was off and said nothing. */
  answered_by?: 'human' | 'machine' | 'unknown' | null;
  /** `GET /calls/{id}/recording` (absolute, on PUBLIC_URL) when the call was recorded, else null. */
  recording_url: string | null;
  /** The call's transfer, cold or warm (DECISIONS 16); null when it had none. */
  transfer: ReportTransfer | null;
  /** The call's trace, turns, usage and cost (DECISIONS 21; null fields when not known). */
  trace_id: string | null;
  turns: CallObserved['turns'];
  turn_latency: CallObserved['turn_latency'];
  usage: CallObserved['usage'] | null;
  cost: CallObserved['cost'];
  analysis: CallAnalysis;
}

/** A call's transfer in its report (as `GET /calls/{id}` has it). */
export interface ReportTransfer {
  mode: 'cold' | 'warm';
  destination: string;
  result: 'completed' | 'no-answer' | 'busy' | 'declined' | 'failed' | null;
  summary: string | null;
  operator_answered_at: string | null;
  joined_at: string | null;
}

export type WebhookMessage =
  | AssistantRequestMessage
  | StatusUpdateMessage
  | ToolCallsMessage
  | EndOfCallReportMessage;

/** The JSON body of every webhook request. */
export interface WebhookBody<M extends WebhookMessage = WebhookMessage> {
  message: M;
}

const isoMs = (at: Date | number) => new Date(at).toISOString();

function base<T extends WebhookEventType>(
  type: T,
  ctx: CallContext,
  at: Date | number,
  status: CallStatus = ctx.call.status,
): MessageBase<T> {
  return {
    type,
    timestamp: isoMs(at),
    call: { id: ctx.call.id, type: ctx.call.type, status },
    phone_number: ctx.phone_number ? { number: ctx.phone_number.number, name: ctx.phone_number.name } : null,
    customer: ctx.customer ? { number: ctx.customer.number, ...(ctx.customer.name ? { name: ctx.customer.name } : {}) } : null,
  };
}

export function assistantRequestMessage(
  ctx: CallContext,
  at: Date | number = Date.now(),
): WebhookBody<AssistantRequestMessage> {
  return { message: base('assistant-request', ctx, at, 'ringing') };
}

/** `call.status` follows the new status; `ended_reason` only when it is `ended`. */
export function statusUpdateMessage(
  ctx: CallContext,
  update: { status: CallStatus; ended_reason?: EndedReason | null },
  at: Date | number = Date.now(),
): WebhookBody<StatusUpdateMessage> {
  const message: StatusUpdateMessage = { ...base('status-update', ctx, at, update.status), status: update.status };
  if (update.status === 'ended') message.ended_reason = update.ended_reason ?? 'customer-ended-call';
  return { message };
}

export function toolCallsMessage(
  ctx: CallContext,
  calls: { tool_calls: ToolCall[]; node_id?: string | null },
  at: Date | number = Date.now(),
): WebhookBody<ToolCallsMessage> {
  const message: ToolCallsMessage = {
    ...base('tool-calls', ctx, at),
    tool_calls: calls.tool_calls.map((c) => ({ id: c.id, name: c.name, arguments: c.arguments })),
  };
  if (calls.node_id) message.node_id = calls.node_id;
  return { message };
}

/** `Assistant: ...` / `Caller: ...`, one line per spoken message: the one form of every transcript. */
export { transcriptText };

export interface EndOfCallReportInput {
  ended_reason: EndedReason;
  errors?: CallError[];
  started_at: string | null;
  ended_at: string;
  messages: ReportMessage[];
  nodes_visited: string[];
  assistant_id: string | null;
  workflow_id: string | null;
  workflow_note?: string | null;
  /** Outbound calls: who answered (present, maybe null); absent for other calls. */
  answered_by?: 'human' | 'machine' | 'unknown' | null;
  /** Where the call's recording is served, when it was recorded. */
  recording_url?: string | null;
  transfer?: ReportTransfer | null;
  /** What was observed of the call (src/observability/), when it was. */
  observed?: CallObserved | null;
}

/** What the report needs from the call's assistant. */
export type ReportAssistant = Pick<EffectiveAssistant, 'gdpr_mode' | 'analysis_plan'>;

export interface EndOfCallReportOptions {
  /** The call's assistant; `null` when the call was rejected before one was resolved. */
  assistant: ReportAssistant | null;
  /** The model that fills the structured-data schema (the call layer passes its LLM). */
  complete?: CompleteChat;
  /** Bound on the structured-data model call. Default 60 s. */
  structuredDataTimeoutMs?: number;
  at?: Date | number;
}

/**
 * The end-of-call report. Always resolves: a structured-data failure is reported in
 * `analysis.structured_data_error`, never as a missing report.
 */
export async function endOfCallReportMessage(
  ctx: CallContext,
  input: EndOfCallReportInput,
  options: EndOfCallReportOptions,
): Promise<WebhookBody<EndOfCallReportMessage>> {
  const startedMs = input.started_at === null ? null : Date.parse(input.started_at);
  const endedMs = Date.parse(input.ended_at);
  const duration = startedMs === null ? 0 : Math.max(0, Math.round(endedMs - startedMs) / 1000);
  const transcript = transcriptText(input.messages);
  const message: EndOfCallReportMessage = {
    ...base('end-of-call-report', ctx, options.at ?? Date.now(), 'ended'),
    ended_reason: input.ended_reason,
    started_at: input.started_at,
    ended_at: input.ended_at,
    duration_seconds: duration,
    nodes_visited: [...input.nodes_visited],
    assistant_id: input.assistant_id,
    workflow_id: input.workflow_id,
    recording_url: input.recording_url ?? null,
    transfer: input.transfer ? { ...input.transfer, ...(options.assistant?.gdpr_mode ? { summary: null } : {}) } : null,
    trace_id: input.observed?.trace_id ?? null,
    turns: input.observed?.turns ?? [],
    turn_latency: input.observed?.turn_latency ?? null,
    usage: input.observed?.usage ?? null,
    cost: input.observed?.cost ?? null,
    analysis: {},
  };
  if (input.errors && input.errors.length > 0) message.errors = input.errors.map((e) => ({ ...e }));
  if (input.workflow_note) message.workflow_note = input.workflow_note;
  if (input.answered_by !== undefined) message.answered_by = input.answered_by;
  if (!options.assistant?.gdpr_mode) {
    message.transcript = transcript;
    message.messages = input.messages.map((m) => ({
      role: m.role,
      content: m.content,
      time: m.time,
      seconds_from_start: m.seconds_from_start,
      node_id: m.node_id,
      ...(m.source ? { source: m.source } : {}),
    }));
  }
  if (options.assistant) {
    const analysis = await extractStructuredData({
      plan: options.assistant.analysis_plan,
      messages: input.messages,
      transcript,
      complete: options.complete,
      timeoutMs: options.structuredDataTimeoutMs,
      quoteAnswer: !options.assistant.gdpr_mode,
    });
    if (analysis) message.analysis = analysis;
  }
  return { message };
}

// ---------------------------------------------------------------------------------------------
// Structured data (analysis_plan.structured_data_plan)

export interface ChatTurn {
  role: 'system' | 'user' | 'assistant';
  content: string;
}

/** One chat completion: the messages in, the model's text out. */
export type CompleteChat = (messages: ChatTurn[], options: { signal: AbortSignal }) => Promise<string>;

export interface StructuredDataInput {
  plan: EffectiveAssistant['analysis_plan'];
  messages: readonly Pick<ReportMessage, 'role' | 'content'>[];
  transcript: string;
  complete?: CompleteChat | undefined;
  timeoutMs?: number | undefined;
  /** Whether an answer that is not JSON is quoted in the error (not with `gdpr_mode`: it may echo the call). Default true. */
  quoteAnswer?: boolean | undefined;
}

/** Spoken messages (the caller's and the assistant's) count towards `min_messages_threshold`. */
export const spokenMessageCount = (messages: readonly Pick<ReportMessage, 'role'>[]) =>
  messages.filter((m) => m.role === 'user' || m.role === 'assistant').length;

/**
 * Asks the model to fill the plan's schema from the transcript. `null` when the plan is off or
 * the call was too short; otherwise `{structured_data}` or `{structured_data_error}`.
 * `{{schema}}` (and `{{transcript}}`) in the plan's messages are replaced; without a
 * `{{transcript}}` placeholder the transcript follows as a user message.
 */
export async function extractStructuredData(
  input: StructuredDataInput,
): Promise<CallAnalysis | null> {
  const plan = input.plan.structured_data_plan;
  if (!plan.enabled) return null;
  if (spokenMessageCount(input.messages) < input.plan.min_messages_threshold) return null;
  if (plan.schema === null) return { structured_data_error: 'the analysis plan has no schema' };
  if (!input.complete) return { structured_data_error: 'no language model is available for structured data' };

  const schemaText = JSON.stringify(plan.schema);
  let transcriptPlaced = false;
  const turns: ChatTurn[] = plan.messages.map((m) => {
    if (m.content.includes('{{transcript}}')) transcriptPlaced = true;
    return {
      role: m.role,
      content: m.content.replaceAll('{{schema}}', schemaText).replaceAll('{{transcript}}', input.transcript),
    };
  });
  if (!transcriptPlaced) turns.push({ role: 'user', content: `Transcript of the call:\n${input.transcript}` });

  const controller = new AbortController();
  const timeoutMs = input.timeoutMs ?? 60_000;
  let timer: NodeJS.Timeout | undefined;
  let answer: string;
  try {
    answer = await Promise.race([
      input.complete(turns, { signal: controller.signal }),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          controller.abort();
          reject(new Error(`the model did not answer within ${timeoutMs / 1000} s`));
        }, timeoutMs);
      }),
    ]);
  } catch (err) {
    return { structured_data_error: `structured data extraction failed: ${errorText(err)}` };
  } finally {
    clearTimeout(timer);
  }

  let data: unknown;
  try {
    data = JSON.parse(stripCodeFence(answer));
  } catch {
    return { structured_data_error: input.quoteAnswer === false ? "the model's answer is not JSON" : `the model's answer is not JSON: ${preview(answer)}` };
  }
  const problems = schemaProblems(plan.schema, data, '$');
  if (problems.length > 0) {
    return { structured_data_error: `the model's answer does not match the schema: ${problems.slice(0, 5).join('; ')}` };
  }
  return { structured_data: data };
}

const errorText = (err: unknown) => (err instanceof Error ? err.message : String(err));
const preview = (text: string) => JSON.stringify(text.length > 200 ? `${text.slice(0, 200)}…` : text);

/** Models often wrap JSON in a Markdown fence. */
function stripCodeFence(text: string): string {
  const fenced = /^\s*```(?:json)?\s*\n?([\s\S]*?)\n?```\s*$/i.exec(text);
  return (fenced ? fenced[1]! : text).trim();
}

/** A light JSON-Schema check: `type`, `required`, `properties`, `items`, `enum`. */
function schemaProblems(schema: unknown, value: unknown, path: string): string[] {
  if (typeof schema !== 'object' || schema === null) return [];
  const s = schema as {
    type?: unknown;
    required?: unknown;
    properties?: unknown;
    items?: unknown;
    enum?: unknown;
  };
  const problems: string[] = [];
  const types = Array.isArray(s.type) ? s.type : s.type === undefined ? [] : [s.type];
  if (types.length > 0 && !types.some((t) => matchesType(t, value))) {
    return [`${path}: expected ${types.join(' or ')}, got ${value === null ? 'null' : Array.isArray(value) ? 'array' : typeof value}`];
  }
  if (Array.isArray(s.enum) && !s.enum.some((e) => JSON.stringify(e) === JSON.stringify(value))) {
    problems.push(`${path}: not one of ${JSON.stringify(s.enum)}`);
  }
  if (typeof value === 'object' && value !== null && !Array.isArray(value)) {
    const record = value as Record<string, unknown>;
    if (Array.isArray(s.required)) {
      for (const key of s.required) {
        if (typeof key === 'string' && !(key in record)) problems.push(`${path}.${key}: required`);
      }
    }
    if (typeof s.properties === 'object' && s.properties !== null) {
      for (const [key, sub] of Object.entries(s.properties as Record<string, unknown>)) {
        if (key in record && record[key] !== null) problems.push(...schemaProblems(sub, record[key], `${path}.${key}`));
      }
    }
  }
  if (Array.isArray(value) && s.items !== undefined) {
    value.forEach((item, i) => problems.push(...schemaProblems(s.items, item, `${path}[${i}]`)));
  }
  return problems;
}

function matchesType(type: unknown, value: unknown): boolean {
  switch (type) {
    case 'object':
      return typeof value === 'object' && value !== null && !Array.isArray(value);
    case 'array':
      return Array.isArray(value);
    case 'string':
      return typeof value === 'string';
    case 'number':
      return typeof value === 'number';
    case 'integer':
      return Number.isInteger(value);
    case 'boolean':
      return typeof value === 'boolean';
    case 'null':
      return value === null;
    default:
      return true;
  }
}
