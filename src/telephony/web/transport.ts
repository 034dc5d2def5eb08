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
import { PendingMarks, StreamMonitor, type StreamWatcher } from '../liveness.js';
import { refuseUpgrade } from '../upgrades.js';
import { checkAudio, MAX_MESSAGE_BYTES, observationMessage, parseBrowserMessage, WEB_SAMPLE_RATE } from './protocol.js';

export const WEB_STREAM_PATH = '/calls/web/stream';
/** `<call id>.<secret>`, as `CallService.openWeb` makes it. */
const TOKEN = /^([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\.([A-Za-z0-9_-]{16,64})$/;

export interface WebTelephonyOptions {
  calls: CallService;
  logger: Logger;
  watcher: StreamWatcher;
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
   * `GET /calls/web/stream?token=…`: the token is checked (and used up) before the upgrade, so a
   * bad one gets a plain 4xx and nothing else happens.
   */
  upgrade(request: IncomingMessage, socket: Duplex, head: Buffer): void {
    const remote = request.socket.remoteAddress ?? 'unknown';
    const token = new URL(request.url ?? '', 'http://x').searchParams.get('token') ?? '';
    const match = TOKEN.exec(token);
    if (!match) {
      this.log.warn({ remote }, 'web-call stream refused: no token, or not one the API gives');
      return refuseUpgrade(socket, 400, { error: 'Invalid request', message: 'token: the query must carry the token POST /calls/web gave' });
    }
    if (!this.o.calls.isAccepting()) {
      return refuseUpgrade(socket, 503, { error: 'Unavailable', message: 'the server is shutting down' });
    }
    const [, callId, secret] = match as unknown as [string, string, string];
    this.o.calls.claimStream(callId, secret).then(
      (claimed) => {
        if (!claimed) {
          this.log.warn({ remote, callId }, 'web-call stream refused: unknown, expired or used token');
          return refuseUpgrade(socket, 403, { error: 'Forbidden', message: 'the token is unknown, expired (60 s) or already used' });
        }
        if (socket.destroyed) {
          // the browser left while its token was checked: the call never started
          this.log.info({ callId }, 'the browser left before its web-call stream opened');
          return;
        }
        this.wss.handleUpgrade(request, socket, head, (ws) => this.attach(ws, callId, remote));
      },
      (err: unknown) => {
        this.log.error({ err, callId }, 'web-call stream: the token could not be checked');
        refuseUpgrade(socket, 503, { error: 'Unavailable', message: 'the call store did not answer; try again' });
      },
    );
  }

  /** An open stream whose token was good: the call starts on it. */
  private attach(ws: WebSocket, callId: string, remote: string): void {
    let call: ActiveCall | null = null;
    let unwatch: (() => void) | null = null;
    const marks = new PendingMarks();
    const stopWatching = () => {
      unwatch?.();
      unwatch = null;
    };
    /** The call's own code runs here: what it throws ends that call, never the process. */
    const toCall = (what: string, fn: (c: ActiveCall) => void) => {
      const c = call;
      if (!c) return;
      try {
        fn(c);
      } catch (err) {
        c.fail(err, what);
      }
    };
    const monitor = new StreamMonitor(this.o.watcher.liveness, marks, () => ws.ping(), {
      gone: (why) => {
        stopWatching();
        ws.terminate();
        toCall('far end gone', (c) => c.farEndGone(why));
      },
      played: (name) => toCall('mark', (c) => c.played(name)),
      firstAssumed: () => this.log.debug({ callId }, 'the browser does not echo marks; audio counts as played once its time has passed'),
    });
    const tell = (reason: string) => {
      if (ws.readyState === ws.OPEN) ws.send(JSON.stringify({ type: 'error', message: reason }));
    };
    // what arrives before the call has started is dropped: nothing can take it yet
    ws.on('message', (data, isBinary) => {
      const buffer = data as Buffer;
      if (isBinary) {
        const wrong = checkAudio(buffer);
        if (wrong) return tell(wrong);
        monitor.media();
        return toCall('caller audio', (c) => c.audio(buffer));
      }
      const parsed = parseBrowserMessage(buffer.toString('utf8'));
      if (!parsed.ok) return tell(parsed.reason);
      const m = parsed.message;
      switch (m.type) {
        case 'mark':
          if (marks.answered(m.name)) toCall('mark', (c) => c.played(m.name));
          return;
        case 'dtmf':
          return toCall('key press', (c) => c.dtmf(m.digit));
        case 'hangup':
          toCall('hang-up', (c) => c.callerHungUp());
          if (!call) ws.close(1000, 'hung up');
          return;
      }
    });
    ws.on('pong', () => monitor.pong());
    ws.on('close', () => {
      stopWatching();
      toCall('hang-up', (c) => c.callerHungUp());
    });
    ws.on('error', () => undefined);

    this.o.calls.connectClaimed(callId, (record) => this.transport(ws, record, marks, stopWatching)).then(
      (c) => {
        if (!c) {
          this.log.warn({ callId, remote }, 'web-call stream closed: the call is no longer waiting for it');
          tell('the call is no longer waiting for its stream');
          ws.close(1008, 'call not waiting');
          return;
        }
        call = c;
        monitor.started();
        if (ws.readyState !== ws.OPEN) return toCall('hang-up', (x) => x.callerHungUp());
        ws.send(
          JSON.stringify({
            type: 'started',
            call: { id: c.record.id, type: c.record.type, assistant_id: c.record.assistant_id, workflow_id: c.record.workflow_id },
            audio: { encoding: 'pcm16', sample_rate: WEB_SAMPLE_RATE, channels: 1, frame_ms: 20 },
          }),
        );
        unwatch = this.o.watcher.watch((now) => {
          if (call && !call.isEnded()) monitor.check(now);
        });
      },
      (err: unknown) => {
        this.log.error({ err, callId }, 'web call could not start');
        ws.close(1011, 'start failed');
      },
    );
  }

  /** The `CallTransport` of one browser: 16 kHz PCM both ways, marks echoed by the page. */
  private transport(ws: WebSocket, record: CallRecord, marks: PendingMarks, stopWatching: () => void): CallTransport {
    const open = () => ws.readyState === ws.OPEN;
    const sendText = (text: string) => {
      if (open()) ws.send(text);
    };
    return {
      kind: 'web',
      audioFormat: { encoding: 'pcm16', sampleRate: WEB_SAMPLE_RATE },
      sendAudio: (frame) => {
        if (open()) ws.send(frame, { binary: true });
      },
      mark: (name) => {
        if (!open()) return;
        ws.send(JSON.stringify({ type: 'mark', name }));
        marks.sent(name);
      },
      clear: () => sendText('{"type":"clear"}'),
      // a browser has no carrier leg: closing the socket is the hang-up
      hangUp: async () => undefined,
      // nor a phone line to move: the browser is told, and the call ends call-transferred (as a chat does)
      transfer: async (destination) => {
        this.log.info({ callId: record.id, destination }, 'web call reached a transfer: nothing is dialled');
        sendText(JSON.stringify({ type: 'transfer', destination }));
      },
      close: () => {
        stopWatching();
        if (open()) ws.close(1000, 'call ended');
      },
      observe: (event: CallObservation) => sendText(observationMessage(event)),
    };
  }

  close(): void {
    for (const client of this.wss.clients) client.terminate();
    this.wss.close();
  }
}
