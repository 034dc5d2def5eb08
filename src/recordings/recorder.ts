/**
 * One call's recording (DECISIONS 13): a stereo 16-bit WAV at 8 kHz, left the customer, right what
 * the customer heard of the assistant (the background included), cut where it was cut, written
 * to a file as the call goes.
 *
 * Both channels sit on one timeline, the call's real time since the recorder started. The
 * customer's audio arrives as a steady stream of frames and is laid end to end (a stream that
 * stalls for more than a second is realigned to the clock). What the customer hears is laid at
 * the time the pacer scheduled it to play; a `clear` (barge-in) drops what the far end had
 * buffered and not played, so the recorder blanks the right channel from that moment on, and the
 * frames sent after it write over the blank. Audio is held only until both channels are complete
 * for a second of the timeline (at most a few seconds: 32 KB a second), then appended to the
 * file; an hour-long call costs no more memory than a short one. At the end the WAV header gets
 * its sizes and the file is committed to the recording store (local folder or S3).
 */
import { open, type FileHandle } from 'node:fs/promises';
import type { Logger } from 'pino';
import { MULAW_DECODE_TABLE } from '../audio/mulaw.js';
import { wavHeader } from '../audio/wav.js';
import type { RecordingUpload } from './storage.js';

const RATE = 8000;
/** Samples per block written at once (one second). */
const BLOCK = RATE;
/** A block is written once the clock is this far past its end (late frames of the customer still fit). */
const HOLD_MS = 2_000;
/** The customer's stream is realigned to the clock when it falls this far behind. */
const REALIGN_SAMPLES = RATE;

export interface CallRecorderOptions {
  log: Logger;
  /** The clock the pacer schedules frames on (ms). */
  now?: () => number;
}

export class CallRecorder {
  private readonly now: () => number;
  private readonly t0: number;
  /** Blocks not yet written, by index: interleaved stereo samples. */
  private readonly pending = new Map<number, Int16Array>();
  /** Blocks before this one are in the file. */
  private written = 0;
  /** Where the customer's next sample goes; -1 until the first frame. */
  private leftPos = -1;
  /** The end of the furthest sample written on either channel. */
  private end = 0;
  /** The end of the furthest sample of the right channel. */
  private rightEnd = 0;
  private file: Promise<FileHandle>;
  private chain: Promise<void> = Promise.resolve();
  private failed: Error | null = null;
  private finished = false;
  private bytes = 0;

  constructor(
    private readonly upload: Promise<RecordingUpload>,
    private readonly o: CallRecorderOptions,
  ) {
    this.now = o.now ?? (() => performance.now());
    this.t0 = this.now();
    this.file = upload.then(async (u) => {
      const fh = await open(u.path, 'w');
      await fh.write(wavHeader({ sampleRate: RATE, channels: 2, dataBytes: 0 }), 0, 44, 0);
      return fh;
    });
    // a failure is kept and reported by finish(); the call goes on unrecorded
    this.file.catch((err: Error) => this.fail(err));
  }

  /** The customer's audio (μ-law 8 kHz), in order. */
  caller(mulaw: Buffer): void {
    if (this.finished || this.failed) return;
    const clock = this.sampleAt(this.now());
    if (this.leftPos < 0 || this.leftPos < clock - REALIGN_SAMPLES) this.leftPos = Math.max(0, clock - mulaw.length);
    this.put(0, this.leftPos, mulaw);
    this.leftPos += mulaw.length;
    this.flush(clock);
  }

  /** A frame the customer hears (μ-law 8 kHz), scheduled to start playing at `playAt` (the pacer's clock). */
  heard(mulaw: Buffer, playAt: number): void {
    if (this.finished || this.failed) return;
    const at = this.sampleAt(playAt);
    this.put(1, at, mulaw);
    this.rightEnd = Math.max(this.rightEnd, at + mulaw.length);
    this.flush(this.sampleAt(this.now()));
  }

