/**
 * Sample-rate conversion for 16-bit mono PCM (8 ↔ 16 ↔ 24 kHz, and any other ratio of
 * integer rates): a rational polyphase resampler whose prototype is a Kaiser-windowed sinc
 * low-pass at 0.9 × the lower Nyquist frequency, so decimation never folds energy above the
 * new Nyquist back into the band (no sample dropping), and interpolation leaves no images.
 *
 * The streaming `Resampler` computes every output sample from exactly the same input samples and
 * coefficients as the one-shot `resample`, so chunked output is identical to one-shot output.
 */

/** Zero crossings of the sinc on each side, counted in periods of the lower rate. */
const HALF_ZEROS = 16;
/** Cut-off as a fraction of the lower rate's Nyquist frequency. */
const ROLLOFF = 0.9;
/** Kaiser β ≈ 8: about 80 dB of stop-band attenuation. */
const KAISER_BETA = 8;
const MAX_FACTOR = 1024;

function gcd(a: number, b: number): number {
  while (b) [a, b] = [b, a % b];
  return a;
}

/** Modified Bessel function of the first kind, order 0 (series; converges fast for β ≤ 20). */
function besselI0(x: number): number {
  let sum = 1;
  let term = 1;
  const q = (x * x) / 4;
  for (let k = 1; k < 50; k++) {
    term *= q / (k * k);
    sum += term;
    if (term < sum * 1e-17) break;
  }
  return sum;
}

interface Design {
  /** Interpolation factor. */
  up: number;
  /** Decimation factor. */
  down: number;
  /** Taps per phase. */
  taps: number;
  /** `up` sub-filters of `taps` coefficients (time-reversed), phase-major; each sums to 1. */
  phases: Float64Array;
  /** Group delay of the prototype, in samples at `fromRate × up`. */
  delay: number;
}

const designs = new Map<string, Design>();

function design(fromRate: number, toRate: number): Design {
  const key = `${fromRate}:${toRate}`;
  const cached = designs.get(key);
  if (cached) return cached;
  const g = gcd(fromRate, toRate);
  const up = toRate / g;
  const down = fromRate / g;
  if (up > MAX_FACTOR || down > MAX_FACTOR) {
    throw new RangeError(`resample: ratio ${toRate}/${fromRate} is too fine (factors up to ${MAX_FACTOR})`);
  }
  // Prototype at fromRate × up; the lower of the two rates is fromRate × up / max(up, down).
  const factor = Math.max(up, down);
  const half = HALF_ZEROS * factor;
  const length = 2 * half + 1;
  const cutoff = ROLLOFF / (2 * factor); // cycles per prototype sample
  const proto = new Float64Array(length);
  const i0Beta = besselI0(KAISER_BETA);
  for (let k = 0; k < length; k++) {
    const t = k - half;
    const sinc = t === 0 ? 2 * cutoff : Math.sin(2 * Math.PI * cutoff * t) / (Math.PI * t);
    const r = t / half;
    proto[k] = sinc * (besselI0(KAISER_BETA * Math.sqrt(Math.max(0, 1 - r * r))) / i0Beta);
  }
  const taps = Math.ceil(length / up);
  const phases = new Float64Array(up * taps);
  for (let p = 0; p < up; p++) {
    let sum = 0;
    for (let m = 0; m < taps; m++) {
      const k = p + m * up;
      const v = k < length ? proto[k]! : 0;
      phases[p * taps + (taps - 1 - m)] = v; // reversed: the dot product runs forward in time
      sum += v;
    }
    // Unity gain at DC for every phase: no ripple pattern at the interpolation rate.
    for (let m = 0; m < taps; m++) phases[p * taps + m]! /= sum;
  }
  const d: Design = { up, down, taps, phases, delay: half };
  designs.set(key, d);
  return d;
}

function checkRate(name: string, rate: number): void {
  if (!Number.isInteger(rate) || rate <= 0) {
    throw new RangeError(`resample: ${name} must be a positive integer number of Hz, not ${rate}`);
  }
}

