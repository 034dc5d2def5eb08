/**
 * How much audio a browser may send (docs/web-calls.md): real time, 16 kHz 16-bit mono, with
 * 5 s of slack for a stall that a browser catches up on (a longer one ends the call: 5 s without
 * audio is a browser gone). A frame beyond that is dropped (it never
 * reaches the call); a browser whose dropped audio adds up to 30 s is not a microphone, and its
 * socket is closed. What a browser sending 3,000× real time costs is bounded by this.
 */
import { WEB_SAMPLE_RATE } from './protocol.js';

/** Bytes of audio a second of real time carries. */
export const AUDIO_BYTES_PER_SECOND = WEB_SAMPLE_RATE * 2;
/** Audio a browser may send ahead of real time (a stall caught up on). */
export const AUDIO_SLACK_SECONDS = 5;
/** Dropped audio past which the socket is closed. */
export const DROPPED_AUDIO_CLOSE_SECONDS = 30;

export type AudioVerdict = 'take' | 'drop' | 'close';

export class AudioBudget {
  private readonly capacity = AUDIO_SLACK_SECONDS * AUDIO_BYTES_PER_SECOND;
  private available = this.capacity;
  private last: number;
  private dropped = 0;
  private lastTold = -Infinity;

  /** `now`: a monotonic clock in milliseconds. */
  constructor(private readonly now: () => number) {
    this.last = now();
  }

  /** What to do with a frame of `bytes`: take it, drop it, or close the socket. */
  frame(bytes: number): AudioVerdict {
    const now = this.now();
    this.available = Math.min(this.capacity, this.available + ((now - this.last) / 1000) * AUDIO_BYTES_PER_SECOND);
    this.last = now;
    if (bytes <= this.available) {
      this.available -= bytes;
      return 'take';
    }
    this.dropped += bytes;
    return this.dropped > DROPPED_AUDIO_CLOSE_SECONDS * AUDIO_BYTES_PER_SECOND ? 'close' : 'drop';
  }

  /** True at most once a second: whether a drop is worth telling the browser about now. */
  tellNow(): boolean {
    const now = this.now();
    if (now - this.lastTold < 1000) return false;
    this.lastTold = now;
    return true;
  }
}

export const DROPPED_MESSAGE = `audio arrives faster than real time (${WEB_SAMPLE_RATE} Hz): frames more than ${AUDIO_SLACK_SECONDS} s ahead are dropped`;
export const CLOSE_REASON = 'audio far faster than real time';
