/**
 * The browser as one transport (DECISIONS 14, docs/web-calls.md): `POST /calls/web` makes the
 * call and a one-time token; the browser opens `GET /calls/web/stream?token=…` and sends and
 * receives 16 kHz 16-bit PCM (binary frames) and JSON control messages (text frames). The call
 * service sees a `CallTransport` in `pcm16` and bridges it to the providers (`AudioBridge`).
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { WebSocketServer, type WebSocket } from 'ws';
import type { ActiveCall } from '../../calls/active-call.js';
import type { CallService } from '../../calls/service.js';
import type { CallRecord } from '../../calls/store.js';
import type { CallObservation, CallTransport } from '../../calls/transport.js';
import { callRunner, PendingMarks, socketMonitor, type StreamWatcher } from '../liveness.js';
import { refuseUpgrade } from '../upgrades.js';
import { AudioBudget, CLOSE_REASON, DROPPED_MESSAGE } from './audio-budget.js';
import { checkAudio, MAX_MESSAGE_BYTES, observationMessage, parseBrowserMessage, WEB_SAMPLE_RATE } from './protocol.js';
import { callError, ErrorCodes } from '../../errors.js';
import type { Store } from '../../store/index.js';
import type { MediaLiveness } from '../liveness.js';
import type { OperatorDialler } from '../sip/operator-dial.js';
import { dialWebOperator, type BrowserRelayLink } from './operator.js';
import type { OperatorDialOptions } from '../../calls/operator-leg.js';

export const WEB_STREAM_PATH = '/calls/web/stream';
/** `<call id>.<secret>`, as `CallService.openWeb` makes it. */
const TOKEN = /^([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\.([A-Za-z0-9_-]{16,64})$/;

export interface WebTelephonyOptions {
  calls: CallService;
  logger: Logger;
  watcher: StreamWatcher;
  /** Warm transfers: the account's trunk, and the SIP side that dials through it (null: SIP off). */
  operators?: { store: Store; dialler(): OperatorDialler | null; liveness: MediaLiveness };
}

export class WebTelephony {
  readonly kind = 'web';
  private readonly log: Logger;
  private readonly wss = new WebSocketServer({ noServer: true, maxPayload: MAX_MESSAGE_BYTES });

  constructor(private readonly o: WebTelephonyOptions) {
    this.log = o.logger.child({ component: 'calls', transport: 'web' });
  }

  /** The stream URL `POST /calls/web` answers with. */
  static streamUrl(publicUrl: string, token: string): string {
    return `${publicUrl.replace(/^http/, 'ws').replace(/\/$/, '')}${WEB_STREAM_PATH}?token=${encodeURIComponent(token)}`;
  }

  /**
   * `GET /calls/web/stream?token=…`: the token is checked (and used up) and the call started
   * before the upgrade, so a bad token, or a call no longer waiting for its stream, gets a plain
   * 4xx and nothing else happens.
   */
  upgrade(request: IncomingMessage, socket: Duplex, head: Buffer): void {
    const remote = request.socket.remoteAddress ?? 'unknown';
    const token = new URL(request.url ?? '', 'http://x').searchParams.get('token') ?? '';
    const match = TOKEN.exec(token);
    if (!match) {
      this.log.warn({ remote }, 'web-call stream refused: no token, or not one the API gives');
      return refuseUpgrade(socket, 400, { error: 'Invalid request', message: 'token: the query must carry the token POST /calls/web gave' });
    }
    const handshake = handshakeProblem(request);
    if (handshake) {
      // before the token is used: a client that gets its handshake wrong may try again with it
      this.log.warn({ remote, handshake }, 'web-call stream refused: not a WebSocket handshake');
      return refuseUpgrade(socket, 400, { error: 'Invalid request', message: `not a WebSocket handshake: ${handshake}` });
    }
    if (!this.o.calls.isAccepting()) {
      return refuseUpgrade(socket, 503, { error: 'Unavailable', message: 'the server is shutting down' });
    }
    const [, callId, secret] = match as unknown as [string, string, string];
    this.open(request, socket, head, callId, secret, remote).catch((err: unknown) => {
      // nothing of it may reach the process: the socket goes, and the call (if it started) ends
      this.log.error({ err, callId }, 'web-call stream: opening it failed');
      socket.destroy();
      void this.o.calls.endUnanswered(callId, 'customer-ended-call', [callError(ErrorCodes.CALL_STREAM_LOST, 'switchboard: the stream could not be opened')]);
      this.o.calls.liveCall(callId)?.fail(err, 'web stream open');
    });
  }

  /** Uses up the token, starts the call on a link that waits for its socket, then upgrades. */
  private async open(request: IncomingMessage, socket: Duplex, head: Buffer, callId: string, secret: string, remote: string): Promise<void> {
    try {
      if (!(await this.o.calls.claimStream(callId, secret))) {
        this.log.warn({ remote, callId }, 'web-call stream refused: unknown, expired or used token');
        return refuseUpgrade(socket, 403, { error: 'Forbidden', message: 'the token is unknown, expired (60 s) or already used' });
      }
    } catch (err) {
      this.log.error({ err, callId }, 'web-call stream: the token could not be checked');
      return refuseUpgrade(socket, 503, { error: 'Unavailable', message: 'the call store did not answer; start a new call' });
    }
    if (socket.destroyed) {
      // the browser left while its token was checked: the call never started, and ends now
      this.log.info({ callId }, 'the browser left before its web-call stream opened');
      await this.o.calls.endUnanswered(callId, 'customer-ended-call', [callError(ErrorCodes.CALL_CANCELED, 'the browser left before its stream opened')]);
      return;
    }
    const link = new BrowserLink();
    let call: ActiveCall | null;
    try {
      call = await this.o.calls.connectClaimed(callId, (record) => this.transport(link, record));
    } catch (err) {
      this.log.error({ err, callId }, 'web call could not start');
      return refuseUpgrade(socket, 503, { error: 'Unavailable', message: 'the call could not start; start a new call' });
    }
    if (!call) {
      // ended meanwhile (POST /calls/{id}/end, or finalized): its token may still have been there
      this.log.warn({ callId, remote }, 'web-call stream refused: the call is no longer waiting for it');
      return refuseUpgrade(socket, 403, { error: 'Forbidden', message: 'the call is no longer waiting for its stream' });
    }
    const started = call;
    const hungUp = (why: string) => {
      this.log.info({ callId }, why);
      try {
        started.callerHungUp();
      } catch (err) {
        started.fail(err, 'hang-up');
      }
    };
    if (socket.destroyed) return hungUp('the browser left before its web-call stream opened');
    let upgraded = false;
    this.wss.handleUpgrade(request, socket, head, (ws) => {
      upgraded = true;
      // (a call that ended meanwhile still says `started`, then its end, then closes)
      this.attach(ws, started, link, remote);
    });
    // ws answered the handshake itself (a bad one, or the server closing): the call had started, and ends
    if (!upgraded) hungUp('the web-call stream\'s handshake failed');
  }

  /** The open stream of a call that has started: the browser's frames go to the call. */
  private attach(ws: WebSocket, call: ActiveCall, link: BrowserLink, remote: string): void {
    const callId = call.record.id;
    const toCall = callRunner(() => call);
    const monitor = socketMonitor({
      ws,
      liveness: this.o.watcher.liveness,
      marks: link.marks,
      toCall,
      stopWatching: () => link.stopWatching(),
      firstAssumed: () => this.log.debug({ callId }, 'the browser does not echo marks; audio counts as played once its time has passed'),
    });
    const tell = (reason: string) => {
      if (ws.readyState === ws.OPEN) ws.send(JSON.stringify({ type: 'error', message: reason }));
    };
    const budget = new AudioBudget(() => performance.now());
    const received = (buffer: Buffer, isBinary: boolean) => {
      if (isBinary) {
        const wrong = checkAudio(buffer);
        if (wrong) return tell(wrong);
        const verdict = budget.frame(buffer.length);
        if (verdict === 'close') {
          this.log.warn({ callId, remote }, 'web-call stream closed: audio far faster than real time');
          return ws.close(1008, CLOSE_REASON);
        }
        if (verdict === 'drop') return budget.tellNow() ? tell(DROPPED_MESSAGE) : undefined;
        monitor.media();
        if (link.relay) return link.relay.audio(buffer);
        return toCall.audio(buffer);
      }
      const parsed = parseBrowserMessage(buffer.toString('utf8'));
      if (!parsed.ok) return tell(parsed.reason);
      const m = parsed.message;
      switch (m.type) {
        case 'mark':
          if (link.marks.answered(m.name)) toCall('mark', (c) => c.played(m.name));
          return;
        case 'dtmf':
          if (link.relay) return link.relay.dtmf(m.digit);
          return toCall('key press', (c) => c.dtmf(m.digit));
        case 'hangup':
          if (link.relay) return link.relay.hungUp();
          return toCall('hang-up', (c) => c.callerHungUp());
      }
    };
    ws.on('message', (data, isBinary) => {
      // whatever a frame holds, it never reaches the process: at worst the browser is told
      try {
        received(data as Buffer, isBinary);
      } catch (err) {
        this.log.warn({ err, callId, remote }, 'a web-call frame could not be read');
        tell('the message could not be read');
      }
    });
    ws.on('pong', () => monitor.pong());
    ws.on('close', () => {
      link.stopWatching();
      link.left = true;
      if (link.relay) link.relay.hungUp();
      else toCall('hang-up', (c) => c.callerHungUp());
    });
    ws.on('error', () => undefined);

    // `started` first, then what the call said before the socket opened
    ws.send(
      JSON.stringify({
        type: 'started',
        call: { id: callId, type: call.record.type, assistant_id: call.record.assistant_id, workflow_id: call.record.workflow_id },
        audio: { encoding: 'pcm16', sample_rate: WEB_SAMPLE_RATE, channels: 1, frame_ms: 20 },
      }),
    );
    link.attach(ws);
    if (link.closed) return;
    monitor.started();
    link.watching(
      this.o.watcher.watch((now) => {
        if (!call.isEnded()) monitor.check(now);
      }),
    );
  }

  /** The `CallTransport` of one browser: 16 kHz PCM both ways, marks echoed by the page. */
  private transport(link: BrowserLink, record: CallRecord): CallTransport {
    const audioFormat = { encoding: 'pcm16' as const, sampleRate: WEB_SAMPLE_RATE };
    const operators = this.o.operators;
    // joined to an operator: their audio reaches the browser, not the call's
    const relayLink: BrowserRelayLink = {
      relayTo: (relay) => {
        link.relay = relay;
      },
      send: (pcm) => void link.send(pcm, true),
      get gone() {
        return link.left || link.closed;
      },
    };
    return {
      kind: 'web',
      audioFormat,
      sendAudio: (frame) => void (link.relay ? undefined : link.send(frame, true)),
      mark: (name) => {
        if (link.send(JSON.stringify({ type: 'mark', name }))) link.marks.sent(name);
      },
      clear: () => void link.send('{"type":"clear"}'),
      // a browser has no carrier leg: closing the socket is the hang-up
      hangUp: async () => undefined,
      // nor a phone line to move: the browser is told, and the call ends call-transferred (as a chat does)
      transfer: async (destination) => {
        this.log.info({ callId: record.id, destination }, 'web call reached a transfer: nothing is dialled');
        link.send(JSON.stringify({ type: 'transfer', destination }));
      },
      // a warm transfer: through the account's SIP trunk, relayed here (./operator.ts)
      ...(operators
        ? {
            dialOperator: (destination: string, options: OperatorDialOptions) =>
              dialWebOperator(
                { store: operators.store, operators: () => operators.dialler(), watcher: this.o.watcher, liveness: operators.liveness, log: this.log },
                record,
                audioFormat,
                relayLink,
                destination,
                options,
              ),
          }
        : {}),
      close: () => link.close(),
      observe: (event: CallObservation) => void link.send(observationMessage(event)),
    };
  }

  close(): void {
    for (const client of this.wss.clients) client.terminate();
    this.wss.close();
  }
}

/**
 * What `ws` would refuse of the handshake itself (its own checks, the same ones), found before the
 * token is used up and the call started; null when it will take it.
 */
export function handshakeProblem(request: IncomingMessage): string | null {
  if (request.method !== 'GET') return 'the method must be GET';
  if (request.headers.upgrade?.toLowerCase() !== 'websocket') return 'the Upgrade header must be websocket';
  if (!/^[+/0-9A-Za-z]{22}==$/.test(request.headers['sec-websocket-key'] ?? '')) return 'a missing or invalid Sec-WebSocket-Key header';
  const version = Number(request.headers['sec-websocket-version']);
  if (version !== 13 && version !== 8) return 'a missing or invalid Sec-WebSocket-Version header (13)';
  return null;
}

/**
 * One browser's socket as its call's transport sees it. The call starts before the upgrade (so
 * that a call no longer waiting gets its 403 first): what it sends until the socket is there
 * waits, in order, behind `started`; a close asked for meanwhile closes the socket once it opens.
 */
class BrowserLink {
  readonly marks = new PendingMarks();
  private ws: WebSocket | null = null;
  private early: Array<{ data: string | Buffer; binary: boolean }> = [];
  private unwatch: (() => void) | null = null;
  /** The call closed its media. */
  closed = false;
  /** The browser closed its socket. */
  left = false;
  /** Set while a warm transfer's operator is joined: the browser's audio, keys and hang-up go there. */
  relay: { audio(pcm: Buffer): void; dtmf(digit: string): void; hungUp(): void } | null = null;

  /** Sends (or keeps until the socket is there); false when it can no longer go out. */
  send(data: string | Buffer, binary = false): boolean {
    if (this.closed) return false;
    if (!this.ws) {
      this.early.push({ data, binary });
      return true;
    }
    if (this.ws.readyState !== this.ws.OPEN) return false;
    this.ws.send(data, { binary });
    return true;
  }

  attach(ws: WebSocket): void {
    this.ws = ws;
    const early = this.early;
    this.early = [];
    for (const m of early) if (ws.readyState === ws.OPEN) ws.send(m.data, { binary: m.binary });
    if (this.closed && ws.readyState === ws.OPEN) ws.close(1000, 'call ended');
  }

  watching(unwatch: () => void): void {
    if (this.closed) unwatch();
    else this.unwatch = unwatch;
  }

  stopWatching(): void {
    this.unwatch?.();
    this.unwatch = null;
  }

  close(): void {
    this.stopWatching();
    if (this.closed) return;
    this.closed = true;
    // no socket yet: `attach` closes it once it is there
    if (this.ws && this.ws.readyState === this.ws.OPEN) this.ws.close(1000, 'call ended');
  }
}
