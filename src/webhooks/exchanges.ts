/**
 * The webhooks that need an answer (DECISIONS 7): `assistant-request` (5 s, including DNS and
 * connect) and `tool-calls` (10 s). Each is sent once and never retried past its deadline. Every
 * answer form is parsed and validated; a wrong answer is handled as DECISIONS 7 says and logged
 * with what was wrong with it, for the customer.
 */
import type { Logger } from 'pino';
import { z } from 'zod';
import { AssistantCreate, assistantProblems } from '../../engine/assistant.js';
import { formatZodIssues } from '../../engine/validate.js';
import type { VariableValue } from '../../engine/variables.js';
import { Variables } from '../api/variables.js';
import { storableProblems } from '../api/storable.js';
import { formatPath } from '../../engine/paths.js';
import type { Clock } from './clock.js';
import { systemClock } from './clock.js';
import type {
  AssistantRequestMessage,
  ToolCallsMessage,
  WebhookBody,
} from './envelope.js';
import { redactUrl, type HttpOutcome, type WebhookHttpClient } from './http.js';
import type { DeliveryRecorder } from './notify.js';
import { newMessageId, webhookRequestHeaders } from './sign.js';
import type { WebhookTarget } from './target.js';
import { maskUrlCredentials } from './url-credentials.js';

export const ASSISTANT_REQUEST_TIMEOUT_MS = 5_000;
export const TOOL_CALLS_TIMEOUT_MS = 10_000;

export interface ExchangeOptions {
  http: WebhookHttpClient;
  /** The call's logger (a child with `callId`); wrong answers are logged here. */
  logger: Logger;
  organizationId: string;
  recorder?: DeliveryRecorder | null;
  clock?: Clock;
}

// ---------------------------------------------------------------------------------------------
// assistant-request

export type AssistantRequestOutcome =
  /** Run the organization's assistant with this id (the caller checks that it exists). */
  | { kind: 'assistant-id'; assistant_id: string; workflow_id?: string | null; variables?: Record<string, VariableValue> }
  /** Run this assistant, already validated like `POST /assistants`. */
  | { kind: 'inline'; assistant: AssistantCreate; workflow_id?: string | null; variables?: Record<string, VariableValue> }
  /** An empty answer: the number's own settings apply (reject the call if it has none). */
  | { kind: 'number-settings' }
  /**
   * The call is refused before pickup. `rejected-at-start`: the customer answered `{error}`;
   * `assistant-request-failed`: no usable answer (timeout, non-2xx, unreadable, invalid).
   */
  | { kind: 'rejected'; ended_reason: 'rejected-at-start' | 'assistant-request-failed'; errors: string[] };

const Uuid = z.uuid();

/** What in an answer no call record can hold (an unpaired surrogate, NUL), path first. */
const unstorableDetails = (answer: unknown) =>
  storableProblems(answer).map(({ path, message }) => `${formatPath(path) || 'answer'}: ${message}`);

