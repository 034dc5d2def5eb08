/**
 * A simulated SIP phone that calls a Switchboard server's SIP endpoint over UDP (DECISIONS 15,
 * docs/sip.md), as a trunk or a desk phone does: a hand-built INVITE with an SDP offer (PCMU,
 * PCMA, telephone-event), the 100/180/200, the ACK, then the call's audio as RTP (one 20 ms
 * packet every 20 ms, silence included), and a BYE to hang up (the server's BYE is answered 200).
 * It speaks with the sandbox voice and hears through the sandbox STT, as the Twilio caller does:
 * the media side is a `MediaLeg` on its RTP wire (./media-leg.ts), and the RTP itself is the
 * server's own `RtpSession` (src/telephony/sip/rtp.ts: jitter buffer, telephone-event, RTCP).
 *
 * Signalling is one UDP socket for all the calls of a process (`SipSignalling.shared()`): its
 * requests and responses go by Call-ID and Via branch. Each call has its RTP socket and the RTCP
 * one next to it. Used by the tests and by `bench:calls --sip`.
 */
import dgram from 'node:dgram';
import net from 'node:net';
import { createLogger } from '../logger.js';
import {
  header,
  newBranch,
  parseCSeq,
  parseMessage,
  parseNameAddr,
  parseVia,
  randomToken,
  request as sipRequest,
  responseTo,
  serialize,
  tagOf,
  type SipRequest,
  type SipResponse,
} from '../telephony/sip/message.js';
import { RtpSession, type RtpStats } from '../telephony/sip/rtp.js';
import { negotiate, offer } from '../telephony/sip/sdp.js';
import { LegCaller } from './leg-caller.js';
import { MediaLeg, type RtpLink, type SpokenLine } from './media-leg.js';

/** RFC 3261's T1 and T2 (retransmission intervals), and a transaction's limit (64×T1). */
const T1_MS = 500;
const T2_MS = 4000;
const TRANSACTION_MS = 64 * T1_MS;

interface Peer {
  address: string;
  port: number;
}

interface ClientTransaction {
  request: SipRequest;
  peer: Peer;
  resolve(response: SipResponse): void;
  onProvisional?: (response: SipResponse) => void;
  /** For an INVITE: every 2xx after the first (its ACK was lost: send it again). */
  on2xxAgain?: (response: SipResponse) => void;
  timer: NodeJS.Timeout | null;
  expiry: NodeJS.Timeout;
  final: boolean;
}

/**
 * The SIP signalling of a process's simulated phones: one UDP socket, client transactions
 * (retransmitted over UDP until answered, a 408 after 32 s), and in-dialog requests from the
 * server handed to their call by Call-ID (anything else answered 481).
 */
export class SipSignalling {
  private static readonly perAddress = new Map<string, Promise<SipSignalling>>();
  private readonly clients = new Map<string, ClientTransaction>();
  private readonly dialogs = new Map<string, (request: SipRequest, from: Peer) => void>();
  private closed = false;

  private constructor(
    private readonly socket: dgram.Socket,
    readonly address: string,
    readonly port: number,
  ) {
    socket.on('message', (data, rinfo) => this.receive(data, { address: rinfo.address, port: rinfo.port }));
    socket.on('error', () => undefined);
  }

  /** The signalling socket this process's phones share, on `address` (opened at first use). */
  static shared(address = '127.0.0.1'): Promise<SipSignalling> {
    let s = SipSignalling.perAddress.get(address);
    if (!s) {
      s = SipSignalling.open(address);
      SipSignalling.perAddress.set(address, s);
      s.catch(() => SipSignalling.perAddress.delete(address));
    }
    return s;
  }

  /** A signalling socket of its own, on a free port of `address`. */
  static async open(address = '127.0.0.1'): Promise<SipSignalling> {
    const socket = dgram.createSocket(net.isIPv6(address) ? 'udp6' : 'udp4');
    await new Promise<void>((resolve, reject) => {
      socket.once('error', reject);
      socket.bind(0, address, () => {
        socket.off('error', reject);
        resolve();
      });
    });
    // it never keeps a process alive on its own: the calls' timers do while they are up
    socket.unref();
    return new SipSignalling(socket, address, socket.address().port);
  }

