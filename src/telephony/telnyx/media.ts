/**
 * One Telnyx media stream as a call's `CallTransport`: the socket Telnyx opens to the stream URL
 * of a call's `answer` (or `streaming_start`), carrying the call's id and one-time token in its
 * query. `start` connects the call; the far party's `media` (the inbound track: with both tracks
 * the outbound one is what they hear, our own audio, and only keeps the stream alive), `dtmf`,
 * mark echoes and `stop` go to it; our audio goes back as `media` (μ-law RTP payloads, 40 ms a
 * message), with `mark` and `clear`. Hang-up and transfer are Call Control commands (./telephony.ts).
 */
import type { Logger } from 'pino';
import type { WebSocket } from 'ws';
import type { ActiveCall } from '../../calls/active-call.js';
import type { CallService } from '../../calls/service.js';
import type { CallRecord } from '../../calls/store.js';
import { MULAW_8K, type CallTransport } from '../../calls/transport.js';
import { callRunner, PendingMarks, socketMonitor, type StreamWatcher } from '../liveness.js';
import { CLEAR_MESSAGE, isMulaw8k, markMessage, mediaFrame, mediaSender, parseTelnyxFrame } from './media-protocol.js';

/** Assistant audio goes out 40 ms to a `media` message, as to Twilio (docs/transports.md, "Frames to a message"). */
export const FRAMES_PER_MESSAGE = 2;

export interface TelnyxMediaOptions {
  calls: CallService;
  watcher: StreamWatcher;
  log: Logger;
  /** Ends the call at Telnyx (`hangup`). */
  hangUp(record: CallRecord): Promise<void>;
  /** Moves the call to `destination` (`transfer`). */
  transfer(record: CallRecord, destination: string): Promise<void>;
}

/** Takes a media socket; `query` is the stream URL's (`call_id`, `token`). */
export function attachTelnyxMedia(ws: WebSocket, query: URLSearchParams, remote: string, o: TelnyxMediaOptions): void {
  const callId = query.get('call_id') ?? '';
  const token = query.get('token') ?? '';
  const liveness = o.watcher.liveness;
  let call: ActiveCall | null = null;
  let starting = false;
  const marks = new PendingMarks();
  let unwatch: (() => void) | null = null;
  const refuse = (why: string) => {
    o.log.warn({ remote, callId, why }, 'media stream refused');
    ws.close(1008, 'refused');
  };
  const startTimer = setTimeout(() => {
    if (!call) refuse('no start frame within 10 s');
  }, 10_000);
  const stopWatching = () => {
    clearTimeout(startTimer);
    unwatch?.();
    unwatch = null;
  };
  const toCall = callRunner(() => call);
  const monitor = socketMonitor({
    ws,
    liveness,
    marks,
    toCall,
    stopWatching,
    firstAssumed: () => o.log.warn({ callId }, 'the far end does not echo marks; audio counts as played once its time has passed'),
  });
  const check = (now: number) => {
    if (call && !call.isEnded()) monitor.check(now);
  };
  ws.on('pong', () => monitor.pong());

  ws.on('message', (data, isBinary) => {
    if (isBinary) return refuse('binary frame');
    const fast = mediaFrame(data as Buffer);
    if (fast) {
      monitor.media();
      if (fast.inbound) toCall.audio(fast.audio);
      return;
    }
    const parsed = parseTelnyxFrame(data as Buffer);
    if (!parsed.ok) {
      if (!call) return refuse(parsed.reason);
      o.log.debug({ reason: parsed.reason }, 'media frame ignored');
      return;
    }
    const m = parsed.message;
    switch (m.event) {
      case 'connected':
        return;
      case 'start': {
        if (starting || call) return;
        if (!isMulaw8k(m.start.media_format)) return refuse(`the stream is not PCMU 8 kHz mono (${JSON.stringify(m.start.media_format)})`);
        starting = true;
        clearTimeout(startTimer);
        void o.calls.connect(callId, token, (record) => transport(ws, record, marks, stopWatching, o)).then(
          (c) => {
            if (!c) return refuse('unknown call or wrong token');
            call = c;
            monitor.started();
            if (ws.readyState !== ws.OPEN) return toCall('hang-up', (x) => x.callerHungUp());
            unwatch = o.watcher.watch(check);
          },
          (err: Error) => {
            o.log.error({ err, callId }, 'call could not start');
            refuse('start failed');
          },
        );
        return;
      }
      case 'media':
        monitor.media();
        if (m.inbound) toCall.audio(m.audio);
        return;
      case 'mark':
        // not ours, or already counted as played
        if (marks.answered(m.mark.name)) toCall('mark', (c) => c.played(m.mark.name));
        return;
      case 'dtmf':
        toCall('key press', (c) => c.dtmf(m.dtmf.digit));
        return;
      case 'stop':
        toCall('hang-up', (c) => c.callerHungUp());
        return;
      case 'error':
        o.log.warn({ callId, error: m.payload }, 'Telnyx reported a media streaming error');
        return;
    }
  });
  ws.on('close', () => {
    stopWatching();
    toCall('hang-up', (c) => c.callerHungUp());
  });
  ws.on('error', () => undefined);
}

/** The `CallTransport` of one stream: μ-law 8 kHz both ways, as the answer asked Telnyx for it. */
function transport(ws: WebSocket, record: CallRecord, marks: PendingMarks, stopWatching: () => void, o: TelnyxMediaOptions): CallTransport {
  const open = () => ws.readyState === ws.OPEN;
  const media = mediaSender(FRAMES_PER_MESSAGE, (message) => {
    if (open()) ws.send(message, { binary: false });
  });
  return {
    kind: 'telnyx',
    audioFormat: MULAW_8K,
    framesPerMessage: FRAMES_PER_MESSAGE,
    sendAudio: (frame) => media.frame(frame),
    flushAudio: () => media.flush(),
    mark: (name) => {
      media.flush();
      if (!open()) return;
      ws.send(markMessage(name));
      marks.sent(name);
    },
    clear: () => {
      // what is held was sent as far as the call knows: `clear` drops it with the rest
      media.drop();
      if (open()) ws.send(CLEAR_MESSAGE);
    },
    hangUp: () => o.hangUp(record),
    transfer: (destination) => o.transfer(record, destination),
    close: () => {
      stopWatching();
      if (open()) ws.close(1000, 'call ended');
    },
  };
}
