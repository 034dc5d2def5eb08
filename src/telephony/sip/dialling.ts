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
import { releaseSockets, type Dialog, type Dialogs } from './dialogs.js';
import type { SipEndpoint } from './endpoint.js';
import { callError, ErrorCodes, type CallError } from '../../errors.js';
import type { RtpPair, RtpPorts } from './rtp.js';
import { DEAD_MEDIA, OutgoingInvite } from './outgoing-invite.js';
import { negotiate, offer } from './sdp.js';

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
    const body = Buffer.from(offer({ address: this.o.endpoint.publicAddress, port: media.port, sessionId: Math.floor(Math.random() * 1e9) }));
    const invite = new OutgoingInvite({
      endpoint: this.o.endpoint,
      dialogs: this.o.dialogs,
      trunk,
      proxy,
      destination: record.customer.number,
      callerId: trunk.caller_id ?? record.phone_number.number,
      body,
    });
    const ids = { sip_call_id: invite.sipCallId, from_tag: invite.localTag };
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
    // asked to stop ringing (the API, the ring limit): the CANCEL goes once the trunk has answered provisionally
    this.pending.set(record.id, { cancel: () => invite.cancel() });
    const ringLimit = setTimeout(() => invite.cancel(), RING_TIMEOUT_SECONDS * 1000);
    let dialog: Dialog | null = null;
    void (async () => {
      let ringing = false;
      const response = await invite.send((answer) => {
        tookIt();
        if (!ringing && (answer.status === 180 || answer.status === 183)) ringing = true;
      });
      clearTimeout(ringLimit);
      this.pending.delete(record.id);
      if (response.status >= 300 || response.status < 200) {
        releaseSockets(media, this.o.ports);
        const status = `${response.status} ${response.reason}`;
        if (invite.canceled) return void (await failed(new Error(`canceled (${status})`), 'no-answer', []));
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
      const dialogBase = { ...invite.acknowledge(response), callId: record.id };
      const negotiated = negotiate(response.body.toString('latin1'));
      if (invite.canceled) {
        // answered after we gave up (the ring limit, or the API): hung up at once
        const d = this.o.dialogs.create({ ...dialogBase, media, negotiated: 'problem' in negotiated ? DEAD_MEDIA : negotiated });
        await this.o.dialogs.bye(d);
        this.o.dialogs.release(d);
        await this.o.outboundCalls().progress(record.id, 'no-answer', []);
        return;
      }
      if ('problem' in negotiated) {
        // answered with media we cannot take: hung up at once
        const d = this.o.dialogs.create({ ...dialogBase, media, negotiated: DEAD_MEDIA });
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
