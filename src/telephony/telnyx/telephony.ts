/**
 * Telnyx as one carrier (DECISIONS 18, docs/telnyx.md): Call Control webhooks (verified with the
 * account's Ed25519 public key), calls answered with a bidirectional media stream (./media.ts),
 * and outbound calls dialled, hung up and transferred through the Call Control API (./api.ts).
 *
 * Inbound: `call.initiated` (incoming) to a `telnyx` number is verified with that number's
 * organization's key, checked like any call (`CallService.openInbound`), then answered with
 * `stream_url` (the call's id and one-time token in its query), both tracks, RTP PCMU both ways,
 * and `client_state` (the call id, base64): every later webhook of the call carries it, which is
 * how it is found (and whose key verifies it). Refused calls are `reject`ed (`CALL_REJECTED`, or
 * `USER_BUSY` while draining or in an outage).
 * Outbound: `POST /v2/calls` through the account's connection, `client_state` and `webhook_url`
 * ours; `call.answered` starts the stream (`streaming_start`), `call.hangup` ends a call that
 * never got as far as its media, with Telnyx's `hangup_cause`.
 */
import type { Logger } from 'pino';
import type { WebSocket } from 'ws';
import { z } from 'zod';
import type { OutboundCalls, OutboundCarrier } from '../../calls/outbound-calls.js';
import { RING_TIMEOUT_SECONDS } from '../../calls/outbound-calls.js';
import type { CallService } from '../../calls/service.js';
import type { CallRecord, CallStore } from '../../calls/store.js';
import { callError, endedReasonFor, ErrorCodes, type CallError } from '../../errors.js';
import type { AccountSettings } from '../../store/account.js';
import type { Store } from '../../store/index.js';
import type { PhoneNumber } from '../../store/numbers.js';
import { isOutage } from '../../store/outage.js';
import { CarrierApiError } from '../carrier.js';
import type { StreamWatcher } from '../liveness.js';
import { CALL_ENDED, type TelnyxApi } from './api.js';
import { attachTelnyxMedia } from './media.js';
import { telnyxSettings, type TelnyxSettings } from './settings.js';
import { telnyxSignatureProblem } from './signature.js';

export const WEBHOOK_PATH = '/telephony/telnyx/webhook';
export const MEDIA_PATH = '/telephony/telnyx/media';

export interface TelnyxTelephonyOptions {
  calls: CallService;
  /** The call sessions (a webhook finds its call by the id in its `client_state`). */
  callStore: CallStore;
  store: Store;
  api: TelnyxApi;
  logger: Logger;
  /** The address Telnyx reaches: the stream URL and the outbound calls' `webhook_url`. */
  publicUrl: string;
  watcher: StreamWatcher;
  /** A call refused before pickup because the database or Redis did not answer (for /metrics). */
  onUnavailable?(): void;
}

export type WebhookResult = { status: 204 } | { status: 400 | 403 | 404 | 503; message: string };

const text = z.string().nullish();
/** A Call Control webhook, as far as calls read it (`data.event_type`, `data.payload`). */
const TelnyxEvent = z.object({
  data: z.object({
    event_type: z.string().min(1),
    payload: z.object({
      call_control_id: text,
      call_leg_id: text,
      call_session_id: text,
      client_state: text,
      direction: text,
      from: text,
      to: text,
      hangup_cause: text,
      sip_hangup_cause: text,
      result: text,
    }),
  }),
});
type Payload = z.infer<typeof TelnyxEvent>['data']['payload'];

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** A call's `client_state`: its id, base64 (Telnyx takes base64 only). */
export const clientState = (callId: string) => Buffer.from(callId, 'utf8').toString('base64');
const callIdOf = (state: string | null | undefined): string | null => {
  if (!state) return null;
  const id = Buffer.from(state, 'base64').toString('utf8');
  return UUID.test(id) ? id : null;
};

/** Telnyx's `hangup_cause` of a call that never got as far as its media, as outbound calls count it. */
export function hangupOutcome(cause: string | null | undefined): 'completed' | 'busy' | 'no-answer' | 'failed' | 'canceled' {
  switch (cause) {
    case 'normal_clearing':
      return 'completed';
    case 'user_busy':
    case 'call_rejected':
      return 'busy';
    case 'timeout':
    case 'no_answer':
      return 'no-answer';
    case 'originator_cancel':
      return 'canceled';
    default:
      return 'failed';
  }
}

export class TelnyxTelephony implements OutboundCarrier {
  readonly kind = 'telnyx';
  /** Set once outbound calls are wired (the runtime makes them after the carriers). */
  outbound: OutboundCalls | null = null;
  private readonly log: Logger;

