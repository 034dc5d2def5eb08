/**
 * Synthesizes the background clips Switchboard ships (`speech_config.background_audio.clip`):
 * `office` and `cafe`, written to `assets/background/` as RIFF WAV, 16-bit PCM, mono, 8000 Hz,
 * 20 s each (160,000 samples: 1,000 frames of 20 ms).
 *
 *   node --import tsx scripts/make-background-clips.ts [--out dir]
 *
 * We have no recordings of offices or cafés under a free licence, so the clips are made here from
 * nothing but a seeded pseudo-random generator and a little signal processing. The script is the
 * source of the clips: re-running it writes byte-identical files (test/audio/background-clips.test.ts
 * checks that the shipped files are exactly what it makes). It uses Node's standard library and the project's WAV header (src/audio/wav.ts) only.
 *
 * How each clip is put together
 * -----------------------------
 * A clip is a sum of "buses" (room tone, voices, typing, clinks...). Every bus is built on a ring
 * of N samples:
 *  - Discrete events (a keystroke, an utterance, a clink) are rendered on their own, from silence
 *    to silence, and added to the ring at a position modulo N: one that starts near the end goes
 *    on at the start.
 *  - Everything with memory (filters, the reverb) is run over the ring *twice* and only the second
 *    lap is kept. By then the filter's state at sample 0 is exactly what the end of the clip leaves
 *    in it, so the output is what the filter would give on the clip looped forever (a circular
 *    convolution: every filter here forgets its past within a second or so, and a lap is 20 s).
 *  - Slow modulations use whole numbers of cycles per clip.
 * So the clip has no seam at all: sample N-1 is followed by sample 0 as naturally as any sample by
 * the next one. No crossfade is needed (a crossfade of two unrelated noises dips in level).
 *
 * Finally each bus is band-limited to the telephone band (300–3400 Hz), scaled to its level in the
 * mix, summed, turned so that the file starts at the quietest moment of the loop (the first play,
 * at the start of a call, then begins gently rather than in the middle of a keystroke), brought to
 * −20 dBFS RMS with a limiter keeping peaks under −4 dBFS, and rounded to 16 bits.
 *
 * Levels: dBFS here is 20·log10(value / 32768). The call scales the clip by the assistant's
 * `volume` (default 0.5, −6 dB) and mixes it under speech at about −16 dBFS RMS, so at −20 dBFS
 * the clip sits ~10 dB under the assistant by default.
 *
 * Determinism: the arithmetic is IEEE double throughout; the transcendental functions used
 * (Math.sin/cos/exp/pow) are V8's own fdlibm ports, the same on every platform Node runs on.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { wavHeader } from '../src/audio/wav.js';

export const SAMPLE_RATE = 8000;
export const CLIP_SECONDS = 20;
/** Samples in a clip: 160,000, a whole number of 20 ms frames. */
export const CLIP_SAMPLES = SAMPLE_RATE * CLIP_SECONDS;
export const CLIP_NAMES = ['office', 'cafe'] as const;
export type ClipName = (typeof CLIP_NAMES)[number];

/** Where the clips are shipped, relative to the repository root. */
export const DEFAULT_OUT_DIR = resolve(dirname(fileURLToPath(import.meta.url)), '..', 'assets', 'background');

const SR = SAMPLE_RATE;
const N = CLIP_SAMPLES;
const TWO_PI = 2 * Math.PI;
const FULL_SCALE = 32768;
const TARGET_RMS_DBFS = -20;
/** No sample goes above this (see `limitPeaks`). */
const PEAK_CEILING_DBFS = -4;
/** The telephone band. */
const BAND_LOW_HZ = 300;
const BAND_HIGH_HZ = 3400;

const dbToGain = (db: number) => Math.pow(10, db / 20);
const sec = (s: number) => Math.round(s * SR);

// ---------------------------------------------------------------------------------------------
// Randomness: mulberry32, a small, well-mixed 32-bit generator. Each component takes its own
// stream (`fork`), so changing how one element is made does not reshuffle all the others.

class Rng {
  private state: number;
  constructor(seed: number) {
    this.state = seed >>> 0;
  }
  /** Uniform in [0, 1). */
  next(): number {
    let t = (this.state = (this.state + 0x6d2b79f5) >>> 0);
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  range(lo: number, hi: number): number {
    return lo + (hi - lo) * this.next();
  }
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.next() * (hi - lo + 1));
  }
  chance(p: number): boolean {
    return this.next() < p;
  }
  pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.next() * items.length)]!;
  }
  /** White noise, uniform in [−1, 1). (Filtered, it is as Gaussian as any noise.) */
  noise(): number {
    return 2 * this.next() - 1;
  }
  fork(): Rng {
    return new Rng(Math.floor(this.next() * 4294967296));
  }
}

// ---------------------------------------------------------------------------------------------
// Filters

type Proc = (x: number) => number;

/** A biquad (RBJ "Audio EQ Cookbook" designs), transposed direct form II. */
class Biquad {
  private z1 = 0;
  private z2 = 0;
  constructor(
    private readonly b0: number,
    private readonly b1: number,
    private readonly b2: number,
    private readonly a1: number,
    private readonly a2: number,
  ) {}

  private static design(kind: 'lowpass' | 'highpass' | 'bandpass', f: number, q: number): Biquad {
    const w = (TWO_PI * f) / SR;
    const cos = Math.cos(w);
    const alpha = Math.sin(w) / (2 * q);
    const a0 = 1 + alpha;
    let b: [number, number, number];
    if (kind === 'lowpass') b = [(1 - cos) / 2, 1 - cos, (1 - cos) / 2];
    else if (kind === 'highpass') b = [(1 + cos) / 2, -(1 + cos), (1 + cos) / 2];
    else b = [alpha, 0, -alpha]; // band-pass, 0 dB at the centre
    return new Biquad(b[0] / a0, b[1] / a0, b[2] / a0, (-2 * cos) / a0, (1 - alpha) / a0);
  }
  static lowpass(f: number, q = Math.SQRT1_2) {
    return Biquad.design('lowpass', f, q);
  }
  static highpass(f: number, q = Math.SQRT1_2) {
    return Biquad.design('highpass', f, q);
  }
  static bandpass(f: number, q: number) {
    return Biquad.design('bandpass', f, q);
  }

