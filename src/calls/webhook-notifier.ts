/**
 * The webhook layer seen from a call: which URL each event goes to (tool > assistant > number >
 * account), the bodies, and the `assistant-request` exchange that picks a number's assistant.
 */
import type { Logger } from 'pino';
import { conversationLogger } from '../logger.js';
import { assistantProblems, type AssistantFields, type EffectiveAssistant } from '../../engine/assistant.js';
import type { Store } from '../store/index.js';
import type { AccountSettings } from '../store/account.js';
import type { PhoneNumber } from '../store/numbers.js';
import type { Providers } from '../providers/types.js';
import type { WebhookService } from '../webhooks/service.js';
import { resolveWebhookTarget } from '../webhooks/target.js';
import {
  assistantRequestMessage,
  endOfCallReportMessage,
  statusUpdateMessage,
  toolCallsMessage,
  type CallContext,
  type CompleteChat,
  type EndedReason,
  type EndOfCallReportMessage,
  type StatusUpdateMessage,
  type WebhookBody,
} from '../webhooks/envelope.js';
import type { NotificationEvent } from '../webhooks/notify.js';
import type { Outbox } from '../store/outbox.js';
import type { CallNotifier, ToolCallOutcome, ToolCallRequest } from './notifier.js';
import type { AssistantResolution, AssistantResolver } from './service.js';
import { isGdprCall, type CallRecord, type CallStatus } from './store.js';
import { callError, ErrorCodes, type CallError } from '../errors.js';

/** A notification whose target is found when it is sent (kept in the outbox while the database is down). */
interface PendingNotify {
  call: Pick<CallRecord, 'id' | 'organization_id' | 'number_id'> & { assistant: Record<string, unknown> };
  event: NotificationEvent;
  body: WebhookBody<StatusUpdateMessage | EndOfCallReportMessage>;
}

const context = (call: Pick<CallRecord, 'id' | 'type' | 'status' | 'phone_number' | 'customer'>): CallContext => ({
  call: { id: call.id, type: call.type, status: call.status },
  phone_number: call.phone_number,
  customer: call.customer,
});

export class WebhookCallNotifier implements CallNotifier, AssistantResolver {
  /**
   * The last status-update or report of each call still being queued. Each waits for the one before
   * it: a message looks up the number and account before it is queued, and without the chain a
   * slow lookup for `forwarding` could let `ended` reach the queue (and the customer) first.
   */
  private readonly tails = new Map<string, Promise<void>>();

  constructor(
    private readonly webhooks: WebhookService,
    private readonly store: Store,
    private readonly providers: Providers,
    private readonly logger: Logger,
    private readonly outbox: Outbox | null = null,
  ) {
    outbox?.register<PendingNotify>('notify', (p) => this.deliver(p));
  }

  private async levels(call: CallRecord) {
    const [number, account] = await Promise.all([
      // a web call has no number: its webhooks go to the assistant's, else the account's
      call.number_id ? this.store.numbers.get(call.organization_id, call.number_id) : Promise.resolve(null),
      this.store.account.get(call.organization_id),
    ]);
    const assistant = call.assistant as Partial<EffectiveAssistant>;
    return { number, account, assistant: assistant.webhook_url !== undefined ? assistant : null };
  }

  /** Runs `queue` for a call after everything queued for it before: its messages keep the order of the calls made here. */
  private inOrder(callId: string, queue: () => Promise<void>): Promise<void> {
    const previous = this.tails.get(callId) ?? Promise.resolve();
    // each step catches its own errors; this catch keeps one that slipped through from stopping the chain
    const tail = previous.then(queue).catch((err: unknown) => {
      this.logger.error({ err, callId }, 'a call notification could not be queued');
    });
    this.tails.set(callId, tail);
    void tail.finally(() => {
      if (this.tails.get(callId) === tail) this.tails.delete(callId);
    });
    return tail;
  }

  /** Calls whose messages are still being queued (for tests). */
  get pending(): number {
    return this.tails.size;
  }

