/**
 * The SIP endpoint: UDP and TCP on one port, and the transaction layer (RFC 3261 §17) — what
 * retransmits, what absorbs retransmissions, what times out. The user agent above it
 * (`SipTelephony`) sees requests once each, with a `ServerTransaction` to answer, and sends its
 * own requests with `request`, which resolves to the final response (a synthesized 408 when none
 * comes). Nothing a peer sends can throw out of here: a message that does not parse is counted
 * and dropped, and the handlers' errors are caught and logged.
 */
import dgram from 'node:dgram';
import net from 'node:net';
import type { Logger } from 'pino';
import {
  header,
  newBranch,
  tagOf,
  parseCSeq,
  parseMessage,
  parseVia,
  responseTo,
  serialize,
  SipStreamFramer,
  type SipMessage,
  type SipRequest,
  type SipResponse,
} from './message.js';

export type SipProtocol = 'UDP' | 'TCP';

/** Where a message came from, or goes to. */
export interface Remote {
  protocol: SipProtocol;
  address: string;
  port: number;
}

export const remoteKey = (r: Remote) => `${r.protocol}:${r.address}:${r.port}`;

export interface SipTimers {
  /** RFC 3261's T1 (round-trip estimate, 500 ms) and T2 (cap on retransmission intervals, 4 s). */
  t1Ms: number;
  t2Ms: number;
}

export const DEFAULT_TIMERS: SipTimers = { t1Ms: 500, t2Ms: 4000 };

/** How many free ports `port` 0 tries before a TCP port in use is an error. */
const BIND_ATTEMPTS = 5;

/** Server transactions kept at once (each lives 32 s after its answer): past it, new requests are dropped. */
const MAX_SERVER_TRANSACTIONS = 20_000;
/** Inbound TCP connections: in all, and from one address. */
const MAX_TCP_CONNECTIONS = 1_000;
const MAX_TCP_PER_ADDRESS = 64;
/** A TCP connection with no traffic and no live dialog is closed after this long. */
const TCP_IDLE_MS = 60_000;
/**
 * Copies of a failure (300–699) to an INVITE over UDP after the first, at T1 and 3×T1, while no
 * ACK comes. RFC 3261 §17.2.1 (timer G) sends it until the ACK or timer H (64×T1, 11 copies);
 * a real peer ACKs the first copy it gets, so the copies only cover loss, and three in all do.
 * More is a reflection toward a spoofed source (a 401 to an INVITE nobody sent). 2xx copies are
 * the dialog's (§13.3.1.4) and go on until the ACK.
 */
const MAX_FAILURE_COPIES = 2;
/** An INVITE that rang (a provisional answer) and then got no final answer for this long ends as timed out. */
const PROCEEDING_LIMIT_MS = 5 * 60_000;

/** Whether we have an open TCP connection to `remote` (requests there need none: one is made). */
export type ConnectionCheck = (remote: Remote) => boolean;

export interface SipEndpointOptions {
  host: string;
  port: number;
  /** What goes in our Via and Contact headers (default: `host`). */
  publicAddress?: string;
  logger: Logger;
  timers?: Partial<SipTimers>;
  /** A new request (retransmissions never come here). */
  onRequest(request: SipRequest, remote: Remote, tx: ServerTransaction): void;
  /** Counts what happens, for the metrics: `parse_error`, `request:<METHOD>`, `response:<code>`, `timeout:<METHOD>`, `overload`. */
  count?(what: string): void;
  /** Whether a live dialog uses this TCP connection (it is then not closed for idleness). */
  inUse?(remote: Remote): boolean;
  /**
   * Its sockets and transaction timers do not keep the process alive (a simulated phone's, in a
   * process that must exit on its own). Default: they do, as a server's should.
   */
  unref?: boolean;
}

/** One request of a peer's, to answer. */
export class ServerTransaction {
  /** The last response sent (sent again when the request comes again). */
  last: SipResponse | null = null;
  private timer: NodeJS.Timeout | null = null;
  private expiry: NodeJS.Timeout | null = null;
  private readonly cancelHandlers: (() => void)[] = [];
  /** For an INVITE answered with a final response: called when its ACK arrives. */
  onAck: ((ack: SipRequest) => void) | null = null;
  /** For an INVITE: called when no ACK came for its final response in 64×T1. */
  onNoAck: (() => void) | null = null;
  acked = false;
  done = false;

  constructor(
    readonly request: SipRequest,
    readonly remote: Remote,
    private readonly endpoint: SipEndpoint,
    private readonly forget: () => void,
  ) {}

