/**
 * Assistant audio on its way to the caller: whole 160-byte μ-law frames (20 ms), paced close to
 * real time with a small lead, so that a `clear` on barge-in drops little. Marks go out after the
 * audio they follow; the telephony side echoes them once that audio has been played.
 *
 * One shared 20 ms tick drives every call's pacer in the process (one timer, not one per call).
 */

import type { KeyFrame } from './keypad.js';

export const FRAME_BYTES = 160;
export const FRAME_MS = 20;
const MULAW_SILENCE = 0xff;
const EMPTY = Buffer.alloc(0);

/**
 * Audio is queued as it came (whole frames of it), and each frame is cut when it is sent: a reply's
 * seconds of audio wait as one item, not as hundreds of small buffers the collector must copy
 * while they wait.
 */
type Item = { kind: 'audio'; data: Buffer; offset: number; keys?: readonly (KeyFrame | null)[] } | { kind: 'mark'; name: string };

export interface OutboundSink {
  /**
   * One frame to the far end; `speech` is false for a frame of the background alone. `key`: the
   * frame is (or, `repeat`, follows) a key's tone (src/calls/keypad.ts).
   */
  sendFrame(frame: Buffer, speech: boolean, key?: KeyFrame): void;
  /**
   * The frames given in this tick are all there is for now (a transport that puts several frames
   * in one message sends what it holds). Called at the end of each tick that sent a frame.
   */
  flush?(): void;
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

/** What plays under the speech and alone between it (src/audio/background.ts). */
export interface PacerBackground {
  /** The next frame of the background alone. */
  next(): Buffer;
  /** One frame of speech with the next frame of the background under it. */
  mix(speech: Buffer): Buffer;
}

/**
 * How far ahead of real time frames of background alone are sent: a reply that starts waits
 * behind at most this much bed at the far end, and a late tick still finds audio buffered there.
 */
export const BACKGROUND_LEAD_MS = 40;

export interface PacerStats {
  framesSent: number;
  /** Frames sent more than one frame later than their real-time slot. */
  framesLate: number;
  /** The worst lateness seen, in ms. */
  maxLateMs: number;
}

export class OutboundPacer {
  private readonly queue: Item[] = [];
  private partial: Buffer = EMPTY;
  private unsubscribe: (() => void) | null = null;
  /** Real time (ms) at which the next frame is due to start playing at the far end. */
  private playhead = 0;
  private paused = false;
  /** Audio was left waiting at the end of the last tick. */
  private backlogged = false;
  /** Audio frames in `queue`. */
  private audioFrames = 0;
  /** Plays under speech and alone between it, from `setBackground` until `close`. */
  private background: PacerBackground | null = null;
  private closed = false;
  readonly stats: PacerStats = { framesSent: 0, framesLate: 0, maxLateMs: 0 };

  constructor(
    private readonly sink: OutboundSink,
    private readonly clock: PacerClock = sharedTick,
    /** How far ahead of real time audio may be sent. */
    private readonly leadMs = 60,
    /**
     * Speech goes in groups of this many frames: once a frame is due, the next ones of its group
     * go with it (a transport that carries several frames in one message sends fewer messages;
     * the far end is then up to `leadMs` plus a group ahead).
     */
    private readonly groupFrames = 1,
  ) {}

  /**
   * Appends audio; a trailing partial frame waits for more audio or `endOfAudio()`. `keys`: the
   * audio is a key press in whole frames, each tagged (or null); it goes out as it is, with no
   * background under it (a tone detector at the far end hears the tones alone).
   */
  push(mulaw: Buffer, keys?: readonly (KeyFrame | null)[]): void {
    if (keys) {
      this.endOfAudio();
      const frames = Math.floor(mulaw.length / FRAME_BYTES);
      if (frames === 0) return;
      this.queue.push({ kind: 'audio', data: mulaw.subarray(0, frames * FRAME_BYTES), offset: 0, keys });
      this.audioFrames += frames;
      this.wake();
      return;
    }
    const data = this.partial.length > 0 ? Buffer.concat([this.partial, mulaw]) : mulaw;
    const frames = Math.floor(data.length / FRAME_BYTES);
    const whole = frames * FRAME_BYTES;
    if (frames > 0) {
      this.queue.push({ kind: 'audio', data: data.subarray(0, whole), offset: 0 });
      this.audioFrames += frames;
    }
    this.partial = whole < data.length ? Buffer.from(data.subarray(whole)) : EMPTY;
    this.wake();
  }