  process(x: number): number {
    const y = this.b0 * x + this.z1;
    this.z1 = this.b1 * x - this.a1 * y + this.z2;
    this.z2 = this.b2 * x - this.a2 * y;
    return y;
  }
}

/** A Butterworth low- or high-pass of even `order`, as a cascade of biquads. */
function butterworth(kind: 'lowpass' | 'highpass', f: number, order: number): Proc {
  const stages: Biquad[] = [];
  for (let k = 1; k <= order / 2; k++) {
    const q = 1 / (2 * Math.sin(((2 * k - 1) * Math.PI) / (2 * order)));
    stages.push(kind === 'lowpass' ? Biquad.lowpass(f, q) : Biquad.highpass(f, q));
  }
  return (x) => {
    for (const s of stages) x = s.process(x);
    return x;
  };
}

/** The telephone band: 8th-order Butterworth high-pass at 300 Hz and low-pass at 3400 Hz. */
const telephoneBand = (): Proc => {
  const hp = butterworth('highpass', BAND_LOW_HZ, 8);
  const lp = butterworth('lowpass', BAND_HIGH_HZ, 8);
  return (x) => lp(hp(x));
};

/**
 * A formant resonator as in Klatt's synthesizer: a two-pole filter with unity gain at 0 Hz whose
 * centre and bandwidth may change every sample (vowels glide from one to the next).
 */
class Resonator {
  private y1 = 0;
  private y2 = 0;
  process(x: number, f: number, bw: number): number {
    const r = Math.exp((-Math.PI * bw) / SR);
    const c = -r * r;
    const b = 2 * r * Math.cos((TWO_PI * f) / SR);
    const y = (1 - b - c) * x + b * this.y1 + c * this.y2;
    this.y2 = this.y1;
    this.y1 = y;
    return y;
  }
}

/**
 * A small room (Schroeder/Freeverb style: parallel damped feedback combs, then all-passes). Things
 * heard from across a room arrive mostly as this diffuse tail, blurred and darker, which is what
 * makes a voice sound distant and unintelligible rather than merely quiet. `t60` is the time the
 * tail takes to fall by 60 dB; `damping` (0–1) darkens it (soft furnishings absorb the highs).
 */
function room(t60: number, damping: number): Proc {
  const combs = [241, 293, 337, 379, 421, 467].map((delay) => ({
    buf: new Float64Array(delay),
    at: 0,
    store: 0,
    gain: Math.pow(10, (-3 * delay) / (t60 * SR)),
  }));
  const allpasses = [97, 31].map((delay) => ({ buf: new Float64Array(delay), at: 0 }));
  return (x) => {
    let y = 0;
    for (const c of combs) {
      const out = c.buf[c.at]!;
      c.store = out * (1 - damping) + c.store * damping;
      c.buf[c.at] = x + c.store * c.gain;
      c.at = (c.at + 1) % c.buf.length;
      y += out;
    }
    y /= combs.length;
    for (const a of allpasses) {
      const out = a.buf[a.at]!;
      a.buf[a.at] = y + out * 0.5;
      a.at = (a.at + 1) % a.buf.length;
      y = out - y;
    }
    return y;
  };
}

// ---------------------------------------------------------------------------------------------
// The ring: how things are made seamless (see the comment at the top)

/** Runs `proc` over the loop twice and keeps the second lap: the output of the loop played forever. */
function circular(x: Float64Array, proc: Proc): Float64Array {
  const out = new Float64Array(N);
  for (let i = 0; i < N; i++) proc(x[i]!);
  for (let i = 0; i < N; i++) out[i] = proc(x[i]!);
  return out;
}

/** Adds `event` to the loop at `start`, wrapping round the end. */
function addWrapped(ring: Float64Array, event: Float64Array, start: number, gain = 1): void {
  const at = ((start % N) + N) % N;
  for (let i = 0; i < event.length; i++) ring[(at + i) % N]! += event[i]! * gain;
}

function mixInto(target: Float64Array, source: Float64Array, gain: number): void {
  for (let i = 0; i < N; i++) target[i]! += source[i]! * gain;
}

function rmsOf(x: ArrayLike<number>): number {
  let sum = 0;
  for (let i = 0; i < x.length; i++) sum += x[i]! * x[i]!;
  return Math.sqrt(sum / x.length);
}

/** Band-limits a bus to the telephone band and scales it to `db` RMS (relative to full scale 1). */
function finishBus(bus: Float64Array, db: number): Float64Array {
  const banded = circular(bus, telephoneBand());
  const gain = dbToGain(db) / rmsOf(banded);
  for (let i = 0; i < N; i++) banded[i]! *= gain;
  return banded;
}

// ---------------------------------------------------------------------------------------------
// Room tone

/**
 * The steady noise of a room: air handling, distant traffic, computers' fans. Its power falls with
 * frequency (brown noise, −6 dB/octave, from a leaky integrator, plus some pink, −3 dB/octave, by
 * Paul Kellet's three-pole filter), so once band-limited it is a soft low "whoosh" rather than the
 * hiss of white noise, which is what reads as "static". `darkness` is a low-pass corner; the level
 * drifts a few per cent at whole numbers of cycles per loop, like a ventilation system breathing.
 */