  /** Our Via with a new branch. */
  via(branch = newBranch()): string {
    return `SIP/2.0/UDP ${this.address}:${this.port};branch=${branch};rport`;
  }

  /** Hands the requests of a dialog (by its Call-ID) to `handler`, until `forget`. */
  dialog(callId: string, handler: (request: SipRequest, from: Peer) => void): { forget(): void } {
    this.dialogs.set(callId, handler);
    return { forget: () => this.dialogs.get(callId) === handler && this.dialogs.delete(callId) };
  }

  /** Sends a message as is (an ACK of a 2xx, a response). */
  send(message: SipRequest | SipResponse, peer: Peer): void {
    if (this.closed) return;
    this.socket.send(serialize(message), peer.port, peer.address, () => undefined);
  }

  /**
   * Sends a request in a client transaction (its Via set here) and resolves to the final
   * response: retransmitted every T1, doubling (an INVITE until any answer, others until the
   * final one, at most every T2); a synthesized 408 after 64×T1.
   */
  request(
    request: SipRequest,
    peer: Peer,
    handlers: { onProvisional?: (r: SipResponse) => void; on2xxAgain?: (r: SipResponse) => void } = {},
  ): Promise<SipResponse> {
    const branch = newBranch();
    request.headers.set('via', [this.via(branch)]);
    if (!request.headers.has('max-forwards')) request.headers.set('max-forwards', ['70']);
    const key = `${branch}|${request.method}`;
    return new Promise<SipResponse>((resolve) => {
      const tx: ClientTransaction = {
        request,
        peer,
        resolve,
        ...handlers,
        timer: null,
        final: false,
        expiry: setTimeout(() => {
          if (tx.timer) clearTimeout(tx.timer);
          this.clients.delete(key);
          if (tx.final) return;
          tx.final = true;
          resolve(responseTo(request, 408, 'Request Timeout'));
        }, TRANSACTION_MS),
      };
      tx.expiry.unref();
      this.clients.set(key, tx);
      this.send(request, peer);
      let interval = T1_MS;
      const again = () => {
        if (tx.final || this.closed) return;
        this.send(request, peer);
        interval = request.method === 'INVITE' ? interval * 2 : Math.min(interval * 2, T2_MS);
        tx.timer = setTimeout(again, interval);
        tx.timer.unref();
      };
      tx.timer = setTimeout(again, interval);
      tx.timer.unref();
    });
  }

  private receive(data: Buffer, from: Peer): void {
    const parsed = parseMessage(data);
    if (!parsed.ok) return;
    const m = parsed.message;
    if (m.kind === 'response') return this.response(m);
    if (m.method === 'ACK') return;
    const handler = this.dialogs.get(header(m, 'call-id')!);
    if (handler) handler(m, from);
    else this.send(responseTo(m, 481, 'Call/Transaction Does Not Exist', randomToken()), replyPeer(m, from));
  }

  private response(m: SipResponse): void {
    const via = parseVia(header(m, 'via')!);
    const cseq = parseCSeq(header(m, 'cseq')!)!;
    const key = `${via?.params.get('branch') ?? ''}|${cseq.method}`;
    const tx = this.clients.get(key);
    if (!tx) return;
    if (tx.request.method === 'INVITE' && tx.timer) {
      // any answer stops an INVITE's retransmissions
      clearTimeout(tx.timer);
      tx.timer = null;
    }
    if (m.status < 200) {
      if (!tx.final) tx.onProvisional?.(m);
      return;
    }
    if (tx.request.method === 'INVITE' && m.status >= 300) {
      // the ACK of a failed INVITE belongs to its transaction (the same branch), for every copy
      this.send(ackOfFailure(tx.request, m), tx.peer);
    }
    if (tx.final) {
      if (tx.request.method === 'INVITE' && m.status < 300) tx.on2xxAgain?.(m);
      return;
    }
    tx.final = true;
    if (tx.timer) clearTimeout(tx.timer);
    tx.resolve(m);
    // kept a while to absorb copies of the final answer (an INVITE's 2xx until our ACK arrived)
    clearTimeout(tx.expiry);
    tx.expiry = setTimeout(() => this.clients.delete(key), TRANSACTION_MS);
    tx.expiry.unref();
  }

