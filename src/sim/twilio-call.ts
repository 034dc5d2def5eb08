/**
 * One call of the Twilio stand-in (./twilio.ts), from the REST create to its end: the status
 * callbacks, the callee's behaviour (a person, a voicemail, busy, no answer, failed), the TwiML
 * it fetches and follows (`<Connect><Stream>` opens a Media Streams socket with a `MediaLeg` on
 * it), answering-machine detection, and the REST updates that cancel, hang up or redirect it.
 * Every request it makes is signed with `X-Twilio-Signature` as Twilio signs it.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { request } from 'undici';
import { twilioSignature } from '../telephony/twilio/signature.js';
import { synthesizeSandboxSpeech } from '../providers/sandbox/tts.js';
import { MediaLeg, type HeardLine, type LegEnd } from './media-leg.js';
import { parseTwiml, type TwimlNode } from './twiml.js';
import { tone } from './tone.js';
import {
  API_VERSION,
  DEFAULT_GREETING,
  TERMINAL,
  type CalleeBehaviour,
  type CallbackRecord,
  type CallbackStatus,
  type CallContext,
  type CallStatus,
  type PersonCallee,
  type TerminalStatus,
  type VoicemailCallee,
  type VoicemailRecord,
} from './twilio-callee.js';

export * from './twilio-callee.js';

const rfc2822 = (ms: number) => new Date(ms).toUTCString().replace('GMT', '+0000');

const COUNTRIES: Array<[string, string]> = [['+1', 'US'], ['+44', 'GB'], ['+33', 'FR'], ['+49', 'DE'], ['+61', 'AU'], ['+34', 'ES']];
const countryOf = (n: string) => COUNTRIES.find(([p]) => n.startsWith(p))?.[1] ?? '';

/** `+14155550123` → `(415) 555-0123`, as Twilio formats North American numbers. */
const formatted = (n: string) => {
  const m = /^\+1(\d{3})(\d{3})(\d{4})$/.exec(n);
  return m ? `(${m[1]}) ${m[2]}-${m[3]}` : n;
};

const SIP_CODES: Record<TerminalStatus, string> = { completed: '200', busy: '486', 'no-answer': '487', canceled: '487', failed: '500' };

export class StandInCall {
  readonly sid: string;
  readonly createdAt = Date.now();
  /** The resource's status. */
  status: CallStatus;
  /** Every status the call went through, `initiated` included, whether a callback was asked or not. */
  readonly history: CallbackStatus[];
  /** The `CallStatus` of each status callback sent, in order. */
  readonly statuses: CallbackStatus[] = [];
  /** Every status callback, AMD callback and TwiML fetch the call made, with the HTTP status it got. */
  readonly callbacks: CallbackRecord[] = [];
  /** Every TwiML document the call ran, in order. */
  readonly twiml: string[] = [];
  /** Numbers (or SIP addresses) a `<Dial>` connected the call to. */
  readonly dialed: string[] = [];
  /** The conferences a `<Dial><Conference>` put the call in, in order. */
  readonly conferences: string[] = [];
  /** What went wrong along the way (a TwiML fetch that failed, a stream that did not connect…). */
  readonly errors: string[] = [];
  /** Every media stream the call opened, the current one last. */
  readonly legs: MediaLeg[] = [];
  answeredBy: string | null = null;
  startedAt: number | null = null;
  endedAt: number | null = null;
  /** For a voicemail callee once it answered. */
  voicemail: VoicemailRecord | null = null;

  private readonly timers = new Set<NodeJS.Timeout>();
  private execution: AbortController | null = null;
  private statusChain: Promise<void> = Promise.resolve();
  private readonly pending = new Set<Promise<unknown>>();
  private sequence = 0;
  private finishing: Promise<void> | null = null;
  private disposed = false;

