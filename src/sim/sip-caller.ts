/**
 * A simulated SIP phone that calls a Switchboard server's SIP endpoint over UDP (DECISIONS 15,
 * docs/sip.md), as a trunk or a desk phone does: a hand-built INVITE with an SDP offer (PCMU,
 * PCMA, telephone-event), the 100/180/200, the ACK, then the call's audio as RTP (one 20 ms
 * packet every 20 ms, silence included), and a BYE to hang up (the server's BYE is answered 200).
 * It speaks with the sandbox voice and hears through the sandbox STT, as the Twilio caller does:
 * the media side is a `MediaLeg` on its RTP wire (./media-leg.ts), and the RTP itself is the
 * server's own `RtpSession` (src/telephony/sip/rtp.ts: jitter buffer, telephone-event, RTCP).
 *
 * Signalling is one `SipEndpoint` for all the calls of a process (`SipSignalling.shared()`): the
 * server's own transaction layer, its requests dispatched to the calls by Call-ID. Each call has
 * its RTP socket and the RTCP one next to it (`RtpPorts`, on any free pair). Used by the tests and
 * by `bench:calls --sip`.
 */
import { createLogger } from '../logger.js';
import { SipEndpoint, type Remote, type ServerTransaction } from '../telephony/sip/endpoint.js';
import { header, parseNameAddr, randomToken, request as sipRequest, tagOf, type SipRequest, type SipResponse } from '../telephony/sip/message.js';
import { RtpPorts, RtpSession, type RtpPair, type RtpStats } from '../telephony/sip/rtp.js';
import { negotiate, offer, type Negotiated } from '../telephony/sip/sdp.js';
import { LegCaller } from './leg-caller.js';
import { MediaLeg, type RtpLink, type SpokenLine } from './media-leg.js';

const silentLog = createLogger('silent');

/** The phones' RTP: any free port pair; never what keeps a process alive (the calls' timers do). */
const rtpPorts = new RtpPorts(0, 0, { unref: true });

/**
 * The SIP signalling of a process's simulated phones: a `SipEndpoint` (its client transactions
 * carry our requests; its sockets and timers never keep the process alive), whose in-dialog
 * requests from the server go to their call by Call-ID (anything else answered 481).
 */
export class SipSignalling {
  private static readonly perAddress = new Map<string, Promise<SipSignalling>>();
  private readonly dialogs = new Map<string, (request: SipRequest, tx: ServerTransaction) => void>();

  private constructor(readonly endpoint: SipEndpoint) {}

  /** The signalling this process's phones share, on `address` (opened at first use). */
  static shared(address = '127.0.0.1'): Promise<SipSignalling> {
    let s = SipSignalling.perAddress.get(address);
    if (!s) {
      s = SipSignalling.open(address);
      SipSignalling.perAddress.set(address, s);
      s.catch(() => SipSignalling.perAddress.delete(address));
    }
    return s;
  }

  /** Signalling of its own, on a free port of `address`. */
  static async open(address = '127.0.0.1'): Promise<SipSignalling> {
    let signalling: SipSignalling | null = null;
    const endpoint = new SipEndpoint({
      host: address,
      port: 0,
      logger: silentLog,
      unref: true,
      onRequest: (request, _remote, tx) => signalling?.incoming(request, tx),
    });
    await endpoint.start();
    signalling = new SipSignalling(endpoint);
    return signalling;
  }

  /** Hands the requests of a dialog (by its Call-ID) to `handler`, until `forget`. */
  dialog(callId: string, handler: (request: SipRequest, tx: ServerTransaction) => void): { forget(): void } {
    this.dialogs.set(callId, handler);
    return { forget: () => this.dialogs.get(callId) === handler && this.dialogs.delete(callId) };
  }

  private incoming(request: SipRequest, tx: ServerTransaction): void {
    const handler = this.dialogs.get(header(request, 'call-id')!);
    if (handler) handler(request, tx);
    else tx.respond(481, 'Call/Transaction Does Not Exist', randomToken());
  }

