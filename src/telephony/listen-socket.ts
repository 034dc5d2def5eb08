/**
 * A listener's WebSocket (docs/listen.md): `GET /calls/listen?token=…` with the one-time token
 * `POST /calls/{id}/listen` gave. The token is used up and the call found (here, or with Redis in
 * another process) before the upgrade, so a bad token or a call that is over gets a plain 4xx.
 *
 * Then the socket gets `started`, and from then on the call: binary messages of one 20 ms stereo
 * frame each (16-bit little-endian PCM, 8 kHz, the customer left, the assistant right), and text
 * messages with the JSON events a web call's browser gets, until `ended` and a close (1000). A
 * listener cannot speak: a binary message from it closes the socket (1003); text is ignored. A
 * listener that does not read (its socket holding more than `maxBufferedBytes` unsent, about two
 * seconds of audio) is dropped (1008): the call never waits for it.
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { WebSocketServer, type WebSocket } from 'ws';
import { LISTEN_FORMAT, LISTEN_FRAME_BYTES } from '../calls/listen-mixer.js';
import { ListenHub, type ListenedCallInfo, type ListenOutput } from '../calls/listen.js';
import { refuseUpgrade } from './upgrades.js';
import { handshakeProblem } from './web/transport.js';

export const LISTEN_PATH = '/calls/listen';
/** What a listener's socket may hold unsent before the listener is dropped: about 2 s of audio. */
export const MAX_BUFFERED_BYTES = 64 * 1024;
/** A dropped listener's socket is cut this long after its close frame was queued (behind what it did not read). */
const TERMINATE_AFTER_MS = 1_000;

export interface ListenSocketsOptions {
  hub: ListenHub;
  logger: Logger;
  /** False while the server shuts down: no new listener. */
  isAccepting?: () => boolean;
  maxBufferedBytes?: number;
}

export class ListenSockets {
  private readonly log: Logger;
  private readonly wss = new WebSocketServer({ noServer: true, maxPayload: 4 * 1024 });

  constructor(private readonly o: ListenSocketsOptions) {
    this.log = o.logger.child({ component: 'listen' });
  }

  /** The socket URL `POST /calls/{id}/listen` answers with. */
  static url(publicUrl: string, token: string): string {
    return `${publicUrl.replace(/^http/, 'ws').replace(/\/$/, '')}${LISTEN_PATH}?token=${encodeURIComponent(token)}`;
  }

  upgrade(request: IncomingMessage, socket: Duplex, head: Buffer): void {
    const remote = request.socket.remoteAddress ?? 'unknown';
    const token = new URL(request.url ?? '', 'http://x').searchParams.get('token') ?? '';
    if (!ListenHub.wellFormed(token)) {
      return refuseUpgrade(socket, 400, { error: 'Invalid request', message: 'token: the query must carry the token POST /calls/{id}/listen gave' });
    }
    const handshake = handshakeProblem(request);
    // before the token is used: a client that gets its handshake wrong may try again with it
    if (handshake) return refuseUpgrade(socket, 400, { error: 'Invalid request', message: `not a WebSocket handshake: ${handshake}` });
    if (this.o.isAccepting && !this.o.isAccepting()) {
      return refuseUpgrade(socket, 503, { error: 'Unavailable', message: 'the server is shutting down' });
    }
    this.open(request, socket, head, token, remote).catch((err: unknown) => {
      this.log.error({ err }, 'listen-in: opening a listener\'s socket failed');
      socket.destroy();
    });
  }