  constructor(
    private readonly ctx: CallContext,
    readonly accountSid: string,
    readonly to: string,
    readonly from: string,
    /** What the call was created with (`Url`, `StatusCallback`, `MachineDetection`…). */
    readonly params: URLSearchParams,
    readonly callee: CalleeBehaviour | null,
    readonly direction: 'outbound-api' | 'inbound' = 'outbound-api',
    sid?: string,
  ) {
    this.sid = sid ?? `CA${randomBytes(16).toString('hex')}`;
    this.status = direction === 'inbound' ? 'in-progress' : 'queued';
    this.history = [this.status];
    if (direction === 'inbound') this.startedAt = this.createdAt;
  }

  /** The current media stream's leg (the last one once the call is over); null before any. */
  get leg(): MediaLeg | null {
    return this.legs[this.legs.length - 1] ?? null;
  }

  get final(): boolean {
    return TERMINAL.has(this.status);
  }

  /** Seconds from the answer to the end (0 when never answered), rounded up. */
  get durationSeconds(): number {
    if (this.startedAt === null) return 0;
    return Math.ceil(((this.endedAt ?? Date.now()) - this.startedAt) / 1000);
  }

  // ------------------------------------------------------------------------------------------
  // the lifecycle of an outbound call

  /** Queued → initiated → ringing → what the callee does. */
  start(): void {
    const c = this.callee ?? { kind: 'person' };
    this.after(this.ctx.queueMs, () => {
      this.progress('initiated');
      if (c.kind === 'failed') {
        this.after(c.ringMs ?? 50, () => void this.finish('failed'));
        return;
      }
      this.after(this.ctx.queueMs, () => {
        this.status = 'ringing';
        this.progress('ringing');
        const ringLimit = this.timeoutSeconds() * 1000;
        if (c.kind === 'busy') this.after(c.ringMs ?? 100, () => void this.finish('busy'));
        else if (c.kind === 'no-answer') this.after(Math.min(c.ringMs ?? ringLimit, ringLimit), () => void this.finish('no-answer'));
        else if (c.kind === 'person' || c.kind === 'voicemail') {
          const ring = c.ringMs ?? 300;
          if (ring > ringLimit) this.after(ringLimit, () => void this.finish('no-answer'));
          else this.after(ring, () => this.answer(c));
        }
      });
    });
  }

  private timeoutSeconds(): number {
    const t = Number(this.params.get('Timeout') ?? 60);
    return Number.isFinite(t) && t > 0 ? t : 60;
  }

  private amdMode(): 'Enable' | 'DetectMessageEnd' | null {
    const m = this.params.get('MachineDetection');
    return m === 'Enable' || m === 'DetectMessageEnd' ? m : null;
  }

  private answer(c: PersonCallee | VoicemailCallee): void {
    this.status = 'in-progress';
    this.startedAt = Date.now();
    this.progress('in-progress');
    const amd = this.amdMode();
    const asyncAmd = amd !== null && this.params.get('AsyncAmd') === 'true';
    const amdMs = c.amdMs ?? 1000;
    if (c.kind === 'voicemail') this.voicemail = { greetingEndedAt: null, beepEndedAt: null, recorded: [] };

    if (amd === null || asyncAmd) {
      // the TwiML runs at once; detection (if asked) reports on the side
      if (asyncAmd) {
        if (c.kind === 'person') this.after(amdMs, () => this.detected(c.answeredBy ?? 'human', true));
        else if (amd === 'Enable') this.after(amdMs, () => this.detected('machine_start', true));
        // DetectMessageEnd on a machine: reported after the beep (see `runVoicemail`)
      }
      void this.guard(this.runInitial({}));
      return;
    }
    // synchronous detection: the TwiML is fetched only once it has decided
    if (c.kind === 'person' || amd === 'Enable') {
      const result = c.kind === 'person' ? (c.answeredBy ?? 'human') : 'machine_start';
      this.after(amdMs, () => {
        this.detected(result, false);
        void this.guard(this.runInitial({ AnsweredBy: result, MachineDetectionDuration: String(amdMs) }));
      });
      return;
    }
    // DetectMessageEnd on a machine: the greeting and the beep play to Twilio's detector, no stream yet
    const greetingMs = synthesizeSandboxSpeech(c.greeting ?? DEFAULT_GREETING).length / 8;
    const beep = c.beep === false ? null : tone(c.beep === true || c.beep === undefined ? {} : c.beep);
    const beepMs = beep ? beep.length / 8 : 0;
    this.after(greetingMs, () => {
      this.voicemail!.greetingEndedAt = Date.now();
    });
    this.after(greetingMs + beepMs, () => {
      this.voicemail!.beepEndedAt = Date.now();
      const result = beep ? 'machine_end_beep' : 'machine_end_silence';
      this.detected(result, false);
      const took = String(Math.round(greetingMs + beepMs));
      void this.guard(this.runInitial({ AnsweredBy: result, MachineDetectionDuration: took }));
    });
  }