  /** Pads the partial frame with silence so that everything pushed so far is sent. */
  endOfAudio(): void {
    if (this.partial.length > 0) {
      const frame = Buffer.alloc(FRAME_BYTES, MULAW_SILENCE);
      this.partial.copy(frame);
      this.partial = EMPTY;
      this.queue.push({ kind: 'audio', data: frame, offset: 0 });
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

  /** The real time (the clock's ms) at which the frame being sent starts playing at the far end. */
  get slot(): number {
    return this.playhead;
  }

  /** Audio (ms) queued here and not yet sent. */
  queuedMs(): number {
    return this.audioFrames * FRAME_MS + (this.partial.length / FRAME_BYTES) * FRAME_MS;
  }

  /**
   * From now until `close`, `background` plays under every frame of speech and alone between
   * them, 50 frames a second; a pause or clear cuts the speech, never the background.
   */
  setBackground(background: PacerBackground | null): void {
    if (this.closed) return;
    this.background = background;
    if (background && !this.unsubscribe) {
      this.unsubscribe = this.clock.subscribe(() => this.tick());
      this.tick();
    }
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
  clear(): void {
    this.paused = false;
    this.queue.length = 0;
    this.partial = EMPTY;
    this.playhead = 0;
    this.backlogged = false;
    this.audioFrames = 0;
    this.sink.sendClear();
  }

  close(): void {
    this.closed = true;
    this.background = null;
    this.queue.length = 0;
    this.audioFrames = 0;
    this.partial = EMPTY;
    this.unsubscribe?.();
    this.unsubscribe = null;
  }

  private wake() {
    if (!this.unsubscribe && this.queue.length > 0) {
      this.unsubscribe = this.clock.subscribe(() => this.tick());
      this.tick();
    } else if (this.background && !this.paused && this.queue.length > 0) {
      // the background keeps the tick subscribed: speech that arrives goes now, not at the next tick
      this.tick();
    }
  }

  private tick() {
    const now = this.clock.now();
    const background = this.background;
    if (this.playhead < now) {
      // audio was waiting and its slot passed: the event loop held us up (not a starved queue);
      // with a background, audio is always waiting
      const late = now - this.playhead;
      const streaming = (this.backlogged && !this.paused) || (background !== null && this.playhead > 0);
      if (streaming && late > FRAME_MS) {
        this.stats.framesLate++;
        this.stats.maxLateMs = Math.max(this.stats.maxLateMs, late);
      }
      this.playhead = now;
    }
    const sentBefore = this.stats.framesSent;
    /** Frames of the group under way still to go with it. */
    let group = 0;
    for (;;) {
      if (!this.paused && this.queue.length > 0 && (group > 0 || this.playhead < now + this.leadMs)) {
        const item = this.queue[0]!;
        if (item.kind === 'mark') {
          this.queue.shift();
          this.sink.sendMark(item.name);
          continue;
        }
        group = group > 0 ? group - 1 : this.groupFrames - 1;
        const frame = item.data.subarray(item.offset, item.offset + FRAME_BYTES);
        const keys = item.keys;
        const key = keys?.[item.offset / FRAME_BYTES] ?? undefined;
        item.offset += FRAME_BYTES;
        if (item.offset >= item.data.length) this.queue.shift();
        this.audioFrames--;
        if (keys) this.sink.sendFrame(frame, true, key);
        else this.sink.sendFrame(background ? background.mix(frame) : frame, true);
        this.stats.framesSent++;
        this.playhead += FRAME_MS;
        continue;
      }
      // nothing of speech may go now: the background alone fills the gap, a little ahead
      if (background && (this.paused || this.queue.length === 0) && this.playhead < now + BACKGROUND_LEAD_MS) {
        this.sink.sendFrame(background.next(), false);
        this.stats.framesSent++;
        this.playhead += FRAME_MS;
        continue;
      }
      break;
    }
    if (this.stats.framesSent !== sentBefore) this.sink.flush?.();
    // marks right behind the last frame go out at once
    while (!this.paused && this.queue[0]?.kind === 'mark') {
      this.sink.sendMark((this.queue.shift() as { name: string }).name);
    }
    this.backlogged = this.audioFrames > 0;
    if (this.queue.length === 0 && this.unsubscribe && !background) {
      this.unsubscribe();
      this.unsubscribe = null;
    }
  }
}
