/**
 * The clock of a caller's turn: when it ended, when the model was asked, its first token, when it
 * had what the first audio needs, the TTS request and its first audio, and the first frame of the
 * reply to leave, which closes the turn and reports its latency (`TurnLatency`, latency.ts).
 *
 * One turn is pending at a time: a caller's turn that ends replaces the one before, a caller who
 * starts speaking again abandons it (`cancel`), and its first reply frame closes it. Each mark is
 * kept once, the first time it comes (later ones are ignored), and only on its own turn: a model
 * run or a TTS session holds the turn it was started for (`modelRequested`, `ttsRequested` return
 * it) and marks that one, so a run the caller has moved on from marks no newer turn. A backend
 * only says what happened; both (pipeline, realtime) use it alike.
 *
 * With no `onTurnLatency` nobody reads the figures: no turn is kept, every mark is a no-op, and the
 * TTS is not timed (`ttsRequested` gives no turn).
 */
import { splitTurnLatency, type TurnLatency, type TurnMarks } from './latency.js';
import type { PacerStats } from './outbound.js';

/** What the backend knows of the end of a caller's turn (performance.now() ms). */
export interface TurnEndDetail {
  speechEndedAt?: number | null;
  transcribedAt?: number | null;
}

/** The marks of the caller's turn whose first reply frame has not left yet. */
export interface PendingTurn extends Omit<TurnMarks, 'firstFrameAt'> {
  /** The node the caller spoke in. */
  nodeId: string | null;
  /** The reply's first audio went to the pacer: the next frame out closes the turn. */
  audioStarted: boolean;
}

/** A turn as what was started for it (a model run, a TTS session) holds it: read-only. */
export type TurnRef = Readonly<PendingTurn>;

export interface TurnClockOptions {
  callId: string;
  /** Where a closed turn is reported; without it nothing is kept. */
  onTurnLatency?: ((latency: TurnLatency) => void) | undefined;
  /** A caller's turn ended and its clock started (the browser of a web call is told). */
  onTurnBegin?: ((nodeId: string | null, at: number, detail: TurnEndDetail) => void) | undefined;
  /** The pending turn was dropped unreported (the caller spoke again, or a newer turn replaced it). */
  onTurnDropped?: (() => void) | undefined;
  /** The call's outbound audio so far (the pacer's stats), read as a turn closes. */
  outbound: () => PacerStats;
  /** `performance.now()` unless a test gives its own. */
  now?: () => number;
}

export class TurnClock {
  private turn: PendingTurn | null = null;
  private readonly now: () => number;

  constructor(private readonly o: TurnClockOptions) {
    this.now = o.now ?? (() => performance.now());
  }

  /** Someone reads the figures: the call times its turns (and wraps its TTS to do so). */
  get reporting(): boolean {
    return this.o.onTurnLatency !== undefined;
  }

  /** The turn waiting for its first reply frame, as it stands (a live view: marks keep coming). */
  get pending(): TurnRef | null {
    return this.turn;
  }

  /**
   * A caller's turn ended (at `at`): it is the pending turn now, in place of any before it.
   * `detail`: when the caller's speech ended and its last words were transcribed, where known.
   */
  begin(nodeId: string | null, at: number = this.now(), detail: TurnEndDetail = {}): void {
    if (!this.reporting) return;
    if (this.turn) this.o.onTurnDropped?.();
    this.turn = {
      speechEndedAt: detail.speechEndedAt ?? null,
      transcribedAt: detail.transcribedAt ?? null,
      endOfTurnAt: at,
      nodeId,
      modelRequestedAt: null,
      firstTokenAt: null,
      modelReadyAt: null,
      ttsRequestedAt: null,
      ttsFirstAudioAt: null,
      audioStarted: false,
    };
    this.o.onTurnBegin?.(nodeId, at, detail);
  }

  /** The caller speaks again before a reply was heard: the pending turn is dropped, unreported. */
  cancel(): void {
    if (this.turn) this.o.onTurnDropped?.();
    this.turn = null;
  }

  /**
   * The model is asked: the pending turn's first request (at `at`). Returns the turn the run's
   * later marks go to; `null` when there is none or its model was asked already (the run then
   * marks nothing).
   */
  modelRequested(at: number = this.now()): TurnRef | null {
    const turn = this.turn;
    if (turn?.modelRequestedAt !== null) return null;
    turn.modelRequestedAt = at;
    return turn;
  }

  /** The model's first token (text or a function call), on `turn` (the pending turn by default). */
  firstToken(turn: TurnRef | null = this.turn): void {
    const t = this.own(turn);
    if (t) t.firstTokenAt ??= this.now();
  }

  /** The model delivered what the first audio needs, on `turn` (the pending turn by default). */
  modelReady(turn: TurnRef | null = this.turn): void {
    const t = this.own(turn);
    if (t) t.modelReadyAt ??= this.now();
  }

  /**
   * The turn's first TTS request. Returns the turn that session's first audio goes to; `null`
   * when there is none, it asked its TTS already, or nobody reads the figures.
   */
  ttsRequested(): TurnRef | null {
    const turn = this.turn;
    if (turn?.ttsRequestedAt !== null) return null;
    turn.ttsRequestedAt = this.now();
    return turn;
  }

  /** The first audio of the TTS session started for `turn`. */
  ttsFirstAudio(turn: TurnRef | null): void {
    const t = this.own(turn);
    if (t) t.ttsFirstAudioAt ??= this.now();
  }

  /** The reply's first audio went to the pacer: the next frame out closes the pending turn. */
  audioStarted(): void {
    if (this.turn) this.turn.audioStarted = true;
  }

  /** A frame left for the caller: after the reply's first audio, the turn is closed and reported. */
  frameSent(): void {
    const turn = this.turn;
    if (!turn?.audioStarted) return;
    this.turn = null;
    const { nodeId, audioStarted: _a, ...marks } = turn;
    const complete: TurnMarks = { ...marks, firstFrameAt: this.now() };
    this.o.onTurnLatency?.({
      callId: this.o.callId,
      nodeId,
      ...complete,
      ...splitTurnLatency(complete),
      outbound: { ...this.o.outbound() },
    });
  }

  /** `turn` while it is still pending; a turn closed, replaced or dropped takes no more marks. */
  private own(turn: TurnRef | null): PendingTurn | null {
    return turn !== null && turn === this.turn ? this.turn : null;
  }
}