/** Reads an assistant-request answer (status and body text). Pure. */
export function parseAssistantRequestAnswer(
  status: number,
  bodyText: string,
  bodyTooLarge = false,
): AssistantRequestOutcome {
  const failed = (...errors: string[]): AssistantRequestOutcome => ({
    kind: 'rejected',
    ended_reason: 'assistant-request-failed',
    errors,
  });
  if (status >= 300 && status < 400) return failed(`HTTP ${status}: redirects are not followed; answer with a 2xx`);
  if (status < 200 || status >= 300) return failed(`HTTP ${status}: the answer must have a 2xx status`);
  if (bodyTooLarge) return failed('the answer is larger than 64 KiB');
  if (status === 204 || bodyText.trim() === '') return { kind: 'number-settings' };

  let answer: unknown;
  try {
    answer = JSON.parse(bodyText);
  } catch {
    return failed('the answer is not JSON (send {"assistant_id": "..."}, {"assistant": {...}}, {"error": "..."} or an empty body)');
  }
  if (typeof answer !== 'object' || answer === null || Array.isArray(answer)) {
    return failed('the answer must be a JSON object');
  }
  const unstorable = unstorableDetails(answer);
  if (unstorable.length > 0) return failed(...unstorable);
  const a = answer as Record<string, unknown>;
  const keys = Object.keys(a);
  if (keys.length === 0) return { kind: 'number-settings' };

  const problems: string[] = [];
  for (const key of keys) {
    if (!['assistant_id', 'assistant', 'workflow_id', 'variables', 'error'].includes(key)) {
      problems.push(`${key}: unknown field (expected assistant_id, assistant, workflow_id, variables or error)`);
    }
  }
  if ('error' in a) {
    if (typeof a.error !== 'string' || a.error.trim() === '') {
      return failed(...problems, 'error: must be a non-empty string');
    }
    // the customer refuses the call: their reason is what the report shows
    return { kind: 'rejected', ended_reason: 'rejected-at-start', errors: [`assistant-request: ${a.error}`] };
  }

  let workflowId: string | null | undefined;
  if ('workflow_id' in a) {
    if (a.workflow_id === null) workflowId = null;
    else if (typeof a.workflow_id === 'string' && Uuid.safeParse(a.workflow_id).success) workflowId = a.workflow_id;
    else problems.push('workflow_id: must be a workflow id (UUID) or null');
  }
  // {{variables}} for the call (DECISIONS 12), checked as POST /calls checks them
  let variables: Record<string, VariableValue> | undefined;
  if ('variables' in a) {
    const parsed = Variables.safeParse(a.variables);
    if (parsed.success) variables = parsed.data;
    else problems.push(...formatZodIssues(parsed.error.issues, 'variables'));
  }
  const withWorkflow = <T extends object>(o: T) => ({
    ...o,
    ...(workflowId === undefined ? {} : { workflow_id: workflowId }),
    ...(variables === undefined ? {} : { variables }),
  });

  if ('assistant_id' in a && 'assistant' in a) {
    problems.push('assistant_id, assistant: send one of them, not both');
    return failed(...problems);
  }
  if ('assistant_id' in a) {
    if (typeof a.assistant_id !== 'string' || !Uuid.safeParse(a.assistant_id).success) {
      problems.push('assistant_id: must be an assistant id (UUID)');
    }
    if (problems.length > 0) return failed(...problems);
    return withWorkflow({ kind: 'assistant-id' as const, assistant_id: a.assistant_id as string });
  }
  if ('assistant' in a) {
    const parsed = AssistantCreate.safeParse(a.assistant);
    if (!parsed.success) {
      problems.push(...formatZodIssues(parsed.error.issues, 'assistant'));
      return failed(...problems);
    }
    problems.push(...assistantProblems(parsed.data).map((p) => `assistant.${p}`));
    if (problems.length > 0) return failed(...problems);
    return withWorkflow({ kind: 'inline' as const, assistant: parsed.data });
  }
  problems.push('the answer needs assistant_id or assistant (workflow_id alone does not choose an assistant)');
  return failed(...problems);
}

/** Sends `assistant-request` and reads the answer; resolves within the deadline, never throws. */
export async function requestAssistant(
  options: ExchangeOptions,
  input: {
    target: WebhookTarget;
    body: WebhookBody<AssistantRequestMessage>;
    /** Default 5 s (tests shorten it). */
    timeoutMs?: number;
  },
): Promise<AssistantRequestOutcome> {
  const timeoutMs = input.timeoutMs ?? ASSISTANT_REQUEST_TIMEOUT_MS;
  const sent = await sendOnce(options, input.target, input.body, timeoutMs);
  const url = redactUrl(input.target.url);
  if (!sent.response.ok) {
    // `what` reaches the tenant (the call's errors, the attempt log); the detail only the log
    const what = sent.response.code === 'TIMEOUT' ? `no answer within ${timeoutMs / 1000} s` : sent.response.reason;
    options.logger.warn(
      { event: 'assistant-request', url, error: what, detail: sent.response.detail },
      `assistant-request failed, the call is refused: ${what}`,
    );
    await sent.record(what);
    return { kind: 'rejected', ended_reason: 'assistant-request-failed', errors: [`assistant-request: ${what}`] };
  }
  const outcome = parseAssistantRequestAnswer(sent.response.status, sent.response.body, sent.response.bodyTooLarge);
  if (outcome.kind !== 'rejected' || outcome.ended_reason !== 'assistant-request-failed') {
    await sent.record(null);
    return outcome;
  }
  options.logger.warn(
    { event: 'assistant-request', url, statusCode: sent.response.status, problems: outcome.errors },
    `assistant-request answer rejected, the call is refused: ${outcome.errors.join('; ')}`,
  );
  await sent.record(outcome.errors.join('; '));
  return { ...outcome, errors: outcome.errors.map((e) => `assistant-request answer: ${e}`) };
}

