/**
 * INVITE handling: a new call from a trunk. Before any lookup the trunk guard says whether the
 * source is heard; then the called number, the source or its digest credentials, the SDP offer,
 * and the call-start path (`CallService.openInbound`) decide the answer: a refusal (counted and
 * logged), or `180 Ringing`, the dialog and its `200 OK`, and the call started on it. A CANCEL
 * may come at any step and is answered 487.
 */
import type { Logger } from 'pino';
import type { CallService } from '../../calls/service.js';
import type { Store } from '../../store/index.js';
import { isOutage, RETRY_AFTER_SECONDS } from '../../store/outage.js';
import { addressAllowed } from './addresses.js';
import { challenge, verifyDigest } from './digest.js';
import { ALLOW, releaseSockets, type Dialogs } from './dialogs.js';
import { remoteKey, type Remote, type ServerTransaction } from './endpoint.js';
import { callError, endedReasonFor, ErrorCodes, type CallError } from '../../errors.js';
import { header, parseNameAddr, parseUri, randomToken, tagOf, type SipRequest } from './message.js';
import type { SipMetrics } from './metrics.js';
import type { RtpPair, RtpPorts } from './rtp.js';
import { answer, negotiate } from './sdp.js';
import type { TrunkGuard } from './trunk-guard.js';

/** Our digest realm: what a trunk's credentials are for. */
export const SIP_REALM = 'switchboard';

/** A number as a Request-URI's user part gives it (`+15550001111`, `15550001111`) → E.164, or null. */
export function calledNumber(user: string): string | null {
  const digits = user.replace(/[-.() ]/g, '');
  const e164 = digits.startsWith('+') ? digits : `+${digits}`;
  return /^\+[1-9]\d{1,14}$/.test(e164) ? e164 : null;
}

export interface InboundInvitesOptions {
  calls: CallService;
  store: Store;
  dialogs: Dialogs;
  guard: TrunkGuard;
  ports: RtpPorts;
  metrics: SipMetrics;
  log: Logger;
  /** Where RTP ports are bound. */
  host: string;
  /** A call refused before pickup because the database or Redis did not answer (for /metrics). */
  onUnavailable?(): void;
}

export class InboundInvites {
  constructor(private readonly o: InboundInvitesOptions) {}

  /** A new INVITE (not in a dialog): dropped when its source is shunned or has too many in flight. */
  receive(req: SipRequest, remote: Remote, tx: ServerTransaction): void {
    const { guard } = this.o;
    if (guard.shunned(remote.address) || guard.tooMany(remote.address)) {
      this.o.metrics.refused.inc({ reason: 'shunned' });
      return tx.finish();
    }
    guard.enter(remote.address);
    void this.invite(req, remote, tx)
      .catch((err: unknown) => {
        if (tx.last && tx.last.status >= 200) return this.o.log.error({ err }, 'INVITE handling failed after its answer');
        // a store that does not answer refuses the call before pickup; the trunk may try again
        if (isOutage(err)) return this.unavailable(tx, remote, err);
        this.o.log.error({ err }, 'INVITE handling failed');
        tx.respond(500, 'Server Internal Error');
      })
      .finally(() => guard.leave(remote.address));
  }

  private refuse(tx: ServerTransaction, status: number, reason: string, why: string, remote: Remote, extra: [string, string][] = []): void {
    this.o.metrics.refused.inc({ reason: why });
    if (why === 'number' || why === 'source' || why === 'credentials') this.o.guard.noteRefusal(remote.address);
    this.o.log.warn({ remote: remoteKey(remote), status, why, to: header(tx.request, 'to') }, 'INVITE refused');
    tx.respond(status, reason, randomToken(), extra);
  }

  /** DECISIONS 22: while the database or Redis does not answer, a call is refused before pickup. */
  private unavailable(tx: ServerTransaction, remote: Remote, err?: unknown): void {
    if (err) this.o.log.warn({ err }, 'call refused before pickup: the database or Redis does not answer');
    this.o.onUnavailable?.();
    this.refuse(tx, 503, 'Service Unavailable', 'unavailable', remote, [['retry-after', String(RETRY_AFTER_SECONDS)]]);
  }

