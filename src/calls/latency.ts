/**
 * Per-turn latency: caller end of turn → model request sent → first model token → model output
 * the first audio needs → TTS request → first TTS audio → first media frame to the caller.
 *
 * The split that the service is judged on (issue 5: under 10 ms at p99):
 *   total         = first media frame − end of turn (when turn-taking decided the caller was done;
 *                   the endpointing delay before that is a configured wait, not work)
 *   provider wait = the time within `total` during which the turn waited on a provider: from the
 *                   model request until the model had delivered what the first audio needed (its
 *                   first complete sentence, or the end of a stream that called no function; a
 *                   tool the model called and the model's next stream count in it), and
 *                   from the first TTS request of the turn until that TTS session's first audio
 *                   (overlaps counted once)
 *   service share = total − provider wait: our own work and queueing on our event loop.
 * All times are `performance.now()` milliseconds of the process that runs the call.
 */
import type { PacerStats } from './outbound.js';

/** Timestamps of one turn, as the live call sees them. */
export interface TurnMarks {
  /** The end of the caller's speech, where the STT's word timings tell it (pipeline). */
  speechEndedAt?: number | null;
  /** When the turn's final words were transcribed (pipeline). */
  transcribedAt?: number | null;
  endOfTurnAt: number;
  modelRequestedAt: number | null;
  firstTokenAt: number | null;
  /** The model had delivered what the first audio needed. */
  modelReadyAt: number | null;
  ttsRequestedAt: number | null;
  ttsFirstAudioAt: number | null;
  firstFrameAt: number;
}

export interface TurnLatencySplit {
  totalMs: number;
  /** Model request → first token (text or function call). */
  modelFirstTokenMs: number | null;
  modelWaitMs: number;
  ttsWaitMs: number;
  /** Model and TTS waits within the turn, overlaps counted once. */
  providerWaitMs: number;
  serviceMs: number;
}

export interface TurnLatency extends TurnMarks, TurnLatencySplit {
  callId: string;
  /** The node the caller spoke in. */
  nodeId: string | null;
  /** The call's outbound audio so far (every reply before this one, and this one's start). */
  outbound: PacerStats;
}

/** Length of [from, to] within [lo, hi]; 0 when a bound is missing. */
function clipped(from: number | null, to: number | null, lo: number, hi: number): [number, number] | null {
  if (from === null || to === null) return null;
  const a = Math.max(from, lo);
  const b = Math.min(to, hi);
  return b > a ? [a, b] : null;
}

export function splitTurnLatency(m: TurnMarks): TurnLatencySplit {
  const lo = m.endOfTurnAt;
  const hi = Math.max(m.firstFrameAt, lo);
  const total = hi - lo;
  const model = clipped(m.modelRequestedAt, m.modelReadyAt, lo, hi);
  const tts = clipped(m.ttsRequestedAt, m.ttsFirstAudioAt, lo, hi);
  const len = (i: [number, number] | null) => (i ? i[1] - i[0] : 0);
  let provider = len(model) + len(tts);
  if (model && tts) provider -= Math.max(0, Math.min(model[1], tts[1]) - Math.max(model[0], tts[0]));
  return {
    totalMs: total,
    modelFirstTokenMs:
      m.modelRequestedAt !== null && m.firstTokenAt !== null ? m.firstTokenAt - m.modelRequestedAt : null,
    modelWaitMs: len(model),
    ttsWaitMs: len(tts),
    providerWaitMs: provider,
    serviceMs: Math.max(0, total - provider),
  };
}