  constructor(private readonly o: TelnyxTelephonyOptions) {
    this.log = o.logger.child({ component: 'calls', transport: 'telnyx' });
  }

  private streamUrl(callId: string, token: string): string {
    const base = this.o.publicUrl.replace(/^http/, 'ws').replace(/\/$/, '');
    return `${base}${MEDIA_PATH}?call_id=${encodeURIComponent(callId)}&token=${encodeURIComponent(token)}`;
  }

  /** What every stream asks of Telnyx: both tracks, RTP μ-law both ways, and the call's state on its webhooks. */
  private streamParams(callId: string, token: string) {
    return {
      stream_url: this.streamUrl(callId, token),
      stream_track: 'both_tracks',
      stream_codec: 'PCMU',
      stream_bidirectional_mode: 'rtp',
      stream_bidirectional_codec: 'PCMU',
      client_state: clientState(callId),
    };
  }

  // ------------------------------------------------------------------------------------------
  // webhooks

  /**
   * `POST /telephony/telnyx/webhook`, the body as it came (its exact bytes are signed). Nothing is
   * done for a request whose signature does not hold with the key of the organization it concerns.
   */
  async webhook(raw: string, signature: string | undefined, timestamp: string | undefined): Promise<WebhookResult> {
    let json: unknown;
    try {
      json = JSON.parse(raw);
    } catch {
      return { status: 400, message: 'body: not JSON' };
    }
    const parsed = TelnyxEvent.safeParse(json);
    if (!parsed.success) return { status: 400, message: 'body: not a Telnyx webhook ({"data": {"event_type", "payload"}})' };
    const { event_type: type, payload: p } = parsed.data.data;
    try {
      return await this.event(type, p, (account) => telnyxSignatureProblem(telnyxSettings(account)?.public_key, raw, signature, timestamp));
    } catch (err) {
      if (!isOutage(err)) throw err;
      // the key that verifies it is in the database: Telnyx sends it again later
      this.log.warn({ err, type }, 'Telnyx webhook not taken: the database or Redis does not answer');
      if (type === 'call.initiated') this.o.onUnavailable?.();
      return { status: 503, message: 'the database or Redis does not answer; send it again later' };
    }
  }

  private async event(type: string, p: Payload, problem: (account: AccountSettings) => string | null): Promise<WebhookResult> {
    const refused = (why: string | null, numberId?: string): WebhookResult => {
      this.log.warn({ type, numberId, why }, 'Telnyx webhook refused: bad or missing telnyx-signature-ed25519');
      return { status: 403, message: 'invalid signature' };
    };
    const callId = callIdOf(p.client_state);
    const record = callId ? await this.o.callStore.get(callId) : null;

    if (!record && type === 'call.initiated' && p.direction === 'incoming') {
      const to = p.to ?? '';
      const number = await this.o.store.numbers.findByNumber(to);
      if (!number) return { status: 404, message: `no number ${to || '(none)'} is registered` };
      if (number.provider !== 'telnyx') return { status: 404, message: `the number ${to} is not a Telnyx number (provider "${number.provider}")` };
      const account = await this.o.store.account.get(number.organization_id);
      const why = problem(account);
      if (why) return refused(why, number.id);
      return this.inbound(p, number, account);
    }

    // whose it is: the call's organization, else that of a Telnyx number of ours on it
    const owners = record ? [record.organization_id] : await this.numberOwners(p);
    if (owners.length === 0) return { status: 404, message: 'neither a call nor a Telnyx number of this server' };
    let account: AccountSettings | null = null;
    let why: string | null = null;
    for (const owner of owners) {
      const candidate = await this.o.store.account.get(owner);
      why = problem(candidate);
      if (!why) {
        account = candidate;
        break;
      }
    }
    if (!account) return refused(why);
    if (!record || record.status === 'ended') return { status: 204 };
    // another leg than the one we answered or placed (a transfer's): nothing of ours
    const ours = record.transport_ids.call_control_id;
    if (record.transport !== 'telnyx' || (ours && p.call_control_id && ours !== p.call_control_id)) return { status: 204 };

    switch (type) {
      case 'call.answered':
        if (record.type === 'outbound_phone_call') await this.answered(record, p, account);
        break;
      case 'call.hangup':
        await this.hungUp(record, p);
        break;
      case 'call.machine.detection.ended':
        // a machine is reported once its greeting ends (`greeting_end`), as Twilio's DetectMessageEnd does
        if (p.result === 'human') await this.outboundCalls().detected(record.id, 'human');
        else if (p.result === 'not_sure') await this.outboundCalls().detected(record.id, 'unknown');
        break;
      case 'call.machine.greeting.ended':
        await this.outboundCalls().detected(record.id, 'machine');
        break;
      case 'streaming.failed':
        this.log.warn({ callId: record.id }, 'Telnyx could not stream the call');
        break;
      default:
      // call.initiated (ours), call.bridged, streaming.started/stopped, …: the call says these itself
    }
    return { status: 204 };
  }

