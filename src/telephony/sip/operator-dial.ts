/**
 * A warm transfer's operator, dialled over SIP (DECISIONS 16, docs/transfers.md): an INVITE
 * through the account's trunk (`sip.outbound`: its proxy, its digest credentials, answered once),
 * from the call's number, offering the caller's codec first; a CANCEL when the dial is given up
 * (the ring timeout, the caller hung up), and the answer that comes after it ACKed and hung up.
 * Answered, the operator's dialog is a leg the call speaks to and hears keys from (RTP with a
 * keep-alive, RFC 4733 or INFO keys, its BYE); joined, ./bridge.ts relays it to the caller.
 */
import type { Logger } from 'pino';
import { OperatorDialError, type DialOutcome, type JoinedLegs, type JoinTap, type OperatorDialOptions, type OperatorLeg, type OperatorLegEvents } from '../../calls/operator-leg.js';
import { MULAW_8K } from '../../calls/transport.js';
import type { SipSettings } from '../../store/account.js';
import type { MediaLiveness, StreamWatcher } from '../liveness.js';
import { parseSipProxy } from './addresses.js';
import { releaseSockets, type Dialog, type Dialogs } from './dialogs.js';
import type { SipEndpoint } from './endpoint.js';
import type { RtpPair, RtpPorts } from './rtp.js';
import { DEAD_MEDIA, OutgoingInvite } from './outgoing-invite.js';
import { negotiate, offer, type G711 } from './sdp.js';

type Trunk = NonNullable<SipSettings['outbound']>;

/** With nothing sent to the operator for this long, a frame of silence goes (RTP keep-alive). */
const KEEPALIVE_MS = 1_000;
const SILENT_FRAME = Buffer.alloc(160, 0xff);

/** An INVITE's final failure as a warm transfer's result. */
export function operatorOutcome(status: number): DialOutcome {
  if (status === 486 || status === 600) return 'busy';
  if (status === 603) return 'declined';
  if (status === 408 || status === 480 || status === 487) return 'no-answer';
  return 'failed';
}

export interface OperatorDiallerOptions {
  endpoint: SipEndpoint;
  dialogs: Dialogs;
  ports: RtpPorts;
  watcher: StreamWatcher;
  liveness: MediaLiveness;
  /** Where RTP ports are bound. */
  host: string;
  log: Logger;
}

export interface SipOperatorDial {
  trunk: Trunk;
  destination: string;
  options: OperatorDialOptions;
  /** The call the operator is dialled for (its id, in the logs and the dialog). */
  callId: string;
  /** The codec offered first: the caller's, so that the legs are relayed as they are. */
  codec?: G711;
  /** The join, given the operator's answered dialog. */
  join(operator: Dialog, tap: JoinTap | undefined): Promise<JoinedLegs>;
}

export class OperatorDialler {
  constructor(private readonly o: OperatorDiallerOptions) {}

  /** Ends an operator's dialog (a relay over: ./bridge.ts for SIP calls, the web relay for web calls). */
  async hangUp(dialog: Dialog): Promise<void> {
    await this.o.dialogs.bye(dialog);
    this.o.dialogs.release(dialog);
  }

  /** Dials the operator; resolves with their leg once they answer, rejects with an `OperatorDialError`. */
  async dial(d: SipOperatorDial): Promise<OperatorLeg> {
    const dialog = await this.invite(d);
    return this.leg(dialog, d);
  }

