/**
 * The calls of this process: call start (voice webhook → snapshot → checks → TwiML), the media
 * streams that carry them, heartbeats, finalizing calls whose process died, graceful shutdown.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { WebSocket } from 'ws';
import { effectiveAssistant, type AssistantFields, type EffectiveAssistant } from '../../engine/assistant.js';
import { callStartChecks } from '../../engine/checks.js';
import type { WorkflowDefinition } from '../../engine/schema.js';
import type { Store } from '../store/index.js';
import type { PhoneNumber } from '../store/numbers.js';
import type { AccountSettings } from '../store/account.js';
import type { Providers } from '../providers/types.js';
import { TwilioRestError, type TwilioRest } from '../telephony/twilio/rest.js';
import { verifyTwilioSignature, type FormParams } from '../telephony/twilio/signature.js';
import { connectStreamTwiml, rejectTwiml } from '../telephony/twilio/twiml.js';
import {
  clearMessage,
  markMessage,
  mediaMessage,
  parseTwilioMessage,
} from '../telephony/twilio/media-protocol.js';
import { LiveCall, type LiveCallDeps, type MediaChannel } from './live-call.js';
import type { ActiveCall } from './active-call.js';
import { RealtimeCall } from './realtime-call.js';
import type { CallNotifier } from './notifier.js';
import { newCallRecord, type CallRecord, type CallStore } from './store.js';
import type { TurnLatency } from './latency.js';

/**
 * How the assistant for a number without one is found (the `assistant-request` exchange).
 * `workflow_id`: absent means the number's own workflow, `null` means none (the assistant alone).
 */
export type AssistantResolution =
  | { kind: 'assistant'; assistant_id: string | null; fields: AssistantFields; workflow_id?: string | null }
  | { kind: 'number-settings'; workflow_id?: string | null }
  | { kind: 'rejected'; reason: 'assistant-request-failed' | 'rejected-at-start'; errors: string[] };

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
  twilio: TwilioRest;
  logger: Logger;
  publicUrl: string;
  /** Seconds without a heartbeat after which another process finalizes a call. */
  staleSeconds?: number;
  onTurnLatency?(latency: TurnLatency): void;
}

export type VoiceWebhookResult =
  | { status: 200; twiml: string; callId: string }
  | { status: 403 | 404; message: string };

const STREAM_PATH = '/telephony/twilio/media';
const HEARTBEAT_MS = 5_000;

export class CallService {
  readonly workerId = `w-${randomUUID()}`;
  private readonly live = new Map<string, ActiveCall>();
  private accepting = true;
  private heartbeat: NodeJS.Timeout | null = null;
  private readonly log: Logger;

  constructor(private readonly o: CallServiceOptions) {
    this.log = o.logger.child({ component: 'calls' });
  }

  liveCount(): number {
    return this.live.size;
  }

  start(): void {
    if (this.heartbeat) return;
    this.heartbeat = setInterval(() => void this.beat(), HEARTBEAT_MS);
    this.heartbeat.unref();
  }

  // ------------------------------------------------------------------------------------------
  // call start

  /** `POST /telephony/twilio/voice`: verified, then answered with TwiML. */
  async inboundVoice(url: string, params: FormParams, signature: string | undefined): Promise<VoiceWebhookResult> {
    const str = (name: string) => (typeof params[name] === 'string' ? (params[name] as string) : '');
    const to = str('To');
    const number = await this.o.store.numbers.findByNumber(to);
    if (!number) return { status: 404, message: `no number ${to || '(none)'} is registered` };
    const account = await this.o.store.account.get(number.organization_id);
    const token = account.twilio?.auth_token;
    if (!token || !verifyTwilioSignature(token, url, params, signature)) {
      this.log.warn({ numberId: number.id, hasCredentials: !!token }, 'voice webhook refused: bad or missing X-Twilio-Signature');
      return { status: 403, message: 'invalid signature' };
    }
    if (!this.accepting) {
      return { status: 200, twiml: rejectTwiml('busy'), callId: '' };
    }

    const record = newCallRecord({
      organization_id: number.organization_id,
      number_id: number.id,
      phone_number: { number: number.number, name: number.name },
      customer: { number: str('From') },
      twilio: { call_sid: str('CallSid'), account_sid: str('AccountSid') },
    });
    const log = this.log.child({ callId: record.id });

    const resolved = await this.resolveAssistant(record, number, account);
    if ('rejected' in resolved) return this.rejectAtStart(record, resolved.reason, resolved.errors);
    record.assistant_id = resolved.assistantId;
    const assistant = effectiveAssistant(resolved.fields);
    record.assistant = assistant as unknown as Record<string, unknown>;
    const workflow = await this.workflowFor(number, resolved.workflowId);
    if (workflow.unknown) {
      // only an assistant-request answer can name a workflow that is not there (numbers have a foreign key)
      return this.rejectAtStart(record, 'assistant-request-failed', [`workflow_id: no workflow with id "${workflow.id}"`]);
    }
    const { definition, note } = workflow;
    record.workflow_id = definition ? workflow.id : null;
    record.workflow_note = note;
    record.definition = definition as unknown as Record<string, unknown> | null;

    const problems = callStartChecks(resolved.fields, definition);
    if (problems.length > 0) {
      return this.rejectAtStart(record, 'rejected-at-start', problems.map((p) => `${p.code}: ${p.message}`));
    }
    const missing = this.missingAdapters(assistant);
    if (missing.length > 0) return this.rejectAtStart(record, 'rejected-at-start', missing);

    const streamToken = randomBytes(24).toString('base64url');
    await this.o.calls.create(record);
    await this.o.calls.putStreamToken(record.id, streamToken, 120);
    void this.o.notifier.statusUpdate(record, 'ringing');
    log.info({ numberId: number.id, assistantId: record.assistant_id, workflowId: record.workflow_id }, 'call accepted');
    const streamUrl = `${this.o.publicUrl.replace(/^http/, 'ws').replace(/\/$/, '')}${STREAM_PATH}`;
    return {
      status: 200,
      twiml: connectStreamTwiml(streamUrl, { call_id: record.id, token: streamToken }),
      callId: record.id,
    };
  }