function roomTone(rng: Rng, opts: { brown: number; pink: number; darkness: number; drift: number }): Float64Array {
  const raw = new Float64Array(N);
  for (let i = 0; i < N; i++) raw[i] = rng.noise();
  let brown = 0;
  let p0 = 0;
  let p1 = 0;
  let p2 = 0;
  const dark = butterworth('lowpass', opts.darkness, 2);
  const colour: Proc = (w) => {
    brown = 0.995 * brown + 0.05 * w;
    p0 = 0.99765 * p0 + w * 0.099046;
    p1 = 0.963 * p1 + w * 0.2965164;
    p2 = 0.57 * p2 + w * 1.0526913;
    const pink = (p0 + p1 + p2 + w * 0.1848) * 0.2;
    return dark(opts.brown * brown + opts.pink * pink);
  };
  const tone = circular(raw, colour);
  for (let i = 0; i < N; i++) {
    const t = i / N; // 0..1 round the loop: 3 and 7 whole cycles
    tone[i]! *= 1 + opts.drift * (0.6 * Math.sin(TWO_PI * 3 * t) + 0.4 * Math.sin(TWO_PI * 7 * t + 1.3));
  }
  return tone;
}

// ---------------------------------------------------------------------------------------------
// Voices

/** Vowel formants F1–F3 of an adult male (Peterson & Barney, 1952); women's are ~15% higher. */
const VOWELS: readonly (readonly [number, number, number])[] = [
  [730, 1090, 2440], // a  (father)
  [270, 2290, 3010], // i  (beet)
  [300, 870, 2240], //  u  (boot)
  [530, 1840, 2480], // e  (bet)
  [570, 840, 2410], //  o  (bought)
  [660, 1720, 2410], // æ  (bat)
  [490, 1350, 1690], // ɝ  (bird)
  [640, 1190, 2390], // ʌ  (but)
  [390, 1990, 2550], // ɪ  (bit)
  [440, 1020, 2240], // ʊ  (book)
];

interface Speaker {
  /** Mean pitch, Hz. */
  f0: number;
  /** Formant scale: 1 for an adult male vocal tract, ~1.15 for a woman's shorter one. */
  tract: number;
  /** Syllables per second: conversational speech runs at 4–6. */
  rate: number;
  /** Share of breath noise in the voice. */
  breath: number;
}

function randomSpeaker(rng: Rng, woman: boolean): Speaker {
  return woman
    ? { f0: rng.range(175, 235), tract: rng.range(1.12, 1.2), rate: rng.range(4.2, 5.8), breath: rng.range(0.06, 0.14) }
    : { f0: rng.range(95, 140), tract: rng.range(0.95, 1.05), rate: rng.range(3.8, 5.4), breath: rng.range(0.04, 0.1) };
}

const smoothstep = (u: number) => (u <= 0 ? 0 : u >= 1 ? 1 : u * u * (3 - 2 * u));

/**
 * One utterance (a breath group of `syllables` syllables) by `speaker`, from silence to silence,
 * normalized to RMS 1.
 *
 * What makes noise sound like a voice, even when no word can be made out:
 *  - a harmonic source (the vocal folds) at a pitch that declines over the phrase and rises on
 *    stressed syllables, the intonation any listener recognizes through a wall;
 *  - formants: the source through four resonators whose centres glide between vowel targets,
 *    giving the vowel colours that change from syllable to syllable;
 *  - the syllabic rhythm: the level rises and falls 4–6 times a second, the strongest cue of speech
 *    (babble without it is heard as a waterfall), broken by stop closures and fricative hiss.
 */
