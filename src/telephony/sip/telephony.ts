/**
 * Direct SIP as one transport (DECISIONS 15, docs/sip.md): Switchboard is a SIP user agent on
 * `SIP_PORT` (UDP and TCP). A trunk's INVITE to one of an organization's `sip` numbers runs the
 * same call-start path as a Twilio call (`CallService.openInbound`); the call's audio is RTP
 * (`RtpSession`), its hang-up a BYE, its transfer a REFER. Calls placed through the
 * organization's outbound proxy (`place`) are the same dialog the other way round.
 */
import { Counter, Histogram, type Registry } from 'prom-client';
import type { Logger } from 'pino';
import type { ActiveCall } from '../../calls/active-call.js';
import type { CallService } from '../../calls/service.js';
import type { CallRecord } from '../../calls/store.js';
import { MULAW_8K, type CallTransport } from '../../calls/transport.js';
import type { OutboundCalls, OutboundCarrier } from '../../calls/outbound-calls.js';
import { RING_TIMEOUT_SECONDS } from '../../calls/outbound-calls.js';
import type { AccountSettings } from '../../store/account.js';
import type { Store } from '../../store/index.js';
import { callRunner, type MediaLiveness, type StreamWatcher } from '../liveness.js';
import { addressAllowed, parseSipProxy } from './addresses.js';
import { answerChallenge, challenge, verifyDigest } from './digest.js';
import { remoteKey, SipEndpoint, type Remote, type ServerTransaction, type SipTimers } from './endpoint.js';
import {
  header,
  parseCSeq,
  parseNameAddr,
  parseUri,
  parseVia,
  randomToken,
  request as sipRequest,
  tagOf,
  type SipRequest,
  type SipResponse,
} from './message.js';
import { RtpPorts, RtpSession } from './rtp.js';
import { answer, isHold, negotiate, offer, type Negotiated } from './sdp.js';
import { callError, endedReasonFor, ErrorCodes, type CallError } from '../../errors.js';
import { SipTransferError } from './errors.js';

export interface SipTelephonyOptions {
  calls: CallService;
  store: Store;
  logger: Logger;
  watcher: StreamWatcher;
  liveness: MediaLiveness;
  registry: Registry;
  host: string;
  port: number;
  publicAddress?: string;
  rtpPortMin: number;
  rtpPortMax: number;
  timers?: Partial<SipTimers>;
}

/** Our digest realm: what a trunk's credentials are for. */
export const SIP_REALM = 'switchboard';
/** How long after the last audio frame we sent the far end has played it (its jitter buffer). */
const PLAYOUT_MS = 60;
const ALLOW = 'INVITE, ACK, BYE, CANCEL, OPTIONS, REFER, NOTIFY, INFO';
/** A source with this many INVITEs refused (unknown number, source or credentials) within the window… */
const REFUSALS_BEFORE_SHUNNING = 50;
const REFUSAL_WINDOW_MS = 10_000;
/** …has its INVITEs dropped unanswered for this long. */
const SHUN_MS = 60_000;
/** INVITEs of one source not known as a trunk being decided at once; more are dropped. */
const MAX_INFLIGHT_UNTRUSTED = 20;
/** A source whose INVITE was taken within this long is never shunned. */
const TRUSTED_MS = 60 * 60_000;
/** Sources tracked at once, for refusals and for trust (the oldest go first). */
const MAX_TRACKED_SOURCES = 10_000;
/** With nothing sent for this long, a frame of silence goes (RTP keep-alive). */
const KEEPALIVE_MS = 1_000;
const SILENT_FRAME = Buffer.alloc(160, 0xff);
/** How long a hang-up waits for the answer to its BYE before the call goes on ending. */
const BYE_WAIT_MS = 2_000;

/** A number as a Request-URI's user part gives it (`+15550001111`, `15550001111`) → E.164, or null. */
export function calledNumber(user: string): string | null {
  const digits = user.replace(/[-.() ]/g, '');
  const e164 = digits.startsWith('+') ? digits : `+${digits}`;
  return /^\+[1-9]\d{1,14}$/.test(e164) ? e164 : null;
}

/** One SIP dialog: a call's signalling and its media. */
interface Dialog {
  sipCallId: string;
  localTag: string;
  remoteTag: string;
  /** Our From/To as the dialog's requests carry them (local first). */
  localUri: string;
  remoteUri: string;
  /** Where in-dialog requests go: the peer's Contact. */
  remoteTarget: string;
  remote: Remote;
  localSeq: number;
  routeSet: string[];
  rtp: RtpSession;
  rtpPort: number;
  sessionId: number;
  sdpVersion: number;
  negotiated: Negotiated;
  callId: string;
  call: ActiveCall | null;
  /** The dialog is over (BYE sent or received, or never confirmed). */
  ended: boolean;
  /** Undone on close: the liveness watch, mark timers. */
  cleanups: (() => void)[];
  direction: 'inbound' | 'outbound';
}

