/**
 * The calls of this process, whatever carries them: call start (number → assistant and workflow
 * snapshot → checks → record, `ringing`), connecting a call to its transport once the far end's
 * media arrives, heartbeats, finalizing calls whose process died, graceful shutdown. A carrier's
 * protocol lives in its transport (src/telephony/<carrier>/, docs/transports.md), never here.
 */
import { pricingFor } from '../observability/pricing.js';
import { randomBytes, randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { effectiveAssistant, type AssistantFields, type EffectiveAssistant } from '../../engine/assistant.js';
import { callStartChecks } from '../../engine/checks.js';
import { CallRejectCodes } from '../../engine/errors.js';
import { callError, endedReasonFor, errorMessages, ErrorCodes, type CallError } from '../errors.js';
import type { ProviderKeys } from '../providers/keys.js';
import type { WorkflowDefinition } from '../../engine/schema.js';
import type { Store } from '../store/index.js';
import type { PhoneNumber } from '../store/numbers.js';
import type { AccountSettings } from '../store/account.js';
import type { Providers } from '../providers/types.js';
import { createCall, type CallDeps, type CallMedia } from './call.js';
import { keepLostRecording } from '../recordings/lost.js';
import type { ActiveCall } from './active-call.js';
import type { CallNotifier } from './notifier.js';
import { forgetConversation, newCallRecord, transition, type CallRecord, type CallStore } from './store.js';
import type { TurnLatency } from './latency.js';
import type { CallTransport } from './transport.js';
import type { CallControl, CallControlMessage } from './control.js';
import type { ControlOutcome } from './live-control.js';
import { describeCall } from './call-log.js';
import type { ListenHub } from './listen.js';
import { builtInVariables, resolveVariables } from '../../engine/variables.js';
import { isOutage, RETRY_AFTER_SECONDS } from '../store/outage.js';
import type { LoggedCall } from '../store/calls.js';
import { CallSweeper } from './sweep.js';

/**
 * How the assistant for a number without one is found (the `assistant-request` exchange).
 * `workflow_id`: absent means the number's own workflow, `null` means none (the assistant alone).
 */
export type AssistantResolution =
  | {
      kind: 'assistant';
      assistant_id: string | null;
      fields: AssistantFields;
      workflow_id?: string | null;
      /** `{{variables}}` the answer gave for the call. */
      variables?: Record<string, string | number | boolean>;
    }
  | { kind: 'number-settings'; workflow_id?: string | null }
  /** Refused: how the call ends derives from the first entry (`endedReasonFor`). */
  | { kind: 'rejected'; errors: CallError[] };

export interface AssistantResolver {
  resolve(input: {
    call: Pick<CallRecord, 'id' | 'type' | 'phone_number' | 'customer'>;
    number: PhoneNumber;
    account: AccountSettings;
    organizationId: string;
  }): Promise<AssistantResolution>;
}

export interface CallServiceOptions {
  store: Store;
  calls: CallStore;
  providers: Providers;
  notifier: CallNotifier;
  resolver: AssistantResolver;
  logger: Logger;
  /** Seconds without a heartbeat after which another process finalizes a call. */
  staleSeconds?: number;
  onTurnLatency?(latency: TurnLatency): void;
  /** A call was refused as a replay of one its carrier already gave us. */
  onReplay?(): void;
  /** Word from other processes for the calls this one runs (API hang-ups, answering-machine detection). */
  control?: CallControl;
  /** A call of any kind has ended (its report queued): outbound calls give their dialling slot back. */
  onCallEnded?(record: CallRecord): void;
  /** Background clips and recordings (DECISIONS 13). */
  media?: CallMedia;
  /** Listen-in: every call of the process is registered there (src/calls/listen.ts). */
  listen?: ListenHub;
  /** The providers' keys this server has: a call that needs one it lacks is refused at start. */
  keys?: ProviderKeys;
  /** A call the sweep ended (unfinished in the log, no live session anywhere). */
  onSwept?(record: CallRecord): void;
  /** A queued outbound call whose session and dial job a Redis restart lost: queued again. */
  onLostQueued?(logged: LoggedCall): Promise<void>;
  /** How often the sweep of the call log runs (and once at start); default 60 s. */
  sweepEveryMs?: number;
  /** The sweep leaves calls younger than this alone; default 150 s (a call may ring that long). */
  sweepMinAgeMs?: number;
  /**
   * Sessions other processes share (Redis): the sweep ends a call only once it has been without a
   * session and a heartbeat for a stale period. In process, none of another run can be alive.
   */
  sharedSessions?: boolean;
}

/** An inbound call as its transport has it, before anything is decided. */
export interface InboundCall {
  number: PhoneNumber & { organization_id: string };
  account: AccountSettings;
  /** The caller's number, as the carrier gave it. */
  customerNumber: string;
  /** The carrier (`twilio`) and its own ids of the call, kept in the record. */
  transport: string;
  transportIds: Record<string, string>;
  /** The carrier's unique id of the call: a second call with it is a replay. */
  transportKey: string;
}

export type InboundOutcome =
  /** Taken: the far end connects its media with `streamToken` (one-time, 120 s). */
  | { kind: 'accepted'; record: CallRecord; streamToken: string }
  /** Refused before pickup, with its `status-update` and report queued. */
  | { kind: 'rejected'; record: CallRecord }
  /** The carrier's id already has a call (`callId`): nothing was made or sent. */
  | { kind: 'replay'; callId: string }
  /** The process is shutting down. */
  | { kind: 'busy' };

/**
 * `openInboundUnlessDown`: also `unavailable` when the database or Redis did not answer (DECISIONS
 * 22): nothing was picked up; the transport refuses the call (Twilio `<Reject>`, SIP 503).
 */
export type InboundDecision = InboundOutcome | { kind: 'unavailable'; retryAfterSeconds: number };

/** Whose call it is, and the workflow it runs unless told otherwise: a number, or a web call's own. */
export interface CallOwner {
  organization_id: string;
  workflow_id: string | null;
}

/** A web call as `POST /calls/web` asks for it (the body of `POST /chats`). */
export interface WebCallRequest {
  organizationId: string;
  assistantId: string;
  workflowId: string | null;
  variables?: Record<string, string | number | boolean>;
}

export type WebCallOutcome =
  /** Made and `ringing`: the browser connects with `token` (`<call id>.<secret>`, one-time, 60 s). */
  | { kind: 'accepted'; record: CallRecord; token: string }
  /** An id that is not the organization's: nothing was made. */
  | { kind: 'invalid'; details: string[] }
  /** The call-start checks failed: nothing was made. */
  | { kind: 'rejected'; details: string[] }
  | { kind: 'busy' };

/** How long a one-time media-stream token is valid. */
const STREAM_TOKEN_SECONDS = 120;
/** A web call's token: the browser has the URL at once (DECISIONS 14). */
export const WEB_TOKEN_SECONDS = 60;
const HEARTBEAT_MS = 5_000;
/**
 * How long a carrier's call id stays taken: a replay of a signed voice webhook within it
 * makes no call (Twilio's signature has no timestamp). As long as call sessions are kept; the
 * call log answers after that.
 */
const CALL_SID_CLAIM_SECONDS = 24 * 3600;

export class CallService {
  readonly workerId = `w-${randomUUID()}`;
  private readonly live = new Map<string, ActiveCall>();
  private accepting = true;
  private heartbeat: NodeJS.Timeout | null = null;
  private readonly sweeper: CallSweeper;
  private readonly log: Logger;

  constructor(private readonly o: CallServiceOptions) {
    this.log = o.logger.child({ component: 'calls' });
    this.sweeper = new CallSweeper({ ...o, log: this.log, runsHere: (callId) => this.live.has(callId) });
  }

  liveCount(): number {
    return this.live.size;
  }

  async start(): Promise<void> {
    if (this.heartbeat) return;
    this.heartbeat = setInterval(() => void this.beat(), HEARTBEAT_MS);
    this.heartbeat.unref();
    await this.o.control?.subscribe(
      (callId, message) => this.controlled(callId, message),
      () => this.live.keys(),
    );
    // calls a stopped process left unfinished in the log are ended now, then every minute
    await this.sweeper.start();
  }

  /** The live call of this process with that id, if it runs here. */
  liveCall(callId: string): ActiveCall | undefined {
    return this.live.get(callId);
  }

  /** Word for a call: acted on by the process that runs it; what came of it goes back to its sender. */
  private controlled(callId: string, message: CallControlMessage): ControlOutcome {
    const call = this.live.get(callId);
    if (!call || call.isEnded()) return { kind: 'not-live', message: 'the call has ended' };
    try {
      switch (message.kind) {
        case 'end':
          void call.terminate('api-ended-call');
          return { kind: 'applied' };
        case 'answered-by':
          call.answeredBy(message.answeredBy);
          return { kind: 'applied' };
        case 'control': {
          const outcome = call.control(message.control);
          // the answer shows the call as it is now, here, where it runs (its session's save may lag)
          return outcome.kind === 'applied' ? { kind: 'applied', call: describeCall(call.record) } : outcome;
        }
      }
    } catch (err) {
      call.fail(err, `control ${message.kind}`);
      return { kind: 'not-live', message: 'the call failed while applying it, and has ended' };
    }
  }

  // ------------------------------------------------------------------------------------------
  // call start

  /** Whether new calls are taken (not while shutting down). */
  isAccepting(): boolean {
    return this.accepting;
  }

  /**
   * `openInbound`, with an outage (database or Redis not answering) as `unavailable` instead of
   * an error: the transport refuses the call before pickup (Twilio `<Reject>`, SIP 503).
   */
  async openInboundUnlessDown(inbound: InboundCall): Promise<InboundDecision> {
    try {
      return await this.openInbound(inbound);
    } catch (err) {
      if (!isOutage(err)) throw err;
      this.log.warn({ err, numberId: inbound.number.id, transport: inbound.transport }, 'call refused before pickup: the database or Redis does not answer');
      return { kind: 'unavailable', retryAfterSeconds: RETRY_AFTER_SECONDS };
    }
  }

  /**
   * An inbound call its transport has verified: one call per carrier id, the assistant resolved
   * (or asked for), the workflow snapshot taken, the call-start checks run. Accepted calls are
   * `ringing` until their media connects (`connect`).
   */
  async openInbound(inbound: InboundCall): Promise<InboundOutcome> {
    if (!this.accepting) return { kind: 'busy' };
    const { number, account } = inbound;
    const record = newCallRecord({
      organization_id: number.organization_id,
      number_id: number.id,
      phone_number: { number: number.number, name: number.name },
      customer: { number: inbound.customerNumber },
      transport: inbound.transport,
      transport_ids: inbound.transportIds,
    });
    const log = this.log.child({ callId: record.id });
    // one call per carrier call: a replayed (or retried) signed request creates and sends nothing
    const earlier =
      (await this.o.calls.claimTransportCall(inbound.transportKey, record.id, CALL_SID_CLAIM_SECONDS)) ??
      // after the sessions are gone (a restart, 24 h) the call log still knows the call
      (await this.o.store.calls.findByTransportCall(inbound.transport, inbound.transportIds as { call_sid: string }));
    if (earlier) {
      log.warn({ numberId: number.id, earlierCallId: earlier }, 'call refused: its carrier id already has a call (a replayed webhook)');
      this.o.onReplay?.();
      return { kind: 'replay', callId: earlier };
    }

    const resolved = await this.resolveAssistant(record, number, account);
    if ('rejected' in resolved) return this.rejectAtStart(record, resolved.errors);
    const refused = await this.prepare(record, number, resolved);
    if (refused) return this.rejectAtStart(record, refused.errors);

    const streamToken = randomBytes(24).toString('base64url');
    await this.o.calls.create(record);
    await this.o.calls.putStreamToken(record.id, streamToken, STREAM_TOKEN_SECONDS);
    void this.o.notifier.statusUpdate(record, 'ringing');
    log.info({ numberId: number.id, assistantId: record.assistant_id, workflowId: record.workflow_id, transport: record.transport }, 'call accepted');
    return { kind: 'accepted', record, streamToken };
  }

  /**
   * A web call (`POST /calls/web`): the assistant and workflow checked as for a chat, the snapshot
   * taken and the call-start checks run before anything is made; then the call, `ringing`, and a
   * one-time token for its stream. A refused web call makes nothing (the API answers 400).
   */
  async openWeb(request: WebCallRequest): Promise<WebCallOutcome> {
    if (!this.accepting) return { kind: 'busy' };
    const { organizationId } = request;
    const assistant = await this.o.store.assistants.get(organizationId, request.assistantId);
    if (!assistant) return { kind: 'invalid', details: [`assistant_id: no assistant with id "${request.assistantId}"`] };
    if (request.workflowId && !(await this.o.store.workflows.get(organizationId, request.workflowId))) {
      return { kind: 'invalid', details: [`workflow_id: no workflow with id "${request.workflowId}"`] };
    }
    const record = newCallRecord({
      type: 'web_call',
      organization_id: organizationId,
      number_id: null,
      phone_number: null,
      customer: null,
      transport: 'web',
      transport_ids: {},
    });
    const refused = await this.prepare(
      record,
      { organization_id: organizationId, workflow_id: null },
      {
        assistantId: assistant.id,
        fields: assistant.fields,
        workflowId: request.workflowId,
        ...(request.variables ? { variables: request.variables } : {}),
      },
    );
    if (refused) return { kind: 'rejected', details: errorMessages(refused.errors) };
    const secret = randomBytes(24).toString('base64url');
    // the token first: when Redis refuses either write, nothing of the call is left behind
    await this.o.calls.putStreamToken(record.id, secret, WEB_TOKEN_SECONDS);
    await this.o.calls.create(record);
    void this.o.notifier.statusUpdate(record, 'ringing');
    this.log.info({ callId: record.id, assistantId: record.assistant_id, workflowId: record.workflow_id, transport: 'web' }, 'web call made');
    return { kind: 'accepted', record, token: `${record.id}.${secret}` };
  }

  /**
   * Takes the call's snapshot (the effective assistant, the workflow definition) into the record
   * and runs the call-start checks: null when the call may start, else why not (every reason).
   * `workflowId` undefined means the number's own workflow, null none.
   */
  async prepare(
    record: CallRecord,
    number: CallOwner,
    resolved: { assistantId: string | null; fields: AssistantFields; workflowId: string | null | undefined; variables?: Record<string, string | number | boolean> },
  ): Promise<{ errors: CallError[] } | null> {
    record.assistant_id = resolved.assistantId;
    const assistant = effectiveAssistant(resolved.fields);
    record.assistant = assistant as unknown as Record<string, unknown>;
    if (resolved.variables) record.variables = { ...resolved.variables };
    const workflow = await this.workflowFor(number, resolved.workflowId);
    if (workflow.unknown) {
      // only an assistant-request answer can name a workflow that is not there (numbers have a foreign key)
      return { errors: [callError(ErrorCodes.ASSISTANT_REQUEST_FAILED, `workflow_id: no workflow with id "${workflow.id}"`)] };
    }
    const { definition, note } = workflow;
    record.workflow_id = definition ? workflow.id : null;
    record.workflow_note = note;
    record.definition = definition as unknown as Record<string, unknown> | null;

    const problems = callStartChecks(resolved.fields, definition);
    if (problems.length > 0) return { errors: problems.map((p) => callError(p.code, `${p.code}: ${p.message}`)) };
    const missing = this.missingAdapters(assistant);
    if (missing.length > 0) return { errors: missing.map((m) => callError(ErrorCodes.CALL_REJECTED_MISSING_ADAPTER, m)) };
    // fail closed: a provider without its key would fail only after the caller answered
    const keyless = this.o.keys?.problems(resolved.fields, definition) ?? [];
    if (keyless.length > 0) return { errors: keyless.map((p) => callError(CallRejectCodes.MISSING_PROVIDER_KEY, `${CallRejectCodes.MISSING_PROVIDER_KEY}: ${p}`)) };
    return null;
  }

  private async resolveAssistant(
    record: CallRecord,
    number: PhoneNumber & { organization_id: string },
    account: AccountSettings,
  ): Promise<
    | { assistantId: string | null; fields: AssistantFields; workflowId: string | null | undefined; variables?: Record<string, string | number | boolean> }
    | { rejected: true; errors: CallError[] }
  > {
    const fromNumber = async (workflowId: string | null | undefined) => {
      if (!number.assistant_id) {
        return { rejected: true as const, errors: [callError(ErrorCodes.ASSISTANT_REQUEST_FAILED, 'the number has no assistant and the assistant-request answer named none')] };
      }
      const stored = await this.o.store.assistants.get(number.organization_id, number.assistant_id);
      if (!stored) return { rejected: true as const, errors: [callError(ErrorCodes.CALL_REJECTED_UNKNOWN_ASSISTANT, 'the number\'s assistant no longer exists')] };
      return { assistantId: stored.id, fields: stored.fields, workflowId };
    };
    if (number.assistant_id) return fromNumber(undefined);
    const outcome = await this.o.resolver.resolve({ call: record, number, account, organizationId: number.organization_id });
    switch (outcome.kind) {
      case 'rejected':
        return { rejected: true, errors: outcome.errors };
      case 'number-settings':
        return fromNumber(outcome.workflow_id);
      case 'assistant': {
        if (outcome.assistant_id) {
          const stored = await this.o.store.assistants.get(number.organization_id, outcome.assistant_id);
          if (!stored) {
            return { rejected: true, errors: [callError(ErrorCodes.ASSISTANT_REQUEST_FAILED, `assistant_id: no assistant with id "${outcome.assistant_id}"`)] };
          }
          return { assistantId: stored.id, fields: stored.fields, workflowId: outcome.workflow_id, ...(outcome.variables ? { variables: outcome.variables } : {}) };
        }
        return { assistantId: null, fields: outcome.fields, workflowId: outcome.workflow_id, ...(outcome.variables ? { variables: outcome.variables } : {}) };
      }
    }
  }

  /** `requested`: from an assistant-request answer; `undefined` means the number's own workflow. */
  private async workflowFor(
    number: CallOwner,
    requested: string | null | undefined,
  ): Promise<{ id: string | null; definition: WorkflowDefinition | null; note: string | null; unknown?: true }> {
    const id = requested === undefined ? number.workflow_id : requested;
    if (!id) return { id: null, definition: null, note: null };
    const workflow = await this.o.store.workflows.get(number.organization_id, id);
    if (!workflow) return { id, definition: null, note: `workflow ${id} not found`, unknown: true };
    if (!workflow.is_active) return { id, definition: null, note: `workflow ${id} is inactive; the assistant ran alone` };
    return { id, definition: workflow.definition, note: null };
  }

  private missingAdapters(a: EffectiveAssistant): string[] {
    const out: string[] = [];
    if (a.realtime) {
      if (!this.o.providers.realtime.has(a.llm_config.provider)) out.push(`llm_config.provider: no realtime adapter for "${a.llm_config.provider}"`);
      return out;
    }
    if (!this.o.providers.llm.has(a.llm_config.provider)) out.push(`llm_config.provider: no adapter for "${a.llm_config.provider}"`);
    if (a.stt_config && !this.o.providers.stt.has(a.stt_config.provider)) out.push(`stt_config.provider: no adapter for "${a.stt_config.provider}"`);
    if (a.tts_config && !this.o.providers.tts.has(a.tts_config.provider)) out.push(`tts_config.provider: no adapter for "${a.tts_config.provider}"`);
    return out;
  }

  private async rejectAtStart(record: CallRecord, errors: CallError[]): Promise<InboundOutcome> {
    const reason = endedReasonFor(errors[0] ?? callError(ErrorCodes.CALL_REJECTED, 'the call-start checks failed'));
    const now = new Date().toISOString();
    record.status = 'ended';
    record.ended_reason = reason;
    record.ended_at = now;
    record.errors = errors;
    this.log.info({ callId: record.id, endedReason: reason, errors }, 'call rejected before pickup');
    // (the store keeps no workflow snapshot of an ended call)
    await this.o.calls.create(record);
    await this.o.calls.save(record);
    // every call that got an id gets its status-update `ended` and its report, rejected ones too
    this.announceEnd(record, { ended_reason: reason, errors });
    return { kind: 'rejected', record };
  }

  /**
   * The callee of an outbound call answered: a one-time token for its media stream, or null when
   * the call is no longer waiting for an answer (ended through the API meanwhile).
   */
  async answerOutbound(callId: string, carrierIds: Record<string, string> = {}): Promise<string | null> {
    if (!this.accepting) return null;
    // the carrier's ids from its request, in case the answer comes before the dialler saved them
    const record = await transition(this.o.calls, callId, (r) => {
      if (r.status !== 'ringing') return false;
      r.transport_ids = { ...carrierIds, ...r.transport_ids };
      return true;
    });
    if (!record) return null;
    const streamToken = randomBytes(24).toString('base64url');
    await this.o.calls.putStreamToken(record.id, streamToken, STREAM_TOKEN_SECONDS);
    return streamToken;
  }

  // ------------------------------------------------------------------------------------------
  // media

  /**
   * The far end's media arrived for a call (with the one-time token its call start gave): the
   * call starts on the transport `open` makes for its record. Null for an unknown call, a wrong or
   * used token, or a call that is no longer ringing.
   */
  async connect(callId: string, token: string, open: (record: CallRecord) => CallTransport): Promise<ActiveCall | null> {
    if (!(await this.claimStream(callId, token))) return null;
    return this.connectClaimed(callId, open);
  }

  /**
   * Uses up a call's one-time stream token: true when it was the call's, unused and unexpired.
   * A transport that must answer before its socket opens (a web call's upgrade) claims first,
   * then `connectClaimed`.
   */
  async claimStream(callId: string, token: string): Promise<boolean> {
    return !!callId && !!token && (await this.o.calls.consumeStreamToken(callId, token));
  }

  /** `connect` once the token is used up: null when the call is no longer ringing. */
  async connectClaimed(callId: string, open: (record: CallRecord) => CallTransport): Promise<ActiveCall | null> {
    const now = new Date();
    // ringing → in-progress in one step: a carrier's callback or the API may end the call meanwhile
    const record = await transition(this.o.calls, callId, (r) => {
      if (r.status !== 'ringing') return false;
      r.status = 'in-progress';
      r.started_at = now.toISOString();
      r.worker_id = this.workerId;
      r.heartbeat_at = r.started_at;
      // {{variables}}: the values are fixed as the conversation starts; the snapshot keeps the templates
      r.variable_values = resolveVariables(
        builtInVariables({
          businessName: (r.assistant as { business_name?: string | null }).business_name ?? null,
          customer: r.customer,
          phoneNumber: r.phone_number,
          call: { id: r.id, type: r.type },
          now,
        }),
        r.variables,
      );
      return true;
    });
    if (!record) return null;
    const call = this.newLiveCall(record, open(record));
    void this.o.notifier.statusUpdate(record, 'in-progress');
    call.start().catch((err: unknown) => call.fail(err, 'start'));
    // answering-machine detection may have spoken before the media connected
    if (record.answered_by) call.answeredBy(record.answered_by);
    return call;
  }

  private newLiveCall(record: CallRecord, transport: CallTransport): ActiveCall {
    const deps: CallDeps = {
      providers: this.o.providers,
      notifier: this.o.notifier,
      store: this.o.calls,
      logger: this.o.logger,
      onTurnLatency: this.o.onTurnLatency,
      ...(this.o.media ? { media: this.o.media } : {}),
      pricing: async (organizationId) => pricingFor((await this.o.store.account.get(organizationId)).pricing),
      ...(this.o.listen ? { listen: this.o.listen } : {}),
      onEnded: (r) => {
        this.live.delete(r.id);
        this.o.onCallEnded?.(r);
      },
    };
    const call = createCall(record, transport, deps);
    this.live.set(record.id, call);
    return call;
  }

  // ------------------------------------------------------------------------------------------
  // liveness

  private async beat(): Promise<void> {
    try {
      // a live call saves its whole record: its copy must carry the heartbeat too, or each save
      // would turn the heartbeat back to the call's start and let another process take the call
      const now = new Date().toISOString();
      for (const call of this.live.values()) call.record.heartbeat_at = now;
      await this.o.calls.heartbeat(this.workerId, [...this.live.keys()]);
      await this.finalizeStale();
    } catch (err) {
      this.log.warn({ err }, 'heartbeat failed');
    }
  }

  /**
   * Calls that nobody looks after any more are ended here: `worker-lost` when their process
   * stopped saying it is alive; `customer-ended-call` when the media stream never connected
   * (the caller hung up while it rang, or Twilio could not reach the stream); a web call whose
   * browser never came within its token's 60 s, `customer-did-not-join`.
   */
  async finalizeStale(staleSeconds = this.o.staleSeconds ?? 20): Promise<number> {
    const staleMs = staleSeconds * 1000;
    let n = 0;
    for (const stale of await this.o.calls.findStale(staleMs)) {
      if (this.live.has(stale.id)) continue;
      const claimed = await this.o.calls.claim(stale.id, this.workerId, staleMs);
      if (!claimed) continue;
      const neverConnected = stale.status === 'ringing';
      const unjoined = neverConnected && stale.type === 'web_call';
      const reason = unjoined ? 'customer-did-not-join' : neverConnected ? 'customer-ended-call' : 'worker-lost';
      claimed.status = 'ended';
      claimed.ended_reason = reason;
      claimed.ended_at = new Date().toISOString();
      claimed.errors.push(
        unjoined
          ? callError(ErrorCodes.CALL_STREAM_LOST, `nobody joined the web call: its stream was not opened within its token's ${WEB_TOKEN_SECONDS} s`)
          : neverConnected
          ? callError(ErrorCodes.CALL_STREAM_LOST, 'the media stream never connected')
          : callError(ErrorCodes.CALL_WORKER_LOST, `the process running the call stopped (${stale.worker_id ?? 'unknown worker'})`),
      );
      if (!neverConnected) await keepLostRecording(this.o.media, claimed, this.log);
      await this.o.calls.save(claimed);
      await this.o.notifier.statusUpdate(claimed, 'ended', { ended_reason: reason });
      await this.o.notifier.endOfCallReport(claimed);
      // the report extracted the structured data: it is kept; with gdpr_mode the conversation is not
      forgetConversation(claimed);
      await this.o.calls.save(claimed).catch((err: unknown) => this.log.warn({ err, callId: claimed.id }, 'could not save a finalized call'));
      this.o.onCallEnded?.(claimed);
      this.log.warn({ callId: claimed.id, endedReason: reason }, 'finalized a call nobody looked after');
      n++;
    }
    return n;
  }

  /** Stops taking calls, lets live ones finish for `graceMs`, then ends the rest cleanly. */
  async shutdown(graceMs: number): Promise<void> {
    this.accepting = false;
    const deadline = Date.now() + graceMs;
    while (this.live.size > 0 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
    }
    // DECISIONS 7 has no ended_reason for a shutdown: the call ends as the assistant's doing, and
    // its errors (in the record and the end-of-call-report) say why
    const note = callError(ErrorCodes.CALL_SHUTDOWN, `the server shut down: the call was still live after the ${Number((graceMs / 1000).toFixed(1))} s shutdown grace period`);
    await Promise.all([...this.live.values()].map((c) => c.terminate('assistant-ended-call', note)));
    if (this.heartbeat) clearInterval(this.heartbeat);
    this.heartbeat = null;
    await this.sweeper.stop();
  }

  /** The sweep now (joined if one is under way): how many calls it ended or queued again. */
  sweepOrphans(): Promise<number> {
    return this.sweeper.runOnce();
  }

  /** Whether other processes share the call sessions (Redis): a call without one here may run elsewhere. */
  get sharesSessions(): boolean {
    return !!this.o.sharedSessions;
  }

  /** Whether a process said the call is alive less than a stale period ago. */
  beatsFor(callId: string): Promise<boolean> {
    return this.sweeper.beatsFor(callId);
  }

  /** Ends one call the log has as not over and no process has (`CallSweeper.finish`). */
  finishOrphan(logged: LoggedCall, ringingReason?: string): Promise<CallRecord | null> {
    return this.sweeper.finish(logged, ringingReason);
  }

  /** Queues the `status-update` `ended` of a call that never went live, then its report. */
  private announceEnd(record: CallRecord, extra: { ended_reason: string; errors?: CallError[] }): void {
    void this.o.notifier
      .statusUpdate(record, 'ended', extra)
      .then(() => this.o.notifier.endOfCallReport(record))
      .catch((err: unknown) => this.log.error({ err, callId: record.id }, 'could not queue the webhooks of a call that ended before it went live'));
  }

  /**
   * Ends a call that has no live conversation (queued, or ringing before its media connected):
   * the record, its `status-update` `ended` and its report. False when it had already ended.
   */
  async endUnanswered(callId: string, reason: string, errors: CallError[] = []): Promise<CallRecord | null> {
    // only from queued or ringing, in one step: the dialler, the callee answering and the API race here
    const record = await transition(this.o.calls, callId, (r) => {
      if (r.status !== 'queued' && r.status !== 'ringing') return false;
      r.status = 'ended';
      r.ended_reason = reason;
      r.ended_at = new Date().toISOString();
      r.errors.push(...errors);
      return true;
    });
    if (!record) return null;
    this.log.info({ callId, endedReason: reason, errors }, 'call ended before it was answered');
    this.announceEnd(record, { ended_reason: reason, ...(errors.length > 0 ? { errors } : {}) });
    this.o.onCallEnded?.(record);
    return record;
  }
}