function utterance(rng: Rng, speaker: Speaker, syllables: number): Float64Array {
  interface Syllable {
    start: number;
    consonant: 'none' | 'stop' | 'fricative';
    consonantEnd: number;
    end: number;
    vowel: readonly [number, number, number];
    amp: number;
    stressed: boolean;
    fricativeHz: number;
  }
  const plan: Syllable[] = [];
  let t = 0;
  for (let s = 0; s < syllables; s++) {
    const length = sec(rng.range(0.65, 1.45) / speaker.rate);
    const consonant = rng.pick(['none', 'stop', 'stop', 'fricative', 'fricative'] as const);
    const consonantLength = consonant === 'none' ? 0 : consonant === 'stop' ? sec(rng.range(0.03, 0.06)) : sec(rng.range(0.05, 0.09));
    const stressed = rng.chance(0.3);
    const vowel = rng.pick(VOWELS);
    plan.push({
      start: t,
      consonant,
      consonantEnd: t + consonantLength,
      end: t + length,
      vowel,
      // open vowels (high F1) are intrinsically a few dB louder than close ones
      amp: (stressed ? 1 : rng.range(0.45, 0.8)) * Math.sqrt(vowel[0] / 500),
      stressed,
      // s, sh, f/th: where the hiss of the fricative sits
      fricativeHz: rng.pick([3200, 2600, 2000]),
    });
    t += length;
  }
  const tail = sec(0.15);
  const length = t + tail;

  // Per-sample controls
  const voicing = new Float64Array(length);
  const hiss = new Float64Array(length);
  const hissHz = new Float64Array(length).fill(2600);
  const formants = [new Float64Array(length), new Float64Array(length), new Float64Array(length)] as const;
  const pitch = new Float64Array(length);

  for (const syl of plan) {
    // the vowel: rises over its first quarter, falls over its last 40% (into the next syllable a little)
    const vStart = syl.consonantEnd;
    const vLength = syl.end - vStart;
    const release = sec(0.02);
    for (let i = vStart; i < Math.min(length, syl.end + release); i++) {
      const u = (i - vStart) / vLength;
      const env = smoothstep(u / 0.25) * (1 - smoothstep((u - 0.6) / (0.4 + release / vLength)));
      voicing[i] = Math.max(voicing[i]!, syl.amp * env);
    }
    if (syl.consonant === 'fricative') {
      const cLength = syl.consonantEnd - syl.start;
      for (let i = syl.start; i < syl.consonantEnd; i++) {
        const u = (i - syl.start) / cLength;
        hiss[i] = 0.25 * syl.amp * Math.sin(Math.PI * u);
        hissHz[i] = syl.fricativeHz;
      }
    } else if (syl.consonant === 'stop') {
      // a closure (silence: the envelope above is still 0), then the release burst at its end
      const burst = sec(0.012);
      for (let i = Math.max(syl.start, syl.consonantEnd - burst); i < syl.consonantEnd; i++) {
        hiss[i] = 0.4 * syl.amp * (1 - (syl.consonantEnd - i) / burst);
        hissHz[i] = syl.fricativeHz * 0.8;
      }
    }
  }

  // Formants: each syllable's vowel target at its vowel's centre, cosine glides between (coarticulation)
  const centres = plan.map((s) => ({ at: (s.consonantEnd + s.end) / 2, f: s.vowel.map((f) => f * speaker.tract) }));
  let seg = 0;
  for (let i = 0; i < length; i++) {
    while (seg < centres.length - 1 && i > centres[seg + 1]!.at) seg++;
    const a = centres[seg]!;
    const b = centres[Math.min(seg + 1, centres.length - 1)]!;
    const u = b.at > a.at ? Math.min(1, Math.max(0, (i - a.at) / (b.at - a.at))) : 0;
    const w = 0.5 - 0.5 * Math.cos(Math.PI * u);
    for (let k = 0; k < 3; k++) formants[k]![i] = a.f[k]! + (b.f[k]! - a.f[k]!) * w;
  }

  // Pitch: declination over the phrase, accents on stressed syllables, slow wander; sometimes a question
  const question = rng.chance(0.2);
  const accents = plan.filter((s) => s.stressed).map((s) => ({ at: (s.consonantEnd + s.end) / 2, size: rng.range(0.08, 0.18) }));
  const wanderRng = rng.fork();
  let wander = 0;
  for (let i = 0; i < length; i++) {
    const u = i / length;
    let f = speaker.f0 * (1.1 - 0.22 * u);
    for (const a of accents) {
      const d = (i - a.at) / sec(0.09);
      f *= 1 + a.size * Math.exp(-d * d);
    }
    if (question && u > 0.75) f *= 1 + 1.2 * (u - 0.75);
    wander += 0.002 * (wanderRng.noise() - wander);
    pitch[i] = f * (1 + 0.6 * wander);
  }

  // Synthesis
  const out = new Float64Array(length);
  const voiced = new Float64Array(length);
  const hissed = new Float64Array(length);
  const resonators = [new Resonator(), new Resonator(), new Resonator(), new Resonator()];
  const bandwidths = [70, 95, 150, 250].map((bw) => bw * rng.range(0.9, 1.3));
  const f4 = Math.min(3500, 3250 * speaker.tract);
  const hissPre = Biquad.highpass(1500);
  const hissRes = new Resonator();
  const noise = rng.fork();
  let phase = 0;
  for (let i = 0; i < length; i++) {
    const f0 = pitch[i]!;
    phase += (TWO_PI * f0) / SR;
    if (phase > TWO_PI) phase -= TWO_PI;
    // Σ sin(kφ)/k, a band-limited sawtooth: harmonics falling at −6 dB/octave, the glottal source
    // with the lips' radiation. sin(kφ) comes from the Chebyshev recursion
    // sin((k+1)φ) = 2cosφ·sin(kφ) − sin((k−1)φ). Harmonics fade out between 3000 and 3800 Hz so that
    // none crosses the Nyquist frequency and none pops in or out as the pitch moves.
    const c2 = 2 * Math.cos(phase);
    let sPrev = 0;
    let s = Math.sin(phase);
    let source = 0;
    for (let k = 1; k * f0 < 3800; k++) {
      const hz = k * f0;
      const taper = hz <= 3000 ? 1 : 0.5 + 0.5 * Math.cos((Math.PI * (hz - 3000)) / 800);
      source += (taper * s) / k;
      const next = c2 * s - sPrev;
      sPrev = s;
      s = next;
    }
    let x = source + speaker.breath * 3 * noise.noise();
    x = resonators[0]!.process(x, formants[0]![i]!, bandwidths[0]!);
    x = resonators[1]!.process(x, formants[1]![i]!, bandwidths[1]!);
    x = resonators[2]!.process(x, formants[2]![i]!, bandwidths[2]!);
    voiced[i] = resonators[3]!.process(x, f4, bandwidths[3]!);
    hissed[i] = hissRes.process(hissPre.process(noise.noise()), hissHz[i]!, hissHz[i]! * 0.35);
  }
  // The voiced branch ran on a steady source; its level now varies only with the vowel (a cascade of
  // resonators passes an open /a/, F1 and F2 close together, ~15 dB louder than an /i/, far more
  // than in real speech). Divide that out, smoothed over ~25 ms so the waveform is untouched, and
  // put the syllables' own envelope on: each syllable is then as loud as planned.
  const voicedLevel = smoothedLevel(voiced, 0.025);
  const hissLevel = smoothedLevel(hissed, 0.025);
  for (let i = 0; i < length; i++) {
    out[i] = (voicing[i]! * voiced[i]!) / voicedLevel[i]! + (hiss[i]! * hissed[i]!) / hissLevel[i]!;
  }
  const r = rmsOf(out);
  for (let i = 0; i < length; i++) out[i]! /= r;
  return out;
}