  get isInvite() {
    return this.request.method === 'INVITE';
  }

  /** Answers; an INVITE's final answer is sent again until its ACK (over UDP). */
  respond(status: number, reason: string, toTag?: string, extra: [string, string][] = [], body?: Buffer): SipResponse {
    const response = responseTo(this.request, status, reason, toTag, extra, body);
    this.send(response);
    return response;
  }

  send(response: SipResponse): void {
    if (this.done) return;
    // one final answer per request: a second (a refusal racing a CANCEL's 487) is not sent
    if (this.last && this.last.status >= 200) return;
    this.last = response;
    this.endpoint.send(response, this.remote);
    if (response.status < 200) return;
    const t = this.endpoint.timers;
    if (this.isInvite) {
      if (this.remote.protocol === 'UDP') {
        let interval = t.t1Ms;
        let copies = response.status < 300 ? Infinity : MAX_FAILURE_COPIES;
        const again = () => {
          if (this.acked || this.done || copies-- <= 0) return;
          this.endpoint.send(response, this.remote);
          interval = Math.min(interval * 2, t.t2Ms);
          this.timer = this.endpoint.schedule(again, interval);
        };
        this.timer = this.endpoint.schedule(again, interval);
      }
      this.expiry = this.endpoint.schedule(() => {
        if (!this.acked) this.onNoAck?.();
        this.finish();
      }, 64 * t.t1Ms);
    } else {
      // kept for retransmissions of the request (timer J: 64×T1 over UDP, none over TCP), then forgotten
      this.expiry = this.endpoint.schedule(() => this.finish(), this.remote.protocol === 'UDP' ? 64 * t.t1Ms : 0);
    }
  }

  /** A CANCEL for this INVITE arrived before its final answer (`onCancel` handlers have run, or will at once). */
  cancelRequested = false;

  /** Runs `handler` when a CANCEL arrives before the final answer; at once if one already did. */
  onCancel(handler: () => void): void {
    if (this.cancelRequested) handler();
    else this.cancelHandlers.push(handler);
  }

  /** @internal */
  canceled(): void {
    this.cancelRequested = true;
    for (const h of this.cancelHandlers.splice(0)) h();
  }

  /** @internal the ACK of our final answer */
  ack(request: SipRequest): void {
    if (this.acked) return;
    this.acked = true;
    if (this.timer) clearTimeout(this.timer);
    this.onAck?.(request);
  }

  /** @internal */
  finish(): void {
    this.done = true;
    if (this.timer) clearTimeout(this.timer);
    if (this.expiry) clearTimeout(this.expiry);
    this.forget();
  }
}

interface ClientTransaction {
  request: SipRequest;
  remote: Remote;
  resolve(response: SipResponse): void;
  onProvisional?(response: SipResponse): void;
  /** A copy of a 2xx to an INVITE after the first: its ACK must go again. */
  onFinalCopy?(response: SipResponse): void;
  timer: NodeJS.Timeout | null;
  expiry: NodeJS.Timeout;
  final: boolean;
}

export class SipEndpoint {
  readonly timers: SipTimers;
  private udp: dgram.Socket | null = null;
  private tcp: net.Server | null = null;
  /** Open TCP connections, by remote. */
  private readonly connections = new Map<string, net.Socket>();
  private readonly servers = new Map<string, ServerTransaction>();
  /** INVITE server transactions by Call-ID and CSeq number: where an ACK goes. */
  private readonly invites = new Map<string, ServerTransaction>();
  private readonly clients = new Map<string, ClientTransaction>();
  /** Open inbound TCP connections per source address. */
  private readonly perAddress = new Map<string, number>();
  private readonly log: Logger;
  private boundPort = 0;
  private closed = false;

  constructor(private readonly o: SipEndpointOptions) {
    this.timers = { ...DEFAULT_TIMERS, ...o.timers };
    this.log = o.logger;
  }

  get port(): number {
    return this.boundPort;
  }

  /** What goes in our Via and Contact: `address:port`. */
  get sentBy(): string {
    return `${this.o.publicAddress ?? this.o.host}:${this.boundPort}`;
  }

  get publicAddress(): string {
    return this.o.publicAddress ?? this.o.host;
  }

  /** @internal a transaction timer (not keeping the process alive when the endpoint is `unref`). */
  schedule(run: () => void, ms: number): NodeJS.Timeout {
    const timer = setTimeout(run, ms);
    if (this.o.unref) timer.unref();
    return timer;
  }

