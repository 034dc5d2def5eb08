/**
 * Dialling: calls placed through an organization's trunk (`sip.outbound`). An INVITE to the
 * proxy (answering its digest challenge once), the call's progress from the responses (ringing,
 * busy, no answer, failed), the ACK of the answer and the dialog the call then runs on; a CANCEL
 * while it rings (the API, or the ring limit), and the hang-up of an answer that came too late.
 */
import type { Logger } from 'pino';
import type { CallService } from '../../calls/service.js';
import type { CallRecord } from '../../calls/store.js';
import type { OutboundCalls } from '../../calls/outbound-calls.js';
import { RING_TIMEOUT_SECONDS } from '../../calls/outbound-calls.js';
import type { AccountSettings } from '../../store/account.js';
import { parseSipProxy } from './addresses.js';
import { answerChallenge } from './digest.js';
import { ALLOW, releaseSockets, type Dialog, type Dialogs } from './dialogs.js';
import type { Remote, SipEndpoint } from './endpoint.js';
import { callError, endedReasonFor, ErrorCodes, type CallError } from '../../errors.js';
import { header, parseCSeq, parseNameAddr, parseVia, randomToken, request as sipRequest, tagOf, type SipRequest, type SipResponse } from './message.js';
import type { RtpPair, RtpPorts } from './rtp.js';
import { negotiate, offer, type Negotiated } from './sdp.js';

/** The media of a dialog that is hung up at once: nothing is sent anywhere. */
const deadMedia: Negotiated = { codec: 'PCMU', payload: 0, dtmfPayload: null, address: '0.0.0.0', port: 9, direction: 'inactive', declined: [], audioIndex: 0 };

/** An outbound INVITE's final failure as the outbound calls' outcome. */
export function sipOutcome(status: number): 'busy' | 'no-answer' | 'failed' | 'canceled' {
  if (status === 486 || status === 600) return 'busy';
  if (status === 408 || status === 480 || status === 487) return 'no-answer';
  return 'failed';
}

export interface SipDiallerOptions {
  endpoint: SipEndpoint;
  dialogs: Dialogs;
  ports: RtpPorts;
  calls: CallService;
  log: Logger;
  /** Where RTP ports are bound. */
  host: string;
  /** The outbound calls the progress goes to (wired after the transport). */
  outboundCalls(): OutboundCalls;
}

export class SipDialler {
  /** Outbound INVITEs not answered yet, by call id: what a cancel stops. */
  private readonly pending = new Map<string, { cancel: () => void }>();

