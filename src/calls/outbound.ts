/**
 * Assistant audio on its way to the caller: whole 160-byte μ-law frames (20 ms), paced close to
 * real time with a small lead, so that a `clear` on barge-in drops little. Marks go out after the
 * audio they follow; the telephony side echoes them once that audio has been played.
 *
 * One shared 20 ms tick drives every call's pacer in the process (one timer, not one per call).
 */

export const FRAME_BYTES = 160;
export const FRAME_MS = 20;
const MULAW_SILENCE = 0xff;

type Item = { kind: 'audio'; frame: Buffer } | { kind: 'mark'; name: string };

export interface OutboundSink {
  sendFrame(frame: Buffer): void;
  sendMark(name: string): void;
  sendClear(): void;
}

export interface PacerClock {
  now(): number;
  subscribe(tick: () => void): () => void;
}

/** The process-wide 20 ms tick. */
class SharedTick implements PacerClock {
  private readonly subscribers = new Set<() => void>();
  private timer: NodeJS.Timeout | null = null;

  now() {
    return performance.now();
  }

  subscribe(tick: () => void) {
    this.subscribers.add(tick);
    if (!this.timer) {
      this.timer = setInterval(() => {
        for (const s of this.subscribers) s();
      }, FRAME_MS / 2);
    }
    return () => {
      this.subscribers.delete(tick);
      if (this.subscribers.size === 0 && this.timer) {
        clearInterval(this.timer);
        this.timer = null;
      }
    };
  }
}

export const sharedTick = new SharedTick();

export interface PacerStats {
  framesSent: number;
  /** Frames sent more than one frame later than their real-time slot. */
  framesLate: number;
  /** The worst lateness seen, in ms. */
  maxLateMs: number;
}

export class OutboundPacer {
  private readonly queue: Item[] = [];
  private partial: Buffer = Buffer.alloc(0);
  private unsubscribe: (() => void) | null = null;
  /** Real time (ms) at which the next frame is due to start playing at the far end. */
  private playhead = 0;
  private paused = false;
  /** Audio was left waiting at the end of the last tick. */
  private backlogged = false;
  /** Audio frames in `queue`. */
  private audioFrames = 0;
  readonly stats: PacerStats = { framesSent: 0, framesLate: 0, maxLateMs: 0 };

  constructor(
    private readonly sink: OutboundSink,
    private readonly clock: PacerClock = sharedTick,
    /** How far ahead of real time audio may be sent. */
    private readonly leadMs = 60,
  ) {}

  /** Appends audio; a trailing partial frame waits for more audio or `endOfAudio()`. */
  push(mulaw: Buffer): void {
    const data = this.partial.length > 0 ? Buffer.concat([this.partial, mulaw]) : mulaw;
    let offset = 0;
    while (data.length - offset >= FRAME_BYTES) {
      this.queue.push({ kind: 'audio', frame: data.subarray(offset, offset + FRAME_BYTES) });
      this.audioFrames++;
      offset += FRAME_BYTES;
    }
    this.partial = Buffer.from(data.subarray(offset));
    this.wake();
  }

  /** Pads the partial frame with silence so that everything pushed so far is sent. */
  endOfAudio(): void {
    if (this.partial.length > 0) {
      const frame = Buffer.alloc(FRAME_BYTES, MULAW_SILENCE);
      this.partial.copy(frame);
      this.partial = Buffer.alloc(0);
      this.queue.push({ kind: 'audio', frame });
      this.audioFrames++;
    }
    this.wake();
  }

  /** A mark after the audio pushed so far (the partial frame is padded out first). */
  mark(name: string): void {
    this.endOfAudio();
    this.queue.push({ kind: 'mark', name });
    this.wake();
  }

  /** Audio (ms) queued here and not yet sent. */
  queuedMs(): number {
    return this.audioFrames * FRAME_MS + (this.partial.length / FRAME_BYTES) * FRAME_MS;
  }

  /** True while audio is queued here or still playing at the far end. */
  isSpeaking(): boolean {
    return this.queue.length > 0 || this.partial.length > 0 || this.clock.now() < this.playhead;
  }

  /**
   * Barge-in: stops sending and tells the far end to drop what it buffered (at most the lead);
   * audio queued here is kept, for a resume after a false interruption.
   */
  pause(): void {
    if (this.paused) return;
    this.paused = true;
    this.playhead = 0;
    this.backlogged = false;
    this.sink.sendClear();
  }

  isPaused(): boolean {
    return this.paused;
  }

  resume(): void {
    this.paused = false;
    this.wake();
  }

  /** Drops everything queued here and tells the far end to drop what it buffered. */
  clear(): Item[] {
    this.paused = false;
    const dropped = this.queue.splice(0);
    this.partial = Buffer.alloc(0);
    this.playhead = 0;
    this.backlogged = false;
    this.audioFrames = 0;
    this.sink.sendClear();
    return dropped;
  }

  close(): void {
    this.queue.length = 0;
    this.audioFrames = 0;
    this.partial = Buffer.alloc(0);
    this.unsubscribe?.();
    this.unsubscribe = null;
  }

  private wake() {
    if (!this.unsubscribe && this.queue.length > 0) {
      this.unsubscribe = this.clock.subscribe(() => this.tick());
      this.tick();
    }
  }

  private tick() {
    const now = this.clock.now();
    if (this.playhead < now) {
      // audio was waiting and its slot passed: the event loop held us up (not a starved queue)
      const late = now - this.playhead;
      if (this.backlogged && !this.paused && late > FRAME_MS) {
        this.stats.framesLate++;
        this.stats.maxLateMs = Math.max(this.stats.maxLateMs, late);
      }
      this.playhead = now;
    }
    while (!this.paused && this.queue.length > 0 && this.playhead < now + this.leadMs) {
      const item = this.queue.shift()!;
      if (item.kind === 'mark') {
        this.sink.sendMark(item.name);
        continue;
      }
      this.audioFrames--;
      this.sink.sendFrame(item.frame);
      this.stats.framesSent++;
      this.playhead += FRAME_MS;
    }
    // marks right behind the last frame go out at once
    while (!this.paused && this.queue[0]?.kind === 'mark') {
      this.sink.sendMark((this.queue.shift() as { name: string }).name);
    }
    this.backlogged = this.audioFrames > 0;
    if (this.queue.length === 0 && this.unsubscribe) {
      this.unsubscribe();
      this.unsubscribe = null;
    }
  }
}