  /**
   * Binds UDP and TCP on the same port (`port` 0: a free one, the same for both). The free UDP port
   * may be taken for TCP by another process: with `port` 0 another is tried, a few times.
   */
  async start(): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.bind();
      } catch (err) {
        if (this.o.port !== 0 || attempt >= BIND_ATTEMPTS || (err as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw err;
      }
    }
  }

  private async bind(): Promise<void> {
    const udp = dgram.createSocket({ type: net.isIPv6(this.o.host) ? 'udp6' : 'udp4' });
    udp.on('message', (data, rinfo) => this.receive(data, { protocol: 'UDP', address: rinfo.address, port: rinfo.port }));
    udp.on('error', (err) => this.log.error({ err }, 'SIP UDP socket error'));
    await new Promise<void>((resolve, reject) => {
      udp.once('error', reject);
      udp.bind(this.o.port, this.o.host, () => {
        udp.off('error', reject);
        resolve();
      });
    });
    this.udp = udp;
    this.boundPort = udp.address().port;
    if (this.o.unref) udp.unref();
    const tcp = net.createServer((socket) => {
      const address = socket.remoteAddress ?? '';
      const open = this.perAddress.get(address) ?? 0;
      if (open >= MAX_TCP_PER_ADDRESS) {
        this.o.count?.('overload');
        socket.destroy();
        return;
      }
      this.perAddress.set(address, open + 1);
      socket.once('close', () => {
        const n = (this.perAddress.get(address) ?? 1) - 1;
        if (n > 0) this.perAddress.set(address, n);
        else this.perAddress.delete(address);
      });
      this.attach(socket);
    });
    tcp.maxConnections = MAX_TCP_CONNECTIONS;
    tcp.on('error', (err) => this.log.error({ err }, 'SIP TCP server error'));
    await new Promise<void>((resolve, reject) => {
      tcp.once('error', reject);
      tcp.listen(this.boundPort, this.o.host, () => {
        tcp.off('error', reject);
        resolve();
      });
    }).catch((err: unknown) => {
      udp.close();
      throw err;
    });
    this.tcp = tcp;
    if (this.o.unref) tcp.unref();
  }

  private attach(socket: net.Socket, known?: Remote): Remote {
    const remote: Remote = known ?? { protocol: 'TCP', address: socket.remoteAddress ?? '', port: socket.remotePort ?? 0 };
    const key = remoteKey(remote);
    this.connections.set(key, socket);
    if (this.o.unref) socket.unref();
    const framer = new SipStreamFramer();
    socket.setNoDelay(true);
    socket.on('data', (chunk) => {
      const { messages, error } = framer.push(chunk);
      for (const m of messages) this.receive(m, remote);
      if (error) {
        this.o.count?.('parse_error');
        this.log.warn({ remote: key, error }, 'SIP stream closed: bad framing');
        socket.destroy();
      }
    });
    // an idle connection goes, unless a live call's dialog rides on it (SIP is silent mid-call);
    // a request of ours after it went connects to the peer's Contact (`Dialogs.targetOf`, dialogs.ts)
    socket.setTimeout(TCP_IDLE_MS, () => {
      if (!this.o.inUse?.(remote)) socket.destroy();
    });
    socket.on('error', () => undefined);
    socket.on('close', () => {
      if (this.connections.get(key) === socket) this.connections.delete(key);
    });
    return remote;
  }

  /** Whether a TCP connection to `remote` is open now. */
  connected(remote: Remote): boolean {
    const socket = this.connections.get(remoteKey(remote));
    return !!socket && !socket.destroyed;
  }

  /** Sends one message, as is (no transaction). */
  send(message: SipMessage, remote: Remote): void {
    if (this.closed) return;
    const bytes = serialize(message);
    if (remote.protocol === 'UDP') {
      this.udp?.send(bytes, remote.port, remote.address, (err) => {
        if (err) this.log.debug({ err, remote: remoteKey(remote) }, 'SIP datagram not sent');
      });
      return;
    }
    const key = remoteKey(remote);
    let socket = this.connections.get(key);
    if (!socket || socket.destroyed) {
      socket = net.connect({ host: remote.address, port: remote.port });
      this.attach(socket, remote);
    }
    socket.write(bytes);
  }

  private receive(data: Buffer, remote: Remote): void {
    try {
      const parsed = parseMessage(data);
      if (!parsed.ok) {
        // keep-alives (a bare CRLF) are not errors
        if (data.length > 4) {
          this.o.count?.('parse_error');
          this.log.debug({ remote: remoteKey(remote), reason: parsed.reason }, 'SIP message dropped');
        }
        return;
      }
      const m = parsed.message;
      if (m.kind === 'response') this.response(m);
      else this.incoming(m, remote);
    } catch (err) {
      this.log.error({ err, remote: remoteKey(remote) }, 'SIP message handling failed');
    }
  }

  private incoming(m: SipRequest, remote: Remote): void {
    const via = parseVia(header(m, 'via')!);
    if (!via) {
      this.o.count?.('parse_error');
      return;
    }
    const cseq = parseCSeq(header(m, 'cseq')!)!;
    if (cseq.method !== m.method) {
      this.o.count?.('parse_error');
      return;
    }
    // RFC 2543 peers' branches are not unique: their transactions go by Call-ID, CSeq and From tag
    const given = via.params.get('branch') ?? '';
    const branch = given.startsWith('z9hG4bK') ? given : `${header(m, 'call-id')}|${cseq.seq}|${tagOf(header(m, 'from'))}|${given}`;
    if (m.method === 'ACK') {
      const invite = this.invites.get(`${header(m, 'call-id')}|${cseq.seq}`);
      if (invite && !invite.acked) invite.ack(m);
      return;
    }
    const key = `${branch}|${remoteKey(remote)}|${m.method}`;
    const existing = this.servers.get(key);
    if (existing) {
      // a retransmission: the answer again (an INVITE still being decided gets its 100 again)
      if (existing.last) this.send(existing.last, remote);
      return;
    }
    if (this.servers.size >= MAX_SERVER_TRANSACTIONS) {
      // a flood past what any trunk sends: new requests are dropped unread rather than kept
      this.o.count?.('overload');
      return;
    }
    this.o.count?.(`request:${m.method}`);
    if (m.method === 'CANCEL') {
      const invite = this.servers.get(`${branch}|${remoteKey(remote)}|INVITE`);
      const tx = this.serverTransaction(key, m, remote);
      if (!invite) {
        tx.respond(481, 'Call/Transaction Does Not Exist');
        return;
      }
      tx.respond(200, 'OK');
      if (!invite.last || invite.last.status < 200) invite.canceled();
      return;
    }
    const tx = this.serverTransaction(key, m, remote);
    if (m.method === 'INVITE') {
      const ackKey = `${header(m, 'call-id')}|${cseq.seq}`;
      this.invites.set(ackKey, tx);
      const forget = tx.finish.bind(tx);
      tx.finish = () => {
        forget();
        if (this.invites.get(ackKey) === tx) this.invites.delete(ackKey);
      };
      tx.respond(100, 'Trying');
    }
    try {
      this.o.onRequest(m, remote, tx);
    } catch (err) {
      this.log.error({ err, method: m.method }, 'SIP request handling failed');
      if (!tx.last || tx.last.status < 200) tx.respond(500, 'Server Internal Error');
    }
  }

  private serverTransaction(key: string, m: SipRequest, remote: Remote): ServerTransaction {
    const tx = new ServerTransaction(m, remote, this, () => {
      if (this.servers.get(key) === tx) this.servers.delete(key);
    });
    this.servers.set(key, tx);
    return tx;
  }

  private response(m: SipResponse): void {
    const via = parseVia(header(m, 'via')!);
    const cseq = parseCSeq(header(m, 'cseq')!)!;
    const key = `${via?.params.get('branch') ?? ''}|${cseq.method}`;
    const tx = this.clients.get(key);
    this.o.count?.(`response:${m.status}`);
    if (!tx) return;
    if (m.status < 200) {
      if (tx.request.method === 'INVITE' && !tx.final) {
        // a provisional answer stops an INVITE's retransmissions, and its timeout (timer B): the
        // call may ring for long. The caller's ring limit CANCELs it; should even that get no
        // final answer, the transaction ends as timed out after PROCEEDING_LIMIT_MS.
        if (tx.timer) clearTimeout(tx.timer);
        tx.timer = null;
        clearTimeout(tx.expiry);
        tx.expiry = this.schedule(() => this.timeOut(key, tx), PROCEEDING_LIMIT_MS);
      }
      if (!tx.final) tx.onProvisional?.(m);
      return;
    }
    if (tx.request.method === 'INVITE' && m.status >= 300) {
      // the ACK of a failed INVITE is part of its transaction (same branch), sent for each copy
      this.send(this.ackFor(tx.request, m), tx.remote);
    }
    if (tx.final) {
      if (m.status < 300) tx.onFinalCopy?.(m);
      return;
    }
    tx.final = true;
    if (tx.timer) clearTimeout(tx.timer);
    tx.resolve(m);
    // kept a while so that copies of the final answer are absorbed, a failed INVITE's re-ACKed and
    // a 2xx's ACK sent again (over TCP too: the 2xx is retransmitted end to end)
    clearTimeout(tx.expiry);
    const keep = tx.remote.protocol === 'UDP' || (tx.request.method === 'INVITE' && m.status < 300) ? 64 * this.timers.t1Ms : 0;
    tx.expiry = this.schedule(() => this.clients.delete(key), keep);
  }

  /** The ACK of a non-2xx answer to `invite` (RFC 3261 §17.1.1.3). */
  private ackFor(invite: SipRequest, response: SipResponse): SipRequest {
    const headers = new Map<string, string[]>();
    headers.set('via', [invite.headers.get('via')![0]!]);
    headers.set('max-forwards', ['70']);
    headers.set('from', [header(invite, 'from')!]);
    headers.set('to', [header(response, 'to')!]);
    headers.set('call-id', [header(invite, 'call-id')!]);
    headers.set('cseq', [`${parseCSeq(header(invite, 'cseq')!)!.seq} ACK`]);
    const route = invite.headers.get('route');
    if (route) headers.set('route', route);
    return { kind: 'request', method: 'ACK', uri: invite.uri, headers, body: Buffer.alloc(0) };
  }

  /** Our Via for a request to `remote`, with a new branch. */
  via(remote: Remote, branch = newBranch()): string {
    return `SIP/2.0/${remote.protocol} ${this.sentBy};branch=${branch};rport`;
  }

  /**
   * Sends a request in a client transaction and resolves to its final response; a synthesized
   * `408 Request Timeout` when none comes in 64×T1 (RFC 3261 timers B and F). The request's Via
   * is set here. ACKs of 2xx answers go by `send`: they are no transaction.
   */
  request(
    request: SipRequest,
    remote: Remote,
    onProvisional?: (response: SipResponse) => void,
    options: { branch?: string; onFinalCopy?: (response: SipResponse) => void } = {},
  ): Promise<SipResponse> {
    // a CANCEL carries its INVITE's branch (RFC 3261 §9.1); anything else a new one
    const branch = options.branch ?? newBranch();
    request.headers.set('via', [this.via(remote, branch)]);
    if (!request.headers.has('max-forwards')) request.headers.set('max-forwards', ['70']);
    const key = `${branch}|${request.method}`;
    return new Promise<SipResponse>((resolve) => {
      const t = this.timers;
      const tx: ClientTransaction = {
        request,
        remote,
        resolve,
        ...(onProvisional ? { onProvisional } : {}),
        ...(options.onFinalCopy ? { onFinalCopy: options.onFinalCopy } : {}),
        timer: null,
        final: false,
        expiry: this.schedule(() => this.timeOut(key, tx), 64 * t.t1Ms),
      };
      this.clients.set(key, tx);
      this.send(request, remote);
      if (remote.protocol === 'UDP') {
        let interval = t.t1Ms;
        const again = () => {
          if (tx.final || this.closed) return;
          this.send(request, remote);
          interval = request.method === 'INVITE' ? interval * 2 : Math.min(interval * 2, t.t2Ms);
          tx.timer = this.schedule(again, interval);
        };
        tx.timer = this.schedule(again, interval);
      }
    });
  }

  /** A client transaction with no final answer in time: a synthesized 408. */
  private timeOut(key: string, tx: ClientTransaction): void {
    if (tx.timer) clearTimeout(tx.timer);
    this.clients.delete(key);
    if (tx.final) return;
    tx.final = true;
    this.o.count?.(`timeout:${tx.request.method}`);
    tx.resolve(responseTo(tx.request, 408, 'Request Timeout'));
  }

  /** Stops: pending client transactions resolve as timed out; sockets close. */
  async close(): Promise<void> {
    if (this.closed) return;
    for (const tx of this.servers.values()) tx.finish();
    for (const [key, tx] of this.clients) {
      if (tx.timer) clearTimeout(tx.timer);
      clearTimeout(tx.expiry);
      this.clients.delete(key);
      if (!tx.final) tx.resolve(responseTo(tx.request, 408, 'Request Timeout'));
    }
    this.closed = true;
    for (const socket of this.connections.values()) socket.destroy();
    await Promise.all([
      new Promise<void>((resolve) => (this.udp ? this.udp.close(() => resolve()) : resolve())),
      new Promise<void>((resolve) => (this.tcp ? this.tcp.close(() => resolve()) : resolve())),
    ]);
  }
}