/** The RMS level of `x` around each sample: its square through a one-pole smoother run forwards and back. */
function smoothedLevel(x: Float64Array, seconds: number): Float64Array {
  const a = Math.exp(-1 / (seconds * SR));
  const level = new Float64Array(x.length);
  let e = 0;
  for (let i = 0; i < x.length; i++) level[i] = e = a * e + (1 - a) * x[i]! * x[i]!;
  let mean = 0;
  for (let i = x.length - 1; i >= 0; i--) level[i] = mean = a * mean + (1 - a) * level[i]!;
  let floor = 0;
  for (let i = 0; i < x.length; i++) floor = Math.max(floor, level[i]!);
  for (let i = 0; i < x.length; i++) level[i] = Math.sqrt(Math.max(level[i]!, floor * 1e-6));
  return level;
}

/**
 * A conversation placed round the loop: the speakers take turns (mostly alternating, sometimes one
 * goes on), with gaps and occasional overlaps, from `from` for `span` samples. Utterances are
 * added to each speaker's own ring so that each can be given its own distance.
 */
function conversation(
  rng: Rng,
  speakers: readonly Speaker[],
  rings: readonly Float64Array[],
  opts: { from: number; span: number; gap: [number, number]; syllables: [number, number]; loudness: [number, number] },
): void {
  let t = opts.from;
  let who = rng.int(0, speakers.length - 1);
  for (;;) {
    const u = utterance(rng.fork(), speakers[who]!, rng.int(opts.syllables[0], opts.syllables[1]));
    if (t + u.length > opts.from + opts.span) break;
    addWrapped(rings[who]!, u, t, rng.range(opts.loudness[0], opts.loudness[1]));
    t += u.length + sec(rng.range(opts.gap[0], opts.gap[1]));
    if (speakers.length > 1 && rng.chance(0.75)) who = (who + rng.int(1, speakers.length - 1)) % speakers.length;
  }
}

/**
 * Where a voice (or any source) is in the room: `muffle` is a low-pass corner (distance and
 * partitions take the highs first), `wet` the share of it heard only as the room's reverberation.
 */
function place(dry: Float64Array, wetBus: Float64Array, mix: Float64Array, opts: { muffle: number; wet: number; gain: number }): void {
  const muffled = opts.muffle < BAND_HIGH_HZ ? circular(dry, butterworth('lowpass', opts.muffle, 4)) : dry;
  mixInto(mix, muffled, opts.gain * (1 - opts.wet));
  mixInto(wetBus, muffled, opts.gain * opts.wet);
}

// ---------------------------------------------------------------------------------------------
// Keyboards

/**
 * A decaying click: an impact (a very short noise burst) exciting a few modes. A key's plastic cap
 * rings high (2–3.2 kHz) for a few milliseconds; the switch bottoming out on the plate gives the
 * duller "thock" (400–900 Hz) that lasts a little longer. Sharp attack + millisecond decays is what
 * the ear takes for "hard object", and the pair of pitches for "keyboard".
 */
function click(
  rng: Rng,
  out: Float64Array,
  at: number,
  amp: number,
  modes: readonly { hz: number; tau: number; amp: number }[],
  impact: number,
): void {
  const phases = modes.map(() => rng.range(0, TWO_PI));
  const longest = Math.max(...modes.map((m) => m.tau));
  const end = Math.min(out.length, at + sec(longest * 6));
  for (let i = at; i < end; i++) {
    const t = (i - at) / SR;
    let x = impact * rng.noise() * Math.exp(-t / 0.001);
    modes.forEach((m, k) => {
      x += m.amp * Math.exp(-t / m.tau) * Math.sin(TWO_PI * m.hz * t + phases[k]!);
    });
    out[i]! += amp * x;
  }
}

/** One keystroke: the press, then the key's release 60–130 ms later (quieter, higher, shorter). */
function keystroke(rng: Rng, kind: 'key' | 'space', keyboard: { tick: number; body: number }): Float64Array {
  const out = new Float64Array(sec(0.25));
  const amp = rng.range(0.6, 1);
  const tick = keyboard.tick * rng.range(0.9, 1.1); // each key differs a little
  if (kind === 'space') {
    // the space bar: bigger, lower, with its stabilizer wire rattling a few ms later
    const body = keyboard.body * rng.range(0.6, 0.72);
    click(rng, out, 0, amp * 1.3, [{ hz: tick * 0.85, tau: 0.003, amp: 0.6 }, { hz: body, tau: 0.016, amp: 1 }], 1);
    click(rng, out, sec(rng.range(0.003, 0.006)), amp * 0.4, [{ hz: tick * 1.2, tau: 0.002, amp: 1 }], 0.3);
  } else {
    const body = keyboard.body * rng.range(0.85, 1.15);
    const modes = [
      { hz: tick, tau: rng.range(0.002, 0.004), amp: 1 },
      { hz: body, tau: rng.range(0.006, 0.012), amp: 0.7 },
    ];
    click(rng, out, 0, amp, modes, 1.2);
  }
  const release = sec(rng.range(0.06, 0.13));
  const releaseAmp = amp * rng.range(0.3, 0.5);
  const releaseModes = [
    { hz: tick * 1.15, tau: 0.0018, amp: 1 },
    { hz: keyboard.body * 1.3, tau: 0.004, amp: 0.4 },
  ];
  click(rng, out, release, releaseAmp, releaseModes, 0.6);
  return out;
}

/**
 * Someone typing for `seconds`: words of 2–9 letters at the typist's speed with uneven intervals
 * (fingers are not a metronome), a space after each word, pauses to think, and now and then a
 * quick run of backspaces. The rhythm, more than the sound of one key, says "typing".
 */
