/**
 * Direct SIP as one transport (DECISIONS 15, docs/sip.md): Switchboard is a SIP user agent on
 * `SIP_PORT` (UDP and TCP). This file puts the rooms together and routes the peers' requests:
 * a new INVITE to the INVITE handling (./inbound.ts, behind the trunk guard of ./trunk-guard.ts),
 * an in-dialog request to the dialogs (./dialogs.ts), whose calls run on the SIP `CallTransport`
 * (./transport.ts); calls placed through the organization's outbound proxy go through the
 * dialling (./dialling.ts); ./metrics.ts counts it all.
 */
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type { CallService } from '../../calls/service.js';
import type { CallRecord } from '../../calls/store.js';
import type { OutboundCalls, OutboundCarrier } from '../../calls/outbound-calls.js';
import type { AccountSettings } from '../../store/account.js';
import type { Store } from '../../store/index.js';
import type { MediaLiveness, StreamWatcher } from '../liveness.js';
import { SipDialler } from './dialling.js';
import { ALLOW, Dialogs } from './dialogs.js';
import { SipEndpoint, type Remote, type ServerTransaction, type SipTimers } from './endpoint.js';
import { InboundInvites } from './inbound.js';
import { header, randomToken, tagOf, type SipRequest } from './message.js';
import { SipMetrics } from './metrics.js';
import { RtpPorts } from './rtp.js';
import { sipTransport } from './transport.js';
import { OperatorDialler } from './operator-dial.js';
import { TrunkGuard } from './trunk-guard.js';

export { calledNumber, SIP_REALM } from './inbound.js';
export { sipOutcome } from './dialling.js';

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
  /** A call refused before pickup because the database or Redis did not answer (for /metrics). */
  onUnavailable?(): void;
}

export class SipTelephony implements OutboundCarrier {
  readonly kind = 'sip';
  readonly endpoint: SipEndpoint;
  /** Set once outbound calls are wired (the runtime makes them after the transport). */
  outbound: OutboundCalls | null = null;
  private readonly dialogs: Dialogs;
  private readonly inbound: InboundInvites;
  private readonly dialler: SipDialler;
  /** Warm transfers' operators (./operator-dial.ts); web calls dial theirs through it too. */
  readonly operators: OperatorDialler;
  private readonly log: Logger;
  /** Whether new calls are taken (a draining process answers OPTIONS 503). */
  private readonly accepting: () => boolean;

  constructor(o: SipTelephonyOptions) {
    this.accepting = () => o.calls.isAccepting();
    this.log = o.logger.child({ component: 'calls', transport: 'sip' });
    const metrics = new SipMetrics(o.registry);
    const ports = new RtpPorts(o.rtpPortMin, o.rtpPortMax);
    this.endpoint = new SipEndpoint({
      host: o.host,
      port: o.port,
      ...(o.publicAddress ? { publicAddress: o.publicAddress } : {}),
      logger: this.log,
      ...(o.timers ? { timers: o.timers } : {}),
      onRequest: (req, remote, tx) => this.onRequest(req, remote, tx),
      inUse: (remote) => this.dialogs.uses(remote),
      count: (what) => metrics.count(what),
    });
    const endpoint = this.endpoint;
    const log = this.log;
    this.dialogs = new Dialogs({
      endpoint,
      ports,
      calls: o.calls,
      metrics,
      log,
      transportFor: (dialog, record) =>
        sipTransport(dialog, record, { dialogs: this.dialogs, store: o.store, watcher: o.watcher, liveness: o.liveness, publicAddress: endpoint.publicAddress, log, operators: this.operators }),
    });
    this.operators = new OperatorDialler({ endpoint, dialogs: this.dialogs, ports, watcher: o.watcher, liveness: o.liveness, host: o.host, log });
    const guard = new TrunkGuard(log);
    this.inbound = new InboundInvites({ calls: o.calls, store: o.store, dialogs: this.dialogs, guard, ports, metrics, log, host: o.host, ...(o.onUnavailable ? { onUnavailable: o.onUnavailable } : {}) });
    this.dialler = new SipDialler({ endpoint, dialogs: this.dialogs, ports, calls: o.calls, log, host: o.host, outboundCalls: () => this.outboundCalls() });
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

  /** A peer's request: a new INVITE, or one in a dialog (which is its Call-ID and our tag, in To). */
  private onRequest(req: SipRequest, remote: Remote, tx: ServerTransaction): void {
    const inDialog = this.dialogs.find(header(req, 'call-id')!, tagOf(header(req, 'to')));
    switch (req.method) {
      case 'INVITE':
        if (tagOf(header(req, 'to'))) return this.dialogs.reInvite(req, tx, inDialog);
        return this.inbound.receive(req, remote, tx);
      case 'BYE':
        return this.dialogs.byeReceived(tx, inDialog);
      case 'OPTIONS':
        // a dispatcher's health check (deploy/kamailio): a draining process takes no new calls
        if (!this.accepting()) return void tx.respond(503, 'Service Unavailable', randomToken(), [['retry-after', '5']]);
        return void tx.respond(200, 'OK', randomToken(), [
          ['allow', ALLOW],
          ['accept', 'application/sdp'],
        ]);
      case 'NOTIFY':
        return this.dialogs.notify(req, tx, inDialog);
      case 'INFO':
        return this.dialogs.info(req, tx, inDialog);
      case 'CANCEL':
      case 'ACK':
        return; // the endpoint answers these
      default:
        tx.respond(405, 'Method Not Allowed', randomToken(), [['allow', ALLOW]]);
    }
  }

  unusable(account: AccountSettings): string | null {
    return this.dialler.unusable(account);
  }

  /** Places the call through the organization's trunk (./dialling.ts). */
  place(record: CallRecord, account: AccountSettings): Promise<Record<string, string>> {
    return this.dialler.place(record, account);
  }

  cancel(record: CallRecord): Promise<void> {
    return this.dialler.cancel(record);
  }

  private outboundCalls(): OutboundCalls {
    if (!this.outbound) throw new Error('outbound calls are not wired');
    return this.outbound;
  }

  /** Every dialog still up gets its BYE; then the sockets close. */
  async close(): Promise<void> {
    this.dialler.cancelAll();
    await Promise.all(this.dialogs.all().map((d) => this.dialogs.bye(d).finally(() => this.dialogs.release(d))));
    await this.endpoint.close();
  }
}