  /** Detection decided: the resource says so, and with async AMD the callback tells the app. */
  private detected(answeredBy: string, callback: boolean): void {
    if (this.final) return;
    this.answeredBy = answeredBy;
    if (!callback) return;
    const url = this.params.get('AsyncAmdStatusCallback');
    if (!url) return;
    const took = this.startedAt === null ? 0 : Date.now() - this.startedAt;
    const params = { AccountSid: this.accountSid, AnsweredBy: answeredBy, CallSid: this.sid, MachineDetectionDuration: String(Math.round(took)) };
    const method = this.params.get('AsyncAmdStatusCallbackMethod') === 'GET' ? 'GET' : 'POST';
    this.track(this.send('amd', this.resolve(url), method, params));
  }

  /** The call's first TwiML: `Twiml` as given, or fetched from `Url`. */
  private async runInitial(extra: Record<string, string>): Promise<void> {
    if (this.final) return;
    const inline = this.params.get('Twiml');
    const execution = this.newExecution();
    const doc = inline ?? (await this.fetchTwiml(this.params.get('Url')!, this.params.get('Method'), extra));
    if (doc === null || execution.signal.aborted) return;
    await this.execute(doc, execution);
  }

  /** Requests TwiML from `url`; null (and the call hung up, as Twilio does on an application error) when it fails. */
  private async fetchTwiml(url: string, method: string | null, extra: Record<string, string>): Promise<string | null> {
    const record = await this.send('twiml', url, method === 'GET' ? 'GET' : 'POST', { ...this.callParams(), ...extra });
    if (record.status !== null && record.status >= 200 && record.status < 300 && record.body) return record.body;
    this.errors.push(`TwiML request to ${url} failed: ${record.error ?? `HTTP ${record.status}`}`);
    if (!this.final) void this.finish('completed');
    return null;
  }

  private newExecution(): AbortController {
    this.execution?.abort();
    this.execution = new AbortController();
    return this.execution;
  }