function typingRun(
  rng: Rng,
  ring: Float64Array,
  at: number,
  seconds: number,
  typist: { keysPerSecond: number; tick: number; body: number },
): void {
  let t = 0;
  const end = sec(seconds);
  const interval = () => sec((rng.range(0.55, 1.6) * rng.range(0.75, 1.25)) / typist.keysPerSecond);
  while (t < end) {
    const letters = rng.int(2, 9);
    for (let k = 0; k < letters && t < end; k++) {
      addWrapped(ring, keystroke(rng, 'key', typist), at + t);
      t += interval();
    }
    if (rng.chance(0.12)) {
      // a typo: backspace, quickly and evenly, a few times
      for (let k = rng.int(2, 5); k > 0; k--) {
        addWrapped(ring, keystroke(rng, 'key', typist), at + t, 0.85);
        t += sec(rng.range(0.085, 0.1));
      }
    }
    addWrapped(ring, keystroke(rng, 'space', typist), at + t);
    t += interval();
    if (rng.chance(0.25)) t += sec(rng.range(0.25, 0.9));
  }
}

// ---------------------------------------------------------------------------------------------
// Crockery

/**
 * A cup, glass or spoon struck: a tiny impact and a few inharmonic partials at 2–3.3 kHz dying
 * away over a tenth of a second or so. Each partial is a pair of sines a few Hz apart, as a round
 * cup's modes are split by its imperfections: the slow beating between them is the shimmer that
 * makes a ring sound like china or glass rather than an electronic beep.
 */
function clink(rng: Rng, hz: number, tau: number, amp: number): Float64Array {
  const ratios = [1, rng.range(1.17, 1.3), rng.range(1.36, 1.5)];
  const partials = ratios
    .map((r, k) => ({ hz: hz * r, tau: tau * [1, 0.6, 0.4][k]!, amp: [1, rng.range(0.4, 0.7), rng.range(0.2, 0.45)][k]! }))
    .filter((p) => p.hz < 3350)
    .map((p) => ({ ...p, split: rng.range(1.5, 5), phase: rng.range(0, TWO_PI) }));
  const out = new Float64Array(sec(tau * 6));
  for (let i = 0; i < out.length; i++) {
    const t = i / SR;
    let x = 0.5 * rng.noise() * Math.exp(-t / 0.0007);
    for (const p of partials) {
      const ring = Math.sin(TWO_PI * p.hz * t + p.phase) + 0.7 * Math.sin(TWO_PI * (p.hz + p.split) * t + p.phase * 1.7);
      x += p.amp * Math.exp(-t / p.tau) * ring * 0.6;
    }
    out[i] = amp * x;
  }
  return out;
}

/** A cup put down on its saucer: a duller, shorter knock (1.1–1.7 kHz), with a small bounce. */
function saucer(rng: Rng, amp: number): Float64Array {
  const out = new Float64Array(sec(0.3));
  const hz = rng.range(1100, 1700);
  const knock = (at: number, a: number) =>
    click(rng, out, at, a, [{ hz, tau: rng.range(0.015, 0.03), amp: 1 }, { hz: hz * rng.range(1.5, 1.8), tau: 0.01, amp: 0.6 }], 1.2);
  knock(0, amp);
  knock(sec(rng.range(0.025, 0.045)), amp * rng.range(0.25, 0.45));
  return out;
}

// ---------------------------------------------------------------------------------------------
// The clips

/**
 * The office: a quiet room tone; two colleagues at desks typing in bursts, one near, one across
 * the room; and voices through the open plan or a partition: two people talking and one on the
 * phone (long gaps while listening), muffled and reverberant so that nothing can be understood.
 * (No ringing phone: a distinctive event recurs every 20 s and a listener soon notices the loop;
 * a far-away ring might also be taken for a ring on the caller's own line.)
 */
function office(): Float64Array {
  const rng = new Rng(0x0ff1ce);
  const mix = new Float64Array(N);

  // room tone: ventilation and computers, dark and steady. Each bus's level is in dB relative to the
  // mix before the final normalization: the room tone lies 13 dB under everything (heard alone in
  // the quiet moments, ~−33 dBFS), the voices carry most of the energy, and the keyboards, all
  // transients, need little average level to be heard (and more would only make the limiter work).
  mixInto(mix, finishBus(roomTone(rng.fork(), { brown: 1, pink: 0.5, darkness: 1800, drift: 0.06 }), -13), 1);

  // voices
  const voices = new Float64Array(N);
  const wet = new Float64Array(N);
  const talkRng = rng.fork();
  const pair = [randomSpeaker(talkRng, false), randomSpeaker(talkRng, true)];
  const pairRings = [new Float64Array(N), new Float64Array(N)];
  conversation(talkRng, pair, pairRings, { from: sec(1.5), span: sec(10), gap: [-0.15, 0.7], syllables: [4, 14], loudness: [0.7, 1] });
  const caller = randomSpeaker(talkRng, false);
  const callerRing = new Float64Array(N);
  conversation(talkRng, [caller], [callerRing], { from: sec(9), span: sec(18), gap: [1.2, 3.5], syllables: [3, 12], loudness: [0.6, 1] });
  place(pairRings[0]!, wet, voices, { muffle: 1100, wet: 0.55, gain: 1 });
  place(pairRings[1]!, wet, voices, { muffle: 1300, wet: 0.55, gain: 0.9 });
  place(callerRing, wet, voices, { muffle: 1600, wet: 0.4, gain: 0.8 });
  mixInto(voices, circular(wet, room(0.55, 0.45)), 2.5);
  mixInto(mix, finishBus(voices, -3.5), 1);

  // keyboards: a near typist and a far one, a few runs each
  const keys = new Float64Array(N);
  const keysWet = new Float64Array(N);
  const typeRng = rng.fork();
  const typists = [
    { keysPerSecond: 6.5, tick: 2700, body: 620, gain: 1, muffle: 3400, wet: 0.15, runs: 3 },
    { keysPerSecond: 4.8, tick: 2300, body: 520, gain: 0.55, muffle: 2000, wet: 0.35, runs: 3 },
  ];
  for (const typist of typists) {
    const ring = new Float64Array(N);
    // runs spread round the loop: one per third of it, at a random point within the third
    for (let r = 0; r < typist.runs; r++) {
      const start = sec((r * CLIP_SECONDS) / typist.runs + typeRng.range(0, 2.5));
      typingRun(typeRng, ring, start, typeRng.range(1.8, 4.2), typist);
    }
    place(ring, keysWet, keys, { muffle: typist.muffle, wet: typist.wet, gain: typist.gain });
  }
  mixInto(keys, circular(keysWet, room(0.45, 0.4)), 2);
  mixInto(mix, finishBus(keys, -11), 1);

  return mix;
}

