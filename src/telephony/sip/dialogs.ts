/**
 * SIP dialogs: the calls live on this process, each its signalling (tags, route set, the peer's
 * target, our CSeq) and its media (`RtpSession`, its port pair). A dialog is made by the INVITE
 * handling or the dialling, then lives here: the call started on it, the peer's in-dialog
 * requests (BYE, INFO, NOTIFY, a re-INVITE), our own (BYE, REFER), and its release, which gives
 * the ports back and counts its RTP figures.
 */
import type { Logger } from 'pino';
import type { ActiveCall } from '../../calls/active-call.js';
import type { CallService } from '../../calls/service.js';
import type { CallRecord } from '../../calls/store.js';
import type { CallTransport } from '../../calls/transport.js';
import { callRunner } from '../liveness.js';
import { remoteKey, type Remote, type SipEndpoint, type ServerTransaction } from './endpoint.js';
import { parseUri, request as sipRequest, type SipRequest, type SipResponse } from './message.js';
import type { SipMetrics } from './metrics.js';
import { RtpSession, type RtpPair, type RtpPorts } from './rtp.js';
import { answer, isHold, negotiate, type Negotiated } from './sdp.js';

/** The methods we take, in our `Allow`. */
export const ALLOW = 'INVITE, ACK, BYE, CANCEL, OPTIONS, REFER, NOTIFY, INFO';
/** How long a hang-up waits for the answer to its BYE before the call goes on ending. */
const BYE_WAIT_MS = 2_000;

/** One SIP dialog: a call's signalling and its media. */
export interface Dialog {
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
  /**
   * Set: the dialog's audio, keys and BYE go here instead of to a call (a warm transfer's
   * operator leg, and both legs once joined: ./bridge.ts, ./operator-dial.ts).
   */
  peer?: DialogPeer | null;
}

/** What takes a dialog's media and hang-up when no call does. */
export interface DialogPeer {
  /** μ-law 8 kHz, in order. */
  audio(frame: Buffer): void;
  dtmf(digit: string): void;
  /** The far end hung up (its BYE). */
  hungUp(): void;
}

export type NewDialog = Pick<Dialog, 'direction' | 'sipCallId' | 'localTag' | 'remoteTag' | 'localUri' | 'remoteUri' | 'remoteTarget' | 'remote' | 'routeSet' | 'callId'> & {
  media: RtpPair;
  negotiated: Negotiated;
  signallingAddress: string;
  localSeq?: number;
};

export const dialogKey = (sipCallId: string, localTag: string) => `${sipCallId}|${localTag}`;

/** A call's RTP sockets closed and their ports given back; twice is harmless. */
export function releaseSockets(media: { rtp: { close(): void }; rtcp: { close(): void }; port: number }, ports: RtpPorts): void {
  for (const socket of [media.rtp, media.rtcp]) {
    try {
      socket.close();
    } catch {
      // already closed
    }
  }
  ports.release(media.port);
}

export interface DialogsOptions {
  endpoint: SipEndpoint;
  ports: RtpPorts;
  calls: CallService;
  metrics: SipMetrics;
  log: Logger;
  /** The call's transport on an answered dialog (./transport.ts). */
  transportFor(dialog: Dialog, record: CallRecord): CallTransport;
}

export class Dialogs {
  private readonly dialogs = new Map<string, Dialog>();

  constructor(private readonly o: DialogsOptions) {}

  get size(): number {
    return this.dialogs.size;
  }

  /** The dialog a peer's request belongs to: its Call-ID and our tag (in its To). */
  find(sipCallId: string, localTag: string): Dialog | null {
    return this.dialogs.get(dialogKey(sipCallId, localTag)) ?? null;
  }

  byCallId(callId: string): Dialog | undefined {
    return [...this.dialogs.values()].find((d) => d.callId === callId);
  }

  /** Whether a live dialog's signalling goes over this remote (its TCP connection is kept). */
  uses(remote: Remote): boolean {
    return [...this.dialogs.values()].some((d) => remoteKey(d.remote) === remoteKey(remote));
  }

  all(): Dialog[] {
    return [...this.dialogs.values()];
  }

  contact(protocol: Remote['protocol']): string {
    return `<sip:switchboard@${this.o.endpoint.sentBy}${protocol === 'TCP' ? ';transport=tcp' : ''}>`;
  }

  localMedia(d: Dialog) {
    return { address: this.o.endpoint.publicAddress, port: d.rtpPort, sessionId: d.sessionId, version: d.sdpVersion };
  }