  /** Stops: pending transactions resolve as timed out; the socket closes. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    for (const [key, tx] of this.clients) {
      if (tx.timer) clearTimeout(tx.timer);
      clearTimeout(tx.expiry);
      this.clients.delete(key);
      if (!tx.final) tx.resolve(responseTo(tx.request, 408, 'Request Timeout'));
    }
    for (const [address, s] of SipSignalling.perAddress) void s.then((x) => x === this && SipSignalling.perAddress.delete(address));
    this.socket.close();
  }
}

/** Where a response to a request goes: its Via's sent-by (with rport, the source port). */
function replyPeer(request: SipRequest, from: Peer): Peer {
  const via = parseVia(header(request, 'via')!);
  if (!via || via.params.has('rport')) return from;
  return { address: via.params.get('received') ?? from.address, port: via.port ?? 5060 };
}

/** The ACK of a non-2xx answer to `invite` (RFC 3261 §17.1.1.3): its Via, the answer's To. */
function ackOfFailure(invite: SipRequest, response: SipResponse): SipRequest {
  const ack = sipRequest('ACK', invite.uri, [
    ['via', invite.headers.get('via')![0]!],
    ['max-forwards', '70'],
    ['from', header(invite, 'from')!],
    ['to', header(response, 'to')!],
    ['call-id', header(invite, 'call-id')!],
    ['cseq', `${parseCSeq(header(invite, 'cseq')!)!.seq} ACK`],
  ]);
  return ack;
}

/** An RTP socket and its RTCP one on the next port (the SDP's port, and where RTCP is sent). */
async function bindMediaPair(address: string): Promise<{ rtp: dgram.Socket; rtcp: dgram.Socket; port: number }> {
  const type = net.isIPv6(address) ? 'udp6' : 'udp4';
  const bind = (s: dgram.Socket, port: number) =>
    new Promise<boolean>((resolve) => {
      s.once('error', () => resolve(false));
      s.bind(port, address, () => resolve(true));
    });
  for (let tries = 0; tries < 50; tries++) {
    const rtp = dgram.createSocket(type);
    if (!(await bind(rtp, 0))) {
      rtp.close();
      continue;
    }
    const port = rtp.address().port;
    const rtcp = dgram.createSocket(type);
    if (port < 65_535 && (await bind(rtcp, port + 1))) return { rtp, rtcp, port };
    rtp.close();
    rtcp.close();
  }
  throw new Error('no free RTP/RTCP port pair');
}

const silentLog = createLogger('silent');

export interface SipCallerOptions {
  /** The server's SIP endpoint (UDP). */
  host?: string;
  port: number;
  /** The number called (a `sip` number of the server's). */
  to: string;
  /** The caller's number (From). */
  from?: string;
  /** The signalling socket; default: the one this process's phones share on `localAddress`. */
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
  private readonly server: Peer;
  private signalling: SipSignalling | null = null;
  private session: RtpSession | null = null;
  private media: Awaited<ReturnType<typeof bindMediaPair>> | null = null;
  private registration: { forget(): void } | null = null;
  /** The dialog, once answered: the server's tag and Contact, our next CSeq. */
  private dialog: { to: string; target: string; seq: number } | null = null;
  private input: { audio(frame: Buffer): void; ended(): void } | null = null;
  /** Server audio that came before the leg listened. */
  private early: Buffer[] = [];
  private hungUpByServer = false;

