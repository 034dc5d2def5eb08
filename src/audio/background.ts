/**
 * Background audio (DECISIONS 13): a clip looped under everything the assistant says and alone
 * between its lines, from pickup to hang-up, at the assistant's `volume`.
 *
 * Clips are the ones shipped in `assets/background/` (made by scripts/make-background-clips.ts)
 * or an https URL of a WAV file, fetched once per process under the webhook address rules, at
 * most 10 MB, and kept: decoded once to 8 kHz mono 16-bit, the rate calls mix at. For each volume
 * a call asks for, the clip is scaled once and also encoded to μ-law, so that the frames sent
 * between lines (most of a call) cost nothing but a slice; only frames of speech are mixed, 160
 * samples through two table lookups each (`BackgroundBed.mix`).
 */
import { readFile } from 'node:fs/promises';
import { join, sep } from 'node:path';
import { pathToFileURL } from 'node:url';
import { PACKAGE_ROOT } from '../package-root.js';
import type { Logger } from 'pino';
import { BACKGROUND_CLIPS, backgroundClipProblem } from '../../engine/catalog.js';
import { MULAW_DECODE_TABLE, MULAW_ENCODE_TABLE, mulawEncode } from './mulaw.js';
import { resample } from './resample.js';
import { parseWav, WavError } from './wav.js';
import { ErrorCodes, SwitchboardError } from '../../engine/errors.js';

/** 20 ms of μ-law at 8 kHz: the pacer's frame. */
const FRAME = 160;
/** A clip URL's file may be this large at most (DECISIONS 13). */
export const MAX_CLIP_BYTES = 10 * 1024 * 1024;
/** Only the first five minutes of a long clip loop: a bed needs no more, and memory stays bounded. */
export const MAX_LOOP_SECONDS = 300;
/** A clip shorter than this is repeated up to it, so that every loop is at least a second. */
const MIN_LOOP_SECONDS = 1;
/** Loaded clips kept per process (URL clips are at most 5 min at 8 kHz: 4.8 MB each as 16-bit). */
const MAX_CLIPS = 32;
/** Scaled and encoded copies kept (one per clip and volume in use). */
const MAX_LOOPS = 64;
/** A URL that could not be used is not asked again for this long (call starts stay fast). */
const FAILURE_MEMORY_MS = 5 * 60_000;

export const CLIPS_DIR = pathToFileURL(join(PACKAGE_ROOT, 'assets', 'background') + sep);

/** What fetching a clip URL needs (the webhook HTTP client: same address rules). */
export interface ClipFetcher {
  get(
    url: string,
    options: { timeoutMs: number; maxBytes: number },
  ): Promise<{ ok: true; status: number; body: Buffer; tooLarge: boolean } | { ok: false; reason: string; detail: string }>;
}

export class BackgroundClipError extends SwitchboardError {
  static override readonly codes = [ErrorCodes.BACKGROUND_CLIP_UNUSABLE] as const;
  override name = 'BackgroundClipError';
  constructor(message: string) {
    super(ErrorCodes.BACKGROUND_CLIP_UNUSABLE, message);
  }
}

/** One clip at one volume: 16-bit samples for mixing and the same as μ-law for frames alone. */
interface Loop {
  pcm: Int16Array;
  mulaw: Buffer;
}

/**
 * One call's background: where it is in the loop. `next()` is the bed alone for one frame,
 * `mix(speech)` one frame of speech over it; both move on by one frame.
 */
export class BackgroundBed {
  private pos: number;

  constructor(
    private readonly loop: Loop,
    /** Where in the loop to start (calls started together do not sound alike). */
    startFrame = 0,
  ) {
    this.pos = (Math.abs(Math.floor(startFrame)) * FRAME) % loop.mulaw.length;
  }

  /** The next frame of the bed alone: a view into the shared loop, never to be written to. */
  next(): Buffer {
    const at = this.pos;
    this.advance();
    return this.loop.mulaw.subarray(at, at + FRAME);
  }

  /** One 160-byte μ-law frame of speech with the next frame of the bed under it (a new buffer). */
  mix(speech: Buffer): Buffer {
    const bed = this.loop.pcm;
    const at = this.pos;
    const n = Math.min(speech.length, FRAME);
    const out = Buffer.allocUnsafe(speech.length);
    for (let i = 0; i < n; i++) {
      let s = MULAW_DECODE_TABLE[speech[i]!]! + bed[at + i]!;
      if (s > 32767) s = 32767;
      else if (s < -32768) s = -32768;
      out[i] = MULAW_ENCODE_TABLE[(s >> 2) & 0x3fff]!;
    }
    for (let i = n; i < speech.length; i++) out[i] = speech[i]!;
    this.advance();
    return out;
  }

  private advance() {
    this.pos += FRAME;
    if (this.pos >= this.loop.mulaw.length) this.pos = 0;
  }
}

export interface BackgroundAudioOptions {
  /** Fetches clip URLs; null (the API without a runtime): a URL is judged by its form, and no call can play it. */
  fetcher: ClipFetcher | null;
  /** WEBHOOK_ALLOW_PRIVATE: http clip URLs (and private addresses) are allowed, for development. */
  allowPrivate: boolean;
  logger?: Logger;
  fetchTimeoutMs?: number;
  /** Where the shipped clips are (tests). */
  clipsDir?: URL;
}