/**
 * The café: a warm room tone; three tables of two talking without a break around the listener,
 * at different distances; behind them the rest of the room, eight more voices heard mostly as
 * reverberation; and the clatter of a café: cups and glasses clinking, spoons stirring, cups put
 * down on saucers. A hard-surfaced room, so a longer reverberation than the office.
 */
function cafe(): Float64Array {
  const rng = new Rng(0xcafe);
  const mix = new Float64Array(N);

  // room tone: warmer (darker) than the office's: fridges, the street, the coffee machine. Each bus's
  // level is in dB relative to the mix before the final normalization: the room tone lies 15 dB under
  // everything, the near tables carry the clip, the crowd fills the gaps between their words, and the
  // crockery is occasional and bright, so it needs little level to be heard.
  mixInto(mix, finishBus(roomTone(rng.fork(), { brown: 1, pink: 0.3, darkness: 900, drift: 0.08 }), -15), 1);

  // near tables: three conversations going round the whole loop
  const talk = new Float64Array(N);
  const wet = new Float64Array(N);
  const talkRng = rng.fork();
  const tables = [
    { muffle: 3400, wet: 0.2, gain: 1 },
    { muffle: 2400, wet: 0.3, gain: 0.75 },
    { muffle: 1800, wet: 0.4, gain: 0.6 },
  ];
  tables.forEach((table, k) => {
    const people = [randomSpeaker(talkRng, k !== 1), randomSpeaker(talkRng, k === 2 ? false : talkRng.chance(0.5))];
    const rings = [new Float64Array(N), new Float64Array(N)];
    const from = sec(talkRng.range(0, CLIP_SECONDS));
    conversation(talkRng, people, rings, { from, span: N - sec(0.3), gap: [-0.3, 0.6], syllables: [3, 16], loudness: [0.7, 1] });
    rings.forEach((ring) => place(ring, wet, talk, table));
  });
  mixInto(talk, circular(wet, room(0.8, 0.3)), 2.5);
  mixInto(mix, finishBus(talk, -3), 1);

  // the rest of the room: many far voices, muffled and mostly reverberation, the "crowd" bed
  const crowd = new Float64Array(N);
  const crowdWet = new Float64Array(N);
  const crowdRng = rng.fork();
  for (let k = 0; k < 8; k++) {
    const ring = new Float64Array(N);
    const person = randomSpeaker(crowdRng, k % 2 === 0);
    const from = sec(crowdRng.range(0, CLIP_SECONDS));
    conversation(crowdRng, [person], [ring], { from, span: N - sec(0.3), gap: [0.4, 2.5], syllables: [3, 14], loudness: [0.6, 1] });
    place(ring, crowdWet, crowd, { muffle: crowdRng.range(900, 1400), wet: 0.75, gain: 1 });
  }
  mixInto(crowd, circular(crowdWet, room(1.0, 0.35)), 3);
  mixInto(mix, finishBus(crowd, -7), 1);

  // crockery
  const china = new Float64Array(N);
  const chinaWet = new Float64Array(N);
  const chinaRng = rng.fork();
  const slots = (count: number) => Array.from({ length: count }, (_, k) => sec(((k + chinaRng.range(0.1, 0.9)) * CLIP_SECONDS) / count));
  for (const at of slots(7)) {
    // a single clink, or two glasses/cups touching
    const hz = chinaRng.range(2000, 2600);
    const a = chinaRng.range(0.4, 1);
    addWrapped(china, clink(chinaRng, hz, chinaRng.range(0.08, 0.22), a), at);
    if (chinaRng.chance(0.3)) {
      const other = clink(chinaRng, hz * chinaRng.range(1.05, 1.2), chinaRng.range(0.08, 0.18), a * 0.8);
      addWrapped(china, other, at + sec(0.012));
    }
  }
  for (const at of slots(2)) {
    // a spoon stirring: light, quick, even clinks on one cup (the spoon damps the ring)
    const hz = chinaRng.range(2100, 2800);
    let t = at;
    for (let k = chinaRng.int(4, 8); k > 0; k--) {
      addWrapped(china, clink(chinaRng, hz * chinaRng.range(0.98, 1.02), chinaRng.range(0.04, 0.08), chinaRng.range(0.2, 0.45)), t);
      t += sec(chinaRng.range(0.16, 0.26));
    }
  }
  for (const at of slots(3)) addWrapped(china, saucer(chinaRng, chinaRng.range(0.5, 1)), at);
  const chinaMix = new Float64Array(N);
  place(china, chinaWet, chinaMix, { muffle: 3400, wet: 0.3, gain: 1 });
  mixInto(chinaMix, circular(chinaWet, room(0.8, 0.2)), 2);
  mixInto(mix, finishBus(chinaMix, -11), 1);

  return mix;
}

const RECIPES: Record<ClipName, () => Float64Array> = { office, cafe };

// ---------------------------------------------------------------------------------------------
// Level, start point, 16 bits

