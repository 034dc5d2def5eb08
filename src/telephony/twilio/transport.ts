/**
 * Twilio as one transport: the voice webhook (signature, call start, TwiML) and the Media
 * Streams WebSocket (`connected`, `start`, `media`, `mark`, `dtmf`, `stop` in; `media`, `mark`,
 * `clear` out), with transfer and hang-up through Twilio's REST API. The call service sees a
 * `CallTransport` and nothing of this.
 */
import type { Logger } from 'pino';
import type { WebSocket } from 'ws';
import type { ActiveCall } from '../../calls/active-call.js';
import type { CallService } from '../../calls/service.js';
import type { AnsweredBy, CallRecord, CallStore } from '../../calls/store.js';
import type { OutboundCalls, OutboundCarrier } from '../../calls/outbound-calls.js';
import { RING_TIMEOUT_SECONDS } from '../../calls/outbound-calls.js';
import type { AccountSettings } from '../../store/account.js';
import { MULAW_8K, type CallTransport } from '../../calls/transport.js';
import type { Store } from '../../store/index.js';
import { isOutage } from '../../store/outage.js';
import { callRunner, PendingMarks, socketMonitor, StreamWatcher } from '../liveness.js';
import { clearMessage, markMessage, mediaAudio, mediaSender, parseTwilioMessage } from './media-protocol.js';
import { TwilioRestError, type TwilioRest } from './rest.js';
import { verifyTwilioSignature, type FormParams } from './signature.js';
import { connectStreamTwiml, hangupTwiml, rejectTwiml } from './twiml.js';
import { TwilioOperators } from './operator.js';
import { callError, ErrorCodes, type CallError } from '../../errors.js';

export const VOICE_PATH = '/telephony/twilio/voice';
/**
 * Assistant audio goes out 40 ms to a `media` message: half the messages (and socket writes) of
 * one a frame, the far end at most 20 ms further ahead (docs/transports.md, "Frames to a message").
 */
export const FRAMES_PER_MESSAGE = 2;
export const MEDIA_PATH = '/telephony/twilio/media';
/** Outbound calls: Twilio asks here for the TwiML once the callee answers. */
export const ANSWER_PATH = '/telephony/twilio/outbound';
/** Outbound calls: Twilio's status callbacks (initiated, ringing, answered, completed and the failures). */
export const STATUS_PATH = '/telephony/twilio/status';
/** Outbound calls: the asynchronous answering-machine detection result. */
export const AMD_PATH = '/telephony/twilio/amd';

export interface TwilioTelephonyOptions {
  calls: CallService;
  /** The call sessions (outbound callbacks find their call by the id in their URL). */
  callStore: CallStore;
  store: Store;
  rest: TwilioRest;
  logger: Logger;
  /** The address Twilio reaches: the TwiML stream URL and the URL Twilio signs. */
  publicUrl: string;
  watcher: StreamWatcher;
  /** A call refused before pickup because the database or Redis did not answer (for /metrics). */
  onUnavailable?(): void;
}

export type VoiceWebhookResult =
  | { status: 200; twiml: string; callId: string }
  | { status: 400 | 403 | 404; message: string };

export type CallbackResult = { status: 204 } | { status: 400 | 403 | 404; message: string };

/** A single-valued form parameter, or '' (absent, or given more than once). */
const formValue = (params: FormParams, name: string): string => {
  const value = params[name];
  return typeof value === 'string' ? value : '';
};

/** Twilio's `AnsweredBy` values, as `answered_by` says them. */
export function answeredBy(value: string): AnsweredBy | null {
  if (value === 'human') return 'human';
  if (value === 'unknown') return 'unknown';
  if (value === 'fax' || value.startsWith('machine_')) return 'machine';
  return null;
}

export class TwilioTelephony implements OutboundCarrier {
  readonly kind = 'twilio';
  private readonly log: Logger;
  /** Set once outbound calls are wired (the runtime makes them after the transport). */
  outbound: OutboundCalls | null = null;
  /** Warm transfers' operators (./operator.ts). */
  readonly operators: TwilioOperators;

  constructor(private readonly o: TwilioTelephonyOptions) {
    this.log = o.logger.child({ component: 'calls', transport: 'twilio' });
    this.operators = new TwilioOperators({ rest: o.rest, store: o.store, publicUrl: o.publicUrl, log: this.log });
  }

  // ------------------------------------------------------------------------------------------
  // the voice webhook

  /**
   * `POST /telephony/twilio/voice`: verified, then answered with TwiML. While the database or
   * Redis does not answer, the call is refused before pickup (`<Reject>`, DECISIONS 22).
   */
  async voice(url: string, params: FormParams, signature: string | undefined): Promise<VoiceWebhookResult> {
    try {
      return await this.answerVoice(url, params, signature);
    } catch (err) {
      if (!isOutage(err)) throw err;
      this.log.warn({ err }, 'call refused before pickup: the database or Redis does not answer');
      this.o.onUnavailable?.();
      return { status: 200, twiml: rejectTwiml('busy'), callId: '' };
    }
  }

