/**
 * A realtime model's responses as the caller hears them: each one we asked for (a line, a reply)
 * or that the model's server VAD started, its output items, and its audio in the playout (one
 * utterance per response: how far the caller played it), from which the words heard and each
 * item's heard audio (for truncation) are read.
 */
import { heardText, type PlayoutUtterance } from '../playout.js';

/** One output item of the model (audio): where it starts on its response's playout timeline, and how much of it went out. */
export interface OutputItem {
  id: string;
  startMs: number;
  /** Audio (ms) handed to the playout. */
  pushedMs: number;
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
  /** Its audio, as the caller plays it. */
  playout: PlayoutUtterance;
  /** Audio short of a whole frame, waiting for more. */
  remainder: Buffer;
  sinceMarkMs: number;
  /** Its audio waits for the caller's words (a reply to a sound that may be a noise: caller-turns.ts). */
  held: boolean;
  /** The audio held, in order, with its item ids; and whether the response ended meanwhile. */
  heldAudio: Array<[Buffer, string]>;
  heldDone: boolean;
  /** A reply to a noise dropped unheard: the output items the vendor was asked to forget (null: not one). */
  forget: string[] | null;
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

export function newSpoken(kind: Spoken['kind'], text: string, interruptible: boolean, nodeId: string | null, playout: PlayoutUtterance): Spoken {
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
    playout,
    remainder: Buffer.alloc(0),
    sinceMarkMs: 0,
    held: false,
    heldAudio: [],
    heldDone: false,
    forget: null,
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
  // all the audio that went out (the playout's own position goes back to what was played at a clear)
  const pushedMs = s.items.reduce((ms, i) => ms + i.pushedMs, 0);
  // A response with no audio said nothing, whatever its text.
  if (pushedMs === 0) return '';
  return heardText([{ text: basis, endMs: pushedMs }], complete ? pushedMs : s.playout.playedMs);
}

/** The audio (ms) of `item` the caller heard: what of its response was played, within the item. */
export function heardMsOf(s: Spoken, item: OutputItem): number {
  return Math.min(item.pushedMs, Math.max(0, s.playout.playedMs - item.startMs));
}
