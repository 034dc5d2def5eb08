/**
 * What the vendor-fault tests need beside the calling server: the errors that escape to the
 * process (unhandled rejections, uncaught exceptions), and how on time a call's frames arrived.
 */

export interface ProcessError {
  kind: 'unhandledRejection' | 'uncaughtException';
  error: unknown;
}

export interface ProcessErrors {
  /** The errors seen since the last `take`, oldest first (and forgets them). */
  take(): ProcessError[];
  /** Stops listening; returns what was never taken. */
  dispose(): ProcessError[];
}

/**
 * Listens for errors that reach the process. In production each of them stops the server (Node's
 * default for an unhandled rejection is to throw). NOTE: while this listens, vitest no longer
 * reports them itself (it leaves them to a file's own listener): the test must `take` them and fail.
 */
export function watchProcessErrors(): ProcessErrors {
  let seen: ProcessError[] = [];
  const onRejection = (error: unknown) => seen.push({ kind: 'unhandledRejection', error });
  const onException = (error: unknown) => seen.push({ kind: 'uncaughtException', error });
  process.on('unhandledRejection', onRejection);
  process.on('uncaughtException', onException);
  return {
    take() {
      const out = seen;
      seen = [];
      return out;
    },
    dispose() {
      process.off('unhandledRejection', onRejection);
      process.off('uncaughtException', onException);
      const out = seen;
      seen = [];
      return out;
    },
  };
}

/** One line per error: kind, name, code, message, then the head of its stack. */
export function describeProcessErrors(errors: ProcessError[], stackLines = 8): string {
  return errors
    .map(({ kind, error }) => {
      const e = error as { name?: string; code?: string; message?: string; stack?: string };
      const head = `${kind}: ${e?.name ?? typeof error}${e?.code ? ` [${e.code}]` : ''}: ${e?.message ?? String(error)}`;
      const stack = (e?.stack ?? '').split('\n').slice(1, stackLines + 1).map((l) => `    ${l.trim()}`);
      return [head, ...stack].join('\n');
    })
    .join('\n');
}

export interface FrameTiming {
  frames: number;
  /** Runs of frames with no gap over `spurtGapMs`: one per thing the assistant said. */
  spurts: number;
  /** The longest gap (ms) between two frames of one spurt. */
  worstGapMs: number;
  /** The longest silence (ms) the caller heard inside one spurt: a frame that came after its turn to play. */
  worstUnderrunMs: number;
  /** Underruns longer than `maxUnderrunMs`, as `<ms> ms before frame <i>`. */
  underruns: string[];
}

/**
 * How on time the assistant's frames reached the caller, as the far end plays them: each frame
 * plays for 20 ms, after the one before it; a frame that arrives after its turn to play leaves the
 * caller a silence (an underrun) until it comes. The pacer sends a 20 ms frame every 20 ms and keeps
 * a small lead (60 ms), so a healthy line never underruns by more than a tick's jitter; an event
 * loop held up longer than the lead shows as an underrun. A gap over `spurtGapMs` starts a new
 * spurt (the assistant was quiet); a stall that long inside one line shows as a spurt too many.
 */
export function frameTiming(
  times: readonly number[],
  options: { maxUnderrunMs: number; spurtGapMs: number; frameMs?: number },
): FrameTiming {
  const frameMs = options.frameMs ?? 20;
  let spurts = 0;
  let worstGapMs = 0;
  let worstUnderrunMs = 0;
  const underruns: string[] = [];
  /** When the frame arriving now would start to play at the far end. */
  let playhead = 0;
  for (let i = 0; i < times.length; i++) {
    const at = times[i]!;
    const gap = i === 0 ? Infinity : at - times[i - 1]!;
    if (gap > options.spurtGapMs) {
      spurts++;
      playhead = at;
    } else {
      worstGapMs = Math.max(worstGapMs, gap);
      if (at > playhead) {
        const underrun = at - playhead;
        worstUnderrunMs = Math.max(worstUnderrunMs, underrun);
        if (underrun > options.maxUnderrunMs) underruns.push(`${underrun} ms before frame ${i}`);
        playhead = at;
      }
    }
    playhead += frameMs;
  }
  return { frames: times.length, spurts, worstGapMs, worstUnderrunMs, underruns };
}

/**
 * A port on 127.0.0.1 that a connection is always refused at. Port 1 is below the ephemeral range
 * and needs root to listen on, so no server a test starts (in this file or a parallel one) can take
 * it. A port from `freePort()` cannot promise that: between its close and the first connection the
 * OS may hand it to another test's server, and the connection then times out instead of failing.
 */
export const REFUSED_PORT = 1;