  private async answerVoice(url: string, params: FormParams, signature: string | undefined): Promise<VoiceWebhookResult> {
    const str = (name: string) => formValue(params, name);
    const to = str('To');
    const number = await this.o.store.numbers.findByNumber(to);
    if (!number) return { status: 404, message: `no number ${to || '(none)'} is registered` };
    // a number whose calls come over a SIP trunk is not reached through Twilio
    if (number.provider !== 'twilio') return { status: 404, message: `the number ${to} is not a Twilio number (provider "${number.provider}")` };
    const account = await this.o.store.account.get(number.organization_id);
    const token = account.twilio?.auth_token;
    if (!token || !verifyTwilioSignature(token, url, params, signature)) {
      this.log.warn({ numberId: number.id, hasCredentials: !!token }, 'voice webhook refused: bad or missing X-Twilio-Signature');
      return { status: 403, message: 'invalid signature' };
    }
    if (!this.o.calls.isAccepting()) return { status: 200, twiml: rejectTwiml('busy'), callId: '' };
    const callSid = str('CallSid');
    const accountSid = str('AccountSid');
    if (!callSid || !accountSid) return { status: 400, message: 'CallSid and AccountSid are required' };

    const outcome = await this.o.calls.openInboundUnlessDown({
      number,
      account,
      customerNumber: str('From'),
      transport: 'twilio',
      transportIds: { call_sid: callSid, account_sid: accountSid },
      transportKey: `twilio:${accountSid}:${callSid}`,
    });
    switch (outcome.kind) {
      case 'busy':
        return { status: 200, twiml: rejectTwiml('busy'), callId: '' };
      case 'unavailable':
        this.o.onUnavailable?.();
        return { status: 200, twiml: rejectTwiml('busy'), callId: '' };
      case 'replay':
        return { status: 200, twiml: rejectTwiml(), callId: outcome.callId };
      case 'rejected':
        return { status: 200, twiml: rejectTwiml(), callId: outcome.record.id };
      case 'accepted': {
        const streamUrl = `${this.o.publicUrl.replace(/^http/, 'ws').replace(/\/$/, '')}${MEDIA_PATH}`;
        return {
          status: 200,
          twiml: connectStreamTwiml(streamUrl, { call_id: outcome.record.id, token: outcome.streamToken }),
          callId: outcome.record.id,
        };
      }
    }
  }

  // ------------------------------------------------------------------------------------------
  // outbound calls: placing them, and Twilio's callbacks about them

  unusable(account: AccountSettings): string | null {
    return account.twilio ? null : 'the account has no Twilio credentials (PATCH /account with telephony.twilio)';
  }

  async place(record: CallRecord, account: AccountSettings): Promise<Record<string, string>> {
    if (!account.twilio) throw new TwilioRestError('the organization has no Twilio credentials');
    const base = this.o.publicUrl.replace(/\/$/, '');
    const q = `?call_id=${encodeURIComponent(record.id)}`;
    const assistant = record.assistant as { voicemail_detection?: boolean };
    if (!record.customer || !record.phone_number) throw new TwilioRestError('an outbound call needs a number to call and one to call from');
    const callSid = await this.o.rest.createCall(account.twilio, {
      to: record.customer.number,
      from: record.phone_number.number,
      url: `${base}${ANSWER_PATH}${q}`,
      statusCallback: `${base}${STATUS_PATH}${q}`,
      timeoutSeconds: RING_TIMEOUT_SECONDS,
      machineDetection: assistant.voicemail_detection ? { callback: `${base}${AMD_PATH}${q}` } : null,
    });
    return { call_sid: callSid, account_sid: account.twilio.account_sid };
  }

  async cancel(record: CallRecord, account: AccountSettings): Promise<void> {
    const callSid = record.transport_ids.call_sid;
    if (!account.twilio || !callSid) return;
    // an outbound call not answered yet is canceled; anything else is hung up
    if (record.type === 'outbound_phone_call') await this.o.rest.cancel(account.twilio, callSid);
    else await this.o.rest.hangUp(account.twilio, callSid);
  }