  /** Follows a TwiML document verb by verb; with nothing left to do, the call is over. */
  private async execute(doc: string, execution: AbortController): Promise<void> {
    this.twiml.push(doc);
    let response: TwimlNode;
    try {
      response = parseTwiml(doc);
    } catch (err) {
      this.errors.push(`invalid TwiML: ${(err as Error).message}`);
      void this.finish('completed');
      return;
    }
    for (const verb of response.children) {
      if (execution.signal.aborted || this.final) return;
      switch (verb.name) {
        case 'Connect': {
          const stream = verb.children.find((n) => n.name === 'Stream');
          if (!stream) break;
          const end = await this.openStream(stream, execution);
          if (end === 'callee') {
            void this.finish('completed');
            return;
          }
          // `<Connect action>`: Twilio asks the action URL what to do next instead of going on
          if (verb.attributes.action && (end === 'server' || end === 'failed') && !execution.signal.aborted && !this.final) {
            const next = await this.fetchTwiml(this.resolve(verb.attributes.action), verb.attributes.method ?? 'POST', {});
            if (next !== null && !execution.signal.aborted) await this.execute(next, execution);
            return;
          }
          break;
        }
        case 'Hangup':
        case 'Reject':
          void this.finish('completed');
          return;
        case 'Dial': {
          const conference = verb.children.find((n) => n.name === 'Conference');
          if (conference) {
            // in the conference until it ends (the <Dial> is over: the TwiML goes on) or the call leaves it
            this.conferences.push(conference.text);
            await this.ctx.conferences.enter(conference.text, this, conference.attributes.endConferenceOnExit === 'true', execution.signal);
            break;
          }
          const target = verb.children.find((n) => ['Number', 'Sip', 'Client'].includes(n.name))?.text ?? verb.text;
          this.dialed.push(target);
          // bridged to the other party until somebody ends the call (REST, `hangUp()`) or redirects it
          await this.sleep(Number.POSITIVE_INFINITY, execution.signal);
          return;
        }
        case 'Pause':
          await this.sleep(Number(verb.attributes.length ?? 1) * 1000, execution.signal);
          break;
        case 'Say':
          await this.sleep(synthesizeSandboxSpeech(verb.text).length / 8, execution.signal);
          break;
        case 'Redirect': {
          const url = this.resolve(verb.text);
          const next = await this.fetchTwiml(url, verb.attributes.method ?? 'POST', {});
          if (next !== null && !execution.signal.aborted) await this.execute(next, execution);
          return;
        }
        default:
          this.errors.push(`<${verb.name}> is not simulated; skipped`);
      }
    }
    if (!execution.signal.aborted && !this.final) void this.finish('completed');
  }

  /** `<Connect><Stream>`: opens the Media Streams socket with the callee on it; resolves when it ends. */
  private async openStream(stream: TwimlNode, execution: AbortController): Promise<LegEnd | 'failed'> {
    const url = stream.attributes.url ?? '';
    const parameters: Record<string, string> = {};
    for (const p of stream.children) if (p.name === 'Parameter' && p.attributes.name) parameters[p.attributes.name] = p.attributes.value ?? '';
    const leg = new MediaLeg({ accountSid: this.accountSid, callSid: this.sid, recordAudio: this.ctx.recordAudio });
    try {
      await leg.connect(url, parameters, { 'x-twilio-signature': twilioSignature(this.ctx.authToken, url, {}) });
    } catch (err) {
      this.errors.push(`stream ${url}: ${(err as Error).message}`);
      await leg.close();
      return 'failed';
    }
    this.legs.push(leg);
    const ended = new Promise<LegEnd>((resolve) => leg.onEnded(resolve));
    if (execution.signal.aborted || this.final) await leg.stop().catch(() => undefined);
    else this.startCallee(leg);
    const by = await ended;
    await leg.close();
    return by;
  }

  /** Attaches a leg that was opened elsewhere (an inbound call placed through the stand-in). */
  attachLeg(leg: MediaLeg): void {
    this.legs.push(leg);
    leg.onEnded((by) => {
      void leg.close();
      if (by === 'callee' || by === 'server') void this.finish('completed');
    });
  }

  private startCallee(leg: MediaLeg): void {
    const c = this.callee;
    if (c?.kind === 'person' && c.onAnswer) {
      const script = c.onAnswer;
      void this.guard((async () => script(leg, this))());
    } else if (c?.kind === 'voicemail') {
      void this.guard(this.runVoicemail(leg, c));
    }
  }

