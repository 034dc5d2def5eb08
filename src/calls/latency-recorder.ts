/**
 * Per-turn latencies collected in memory and summarized (the call benchmark; diagnostics):
 * percentiles of each part of the split (./latency.ts), and the outbound audio of every call
 * (frames sent and late, from the latest turn report of each call).
 */
import type { TurnLatency } from './latency.js';
import type { PacerStats } from './outbound.js';

export const LATENCY_PARTS = ['totalMs', 'serviceMs', 'providerWaitMs', 'modelWaitMs', 'ttsWaitMs', 'modelFirstTokenMs'] as const;
export type LatencyPart = (typeof LATENCY_PARTS)[number];

export interface Percentiles {
  count: number;
  p50: number;
  p95: number;
  p99: number;
  max: number;
  mean: number;
}

/** Nearest-rank percentiles (p99 of 1,000 samples is the 990th smallest). */
export function percentiles(values: readonly number[]): Percentiles {
  const n = values.length;
  if (n === 0) return { count: 0, p50: 0, p95: 0, p99: 0, max: 0, mean: 0 };
  const sorted = Float64Array.from(values).sort();
  const rank = (p: number) => sorted[Math.min(n - 1, Math.max(0, Math.ceil((p / 100) * n) - 1))]!;
  let sum = 0;
  for (const v of sorted) sum += v;
  return { count: n, p50: rank(50), p95: rank(95), p99: rank(99), max: sorted[n - 1]!, mean: sum / n };
}

export class TurnLatencyRecorder {
  private samples = emptySamples();
  private readonly outbound = new Map<string, PacerStats>();

  record(t: TurnLatency): void {
    for (const part of LATENCY_PARTS) {
      const v = t[part];
      if (v !== null) this.samples[part].push(v);
    }
    this.noteOutbound(t);
  }

  /** Only the call's outbound audio figures (a turn outside the measurement window). */
  noteOutbound(t: Pick<TurnLatency, 'callId' | 'outbound'>): void {
    this.outbound.set(t.callId, t.outbound);
  }

  get turns(): number {
    return this.samples.totalMs.length;
  }

  summary(): Record<LatencyPart, Percentiles> {
    const out = {} as Record<LatencyPart, Percentiles>;
    for (const part of LATENCY_PARTS) out[part] = percentiles(this.samples[part]);
    return out;
  }

  /**
   * The outbound audio of every call seen, as of its latest turn report; with `since` (an earlier
   * `outboundSnapshot()`), only what came after it (`maxLateMs` is then the worst of the calls
   * that had a late frame since).
   */
  outboundTotals(since?: ReadonlyMap<string, PacerStats>): PacerStats & { calls: number } {
    const total = { calls: this.outbound.size, framesSent: 0, framesLate: 0, maxLateMs: 0 };
    for (const [callId, s] of this.outbound) {
      const before = since?.get(callId);
      const late = s.framesLate - (before?.framesLate ?? 0);
      total.framesSent += s.framesSent - (before?.framesSent ?? 0);
      total.framesLate += late;
      if (late > 0 || !since) total.maxLateMs = Math.max(total.maxLateMs, s.maxLateMs);
    }
    return total;
  }

  outboundSnapshot(): Map<string, PacerStats> {
    return new Map([...this.outbound].map(([id, s]) => [id, { ...s }]));
  }

  /** Forgets the turns recorded so far (a new measurement window); calls' audio totals stay. */
  resetTurns(): void {
    this.samples = emptySamples();
  }

  reset(): void {
    this.samples = emptySamples();
    this.outbound.clear();
  }
}

function emptySamples(): Record<LatencyPart, number[]> {
  return Object.fromEntries(LATENCY_PARTS.map((p) => [p, []])) as unknown as Record<LatencyPart, number[]>;
}
