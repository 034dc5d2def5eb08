/**
 * One timer for the process that checks every open media stream (is its far end still there,
 * has a progress mark gone unanswered too long), instead of a timer per stream.
 */

import type { WebSocket } from 'ws';
import type { ActiveCall } from '../calls/active-call.js';

/** When a media stream counts as gone; the defaults suit Twilio Media Streams (docs/calls.md). */
export interface MediaLiveness {
  /** No media frame for this long: the stream is gone (carriers send silence as frames too). */
  idleMs: number;
  /** A ping goes out this often; one not answered by the next means the stream is gone. */
  pingMs: number;
  /** A mark not answered this long after it was sent counts as played (the far end may never say). */
  markGraceMs: number;
  /** How often every stream is checked. */
  checkMs: number;
}

export const DEFAULT_MEDIA_LIVENESS: MediaLiveness = { idleMs: 5_000, pingMs: 10_000, markGraceMs: 3_000, checkMs: 500 };

export class StreamWatcher {
  private readonly checks = new Set<(now: number) => void>();
  private timer: NodeJS.Timeout | null = null;

  constructor(readonly liveness: MediaLiveness = DEFAULT_MEDIA_LIVENESS) {}

  /** Runs `check` every `checkMs` until the returned function is called. */
  watch(check: (now: number) => void): () => void {
    this.checks.add(check);
    if (!this.timer) {
      this.timer = setInterval(() => {
        const now = performance.now();
        for (const c of this.checks) c(now);
      }, this.liveness.checkMs);
      this.timer.unref();
    }
    return () => {
      this.checks.delete(check);
      if (this.checks.size === 0 && this.timer) {
        clearInterval(this.timer);
        this.timer = null;
      }
    };
  }

  close(): void {
    this.checks.clear();
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }
}

/**
 * Progress marks a transport sent and the far end has not answered yet, oldest first: the ones
 * older than the grace count as played, so that nothing waits forever on an answer that may never come.
 */
export class PendingMarks {
  private readonly pending: Array<{ name: string; sentAt: number }> = [];

  sent(name: string, now = performance.now()): void {
    this.pending.push({ name, sentAt: now });
  }

  /** The far end answered `name`: true when it was pending (not already counted as played). */
  answered(name: string): boolean {
    const i = this.pending.findIndex((p) => p.name === name);
    if (i < 0) return false;
    this.pending.splice(i, 1);
    return true;
  }

  /** Marks overdue at `now`, removed. */
  overdue(now: number, graceMs: number): string[] {
    const out: string[] = [];
    while (this.pending.length > 0 && now - this.pending[0]!.sentAt > graceMs) out.push(this.pending.shift()!.name);
    return out;
  }
}

export interface StreamMonitorEvents {
  /** The far end is gone (no media, a ping unanswered): the transport ends the stream. */
  gone(why: string): void;
  /** A mark's audio counts as played: its echo never came within the grace. */
  played(name: string): void;
  /** The first mark assumed played on this stream (the far end may not echo marks at all). */
  firstAssumed(): void;
}

/**
 * One media stream's liveness, as the transport's `check` sees it every `checkMs`: no media for
 * `idleMs`, a WebSocket ping not answered by the next one, marks whose echo is overdue.
 */
export class StreamMonitor {
  private lastMediaAt = performance.now();
  private lastPingAt = this.lastMediaAt;
  private pongDue = false;
  private marksAssumed = false;

  constructor(
    private readonly liveness: MediaLiveness,
    private readonly marks: PendingMarks,
    private readonly ping: () => void,
    private readonly on: StreamMonitorEvents,
  ) {}

  /** The stream's call started: the clocks start now. */
  started(now = performance.now()): void {
    this.lastMediaAt = now;
    this.lastPingAt = now;
  }

  media(now = performance.now()): void {
    this.lastMediaAt = now;
  }

  pong(): void {
    this.pongDue = false;
  }

  check(now: number): void {
    if (now - this.lastMediaAt > this.liveness.idleMs) {
      return this.on.gone(`no media from the far end for ${Math.round((now - this.lastMediaAt) / 1000)} s`);
    }
    if (now - this.lastPingAt >= this.liveness.pingMs) {
      if (this.pongDue) return this.on.gone('the far end stopped answering WebSocket pings');
      this.pongDue = true;
      this.lastPingAt = now;
      this.ping();
    }
    // playback progress must not hang on an echo that never comes (silence checks wait for it)
    for (const name of this.marks.overdue(now, this.liveness.markGraceMs)) {
      if (!this.marksAssumed) {
        this.marksAssumed = true;
        this.on.firstAssumed();
      }
      this.on.played(name);
    }
  }
}

/** Runs the call's own code for a socket event: what it throws ends that call, never the process. */
export interface CallRunner {
  (what: string, fn: (call: ActiveCall) => void): void;
  /** The caller's audio, fifty frames a second on every call: handed on without a closure each. */
  audio(frame: Buffer): void;
}

const hear = (call: ActiveCall, frame: Buffer) => call.audio(frame);

/** A `CallRunner` on whichever call `current()` gives (nothing while there is none yet). */
export function callRunner(current: () => ActiveCall | null): CallRunner {
  const run = <A>(what: string, fn: (call: ActiveCall, arg: A) => void, arg: A) => {
    const call = current();
    if (!call) return;
    try {
      fn(call, arg);
    } catch (err) {
      call.fail(err, what);
    }
  };
  const toCall = ((what: string, fn: (call: ActiveCall) => void) => run(what, fn, undefined)) as CallRunner;
  toCall.audio = (frame) => run('caller audio', hear, frame);
  return toCall;
}

/**
 * The `StreamMonitor` of a call's WebSocket: gone means the watch stops, the socket is
 * terminated and the call hears `farEndGone`; an overdue mark counts as played.
 */
export function socketMonitor(o: {
  ws: WebSocket;
  liveness: MediaLiveness;
  marks: PendingMarks;
  toCall: CallRunner;
  stopWatching: () => void;
  /** The first mark assumed played (the far end may not echo marks at all). */
  firstAssumed: () => void;
}): StreamMonitor {
  return new StreamMonitor(o.liveness, o.marks, () => o.ws.ping(), {
    gone: (why) => {
      o.stopWatching();
      o.ws.terminate();
      o.toCall('far end gone', (c) => c.farEndGone(why));
    },
    played: (name) => o.toCall('mark', (c) => c.played(name)),
    firstAssumed: o.firstAssumed,
  });
}