  /** The machine: greeting, beep, detection's verdict, then it records until the call ends. */
  private async runVoicemail(leg: MediaLeg, c: VoicemailCallee): Promise<void> {
    const vm = this.voicemail!;
    if (vm.beepEndedAt === null) {
      await leg.say(c.greeting ?? DEFAULT_GREETING);
      vm.greetingEndedAt = Date.now();
      if (leg.endedBy) return;
      if (c.beep !== false) await leg.play(tone(c.beep === true || c.beep === undefined ? {} : c.beep), '(beep)');
      vm.beepEndedAt = Date.now();
      if (leg.endedBy) return;
    }
    await leg.addEar((line) => vm.recorded.push(line));
    if (this.amdMode() === 'DetectMessageEnd' && this.params.get('AsyncAmd') === 'true' && this.answeredBy === null) {
      this.detected(c.beep === false ? 'machine_end_silence' : 'machine_end_beep', true);
    }
    this.after(c.maxMessageMs ?? 120_000, () => void leg.hangUp().catch(() => undefined));
  }

  // ------------------------------------------------------------------------------------------
  // REST updates and the end

  /** `POST .../Calls/{sid}.json`: null when done, else the Twilio error to answer. */
  update(form: URLSearchParams): { code: number; message: string } | null {
    const status = form.get('Status');
    const twiml = form.get('Twiml');
    const url = form.get('Url');
    if (status !== null && status !== 'canceled' && status !== 'completed') {
      return { code: 20001, message: `Invalid Status: ${status}. Valid values are 'canceled' or 'completed'` };
    }
    if (twiml !== null || url !== null) {
      if (this.status !== 'in-progress') return { code: 21220, message: 'Call is not in-progress. Cannot redirect.' };
      const execution = this.newExecution();
      void this.guard(
        (async () => {
          const leg = this.leg;
          if (leg?.open) await leg.stop();
          if (execution.signal.aborted || this.final) return;
          const doc = twiml ?? (await this.fetchTwiml(url!, form.get('Method'), {}));
          if (doc !== null && !execution.signal.aborted) await this.execute(doc, execution);
        })(),
      );
      return null;
    }
    if (status === 'canceled' && (this.status === 'queued' || this.status === 'ringing')) void this.finish('canceled');
    if (status === 'completed') {
      if (this.status === 'queued' || this.status === 'ringing') void this.finish('canceled');
      else if (this.status === 'in-progress') void this.finish('completed');
    }
    return null;
  }

  /** The far party hangs up: the callee on the stream, or the party a `<Dial>` bridged to. */
  async hangUp(): Promise<void> {
    const leg = this.leg;
    if (leg?.open) await leg.hangUp();
    else if (this.status === 'in-progress') await this.finish('completed');
  }

  /** Ends the call: the stream gets `stop`, then the final status callback goes out. */
  finish(status: TerminalStatus): Promise<void> {
    if (this.finishing) return this.finishing;
    this.status = status;
    this.endedAt = Date.now();
    this.history.push(status);
    this.clearTimers();
    this.execution?.abort();
    this.finishing = (async () => {
      const leg = this.leg;
      if (leg?.open) await leg.stop().catch(() => undefined);
      this.statusCallback('completed', status);
      await this.statusChain;
    })();
    return this.finishing;
  }

  /** A progress event: in the history, and to `StatusCallback` when that event was asked for. */
  private progress(status: 'initiated' | 'ringing' | 'in-progress'): void {
    this.history.push(status);
    this.statusCallback(status === 'in-progress' ? 'answered' : status, status);
  }

  private statusCallback(event: 'initiated' | 'ringing' | 'answered' | 'completed', status: CallbackStatus): void {
    const url = this.params.get('StatusCallback');
    if (!url || this.direction !== 'outbound-api') return;
    const events = this.params.getAll('StatusCallbackEvent').flatMap((e) => e.split(/[\s,]+/)).filter(Boolean);
    // with no events named, only the final one is sent
    if (!(events.length === 0 ? event === 'completed' : events.includes(event))) return;
    const params: Record<string, string> = {
      ...this.callParams(status),
      CallbackSource: 'call-progress-events',
      SequenceNumber: String(this.sequence++),
      Timestamp: rfc2822(Date.now()),
    };
    if (event === 'completed') {
      params.CallDuration = String(this.durationSeconds);
      params.Duration = String(Math.ceil(this.durationSeconds / 60));
      params.SipResponseCode = SIP_CODES[status as TerminalStatus];
    }
    const method = this.params.get('StatusCallbackMethod') === 'GET' ? 'GET' : 'POST';
    this.statuses.push(status);
    // in order, one at a time
    this.statusChain = this.statusChain.then(() => this.send('status', this.resolve(url), method, params).then(() => undefined));
    this.track(this.statusChain);
  }