  statusUpdate(
    call: CallRecord,
    status: CallStatus,
    extra: { ended_reason?: string; errors?: CallError[]; destination?: string } = {},
  ): Promise<void> {
    // the message describes the call as it is now, not as it is once its turn to be queued comes
    const snapshot = { ...call, status };
    return this.inOrder(call.id, () => this.queueStatusUpdate(snapshot, status, extra));
  }

  private async queueStatusUpdate(
    call: CallRecord,
    status: CallStatus,
    extra: { ended_reason?: string; errors?: CallError[]; destination?: string },
  ): Promise<void> {
    try {
      const body = statusUpdateMessage(context(call), {
        status,
        ended_reason: (extra.ended_reason ?? null) as EndedReason | null,
      });
      const message = body.message as typeof body.message & { errors?: CallError[]; destination?: string };
      if (extra.errors && extra.errors.length > 0) message.errors = extra.errors;
      if (extra.destination) message.destination = extra.destination;
      await this.send(call, 'status-update', body);
    } catch (err) {
      this.logger.error({ err, callId: call.id }, 'status-update could not be queued');
    }
  }

  /**
   * Finds the message's target and queues it. Through the outbox when there is one: while the
   * database (numbers, account) does not answer, the message is kept, in the call's order, and
   * sent once it does (DECISIONS 22).
   */
  private async send(call: CallRecord, event: NotificationEvent, body: WebhookBody<StatusUpdateMessage | EndOfCallReportMessage>): Promise<void> {
    const assistant = call.assistant as Partial<EffectiveAssistant> | null;
    const pending: PendingNotify = {
      call: {
        id: call.id,
        organization_id: call.organization_id,
        number_id: call.number_id,
        assistant:
          assistant && assistant.webhook_url !== undefined
            ? { webhook_url: assistant.webhook_url, webhook_secret: assistant.webhook_secret, webhook_events: assistant.webhook_events }
            : {},
      },
      event,
      body,
    };
    if (this.outbox) await this.outbox.submit('notify', call.id, pending);
    else await this.deliver(pending);
  }

  private async deliver(p: PendingNotify): Promise<void> {
    const { number, account, assistant } = await this.levels(p.call as unknown as CallRecord);
    const target = resolveWebhookTarget({ event: p.event, assistant, number, account });
    await this.webhooks.notify({ organizationId: p.call.organization_id, callId: p.call.id, target, body: p.body });
  }

  endOfCallReport(call: CallRecord): Promise<void> {
    return this.inOrder(call.id, () => this.queueEndOfCallReport(call));
  }

  private async queueEndOfCallReport(call: CallRecord): Promise<void> {
    try {
      const effective = call.assistant as unknown as EffectiveAssistant;
      // a call rejected before pickup has nothing to analyse
      const hasAssistant = call.started_at !== null && !!effective && typeof effective === 'object' && 'analysis_plan' in effective;
      const body = await endOfCallReportMessage(
        context({ ...call, status: 'ended' }),
        {
          ended_reason: (call.ended_reason ?? 'customer-ended-call') as EndedReason,
          errors: call.errors,
          started_at: call.started_at,
          ended_at: call.ended_at ?? new Date().toISOString(),
          messages: call.messages,
          nodes_visited: call.nodes_visited,
          assistant_id: call.assistant_id,
          workflow_id: call.workflow_id,
          workflow_note: call.workflow_note,
          recording_url: call.recording_url ?? null,
          transfer: call.transfer ?? null,
          observed: call.observed ?? null,
          ...(call.type === 'outbound_phone_call' ? { answered_by: call.answered_by ?? null } : {}),
        },
        { assistant: hasAssistant ? effective : null, complete: hasAssistant ? this.completer(effective) : undefined },
      );
      // the call log keeps the structured data whether or not a webhook receives the report
      const analysis = (body.message as { analysis?: { structured_data?: unknown } }).analysis;
      if (analysis?.structured_data !== undefined) call.structured_data = analysis.structured_data;
      await this.send(call, 'end-of-call-report', body);
    } catch (err) {
      this.logger.error({ err, callId: call.id }, 'end-of-call-report could not be queued');
    }
  }