  /** Stops: pending transactions resolve as timed out; the sockets close. */
  async close(): Promise<void> {
    for (const [address, s] of SipSignalling.perAddress) void s.then((x) => x === this && SipSignalling.perAddress.delete(address));
    await this.endpoint.close();
  }
}

export interface SipCallerOptions {
  /** The server's SIP endpoint (UDP). */
  host?: string;
  port: number;
  /** The number called (a `sip` number of the server's). */
  to: string;
  /** The caller's number (From). */
  from?: string;
  /** The signalling; default: the one this process's phones share on `localAddress`. */
  signalling?: SipSignalling;
  /** Where our RTP binds and what our SDP and Contact give (default 127.0.0.1). */
  localAddress?: string;
  /** Records every frame both ways (`inboundAudio`, `outboundAudio`, `heardAudio`). */
  recordAudio?: boolean;
}

export type SipCallOutcome = { kind: 'connected'; sipCallId: string } | { kind: 'refused'; status: number; reason: string };

export class SipCaller extends LegCaller {
  /** The SIP Call-ID (the call record's `transport_ids.sip_call_id`). */
  readonly sipCallId: string;
  readonly fromTag = randomToken();
  /** The provisional answers to the INVITE, in order (100, 180). */
  readonly provisional: number[] = [];
  /** The INVITE's final answer, and our BYE's (once sent). */
  final: SipResponse | null = null;
  byeAnswer: SipResponse | null = null;
  /** The server sent a BYE (it hung up). */
  byeReceived = false;

  private readonly own: MediaLeg;
  private readonly localAddress: string;
  private readonly server: Remote;
  private signalling: SipSignalling | null = null;
  private session: RtpSession | null = null;
  private media: RtpPair | null = null;
  private registration: { forget(): void } | null = null;
  /** The dialog, once answered: the server's tag and Contact, our next CSeq. */
  private dialog: { to: string; target: string; seq: number } | null = null;
  private input: { audio(frame: Buffer): void; ended(): void } | null = null;
  /** Server audio that came before the leg listened. */
  private early: Buffer[] = [];
  private hungUpByServer = false;
  /** After `moveMedia`, the old stream while it still sends. */
  private oldSession: RtpSession | null = null;
  private readonly sessionId = Math.floor(Math.random() * 1e9);
  private sdpVersion = 1;

  constructor(private readonly o: SipCallerOptions) {
    super();
    this.localAddress = o.localAddress ?? '127.0.0.1';
    this.server = { protocol: 'UDP', address: o.host ?? '127.0.0.1', port: o.port };
    this.sipCallId = `${randomToken(12)}@${this.localAddress}`;
    this.own = new MediaLeg({ wire: 'rtp', accountSid: '', callSid: this.sipCallId, ...(o.recordAudio ? { recordAudio: true } : {}) });
  }

  protected get leg(): MediaLeg {
    return this.own;
  }

  /** What the caller said, with when its sound started and ended on the wire. */
  get spoken(): SpokenLine[] {
    return this.own.spoken;
  }
  get inboundAudio(): Buffer[] {
    return this.own.inboundAudio;
  }
  get outboundAudio(): Buffer[] {
    return this.own.outboundAudio;
  }
  get heardAudio(): Buffer[] {
    return this.own.heardAudio;
  }
  /** The server's RTP as this phone received it (lost, late, jitter), and what it sent. */
  get rtpStats(): RtpStats | null {
    return this.session?.stats ?? null;
  }

  private get fromHeader(): string {
    return `<sip:${this.o.from ?? '+15005550006'}@${this.localAddress}>;tag=${this.fromTag}`;
  }