  constructor(private readonly o: SipCallerOptions) {
    super();
    this.localAddress = o.localAddress ?? '127.0.0.1';
    this.server = { address: o.host ?? '127.0.0.1', port: o.port };
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
    this.media = await bindMediaPair(this.localAddress);
    this.registration = signalling.dialog(this.sipCallId, (req, from) => this.onRequest(req, from));
    const uri = `sip:${this.o.to}@${this.server.address}:${this.server.port}`;
    const invite = sipRequest(
      'INVITE',
      uri,
      [
        ['from', this.fromHeader],
        ['to', `<${uri}>`],
        ['call-id', this.sipCallId],
        ['cseq', '1 INVITE'],
        ['contact', `<sip:caller@${signalling.address}:${signalling.port}>`],
        ['allow', 'INVITE, ACK, BYE, CANCEL, OPTIONS'],
        ['user-agent', 'Switchboard simulated phone'],
        ['content-type', 'application/sdp'],
      ],
      Buffer.from(offer({ address: this.localAddress, port: this.media.port, sessionId: Math.floor(Math.random() * 1e9) })),
    );
    let ack: SipRequest | null = null;
    const response = await signalling.request(invite, this.server, {
      onProvisional: (r) => this.provisional.push(r.status),
      // our ACK was lost: the server sends its 200 again until one arrives
      on2xxAgain: () => ack && signalling.send(ack, this.server),
    });
    this.final = response;
    if (response.status < 200 || response.status >= 300) {
      this.teardown();
      return { kind: 'refused', status: response.status, reason: response.reason };
    }
    const target = parseNameAddr(header(response, 'contact') ?? '')?.uri ?? uri;
    this.dialog = { to: header(response, 'to')!, target, seq: 1 };
    ack = sipRequest('ACK', target, [
      ['via', signalling.via()],
      ['max-forwards', '70'],
      ['from', this.fromHeader],
      ['to', this.dialog.to],
      ['call-id', this.sipCallId],
      ['cseq', '1 ACK'],
    ]);
    signalling.send(ack, this.server);
    const answer = negotiate(response.body.toString('latin1'));
    if ('problem' in answer) {
      await this.bye();
      this.teardown();
      throw new Error(`the server's SDP answer: ${answer.problem}`);
    }
    const media = this.media;
    this.session = new RtpSession({
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
    const link: RtpLink = {
      start: (input) => {
        this.input = input;
        for (const frame of this.early.splice(0)) input.audio(frame);
        if (this.hungUpByServer) input.ended();
      },
      send: (frame) => this.session?.send(frame),
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

  /** Tears down without a word to the far end (no BYE). */
  override async close(): Promise<void> {
    await super.close();
    this.teardown();
  }

  /** A request of the server's in this dialog: its BYE (and any copy of it) is answered 200. */
  private onRequest(req: SipRequest, from: Peer): void {
    const peer = replyPeer(req, from);
    const tag = tagOf(header(req, 'to'));
    if (tag && tag !== this.fromTag) return void this.signalling?.send(responseTo(req, 481, 'Call/Transaction Does Not Exist'), peer);
    switch (req.method) {
      case 'BYE':
        this.signalling?.send(responseTo(req, 200, 'OK'), peer);
        this.byeReceived = true;
        if (this.hungUpByServer) return;
        this.hungUpByServer = true;
        this.input?.ended();
        return;
      case 'OPTIONS':
      case 'INFO':
      case 'NOTIFY':
        return void this.signalling?.send(responseTo(req, 200, 'OK'), peer);
      default:
        return void this.signalling?.send(responseTo(req, 501, 'Not Implemented'), peer);
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
    this.byeAnswer = await this.signalling.request(bye, this.server);
  }

  /** The media closes; the dialog's requests are still answered for a while (copies of a BYE). */
  private teardown(): void {
    this.session?.close();
    if (!this.session && this.media) {
      this.media.rtp.close();
      this.media.rtcp.close();
    }
    this.media = null;
    const registration = this.registration;
    this.registration = null;
    if (registration) setTimeout(() => registration.forget(), TRANSACTION_MS).unref();
  }
}
