/**
 * The two sides of a live call on one real-time timeline, for its listeners (docs/listen.md):
 * 16-bit little-endian PCM at 8 kHz, stereo interleaved, the customer on the left and what the
 * customer hears (the assistant, or an operator) on the right, taken as whole 20 ms frames
 * (640 bytes) as the clock passes them, silence included, so that frames are time.
 *
 * The timeline is the call's real time since the mixer was made. The customer's audio arrives as
 * a steady stream and is laid end to end, brought back to the clock in its quiet frames (its own
 * clock drifts from ours); one that falls behind what has been taken, or runs far ahead of the
 * clock, is laid at the clock again (a gap, or a cut). What the customer hears is
 * laid at the time the pacer scheduled it to play; a `clear` (barge-in) blanks it from that moment
 * on, as the far end drops what it had not played. A frame is taken `holdMs` after its end, so a
 * customer's frame that arrives a little late still finds its place (and up to `maxWaitMs` later
 * while the customer's stream is late). Memory is a ring of `capacityMs` of stereo samples,
 * whatever the length of the call.
 */
import { endianness } from 'node:os';
import { MULAW_DECODE_TABLE } from '../audio/mulaw.js';

export const LISTEN_SAMPLE_RATE = 8_000;
export const LISTEN_FRAME_MS = 20;
/** Samples per channel in a 20 ms frame. */
export const LISTEN_FRAME_SAMPLES = 160;
/** A 20 ms stereo frame: 160 samples × 2 channels × 2 bytes. */
export const LISTEN_FRAME_BYTES = 640;

/** What `POST /calls/{id}/listen` says of the socket's binary frames. */
export const LISTEN_FORMAT = {
  encoding: 'pcm16',
  byte_order: 'little-endian',
  sample_rate: LISTEN_SAMPLE_RATE,
  channels: 2,
  channel_layout: { left: 'customer', right: 'assistant' },
  frame_ms: LISTEN_FRAME_MS,
  frame_bytes: LISTEN_FRAME_BYTES,
} as const;

const SAMPLES_PER_MS = LISTEN_SAMPLE_RATE / 1000;
/** The customer's stream is laid at the clock again when it runs this far ahead of it. */
const AHEAD_MS = 200;
const BIG_ENDIAN = endianness() === 'BE';
/** A frame none of whose samples is louder than this (about -48 dBFS) is quiet. */
const QUIET_PEAK = 128;

function quiet(mulaw: Buffer): boolean {
  for (let i = 0; i < mulaw.length; i++) {
    const v = MULAW_DECODE_TABLE[mulaw[i]!]!;
    if (v > QUIET_PEAK || v < -QUIET_PEAK) return false;
  }
  return true;
}

export interface StereoMixerOptions {
  /** The clock the pacer schedules frames on (ms): `performance.now()` unless a test gives its own. */
  now?: () => number;
  /** How long after its end a frame is taken (room for the customer's late frames); default 160 ms. */
  holdMs?: number;
  /** How much longer than the hold a late customer's stream is waited for; default 500 ms. */
  maxWaitMs?: number;
  /**
   * The ring's length; audio laid further ahead than this is dropped. Default 1 s: what may lie
   * ahead of the last frame taken is the hold and the wait (660 ms) and the pacer's lead (100 ms).
   */
  capacityMs?: number;
}

export class StereoMixer {
  private readonly now: () => number;
  private readonly t0: number;
  private readonly hold: number;
  private readonly maxWait: number;
  private readonly capacity: number;
  /** Interleaved stereo samples, `capacity` of each channel, by timeline sample modulo `capacity`. */
  private readonly ring: Int16Array;
  /** Samples before this one have been taken (always a whole number of frames). */
  private taken = 0;
  /** Where the customer's next sample goes (-1 until the first frame). */
  private left = -1;
  /** The end of the furthest sample of the right channel laid so far. */
  private rightEnd = 0;

  constructor(o: StereoMixerOptions = {}) {
    this.now = o.now ?? (() => performance.now());
    this.t0 = this.now();
    this.hold = Math.round((o.holdMs ?? 160) * SAMPLES_PER_MS);
    this.maxWait = Math.round((o.maxWaitMs ?? 500) * SAMPLES_PER_MS);
    this.capacity = Math.max(LISTEN_FRAME_SAMPLES, Math.round((o.capacityMs ?? 1_000) * SAMPLES_PER_MS));
    this.ring = new Int16Array(this.capacity * 2);
  }

  /** Frames taken so far. */
  get frames(): number {
    return this.taken / LISTEN_FRAME_SAMPLES;
  }