  /** The parameters of every Twilio request about this call. */
  private callParams(status: CallbackStatus = this.status): Record<string, string> {
    const place = (prefix: string, n: string) => ({
      [`${prefix}City`]: '',
      [`${prefix}Country`]: countryOf(n),
      [`${prefix}State`]: '',
      [`${prefix}Zip`]: '',
    });
    return {
      AccountSid: this.accountSid,
      ApiVersion: API_VERSION,
      CallSid: this.sid,
      CallStatus: status,
      Called: this.to,
      ...place('Called', this.to),
      Caller: this.from,
      ...place('Caller', this.from),
      Direction: this.direction,
      From: this.from,
      ...place('From', this.from),
      To: this.to,
      ...place('To', this.to),
      ...(this.answeredBy ? { AnsweredBy: this.answeredBy } : {}),
    };
  }

  /** Sends one signed request (form-encoded POST, or GET with the parameters in the query). */
  private async send(kind: CallbackRecord['kind'], url: string, method: 'GET' | 'POST', params: Record<string, string>): Promise<CallbackRecord> {
    const query = new URLSearchParams(params).toString();
    const target = method === 'GET' ? `${url}${url.includes('?') ? '&' : '?'}${query}` : url;
    const signature = twilioSignature(this.ctx.authToken, target, method === 'GET' ? {} : params);
    const record: CallbackRecord = { kind, url: target, method, params, signature, status: null, at: Date.now() };
    this.callbacks.push(record);
    try {
      const res = await request(target, {
        method,
        headers: {
          'x-twilio-signature': signature,
          'i-twilio-idempotency-token': randomUUID(),
          'user-agent': 'TwilioProxy/1.1',
          accept: '*/*',
          ...(method === 'POST' ? { 'content-type': 'application/x-www-form-urlencoded' } : {}),
        },
        ...(method === 'POST' ? { body: query } : {}),
        signal: this.ctx.signal,
        headersTimeout: 15_000,
        bodyTimeout: 15_000,
      });
      record.status = res.statusCode;
      const body = await res.body.text();
      if (kind === 'twiml') record.body = body;
    } catch (err) {
      record.error = (err as Error).message;
    }
    return record;
  }