  private async resolveAssistant(
    record: CallRecord,
    number: PhoneNumber & { organization_id: string },
    account: AccountSettings,
  ): Promise<
    | { assistantId: string | null; fields: AssistantFields; workflowId: string | null | undefined }
    | { rejected: true; reason: string; errors: string[] }
  > {
    const fromNumber = async (workflowId: string | null | undefined) => {
      if (!number.assistant_id) {
        return { rejected: true as const, reason: 'assistant-request-failed', errors: ['the number has no assistant and the assistant-request answer named none'] };
      }
      const stored = await this.o.store.assistants.get(number.organization_id, number.assistant_id);
      if (!stored) return { rejected: true as const, reason: 'rejected-at-start', errors: ['the number\'s assistant no longer exists'] };
      return { assistantId: stored.id, fields: stored.fields, workflowId };
    };
    if (number.assistant_id) return fromNumber(undefined);
    const outcome = await this.o.resolver.resolve({ call: record, number, account, organizationId: number.organization_id });
    switch (outcome.kind) {
      case 'rejected':
        return { rejected: true, reason: outcome.reason, errors: outcome.errors };
      case 'number-settings':
        return fromNumber(outcome.workflow_id);
      case 'assistant': {
        if (outcome.assistant_id) {
          const stored = await this.o.store.assistants.get(number.organization_id, outcome.assistant_id);
          if (!stored) {
            return { rejected: true, reason: 'assistant-request-failed', errors: [`assistant_id: no assistant with id "${outcome.assistant_id}"`] };
          }
          return { assistantId: stored.id, fields: stored.fields, workflowId: outcome.workflow_id };
        }
        return { assistantId: null, fields: outcome.fields, workflowId: outcome.workflow_id };
      }
    }
  }