  async toolCalls(
    call: CallRecord,
    calls: ToolCallRequest[],
    options: { url?: string | undefined; nodeId?: string; async?: boolean },
  ): Promise<ToolCallOutcome[]> {
    const { number, account, assistant } = await this.levels(call);
    const target = resolveWebhookTarget({ event: 'tool-calls', tool: { url: options.url }, assistant, number, account });
    if (!target) return calls.map((c) => ({ tool_call_id: c.id, error: 'no webhook is configured for tool-calls' }));
    const body = toolCallsMessage(context(call), { tool_calls: calls, node_id: options.nodeId ?? null });
    const who = { organizationId: call.organization_id, logger: conversationLogger(this.logger.child({ callId: call.id }), isGdprCall(call)) };
    if (options.async) {
      this.webhooks.sendAsyncToolCalls(who, { target, body });
      return [];
    }
    return this.webhooks.callTools(who, { target, body });
  }

  async resolve(input: {
    call: Pick<CallRecord, 'id' | 'type' | 'phone_number' | 'customer'>;
    number: PhoneNumber;
    account: AccountSettings;
    organizationId: string;
  }): Promise<AssistantResolution> {
    const target = resolveWebhookTarget({ event: 'assistant-request', number: input.number, account: input.account });
    if (!target) {
      return {
        kind: 'rejected',
        errors: [callError(ErrorCodes.ASSISTANT_REQUEST_FAILED, 'the number has no assistant and no number or account webhook receives assistant-request')],
      };
    }
    const outcome = await this.webhooks.requestAssistant(
      { organizationId: input.organizationId, logger: this.logger.child({ callId: input.call.id }) },
      { target, body: assistantRequestMessage(context({ ...input.call, status: 'ringing' })) },
    );
    // an absent workflow_id (the number's workflow) and `null` (no workflow) stay apart
    const workflow = outcome.kind === 'assistant-id' || outcome.kind === 'inline' ? outcome.workflow_id : undefined;
    const withWorkflow = {
      ...(workflow === undefined ? {} : { workflow_id: workflow }),
      ...((outcome.kind === 'assistant-id' || outcome.kind === 'inline') && outcome.variables ? { variables: outcome.variables } : {}),
    };
    switch (outcome.kind) {
      case 'assistant-id':
        return { kind: 'assistant', assistant_id: outcome.assistant_id, fields: { name: '' }, ...withWorkflow };
      case 'inline': {
        const problems = assistantProblems(outcome.assistant);
        if (problems.length > 0) {
          return { kind: 'rejected', errors: problems.map((p) => callError(ErrorCodes.ASSISTANT_REQUEST_FAILED, `assistant-request answer: assistant.${p}`)) };
        }
        return { kind: 'assistant', assistant_id: null, fields: outcome.assistant as AssistantFields, ...withWorkflow };
      }
      case 'number-settings':
        return { kind: 'number-settings' };
      case 'rejected':
        // the customer's `{"error": …}` refuses the call (rejected-at-start); any other refusal is the exchange failing
        const code = outcome.ended_reason === 'rejected-at-start' ? ErrorCodes.ASSISTANT_REQUEST_REJECTED : ErrorCodes.ASSISTANT_REQUEST_FAILED;
        return { kind: 'rejected', errors: outcome.errors.map((e) => callError(code, e)) };
    }
  }

  /** The call's own model fills the structured-data schema of its analysis plan. */
  private completer(assistant: EffectiveAssistant): CompleteChat | undefined {
    const provider = this.providers.llm.get(assistant.llm_config.provider);
    if (!provider) return undefined;
    return async (messages, { signal }) => {
      let text = '';
      for await (const event of provider.stream({ config: assistant.llm_config, messages, tools: [], signal })) {
        if (event.type === 'text') text += event.text;
      }
      return text;
    };
  }
}
