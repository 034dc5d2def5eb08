/**
 * Outbound calls (DECISIONS 11): `POST /calls` checks and queues them, the dialler places them
 * through their carrier within the organization's limits, the carrier's progress ends the ones
 * nobody answered, and `POST /calls/{id}/end` ends a call at whatever point it is. Once the callee
 * answers and the media connects, an outbound call is a call like any other (`CallService`).
 */
import type { Logger } from 'pino';
import type { AssistantFields } from '../../engine/assistant.js';
import { wellFormedCopy } from '../../engine/text.js';
import type { Store } from '../store/index.js';
import { outboundLimits, type AccountSettings } from '../store/account.js';
import type { PhoneNumber } from '../store/numbers.js';
import { recordFromLog } from './call-log.js';
import type { LoggedCall } from '../store/calls.js';
import type { CallControl } from './control.js';
import type { Dialer, OutboundJob } from './dialer.js';
import type { CallNotifier } from './notifier.js';
import type { CallService } from './service.js';
import { newCallRecord, transition, type AnsweredBy, type CallRecord, type CallStore } from './store.js';
import { callError, callErrorFrom, errorMessages, ErrorCodes, type CallError } from '../errors.js';

/** What places and stops calls at a carrier (each carrier with numbers has one: src/telephony/carrier.ts). */
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
  | { kind: 'not-found' }
  /** No process took the end word in time (it was withdrawn: nothing was done). */
  | { kind: 'not-taken' };

/** How long Twilio rings before `no-answer`. */
export const RING_TIMEOUT_SECONDS = 30;

export interface OutboundCallsOptions {
  store: Store;
  calls: CallStore;
  service: CallService;
  dialer: Dialer;
  control: CallControl;
  notifier: CallNotifier;
  /**
   * The carriers that place calls, by kind (a number's `provider`: `twilio`, `sip`, …): one for
   * every provider, those not running here saying why they cannot be used (src/telephony/carriers.ts).
   */
  carriers: Record<string, OutboundCarrier>;
  logger: Logger;
  /** A queued call the dial queue lost, queued again (for /metrics). */
  onRequeued?(): void;
}