// ---------------------------------------------------------------------------------------------
// tool-calls

export type ToolCallResult =
  | { tool_call_id: string; result: unknown }
  | { tool_call_id: string; error: string };

/**
 * Reads a tool-calls answer: one result per requested call id, in the order asked. Calls the
 * answer does not cover get an error result. Pure; `problems` are what the customer should fix.
 */
export function parseToolCallsAnswer(
  callIds: readonly string[],
  status: number,
  bodyText: string,
  bodyTooLarge = false,
): { results: ToolCallResult[]; problems: string[] } {
  const allFail = (reason: string) => ({
    results: callIds.map((id) => ({ tool_call_id: id, error: reason })),
    problems: [reason],
  });
  if (status >= 300 && status < 400) return allFail(`the tool endpoint answered HTTP ${status} (redirects are not followed)`);
  if (status < 200 || status >= 300) return allFail(`the tool endpoint answered HTTP ${status}`);
  if (bodyTooLarge) return allFail('the tool answer is larger than 64 KiB');
  let answer: unknown;
  try {
    answer = JSON.parse(bodyText);
  } catch {
    return allFail('the tool answer is not JSON (expected {"results": [{"tool_call_id": "...", "result": ...}]})');
  }
  const results = (answer as { results?: unknown } | null)?.results;
  if (typeof answer !== 'object' || answer === null || !Array.isArray(results)) {
    return allFail('the tool answer has no "results" array (expected {"results": [{"tool_call_id": "...", "result": ...}]})');
  }

  const problems: string[] = [];
  const wanted = new Set(callIds);
  const found = new Map<string, ToolCallResult>();
  results.forEach((item: unknown, i) => {
    const at = `results[${i}]`;
    if (typeof item !== 'object' || item === null || Array.isArray(item)) {
      problems.push(`${at}: must be an object with tool_call_id and result or error`);
      return;
    }
    const r = item as Record<string, unknown>;
    if (typeof r.tool_call_id !== 'string') {
      problems.push(`${at}.tool_call_id: required (one of ${callIds.map((c) => JSON.stringify(c)).join(', ')})`);
      return;
    }
    const id = r.tool_call_id;
    if (!wanted.has(id)) {
      problems.push(`${at}.tool_call_id: ${JSON.stringify(id)} was not asked for`);
      return;
    }
    if (found.has(id)) {
      problems.push(`${at}.tool_call_id: ${JSON.stringify(id)} answered twice; the first answer is used`);
      return;
    }
    for (const key of Object.keys(r)) {
      if (!['tool_call_id', 'result', 'error'].includes(key)) problems.push(`${at}.${key}: unknown field (ignored)`);
    }
    if ('error' in r) {
      if ('result' in r) problems.push(`${at}: has both result and error; the error is used`);
      const error = typeof r.error === 'string' ? r.error : JSON.stringify(r.error);
      found.set(id, { tool_call_id: id, error });
    } else if ('result' in r) {
      found.set(id, { tool_call_id: id, result: r.result });
    } else {
      problems.push(`${at}: needs result or error`);
    }
  });
  const ordered = callIds.map((id) => {
    const hit = found.get(id);
    if (hit) return hit;
    problems.push(`no result for tool call ${JSON.stringify(id)}`);
    return { tool_call_id: id, error: 'the tool answer has no result for this call' };
  });
  return { results: ordered, problems };
}

