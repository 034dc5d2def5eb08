/**
 * One call of the Telnyx stand-in (./telnyx.ts): a call it dials (`POST /v2/calls`) to a
 * simulated callee, or one it places to Switchboard (`inbound`), from its first webhook to its
 * last. It sends the Call Control webhooks (`call.initiated`, `call.answered`, `call.hangup`,
 * `streaming.started`/`stopped`, answering-machine detection), each signed with the stand-in's
 * Ed25519 key as Telnyx signs them; it takes the commands Switchboard gives (answer, reject,
 * hangup, transfer, streaming_start) and opens the media stream (a `MediaLeg` on Telnyx's wire)
 * to the `stream_url` it is given. As a `LegCaller`, a test talks and listens on its current leg.
 */
import { randomBytes, randomUUID, type KeyObject } from 'node:crypto';
import { request } from 'undici';
import { telnyxSignature } from '../telephony/telnyx/signature.js';
import { LegCaller } from './leg-caller.js';
import { MediaLeg, type HeardLine, type LegEnd } from './media-leg.js';
import { tone, type ToneOptions } from './tone.js';

export const DEFAULT_GREETING = 'Hi, you have reached Sam. Please leave a message after the tone.';

/** Rings, then answers: a person on the line (the stream's leg is theirs to drive). */
export interface TelnyxPersonCallee {
  kind: 'person';
  /** How long it rings before the answer (default 300 ms). */
  ringMs?: number;
  /** How long answering-machine detection takes to decide (default 1,000 ms). */
  amdMs?: number;
  /** Runs once the media stream is up. */
  onAnswer?: (leg: MediaLeg, call: TelnyxStandInCall) => void | Promise<void>;
}

/** Rings, answers, plays its greeting and a beep once the stream is up, then records what it hears. */
export interface TelnyxVoicemailCallee {
  kind: 'voicemail';
  greeting?: string;
  beep?: boolean | ToneOptions;
  ringMs?: number;
  /** When detection decides `machine` (default 1,000 ms after the answer). */
  amdMs?: number;
  /** The machine hangs up this long after the beep (default 120,000 ms). */
  maxMessageMs?: number;
}

export type TelnyxCallee =
  | TelnyxPersonCallee
  | TelnyxVoicemailCallee
  /** `call.hangup` `user_busy` (SIP 486) after `ringMs` (default 100). */
  | { kind: 'busy'; ringMs?: number }
  /** Rings until the dial's `timeout_secs` (or `ringMs`, whichever is shorter): `call.hangup` `timeout`. */
  | { kind: 'no-answer'; ringMs?: number }
  /** `call.hangup` `unspecified` (SIP 503) after `ringMs` (default 50). */
  | { kind: 'failed'; ringMs?: number }
  /** Telnyx refuses the dial itself: a 422 with this error (default `10010`, a destination not allowed). */
  | { kind: 'reject'; code?: string; title?: string; detail?: string };

export type TelnyxCallState = 'parked' | 'ringing' | 'answered' | 'bridged' | 'hangup';

/** One webhook the call sent, with the HTTP status it got (null: none). */
export interface TelnyxWebhookRecord {
  eventType: string;
  url: string;
  body: string;
  payload: Record<string, unknown>;
  signature: string;
  timestamp: string;
  status: number | null;
  error?: string;
  at: number;
}

/** A command Switchboard gave the call (`POST /v2/calls/{id}/actions/<action>`). */
export interface TelnyxCommand {
  action: string;
  body: Record<string, unknown>;
  at: number;
}

/** What a call needs of the stand-in that holds it. */
export interface TelnyxCallContext {
  privateKey: KeyObject;
  signal: AbortSignal;
  recordAudio: boolean;
  /** From the dial to `call.initiated`. */
  queueMs: number;
  /** Telnyx's refusal of calls to `to` (a `reject` callee's), else null: a transfer there is refused too. */
  refusal(to: string): { code: string; title: string; detail: string } | null;
}

