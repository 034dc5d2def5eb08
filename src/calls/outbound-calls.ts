/**
 * Outbound calls (DECISIONS 11): `POST /calls` checks and queues them, the dialler places them
 * through their carrier within the organization's limits, the carrier's progress ends the ones
 * nobody answered, and `POST /calls/{id}/end` ends a call at whatever point it is. Once the callee
 * answers and the media connects, an outbound call is a call like any other (`CallService`).
 */
import type { Logger } from 'pino';
import type { AssistantFields } from '../../engine/assistant.js';
import type { Store } from '../store/index.js';
import { outboundLimits, type AccountSettings } from '../store/account.js';
import type { PhoneNumber } from '../store/numbers.js';
import type { CallControl } from './control.js';
import type { Dialer, OutboundJob } from './dialer.js';
import type { CallNotifier } from './notifier.js';
import type { CallService } from './service.js';
import { newCallRecord, type AnsweredBy, type CallRecord, type CallStore } from './store.js';

/** What places and stops calls at a carrier (the Twilio transport today; SIP next). */
export interface OutboundCarrier {
  /** The carrier, as the record names it (`twilio`). */
  readonly kind: string;
  /** Why the account cannot place calls through this carrier, or null when it can. */
  unusable(account: AccountSettings): string | null;
  /**
   * Places the call; resolves to the carrier's ids of it (kept in `transport_ids`) once the
   * carrier took it. A refusal throws with the carrier's message.
   */
  place(record: CallRecord, account: AccountSettings): Promise<Record<string, string>>;
  /** Stops a call that has not been answered (or hangs up one that has). */
  cancel(record: CallRecord, account: AccountSettings): Promise<void>;
}

export interface Customer {
  number: string;
  name?: string | undefined;
}

export interface PlaceCalls {
  number_id: string;
  customers: Customer[];
  assistant_id?: string | undefined;
  /** Undefined: the number's workflow; null: none. */
  workflow_id?: string | null | undefined;
  variables?: Record<string, string | number | boolean> | undefined;
}

export type PlaceOutcome =
  | { kind: 'queued'; calls: CallRecord[] }
  /** The request names what is not there or cannot be used: `Invalid request` with details. */
  | { kind: 'invalid'; details: string[] }
  /** The call-start checks failed: `Call rejected` with every reason. Nothing was queued. */
  | { kind: 'rejected'; details: string[] };

export type EndOutcome =
  | { kind: 'ended'; call: CallRecord }
  /** A live call: the process that runs it hangs up (`api-ended-call`). */
  | { kind: 'ending'; call: CallRecord }
  | { kind: 'already-ended'; call: CallRecord }
  | { kind: 'not-found' };

/** How long Twilio rings before `no-answer`. */
export const RING_TIMEOUT_SECONDS = 30;

export interface OutboundCallsOptions {
  store: Store;
  calls: CallStore;
  service: CallService;
  dialer: Dialer;
  control: CallControl;
  notifier: CallNotifier;
  carrier: OutboundCarrier;
  logger: Logger;
}

export class OutboundCalls {
  private readonly log: Logger;

  constructor(private readonly o: OutboundCallsOptions) {
    this.log = o.logger.child({ component: 'outbound' });
  }

  /** Starts dialling what is queued (here and, with Redis, for every process). */
  async start(): Promise<void> {
    await this.o.dialer.start({
      limits: async (organizationId) => {
        const limits = outboundLimits(await this.o.store.account.get(organizationId));
        return { maxConcurrentCalls: limits.max_concurrent_calls, callsPerSecond: limits.calls_per_second };
      },
      dial: (job) => this.dial(job),
      isLive: async (callId) => {
        const record = await this.o.calls.get(callId);
        return !!record && record.status !== 'ended' && record.status !== 'queued';
      },
      onGaveUp: async (job, err) => {
        await this.o.service.endUnanswered(job.callId, 'dial-failed', [`switchboard: the call could not be dialled (${(err as Error).message})`]);
      },
    });
  }

  close(): Promise<void> {
    return this.o.dialer.close();
  }

  // ------------------------------------------------------------------------------------------
  // POST /calls

