/**
 * A realtime model's responses as the caller hears them: each one we asked for (a line, a reply)
 * or that the model's server VAD started, its output items, how much of each was pushed and how
 * much heard (from echoed marks), and the words heard when it is over.
 */

/** One output item of the model (audio), as far as it has gone out and been heard. */
export interface OutputItem {
  id: string;
  /** Audio (ms) handed to the pacer. */
  pushedMs: number;
  /** Audio (ms) the caller has heard (from echoed marks). */
  heardMs: number;
}

/** One model response as the caller hears it: a line the controller asked for, or the model's reply. */
export interface Spoken {
  kind: 'say' | 'reply';
  /** `say`: the line as the controller gave it. */
  text: string;
  /** The model's transcript of its audio (whole text so far). */
  transcript: string;
  nodeId: string | null;
  interruptible: boolean;
  /** When it was asked for (performance.now()). */
  requestedAt: number;
  /** Started by server VAD (the caller's turn), not by us. */
  vad: boolean;
  state: 'requested' | 'streaming' | 'streamed';
  items: OutputItem[];
  /** Marks sent and not yet echoed. */
  marks: Set<string>;
  /** Audio short of a whole frame, waiting for more. */
  remainder: Buffer;
  sinceMarkMs: number;
  /** Cut by barge-in (or never said); its remaining events are dropped. */
  cut: boolean;
  /** A model's silence check-in: the line said instead when it says nothing (null: not one, or cut by the caller). */
  fallback: string | null;
  /** A check-in the vendor failed (noted in the record when the fallback is said). */
  failure: Error | null;
  settled: boolean;
  /** `say`: told what was heard once it is over. */
  over: ((text: string, complete: boolean) => void) | null;
}

export function newSpoken(kind: Spoken['kind'], text: string, interruptible: boolean, nodeId: string | null): Spoken {
  return {
    kind,
    text,
    transcript: '',
    nodeId,
    interruptible,
    requestedAt: performance.now(),
    vad: false,
    state: 'requested',
    items: [],
    marks: new Set(),
    remainder: Buffer.alloc(0),
    sinceMarkMs: 0,
    cut: false,
    fallback: null,
    failure: null,
    settled: false,
    over: null,
  };
}

/** The words the caller heard of `s`, once it is over (`complete`: played whole). */
export function heardOf(s: Spoken, complete: boolean): string {
  const basis = s.kind === 'say' ? s.text : s.transcript;
  const pushed = s.items.reduce((ms, i) => ms + i.pushedMs, 0);
  const heardMs = s.items.reduce((ms, i) => ms + i.heardMs, 0);
  // A response with no audio said nothing, whatever its text.
  return pushed === 0 ? '' : complete ? basis.trim() : heardShare(basis, heardMs, pushed);
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