/** Streaming resampler: feed chunks to `process`, then `flush` once at the end of the stream. */
export class Resampler {
  readonly fromRate: number;
  readonly toRate: number;
  private readonly d: Design | null;
  /** Input history; `hist[i]` is input sample `base + i` (negative indices are the zero lead-in). */
  private hist: Float64Array;
  private histLen = 0;
  private base = 0;
  /** Input samples received since the start of the stream. */
  private received = 0;
  /** Index of the next output sample. */
  private next = 0;

  constructor(fromRate: number, toRate: number) {
    checkRate('fromRate', fromRate);
    checkRate('toRate', toRate);
    this.fromRate = fromRate;
    this.toRate = toRate;
    this.d = fromRate === toRate ? null : design(fromRate, toRate);
    this.hist = new Float64Array(1024);
    this.reset();
  }

  /** Resample one chunk; returns the output samples that are complete so far. */
  process(chunk: Int16Array): Int16Array {
    if (!this.d) return chunk.slice();
    this.append(chunk, chunk.length);
    this.received += chunk.length;
    return this.produce(Number.POSITIVE_INFINITY);
  }

  /** End of stream: the remaining output (the filter's tail, against silence); then resets. */
  flush(): Int16Array {
    const d = this.d;
    if (!d) return new Int16Array(0);
    const total = Math.ceil((this.received * d.up) / d.down);
    let out: Int16Array = new Int16Array(0);
    if (total > this.next) {
      const lastInput = Math.floor(((total - 1) * d.down + d.delay) / d.up);
      const pad = lastInput + 1 - (this.base + this.histLen);
      if (pad > 0) this.append(new Int16Array(pad), pad);
      out = this.produce(total);
    }
    this.reset();
    return out;
  }

  private reset(): void {
    const lead = this.d ? this.d.taps - 1 : 0;
    this.base = -lead;
    this.histLen = lead;
    if (this.hist.length < lead) this.hist = new Float64Array(lead * 2);
    this.hist.fill(0, 0, lead);
    this.received = 0;
    this.next = 0;
  }

  private append(samples: Int16Array, n: number): void {
    if (this.histLen + n > this.hist.length) {
      const grown = new Float64Array(Math.max(this.hist.length * 2, this.histLen + n));
      grown.set(this.hist.subarray(0, this.histLen));
      this.hist = grown;
    }
    this.hist.set(samples.subarray(0, n), this.histLen);
    this.histLen += n;
  }

  /** Computes outputs while their newest input sample is available (and below `limit`). */
  private produce(limit: number): Int16Array {
    const { up, down, taps, phases, delay } = this.d!;
    const available = this.base + this.histLen; // absolute index one past the newest input
    // Last output whose newest input index floor((n·down + delay) / up) < available.
    const lastReady = Math.floor((available * up - 1 - delay) / down);
    const end = Math.min(limit, lastReady + 1);
    const count = Math.max(0, end - this.next);
    const out = new Int16Array(count);
    const hist = this.hist;
    const base = this.base;
    for (let i = 0; i < count; i++) {
      const c = (this.next + i) * down + delay;
      const j0 = Math.floor(c / up);
      const p = c - j0 * up;
      let acc = 0;
      const x = j0 - base - (taps - 1);
      const h = p * taps;
      for (let m = 0; m < taps; m++) acc += phases[h + m]! * hist[x + m]!;
      const v = Math.round(acc);
      out[i] = v > 32767 ? 32767 : v < -32768 ? -32768 : v;
    }
    this.next += count;
    // Keep only the history that the next output still needs.
    const firstNeeded = Math.floor((this.next * down + delay) / up) - (taps - 1);
    const drop = Math.min(this.histLen, firstNeeded - base);
    if (drop > 0) {
      hist.copyWithin(0, drop, this.histLen);
      this.histLen -= drop;
      this.base += drop;
    }
    return out;
  }
}

/** One-shot resampling; output length is ⌈input length × toRate / fromRate⌉. */
export function resample(pcm: Int16Array, fromRate: number, toRate: number): Int16Array {
  if (fromRate === toRate) {
    checkRate('fromRate', fromRate);
    return pcm.slice();
  }
  const r = new Resampler(fromRate, toRate);
  const head = r.process(pcm);
  const tail = r.flush();
  const out = new Int16Array(head.length + tail.length);
  out.set(head);
  out.set(tail, head.length);
  return out;
}
