/**
 * A call's turns as its record, report and call log carry them (DECISIONS 21): for each caller
 * turn, its node, when it ended, and its latency split in ms; and the call's p50 and p95 of the
 * total. Made from the turn clock's reports (src/calls/turn-clock.ts, src/calls/latency.ts).
 */
import type { TurnLatency } from '../calls/latency.js';

export interface CallTurn {
  node_id: string | null;
  /** When the caller's turn ended (ISO 8601). */
  at: string;
  /** ms; null where the call cannot know it (a realtime model's own endpointing and STT). */
  latency: {
    /** The end of the caller's speech to its final transcript. */
    stt: number | null;
    /** The final transcript to the end of the turn (the configured wait, turn-taking's decision). */
    endpointing: number | null;
    /** The model's request to its first token. */
    llm_first_token: number | null;
    /** The turn's first TTS request to its first audio. */
    tts_first_audio: number | null;
    /** Switchboard's own share of `total`: everything but waiting for providers. */
    service: number;
    /** The end of the turn to the reply's first audio frame. */
    total: number;
  };
}

export interface TurnLatencySummary {
  p50: number;
  p95: number;
}

const ms = (n: number | null | undefined) => (n === null || n === undefined ? null : Math.round(n * 10) / 10);
/** performance.now() ms to wall-clock ISO. */
const wall = (at: number) => new Date(performance.timeOrigin + at).toISOString();

export function turnOf(t: TurnLatency): CallTurn {
  return {
    node_id: t.nodeId,
    at: wall(t.endOfTurnAt),
    latency: {
      stt: t.speechEndedAt != null && t.transcribedAt != null ? ms(Math.max(0, t.transcribedAt - t.speechEndedAt)) : null,
      endpointing: t.transcribedAt != null ? ms(Math.max(0, t.endOfTurnAt - t.transcribedAt)) : null,
      llm_first_token: ms(t.modelFirstTokenMs),
      tts_first_audio: t.ttsRequestedAt !== null && t.ttsFirstAudioAt !== null ? ms(t.ttsFirstAudioAt - t.ttsRequestedAt) : null,
      service: ms(t.serviceMs)!,
      total: ms(t.totalMs)!,
    },
  };
}

/** Nearest-rank p50 and p95 of the turns' totals; null without turns. */
export function turnSummary(turns: readonly CallTurn[]): TurnLatencySummary | null {
  if (turns.length === 0) return null;
  const sorted = turns.map((t) => t.latency.total).sort((a, b) => a - b);
  const rank = (p: number) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
  return { p50: rank(50), p95: rank(95) };
}
