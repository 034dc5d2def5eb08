/** What a live call tells the customer's servers: the webhook layer seen from a call. */
import type { CallRecord, CallStatus } from './store.js';
import type { CallError } from '../errors.js';

export interface ToolCallRequest {
  id: string;
  name: string;
  arguments: Record<string, unknown>;
}

export type ToolCallOutcome = { tool_call_id: string; result: unknown } | { tool_call_id: string; error: string };

export interface CallNotifier {
  /** Durable, fire-and-forget: queued for at-least-once delivery. */
  statusUpdate(
    call: CallRecord,
    status: CallStatus,
    extra?: { ended_reason?: string; errors?: CallError[]; destination?: string },
  ): Promise<void>;
  endOfCallReport(call: CallRecord): Promise<void>;
  /** The `tool-calls` exchange (10 s); `async` tools are not waited for (resolves to []). */
  toolCalls(
    call: CallRecord,
    calls: ToolCallRequest[],
    options: { url?: string | undefined; nodeId?: string; async?: boolean },
  ): Promise<ToolCallOutcome[]>;
}