  /**
   * Checks everything before anything is queued: the number, the carrier's credentials, the
   * assistant and workflow, the call-start checks. Then one `queued` call per customer.
   */
  async place(organizationId: string, input: PlaceCalls): Promise<PlaceOutcome> {
    const number = await this.o.store.numbers.get(organizationId, input.number_id);
    if (!number) return { kind: 'invalid', details: [`number_id: no number with id "${input.number_id}"`] };
    const owned = { ...number, organization_id: organizationId } as PhoneNumber & { organization_id: string };
    const account = await this.o.store.account.get(organizationId);
    const unusable = this.o.carrier.unusable(account);
    if (unusable) return { kind: 'invalid', details: [`number_id: ${unusable}`] };

    const assistantId = input.assistant_id ?? number.assistant_id;
    if (!assistantId) {
      return { kind: 'invalid', details: ['assistant_id: required, the number has no assistant of its own'] };
    }
    const assistant = await this.o.store.assistants.get(organizationId, assistantId);
    if (!assistant) return { kind: 'invalid', details: [`assistant_id: no assistant with id "${assistantId}"`] };
    if (input.workflow_id) {
      const workflow = await this.o.store.workflows.get(organizationId, input.workflow_id);
      if (!workflow) return { kind: 'invalid', details: [`workflow_id: no workflow with id "${input.workflow_id}"`] };
    }

    // one snapshot for the whole list: every call of a campaign runs the same assistant and workflow
    const template = this.newRecord(owned, { number: '' });
    const refused = await this.o.service.prepare(template, owned, {
      assistantId: assistant.id,
      fields: assistant.fields as AssistantFields,
      workflowId: input.workflow_id,
      ...(input.variables ? { variables: input.variables } : {}),
    });
    if (refused) return { kind: 'rejected', details: refused.errors };

    const records: CallRecord[] = [];
    for (const customer of input.customers) {
      const record = this.newRecord(owned, customer);
      record.assistant_id = template.assistant_id;
      record.assistant = template.assistant;
      record.workflow_id = template.workflow_id;
      record.workflow_note = template.workflow_note;
      record.definition = template.definition;
      if (template.variables) record.variables = template.variables;
      records.push(record);
    }
    for (const record of records) {
      await this.o.calls.create(record);
      void this.o.notifier.statusUpdate(record, 'queued');
      // a campaign of a thousand must not hold the event loop from the live calls' audio: the
      // embedded database answers on this thread, so each record's writes are a pause of their own
      await new Promise((resolve) => setImmediate(resolve));
    }
    await this.o.dialer.enqueue(
      records.map((record) => ({ callId: record.id, organizationId, record: record as unknown as Record<string, unknown> })),
    );
    this.log.info(
      { numberId: number.id, assistantId: template.assistant_id, workflowId: template.workflow_id, calls: records.length },
      records.length === 1 ? 'outbound call queued' : 'outbound calls queued',
    );
    return { kind: 'queued', calls: records };
  }

  private newRecord(number: PhoneNumber & { organization_id: string }, customer: Customer): CallRecord {
    return newCallRecord({
      type: 'outbound_phone_call',
      status: 'queued',
      organization_id: number.organization_id,
      number_id: number.id,
      phone_number: { number: number.number, name: number.name },
      customer: { number: customer.number, name: customer.name ?? null },
      transport: this.o.carrier.kind,
      transport_ids: {},
    });
  }

  // ------------------------------------------------------------------------------------------
  // the dialler

  /**
   * One queued call: `ringing` and placed at the carrier. A call no longer queued is skipped; a
   * carrier's refusal ends it `dial-failed` with the carrier's message (its slot is free again).
   */
  private async dial(job: OutboundJob): Promise<'dialled' | 'skipped'> {
    let record = await this.o.calls.get(job.callId);
    if (!record) {
      // the embedded default keeps sessions in memory: after a restart the job brings the call back,
      // unless the call log says it is no longer waiting
      const logged = await this.o.store.calls.get(job.organizationId, job.callId);
      if (logged && logged.status !== 'queued') return 'skipped';
      record = job.record as unknown as CallRecord;
      await this.o.calls.create(record);
    }
    if (record.status !== 'queued') return 'skipped';
    const account = await this.o.store.account.get(record.organization_id);
    const unusable = this.o.carrier.unusable(account);
    if (unusable) {
      await this.o.service.endUnanswered(record.id, 'dial-failed', [`${this.o.carrier.kind}: ${unusable}`]);
      return 'skipped';
    }
    const now = new Date().toISOString();
    record.status = 'ringing';
    record.ringing_at = now;
    await this.o.calls.save(record);
    void this.o.notifier.statusUpdate(record, 'ringing');
    let ids: Record<string, string>;
    try {
      ids = await this.o.carrier.place(record, account);
    } catch (err) {
      this.log.warn({ err, callId: record.id }, 'the carrier refused the call');
      await this.o.service.endUnanswered(record.id, 'dial-failed', [`${this.o.carrier.kind}: ${(err as Error).message}`]);
      return 'skipped';
    }
    // ended while the carrier was being asked (POST /calls/{id}/end): stop the call it just placed
    const current = await this.o.calls.get(record.id);
    if (current) {
      current.transport_ids = { ...current.transport_ids, ...ids };
      await this.o.calls.save(current);
      if (current.status === 'ended') {
        await this.o.carrier.cancel(current, account).catch((err: unknown) => this.log.warn({ err, callId: record.id }, 'could not cancel a call ended while it was dialled'));
        return 'skipped';
      }
    }
    this.log.info({ callId: record.id, ...ids }, 'outbound call dialled');
    return 'dialled';
  }