  /**
   * A callback about one of our outbound calls: its call id is in the URL we gave Twilio, and it
   * must be signed with the auth token of the call's organization (as the voice webhook is).
   */
  private async verifiedCall(
    url: string,
    params: FormParams,
    signature: string | undefined,
  ): Promise<{ record: CallRecord } | { status: 400 | 403 | 404; message: string }> {
    const callId = new URL(url).searchParams.get('call_id') ?? '';
    if (!/^[0-9a-f-]{36}$/i.test(callId)) return { status: 400, message: 'call_id is missing from the callback URL' };
    const record = await this.o.callStore.get(callId);
    if (!record || record.type !== 'outbound_phone_call') return { status: 404, message: `no outbound call ${callId}` };
    const account = await this.o.store.account.get(record.organization_id);
    const token = account.twilio?.auth_token;
    if (!token || !verifyTwilioSignature(token, url, params, signature)) {
      this.log.warn({ callId, hasCredentials: !!token }, 'Twilio callback refused: bad or missing X-Twilio-Signature');
      return { status: 403, message: 'invalid signature' };
    }
    // a callback for another carrier call than the one we placed for this id changes nothing
    const sid = formValue(params, 'CallSid');
    const ours = record.transport_ids.call_sid;
    if (ours && sid && sid !== ours) return { status: 400, message: 'CallSid is not the call placed for this call_id' };
    return { record };
  }

  /** `POST /telephony/twilio/outbound`: the callee answered; the call connects to our media stream. */
  async answer(url: string, params: FormParams, signature: string | undefined): Promise<VoiceWebhookResult> {
    const verified = await this.verifiedCall(url, params, signature);
    if (!('record' in verified)) return verified;
    const { record } = verified;
    const [callSid, accountSid] = [formValue(params, 'CallSid'), formValue(params, 'AccountSid')];
    const ids: Record<string, string> = callSid && accountSid ? { call_sid: callSid, account_sid: accountSid } : {};
    const streamToken = await this.o.calls.answerOutbound(record.id, ids);
    if (!streamToken) {
      this.log.info({ callId: record.id, status: record.status }, 'an outbound call answered after it ended: hanging up');
      return { status: 200, twiml: hangupTwiml(), callId: record.id };
    }
    const streamUrl = `${this.o.publicUrl.replace(/^http/, 'ws').replace(/\/$/, '')}${MEDIA_PATH}`;
    return { status: 200, twiml: connectStreamTwiml(streamUrl, { call_id: record.id, token: streamToken }), callId: record.id };
  }

  /** `POST /telephony/twilio/status`: the call's progress; the ends of calls never answered. */
  async status(url: string, params: FormParams, signature: string | undefined): Promise<CallbackResult> {
    const verified = await this.verifiedCall(url, params, signature);
    if (!('record' in verified)) return verified;
    const { record } = verified;
    const status = formValue(params, 'CallStatus');
    this.log.debug({ callId: record.id, twilioStatus: status }, 'Twilio status callback');
    const errors: CallError[] = [];
    const sipCode = formValue(params, 'SipResponseCode');
    const errorCode = params.ErrorCode;
    const code = typeof errorCode === 'string' ? errorCode : sipCode ? `SIP ${sipCode}` : '';
    if (status === 'failed') errors.push(callError(ErrorCodes.DIAL_FAILED, `twilio: the call failed${code ? ` (${code})` : ''}`, 'twilio'));
    switch (status) {
      case 'completed':
      case 'busy':
      case 'no-answer':
      case 'failed':
      case 'canceled':
        await this.outboundCalls().progress(record.id, status, errors);
        break;
      default:
      // queued, initiated, ringing, in-progress: the call says these itself
    }
    return { status: 204 };
  }

  /** `POST /telephony/twilio/amd`: who answered (the greeting and its beep are over for a machine). */
  async machineDetection(url: string, params: FormParams, signature: string | undefined): Promise<CallbackResult> {
    const verified = await this.verifiedCall(url, params, signature);
    if (!('record' in verified)) return verified;
    const value = formValue(params, 'AnsweredBy');
    const who = answeredBy(value);
    if (!who) return { status: 400, message: `AnsweredBy: unknown value "${value}"` };
    await this.outboundCalls().detected(verified.record.id, who);
    return { status: 204 };
  }

  private outboundCalls(): OutboundCalls {
    if (!this.outbound) throw new Error('outbound calls are not wired');
    return this.outbound;
  }

  // ------------------------------------------------------------------------------------------
  // the media stream