  /** The far end dropped what it had not played yet (`clear` at `at`): it was never heard. */
  cleared(at: number = this.now()): void {
    if (this.finished || this.failed) return;
    const from = this.sampleAt(at);
    for (let s = Math.max(from, this.written * BLOCK); s < this.rightEnd; s++) {
      const block = this.pending.get(Math.floor(s / BLOCK));
      if (block) block[(s % BLOCK) * 2 + 1] = 0;
    }
    this.rightEnd = Math.min(this.rightEnd, Math.max(from, 0));
  }

  /**
   * The call is over: the rest goes to the file, the header gets its sizes, and the store keeps
   * it. Resolves true once the recording is kept; false (after logging why) when it could not be.
   */
  async finish(): Promise<boolean> {
    if (this.finished) return false;
    this.finished = true;
    const total = this.end;
    for (const index of [...this.pending.keys()].sort((a, b) => a - b)) this.writeBlock(index, total);
    this.pending.clear();
    let upload: RecordingUpload | null = null;
    try {
      upload = await this.upload;
      const fh = await this.file;
      await this.chain;
      if (this.failed) throw this.failed;
      await fh.write(wavHeader({ sampleRate: RATE, channels: 2, dataBytes: this.bytes }), 0, 44, 0);
      await fh.close();
      await upload.commit();
      return true;
    } catch (err) {
      this.o.log.error({ err }, 'the call recording could not be kept');
      await this.file.then((fh) => fh.close()).catch(() => {});
      await upload?.discard().catch(() => {});
      return false;
    }
  }

  /** The call ended with nothing worth keeping: the file goes. */
  async discard(): Promise<void> {
    this.finished = true;
    this.pending.clear();
    await this.chain.catch(() => {});
    await this.file.then((fh) => fh.close()).catch(() => {});
    await this.upload.then((u) => u.discard()).catch(() => {});
  }

  /** Seconds recorded so far (the timeline's length). */
  seconds(): number {
    return this.end / RATE;
  }

  private sampleAt(ms: number): number {
    return Math.max(0, Math.round(((ms - this.t0) * RATE) / 1000));
  }

  private put(channel: 0 | 1, at: number, mulaw: Buffer) {
    const n = mulaw.length;
    let i = 0;
    // a frame lies in one block, or straddles two
    while (i < n) {
      const s = at + i;
      const index = Math.floor(s / BLOCK);
      const offset = s - index * BLOCK;
      const count = Math.min(n - i, BLOCK - offset);
      if (index >= this.written) {
        let block = this.pending.get(index);
        if (!block) {
          block = new Int16Array(BLOCK * 2);
          this.pending.set(index, block);
        }
        for (let k = 0, o = offset * 2 + channel; k < count; k++, o += 2) block[o] = MULAW_DECODE_TABLE[mulaw[i + k]!]!;
      } // else: already in the file, too late to change
      i += count;
    }
    this.end = Math.max(this.end, at + n);
  }

  /** Appends the blocks that ended more than `HOLD_MS` before `clock`, in order (gaps are silence). */
  private flush(clock: number) {
    const upTo = Math.floor((clock - (HOLD_MS * RATE) / 1000) / BLOCK);
    while (this.written < upTo) this.writeBlock(this.written, Infinity);
  }

  /** Writes block `index` (and any silent blocks before it), at most up to sample `limit`. */
  private writeBlock(index: number, limit: number) {
    while (this.written <= index) {
      const i = this.written++;
      const block = this.pending.get(i) ?? new Int16Array(BLOCK * 2);
      this.pending.delete(i);
      const samples = Math.max(0, Math.min(BLOCK, limit - i * BLOCK));
      if (samples === 0) continue;
      const data = Buffer.from(block.buffer, block.byteOffset, samples * 4);
      this.append(data);
    }
  }

  private append(data: Buffer) {
    const offset = 44 + this.bytes;
    this.bytes += data.length;
    this.chain = this.chain.then(async () => {
      if (this.failed) return;
      const fh = await this.file;
      await fh.write(data, 0, data.length, offset);
    });
    this.chain.catch((err: Error) => this.fail(err));
  }

  private fail(err: Error) {
    if (this.failed) return;
    this.failed = err;
    this.pending.clear();
    this.o.log.error({ err }, 'the call recording failed; the call goes on unrecorded');
  }
}