  /**
   * Places the call: the INVITE (answered 100, 180, then 200 with the server's SDP), the ACK, and
   * the media. A refusal (403, 404, 486, …) is an outcome, not an error.
   */
  async dial(): Promise<SipCallOutcome> {
    const signalling = this.o.signalling ?? (await SipSignalling.shared(this.localAddress));
    this.signalling = signalling;
    const { endpoint } = signalling;
    this.media = await rtpPorts.allocate(this.localAddress);
    this.registration = signalling.dialog(this.sipCallId, (req, tx) => this.onRequest(req, tx));
    const uri = `sip:${this.o.to}@${this.server.address}:${this.server.port}`;
    const invite = sipRequest(
      'INVITE',
      uri,
      [
        ['from', this.fromHeader],
        ['to', `<${uri}>`],
        ['call-id', this.sipCallId],
        ['cseq', '1 INVITE'],
        ['contact', `<sip:caller@${endpoint.sentBy}>`],
        ['allow', 'INVITE, ACK, BYE, CANCEL, OPTIONS'],
        ['user-agent', 'Switchboard simulated phone'],
        ['content-type', 'application/sdp'],
      ],
      Buffer.from(offer({ address: this.localAddress, port: this.media.port, sessionId: this.sessionId })),
    );
    let ack: SipRequest | null = null;
    const response = await endpoint.request(invite, this.server, (r) => this.provisional.push(r.status), {
      // our ACK was lost: the server sends its 200 again until one arrives
      onFinalCopy: () => ack && endpoint.send(ack, this.server),
    });
    this.final = response;
    if (response.status < 200 || response.status >= 300) {
      this.teardown();
      return { kind: 'refused', status: response.status, reason: response.reason };
    }
    const target = parseNameAddr(header(response, 'contact') ?? '')?.uri ?? uri;
    this.dialog = { to: header(response, 'to')!, target, seq: 1 };
    ack = sipRequest('ACK', target, [
      ['via', endpoint.via(this.server)],
      ['max-forwards', '70'],
      ['from', this.fromHeader],
      ['to', this.dialog.to],
      ['call-id', this.sipCallId],
      ['cseq', '1 ACK'],
    ]);
    endpoint.send(ack, this.server);
    const answer = negotiate(response.body.toString('latin1'));
    if ('problem' in answer) {
      await this.bye();
      this.teardown();
      throw new Error(`the server's SDP answer: ${answer.problem}`);
    }
    this.session = this.rtpSession(this.media, answer);
    const link: RtpLink = {
      start: (input) => {
        this.input = input;
        for (const frame of this.early.splice(0)) input.audio(frame);
        if (this.hungUpByServer) input.ended();
      },
      send: (frame) => {
        // after a move, the old stream's packet of each tick goes first: it is the one still running
        this.oldSession?.send(frame);
        this.session?.send(frame);
      },
      sendDtmf: (digit) => this.session?.sendDtmf(digit),
      hangUp: async () => {
        // a phone stops its media as it hangs up
        this.session?.close();
        await this.bye();
      },
      close: () => this.teardown(),
    };
    await this.own.connectRtp(link);
    return { kind: 'connected', sipCallId: this.sipCallId };
  }

  private rtpSession(media: RtpPair, answer: Negotiated): RtpSession {
    return new RtpSession({
      rtp: media.rtp,
      rtcp: media.rtcp,
      port: media.port,
      codec: answer.codec,
      payload: answer.payload,
      dtmfPayload: answer.dtmfPayload,
      remote: { address: answer.address, port: answer.port },
      signallingAddress: this.server.address,
      logger: silentLog,
      onAudio: (frame) => (this.input ? this.input.audio(frame) : this.early.push(frame)),
      onDtmf: () => undefined,
    });
  }