/**
 * A peak limiter that rides the gain rather than bending the waveform (clipping, even soft, would
 * spray distortion across the band on every keystroke). The gain each sample needs to stay under
 * the ceiling is held for ±1 ms, then may only recover at a release rate of 50 ms and is reached
 * gradually from before, an attack of 5 ms (a look-ahead, which a file allows): a smooth gain curve
 * that is at or below the need everywhere, so no sample exceeds the ceiling. Round the ring, like
 * every other process here, so the gain too is seamless.
 */
function limitPeaks(x: Float64Array, ceiling: number): Float64Array {
  const need = new Float64Array(N);
  for (let i = 0; i < N; i++) {
    const a = Math.abs(x[i]!);
    need[i] = a > ceiling ? ceiling / a : 1;
  }
  const hold = sec(0.001);
  const held = new Float64Array(N);
  for (let i = 0; i < N; i++) {
    let g = 1;
    for (let k = -hold; k <= hold; k++) g = Math.min(g, need[(i + k + N) % N]!);
    held[i] = g;
  }
  const release = Math.exp(-1 / (0.05 * SR));
  const attack = Math.exp(-1 / (0.005 * SR));
  const recovering = new Float64Array(N);
  let g = 1;
  for (let lap = 0; lap < 2; lap++) {
    for (let i = 0; i < N; i++) recovering[i] = g = Math.min(held[i]!, release * g + (1 - release));
  }
  const out = new Float64Array(N);
  g = 1;
  for (let lap = 0; lap < 2; lap++) {
    for (let i = N - 1; i >= 0; i--) {
      g = Math.min(recovering[i]!, attack * g + (1 - attack));
      out[i] = x[i]! * g;
    }
  }
  return out;
}

/** The sample at the middle of the quietest 200 ms of the loop (on a 10 ms grid). */
function quietestPoint(x: Float64Array): number {
  const hop = sec(0.01);
  const window = sec(0.2);
  const energy = new Float64Array(N / hop);
  for (let h = 0; h < energy.length; h++) {
    let e = 0;
    for (let i = h * hop; i < (h + 1) * hop; i++) e += x[i]! * x[i]!;
    energy[h] = e;
  }
  const hops = window / hop;
  let best = 0;
  let bestEnergy = Number.POSITIVE_INFINITY;
  for (let h = 0; h < energy.length; h++) {
    let e = 0;
    for (let k = 0; k < hops; k++) e += energy[(h + k) % energy.length]!;
    if (e < bestEnergy) {
      bestEnergy = e;
      best = h;
    }
  }
  return (best * hop + window / 2) % N;
}

/** Renders one clip as 16-bit samples (deterministic). */
export function renderClip(name: ClipName): Int16Array {
  const mix = RECIPES[name]();
  // start the file at the loop's quietest moment (a rotation: the loop itself is unchanged)
  const start = quietestPoint(mix);
  const turned = new Float64Array(N);
  for (let i = 0; i < N; i++) turned[i] = mix[(start + i) % N]!;
  // to −20 dBFS RMS through the limiter: the limiter takes a little off, so correct and repeat
  const target = dbToGain(TARGET_RMS_DBFS);
  let gain = target / rmsOf(turned);
  let limited: Float64Array = turned;
  for (let pass = 0; pass < 4; pass++) {
    limited = limitPeaks(turned.map((v) => v * gain), dbToGain(PEAK_CEILING_DBFS));
    gain *= target / rmsOf(limited);
  }
  const pcm = new Int16Array(N);
  for (let i = 0; i < N; i++) pcm[i] = Math.max(-32768, Math.min(32767, Math.round(limited[i]! * FULL_SCALE)));
  return pcm;
}

/** A RIFF WAV file: 16-bit PCM, mono, 8000 Hz (the header as src/audio/wav.ts writes every one). */
export function encodeWav(pcm: Int16Array): Buffer {
  const header = wavHeader({ sampleRate: SAMPLE_RATE, channels: 1, dataBytes: pcm.length * 2 });
  const out = Buffer.alloc(44 + pcm.length * 2);
  header.copy(out);
  for (let i = 0; i < pcm.length; i++) out.writeInt16LE(pcm[i]!, 44 + i * 2);
  return out;
}

export interface ClipReport {
  name: ClipName;
  path: string;
  seconds: number;
  rmsDbfs: number;
  peakDbfs: number;
}

/** Writes `office.wav` and `cafe.wav` to `outDir` (created if need be); says what it wrote. */
export function makeBackgroundClips(outDir: string = DEFAULT_OUT_DIR): ClipReport[] {
  mkdirSync(outDir, { recursive: true });
  return CLIP_NAMES.map((name) => {
    const pcm = renderClip(name);
    const path = join(outDir, `${name}.wav`);
    writeFileSync(path, encodeWav(pcm));
    let peak = 0;
    for (let i = 0; i < pcm.length; i++) peak = Math.max(peak, Math.abs(pcm[i]!));
    return {
      name,
      path,
      seconds: pcm.length / SAMPLE_RATE,
      rmsDbfs: 20 * Math.log10(rmsOf(pcm) / FULL_SCALE),
      peakDbfs: 20 * Math.log10(peak / FULL_SCALE),
    };
  });
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const args = process.argv.slice(2);
  let outDir = DEFAULT_OUT_DIR;
  if (args.length === 2 && args[0] === '--out') outDir = resolve(args[1]!);
  else if (args.length !== 0) {
    console.error('usage: node --import tsx scripts/make-background-clips.ts [--out dir]');
    process.exit(2);
  }
  for (const r of makeBackgroundClips(outDir)) {
    const shown = relative(process.cwd(), r.path);
    console.log(
      `wrote ${shown.startsWith('..') ? r.path : shown}: ${r.seconds.toFixed(2)} s, ${SAMPLE_RATE} Hz mono 16-bit, ` +
        `RMS ${r.rmsDbfs.toFixed(1)} dBFS, peak ${r.peakDbfs.toFixed(1)} dBFS`,
    );
  }
}