  /** `requested`: from an assistant-request answer; `undefined` means the number's own workflow. */
  private async workflowFor(
    number: PhoneNumber & { organization_id: string },
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

  private async rejectAtStart(record: CallRecord, reason: string, errors: string[]): Promise<VoiceWebhookResult> {
    const now = new Date().toISOString();
    record.status = 'ended';
    record.ended_reason = reason;
    record.ended_at = now;
    record.errors = errors;
    this.log.info({ callId: record.id, endedReason: reason, errors }, 'call rejected before pickup');
    await this.o.calls.create(record);
    await this.o.calls.save(record);
    // every call that got an id gets its status-update `ended` and its report, rejected ones too
    void this.o.notifier
      .statusUpdate(record, 'ended', { ended_reason: reason, errors })
      .then(() => this.o.notifier.endOfCallReport(record));
    return { status: 200, twiml: rejectTwiml(), callId: record.id };
  }

  // ------------------------------------------------------------------------------------------
  // media

  /** A Twilio media WebSocket: accepted only with the one-time token of its call. */
  attachMedia(ws: WebSocket, remote: string): void {
    let call: ActiveCall | null = null;
    let streamSid = '';
    let starting = false;
    const refuse = (why: string) => {
      this.log.warn({ remote, why }, 'media stream refused');
      ws.close(1008, 'refused');
    };
    const startTimer = setTimeout(() => {
      if (!call) refuse('no start message within 10 s');
    }, 10_000);

    ws.on('message', (data, isBinary) => {
      if (isBinary) return refuse('binary frame');
      const parsed = parseTwilioMessage(data as Buffer);
      if (!parsed.ok) {
        if (!call) return refuse(parsed.reason);
        this.log.debug({ reason: parsed.reason }, 'media message ignored');
        return;
      }
      const m = parsed.message;
      switch (m.event) {
        case 'connected':
          return;
        case 'start': {
          if (starting || call) return;
          starting = true;
          clearTimeout(startTimer);
          streamSid = m.streamSid;
          const params = m.start.customParameters ?? {};
          void this.beginCall(params.call_id ?? '', params.token ?? '', {
            sendFrame: (frame) => ws.readyState === ws.OPEN && ws.send(mediaMessage(streamSid, frame)),
            sendMark: (name) => ws.readyState === ws.OPEN && ws.send(markMessage(streamSid, name)),
            sendClear: () => ws.readyState === ws.OPEN && ws.send(clearMessage(streamSid)),
            close: () => {
              if (ws.readyState === ws.OPEN) ws.close(1000, 'call ended');
            },
          }).then(
            (c) => {
              if (!c) return refuse('unknown call or wrong token');
              call = c;
              if (ws.readyState !== ws.OPEN) c.callerHungUp();
            },
            (err: Error) => {
              this.log.error({ err }, 'call could not start');
              refuse('start failed');
            },
          );
          return;
        }
        case 'media':
          if (call) call.audio(Buffer.from(m.media.payload, 'base64'));
          return;
        case 'mark':
          call?.mark(m.mark.name);
          return;
        case 'dtmf':
          call?.dtmf(m.dtmf.digit);
          return;
        case 'stop':
          call?.callerHungUp();
          return;
      }
    });
    ws.on('close', () => {
      clearTimeout(startTimer);
      call?.callerHungUp();
    });
    ws.on('error', () => undefined);
  }

  private async beginCall(callId: string, token: string, channel: MediaChannel) {
    if (!callId || !token || !(await this.o.calls.consumeStreamToken(callId, token))) return null;
    const record = await this.o.calls.get(callId);
    if (!record || record.status !== 'ringing') return null;
    record.status = 'in-progress';
    record.started_at = new Date().toISOString();
    record.worker_id = this.workerId;
    record.heartbeat_at = record.started_at;
    await this.o.calls.save(record);
    const call = this.newLiveCall(record, channel);
    void this.o.notifier.statusUpdate(record, 'in-progress');
    void call.start();
    return call;
  }

  private newLiveCall(record: CallRecord, channel: MediaChannel): ActiveCall {
    const deps: LiveCallDeps = {
      providers: this.o.providers,
      notifier: this.o.notifier,
      store: this.o.calls,
      logger: this.o.logger,
      telephony: {
        hangUp: (c) => this.withCredentials(c, (creds) => this.o.twilio.hangUp(creds, c.twilio.call_sid)),
        transfer: (c, destination) =>
          this.withCredentials(c, (creds) => this.o.twilio.transfer(creds, c.twilio.call_sid, destination, c.phone_number.number)),
      },
      onTurnLatency: this.o.onTurnLatency,
      onEnded: (r) => this.live.delete(r.id),
    };
    // a realtime assistant speaks through one speech-to-speech model instead of the pipeline
    const call: ActiveCall = (record.assistant as unknown as EffectiveAssistant).realtime
      ? new RealtimeCall(record, channel, deps)
      : new LiveCall(record, channel, deps);
    this.live.set(record.id, call);
    return call;
  }

  private async withCredentials(call: CallRecord, fn: (creds: { account_sid: string; auth_token: string }) => Promise<void>) {
    const account = await this.o.store.account.get(call.organization_id);
    // credentials removed mid-call: a transfer must fail loudly rather than end as "transferred"
    if (!account.twilio) throw new TwilioRestError('the organization has no Twilio credentials');
    if (!call.twilio.call_sid) throw new TwilioRestError('the call has no Twilio CallSid');
    await fn(account.twilio);
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
   * (the caller hung up while it rang, or Twilio could not reach the stream).
   */
  async finalizeStale(staleSeconds = this.o.staleSeconds ?? 20): Promise<number> {
    const staleMs = staleSeconds * 1000;
    let n = 0;
    for (const stale of await this.o.calls.findStale(staleMs)) {
      if (this.live.has(stale.id)) continue;
      const claimed = await this.o.calls.claim(stale.id, this.workerId, staleMs);
      if (!claimed) continue;
      const neverConnected = stale.status === 'ringing';
      const reason = neverConnected ? 'customer-ended-call' : 'worker-lost';
      claimed.status = 'ended';
      claimed.ended_reason = reason;
      claimed.ended_at = new Date().toISOString();
      claimed.errors.push(
        neverConnected
          ? 'the media stream never connected'
          : `the process running the call stopped (${stale.worker_id ?? 'unknown worker'})`,
      );
      await this.o.calls.save(claimed);
      await this.o.notifier.statusUpdate(claimed, 'ended', { ended_reason: reason });
      await this.o.notifier.endOfCallReport(claimed);
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
    const note = `the server shut down: the call was still live after the ${Number((graceMs / 1000).toFixed(1))} s shutdown grace period`;
    await Promise.all([...this.live.values()].map((c) => c.terminate('assistant-ended-call', note)));
    if (this.heartbeat) clearInterval(this.heartbeat);
    this.heartbeat = null;
  }
}