  private async open(request: IncomingMessage, socket: Duplex, head: Buffer, token: string, remote: string): Promise<void> {
    let info: ListenedCallInfo | null;
    try {
      const callId = await this.o.hub.claim(token);
      if (!callId) {
        this.log.warn({ remote }, 'listener refused: unknown, expired or used token');
        return refuseUpgrade(socket, 403, { error: 'Forbidden', message: 'the token is unknown, expired (60 s) or already used' });
      }
      info = await this.o.hub.find(callId);
    } catch (err) {
      this.log.error({ err }, 'listen-in: the token or the call could not be looked up');
      return refuseUpgrade(socket, 503, { error: 'Unavailable', message: 'the call sessions did not answer; ask for a new token' });
    }
    if (!info) return refuseUpgrade(socket, 403, { error: 'Forbidden', message: 'the call is no longer live' });
    if (socket.destroyed) return;
    const call = info;
    this.wss.handleUpgrade(request, socket, head, (ws) => this.attach(ws, call, remote));
  }

  private attach(ws: WebSocket, call: ListenedCallInfo, remote: string): void {
    const listener = new SocketListener(ws, this.o.maxBufferedBytes ?? MAX_BUFFERED_BYTES, (why) =>
      this.log.warn({ callId: call.id, remote }, `listener dropped: ${why}`),
    );
    ws.on('message', (_data, isBinary) => {
      // a listener has nothing to say: audio from it is refused, anything else ignored
      if (isBinary) listener.close(1003, 'a listener cannot speak');
    });
    ws.on('close', () => listener.close());
    ws.on('error', () => undefined);
    ws.send(JSON.stringify({ type: 'started', call, audio: LISTEN_FORMAT }));
    this.o.hub.attach(call.id, listener).then(
      (detach) => {
        if (detach) return listener.attached(detach);
        // over between the look-up and now
        listener.event(JSON.stringify({ type: 'ended', ended_reason: null }));
        listener.end();
      },
      (err: unknown) => {
        this.log.error({ err, callId: call.id }, 'listen-in: the call could not be followed');
        listener.close(1011, 'the call could not be followed');
      },
    );
    this.log.info({ callId: call.id, remote }, 'listener joined');
  }

  close(): void {
    for (const client of this.wss.clients) client.terminate();
    this.wss.close();
  }
}

/** One listener's socket as the call's tap (or the relay) sees it. */
class SocketListener implements ListenOutput {
  private detach: (() => void) | null = null;
  private gone = false;

  constructor(
    private readonly ws: WebSocket,
    private readonly maxBuffered: number,
    private readonly dropped: (why: string) => void,
  ) {}

  attached(detach: () => void): void {
    if (this.gone) return detach();
    this.detach = detach;
  }

  audio(frames: Buffer): void {
    const ws = this.ws;
    if (this.gone || ws.readyState !== ws.OPEN) return;
    if (ws.bufferedAmount > this.maxBuffered) {
      this.dropped(`too slow: ${ws.bufferedAmount} bytes not read`);
      this.close(1008, 'too slow: the listener did not read its audio');
      setTimeout(() => ws.terminate(), TERMINATE_AFTER_MS).unref();
      return;
    }
    // one message a frame, written to the socket in one go (`ws` keeps the socket as `_socket`)
    const socket = (ws as unknown as { _socket?: { cork?(): void; uncork?(): void } })._socket;
    socket?.cork?.();
    try {
      for (let at = 0; at + LISTEN_FRAME_BYTES <= frames.length; at += LISTEN_FRAME_BYTES) {
        ws.send(frames.subarray(at, at + LISTEN_FRAME_BYTES), { binary: true });
      }
    } finally {
      socket?.uncork?.();
    }
  }

  event(json: string): void {
    const ws = this.ws;
    if (!this.gone && ws.readyState === ws.OPEN) ws.send(json);
  }

  end(): void {
    this.close(1000, 'call ended');
  }

  /** The listener goes: detached from the call, its socket closed (if it is not already). */
  close(code?: number, reason?: string): void {
    if (!this.gone) {
      this.gone = true;
      const detach = this.detach;
      this.detach = null;
      detach?.();
    }
    const ws = this.ws;
    if (code !== undefined && (ws.readyState === ws.OPEN || ws.readyState === ws.CONNECTING)) ws.close(code, reason);
  }
}