  /** The organizations with a Telnyx number on the call (ours is its `to` when incoming, its `from` when outgoing). */
  private async numberOwners(p: Payload): Promise<string[]> {
    const sides = p.direction === 'outgoing' ? [p.from, p.to] : [p.to, p.from];
    const owners: string[] = [];
    for (const side of new Set(sides.filter((n): n is string => !!n))) {
      const number = await this.o.store.numbers.findByNumber(side);
      if (number?.provider === 'telnyx' && !owners.includes(number.organization_id)) owners.push(number.organization_id);
    }
    return owners;
  }

  /** An incoming call, verified: taken (answered with its stream), or rejected. */
  private async inbound(p: Payload, number: PhoneNumber & { organization_id: string }, account: AccountSettings): Promise<WebhookResult> {
    const ccid = p.call_control_id;
    if (!ccid) return { status: 400, message: 'payload.call_control_id is required' };
    const ids = Object.fromEntries(
      Object.entries({ call_control_id: ccid, call_leg_id: p.call_leg_id, call_session_id: p.call_session_id }).filter(([, v]) => !!v),
    ) as Record<string, string>;
    const outcome = await this.o.calls.openInboundUnlessDown({
      number,
      account,
      customerNumber: p.from ?? '',
      transport: 'telnyx',
      transportIds: ids,
      transportKey: `telnyx:${p.call_leg_id || ccid}`,
    });
    const settings = telnyxSettings(account)!;
    const reject = (cause: 'CALL_REJECTED' | 'USER_BUSY') =>
      this.o.api.action(settings.api_key, ccid, 'reject', { cause }).catch((err: unknown) => this.log.warn({ err }, 'Telnyx did not take the reject'));
    switch (outcome.kind) {
      case 'busy':
        await reject('USER_BUSY');
        break;
      case 'unavailable':
        this.o.onUnavailable?.();
        await reject('USER_BUSY');
        break;
      case 'replay':
        // Telnyx sent it again (a retry): the call it made is the one
        break;
      case 'rejected':
        await reject('CALL_REJECTED');
        break;
      case 'accepted': {
        const record = outcome.record;
        try {
          await this.o.api.action(settings.api_key, ccid, 'answer', { ...this.streamParams(record.id, outcome.streamToken), command_id: `${record.id}:answer` });
        } catch (err) {
          this.log.error({ err, callId: record.id }, 'Telnyx did not take the answer');
          const error = callError(ErrorCodes.CALL_START_FAILED, `telnyx: the call could not be answered (${(err as Error).message})`, 'telnyx');
          await this.o.calls.endUnanswered(record.id, endedReasonFor(error), [error]);
        }
      }
    }
    return { status: 204 };
  }

  /** The callee of an outbound call answered: its stream starts (or, ended meanwhile, it is hung up). */
  private async answered(record: CallRecord, p: Payload, account: AccountSettings): Promise<void> {
    const settings = telnyxSettings(account);
    const ccid = p.call_control_id ?? record.transport_ids.call_control_id;
    if (!settings || !ccid) return;
    const ids = Object.fromEntries(
      Object.entries({ call_control_id: ccid, call_leg_id: p.call_leg_id, call_session_id: p.call_session_id }).filter(([, v]) => !!v),
    ) as Record<string, string>;
    const token = await this.o.calls.answerOutbound(record.id, ids);
    if (!token) {
      this.log.info({ callId: record.id, status: record.status }, 'an outbound call answered after it ended: hanging up');
      await this.hangUpAt(settings, ccid).catch((err: unknown) => this.log.warn({ err, callId: record.id }, 'Telnyx did not take the hang-up'));
      return;
    }
    try {
      await this.o.api.action(settings.api_key, ccid, 'streaming_start', { ...this.streamParams(record.id, token), command_id: `${record.id}:stream` });
    } catch (err) {
      this.log.error({ err, callId: record.id }, 'Telnyx did not start the stream of an answered call');
      const error = callError(ErrorCodes.CALL_START_FAILED, `telnyx: the stream could not be started (${(err as Error).message})`, 'telnyx');
      await this.o.calls.endUnanswered(record.id, endedReasonFor(error), [error]);
      await this.hangUpAt(settings, ccid).catch(() => undefined);
    }
  }

