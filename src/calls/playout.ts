/**
 * What the caller has played of our audio, by the clock, whatever the transport: each progress
 * mark goes out with the time its audio will have played at the far end (the pacer's playhead),
 * an echo or a `clear` settles it, and at the end of the call the marks whose time has passed
 * count as played. A far end that never echoes (a browser that does not, a caller who hangs up
 * before the echoes came) still has what it heard in the transcript.
 */
export class Playout {
  /** Marks sent and neither echoed nor cleared, in the order sent, with when their audio has played. */
  private readonly pending = new Map<string, number>();

  /** The mark `name` went out; the audio before it will have played at `playedAt` (the clock's ms). */
  sent(name: string, playedAt: number): void {
    this.pending.set(name, playedAt);
  }

  /** The far end echoed `name` (or the transport counts it as played). */
  echoed(name: string): void {
    this.pending.delete(name);
  }

  /** The far end dropped what it had not played: the marks out now come back as echoes of the clear, not as played. */
  cleared(): void {
    this.pending.clear();
  }

  /** The marks whose audio has played by `now`, in order; they are no longer pending. */
  due(now: number): string[] {
    const out: string[] = [];
    for (const [name, playedAt] of this.pending) {
      if (playedAt > now) break;
      out.push(name);
      this.pending.delete(name);
    }
    return out;
  }
}