/**
 * Sends `tool-calls` and reads the results; resolves within the deadline with one result per
 * call (failures become error results that the conversation handles), never throws.
 */
export async function callTools(
  options: ExchangeOptions,
  input: {
    target: WebhookTarget;
    body: WebhookBody<ToolCallsMessage>;
    /** Default 10 s. */
    timeoutMs?: number;
  },
): Promise<ToolCallResult[]> {
  const timeoutMs = input.timeoutMs ?? TOOL_CALLS_TIMEOUT_MS;
  const callIds = input.body.message.tool_calls.map((c) => c.id);
  const sent = await sendOnce(options, input.target, input.body, timeoutMs);
  const log = { event: 'tool-calls', url: redactUrl(input.target.url), tools: input.body.message.tool_calls.map((c) => c.name) };
  if (!sent.response.ok) {
    // `reason` is read out by the model and shown in the attempt log; the detail only the log
    const reason = sent.response.code === 'TIMEOUT' ? `the tool did not answer within ${timeoutMs / 1000} s` : `the tool could not be reached: ${sent.response.reason}`;
    options.logger.warn({ ...log, error: reason, detail: sent.response.detail }, `tool-calls failed: ${reason}`);
    await sent.record(reason);
    return callIds.map((id) => ({ tool_call_id: id, error: reason }));
  }
  const { results, problems } = parseToolCallsAnswer(callIds, sent.response.status, sent.response.body, sent.response.bodyTooLarge);
  if (problems.length > 0) {
    options.logger.warn({ ...log, statusCode: sent.response.status, problems }, `tool-calls answer is wrong: ${problems.join('; ')}`);
  }
  await sent.record(problems.length > 0 ? problems.join('; ') : null);
  return results;
}

/**
 * Tools with `async: true`: the request is sent and not waited for. Returns at once; `done`
 * settles when the request has ended (answered, failed or timed out), for owners that drain.
 */
export function sendAsyncToolCalls(
  options: ExchangeOptions,
  input: { target: WebhookTarget; body: WebhookBody<ToolCallsMessage>; timeoutMs?: number },
): { done: Promise<void> } {
  const done = callTools(options, input).then(
    () => undefined,
    (err: unknown) => options.logger.error({ err }, 'async tool call crashed'),
  );
  return { done };
}

// ---------------------------------------------------------------------------------------------

/** One signed POST, and a way to record it once its meaning is known. */
async function sendOnce(
  options: ExchangeOptions,
  target: WebhookTarget,
  body: WebhookBody<AssistantRequestMessage | ToolCallsMessage>,
  timeoutMs: number,
): Promise<{ response: HttpOutcome; record(problem: string | null): Promise<void> }> {
  const clock = options.clock ?? systemClock;
  const messageId = newMessageId();
  const raw = JSON.stringify(body);
  const startedAt = clock.now();
  const headers = webhookRequestHeaders({
    event: body.message.type,
    messageId,
    timestampSeconds: Math.floor(startedAt / 1000),
    body: raw,
    secret: target.secret,
  });
  const response = await options.http.post(target.url, { headers, body: raw, timeoutMs });
  return {
    response,
    async record(problem) {
      if (!options.recorder) return;
      const delivered = response.ok && response.status >= 200 && response.status < 300 && problem === null;
      try {
        await options.recorder.record({
          organization_id: options.organizationId,
          call_id: body.message.call.id,
          message_id: messageId,
          event: body.message.type,
          url: maskUrlCredentials(target.url),
          attempt: 1,
          outcome: delivered ? 'delivered' : 'failed',
          status_code: response.ok ? response.status : null,
          error: problem,
          duration_ms: response.durationMs,
          next_retry_at: null,
          created_at: new Date(startedAt).toISOString(),
        });
      } catch (err) {
        options.logger.warn({ err }, 'could not record a webhook attempt');
      }
    },
  };
}