  /**
   * The customer's audio (μ-law 8 kHz), in order, as it arrives. The stream's own clock drifts from
   * ours (a carrier's, a phone's): in a quiet frame it is brought back to ours (a gap, or a quiet
   * frame left out, where nobody hears it), so that a line spoken is laid whole; only a stream
   * that falls further behind than the hold, or runs far ahead, is realigned where it is.
   */
  caller(mulaw: Buffer): void {
    const n = mulaw.length;
    if (n === 0) return;
    const clock = this.sampleAt(this.now());
    if (this.left < this.taken || this.left > clock + AHEAD_MS * SAMPLES_PER_MS) {
      this.left = Math.max(this.taken, clock - n);
    } else if (Math.abs(clock - n - this.left) > LISTEN_FRAME_SAMPLES && quiet(mulaw)) {
      // behind: laid at the clock (a gap of silence); ahead: left out
      if (this.left > clock - n) return;
      this.left = clock - n;
    }
    this.put(0, this.left, mulaw);
    this.left += n;
  }

  /** A frame the customer hears (μ-law 8 kHz), scheduled to start playing at `playAt` (the clock's ms). */
  heard(mulaw: Buffer, playAt: number): void {
    const at = this.sampleAt(playAt);
    this.put(1, at, mulaw);
    if (at + mulaw.length > this.rightEnd) this.rightEnd = at + mulaw.length;
  }

  /** The far end dropped what it had not played yet (`clear` at `at`): it is never heard. */
  cleared(at: number = this.now()): void {
    const from = Math.max(this.sampleAt(at), this.taken);
    const to = Math.min(this.rightEnd, this.taken + this.capacity);
    for (let s = from; s < to; s++) this.ring[(s % this.capacity) * 2 + 1] = 0;
    if (from < this.rightEnd) this.rightEnd = from;
  }

  /**
   * The frames whose time (and hold) has passed, as one buffer of whole 640-byte frames; null when
   * none, or fewer than `minFrames`. While the customer's stream is late (a stall of this process
   * or of the network), it is waited for up to `maxWaitMs` more rather than cut by a gap; the
   * frames then catch up.
   */
  take(minFrames = 1): Buffer | null {
    const due = this.sampleAt(this.now()) - this.hold;
    const upTo = this.left >= 0 && this.left < due ? Math.max(this.left, due - this.maxWait) : due;
    return upTo - this.taken >= minFrames * LISTEN_FRAME_SAMPLES ? this.takeUpTo(upTo) : null;
  }

  /** Every frame up to the clock (the one it is in too), the held ones as well: the call is over. */
  drain(): Buffer | null {
    return this.takeUpTo(this.sampleAt(this.now()), true);
  }

  private takeUpTo(sample: number, partial = false): Buffer | null {
    const upTo = (partial ? Math.ceil : Math.floor)(sample / LISTEN_FRAME_SAMPLES) * LISTEN_FRAME_SAMPLES;
    const count = upTo - this.taken;
    if (count <= 0) return null;
    const ring = this.ring;
    const cap = this.capacity;
    // a stall longer than the ring: what lies beyond it was never laid, and comes out as silence
    const n = Math.min(count, cap);
    const out = n === count ? Buffer.allocUnsafe(count * 4) : Buffer.alloc(count * 4);
    const pcm = new Int16Array(out.buffer, out.byteOffset, count * 2);
    // the ring's part from where the taken samples end, then from its start once it wraps
    const start = (this.taken % cap) * 2;
    const first = Math.min(n * 2, cap * 2 - start);
    pcm.set(ring.subarray(start, start + first), 0);
    ring.fill(0, start, start + first);
    if (first < n * 2) {
      pcm.set(ring.subarray(0, n * 2 - first), first);
      ring.fill(0, 0, n * 2 - first);
    }
    this.taken = upTo;
    if (BIG_ENDIAN) out.swap16();
    return out;
  }

  private sampleAt(ms: number): number {
    return Math.round((ms - this.t0) * SAMPLES_PER_MS);
  }

  /** Lays `mulaw` on `channel` from timeline sample `at`: what is already taken, or past the ring, is dropped. */
  private put(channel: 0 | 1, at: number, mulaw: Buffer): void {
    const from = Math.max(at, this.taken);
    const to = Math.min(at + mulaw.length, this.taken + this.capacity);
    const ring = this.ring;
    const end = this.capacity * 2;
    let r = (from % this.capacity) * 2 + channel;
    for (let s = from; s < to; s++) {
      ring[r] = MULAW_DECODE_TABLE[mulaw[s - at]!]!;
      r += 2;
      if (r >= end) r -= end;
    }
  }
}