export class SipTelephony implements OutboundCarrier {
  readonly kind = 'sip';
  readonly endpoint: SipEndpoint;
  /** Set once outbound calls are wired (the runtime makes them after the transport). */
  outbound: OutboundCalls | null = null;
  private readonly ports: RtpPorts;
  private readonly dialogs = new Map<string, Dialog>();
  /** Outbound INVITEs not answered yet, by call id: what a cancel stops. */
  private readonly pending = new Map<string, { cancel: () => void }>();
  /** Refused INVITEs per source address, and until when a source is not heard (`shunned`). */
  private readonly refusals = new Map<string, { since: number; count: number; until: number }>();
  /** Sources whose INVITEs were taken (allowed, or authenticated), and when last: never shunned. */
  private readonly trusted = new Map<string, number>();
  /** INVITEs being decided (looked up, authenticated, opened), per source. */
  private readonly inflight = new Map<string, number>();
  private readonly log: Logger;
  private readonly m: {
    requests: Counter<'method'>;
    responses: Counter<'code'>;
    parseErrors: Counter;
    timeouts: Counter<'method'>;
    refused: Counter<'reason'>;
    rtpLost: Counter;
    rtpLate: Counter;
    rtpWrongSource: Counter;
    jitter: Histogram;
    lossRatio: Histogram;
  };

  constructor(private readonly o: SipTelephonyOptions) {
    this.log = o.logger.child({ component: 'calls', transport: 'sip' });
    const registers = [o.registry];
    this.m = {
      requests: new Counter({ name: 'switchboard_sip_requests_total', help: 'SIP requests received (retransmissions not counted), by method.', labelNames: ['method'], registers }),
      responses: new Counter({ name: 'switchboard_sip_responses_total', help: 'SIP responses received, by status code.', labelNames: ['code'], registers }),
      parseErrors: new Counter({ name: 'switchboard_sip_parse_errors_total', help: 'SIP messages dropped because they did not parse.', registers }),
      timeouts: new Counter({ name: 'switchboard_sip_transaction_timeouts_total', help: 'Our SIP requests that got no final response, by method.', labelNames: ['method'], registers }),
      refused: new Counter({
        name: 'switchboard_sip_invites_refused_total',
        help: 'INVITEs refused before any answer, by reason (source, credentials, number, media, busy, rejected).',
        labelNames: ['reason'],
        registers,
      }),
      rtpLost: new Counter({ name: 'switchboard_rtp_packets_lost_total', help: 'Caller RTP packets that never arrived (or too late to play).', registers }),
      rtpLate: new Counter({ name: 'switchboard_rtp_packets_late_total', help: 'Caller RTP packets that arrived after their turn, or twice.', registers }),
      rtpWrongSource: new Counter({ name: 'switchboard_rtp_wrong_source_total', help: "RTP packets dropped because they came from another address than the call's peer.", registers }),
      jitter: new Histogram({
        name: 'switchboard_rtp_jitter_seconds',
        help: "Each SIP call's RTP interarrival jitter at its end (RFC 3550).",
        buckets: [0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.08, 0.16],
        registers,
      }),
      lossRatio: new Histogram({
        name: 'switchboard_rtp_loss_ratio',
        help: "Each SIP call's share of caller RTP packets lost.",
        buckets: [0, 0.001, 0.01, 0.02, 0.05, 0.1, 0.25, 1],
        registers,
      }),
    };
    this.ports = new RtpPorts(o.rtpPortMin, o.rtpPortMax);
    this.endpoint = new SipEndpoint({
      host: o.host,
      port: o.port,
      ...(o.publicAddress ? { publicAddress: o.publicAddress } : {}),
      logger: this.log,
      ...(o.timers ? { timers: o.timers } : {}),
      onRequest: (req, remote, tx) => this.onRequest(req, remote, tx),
      inUse: (remote) => [...this.dialogs.values()].some((d) => remoteKey(d.remote) === remoteKey(remote)),
      count: (what) => {
        const [kind, value = ''] = what.split(':');
        if (kind === 'parse_error') this.m.parseErrors.inc();
        else if (kind === 'request') this.m.requests.inc({ method: value });
        else if (kind === 'response') this.m.responses.inc({ code: value });
        else if (kind === 'timeout') this.m.timeouts.inc({ method: value });
      },
    });
  }

  async start(): Promise<void> {
    await this.endpoint.start();
    this.log.info({ port: this.endpoint.port, publicAddress: this.endpoint.publicAddress }, 'SIP endpoint listening (UDP and TCP)');
  }

  get port(): number {
    return this.endpoint.port;
  }

  /** Live SIP dialogs (calls) on this process. */
  get dialogCount(): number {
    return this.dialogs.size;
  }

  private contact(protocol: Remote['protocol']): string {
    return `<sip:switchboard@${this.endpoint.sentBy}${protocol === 'TCP' ? ';transport=tcp' : ''}>`;
  }

  // ------------------------------------------------------------------------------------------
  // requests from peers