  /**
   * Moves this phone's media to a new port pair mid-call, as a phone switching its audio device
   * or a media server does: a re-INVITE with the new port, its ACK, then the new stream. The old
   * stream goes on `overlapMs` more (its socket still sending) before it closes; what the server
   * sends to the old port after that is never heard.
   */
  async moveMedia(overlapMs = 100): Promise<void> {
    const d = this.dialog;
    const signalling = this.signalling;
    const old = this.session;
    const oldMedia = this.media;
    if (!d || !signalling || !old || !oldMedia) throw new Error('no call to move');
    const media = await rtpPorts.allocate(this.localAddress);
    d.seq++;
    const reInvite = sipRequest(
      'INVITE',
      d.target,
      [
        ['from', this.fromHeader],
        ['to', d.to],
        ['call-id', this.sipCallId],
        ['cseq', `${d.seq} INVITE`],
        ['contact', `<sip:caller@${signalling.endpoint.sentBy}>`],
        ['content-type', 'application/sdp'],
      ],
      Buffer.from(offer({ address: this.localAddress, port: media.port, sessionId: this.sessionId, version: ++this.sdpVersion })),
    );
    const response = await signalling.endpoint.request(reInvite, this.server);
    const answer = response.status >= 200 && response.status < 300 ? negotiate(response.body.toString('latin1')) : null;
    if (!answer || 'problem' in answer) {
      media.rtp.close();
      media.rtcp.close();
      rtpPorts.release(media.port);
      throw new Error(`the re-INVITE was answered ${response.status} ${response.reason}`);
    }
    signalling.endpoint.send(
      sipRequest('ACK', d.target, [
        ['via', signalling.endpoint.via(this.server)],
        ['max-forwards', '70'],
        ['from', this.fromHeader],
        ['to', d.to],
        ['call-id', this.sipCallId],
        ['cseq', `${d.seq} ACK`],
      ]),
      this.server,
    );
    this.session = this.rtpSession(media, answer);
    this.media = media;
    this.oldSession = old;
    await new Promise((r) => setTimeout(r, overlapMs));
    if (this.oldSession === old) this.oldSession = null;
    old.close();
    rtpPorts.release(oldMedia.port);
  }

  /** Tears down without a word to the far end (no BYE). */
  override async close(): Promise<void> {
    await super.close();
    this.teardown();
  }

  /** A request of the server's in this dialog: its BYE (and any copy of it) is answered 200. */
  private onRequest(req: SipRequest, tx: ServerTransaction): void {
    const tag = tagOf(header(req, 'to'));
    if (tag && tag !== this.fromTag) return void tx.respond(481, 'Call/Transaction Does Not Exist');
    switch (req.method) {
      case 'BYE':
        tx.respond(200, 'OK');
        this.byeReceived = true;
        if (this.hungUpByServer) return;
        this.hungUpByServer = true;
        this.input?.ended();
        return;
      case 'OPTIONS':
      case 'INFO':
      case 'NOTIFY':
        return void tx.respond(200, 'OK');
      default:
        return void tx.respond(501, 'Not Implemented');
    }
  }

  /** Our BYE, once (a 481 or a timeout counts as done: the dialog is gone either way). */
  private async bye(): Promise<void> {
    if (!this.dialog || !this.signalling || this.byeAnswer || this.hungUpByServer) return;
    const d = this.dialog;
    d.seq++;
    const bye = sipRequest('BYE', d.target, [
      ['from', this.fromHeader],
      ['to', d.to],
      ['call-id', this.sipCallId],
      ['cseq', `${d.seq} BYE`],
      ['user-agent', 'Switchboard simulated phone'],
    ]);
    this.byeAnswer = await this.signalling.endpoint.request(bye, this.server);
  }

  /** The media closes; the dialog's requests are still answered for a while (copies of a BYE). */
  private teardown(): void {
    this.oldSession?.close();
    this.oldSession = null;
    this.session?.close();
    if (this.media) {
      if (!this.session) {
        this.media.rtp.close();
        this.media.rtcp.close();
      }
      rtpPorts.release(this.media.port);
    }
    this.media = null;
    const registration = this.registration;
    this.registration = null;
    if (registration && this.signalling) setTimeout(() => registration.forget(), 64 * this.signalling.endpoint.timers.t1Ms).unref();
  }
}
