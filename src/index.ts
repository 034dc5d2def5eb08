/**
 * What the `switchboard` package offers to code outside the service: verifying the webhooks it
 * sends, and the types of their bodies and of the answers it expects.
 */
export {
  verifyWebhook,
  WebhookVerificationError,
  type IncomingHeaders,
  type VerifiedWebhook,
  type VerifyWebhookOptions,
  type WebhookVerificationErrorCode,
} from './webhooks/verify.js';
export type {
  AssistantRequestMessage,
  CallAnalysis,
  CallContext,
  CallStatus,
  CallType,
  EndedReason,
  EndOfCallReportMessage,
  ReportMessage,
  StatusUpdateMessage,
  ToolCall,
  ToolCallsMessage,
  WebhookBody,
  WebhookEventType,
  WebhookMessage,
} from './webhooks/envelope.js';
export type { ToolCallResult } from './webhooks/exchanges.js';

/** The answer to `assistant-request`: one of these, or an empty body (204, `{}`). */
export type AssistantRequestAnswer =
  | { assistant_id: string; workflow_id?: string | null }
  | { assistant: Record<string, unknown>; workflow_id?: string | null }
  | { error: string };

/** The answer to `tool-calls`. */
export interface ToolCallsAnswer {
  results: ({ tool_call_id: string; result: unknown } | { tool_call_id: string; error: string })[];
}
