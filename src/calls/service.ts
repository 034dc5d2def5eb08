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
  /** When a media stream counts as gone (tests shorten these). */
  mediaLiveness?: Partial<MediaLiveness>;
  onTurnLatency?(latency: TurnLatency): void;
  /** A voice webhook was refused as a replay of a call already taken. */
  onReplay?(): void;
}

export type VoiceWebhookResult =
  | { status: 200; twiml: string; callId: string }
  | { status: 400 | 403 | 404; message: string };

const STREAM_PATH = '/telephony/twilio/media';
const HEARTBEAT_MS = 5_000;
/**
 * How long one `AccountSid` + `CallSid` stays taken: a replay of a signed voice webhook within it
 * makes no call (Twilio's signature has no timestamp). As long as call sessions are kept.
 */
const CALL_SID_CLAIM_SECONDS = 24 * 3600;

/**
 * When the far end of a media stream is gone. Twilio sends a media frame every 20 ms, silence
 * included, and answers WebSocket pings; a mark is echoed once the audio before it has played,
 * which the pacer sends at most a few frames ahead of real time.
 */
export interface MediaLiveness {
  /** No media frame for this long: the stream is gone. */
  idleMs: number;
  /** A ping goes out this often; one not answered by the next means the stream is gone. */
  pingMs: number;
  /** A mark not echoed this long after it was sent counts as played (the far end may never echo it). */
  markGraceMs: number;
  /** How often every stream is checked (one timer for the process). */
  checkMs: number;
}

export const DEFAULT_MEDIA_LIVENESS: MediaLiveness = { idleMs: 5_000, pingMs: 10_000, markGraceMs: 3_000, checkMs: 500 };

/** One open media stream, as the liveness check sees it. */
interface StreamWatch {
  check(now: number): void;
}

export class CallService {
  readonly workerId = `w-${randomUUID()}`;
  private readonly live = new Map<string, ActiveCall>();
  private accepting = true;
  private heartbeat: NodeJS.Timeout | null = null;
  private readonly log: Logger;
  private readonly liveness: MediaLiveness;
  private readonly streams = new Set<StreamWatch>();
  private livenessTimer: NodeJS.Timeout | null = null;

  constructor(private readonly o: CallServiceOptions) {
    this.log = o.logger.child({ component: 'calls' });
    this.liveness = { ...DEFAULT_MEDIA_LIVENESS, ...o.mediaLiveness };
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
    const callSid = str('CallSid');
    const accountSid = str('AccountSid');
    if (!callSid || !accountSid) return { status: 400, message: 'CallSid and AccountSid are required' };

    const record = newCallRecord({
      organization_id: number.organization_id,
      number_id: number.id,
      phone_number: { number: number.number, name: number.name },
      customer: { number: str('From') },
      twilio: { call_sid: callSid, account_sid: accountSid },
    });
    const log = this.log.child({ callId: record.id });
    // one call per Twilio call: a replayed (or retried) signed request creates and sends nothing
    const earlier =
      (await this.o.calls.claimTransportCall(`twilio:${accountSid}:${callSid}`, record.id, CALL_SID_CLAIM_SECONDS)) ??
      // after the sessions are gone (a restart, 24 h) the call log still knows the call
      (await this.o.store.calls.findByTransportCall('twilio', { call_sid: callSid, account_sid: accountSid }));
    if (earlier) {
      log.warn({ numberId: number.id, earlierCallId: earlier }, 'voice webhook replayed: the CallSid already has a call; refused');
      this.o.onReplay?.();
      return { status: 200, twiml: rejectTwiml(), callId: earlier };
    }

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
    // a refused call runs nothing: it keeps no workflow snapshot (which can be large)
    const { definition: _definition, ...kept } = record;
    const stored: CallRecord = { ...kept, definition: null };
    await this.o.calls.create(stored);
    await this.o.calls.save(stored);
    // every call that got an id gets its status-update `ended` and its report, rejected ones too
    void this.o.notifier
      .statusUpdate(record, 'ended', { ended_reason: reason, errors })
      .then(() => this.o.notifier.endOfCallReport(record))
      .catch((err: unknown) => this.log.error({ err, callId: record.id }, 'could not queue the webhooks of a rejected call'));
    return { status: 200, twiml: rejectTwiml(), callId: record.id };
  }

  // ------------------------------------------------------------------------------------------
  // media