  /** Telnyx says the call is over: one that never got as far as its media ends here, with Telnyx's cause. */
  private async hungUp(record: CallRecord, p: Payload): Promise<void> {
    if (record.status !== 'queued' && record.status !== 'ringing') return; // a live call ends through its media
    if (record.type === 'outbound_phone_call') {
      const outcome = hangupOutcome(p.hangup_cause);
      const errors: CallError[] =
        outcome === 'failed'
          ? [callError(ErrorCodes.DIAL_FAILED, `telnyx: the call failed (${p.hangup_cause ?? 'no cause'}${p.sip_hangup_cause ? `, SIP ${p.sip_hangup_cause}` : ''})`, 'telnyx')]
          : [];
      await this.outboundCalls().progress(record.id, outcome, errors);
      return;
    }
    // the caller hung up while the call rang (or Telnyx could not reach the stream)
    await this.o.calls.endUnanswered(record.id, 'customer-ended-call', [callError(ErrorCodes.CALL_STREAM_LOST, 'the media stream never connected')]);
  }

  private outboundCalls(): OutboundCalls {
    if (!this.outbound) throw new Error('outbound calls are not wired');
    return this.outbound;
  }

  // ------------------------------------------------------------------------------------------
  // outbound calls

  unusable(account: AccountSettings): string | null {
    return telnyxSettings(account) ? null : 'the account has no Telnyx settings (PATCH /account with telnyx: {api_key, public_key, connection_id})';
  }

  async place(record: CallRecord, account: AccountSettings): Promise<Record<string, string>> {
    const settings = telnyxSettings(account);
    if (!settings) throw new CarrierApiError('telnyx', 'the organization has no Telnyx settings');
    if (!record.customer || !record.phone_number) throw new CarrierApiError('telnyx', 'an outbound call needs a number to call and one to call from');
    const assistant = record.assistant as { voicemail_detection?: boolean };
    const ids = await this.o.api.dial(settings.api_key, {
      connection_id: settings.connection_id,
      to: record.customer.number,
      from: record.phone_number.number,
      timeout_secs: RING_TIMEOUT_SECONDS,
      client_state: clientState(record.id),
      webhook_url: `${this.o.publicUrl.replace(/\/$/, '')}${WEBHOOK_PATH}`,
      webhook_url_method: 'POST',
      // a dial the dialler tries again is the same call at Telnyx
      command_id: record.id,
      ...(assistant.voicemail_detection ? { answering_machine_detection: 'greeting_end' } : {}),
    });
    return Object.fromEntries(Object.entries(ids).filter(([, v]) => v !== '')) as Record<string, string>;
  }

  async cancel(record: CallRecord, account: AccountSettings): Promise<void> {
    const settings = telnyxSettings(account);
    const ccid = record.transport_ids.call_control_id;
    if (!settings || !ccid) return;
    await this.hangUpAt(settings, ccid);
  }

  /** `hangup`; a call that has already ended has nothing left to hang up. */
  private async hangUpAt(settings: TelnyxSettings, ccid: string): Promise<void> {
    try {
      await this.o.api.action(settings.api_key, ccid, 'hangup', {});
    } catch (err) {
      if (err instanceof CarrierApiError && (err.carrierCode === CALL_ENDED || err.status === 404)) return;
      throw err;
    }
  }

  // ------------------------------------------------------------------------------------------
  // the media stream, and the commands a live call gives

  /** A media socket Telnyx opened to a stream URL of ours. */
  attachMedia(ws: WebSocket, query: URLSearchParams, remote: string): void {
    attachTelnyxMedia(ws, query, remote, {
      calls: this.o.calls,
      watcher: this.o.watcher,
      log: this.log,
      hangUp: (record) => this.command(record, (settings, ccid) => this.hangUpAt(settings, ccid)),
      transfer: (record, destination) =>
        this.command(record, (settings, ccid) =>
          this.o.api.action(settings.api_key, ccid, 'transfer', {
            to: destination,
            ...(record.phone_number?.number ? { from: record.phone_number.number } : {}),
          }),
        ),
    });
  }

  /** A Call Control command on a live call, with the organization's settings as they are now. */
  private async command(record: CallRecord, fn: (settings: TelnyxSettings, callControlId: string) => Promise<void>): Promise<void> {
    const account = await this.o.store.account.get(record.organization_id);
    const settings = telnyxSettings(account);
    // settings removed mid-call: a transfer must fail loudly rather than end as "transferred"
    if (!settings) throw new CarrierApiError('telnyx', 'the organization has no Telnyx settings');
    const ccid = record.transport_ids.call_control_id;
    if (!ccid) throw new CarrierApiError('telnyx', 'the call has no Telnyx call_control_id');
    await fn(settings, ccid);
  }
}