  create(o: NewDialog): Dialog {
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
      logger: this.o.log,
      onAudio: (frame) => dialog && (dialog.peer ? dialog.peer.audio(frame) : this.toCall(dialog, 'caller audio', (c) => c.audio(frame))),
      onDtmf: (digit) => dialog && (dialog.peer ? dialog.peer.dtmf(digit) : this.toCall(dialog, 'key press', (c) => c.dtmf(digit))),
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
  async startCall(dialog: Dialog): Promise<void> {
    let call: ActiveCall | null;
    try {
      call = await this.o.calls.connectClaimed(dialog.callId, (record) => this.o.transportFor(dialog, record));
    } catch (err) {
      // answered, but the call could not start: the far end must not stay on a call with nobody
      this.o.log.error({ err, callId: dialog.callId }, 'the call could not start on its answered dialog');
      await this.bye(dialog);
      this.release(dialog);
      return;
    }
    if (!call) {
      this.o.log.warn({ callId: dialog.callId }, 'the call ended before its media started');
      await this.bye(dialog);
      this.release(dialog);
      return;
    }
    dialog.call = call;
    if (dialog.ended) this.toCall(dialog, 'hang-up', (c) => c.callerHungUp());
  }

  toCall(dialog: Dialog, what: string, fn: (call: ActiveCall) => void): void {
    callRunner(() => dialog.call)(what, fn);
  }

  /** The peer's BYE: the call is over at its end. */
  byeReceived(tx: ServerTransaction, dialog: Dialog | null): void {
    if (!dialog) return void tx.respond(481, 'Call/Transaction Does Not Exist');
    tx.respond(200, 'OK');
    dialog.ended = true;
    if (dialog.peer) dialog.peer.hungUp();
    else this.toCall(dialog, 'hang-up', (c) => c.callerHungUp());
  }

  /** A transfer's progress (RFC 3515 sipfrag); the call ends as transferred on the 202 already. */
  notify(req: SipRequest, tx: ServerTransaction, dialog: Dialog | null): void {
    if (!dialog) return void tx.respond(481, 'Call/Transaction Does Not Exist');
    tx.respond(200, 'OK');
    this.o.log.debug({ callId: dialog.callId, sipfrag: req.body.toString('latin1').split('\r\n')[0] }, 'transfer progress');
  }

  /** Key presses as SIP INFO (application/dtmf-relay), for trunks that send them so. */
  info(req: SipRequest, tx: ServerTransaction, dialog: Dialog | null): void {
    if (!dialog) return void tx.respond(481, 'Call/Transaction Does Not Exist');
    tx.respond(200, 'OK');
    const signal = /Signal\s*=\s*([0-9*#A-D])/i.exec(req.body.toString('latin1'));
    if (!signal) return;
    const digit = signal[1]!.toUpperCase();
    if (dialog.peer) dialog.peer.dtmf(digit);
    else this.toCall(dialog, 'key press', (c) => c.dtmf(digit));
  }

  /** A re-INVITE in the dialog (a session refresh, hold, a new media address): the same answer. */
  reInvite(req: SipRequest, tx: ServerTransaction, dialog: Dialog | null): void {
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

  /** A request in the dialog (BYE, REFER); resolves to its final response. */
  request(dialog: Dialog, method: string, extra: [string, string][] = []): Promise<SipResponse> {
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
    return this.o.endpoint.request(req, this.targetOf(dialog));
  }

  /**
   * Where a dialog's requests go: the peer's signalling address (symmetric, for NAT). Over TCP,
   * once that connection is gone, the peer's Contact (its source port was an ephemeral one).
   */
  private targetOf(dialog: Dialog): Remote {
    if (dialog.remote.protocol !== 'TCP' || this.o.endpoint.connected(dialog.remote)) return dialog.remote;
    const contact = parseUri(dialog.remoteTarget);
    return contact ? { protocol: 'TCP', address: contact.host, port: contact.port ?? 5060 } : dialog.remote;
  }

  /**
   * Ends the dialog with a BYE. Waits at most `waitMs` for its answer: a peer that never answers
   * (gone, or unreachable) must not hold the call's end; the transaction retransmits on its own.
   */
  async bye(dialog: Dialog, waitMs = BYE_WAIT_MS): Promise<void> {
    if (dialog.ended) return;
    dialog.ended = true;
    const answered = this.request(dialog, 'BYE').then((response) => {
      if (response.status >= 300) this.o.log.debug({ callId: dialog.callId, status: response.status }, 'BYE answered with an error');
    });
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([answered, new Promise<void>((resolve) => (timer = setTimeout(resolve, waitMs)))]);
    clearTimeout(timer);
  }

  /** The dialog's media and timers go; its RTP figures are counted. */
  release(dialog: Dialog): void {
    const key = dialogKey(dialog.sipCallId, dialog.localTag);
    if (this.dialogs.get(key) !== dialog) return;
    this.dialogs.delete(key);
    for (const undo of dialog.cleanups.splice(0)) undo();
    const s = dialog.rtp.stats;
    dialog.rtp.close();
    this.o.ports.release(dialog.rtpPort);
    this.o.metrics.callOver(s);
    this.o.log.info({ callId: dialog.callId, rtp: { ...s, jitterMs: Math.round(s.jitterMs * 10) / 10 } }, 'SIP call over');
  }
}