export class TelnyxStandInCall extends LegCaller {
  readonly callControlId = `v3:${randomBytes(24).toString('base64url')}`;
  readonly callLegId = randomUUID();
  readonly callSessionId = randomUUID();
  readonly createdAt = Date.now();
  state: TelnyxCallState;
  readonly webhooks: TelnyxWebhookRecord[] = [];
  readonly commands: TelnyxCommand[] = [];
  /** Where `transfer` sent the call. */
  readonly transferredTo: string[] = [];
  readonly errors: string[] = [];
  readonly legs: MediaLeg[] = [];
  /** `client_state`, as the dial or the last command gave it. */
  clientState: string | null;
  hangupCause: string | null = null;
  answeredAt: number | null = null;
  endedAt: number | null = null;
  /** The last stream URL a command gave. */
  streamUrl: string | null = null;
  /** A voicemail callee's greeting, beep and recording. */
  voicemail: { greetingEndedAt: number | null; beepEndedAt: number | null; recorded: HeardLine[] } | null = null;

  private readonly timers = new Set<NodeJS.Timeout>();
  private chain: Promise<unknown> = Promise.resolve();
  private readonly pending = new Set<Promise<unknown>>();
  private disposed = false;

  constructor(
    private readonly ctx: TelnyxCallContext,
    readonly direction: 'incoming' | 'outgoing',
    readonly to: string,
    readonly from: string,
    readonly connectionId: string,
    /** Where the call's webhooks go: the dial's `webhook_url`, else the connection's. */
    readonly webhookUrl: string | null,
    /** What the call was dialled with (outgoing). */
    readonly params: Record<string, unknown> = {},
    readonly callee: TelnyxCallee | null = null,
  ) {
    super();
    this.state = direction === 'incoming' ? 'parked' : 'ringing';
    this.clientState = typeof params.client_state === 'string' ? params.client_state : null;
  }

  /** The current stream's leg (the last once the call is over); null before any. */
  get leg(): MediaLeg | null {
    return this.legs[this.legs.length - 1] ?? null;
  }

  get final(): boolean {
    return this.state === 'hangup';
  }

  /** Every webhook's event type, in order. */
  get events(): string[] {
    return this.webhooks.map((w) => w.eventType);
  }

  // ------------------------------------------------------------------------------------------
  // webhooks

  /** What every webhook of the call says of it. */
  private payload(extra: Record<string, unknown> = {}): Record<string, unknown> {
    return {
      call_control_id: this.callControlId,
      call_leg_id: this.callLegId,
      call_session_id: this.callSessionId,
      client_state: this.clientState,
      connection_id: this.connectionId,
      from: this.from,
      to: this.to,
      start_time: new Date(this.createdAt).toISOString(),
      ...extra,
    };
  }

  /** Queues one signed webhook; webhooks of one call go out one at a time, in order. */
  webhook(eventType: string, extra: Record<string, unknown> = {}): Promise<TelnyxWebhookRecord | null> {
    const url = this.webhookUrl;
    if (!url) {
      this.errors.push(`${eventType}: no webhook URL (neither the dial's webhook_url nor the connection's)`);
      return Promise.resolve(null);
    }
    const payload = this.payload(extra);
    const sent = this.chain.then(() => this.send(eventType, url, payload));
    this.chain = sent;
    this.track(sent);
    return sent;
  }