  /** A callback URL relative to the call's `Url`, as Twilio resolves it. */
  private resolve(url: string): string {
    const base = this.params.get('Url');
    if (/^https?:\/\//i.test(url) || !base) return url; // absolute URLs are requested (and signed) as given
    try {
      return new URL(url, base).toString();
    } catch {
      return url;
    }
  }

  /** The call resource, as Twilio's REST API shows it. */
  toResource(): Record<string, unknown> {
    const uri = `/${API_VERSION}/Accounts/${this.accountSid}/Calls/${this.sid}`;
    const sub = (name: string) => `${uri}/${name}.json`;
    return {
      account_sid: this.accountSid,
      annotation: null,
      answered_by: this.answeredBy,
      api_version: API_VERSION,
      caller_name: null,
      date_created: rfc2822(this.createdAt),
      date_updated: rfc2822(this.endedAt ?? this.startedAt ?? this.createdAt),
      direction: this.direction,
      duration: this.final ? String(this.durationSeconds) : null,
      end_time: this.endedAt === null ? null : rfc2822(this.endedAt),
      forwarded_from: null,
      from: this.from,
      from_formatted: formatted(this.from),
      group_sid: null,
      parent_call_sid: null,
      phone_number_sid: null,
      price: null,
      price_unit: 'USD',
      queue_time: '0',
      sid: this.sid,
      start_time: this.startedAt === null ? null : rfc2822(this.startedAt),
      status: this.status,
      subresource_uris: {
        feedback: sub('Feedback'),
        notifications: sub('Notifications'),
        recordings: sub('Recordings'),
        streams: sub('Streams'),
        payments: sub('Payments'),
        user_defined_message_subscriptions: sub('UserDefinedMessageSubscriptions'),
        user_defined_messages: sub('UserDefinedMessages'),
        events: sub('Events'),
        siprec: sub('Siprec'),
        transcriptions: sub('Transcriptions'),
      },
      to: this.to,
      to_formatted: formatted(this.to),
      trunk_sid: null,
      uri: `${uri}.json`,
    };
  }

  // ------------------------------------------------------------------------------------------
  // waiting, timers, teardown

  /** Resolves once `test(call)` holds; rejects after `timeoutMs` naming what it waited for. */
  async waitFor(test: (call: StandInCall) => boolean, timeoutMs = 10_000, what = 'a condition'): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!test(this)) {
      if (Date.now() > deadline) throw new Error(`call ${this.sid} to ${this.to}: timed out waiting for ${what} (status ${this.status}, history ${this.history.join(' → ')})`);
      await new Promise((r) => setTimeout(r, 10));
    }
  }

  /** Waits until the call has gone through `status` (or ended, for a terminal one). */
  waitForStatus(status: CallbackStatus, timeoutMs = 10_000): Promise<void> {
    return this.waitFor((c) => c.history.includes(status), timeoutMs, `status ${status}`);
  }

  /** Waits until the media stream is up, and gives its leg. */
  async waitForLeg(timeoutMs = 10_000): Promise<MediaLeg> {
    await this.waitFor((c) => c.leg !== null || c.final, timeoutMs, 'the media stream');
    if (!this.leg) throw new Error(`call ${this.sid} ended (${this.status}) before a media stream opened; errors: ${this.errors.join('; ') || 'none'}`);
    return this.leg;
  }

  /** Waits until the call is over and its final callback has had its answer. */
  async ended(timeoutMs = 10_000): Promise<void> {
    await this.waitFor((c) => c.final, timeoutMs, 'the end of the call');
    await this.finishing;
  }

  private after(ms: number, fn: () => void): void {
    if (this.disposed || this.finishing) return;
    const t = setTimeout(() => {
      this.timers.delete(t);
      fn();
    }, ms);
    this.timers.add(t);
  }

  private sleep(ms: number, signal: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      if (signal.aborted) return resolve();
      const done = () => {
        if (t) {
          clearTimeout(t);
          this.timers.delete(t);
        }
        signal.removeEventListener('abort', done);
        resolve();
      };
      const t = Number.isFinite(ms) ? setTimeout(done, ms) : null;
      if (t) this.timers.add(t);
      signal.addEventListener('abort', done, { once: true });
    });
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
  private guard(p: Promise<unknown>): Promise<void> {
    const run = p.then(
      () => undefined,
      (err: unknown) => {
        if (!this.disposed) this.errors.push((err as Error)?.message ?? String(err));
      },
    );
    this.track(run);
    return run;
  }

  /** Stops everything the call holds (timers, streams, requests in flight) without callbacks. */
  async dispose(): Promise<void> {
    this.disposed = true;
    this.clearTimers();
    this.execution?.abort();
    await Promise.all(this.legs.map((l) => l.close()));
    // a callee script may still be waiting on its own timeouts: give flows a moment, not forever
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([Promise.all([...this.pending]), new Promise((r) => (timer = setTimeout(r, 2_000)))]);
    clearTimeout(timer);
  }
}
