/**
 * The `webrtc` detector: WebRTC's voice-activity detector (libfvad, the VAD of Google's WebRTC
 * code in a C library of its own, built to WebAssembly by `@echogarden/fvad-wasm`, BSD-3-Clause)
 * on each 20 ms frame, with one check of our own: a stretch counts as speech only once its
 * loudness has moved by 10 dB within 300 ms. WebRTC's model hears steady noise (a fan, pink noise
 * at −30 dBFS) as speech for seconds before it adapts; speech rises and falls with its syllables
 * within a fraction of a second, steady noise does not (docs/turn-taking.md has the figures).
 *
 * The WebAssembly module is compiled once per process, when this module is imported; each call
 * has its own detector state inside it (a few hundred bytes), freed when the call ends.
 */
import createFvad from '@echogarden/fvad-wasm';
import type { DetectorSettings, FrameClassifier } from './detector.js';

const wasm = await createFvad();
const SAMPLE_RATE = 8000;
const FRAME_SAMPLES = 160;
/** libfvad's aggressiveness, 0 (quality) to 3 (very aggressive: the fewest non-speech frames called speech). */
const MODE = 3;
/** The frame each call's samples are copied to before libfvad reads them (the process runs one at a time). */
const scratch = wasm._malloc(FRAME_SAMPLES * 2);

export const WEBRTC_SETTINGS: DetectorSettings = {
  activation: 0.5,
  deactivation: 0.5,
  minSpeechMs: 60,
  hangoverMs: 240,
  runGapMs: 100,
  modulationDb: 10,
  modulationWindowMs: 300,
  aboveFloorDb: 6,
  floorWindowMs: 1000,
};

export class WebRtcClassifier implements FrameClassifier {
  readonly windowSamples = FRAME_SAMPLES;
  private instance: number;

  constructor() {
    this.instance = wasm._fvad_new();
    if (this.instance === 0) throw new Error('libfvad: no memory for a detector');
    wasm._fvad_set_sample_rate(this.instance, SAMPLE_RATE);
    wasm._fvad_set_mode(this.instance, MODE);
  }

  classify(pcm: Int16Array): number {
    wasm.HEAP16.set(pcm, scratch >> 1);
    return wasm._fvad_process(this.instance, scratch, FRAME_SAMPLES) === 1 ? 1 : 0;
  }

  close(): void {
    if (this.instance === 0) return;
    wasm._fvad_free(this.instance);
    this.instance = 0;
  }
}