  constructor(private readonly o: SipDiallerOptions) {}

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
    let media: RtpPair;
    try {
      media = await this.o.ports.allocate(this.o.host);
    } catch (err) {
      // this process is full: back to the queue, tried again later (the dialler's retry)
      throw Object.assign(new Error(`no RTP port for the call: ${(err as Error).message}`), { status: 503 });
    }
    const remote: Remote = { protocol: proxy.protocol, address: proxy.host, port: proxy.port };
    const sipCallId = `${randomToken(12)}@${this.o.endpoint.publicAddress}`;
    const localTag = randomToken();
    const hostPart = `${proxy.host}${proxy.port !== 5060 ? `:${proxy.port}` : ''}`;
    const target = `sip:${record.customer.number}@${hostPart}${proxy.protocol === 'TCP' ? ';transport=tcp' : ''}`;
    const callerId = trunk.caller_id ?? record.phone_number.number;
    const from = `<sip:${callerId}@${this.o.endpoint.publicAddress}>;tag=${localTag}`;
    const to = `<sip:${record.customer.number}@${hostPart}>`;
    const sessionId = Math.floor(Math.random() * 1e9);
    const body = Buffer.from(offer({ address: this.o.endpoint.publicAddress, port: media.port, sessionId }));
    let seq = 1;
    const build = (auth?: [string, string]) =>
      sipRequest('INVITE', target, [
        ['from', from],
        ['to', to],
        ['call-id', sipCallId],
        ['cseq', `${seq} INVITE`],
        ['contact', this.o.dialogs.contact(remote.protocol)],
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
      await this.o.outboundCalls().progress(record.id, outcome, errors);
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
      void this.o.endpoint.request(c, remote, undefined, { branch: inviteBranch });
    };
    this.pending.set(record.id, { cancel });
    const ringLimit = setTimeout(() => cancel(), RING_TIMEOUT_SECONDS * 1000);
    let dialog: Dialog | null = null;
    void (async () => {
      let response: SipResponse;
      let ringing = false;
      for (let attempt = 0; ; attempt++) {
        const sent = this.o.endpoint.request(
          current,
          remote,
          (answer) => {
            tookIt();
            provisional = true;
            if (canceled) cancel();
            if (!ringing && (answer.status === 180 || answer.status === 183)) ringing = true;
          },
          // the 200 is sent again until our ACK arrives: each copy gets the ACK again
          { onFinalCopy: () => ack && this.o.endpoint.send(ack, remote) },
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
        releaseSockets(media, this.o.ports);
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
        await this.o.outboundCalls().progress(record.id, outcome, outcome === 'failed' ? [callError(ErrorCodes.DIAL_FAILED, `sip: the call failed (${status})`, 'sip')] : []);
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
      ack.headers.set('via', [this.o.endpoint.via(remote)]);
      this.o.endpoint.send(ack, remote);
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
        const d = this.o.dialogs.create({ ...dialogBase, media, negotiated: 'problem' in negotiated ? deadMedia : negotiated });
        await this.o.dialogs.bye(d);
        this.o.dialogs.release(d);
        await this.o.outboundCalls().progress(record.id, 'no-answer', []);
        return;
      }
      if ('problem' in negotiated) {
        // answered with media we cannot take: hung up at once
        const d = this.o.dialogs.create({ ...dialogBase, media, negotiated: deadMedia });
        await this.o.dialogs.bye(d);
        this.o.dialogs.release(d);
        await this.o.calls.endUnanswered(record.id, 'dial-failed', [callError(ErrorCodes.DIAL_FAILED, `sip: the answer's SDP: ${negotiated.problem}`, 'sip')]);
        return;
      }
      // the dialog first, so that a BYE while the call is being connected finds it
      dialog = this.o.dialogs.create({ ...dialogBase, media, negotiated });
      const token = await this.o.calls.answerOutbound(record.id, ids);
      if (!token || !(await this.o.calls.claimStream(record.id, token))) {
        this.o.log.info({ callId: record.id }, 'an outbound call answered after it ended: hanging up');
        await this.o.dialogs.bye(dialog);
        this.o.dialogs.release(dialog);
        return;
      }
      await this.o.dialogs.startCall(dialog);
    })().catch(async (err: unknown) => {
      clearTimeout(ringLimit);
      this.pending.delete(record.id);
      this.o.log.error({ err, callId: record.id }, 'outbound SIP call failed');
      // nothing of it may stay: the callee is hung up on, the ports go back, the call ends
      if (dialog) {
        await this.o.dialogs.bye(dialog).catch(() => undefined);
        this.o.dialogs.release(dialog);
      } else {
        releaseSockets(media, this.o.ports);
      }
      await failed(err as Error, 'failed', [callError(ErrorCodes.DIAL_FAILED, `sip: ${(err as Error).message}`, 'sip')]).catch((e: unknown) => this.o.log.error({ err: e, callId: record.id }, 'an outbound SIP call could not be ended'));
    });
    return taken;
  }

  async cancel(record: CallRecord): Promise<void> {
    const pending = this.pending.get(record.id);
    if (pending) return pending.cancel();
    const dialog = this.o.dialogs.byCallId(record.id);
    if (dialog) await this.o.dialogs.bye(dialog);
  }

  /** Every INVITE still ringing is canceled (the process is closing). */
  cancelAll(): void {
    for (const pending of this.pending.values()) pending.cancel();
  }
}