export class OutboundCalls {
  private readonly log: Logger;
  /** Shutting down: nothing more is dialled here (queued calls wait for another process). */
  private stopping = false;

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
        await this.endBeforeAnswer(job.callId, 'dial-failed', [callError(ErrorCodes.DIAL_FAILED, `switchboard: the call could not be dialled (${(err as Error).message})`)]);
      },
    });
  }

  /** Stops dialling here; the dialler itself stays up (to give back the slots of calls that end) until `close`. */
  stop(): void {
    this.stopping = true;
  }

  /**
   * The carrier of a number's provider (or a call's transport). A `sip` number on a server with
   * SIP off (SIP_PORT=0) is not dialled through anything else: its carrier is unusable, and says why.
   */
  private carrier(kind: string): OutboundCarrier {
    return this.o.carriers[kind] ?? this.o.carriers.twilio!;
  }

  close(): Promise<void> {
    this.stopping = true;
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
    const carrier = this.carrier(number.provider);
    const unusable = carrier.unusable(account);
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
    if (refused) return { kind: 'rejected', details: errorMessages(refused.errors) };

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
    try {
      await this.o.dialer.enqueue(
        records.map((record) => ({ callId: record.id, organizationId, record: record as unknown as Record<string, unknown> })),
      );
    } catch (err) {
      // the queue is down: the calls must not wait forever for a dial that will not come
      this.log.error({ err, calls: records.length }, 'outbound calls could not be queued; ending them');
      for (const record of records) {
        await this.endBeforeAnswer(record.id, 'dial-failed', [callError(ErrorCodes.DIAL_FAILED, 'switchboard: the call could not be queued for dialling')]);
      }
      throw err;
    }
    this.log.info(
      { numberId: number.id, assistantId: template.assistant_id, workflowId: template.workflow_id, calls: records.length },
      records.length === 1 ? 'outbound call queued' : 'outbound calls queued',
    );
    return { kind: 'queued', calls: records };
  }

  /**
   * A queued call whose session and dial job were lost (a Redis restart without persistence):
   * made again from the log, with its number, assistant and workflow as they are now (its own
   * snapshot and `{{variables}}` went with the session), and queued again at the end of its
   * organization's line; ended `dial-failed` when it can no longer be made. Logged and counted.
   */
  async requeueLost(logged: LoggedCall): Promise<void> {
    const org = logged.organization_id;
    const fail = async (why: string) => {
      this.log.warn({ callId: logged.id, why }, 'a queued call the dial queue lost could not be queued again; ending it');
      await this.o.calls.create(recordFromLog(logged));
      await this.o.service.endUnanswered(logged.id, 'dial-failed', [callError(ErrorCodes.DIAL_FAILED, `switchboard: the dial queue lost the call and ${why}`)]);
    };
    const number = logged.number_id ? await this.o.store.numbers.get(org, logged.number_id) : null;
    if (!number || !logged.customer) return fail('its number is gone');
    const assistant = logged.assistant_id ? await this.o.store.assistants.get(org, logged.assistant_id) : null;
    if (!assistant) return fail('its assistant is gone');
    const owned = { ...number, organization_id: org } as PhoneNumber & { organization_id: string };
    const record = this.newRecord(owned, { number: logged.customer.number, ...(logged.customer.name ? { name: logged.customer.name } : {}) });
    Object.assign(record, { id: logged.id, created_at: logged.created_at });
    const refused = await this.o.service.prepare(record, owned, {
      assistantId: assistant.id,
      fields: assistant.fields as AssistantFields,
      workflowId: logged.workflow_id,
    });
    if (refused) return fail(`its call-start checks fail now (${errorMessages(refused.errors).join('; ')})`);
    await this.o.calls.create(record);
    await this.o.dialer.enqueue([{ callId: record.id, organizationId: org, record: record as unknown as Record<string, unknown> }]);
    this.log.warn({ callId: record.id }, 'queued call re-queued: the dial queue had lost it (Redis restarted?)');
    this.o.onRequeued?.();
  }

  private newRecord(number: PhoneNumber & { organization_id: string }, customer: Customer): CallRecord {
    return newCallRecord({
      type: 'outbound_phone_call',
      status: 'queued',
      organization_id: number.organization_id,
      number_id: number.id,
      phone_number: { number: number.number, name: number.name },
      customer: { number: customer.number, name: customer.name ?? null },
      transport: this.carrier(number.provider).kind,
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
    if (this.stopping) throw new Error('this process is shutting down; the call waits for another');
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
    const carrier = this.carrier(record.transport);
    const unusable = carrier.unusable(account);
    if (unusable) {
      await this.endBeforeAnswer(record.id, 'dial-failed', [callError(ErrorCodes.DIAL_FAILED, `${carrier.kind}: ${unusable}`, carrier.kind)]);
      return 'skipped';
    }
    // queued → ringing in one step: POST /calls/{id}/end may be ending it at this moment
    let ringing: CallRecord | null;
    try {
      ringing = await transition(this.o.calls, record.id, (r) => {
        if (r.status !== 'queued') return false;
        r.status = 'ringing';
        r.ringing_at = new Date().toISOString();
        return true;
      });
    } catch (err) {
      // a record that cannot be written will not be dialled on a retry either
      await this.endBeforeAnswer(record.id, 'dial-failed', [
        callError(ErrorCodes.DIAL_FAILED, `switchboard: the call could not be dialled (its record could not be written: ${(err as Error).message})`),
      ]);
      return 'skipped';
    }
    if (!ringing) return 'skipped';
    void this.o.notifier.statusUpdate(ringing, 'ringing');
    let ids: Record<string, string>;
    try {
      ids = await carrier.place(ringing, account);
    } catch (err) {
      const status = (err as { status?: number }).status;
      if (status === 429 || (status !== undefined && status >= 500)) {
        // the carrier did not take it and says to try later: back to the queue, the dialler retries
        await transition(this.o.calls, ringing.id, (r) => {
          if (r.status !== 'ringing') return false;
          r.status = 'queued';
          r.ringing_at = null;
          return true;
        });
        throw err;
      }
      if (status === undefined) {
        // no answer at all (a timeout, a dropped connection): the carrier may have placed the call.
        // It keeps its slot; the carrier's callbacks, or the ringing limit, end it.
        this.log.error({ err, callId: ringing.id }, 'the carrier did not answer the dial; the call may ring');
        return 'dialled';
      }
      this.log.warn({ err, callId: ringing.id }, 'the carrier refused the call');
      await this.endBeforeAnswer(ringing.id, 'dial-failed', [callErrorFrom(err, ErrorCodes.DIAL_FAILED, { message: `${carrier.kind}: ${(err as Error).message}`, provider: carrier.kind })]);
      return 'skipped';
    }
    // the carrier's ids, unless the call was ended while the carrier was being asked: then the call
    // it just placed is stopped there
    let endedMeanwhile: CallRecord | null = null;
    await transition(this.o.calls, ringing.id, (r) => {
      if (r.status === 'ended') {
        endedMeanwhile = r;
        return false;
      }
      r.transport_ids = { ...ids, ...r.transport_ids };
      return true;
    });
    if (endedMeanwhile) {
      const ended: CallRecord = endedMeanwhile;
      await carrier
        .cancel({ ...ended, transport_ids: { ...ids, ...ended.transport_ids } }, account)
        .catch((err: unknown) => this.log.warn({ err, callId: ended.id }, 'could not cancel a call ended while it was dialled'));
      return 'skipped';
    }
    this.log.info({ callId: ringing.id, ...ids }, 'outbound call dialled');
    return 'dialled';
  }

  /**
   * Ends a queued or ringing call (`service.endUnanswered`). When that write fails (the
   * compare-and-set of a record that cannot be read back, e.g. one holding an unpaired surrogate
   * in Redis), the record is written whole, its text made well-formed, and announced: a call is
   * never left queued by it, and `POST /calls/{id}/end` never fails on it. Null when it had ended.
   * A throw: the session store itself is down.
   */
  private async endBeforeAnswer(callId: string, reason: string, errors: CallError[] = []): Promise<CallRecord | null> {
    let unwritable: unknown;
    try {
      return await this.o.service.endUnanswered(callId, reason, errors);
    } catch (err) {
      unwritable = err;
    }
    const stored = await this.o.calls.get(callId);
    if (!stored || (stored.status !== 'queued' && stored.status !== 'ringing')) throw unwritable;
    const ended = wellFormedCopy(stored);
    ended.status = 'ended';
    ended.ended_reason = reason;
    ended.ended_at = new Date().toISOString();
    ended.errors.push(...errors);
    await this.o.calls.save(ended);
    this.log.error({ err: unwritable, callId, endedReason: reason }, 'the call record could not be moved; written whole, ended');
    const extra = { ended_reason: reason, ...(errors.length > 0 ? { errors } : {}) };
    void this.o.notifier
      .statusUpdate(ended, 'ended', extra)
      .then(() => this.o.notifier.endOfCallReport(ended))
      .catch((err: unknown) => this.log.error({ err, callId }, 'could not queue the webhooks of a call that ended before it went live'));
    this.callEnded(ended);
    return ended;
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
  async progress(callId: string, outcome: 'completed' | 'busy' | 'no-answer' | 'failed' | 'canceled', errors: CallError[] = []): Promise<void> {
    const reasons = {
      completed: 'customer-ended-call',
      busy: 'customer-busy',
      'no-answer': 'customer-did-not-answer',
      failed: 'dial-failed',
      canceled: 'canceled',
    } as const;
    await this.endBeforeAnswer(callId, reasons[outcome], errors);
  }

  /** Answering-machine detection said who answered: the process running the call acts on it. */
  async detected(callId: string, who: AnsweredBy): Promise<void> {
    // not connected yet: kept in the record, and the call acts on it as its media connects
    await transition(this.o.calls, callId, (r) => {
      if (r.status !== 'queued' && r.status !== 'ringing') return false;
      r.answered_by = who;
      return true;
    });
    // live (or connected meanwhile, on this process or another): the process running it acts on it
    await this.o.control.send(callId, { kind: 'answered-by', answeredBy: who });
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
      // the session is gone: kept 24 h, or (embedded default) lost with a restart while the call
      // still waits in the durable queue; the call log knows the call either way
      const logged = await this.o.store.calls.get(organizationId, callId);
      if (!logged) return { kind: 'not-found' };
      if (logged.status === 'queued' && (await this.o.dialer.remove(callId))) {
        await this.o.calls.create(recordFromLog(logged));
        const ended = await this.endBeforeAnswer(callId, 'canceled');
        if (ended) return { kind: 'ended', call: ended };
      }
      // unfinished in the log with no session anywhere (its session was lost): it ends now
      if (logged.status === 'ringing' || logged.status === 'in-progress' || logged.status === 'forwarding') {
        // started, with sessions shared (Redis): its process may still run it after a Redis
        // restart. The word waits 5 s for it; if no process takes it, nothing was done (503) and
        // the sweep ends the call (worker-lost)
        if (logged.status !== 'ringing' && this.o.service.sharesSessions) {
          const delivered = await this.o.control.deliver(callId, { kind: 'end' });
          if (delivered.kind === 'applied') return { kind: 'ending', call: recordFromLog(logged) };
          if (delivered.kind === 'not-taken') return { kind: 'not-taken' };
          const now = await this.o.store.calls.get(organizationId, callId);
          return { kind: 'already-ended', call: recordFromLog(now ?? logged) };
        }
        const ended = await this.o.service.finishOrphan(logged, logged.type === 'outbound_phone_call' ? 'canceled' : 'api-ended-call');
        if (ended) return { kind: 'ended', call: ended };
        const now = await this.o.store.calls.get(organizationId, callId);
        if (now) return { kind: 'already-ended', call: recordFromLog(now) };
      }
      return { kind: 'already-ended', call: recordFromLog(logged) };
    }
    if (record.organization_id !== organizationId) return { kind: 'not-found' };
    switch (record.status) {
      case 'ended':
        return { kind: 'already-ended', call: record };
      case 'queued':
      case 'ringing': {
        await this.o.dialer.remove(callId);
        const reason = record.type === 'outbound_phone_call' ? 'canceled' : 'api-ended-call';
        // queued or ringing → ended in one step; if the dialler is placing it right now, it sees
        // the end once the carrier answers and cancels the call there
        const ended = await this.endBeforeAnswer(callId, reason);
        if (!ended) return this.end(organizationId, callId);
        // the carrier has the call once its ids are kept
        if (Object.keys(ended.transport_ids).length > 0) {
          const account = await this.o.store.account.get(organizationId);
          await this.carrier(ended.transport).cancel(ended, account).catch((err: unknown) => {
            this.log.warn({ err, callId }, 'the carrier did not take the cancel');
          });
        }
        return { kind: 'ended', call: ended };
      }
      default: {
        // applied by the process that runs the call, or nothing was done (DECISIONS 16)
        const delivered = await this.o.control.deliver(callId, { kind: 'end' });
        if (delivered.kind === 'applied') return { kind: 'ending', call: record };
        if (delivered.kind === 'not-taken') return { kind: 'not-taken' };
        return { kind: 'already-ended', call: (await this.o.calls.get(callId)) ?? record };
      }
    }
  }
}
