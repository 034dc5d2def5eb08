// A web call's audio in the browser (docs/web-calls.md): the microphone at 16 kHz through an
// AudioWorklet (`/console/mic-worklet.js`, 640-byte frames of 16-bit PCM every 20 ms), and the
// reply's frames played back to back, marks echoed once what came before them has played, a
// `clear` stopping what is scheduled.

export const RATE = 16000;

/** The web call's socket on this page's own origin, as the API is (the page's policy allows no other; PUBLIC_URL may name another host). */
export function onThisOrigin(url) {
  const u = new URL(url);
  return `${location.protocol === 'https:' ? 'wss:' : 'ws:'}//${location.host}${u.pathname}${u.search}`;
}

/**
 * The microphone and the speaker of one call. `open()` must run in the click that starts the call
 * (so that the browser lets the context play); everything is set up before the call is made, so
 * that a browser that cannot do it leaves no call behind.
 */
export class CallAudio {
  constructor() {
    this.ctx = new AudioContext({ sampleRate: RATE });
    this.stream = null;
    this.mic = null;
    this.playHead = 0;
    this.sources = new Set();
    this.marks = [];
    this.timer = null;
  }

  async open() {
    void this.ctx.resume();
    this.stream = await navigator.mediaDevices.getUserMedia({
      // no processing: the sandbox voice is a modem signal that noise suppression would destroy
      audio: { echoCancellation: false, noiseSuppression: false, autoGainControl: false, channelCount: 1 },
    });
    await this.ctx.audioWorklet.addModule('/console/mic-worklet.js');
    this.mic = new AudioWorkletNode(this.ctx, 'mic-frames', { numberOfInputs: 1, numberOfOutputs: 1, outputChannelCount: [1] });
    this.ctx.createMediaStreamSource(this.stream).connect(this.mic);
    this.mic.connect(this.ctx.destination); // it outputs silence; connected so that it is always pulled
  }

  /** Frames from the microphone go to `ws` while it is open; marks are echoed on it. */
  attach(ws) {
    this.ws = ws;
    this.mic.port.onmessage = (e) => ws.readyState === WebSocket.OPEN && ws.send(e.data);
    this.timer = setInterval(() => this.echoMarks(false), 10);
  }

  play(data) {
    const pcm = new DataView(data);
    const buffer = this.ctx.createBuffer(1, pcm.byteLength >> 1, RATE);
    const out = buffer.getChannelData(0);
    for (let i = 0; i < out.length; i++) out[i] = pcm.getInt16(2 * i, true) / 32768;
    const src = this.ctx.createBufferSource();
    src.buffer = buffer;
    src.connect(this.ctx.destination);
    // back to back; after a gap, start 40 ms ahead so that the next frames arrive in time
    const at = Math.max(this.playHead, this.ctx.currentTime + 0.04);
    src.start(at);
    this.playHead = at + buffer.duration;
    this.sources.add(src);
    src.onended = () => this.sources.delete(src);
  }

  mark(name) {
    this.marks.push({ name, at: this.playHead });
  }

  clear() {
    for (const src of this.sources) src.stop();
    this.sources.clear();
    this.playHead = 0;
    this.echoMarks(true);
  }

  /** Echo each mark once the audio before it has played (all at once with `now`, after a clear). */
  echoMarks(now) {
    while (this.marks.length && (now || this.marks[0].at <= this.ctx.currentTime)) {
      const { name } = this.marks.shift();
      if (this.ws?.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify({ type: 'mark', name }));
    }
  }

  close() {
    clearInterval(this.timer);
    for (const track of this.stream?.getTracks() ?? []) track.stop();
    this.ctx.close().catch(() => {});
  }
}
