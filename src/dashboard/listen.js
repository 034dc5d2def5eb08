// Listen-in in the browser (docs/listen.md): the socket `POST /calls/{id}/listen` gives (a one-time
// token in its URL, the key only in the POST's header), its binary frames of 16-bit stereo PCM
// played back to back with the Web Audio API, its JSON events handed to the page.
import { api } from './api.js';
import { onThisOrigin } from './webcall.js';

/** Audio queued ahead of the clock, so that frames arriving three at a time (60 ms) play without gaps. */
const LEAD_SECONDS = 0.12;

/**
 * One listener of one call. `start()` must run in the click that asks for it (so that the browser
 * lets the context play). `onEvent(json)` gets each event (`started`, `message`, `node`, `ended`…);
 * `onClose(reason)` is called once, when the socket closes for any reason.
 */
export class Listener {
  constructor(callId, { onEvent, onClose }) {
    this.callId = callId;
    this.onEvent = onEvent;
    this.onClose = onClose;
    this.ctx = new AudioContext();
    this.gain = this.ctx.createGain();
    this.gain.connect(this.ctx.destination);
    this.format = null;
    this.frames = 0;
    this.bytes = 0;
    this.playHead = 0;
    this.ws = null;
    this.closed = false;
  }

  async start() {
    void this.ctx.resume();
    const { url, format } = await api('POST', `/calls/${this.callId}/listen`);
    if (this.closed) return;
    this.format = format;
    const ws = new WebSocket(onThisOrigin(url));
    ws.binaryType = 'arraybuffer';
    this.ws = ws;
    ws.onmessage = (e) => {
      if (typeof e.data === 'string') {
        let event;
        try {
          event = JSON.parse(e.data);
        } catch {
          return;
        }
        if (event.type === 'started' && event.audio) this.format = event.audio;
        this.onEvent?.(event);
      } else {
        this.play(e.data);
      }
    };
    ws.onclose = (e) => this.finish(e.code === 1000 ? 'The call ended.' : `The listen socket closed (${e.code}${e.reason ? `: ${e.reason}` : ''}).`);
    ws.onerror = () => undefined; // onclose follows with the code
  }

  /** One binary message: interleaved left (customer), right (assistant) 16-bit little-endian samples. */
  play(data) {
    this.frames += 1;
    this.bytes += data.byteLength;
    const f = this.format ?? {};
    if (f.encoding && f.encoding !== 'pcm16') return; // counted, not played: a format this page does not know
    const channels = f.channels ?? 2;
    const pcm = new DataView(data);
    const samples = Math.floor(pcm.byteLength / (2 * channels));
    if (!samples) return;
    const buffer = this.ctx.createBuffer(channels, samples, f.sample_rate ?? 8000);
    for (let c = 0; c < channels; c++) {
      const out = buffer.getChannelData(c);
      for (let i = 0; i < samples; i++) out[i] = pcm.getInt16(2 * (i * channels + c), true) / 32768;
    }
    const src = this.ctx.createBufferSource();
    src.buffer = buffer;
    src.connect(this.gain);
    // back to back; after a gap (or a late start), start a little ahead of the clock again
    const now = this.ctx.currentTime;
    const at = this.playHead < now ? now + LEAD_SECONDS : this.playHead;
    src.start(at);
    this.playHead = at + buffer.duration;
  }

  /** Seconds of the call heard so far (the frames are time: 20 ms each). */
  get seconds() {
    return (this.frames * (this.format?.frame_ms ?? 20)) / 1000;
  }

  stop() {
    this.finish('Stopped.');
  }

  finish(reason) {
    if (this.closed) return;
    this.closed = true;
    if (this.ws && this.ws.readyState <= WebSocket.OPEN) this.ws.close(1000, 'stopped');
    this.ctx.close().catch(() => {});
    this.onClose?.(reason);
  }
}
