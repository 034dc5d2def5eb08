/**
 * The trunk guard: which sources may have their INVITEs looked at. A source whose INVITEs keep
 * being refused (a scanner, a misconfigured trunk) or keep drawing digest challenges it never
 * answers (a spoofed source address) is shunned for a while, a source not known as a trunk has a
 * cap on INVITEs being decided at once, and a source whose INVITE was taken is a trunk, never
 * shunned for an hour. It keeps only per-address counts; the INVITE handling asks it before any
 * lookup and tells it what was refused, challenged and taken.
 */
import type { Logger } from 'pino';

/** A source with this many INVITEs refused (unknown number, source or credentials) within the window… */
const REFUSALS_BEFORE_SHUNNING = 50;
const REFUSAL_WINDOW_MS = 10_000;
/** …has its INVITEs dropped unanswered for this long. */
const SHUN_MS = 60_000;
/** INVITEs of one source not known as a trunk being decided at once; more are dropped. */
const MAX_INFLIGHT_UNTRUSTED = 20;
/** A source whose INVITE was taken within this long is never shunned. */
const TRUSTED_MS = 60 * 60_000;
/**
 * A source not known as a trunk that drew this many digest challenges (401) within the window is
 * shunned as well: a 401 goes to wherever the INVITE claims to come from, so unanswered challenges
 * are a reflection toward a spoofed address. A trunk answers its first challenge and is trusted.
 */
const CHALLENGES_BEFORE_SHUNNING = 50;
const CHALLENGE_WINDOW_MS = 60_000;
/** Sources tracked at once, for refusals and for trust (the oldest go first). */
const MAX_TRACKED_SOURCES = 10_000;

export class TrunkGuard {
  /** Refused INVITEs per source address, and until when a source is not heard (`shunned`). */
  private readonly refusals = new Map<string, { since: number; count: number; until: number }>();
  /** Sources whose INVITEs were taken (allowed, or authenticated), and when last: never shunned. */
  private readonly trusted = new Map<string, number>();
  /** INVITEs being decided (looked up, authenticated, opened), per source. */
  private readonly inflight = new Map<string, number>();
  /** Digest challenges sent per source not known as a trunk, since when. */
  private readonly challenges = new Map<string, { since: number; count: number }>();

  constructor(private readonly log: Logger) {}

  /**
   * A source whose INVITEs keep being refused (a scanner, a misconfigured trunk) is not heard
   * for a while: its INVITEs are dropped unanswered, so that a flood costs no lookups.
   */
  shunned(address: string, now = Date.now()): boolean {
    const entry = this.refusals.get(address);
    return !!entry && entry.until > now;
  }

  /** A source not known as a trunk has at most this many INVITEs being looked up at once. */
  tooMany(address: string, now = Date.now()): boolean {
    const trusted = this.trusted.get(address);
    if (trusted !== undefined && now - trusted < TRUSTED_MS) return false;
    return (this.inflight.get(address) ?? 0) >= MAX_INFLIGHT_UNTRUSTED;
  }

  /** An INVITE of `address` is being decided… */
  enter(address: string): void {
    this.inflight.set(address, (this.inflight.get(address) ?? 0) + 1);
  }

  /** …and is decided. */
  leave(address: string): void {
    const n = (this.inflight.get(address) ?? 1) - 1;
    if (n > 0) this.inflight.set(address, n);
    else this.inflight.delete(address);
  }

  noteRefusal(address: string, now = Date.now()): void {
    // a source whose calls were taken lately is a trunk: its refusals (a robocall burst to a
    // released number, one customer's wrong settings, a spoofed flood) never shun the others' calls
    const trusted = this.trusted.get(address);
    if (trusted !== undefined && now - trusted < TRUSTED_MS) return;
    let entry = this.refusals.get(address);
    if (!entry || now - entry.since > REFUSAL_WINDOW_MS) {
      this.refusals.delete(address);
      if (this.refusals.size >= MAX_TRACKED_SOURCES) this.refusals.delete(this.refusals.keys().next().value!);
      entry = { since: now, count: 0, until: 0 };
      this.refusals.set(address, entry);
    }
    if (++entry.count >= REFUSALS_BEFORE_SHUNNING && entry.until <= now) {
      entry.until = now + SHUN_MS;
      this.log.warn({ source: address, refused: entry.count, seconds: SHUN_MS / 1000 }, 'a source keeps sending INVITEs that are refused: its INVITEs are dropped for a while');
    }
  }

  /** A 401 went to `address`: past the limit of challenges in the window, the source is shunned. */
  noteChallenge(address: string, now = Date.now()): void {
    const trusted = this.trusted.get(address);
    if (trusted !== undefined && now - trusted < TRUSTED_MS) return;
    let entry = this.challenges.get(address);
    if (!entry || now - entry.since > CHALLENGE_WINDOW_MS) {
      this.challenges.delete(address);
      if (this.challenges.size >= MAX_TRACKED_SOURCES) this.challenges.delete(this.challenges.keys().next().value!);
      entry = { since: now, count: 0 };
      this.challenges.set(address, entry);
    }
    if (++entry.count < CHALLENGES_BEFORE_SHUNNING) return;
    this.challenges.delete(address);
    if (this.shunned(address, now)) return;
    this.refusals.delete(address);
    if (this.refusals.size >= MAX_TRACKED_SOURCES) this.refusals.delete(this.refusals.keys().next().value!);
    this.refusals.set(address, { since: now, count: 0, until: now + SHUN_MS });
    this.log.warn({ source: address, challenged: CHALLENGES_BEFORE_SHUNNING, seconds: SHUN_MS / 1000 }, 'a source keeps drawing digest challenges it never answers: its INVITEs are dropped for a while');
  }

  /** A source whose INVITE was taken: it is a trunk, never shunned for a while. */
  trust(address: string): void {
    this.trusted.delete(address);
    if (this.trusted.size >= MAX_TRACKED_SOURCES) this.trusted.delete(this.trusted.keys().next().value!);
    this.trusted.set(address, Date.now());
    this.refusals.delete(address);
    this.challenges.delete(address);
  }
}
