/**
 * Audio out, with one contract for every transport and both backends: each utterance (a line, a
 * model's reply, a realtime response) pushes its audio tagged with itself, progress marks say
 * where it stands, and the playout tells its owner "played up to position P of utterance U" as
 * the far end plays it, then once "finished at P, interrupted or not". A `clear` drops what the
 * far end has not played, and every open utterance is back at what was played of it.
 *
 * Each mark goes out with the time its audio will have played at the far end (the pacer's
 * playhead); an echo (Twilio's `mark`, the browser's echo, SIP's timer: docs/transports.md)
 * settles it. At the end of a call, the marks whose time has passed count as played: a far end
 * that never echoes (a browser that does not, a caller who hangs up before the echoes came) still
 * has what it heard in the transcript.
 *
 * What was heard of an utterance, in words, is computed in one place (`heardText`) for both
 * backends, from its segments (a pipeline's sentences, a realtime response's transcript) and the
 * position played.
 */
import type { KeyFrame } from './keypad.js';
import type { OutboundPacer } from './outbound.js';

/** How an utterance ended for the caller: played up to `positionMs`, whole or cut. */
export interface PlaybackFinished {
  positionMs: number;
  /** Stopped before its end (cut, cleared, dropped, or the call ended first). */
  interrupted: boolean;
}

/** What the owner of an utterance is told. Both run synchronously, at the moment it happens. */
export interface UtteranceListener {
  /** Played up to `positionMs` of its audio (an echo, or the clock at the end). */
  progress?(positionMs: number): void;
  /** Over, once: played to the end of its last audio, or stopped. */
  finished?(event: PlaybackFinished): void;
  /**
   * A `clear` dropped audio of it the far end had not played (it is back at what was played):
   * its owner pushes the rest again, or stops it. Runs after the clear, synchronously.
   */
  cleared?(): void;
}

/** One utterance's audio, on its own timeline (ms of its audio, from 0). */
export class PlayoutUtterance {
  /** Where the next audio pushed goes. A `clear` sets it back to `playedMs`. */
  pushedMs = 0;
  /** Played up to here, by the far end's echoes (or the clock at the end of the call). */
  playedMs = 0;
  /** Marks out for it and not yet played or dropped. */
  pending = 0;
  /** Its first audio went out. */
  audioStarted = false;
  /** Its owner has pushed everything: it finishes once that has played. */
  ended = false;
  finished = false;

  constructor(
    readonly id: string,
    readonly listener: UtteranceListener,
  ) {}
}

export interface PlayoutEvents {
  /** An utterance's first audio went to the pacer (the turn clock: the reply has begun). */
  audioStarted?(utterance: PlayoutUtterance): void;
}

interface Mark {
  utterance: PlayoutUtterance;
  positionMs: number;
  /** When its audio will have played at the far end (the clock's ms); null until the pacer sends it. */
  playedAt: number | null;
}

export class Playout {
  /** Marks out, in the order they were made. */
  private readonly marks = new Map<string, Mark>();
  /** Utterances begun and not finished. */
  private readonly open = new Set<PlayoutUtterance>();
  private seq = 0;
  private readonly listeners: PlayoutEvents[] = [];

  constructor(private readonly pacer: OutboundPacer) {}

  /** Someone else hears of the playout's events (the turn clock). */
  listen(events: PlayoutEvents): void {
    this.listeners.push(events);
  }

  /** A new utterance; its owner is told its progress and its end. */
  begin(listener: UtteranceListener = {}): PlayoutUtterance {
    const u = new PlayoutUtterance(`p${++this.seq}`, listener);
    this.open.add(u);
    return u;
  }

  /**
   * Audio of `u` (μ-law 8 kHz) for the caller. `keys`: whole frames of a key press, each tagged
   * with its key or null (src/calls/keypad.ts), for a transport that sends keys its own way.
   */
  push(u: PlayoutUtterance, mulaw: Buffer, keys?: readonly (KeyFrame | null)[]): void {
    if (u.finished || mulaw.length === 0) return;
    if (!u.audioStarted) {
      u.audioStarted = true;
      for (const l of this.listeners) l.audioStarted?.(u);
    }
    this.pacer.push(mulaw, keys);
    u.pushedMs += mulaw.length / 8;
  }