/** The process's clips: loads each once, hands each call its own `BackgroundBed`. */
export class BackgroundAudio {
  private readonly clips = new Map<string, Promise<Int16Array>>();
  private readonly loops = new Map<string, Promise<Loop>>();
  private readonly failures = new Map<string, { problem: string; at: number }>();

  constructor(private readonly o: BackgroundAudioOptions) {}

  /** What is wrong with a clip (unknown name, bad URL, a URL that gives no usable WAV), or null. */
  async problem(clip: string): Promise<string | null> {
    const shipped = BACKGROUND_CLIPS.some((c) => c.id === clip);
    // without a way to fetch (the API alone), a URL is judged by its form
    if (!shipped && !this.o.fetcher) return backgroundClipProblem(clip, { allowHttp: this.o.allowPrivate });
    try {
      await this.load(clip);
      return null;
    } catch (err) {
      return (err as Error).message;
    }
  }

  /**
   * A bed for one call at `volume` (0..1), starting at `startFrame` in the loop. Rejects with a
   * `BackgroundClipError` saying why the clip cannot be used.
   */
  async bed(clip: string, volume: number, startFrame = 0): Promise<BackgroundBed> {
    const v = Math.max(0, Math.min(1, Number.isFinite(volume) ? volume : 0));
    const key = `${clip}\n${v}`;
    let loop = this.loops.get(key);
    if (loop) {
      // least recently used goes first
      this.loops.delete(key);
    } else {
      loop = this.load(clip).then((pcm) => scaled(pcm, v));
      loop.catch(() => this.loops.delete(key));
    }
    this.loops.set(key, loop);
    trim(this.loops, MAX_LOOPS);
    return new BackgroundBed(await loop, startFrame);
  }

  /** A clip as 8 kHz mono 16-bit, a whole number of frames, loaded once. */
  private load(clip: string): Promise<Int16Array> {
    const problem = backgroundClipProblem(clip, { allowHttp: this.o.allowPrivate });
    if (problem) return Promise.reject(new BackgroundClipError(problem));
    const failed = this.failures.get(clip);
    if (failed && Date.now() - failed.at < FAILURE_MEMORY_MS) return Promise.reject(new BackgroundClipError(failed.problem));
    let loading = this.clips.get(clip);
    if (loading) {
      this.clips.delete(clip);
    } else {
      const shipped = BACKGROUND_CLIPS.some((c) => c.id === clip);
      loading = (shipped ? this.readShipped(clip) : this.fetch(clip)).then(toLoop);
      loading.catch((err: Error) => {
        this.clips.delete(clip);
        if (!shipped) this.failures.set(clip, { problem: err.message, at: Date.now() });
      });
    }
    this.clips.set(clip, loading);
    trim(this.clips, MAX_CLIPS);
    return loading;
  }

  private async readShipped(clip: string): Promise<Buffer> {
    return readFile(new URL(`${clip}.wav`, this.o.clipsDir ?? CLIPS_DIR));
  }

  private async fetch(url: string): Promise<Buffer> {
    if (!this.o.fetcher) throw new BackgroundClipError('clip URLs cannot be fetched here');
    const started = performance.now();
    const res = await this.o.fetcher.get(url, { timeoutMs: this.o.fetchTimeoutMs ?? 10_000, maxBytes: MAX_CLIP_BYTES });
    if (!res.ok) {
      this.o.logger?.warn({ url: redact(url), detail: res.detail }, 'a background clip could not be fetched');
      throw new BackgroundClipError(`the clip URL could not be fetched: ${res.reason}`);
    }
    if (res.tooLarge) throw new BackgroundClipError(`the clip is larger than ${MAX_CLIP_BYTES / 1024 / 1024} MB`);
    if (res.status < 200 || res.status > 299) throw new BackgroundClipError(`the clip URL answered HTTP ${res.status}`);
    this.o.logger?.info({ url: redact(url), bytes: res.body.length, ms: Math.round(performance.now() - started) }, 'background clip fetched');
    return res.body;
  }
}

/** WAV bytes → the loop at 8 kHz: resampled, cut to five minutes and to whole frames, at least a second. */
function toLoop(file: Buffer): Int16Array {
  let wav;
  try {
    wav = parseWav(file);
  } catch (err) {
    if (err instanceof WavError) throw new BackgroundClipError(`the clip is not a usable WAV file: ${err.message}`);
    throw err;
  }
  const limit = wav.sampleRate * MAX_LOOP_SECONDS;
  const source = wav.pcm.length > limit ? wav.pcm.subarray(0, limit) : wav.pcm;
  let pcm = resample(source, wav.sampleRate, 8000);
  if (pcm.length < MIN_LOOP_SECONDS * 8000) {
    const times = Math.ceil((MIN_LOOP_SECONDS * 8000) / Math.max(1, pcm.length));
    const tiled = new Int16Array(pcm.length * times);
    for (let i = 0; i < times; i++) tiled.set(pcm, i * pcm.length);
    pcm = tiled;
  }
  return pcm.subarray(0, pcm.length - (pcm.length % FRAME));
}

function scaled(pcm: Int16Array, volume: number): Loop {
  const out = new Int16Array(pcm.length);
  for (let i = 0; i < pcm.length; i++) out[i] = Math.round(pcm[i]! * volume);
  return { pcm: out, mulaw: mulawEncode(out) };
}

function trim<K, V>(map: Map<K, V>, max: number) {
  while (map.size > max) map.delete(map.keys().next().value as K);
}

function redact(url: string): string {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.host}${u.pathname}`;
  } catch {
    return '(invalid URL)';
  }
}