  /** A Media Streams WebSocket: accepted only with the one-time token of its call. */
  attachMedia(ws: WebSocket, remote: string): void {
    const liveness = this.o.watcher.liveness;
    let call: ActiveCall | null = null;
    let streamSid = '';
    let starting = false;
    const marks = new PendingMarks();
    let unwatch: (() => void) | null = null;
    const refuse = (why: string) => {
      this.log.warn({ remote, why }, 'media stream refused');
      ws.close(1008, 'refused');
    };
    const startTimer = setTimeout(() => {
      if (!call) refuse('no start message within 10 s');
    }, 10_000);
    const stopWatching = () => {
      clearTimeout(startTimer);
      unwatch?.();
      unwatch = null;
    };
    const toCall = callRunner(() => call);
    /** Moved into a warm transfer's conference: the stream's end is no hang-up. */
    let moved = false;
    const hungUp = () => {
      if (!moved) toCall('hang-up', (c) => c.callerHungUp());
    };
    const monitor = socketMonitor({
      ws,
      liveness,
      marks,
      toCall,
      stopWatching,
      firstAssumed: () => this.log.warn({ callId: call?.record.id }, 'the far end does not echo marks; audio counts as played once its time has passed'),
    });
    const check = (now: number) => {
      if (call && !call.isEnded()) monitor.check(now);
    };
    ws.on('pong', () => monitor.pong());

    ws.on('message', (data, isBinary) => {
      if (isBinary) return refuse('binary frame');
      // fifty a second on every call: Twilio's own shape, read without a parse result
      const audio = mediaAudio(data as Buffer);
      if (audio) {
        monitor.media();
        return toCall.audio(audio);
      }
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
          void this.o.calls.connect(params.call_id ?? '', params.token ?? '', (record) => this.transport(ws, record, streamSid, marks, stopWatching, (to) => (moved = to))).then(
            (c) => {
              if (!c) return refuse('unknown call or wrong token');
              call = c;
              monitor.started();
              if (ws.readyState !== ws.OPEN) return hungUp();
              unwatch = this.o.watcher.watch(check);
            },
            (err: Error) => {
              this.log.error({ err }, 'call could not start');
              refuse('start failed');
            },
          );
          return;
        }
        case 'media':
          monitor.media();
          toCall.audio(m.audio);
          return;
        case 'mark':
          // not ours, or already counted as played
          if (marks.answered(m.mark.name)) toCall('mark', (c) => c.played(m.mark.name));
          return;
        case 'dtmf':
          toCall('key press', (c) => c.dtmf(m.dtmf.digit));
          return;
        case 'stop':
          hungUp();
          return;
      }
    });
    ws.on('close', () => {
      stopWatching();
      hungUp();
    });
    ws.on('error', () => undefined);
  }

  /** The `CallTransport` of one media stream: μ-law 8 kHz both ways, as Twilio carries it. */
  private transport(ws: WebSocket, record: CallRecord, streamSid: string, marks: PendingMarks, stopWatching: () => void, onMoved: (moved: boolean) => void): CallTransport {
    let moved = false;
    const open = () => ws.readyState === ws.OPEN && !moved;
    const media = mediaSender(streamSid, FRAMES_PER_MESSAGE, (message) => {
      if (open()) ws.send(message, { binary: false });
    });
    return {
      kind: 'twilio',
      audioFormat: MULAW_8K,
      framesPerMessage: FRAMES_PER_MESSAGE,
      sendAudio: (frame) => media.frame(frame),
      flushAudio: () => media.flush(),
      mark: (name) => {
        media.flush();
        if (!open()) return;
        ws.send(markMessage(streamSid, name));
        marks.sent(name);
      },
      clear: () => {
        // what is held was sent as far as the call knows: `clear` drops it with the rest
        media.drop();
        if (open()) ws.send(clearMessage(streamSid));
      },
      hangUp: () => this.control(record, (creds, sid) => this.o.rest.hangUp(creds, sid)),
      transfer: (destination) => this.control(record, (creds, sid, from) => this.o.rest.transfer(creds, sid, destination, from)),
      // a warm transfer: the operator through the REST API; the join moves this call into the conference
      dialOperator: (destination, options) =>
        this.operators.dial(record, destination, options, async (twiml) => {
          moved = true;
          onMoved(true);
          try {
            await this.control(record, (creds, sid) => this.o.rest.redirect(creds, sid, twiml));
          } catch (err) {
            // still ours: the call goes on here
            moved = false;
            onMoved(false);
            throw err;
          }
          stopWatching();
        }),
      close: () => {
        stopWatching();
        if (ws.readyState === ws.OPEN) ws.close(1000, 'call ended');
      },
    };
  }

  /** A REST request on the call, with the organization's credentials as they are now. */
  private async control(
    record: CallRecord,
    fn: (credentials: { account_sid: string; auth_token: string }, callSid: string, callerId: string) => Promise<void>,
  ): Promise<void> {
    const account = await this.o.store.account.get(record.organization_id);
    // credentials removed mid-call: a transfer must fail loudly rather than end as "transferred"
    if (!account.twilio) throw new TwilioRestError('the organization has no Twilio credentials');
    const callSid = record.transport_ids.call_sid;
    if (!callSid) throw new TwilioRestError('the call has no Twilio CallSid');
    await fn(account.twilio, callSid, record.phone_number?.number ?? '');
  }
}
