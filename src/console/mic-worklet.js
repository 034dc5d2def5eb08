// The microphone's AudioWorklet (docs/console.md): Float32 samples at the context's 16 kHz to
// 16-bit little-endian PCM, posted in 20 ms frames (320 samples, 640 bytes). With no input (the
// microphone stopped) it sends silence, so that the call keeps its media flowing.
'use strict';

const FRAME = 320;

class MicFrames extends AudioWorkletProcessor {
  constructor() {
    super();
    this.frame = new DataView(new ArrayBuffer(FRAME * 2));
    this.filled = 0;
  }

  process(inputs) {
    const channel = inputs[0]?.[0];
    const length = channel ? channel.length : 128;
    for (let i = 0; i < length; i++) {
      const s = channel ? Math.max(-1, Math.min(1, channel[i])) : 0;
      this.frame.setInt16(2 * this.filled++, Math.round(s < 0 ? s * 32768 : s * 32767), true);
      if (this.filled === FRAME) {
        this.port.postMessage(this.frame.buffer, [this.frame.buffer]);
        this.frame = new DataView(new ArrayBuffer(FRAME * 2));
        this.filled = 0;
      }
    }
    return true;
  }
}

registerProcessor('mic-frames', MicFrames);