  private async invite(d: SipOperatorDial): Promise<Dialog> {
    const { endpoint, dialogs } = this.o;
    const { trunk, destination, options } = d;
    const proxy = parseSipProxy(trunk.proxy);
    if (!proxy) throw new OperatorDialError('failed', 'sip: the account\'s sip.outbound.proxy is not a sip: URI');
    if (options.signal.aborted) throw new OperatorDialError('no-answer', 'the dial was given up');
    let media: RtpPair;
    try {
      media = await this.o.ports.allocate(this.o.host);
    } catch (err) {
      throw new OperatorDialError('failed', `sip: no RTP port for the operator's leg: ${(err as Error).message}`);
    }
    const body = Buffer.from(offer({ address: endpoint.publicAddress, port: media.port, sessionId: Math.floor(Math.random() * 1e9) }, d.codec));
    const invite = new OutgoingInvite({ endpoint, dialogs, trunk, proxy, destination, callerId: options.callerId ?? trunk.caller_id ?? 'switchboard', body });

    // the dial may be given up at any time: the call hears so at once, the INVITE is canceled behind it
    let giveUp: (err: OperatorDialError) => void = () => undefined;
    const givenUp = new Promise<never>((_, reject) => (giveUp = reject));
    givenUp.catch(() => undefined);
    const onAbort = () => {
      invite.cancel();
      giveUp(new OperatorDialError('no-answer', 'the dial was given up'));
    };
    options.signal.addEventListener('abort', onAbort, { once: true });

    const answered = (async (): Promise<Dialog> => {
      const response = await invite.send();
      const status = `${response.status} ${response.reason}`;
      if (response.status < 200 || response.status >= 300) {
        releaseSockets(media, this.o.ports);
        const outcome = operatorOutcome(response.status);
        throw new OperatorDialError(outcome, outcome === 'failed' ? `sip: the operator's call failed (${status})` : `sip: ${status}`);
      }
      // answered: the ACK (sent again for each copy of the 200), then the dialog
      const answer = invite.acknowledge(response);
      const negotiated = negotiate(response.body.toString('latin1'));
      const dialog = dialogs.create({ ...answer, callId: d.callId, media, negotiated: 'problem' in negotiated ? DEAD_MEDIA : negotiated });
      // no call ever hears this dialog: until the leg listens, its media and BYE go nowhere
      dialog.peer = { audio: () => undefined, dtmf: () => undefined, hungUp: () => undefined };
      const given = invite.canceled;
      if (given || 'problem' in negotiated) {
        // answered after we gave up, or with media we cannot take: hung up at once
        await dialogs.bye(dialog);
        dialogs.release(dialog);
        throw new OperatorDialError(given ? 'no-answer' : 'failed', given ? 'answered after the dial was given up' : `sip: the operator's SDP: ${(negotiated as { problem: string }).problem}`);
      }
      return dialog;
    })();
    answered.catch(() => undefined);
    try {
      return await Promise.race([answered, givenUp]);
    } finally {
      options.signal.removeEventListener('abort', onAbort);
    }
  }

  /** The answered operator's dialog as the call's `OperatorLeg`. */
  private leg(dialog: Dialog, d: SipOperatorDial): OperatorLeg {
    const { dialogs, watcher, liveness, log } = this.o;
    let events: OperatorLegEvents | null = null;
    let gone = false;
    let joined = false;
    const hungUp = () => {
      if (gone) return;
      gone = true;
      events?.hungUp();
    };
    dialog.peer = {
      audio: (frame) => events?.audio?.(frame),
      dtmf: (digit) => events?.key(digit),
      hungUp,
    };
    dialog.rtp.lastPacketAt = performance.now();
    // before the join: silence now and then keeps the operator's RTP timeout away; a leg without RTP is gone
    const unwatch = watcher.watch((now) => {
      if (dialog.ended || joined) return;
      if (now - dialog.rtp.lastSentAt > KEEPALIVE_MS) dialog.rtp.send(SILENT_FRAME);
      if (now - dialog.rtp.lastPacketAt > liveness.idleMs && dialog.negotiated.direction !== 'inactive' && dialog.negotiated.direction !== 'recvonly') {
        log.info({ callId: d.callId }, 'warm transfer: no RTP from the operator; their leg is gone');
        void dialogs.bye(dialog);
        hungUp();
      }
    });
    dialog.cleanups.push(unwatch);
    return {
      audioFormat: MULAW_8K,
      sendAudio: (frame) => {
        if (!dialog.ended && !joined) dialog.rtp.send(frame);
      },
      listen: (e) => {
        events = e;
        if (gone || dialog.ended) {
          gone = true;
          e.hungUp();
        }
      },
      hangUp: async () => {
        unwatch();
        await dialogs.bye(dialog);
        dialogs.release(dialog);
      },
      join: async (tap) => {
        if (dialog.ended) throw new Error('the operator hung up before the join');
        joined = true;
        unwatch();
        return d.join(dialog, tap);
      },
    };
  }
}