  private onRequest(req: SipRequest, remote: Remote, tx: ServerTransaction): void {
    // a dialog is its Call-ID and our tag, which the peer's requests carry in To
    const inDialog = this.dialogs.get(dialogKey(header(req, 'call-id')!, tagOf(header(req, 'to')))) ?? null;
    switch (req.method) {
      case 'INVITE':
        if (tagOf(header(req, 'to'))) return this.reInvite(req, tx, inDialog);
        if (this.shunned(remote.address) || this.tooMany(remote.address)) {
          this.m.refused.inc({ reason: 'shunned' });
          return tx.finish();
        }
        this.inflight.set(remote.address, (this.inflight.get(remote.address) ?? 0) + 1);
        void this.invite(req, remote, tx)
          .catch((err: unknown) => {
            this.log.error({ err }, 'INVITE handling failed');
            if (!tx.last || tx.last.status < 200) tx.respond(500, 'Server Internal Error');
          })
          .finally(() => {
            const n = (this.inflight.get(remote.address) ?? 1) - 1;
            if (n > 0) this.inflight.set(remote.address, n);
            else this.inflight.delete(remote.address);
          });
        return;
      case 'BYE':
        if (!inDialog) return void tx.respond(481, 'Call/Transaction Does Not Exist');
        tx.respond(200, 'OK');
        inDialog.ended = true;
        this.toCall(inDialog, 'hang-up', (c) => c.callerHungUp());
        return;
      case 'OPTIONS':
        return void tx.respond(200, 'OK', randomToken(), [
          ['allow', ALLOW],
          ['accept', 'application/sdp'],
        ]);
      case 'NOTIFY':
        // a transfer's progress (RFC 3515 sipfrag); the call ends as transferred on the 202 already
        if (!inDialog) return void tx.respond(481, 'Call/Transaction Does Not Exist');
        tx.respond(200, 'OK');
        this.log.debug({ callId: inDialog.callId, sipfrag: req.body.toString('latin1').split('\r\n')[0] }, 'transfer progress');
        return;
      case 'INFO': {
        // key presses as SIP INFO (application/dtmf-relay), for trunks that send them so
        if (!inDialog) return void tx.respond(481, 'Call/Transaction Does Not Exist');
        tx.respond(200, 'OK');
        const signal = /Signal\s*=\s*([0-9*#A-D])/i.exec(req.body.toString('latin1'));
        if (signal) this.toCall(inDialog, 'key press', (c) => c.dtmf(signal[1]!.toUpperCase()));
        return;
      }
      case 'CANCEL':
      case 'ACK':
        return; // the endpoint answers these
      default:
        tx.respond(405, 'Method Not Allowed', randomToken(), [['allow', ALLOW]]);
    }
  }

  /**
   * A source whose INVITEs keep being refused (a scanner, a misconfigured trunk) is not heard
   * for a while: its INVITEs are dropped unanswered, so that a flood costs no lookups.
   */
  private shunned(address: string, now = Date.now()): boolean {
    const entry = this.refusals.get(address);
    return !!entry && entry.until > now;
  }

  /** A source not known as a trunk has at most this many INVITEs being looked up at once. */
  private tooMany(address: string, now = Date.now()): boolean {
    const trusted = this.trusted.get(address);
    if (trusted !== undefined && now - trusted < TRUSTED_MS) return false;
    return (this.inflight.get(address) ?? 0) >= MAX_INFLIGHT_UNTRUSTED;
  }

  private noteRefusal(address: string, now = Date.now()): void {
    // a source whose calls were taken lately is a trunk: its refusals (a robocall burst to a
    // released number, one customer's wrong settings, a spoofed flood) never shun the others' calls
    const trusted = this.trusted.get(address);
    if (trusted !== undefined && now - trusted < TRUSTED_MS) return;
    let entry = this.refusals.get(address);
    if (!entry || now - entry.since > REFUSAL_WINDOW_MS) {
      this.refusals.delete(address);
      if (this.refusals.size >= MAX_TRACKED_SOURCES) this.refusals.delete(this.refusals.keys().next().value!);
      entry = { since: now, count: 0, until: 0 };
      this.refusals.set(address, entry);
    }
    if (++entry.count >= REFUSALS_BEFORE_SHUNNING && entry.until <= now) {
      entry.until = now + SHUN_MS;
      this.log.warn({ source: address, refused: entry.count, seconds: SHUN_MS / 1000 }, 'a source keeps sending INVITEs that are refused: its INVITEs are dropped for a while');
    }
  }

  private refuse(tx: ServerTransaction, status: number, reason: string, why: string, remote: Remote, extra: [string, string][] = []): void {
    this.m.refused.inc({ reason: why });
    if (why === 'number' || why === 'source' || why === 'credentials') this.noteRefusal(remote.address);
    this.log.warn({ remote: remoteKey(remote), status, why, to: header(tx.request, 'to') }, 'INVITE refused');
    tx.respond(status, reason, randomToken(), extra);
  }

  /** A new call from a trunk. */
  private async invite(req: SipRequest, remote: Remote, tx: ServerTransaction): Promise<void> {
    // a CANCEL may come at any await below: it is answered 487 at once, and checked after each
    const localTag = randomToken();
    tx.onCancel(() => tx.respond(487, 'Request Terminated', localTag));
    const canceled = () => tx.cancelRequested;
    const uri = parseUri(req.uri);
    const e164 = uri ? calledNumber(uri.user) : null;
    if (!e164) return this.refuse(tx, 404, 'Not Found', 'number', remote);
    const number = await this.o.store.numbers.findByNumber(e164);
    if (canceled()) return;
    if (!number || number.provider !== 'sip') return this.refuse(tx, 404, 'Not Found', 'number', remote);
    const account = await this.o.store.account.get(number.organization_id);
    if (canceled()) return;
    const inbound = account.sip?.inbound;
    const trusted = !!inbound && addressAllowed(remote.address, inbound.allowed_addresses);
    if (!trusted) {
      if (!inbound?.username || !inbound.password) return this.refuse(tx, 403, 'Forbidden', 'source', remote);
      const check = verifyDigest(header(req, 'authorization'), 'INVITE', { username: inbound.username, password: inbound.password }, SIP_REALM, req.uri);
      if (check === 'missing' || check === 'stale') {
        this.m.refused.inc({ reason: 'credentials' });
        tx.respond(401, 'Unauthorized', randomToken(), [['www-authenticate', challenge(SIP_REALM, check === 'stale')]]);
        return;
      }
      if (check === 'wrong') return this.refuse(tx, 403, 'Forbidden', 'credentials', remote);
    }
    this.trust(remote.address);
    if (!this.o.calls.isAccepting()) return this.refuse(tx, 486, 'Busy Here', 'busy', remote);
    const negotiated = negotiate(req.body.toString('latin1'));
    if ('problem' in negotiated) {
      return this.refuse(tx, 488, 'Not Acceptable Here', 'media', remote, [['warning', `305 switchboard "${negotiated.problem}"`]]);
    }
    tx.respond(180, 'Ringing', localTag);
    const from = parseNameAddr(header(req, 'from')!);
    const fromUri = from ? parseUri(from.uri) : null;
    const sipCallId = header(req, 'call-id')!;
    const fromTag = tagOf(header(req, 'from'));
    const outcome = await this.o.calls.openInbound({
      number,
      account,
      customerNumber: fromUri ? (calledNumber(fromUri.user) ?? fromUri.user) : '',
      transport: 'sip',
      transportIds: { sip_call_id: sipCallId, from_tag: fromTag },
      transportKey: `sip:${sipCallId}:${fromTag}`,
    });
    switch (outcome.kind) {
      case 'busy':
        return this.refuse(tx, 486, 'Busy Here', 'busy', remote);
      case 'replay':
        return this.refuse(tx, 482, 'Loop Detected', 'replay', remote);
      case 'rejected': {
        const why = outcome.record.errors[0]?.message ?? 'the call-start checks failed';
        return this.refuse(tx, 403, 'Forbidden', 'rejected', remote, [['reason', `SIP;cause=403;text="${why.replace(/["\\\r\n]/g, "'").slice(0, 200)}"`]]);
      }
      case 'accepted':
        break;
    }
    const record = outcome.record;
    const unanswered = async (status: number, reason: string, why: string, errors: CallError[]) => {
      if (!canceled()) this.refuse(tx, status, reason, why, remote);
      if (canceled()) await this.o.calls.endUnanswered(record.id, 'customer-ended-call', [callError(ErrorCodes.CALL_CANCELED, 'sip: the caller canceled the call before it was answered', 'sip')]);
      else await this.o.calls.endUnanswered(record.id, endedReasonFor(errors[0] ?? callError(ErrorCodes.CALL_START_FAILED, 'sip: the call could not start', 'sip')), errors);
    };
    if (canceled()) return unanswered(487, 'Request Terminated', 'canceled', []);
    if (!(await this.o.calls.claimStream(record.id, outcome.streamToken))) {
      return unanswered(480, 'Temporarily Unavailable', 'ended', [callError(ErrorCodes.CALL_START_FAILED, 'sip: the call ended before it was answered', 'sip')]);
    }
    let media: Awaited<ReturnType<RtpPorts['allocate']>>;
    try {
      media = await this.ports.allocate(this.o.host);
    } catch (err) {
      this.log.error({ err, callId: record.id }, 'no RTP port for a call');
      return unanswered(503, 'Service Unavailable', 'ports', [callError(ErrorCodes.CALL_START_FAILED, `sip: ${(err as Error).message}`, 'sip')]);
    }
    if (canceled()) {
      releaseSockets(media, this.ports);
      return unanswered(487, 'Request Terminated', 'canceled', []);
    }
    const contact = parseNameAddr(header(req, 'contact') ?? '')?.uri ?? from?.uri ?? req.uri;
    const dialog = this.newDialog({
      direction: 'inbound',
      sipCallId,
      localTag,
      remoteTag: fromTag,
      localUri: header(req, 'to')!,
      remoteUri: header(req, 'from')!,
      remoteTarget: contact,
      remote,
      routeSet: req.headers.get('record-route') ?? [],
      media,
      negotiated,
      callId: record.id,
      signallingAddress: remote.address,
    });
    tx.respond(200, 'OK', localTag, [['contact', this.contact(remote.protocol)], ['allow', ALLOW], ['content-type', 'application/sdp']], Buffer.from(answer(this.localMedia(dialog), negotiated)));
    tx.onNoAck = () => {
      this.log.warn({ callId: record.id }, 'no ACK for our 200 OK: the call is over');
      this.toCall(dialog, 'far end gone', (c) => c.farEndGone('sip: the caller never acknowledged the answer (no ACK)'));
    };
    await this.startCall(dialog);
  }

  /** A source whose INVITE was taken: it is a trunk, never shunned for a while. */
  private trust(address: string): void {
    this.trusted.delete(address);
    if (this.trusted.size >= MAX_TRACKED_SOURCES) this.trusted.delete(this.trusted.keys().next().value!);
    this.trusted.set(address, Date.now());
    this.refusals.delete(address);
  }

  private localMedia(d: Dialog) {
    return { address: this.endpoint.publicAddress, port: d.rtpPort, sessionId: d.sessionId, version: d.sdpVersion };
  }

  private newDialog(
    o: Pick<Dialog, 'direction' | 'sipCallId' | 'localTag' | 'remoteTag' | 'localUri' | 'remoteUri' | 'remoteTarget' | 'remote' | 'routeSet' | 'callId'> & {
      media: Awaited<ReturnType<RtpPorts['allocate']>>;
      negotiated: Negotiated;
      signallingAddress: string;
      localSeq?: number;
    },
  ): Dialog {
    let dialog: Dialog | null = null;
    const rtp = new RtpSession({
      rtp: o.media.rtp,
      rtcp: o.media.rtcp,
      port: o.media.port,
      codec: o.negotiated.codec,
      payload: o.negotiated.payload,
      dtmfPayload: o.negotiated.dtmfPayload,
      remote: { address: o.negotiated.address, port: o.negotiated.port },
      signallingAddress: o.signallingAddress,
      logger: this.log,
      onAudio: (frame) => dialog && this.toCall(dialog, 'caller audio', (c) => c.audio(frame)),
      onDtmf: (digit) => dialog && this.toCall(dialog, 'key press', (c) => c.dtmf(digit)),
    });
    dialog = {
      direction: o.direction,
      sipCallId: o.sipCallId,
      localTag: o.localTag,
      remoteTag: o.remoteTag,
      localUri: o.localUri,
      remoteUri: o.remoteUri,
      remoteTarget: o.remoteTarget,
      remote: o.remote,
      localSeq: o.localSeq ?? Math.floor(Math.random() * 10_000) + 1,
      routeSet: o.routeSet,
      rtp,
      rtpPort: o.media.port,
      sessionId: Math.floor(Math.random() * 1e9),
      sdpVersion: 1,
      negotiated: o.negotiated,
      callId: o.callId,
      call: null,
      ended: false,
      cleanups: [],
    };
    rtp.holding = isHold(o.negotiated);
    this.dialogs.set(dialogKey(o.sipCallId, o.localTag), dialog);
    return dialog;
  }

  /** The dialog is answered: the call starts on it. */
  private async startCall(dialog: Dialog): Promise<void> {
    let call: ActiveCall | null;
    try {
      call = await this.o.calls.connectClaimed(dialog.callId, (record) => this.transport(dialog, record));
    } catch (err) {
      // answered, but the call could not start: the far end must not stay on a call with nobody
      this.log.error({ err, callId: dialog.callId }, 'the call could not start on its answered dialog');
      await this.bye(dialog);
      this.release(dialog);
      return;
    }
    if (!call) {
      this.log.warn({ callId: dialog.callId }, 'the call ended before its media started');
      await this.bye(dialog);
      this.release(dialog);
      return;
    }
    dialog.call = call;
    if (dialog.ended) this.toCall(dialog, 'hang-up', (c) => c.callerHungUp());
  }

  private toCall(dialog: Dialog, what: string, fn: (call: ActiveCall) => void): void {
    callRunner(() => dialog.call)(what, fn);
  }

  /** A re-INVITE in the dialog (a session refresh, hold, a new media address): the same answer. */
  private reInvite(req: SipRequest, tx: ServerTransaction, dialog: Dialog | null): void {
    if (!dialog || dialog.ended) return void tx.respond(481, 'Call/Transaction Does Not Exist');
    if (req.body.length > 0) {
      const n = negotiate(req.body.toString('latin1'), [dialog.negotiated.codec]);
      if ('problem' in n) return void tx.respond(488, 'Not Acceptable Here');
      if (n.address !== dialog.negotiated.address || n.port !== dialog.negotiated.port) dialog.rtp.retarget({ address: n.address, port: n.port });
      dialog.negotiated = { ...dialog.negotiated, address: n.address, port: n.port, direction: n.direction, declined: n.declined, audioIndex: n.audioIndex };
      // a hold: we send nothing while the peer does not listen, and wait for its audio no more
      dialog.rtp.holding = isHold(n);
      dialog.rtp.lastPacketAt = performance.now();
    }
    dialog.sdpVersion++;
    tx.respond(200, 'OK', dialog.localTag, [['contact', this.contact(dialog.remote.protocol)], ['content-type', 'application/sdp']], Buffer.from(answer(this.localMedia(dialog), dialog.negotiated)));
  }

  // ------------------------------------------------------------------------------------------
  // the call's transport

  private transport(dialog: Dialog, record: CallRecord): CallTransport {
    let audioEndsAt = 0;
    const marks = new Map<NodeJS.Timeout, string>();
    const call = () => dialog.call;
    const played = (timer: NodeJS.Timeout) => {
      const name = marks.get(timer);
      marks.delete(timer);
      if (name !== undefined) this.toCall(dialog, 'mark', (c) => c.played(name));
    };
    const unwatch = this.o.watcher.watch((now) => {
      if (dialog.ended || !call()) return;
      // on hold (the peer sends nothing while `inactive` or `recvonly`), silence is not a hang-up
      const peerSilent = dialog.negotiated.direction === 'inactive' || dialog.negotiated.direction === 'recvonly';
      if (peerSilent) dialog.rtp.lastPacketAt = now;
      // while the assistant is silent, a packet of silence now and then: a trunk's RTP timeout
      // and the NAT path to it must not take a long caller turn for a dead call
      if (now - dialog.rtp.lastSentAt > KEEPALIVE_MS) dialog.rtp.send(SILENT_FRAME);
      if (now - dialog.rtp.lastPacketAt > this.o.liveness.idleMs) {
        const why = `no RTP from the far end for ${Math.round((now - dialog.rtp.lastPacketAt) / 1000)} s`;
        this.toCall(dialog, 'far end gone', (c) => c.farEndGone(why));
      }
    });
    dialog.cleanups.push(unwatch, () => {
      for (const timer of marks.keys()) clearTimeout(timer);
      marks.clear();
    });
    return {
      kind: 'sip',
      audioFormat: MULAW_8K,
      sendAudio: (frame) => {
        if (dialog.ended) return;
        const now = performance.now();
        audioEndsAt = Math.max(audioEndsAt, now) + (frame.length / 8);
        dialog.rtp.send(frame);
      },
      // RTP has no marks: the audio before one has played once its time has passed at the far end
      mark: (name) => {
        const timer: NodeJS.Timeout = setTimeout(() => played(timer), Math.max(0, audioEndsAt - performance.now()) + PLAYOUT_MS);
        marks.set(timer, name);
      },
      clear: () => {
        // what was sent is sent; what the call has not sent yet never goes. Pending marks come back.
        audioEndsAt = performance.now();
        for (const timer of [...marks.keys()]) {
          clearTimeout(timer);
          played(timer);
        }
        dialog.rtp.silence();
      },
      hangUp: async () => {
        await this.bye(dialog);
      },
      transfer: async (destination) => {
        const account = await this.o.store.account.get(record.organization_id);
        const proxy = account.sip?.outbound ? parseSipProxy(account.sip.outbound.proxy) : null;
        const host = proxy ? `${proxy.host}${proxy.port !== 5060 ? `:${proxy.port}` : ''}` : (parseUri(dialog.remoteTarget)?.host ?? dialog.remote.address);
        const referTo = `<sip:${destination}@${host}>`;
        const response = await this.inDialog(dialog, 'REFER', [
          ['refer-to', referTo],
          ['referred-by', `<sip:${record.phone_number?.number ?? 'switchboard'}@${this.endpoint.publicAddress}>`],
        ]);
        if (response.status < 200 || response.status >= 300) {
          throw new SipTransferError(`sip: the far end refused the transfer (REFER answered ${response.status} ${response.reason})`, response.status);
        }
        this.log.info({ callId: record.id, referTo }, 'transfer taken by the far end (REFER accepted)');
      },
      close: () => {
        void this.bye(dialog).finally(() => this.release(dialog));
      },
    };
  }

  /** A request in the dialog (BYE, REFER); resolves to its final response. */
  private inDialog(dialog: Dialog, method: string, extra: [string, string][] = []): Promise<SipResponse> {
    dialog.localSeq++;
    const from = dialog.direction === 'inbound' ? `${dialog.localUri.replace(/;tag=[^;]*/, '')};tag=${dialog.localTag}` : dialog.localUri;
    const to = dialog.direction === 'inbound' ? dialog.remoteUri : dialog.remoteUri;
    const req = sipRequest(method, dialog.remoteTarget, [
      ['from', from],
      ['to', to],
      ['call-id', dialog.sipCallId],
      ['cseq', `${dialog.localSeq} ${method}`],
      ['contact', this.contact(dialog.remote.protocol)],
      ...dialog.routeSet.map((r): [string, string] => ['route', r]),
      ['user-agent', 'Switchboard'],
      ...extra,
    ]);
    return this.endpoint.request(req, this.targetOf(dialog));
  }

  /**
   * Where a dialog's requests go: the peer's signalling address (symmetric, for NAT). Over TCP,
   * once that connection is gone, the peer's Contact (its source port was an ephemeral one).
   */
  private targetOf(dialog: Dialog): Remote {
    if (dialog.remote.protocol !== 'TCP' || this.endpoint.connected(dialog.remote)) return dialog.remote;
    const contact = parseUri(dialog.remoteTarget);
    return contact ? { protocol: 'TCP', address: contact.host, port: contact.port ?? 5060 } : dialog.remote;
  }

  /**
   * Ends the dialog with a BYE. Waits at most `waitMs` for its answer: a peer that never answers
   * (gone, or unreachable) must not hold the call's end; the transaction retransmits on its own.
   */
  private async bye(dialog: Dialog, waitMs = BYE_WAIT_MS): Promise<void> {
    if (dialog.ended) return;
    dialog.ended = true;
    const answered = this.inDialog(dialog, 'BYE').then((response) => {
      if (response.status >= 300) this.log.debug({ callId: dialog.callId, status: response.status }, 'BYE answered with an error');
    });
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([answered, new Promise<void>((resolve) => (timer = setTimeout(resolve, waitMs)))]);
    clearTimeout(timer);
  }

  /** The dialog's media and timers go; its RTP figures are counted. */
  private release(dialog: Dialog): void {
    const key = dialogKey(dialog.sipCallId, dialog.localTag);
    if (this.dialogs.get(key) !== dialog) return;
    this.dialogs.delete(key);
    for (const undo of dialog.cleanups.splice(0)) undo();
    const s = dialog.rtp.stats;
    dialog.rtp.close();
    this.ports.release(dialog.rtpPort);
    this.m.rtpLost.inc(s.lost);
    this.m.rtpLate.inc(s.late);
    this.m.rtpWrongSource.inc(s.wrongSource);
    if (s.received > 0) {
      this.m.jitter.observe(s.jitterMs / 1000);
      this.m.lossRatio.observe(s.lost / (s.received + s.lost));
    }
    this.log.info({ callId: dialog.callId, rtp: { ...s, jitterMs: Math.round(s.jitterMs * 10) / 10 } }, 'SIP call over');
  }

  // ------------------------------------------------------------------------------------------
  // placing calls through the organization's trunk

  unusable(account: AccountSettings): string | null {
    if (!account.sip?.outbound) return 'the account has no SIP trunk for outbound calls (PATCH /account with sip.outbound)';
    return parseSipProxy(account.sip.outbound.proxy) ? null : 'the account\'s sip.outbound.proxy is not a sip: URI';
  }

  /**
   * Places the call: an INVITE to the proxy (answering its digest challenge), then the call's
   * progress from the responses. Resolves once the proxy took the INVITE (its first answer);
   * ringing, busy, no answer and the answer itself follow from the later responses.
   */
  async place(record: CallRecord, account: AccountSettings): Promise<Record<string, string>> {
    const trunk = account.sip?.outbound;
    const proxy = trunk ? parseSipProxy(trunk.proxy) : null;
    if (!trunk || !proxy) throw new Error(this.unusable(account) ?? 'no SIP trunk');
    if (!record.customer || !record.phone_number) throw new Error('an outbound call needs a number to call and one to call from');
    let media: Awaited<ReturnType<RtpPorts['allocate']>>;
    try {
      media = await this.ports.allocate(this.o.host);
    } catch (err) {
      // this process is full: back to the queue, tried again later (the dialler's retry)
      throw Object.assign(new Error(`no RTP port for the call: ${(err as Error).message}`), { status: 503 });
    }
    const remote: Remote = { protocol: proxy.protocol, address: proxy.host, port: proxy.port };
    const sipCallId = `${randomToken(12)}@${this.endpoint.publicAddress}`;
    const localTag = randomToken();
    const hostPart = `${proxy.host}${proxy.port !== 5060 ? `:${proxy.port}` : ''}`;
    const target = `sip:${record.customer.number}@${hostPart}${proxy.protocol === 'TCP' ? ';transport=tcp' : ''}`;
    const callerId = trunk.caller_id ?? record.phone_number.number;
    const from = `<sip:${callerId}@${this.endpoint.publicAddress}>;tag=${localTag}`;
    const to = `<sip:${record.customer.number}@${hostPart}>`;
    const sessionId = Math.floor(Math.random() * 1e9);
    const body = Buffer.from(offer({ address: this.endpoint.publicAddress, port: media.port, sessionId }));
    let seq = 1;
    const build = (auth?: [string, string]) =>
      sipRequest('INVITE', target, [
        ['from', from],
        ['to', to],
        ['call-id', sipCallId],
        ['cseq', `${seq} INVITE`],
        ['contact', this.contact(remote.protocol)],
        ['allow', ALLOW],
        ['user-agent', 'Switchboard'],
        ['content-type', 'application/sdp'],
        ...(auth ? [auth] : []),
      ], body);
    const ids = { sip_call_id: sipCallId, from_tag: localTag };
    // `place` resolves (the trunk took the INVITE) or rejects once; what the trunk says after
    // that is the call's progress (`settle` says which way it still can go)
    let settled = false;
    let resolveTaken: (ids: Record<string, string>) => void = () => undefined;
    let rejectTaken: (err: Error) => void = () => undefined;
    const taken = new Promise<Record<string, string>>((resolve, reject) => {
      resolveTaken = resolve;
      rejectTaken = reject;
    });
    const tookIt = () => {
      if (settled) return;
      settled = true;
      resolveTaken(ids);
    };
    /** A failure: a refusal of the dial while unsettled, else the call's end with the carrier's reason. */
    const failed = async (err: Error & { status?: number }, outcome: ReturnType<typeof sipOutcome>, errors: CallError[]) => {
      if (!settled) {
        settled = true;
        rejectTaken(err);
        return;
      }
      await this.outboundCalls().progress(record.id, outcome, errors);
    };
    let current = build();
    let inviteBranch = '';
    let canceled = false;
    let cancelSent = false;
    let provisional = false;
    let ack: SipRequest | null = null;
    /** Asked to stop ringing: the CANCEL goes once the trunk has answered provisionally (RFC 3261 §9.1). */
    const cancel = () => {
      canceled = true;
      if (cancelSent || !inviteBranch || !provisional) return;
      cancelSent = true;
      // a CANCEL is a transaction of its own, on the INVITE's branch (RFC 3261 §9.1)
      const c = sipRequest('CANCEL', current.uri, [
        ['from', header(current, 'from')!],
        ['to', header(current, 'to')!],
        ['call-id', sipCallId],
        ['cseq', `${seq} CANCEL`],
      ]);
      void this.endpoint.request(c, remote, undefined, { branch: inviteBranch });
    };
    this.pending.set(record.id, { cancel });
    const ringLimit = setTimeout(() => cancel(), RING_TIMEOUT_SECONDS * 1000);
    let dialog: Dialog | null = null;
    void (async () => {
      let response: SipResponse;
      let ringing = false;
      for (let attempt = 0; ; attempt++) {
        const sent = this.endpoint.request(
          current,
          remote,
          (answer) => {
            tookIt();
            provisional = true;
            if (canceled) cancel();
            if (!ringing && (answer.status === 180 || answer.status === 183)) ringing = true;
          },
          // the 200 is sent again until our ACK arrives: each copy gets the ACK again
          { onFinalCopy: () => ack && this.endpoint.send(ack, remote) },
        );
        inviteBranch = parseVia(header(current, 'via')!)?.params.get('branch') ?? '';
        provisional = false;
        cancelSent = false;
        response = await sent;
        if ((response.status === 401 || response.status === 407) && attempt === 0 && trunk.username && trunk.password && !canceled) {
          const challengeValue = header(response, response.status === 401 ? 'www-authenticate' : 'proxy-authenticate');
          const auth = challengeValue ? answerChallenge(challengeValue, 'INVITE', target, { username: trunk.username, password: trunk.password }) : null;
          if (auth) {
            seq++;
            current = build([response.status === 401 ? 'authorization' : 'proxy-authorization', auth]);
            continue;
          }
        }
        break;
      }
      clearTimeout(ringLimit);
      this.pending.delete(record.id);
      if (response.status >= 300 || response.status < 200) {
        releaseSockets(media, this.ports);
        const status = `${response.status} ${response.reason}`;
        if (canceled) return void (await failed(new Error(`canceled (${status})`), 'no-answer', []));
        if (response.status === 408 && !ringing) {
          // no answer at all: the trunk never took it
          return void (await failed(Object.assign(new Error(`the trunk did not answer the INVITE (${status})`), { status: 408 }), 'failed', [callError(ErrorCodes.DIAL_FAILED, `sip: the trunk did not answer the INVITE (${status})`, 'sip')]));
        }
        if (response.status === 401 || response.status === 407 || response.status === 403) {
          return void (await failed(Object.assign(new Error(`the trunk refused the call (${status})`), { status: response.status }), 'failed', [callError(ErrorCodes.DIAL_FAILED, `sip: the trunk refused the call (${status})`, 'sip')]));
        }
        tookIt();
        const outcome = sipOutcome(response.status);
        await this.outboundCalls().progress(record.id, outcome, outcome === 'failed' ? [callError(ErrorCodes.DIAL_FAILED, `sip: the call failed (${status})`, 'sip')] : []);
        return;
      }
      // answered: the ACK (a request of its own, sent again for each copy of the 200), then the dialog
      tookIt();
      const remoteTarget = parseNameAddr(header(response, 'contact') ?? '')?.uri ?? target;
      const routeSet = [...(response.headers.get('record-route') ?? [])].reverse();
      ack = sipRequest('ACK', remoteTarget, [
        ['from', from],
        ['to', header(response, 'to')!],
        ['call-id', sipCallId],
        ['cseq', `${parseCSeq(header(current, 'cseq')!)!.seq} ACK`],
        ['max-forwards', '70'],
        ...routeSet.map((r): [string, string] => ['route', r]),
      ]);
      ack.headers.set('via', [this.endpoint.via(remote)]);
      this.endpoint.send(ack, remote);
      const negotiated = negotiate(response.body.toString('latin1'));
      const dialogBase = {
        direction: 'outbound' as const,
        sipCallId,
        localTag,
        remoteTag: tagOf(header(response, 'to')),
        localUri: from,
        remoteUri: header(response, 'to')!,
        remoteTarget,
        remote,
        routeSet,
        localSeq: seq,
        callId: record.id,
        signallingAddress: remote.address,
      };
      if (canceled) {
        // answered after we gave up (the ring limit, or the API): hung up at once
        const d = this.newDialog({ ...dialogBase, media, negotiated: 'problem' in negotiated ? deadMedia : negotiated });
        await this.bye(d);
        this.release(d);
        await this.outboundCalls().progress(record.id, 'no-answer', []);
        return;
      }
      if ('problem' in negotiated) {
        // answered with media we cannot take: hung up at once
        const d = this.newDialog({ ...dialogBase, media, negotiated: deadMedia });
        await this.bye(d);
        this.release(d);
        await this.o.calls.endUnanswered(record.id, 'dial-failed', [callError(ErrorCodes.DIAL_FAILED, `sip: the answer's SDP: ${negotiated.problem}`, 'sip')]);
        return;
      }
      // the dialog first, so that a BYE while the call is being connected finds it
      dialog = this.newDialog({ ...dialogBase, media, negotiated });
      const token = await this.o.calls.answerOutbound(record.id, ids);
      if (!token || !(await this.o.calls.claimStream(record.id, token))) {
        this.log.info({ callId: record.id }, 'an outbound call answered after it ended: hanging up');
        await this.bye(dialog);
        this.release(dialog);
        return;
      }
      await this.startCall(dialog);
    })().catch(async (err: unknown) => {
      clearTimeout(ringLimit);
      this.pending.delete(record.id);
      this.log.error({ err, callId: record.id }, 'outbound SIP call failed');
      // nothing of it may stay: the callee is hung up on, the ports go back, the call ends
      if (dialog) {
        await this.bye(dialog).catch(() => undefined);
        this.release(dialog);
      } else {
        releaseSockets(media, this.ports);
      }
      await failed(err as Error, 'failed', [callError(ErrorCodes.DIAL_FAILED, `sip: ${(err as Error).message}`, 'sip')]).catch((e: unknown) => this.log.error({ err: e, callId: record.id }, 'an outbound SIP call could not be ended'));
    });
    return taken;
  }

  async cancel(record: CallRecord): Promise<void> {
    const pending = this.pending.get(record.id);
    if (pending) return pending.cancel();
    const dialog = [...this.dialogs.values()].find((d) => d.callId === record.id);
    if (dialog) await this.bye(dialog);
  }

  private outboundCalls(): OutboundCalls {
    if (!this.outbound) throw new Error('outbound calls are not wired');
    return this.outbound;
  }

  // ------------------------------------------------------------------------------------------

  /** Every dialog still up gets its BYE; then the sockets close. */
  async close(): Promise<void> {
    for (const pending of this.pending.values()) pending.cancel();
    await Promise.all([...this.dialogs.values()].map((d) => this.bye(d).finally(() => this.release(d))));
    await this.endpoint.close();
  }
}

const dialogKey = (sipCallId: string, localTag: string) => `${sipCallId}|${localTag}`;

/** The media of a dialog that is hung up at once: nothing is sent anywhere. */
const deadMedia: Negotiated = { codec: 'PCMU', payload: 0, dtmfPayload: null, address: '0.0.0.0', port: 9, direction: 'inactive', declined: [], audioIndex: 0 };

/** A call's RTP sockets closed and their ports given back; twice is harmless. */
function releaseSockets(media: { rtp: { close(): void }; rtcp: { close(): void }; port: number }, ports: RtpPorts): void {
  for (const socket of [media.rtp, media.rtcp]) {
    try {
      socket.close();
    } catch {
      // already closed
    }
  }
  ports.release(media.port);
}

/** An outbound INVITE's final failure as the outbound calls' outcome. */
export function sipOutcome(status: number): 'busy' | 'no-answer' | 'failed' | 'canceled' {
  if (status === 486 || status === 600) return 'busy';
  if (status === 408 || status === 480 || status === 487) return 'no-answer';
  return 'failed';
}