  /** A new call from a trunk. */
  private async invite(req: SipRequest, remote: Remote, tx: ServerTransaction): Promise<void> {
    const { calls, store, dialogs, ports } = this.o;
    // a CANCEL may come at any await below: it is answered 487 at once, and checked after each
    const localTag = randomToken();
    tx.onCancel(() => tx.respond(487, 'Request Terminated', localTag));
    const canceled = () => tx.cancelRequested;
    const uri = parseUri(req.uri);
    const e164 = uri ? calledNumber(uri.user) : null;
    if (!e164) return this.refuse(tx, 404, 'Not Found', 'number', remote);
    const number = await store.numbers.findByNumber(e164);
    if (canceled()) return;
    if (!number || number.provider !== 'sip') return this.refuse(tx, 404, 'Not Found', 'number', remote);
    const account = await store.account.get(number.organization_id);
    if (canceled()) return;
    const inbound = account.sip?.inbound;
    const trusted = !!inbound && addressAllowed(remote.address, inbound.allowed_addresses);
    if (!trusted) {
      if (!inbound?.username || !inbound.password) return this.refuse(tx, 403, 'Forbidden', 'source', remote);
      const check = verifyDigest(header(req, 'authorization'), 'INVITE', { username: inbound.username, password: inbound.password }, SIP_REALM, req.uri);
      if (check === 'missing' || check === 'stale') {
        this.o.metrics.refused.inc({ reason: 'credentials' });
        this.o.guard.noteChallenge(remote.address);
        tx.respond(401, 'Unauthorized', randomToken(), [['www-authenticate', challenge(SIP_REALM, check === 'stale')]]);
        return;
      }
      if (check === 'wrong') return this.refuse(tx, 403, 'Forbidden', 'credentials', remote);
    }
    this.o.guard.trust(remote.address);
    // draining (shutting down): 503, so that a dispatcher in front (deploy/kamailio) tries another process
    if (!calls.isAccepting()) return this.refuse(tx, 503, 'Service Unavailable', 'draining', remote, [['retry-after', String(RETRY_AFTER_SECONDS)]]);
    const negotiated = negotiate(req.body.toString('latin1'));
    if ('problem' in negotiated) {
      return this.refuse(tx, 488, 'Not Acceptable Here', 'media', remote, [['warning', `305 switchboard "${negotiated.problem}"`]]);
    }
    tx.respond(180, 'Ringing', localTag);
    const from = parseNameAddr(header(req, 'from')!);
    const fromUri = from ? parseUri(from.uri) : null;
    const sipCallId = header(req, 'call-id')!;
    const fromTag = tagOf(header(req, 'from'));
    const outcome = await calls.openInboundUnlessDown({
      number,
      account,
      customerNumber: fromUri ? (calledNumber(fromUri.user) ?? fromUri.user) : '',
      transport: 'sip',
      transportIds: { sip_call_id: sipCallId, from_tag: fromTag },
      transportKey: `sip:${sipCallId}:${fromTag}`,
    });
    switch (outcome.kind) {
      case 'unavailable':
        return this.unavailable(tx, remote);
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
      if (canceled()) await calls.endUnanswered(record.id, 'customer-ended-call', [callError(ErrorCodes.CALL_CANCELED, 'sip: the caller canceled the call before it was answered', 'sip')]);
      else await calls.endUnanswered(record.id, endedReasonFor(errors[0] ?? callError(ErrorCodes.CALL_START_FAILED, 'sip: the call could not start', 'sip')), errors);
    };
    if (canceled()) return unanswered(487, 'Request Terminated', 'canceled', []);
    if (!(await calls.claimStream(record.id, outcome.streamToken))) {
      return unanswered(480, 'Temporarily Unavailable', 'ended', [callError(ErrorCodes.CALL_START_FAILED, 'sip: the call ended before it was answered', 'sip')]);
    }
    let media: RtpPair;
    try {
      media = await ports.allocate(this.o.host);
    } catch (err) {
      this.o.log.error({ err, callId: record.id }, 'no RTP port for a call');
      return unanswered(503, 'Service Unavailable', 'ports', [callError(ErrorCodes.CALL_START_FAILED, `sip: ${(err as Error).message}`, 'sip')]);
    }
    if (canceled()) {
      releaseSockets(media, ports);
      return unanswered(487, 'Request Terminated', 'canceled', []);
    }
    const contact = parseNameAddr(header(req, 'contact') ?? '')?.uri ?? from?.uri ?? req.uri;
    const dialog = dialogs.create({
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
    tx.respond(200, 'OK', localTag, [['contact', dialogs.contact(remote.protocol)], ['allow', ALLOW], ['content-type', 'application/sdp']], Buffer.from(answer(dialogs.localMedia(dialog), negotiated)));
    tx.onNoAck = () => {
      this.o.log.warn({ callId: record.id }, 'no ACK for our 200 OK: the call is over');
      dialogs.toCall(dialog, 'far end gone', (c) => c.farEndGone('sip: the caller never acknowledged the answer (no ACK)'));
    };
    await dialogs.startCall(dialog);
  }
}
