/**
 * The caller's voice in the fast call tests (docs/testing.md): what a pipeline call's own
 * voice-activity detector hears as speech, where the assistant's synthetic voice is not.
 */
import { linearToMulaw } from '../../src/audio/mulaw.js';
import { FRAME_BYTES, FRAME_MS } from '../../src/calls/outbound.js';

/**
 * `ms` of the caller's voice as a pipeline call's voice-activity detector hears it: a voiced sound
 * (a 125 Hz pulse through resonances at 700 and 1,200 Hz) whose loudness dips by 20 dB for 40 ms
 * every 200 ms, as syllables do (never in its last 40 ms). The default detector (`webrtc`: WebRTC's
 * VAD, which asks for that rise in loudness) hears speech from its first frame to its last; Silero
 * does not take it for speech (the fixture tests play real speech to both: test/fixtures/vad/).
 */
export function callerVoiceFrames(ms: number): Buffer[] {
  const count = Math.max(1, Math.ceil(ms / FRAME_MS));
  const frames: Buffer[] = [];
  for (let f = 0; f < count; f++) {
    const dip = (f % 10 === 1 || f % 10 === 2) && f < count - 2;
    const amplitude = dip ? 900 : 9000;
    const frame = Buffer.alloc(FRAME_BYTES);
    for (let i = 0; i < FRAME_BYTES; i++) {
      const phase = (((f * FRAME_BYTES + i) / 8000) * 125) % 1;
      const pulse = Math.exp(-phase * 30) * (Math.sin((2 * Math.PI * 700 * phase) / 125) + 0.5 * Math.sin((2 * Math.PI * 1200 * phase) / 125));
      frame[i] = linearToMulaw(amplitude * pulse);
    }
    frames.push(frame);
  }
  return frames;
}
