/**
 * An INVITE we send through the account's trunk (an outbound call, a warm transfer's operator):
 * its headers from our side, one digest challenge answered with the trunk's credentials, a CANCEL
 * once the far end has answered provisionally when we give up (RFC 3261 §9.1), and the ACK of its
 * 2xx, sent again for each copy of the 2xx. What the answer means is its caller's business.
 */
import type { SipSettings } from '../../store/account.js';
import type { SipProxy } from './addresses.js';
import { answerChallenge } from './digest.js';
import { ALLOW, type Dialogs, type NewDialog } from './dialogs.js';
import type { Remote, SipEndpoint } from './endpoint.js';
import { header, parseCSeq, parseNameAddr, parseVia, randomToken, request as sipRequest, tagOf, type SipRequest, type SipResponse } from './message.js';
import type { Negotiated } from './sdp.js';

type Trunk = NonNullable<SipSettings['outbound']>;

/** The media of a dialog we hang up at once (answered after we gave up, or with an SDP we cannot take). */
export const DEAD_MEDIA: Negotiated = { codec: 'PCMU', payload: 0, dtmfPayload: null, address: '0.0.0.0', port: 9, direction: 'inactive', declined: [], audioIndex: 0 };

export interface OutgoingInviteOptions {
  endpoint: SipEndpoint;
  dialogs: Dialogs;
  trunk: Trunk;
  proxy: SipProxy;
  /** Who is called (the user part of the target). */
  destination: string;
  /** Who calls (the user part of our From). */
  callerId: string;
  /** The SDP offer. */
  body: Buffer;
}

/** The fields of an answered INVITE's dialog that come from the INVITE and its answer. */
export type AnsweredDialog = Omit<NewDialog, 'callId' | 'media' | 'negotiated'> & { localSeq: number };

export class OutgoingInvite {
  readonly remote: Remote;
  readonly sipCallId: string;
  readonly localTag = randomToken();
  private readonly target: string;
  private readonly from: string;
  private readonly to: string;
  private seq = 1;
  private current: SipRequest;
  private branch = '';
  private provisional = false;
  private cancelSent = false;
  private giveUp = false;
  private ack: SipRequest | null = null;

  constructor(private readonly o: OutgoingInviteOptions) {
    const { proxy, endpoint } = o;
    this.remote = { protocol: proxy.protocol, address: proxy.host, port: proxy.port };
    this.sipCallId = `${randomToken(12)}@${endpoint.publicAddress}`;
    const hostPart = `${proxy.host}${proxy.port !== 5060 ? `:${proxy.port}` : ''}`;
    this.target = `sip:${o.destination}@${hostPart}${proxy.protocol === 'TCP' ? ';transport=tcp' : ''}`;
    this.from = `<sip:${o.callerId}@${endpoint.publicAddress}>;tag=${this.localTag}`;
    this.to = `<sip:${o.destination}@${hostPart}>`;
    this.current = this.build();
  }

  /** We gave up on it: a CANCEL now, or as soon as the far end has answered provisionally. */
  get canceled(): boolean {
    return this.giveUp;
  }

  /**
   * Sends the INVITE until its final answer (a challenge is answered once, unless we gave up
   * meanwhile); `onProvisional` hears each 1xx.
   */
  async send(onProvisional: (answer: SipResponse) => void = () => undefined): Promise<SipResponse> {
    const { endpoint, trunk } = this.o;
    for (let attempt = 0; ; attempt++) {
      const sent = endpoint.request(
        this.current,
        this.remote,
        (answer) => {
          this.provisional = true;
          onProvisional(answer);
          if (this.giveUp) this.sendCancel();
        },
        // the 2xx comes again until our ACK arrives: each copy gets it again
        { onFinalCopy: () => this.ack && endpoint.send(this.ack, this.remote) },
      );
      this.branch = parseVia(header(this.current, 'via')!)?.params.get('branch') ?? '';
      this.provisional = false;
      this.cancelSent = false;
      const response = await sent;
      if ((response.status === 401 || response.status === 407) && attempt === 0 && trunk.username && trunk.password && !this.giveUp) {
        const challenge = header(response, response.status === 401 ? 'www-authenticate' : 'proxy-authenticate');
        const auth = challenge ? answerChallenge(challenge, 'INVITE', this.target, { username: trunk.username, password: trunk.password }) : null;
        if (auth) {
          this.seq++;
          this.current = this.build([response.status === 401 ? 'authorization' : 'proxy-authorization', auth]);
          continue;
        }
      }
      return response;
    }
  }

  /** Gives up: the CANCEL goes once the far end has answered provisionally. */
  cancel(): void {
    this.giveUp = true;
    this.sendCancel();
  }

  /** A 2xx: ACKs it (and each copy of it to come); the dialog's fields from our INVITE and its answer. */
  acknowledge(response: SipResponse): AnsweredDialog {
    const { endpoint } = this.o;
    const remoteTarget = parseNameAddr(header(response, 'contact') ?? '')?.uri ?? this.target;
    const routeSet = [...(response.headers.get('record-route') ?? [])].reverse();
    const ack = sipRequest('ACK', remoteTarget, [
      ['from', this.from],
      ['to', header(response, 'to')!],
      ['call-id', this.sipCallId],
      ['cseq', `${parseCSeq(header(this.current, 'cseq')!)!.seq} ACK`],
      ['max-forwards', '70'],
      ...routeSet.map((r): [string, string] => ['route', r]),
    ]);
    ack.headers.set('via', [endpoint.via(this.remote)]);
    this.ack = ack;
    endpoint.send(ack, this.remote);
    return {
      direction: 'outbound',
      sipCallId: this.sipCallId,
      localTag: this.localTag,
      remoteTag: tagOf(header(response, 'to')),
      localUri: this.from,
      remoteUri: header(response, 'to')!,
      remoteTarget,
      remote: this.remote,
      routeSet,
      localSeq: this.seq,
      signallingAddress: this.remote.address,
    };
  }

  private sendCancel(): void {
    if (this.cancelSent || !this.branch || !this.provisional) return;
    this.cancelSent = true;
    // a transaction of its own, on the INVITE's branch (RFC 3261 §9.1)
    const cancel = sipRequest('CANCEL', this.current.uri, [
      ['from', header(this.current, 'from')!],
      ['to', header(this.current, 'to')!],
      ['call-id', this.sipCallId],
      ['cseq', `${this.seq} CANCEL`],
    ]);
    void this.o.endpoint.request(cancel, this.remote, undefined, { branch: this.branch });
  }

  private build(auth?: [string, string]): SipRequest {
    return sipRequest('INVITE', this.target, [
      ['from', this.from],
      ['to', this.to],
      ['call-id', this.sipCallId],
      ['cseq', `${this.seq} INVITE`],
      ['contact', this.o.dialogs.contact(this.remote.protocol)],
      ['allow', ALLOW],
      ['user-agent', 'Switchboard'],
      ['content-type', 'application/sdp'],
      ...(auth ? [auth] : []),
    ], this.o.body);
  }
}