  /** A progress mark after the audio of `u` pushed so far. */
  mark(u: PlayoutUtterance): void {
    if (u.finished) return;
    const name = `${u.id}.${++this.seq}`;
    this.marks.set(name, { utterance: u, positionMs: u.pushedMs, playedAt: null });
    u.pending++;
    this.pacer.mark(name);
  }

  /** Everything of `u` is pushed (and marked): it finishes once played. */
  end(u: PlayoutUtterance): void {
    if (u.finished) return;
    u.ended = true;
    this.finishIfPlayed(u);
  }

  /** `u` stops where it was played (its owner clears the far end when it must). */
  stop(u: PlayoutUtterance): void {
    if (u.finished) return;
    for (const [name, m] of this.marks) if (m.utterance === u) this.marks.delete(name);
    u.pending = 0;
    this.finish(u, true);
  }

  /**
   * Drops what the far end has not played. The marks out are dropped (their echoes come back as
   * echoes of the clear, not as played), and every open utterance is back at what was played of
   * it: its owner pushes the rest again, or stops it.
   */
  clear(): void {
    this.pacer.clear();
    this.marks.clear();
    const dropped: PlayoutUtterance[] = [];
    for (const u of this.open) {
      u.pending = 0;
      if (u.pushedMs > u.playedMs) {
        u.pushedMs = u.playedMs;
        u.ended = false;
        dropped.push(u);
      }
    }
    for (const u of dropped) if (!u.finished) u.listener.cleared?.();
  }

  /** The pacer sent the mark `name`: the audio before it plays at `playedAt` (the clock's ms). */
  sent(name: string, playedAt: number): void {
    const m = this.marks.get(name);
    if (m) m.playedAt = playedAt;
  }

  /** The far end played the audio before the mark `name` (or the transport counts it as played). */
  echoed(name: string): void {
    const m = this.marks.get(name);
    if (!m) return;
    this.marks.delete(name);
    const u = m.utterance;
    u.pending--;
    if (m.positionMs > u.playedMs) {
      u.playedMs = m.positionMs;
      u.listener.progress?.(u.playedMs);
    }
    this.finishIfPlayed(u);
  }

  /** The end of the call: the marks whose audio has played by `now` count as played, in order. */
  settleDue(now: number): void {
    for (const [name, m] of this.marks) {
      if (m.playedAt === null || m.playedAt > now) break;
      this.echoed(name);
    }
  }

  /** Nothing more goes out; the pacer stops. Utterances still open are their owners' to stop. */
  close(): void {
    this.pacer.close();
  }

  private finishIfPlayed(u: PlayoutUtterance): void {
    if (u.ended && u.pending === 0 && !u.finished) this.finish(u, false);
  }

  private finish(u: PlayoutUtterance, interrupted: boolean): void {
    u.finished = true;
    this.open.delete(u);
    u.listener.finished?.({ positionMs: u.playedMs, interrupted });
  }
}

/** A piece of an utterance's text and where its audio ends on the utterance's timeline. */
export interface Segment {
  text: string;
  endMs: number;
}

/**
 * The words the caller heard of an utterance played up to `positionMs`: every segment whose audio
 * played to its end, and of the segment the position falls in, the share of its words its played
 * audio covers (whole words only). A pipeline's segments are its sentences, each followed by a
 * mark (so the position is always at a sentence's end: a sentence is heard whole or not at all);
 * a realtime response is one segment, marked every 100 ms.
 */
export function heardText(segments: readonly Segment[], positionMs: number): string {
  const heard: string[] = [];
  let start = 0;
  for (const s of segments) {
    if (s.endMs <= positionMs) {
      heard.push(s.text.trim());
    } else {
      const part = heardShare(s.text, positionMs - start, s.endMs - start);
      if (part) heard.push(part);
      break;
    }
    start = s.endMs;
  }
  return heard.filter((t) => t !== '').join(' ');
}

/** The words of `text` the caller heard when `heardMs` of its `totalMs` of audio were played. */
export function heardShare(text: string, heardMs: number, totalMs: number): string {
  const t = text.trim();
  if (totalMs <= 0 || heardMs <= 0) return '';
  if (heardMs >= totalMs) return t;
  const cut = Math.floor((t.length * heardMs) / totalMs);
  const head = t.slice(0, cut);
  const whole = /\s/.test(t[cut] ?? ' ') ? head : head.slice(0, Math.max(0, head.lastIndexOf(' ')));
  return whole.trim();
}
