/**
 * The bare baseline of `bench:calls`: the least a Twilio media-stream server can do. It accepts
 * media-stream WebSockets, parses every message, and returns every inbound audio frame to the
 * caller as an outbound `media` message (decoded from base64 and encoded again, as a server that
 * touches the audio must). No signature, no session, no audio processing, no providers.
 *
 * Each frame's `media.timestamp` (ms, as Twilio stamps them; the bench's callers stamp the send
 * time) tells how late the frame was handled: relative to the stream's promptest frame, more than
 * one frame (20 ms) behind is late, as the service's pacer counts its own frames.
 *
 * Whatever the service costs beyond this is its own work: with the same callers, the same frames
 * and the same process, the ratio of the two is the service's capacity against the floor.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { WebSocketServer, type WebSocket } from 'ws';

export interface EchoServer {
  url: string;
  /** Streams open now. */
  live(): number;
  /** Inbound audio frames parsed and returned since the start. */
  framesEchoed(): number;
  /**
   * Since the last reset: frames returned, and those handled more than one frame (20 ms) later
   * than the stream's promptest frame, by the `media.timestamp` the caller stamped on each.
   */
  lateness(): { frames: number; late: number; maxLateMs: number };
  resetLateness(): void;
  close(): Promise<void>;
}

const FRAME_MS = 20;

interface TwilioMessage {
  event?: string;
  streamSid?: string;
  start?: { streamSid?: string };
  media?: { payload?: string; timestamp?: string };
}

export async function startEchoServer(): Promise<EchoServer> {
  const http: Server = createServer((_req, res) => {
    res.writeHead(404).end();
  });
  const wss = new WebSocketServer({ server: http, path: '/echo' });
  let live = 0;
  let echoed = 0;
  const stats = { frames: 0, late: 0, maxLateMs: 0 };
  wss.on('connection', (ws: WebSocket) => {
    live++;
    let streamSid = '';
    /** The smallest (arrival − timestamp) seen on this stream: the frame handled promptest. */
    let offset = Infinity;
    ws.on('message', (data) => {
      let m: TwilioMessage;
      try {
        m = JSON.parse(data.toString()) as TwilioMessage;
      } catch {
        return;
      }
      if (m.event === 'start') {
        streamSid = m.start?.streamSid ?? m.streamSid ?? '';
      } else if (m.event === 'media' && typeof m.media?.payload === 'string') {
        const audio = Buffer.from(m.media.payload, 'base64');
        ws.send(JSON.stringify({ event: 'media', streamSid, media: { payload: audio.toString('base64') } }));
        echoed++;
        stats.frames++;
        const stamp = Number(m.media.timestamp);
        if (Number.isFinite(stamp)) {
          const behind = performance.now() - stamp;
          offset = Math.min(offset, behind);
          const late = behind - offset;
          if (late > FRAME_MS) {
            stats.late++;
            stats.maxLateMs = Math.max(stats.maxLateMs, late);
          }
        }
      } else if (m.event === 'stop') {
        ws.close();
      }
    });
    ws.on('close', () => live--);
    ws.on('error', () => undefined);
  });
  await new Promise<void>((r) => http.listen(0, '127.0.0.1', () => r()));
  const { port } = http.address() as AddressInfo;
  return {
    url: `ws://127.0.0.1:${port}/echo`,
    live: () => live,
    framesEchoed: () => echoed,
    lateness: () => ({ ...stats }),
    resetLateness: () => Object.assign(stats, { frames: 0, late: 0, maxLateMs: 0 }),
    close: async () => {
      for (const c of wss.clients) c.terminate();
      await new Promise((r) => wss.close(r));
      await new Promise((r) => http.close(r));
    },
  };
}