  /** A Twilio media WebSocket: accepted only with the one-time token of its call. */
  attachMedia(ws: WebSocket, remote: string): void {
    let call: ActiveCall | null = null;
    let streamSid = '';
    let starting = false;
    let lastMediaAt = performance.now();
    let lastPingAt = performance.now();
    let pongDue = false;
    /** Marks sent and not yet echoed, oldest first. */
    const pendingMarks: Array<{ name: string; sentAt: number }> = [];
    let marksAssumed = false;
    const refuse = (why: string) => {
      this.log.warn({ remote, why }, 'media stream refused');
      ws.close(1008, 'refused');
    };
    const startTimer = setTimeout(() => {
      if (!call) refuse('no start message within 10 s');
    }, 10_000);
    /** The call's own code runs here: what it throws ends that call, never the process. */
    const toCall = (what: string, fn: (c: ActiveCall) => void) => {
      const c = call;
      if (!c) return;
      try {
        fn(c);
      } catch (err) {
        c.fail(err, what);
      }
    };
    const gone = (why: string) => {
      const c = call;
      stopWatching();
      ws.terminate();
      if (!c || c.isEnded()) return;
      this.log.warn({ callId: c.record.id, why }, 'media stream gone; ending the call');
      void c.terminate('customer-ended-call', `the media stream went away: ${why}`);
    };
    const watch: StreamWatch = {
      check: (now) => {
        if (!call || call.isEnded()) return;
        if (now - lastMediaAt > this.liveness.idleMs) {
          return gone(`no media from the far end for ${Math.round((now - lastMediaAt) / 1000)} s`);
        }
        if (now - lastPingAt >= this.liveness.pingMs) {
          if (pongDue) return gone('the far end stopped answering WebSocket pings');
          pongDue = true;
          lastPingAt = now;
          ws.ping();
        }
        // playback progress must not hang on an echo that never comes (silence checks wait for it)
        while (pendingMarks.length > 0 && now - pendingMarks[0]!.sentAt > this.liveness.markGraceMs) {
          const { name } = pendingMarks.shift()!;
          if (!marksAssumed) {
            marksAssumed = true;
            this.log.warn({ callId: call.record.id }, 'the far end does not echo marks; audio counts as played once its time has passed');
          }
          toCall('mark', (c) => c.mark(name));
        }
      },
    };
    const stopWatching = () => {
      clearTimeout(startTimer);
      this.streams.delete(watch);
    };
    ws.on('pong', () => {
      pongDue = false;
    });

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
            sendMark: (name) => {
              if (ws.readyState !== ws.OPEN) return;
              ws.send(markMessage(streamSid, name));
              pendingMarks.push({ name, sentAt: performance.now() });
            },
            sendClear: () => ws.readyState === ws.OPEN && ws.send(clearMessage(streamSid)),
            close: () => {
              stopWatching();
              if (ws.readyState === ws.OPEN) ws.close(1000, 'call ended');
            },
          }).then(
            (c) => {
              if (!c) return refuse('unknown call or wrong token');
              call = c;
              lastMediaAt = performance.now();
              lastPingAt = lastMediaAt;
              if (ws.readyState !== ws.OPEN) return toCall('hang-up', (x) => x.callerHungUp());
              this.streams.add(watch);
              this.watchStreams();
            },
            (err: Error) => {
              this.log.error({ err }, 'call could not start');
              refuse('start failed');
            },
          );
          return;
        }
        case 'media':
          lastMediaAt = performance.now();
          toCall('caller audio', (c) => c.audio(Buffer.from(m.media.payload, 'base64')));
          return;
        case 'mark': {
          const i = pendingMarks.findIndex((p) => p.name === m.mark.name);
          if (i < 0) return; // not ours, or already counted as played
          pendingMarks.splice(i, 1);
          toCall('mark', (c) => c.mark(m.mark.name));
          return;
        }
        case 'dtmf':
          toCall('key press', (c) => c.dtmf(m.dtmf.digit));
          return;
        case 'stop':
          toCall('hang-up', (c) => c.callerHungUp());
          return;
      }
    });
    ws.on('close', () => {
      stopWatching();
      toCall('hang-up', (c) => c.callerHungUp());
    });
    ws.on('error', () => undefined);
  }

  /** One timer for the process checks every open stream's liveness. */
  private watchStreams(): void {
    if (this.livenessTimer) return;
    this.livenessTimer = setInterval(() => {
      const now = performance.now();
      for (const stream of this.streams) stream.check(now);
      if (this.streams.size === 0 && this.livenessTimer) {
        clearInterval(this.livenessTimer);
        this.livenessTimer = null;
      }
    }, this.liveness.checkMs);
    this.livenessTimer.unref();
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
    call.start().catch((err: unknown) => call.fail(err, 'start'));
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
      // the report has its copy: an ended call keeps no workflow snapshot (it can be large)
      claimed.definition = null;
      await this.o.calls.save(claimed);
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
    if (this.livenessTimer) clearInterval(this.livenessTimer);
    this.livenessTimer = null;
  }
}