  /** A live call ended (or one nobody answered): its slot is free for the next call. */
  callEnded(record: CallRecord): void {
    if (record.type !== 'outbound_phone_call') return;
    this.o.dialer.release(record.organization_id, record.id).catch((err: unknown) => {
      this.log.warn({ err, callId: record.id }, 'could not give back a dialling slot');
    });
  }

  // ------------------------------------------------------------------------------------------
  // the carrier's word

  /**
   * The carrier's progress for a call: a call that never got as far as its media ends here with
   * the carrier's reason. Live calls end through their media (or their process), not here.
   */
  async progress(callId: string, outcome: 'answered' | 'completed' | 'busy' | 'no-answer' | 'failed' | 'canceled', errors: string[] = []): Promise<void> {
    const reasons = {
      completed: 'customer-ended-call',
      busy: 'customer-busy',
      'no-answer': 'customer-did-not-answer',
      failed: 'dial-failed',
      canceled: 'canceled',
    } as const;
    if (outcome === 'answered') return;
    await this.o.service.endUnanswered(callId, reasons[outcome], errors);
  }

  /** Answering-machine detection said who answered: the process running the call acts on it. */
  async detected(callId: string, who: AnsweredBy): Promise<void> {
    const record = await this.o.calls.get(callId);
    if (!record || record.status === 'ended') return;
    if (record.status === 'in-progress' || record.status === 'forwarding') {
      await this.o.control.send(callId, { kind: 'answered-by', answeredBy: who });
      return;
    }
    // not connected yet: the call acts on it as its media connects
    record.answered_by = who;
    await this.o.calls.save(record);
    // it may have connected meanwhile, on this process or another
    const now = await this.o.calls.get(callId);
    if (now && (now.status === 'in-progress' || now.status === 'forwarding')) {
      await this.o.control.send(callId, { kind: 'answered-by', answeredBy: who });
    }
  }

  // ------------------------------------------------------------------------------------------
  // POST /calls/{id}/end

  /**
   * Ends a call wherever it is: a queued one leaves the queue (`canceled`), a ringing one is
   * canceled at the carrier (`canceled`), a live one is hung up by its process (`api-ended-call`).
   */
  async end(organizationId: string, callId: string): Promise<EndOutcome> {
    const record = await this.o.calls.get(callId);
    if (!record) {
      // the session is gone (kept 24 h): the call log still knows an ended call
      const logged = await this.o.store.calls.get(organizationId, callId);
      return logged ? { kind: 'already-ended', call: { ...(logged as unknown as CallRecord) } } : { kind: 'not-found' };
    }
    if (record.organization_id !== organizationId) return { kind: 'not-found' };
    switch (record.status) {
      case 'ended':
        return { kind: 'already-ended', call: record };
      case 'queued': {
        await this.o.dialer.remove(callId);
        const ended = await this.o.service.endUnanswered(callId, 'canceled');
        return ended ? { kind: 'ended', call: ended } : this.end(organizationId, callId);
      }
      case 'ringing': {
        const account = await this.o.store.account.get(organizationId);
        const reason = record.type === 'outbound_phone_call' ? 'canceled' : 'api-ended-call';
        const ended = await this.o.service.endUnanswered(callId, reason);
        if (!ended) return this.end(organizationId, callId);
        if (Object.keys(record.transport_ids).length > 0) {
          await this.o.carrier.cancel(record, account).catch((err: unknown) => {
            this.log.warn({ err, callId }, 'the carrier did not take the cancel');
          });
        }
        return { kind: 'ended', call: ended };
      }
      default:
        await this.o.control.send(callId, { kind: 'end' });
        return { kind: 'ending', call: record };
    }
  }
}