  private async send(eventType: string, url: string, payload: Record<string, unknown>): Promise<TelnyxWebhookRecord> {
    const occurredAt = new Date().toISOString();
    const body = JSON.stringify({
      data: { event_type: eventType, id: randomUUID(), occurred_at: occurredAt, payload, record_type: 'event' },
      meta: { attempt: 1, delivered_to: url },
    });
    const timestamp = String(Math.floor(Date.now() / 1000));
    const signature = telnyxSignature(this.ctx.privateKey, timestamp, body);
    const record: TelnyxWebhookRecord = { eventType, url, body, payload, signature, timestamp, status: null, at: Date.now() };
    this.webhooks.push(record);
    try {
      const res = await request(url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'telnyx-signature-ed25519': signature,
          'telnyx-timestamp': timestamp,
          'user-agent': 'telnyx-webhooks',
        },
        body,
        signal: this.ctx.signal,
        headersTimeout: 15_000,
        bodyTimeout: 15_000,
      });
      record.status = res.statusCode;
      await res.body.text();
    } catch (err) {
      record.error = (err as Error).message;
    }
    return record;
  }

  // ------------------------------------------------------------------------------------------
  // a call to Switchboard

  /**
   * Places the call (an incoming one): `call.initiated` to the connection's webhook, then waits
   * for Switchboard's answer (resolving once its stream is up, with the call id in the stream URL)
   * or reject. A webhook answered with an error (a bad signature's 403) is `refused`.
   */
  async dial(timeoutMs = 10_000): Promise<{ kind: 'answered'; callId: string } | { kind: 'rejected'; cause: string } | { kind: 'refused'; status: number | null }> {
    const sent = await this.webhook('call.initiated', {
      direction: 'incoming',
      state: 'parked',
      caller_id_name: this.from,
      calling_party_type: 'pstn',
      connection_codecs: 'PCMU,PCMA,G722',
      offered_codecs: 'PCMU,PCMA',
    });
    if (!sent || sent.status === null || sent.status >= 300) return { kind: 'refused', status: sent?.status ?? null };
    await this.waitFor((c) => c.final || c.leg !== null, timeoutMs, "Switchboard's answer");
    if (this.leg) return { kind: 'answered', callId: this.streamUrl ? (new URL(this.streamUrl).searchParams.get('call_id') ?? '') : '' };
    return { kind: 'rejected', cause: this.hangupCause ?? '' };
  }

  // ------------------------------------------------------------------------------------------
  // a call the stand-in dialled

  /** `call.initiated`, then what the callee does. */
  start(): void {
    const c = this.callee ?? { kind: 'person' };
    this.after(this.ctx.queueMs, () => {
      void this.webhook('call.initiated', { direction: 'outgoing', state: 'bridging' });
      const timeout = this.timeoutMs();
      if (c.kind === 'failed') this.after(c.ringMs ?? 50, () => void this.hangUpWith('unspecified', '503', 'unknown'));
      else if (c.kind === 'busy') this.after(c.ringMs ?? 100, () => void this.hangUpWith('user_busy', '486', 'callee'));
      else if (c.kind === 'no-answer') this.after(Math.min(c.ringMs ?? timeout, timeout), () => void this.hangUpWith('timeout', '487', 'unknown'));
      else if (c.kind === 'person' || c.kind === 'voicemail') {
        const ring = c.ringMs ?? 300;
        if (ring > timeout) this.after(timeout, () => void this.hangUpWith('timeout', '487', 'unknown'));
        else this.after(ring, () => this.answerOutgoing(c));
      }
    });
  }

  private timeoutMs(): number {
    const t = Number(this.params.timeout_secs ?? 30);
    return (Number.isFinite(t) && t > 0 ? t : 30) * 1000;
  }

  private answerOutgoing(c: TelnyxPersonCallee | TelnyxVoicemailCallee): void {
    this.state = 'answered';
    this.answeredAt = Date.now();
    if (c.kind === 'voicemail') this.voicemail = { greetingEndedAt: null, beepEndedAt: null, recorded: [] };
    void this.webhook('call.answered', { state: 'answered' });
    const amd = this.params.answering_machine_detection;
    if (typeof amd === 'string' && amd !== 'disabled') {
      this.after(c.amdMs ?? 1000, () => void this.webhook('call.machine.detection.ended', { result: c.kind === 'person' ? 'human' : 'machine' }));
    }
    // streaming asked for at the dial: the stream opens with the answer
    if (typeof this.params.stream_url === 'string') this.openStream(this.params);
  }

  // ------------------------------------------------------------------------------------------
  // commands

  /** A Call Control command: null when taken, else the error Telnyx answers (422). */
  command(action: string, body: Record<string, unknown>): { code: string; title: string; detail: string } | null {
    this.commands.push({ action, body, at: Date.now() });
    if (this.final) return { code: '90018', title: 'Call has already ended', detail: 'This call is no longer active and can not receive commands.' };
    if (typeof body.client_state === 'string') this.clientState = body.client_state;
    const notNow = (what: string) => ({ code: '90034', title: 'Invalid call state', detail: `The call cannot be ${what} in state ${this.state}.` });
    switch (action) {
      case 'answer':
        if (this.direction !== 'incoming' || this.state !== 'parked') return notNow('answered');
        this.state = 'answered';
        this.answeredAt = Date.now();
        void this.webhook('call.answered', { state: 'answered' });
        if (typeof body.stream_url === 'string') this.openStream(body);
        return null;
      case 'reject':
        if (this.direction !== 'incoming' || this.state !== 'parked') return notNow('rejected');
        void this.hangUpWith(body.cause === 'USER_BUSY' ? 'user_busy' : 'call_rejected', body.cause === 'USER_BUSY' ? '486' : '603', 'callee');
        return null;
      case 'streaming_start':
        if (this.state !== 'answered') return notNow('streamed');
        if (typeof body.stream_url !== 'string') return { code: '90061', title: 'Invalid parameter', detail: 'stream_url is required' };
        this.openStream(body);
        return null;
      case 'transfer': {
        if (this.state !== 'answered') return notNow('transferred');
        if (typeof body.to !== 'string' || body.to === '') return { code: '90061', title: 'Invalid parameter', detail: 'to is required' };
        const refused = this.ctx.refusal(body.to);
        if (refused) return refused;
        this.transferredTo.push(body.to);
        this.state = 'bridged';
        // the party is with the destination now: our stream of the call ends
        const leg = this.leg;
        if (leg?.open) this.track(leg.stop().catch(() => undefined));
        return null;
      }
      case 'hangup': {
        const unanswered = this.direction === 'outgoing' && this.state === 'ringing';
        void this.hangUpWith(unanswered ? 'originator_cancel' : 'normal_clearing', unanswered ? '487' : '200', this.direction === 'outgoing' ? 'caller' : 'callee');
        return null;
      }
      default:
        return { code: '10005', title: 'Resource not found', detail: `The action ${action} is not simulated.` };
    }
  }

  // ------------------------------------------------------------------------------------------
  // the media stream

  /** Opens the stream to the command's `stream_url`, the party on it. */
  private openStream(params: Record<string, unknown>): void {
    const url = String(params.stream_url);
    this.streamUrl = url;
    const leg = new MediaLeg({
      wire: 'telnyx',
      accountSid: '',
      callSid: this.callControlId,
      recordAudio: this.ctx.recordAudio,
      telnyx: {
        callControlId: this.callControlId,
        callSessionId: this.callSessionId,
        from: this.from,
        to: this.to,
        clientState: this.clientState,
        bothTracks: params.stream_track === 'both_tracks',
      },
    });
    this.track(
      (async () => {
        try {
          await leg.connect(url, {});
        } catch (err) {
          this.errors.push(`stream ${url}: ${(err as Error).message}`);
          await leg.close();
          void this.webhook('streaming.failed', { failure_reason: (err as Error).message, stream_params: { stream_url: url } });
          return;
        }
        this.legs.push(leg);
        void this.webhook('streaming.started', { stream_url: url });
        leg.onEnded((by) => this.streamEnded(leg, by));
        if (this.final) return void leg.stop().catch(() => undefined);
        this.startParty(leg);
      })(),
    );
  }

  private streamEnded(leg: MediaLeg, by: LegEnd): void {
    void leg.close();
    if (by === 'local') return;
    void this.webhook('streaming.stopped', { stream_url: '' });
    // the party hung up: the call is over
    if (by === 'callee' && !this.final) void this.hangUpWith('normal_clearing', '200', this.direction === 'outgoing' ? 'callee' : 'caller');
  }

  private startParty(leg: MediaLeg): void {
    const c = this.callee;
    if (c?.kind === 'person' && c.onAnswer) {
      const script = c.onAnswer;
      this.guard((async () => script(leg, this))());
    } else if (c?.kind === 'voicemail') this.guard(this.runVoicemail(leg, c));
  }

  /** The machine: greeting, beep (detection's end of greeting), then it records until the call ends. */
  private async runVoicemail(leg: MediaLeg, c: TelnyxVoicemailCallee): Promise<void> {
    const vm = this.voicemail!;
    await leg.say(c.greeting ?? DEFAULT_GREETING);
    vm.greetingEndedAt = Date.now();
    if (leg.endedBy) return;
    if (c.beep !== false) await leg.play(tone(c.beep === true || c.beep === undefined ? {} : c.beep), '(beep)');
    vm.beepEndedAt = Date.now();
    if (leg.endedBy) return;
    await leg.addEar((line) => vm.recorded.push(line));
    const amd = this.params.answering_machine_detection;
    if (amd === 'greeting_end' || amd === 'detect_beep' || amd === 'premium') {
      void this.webhook('call.machine.greeting.ended', { result: c.beep === false ? 'ended' : 'beep_detected' });
    }
    this.after(c.maxMessageMs ?? 120_000, () => void leg.hangUp().catch(() => undefined));
  }

  // ------------------------------------------------------------------------------------------
  // the end

  /** The far party hangs up (on the stream when there is one). */
  override async hangUp(): Promise<void> {
    const leg = this.leg;
    if (leg?.open) await leg.hangUp();
    else if (!this.final) await this.hangUpWith('normal_clearing', '200', this.direction === 'outgoing' ? 'callee' : 'caller');
  }

  /** Ends the call: `stop` on its stream, then `call.hangup`. */
  async hangUpWith(cause: string, sipCause: string, source: 'caller' | 'callee' | 'unknown'): Promise<void> {
    if (this.final) return;
    this.state = 'hangup';
    this.hangupCause = cause;
    this.endedAt = Date.now();
    this.clearTimers();
    const leg = this.leg;
    if (leg?.open) await leg.stop().catch(() => undefined);
    await this.webhook('call.hangup', { state: 'hangup', hangup_cause: cause, hangup_source: source, sip_hangup_cause: sipCause });
  }

  /** Resolves once `test(call)` holds; rejects after `timeoutMs` naming what it waited for. */
  async waitFor(test: (call: TelnyxStandInCall) => boolean, timeoutMs = 10_000, what = 'a condition'): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!test(this)) {
      if (Date.now() > deadline) throw new Error(`Telnyx call to ${this.to}: timed out waiting for ${what} (state ${this.state}, events ${this.events.join(', ')})`);
      await new Promise((r) => setTimeout(r, 10));
    }
  }

  /** Waits until the stream is up, and gives its leg. */
  async waitForLeg(timeoutMs = 10_000): Promise<MediaLeg> {
    await this.waitFor((c) => c.leg !== null || c.final, timeoutMs, 'the media stream');
    if (!this.leg) throw new Error(`the call ended (${this.hangupCause}) before a stream opened; errors: ${this.errors.join('; ') || 'none'}`);
    return this.leg;
  }

  /** Waits until the call is over and its last webhook had its answer. */
  override async ended(timeoutMs = 10_000): Promise<void> {
    await this.waitFor((c) => c.final, timeoutMs, 'the end of the call');
    await this.chain.catch(() => undefined);
  }

  private after(ms: number, fn: () => void): void {
    if (this.disposed || this.final) return;
    const t = setTimeout(() => {
      this.timers.delete(t);
      fn();
    }, ms);
    this.timers.add(t);
  }

  private clearTimers(): void {
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
  }

  private track(p: Promise<unknown>): void {
    const settled = p.then(
      () => undefined,
      () => undefined,
    );
    this.pending.add(settled);
    void settled.then(() => this.pending.delete(settled));
  }

  /** Runs a flow in the background; what it throws is kept in `errors`, never unhandled. */
  private guard(p: Promise<unknown>): void {
    this.track(
      p.catch((err: unknown) => {
        if (!this.disposed) this.errors.push((err as Error)?.message ?? String(err));
      }),
    );
  }

  /** Stops everything the call holds (timers, streams, requests in flight) without webhooks. */
  async dispose(): Promise<void> {
    this.disposed = true;
    this.clearTimers();
    await Promise.all(this.legs.map((l) => l.close()));
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([Promise.all([...this.pending]), new Promise((r) => (timer = setTimeout(r, 2_000)))]);
    clearTimeout(timer);
  }
}
