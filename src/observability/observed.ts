/** What a call's record, report, call log and API carry of its observation (DECISIONS 21). */
import type { CallCost } from './pricing.js';
import type { CallTurn, TurnLatencySummary } from './turns.js';
import type { CallUsage } from './usage.js';

export interface CallObserved {
  /** The call's OpenTelemetry trace (32 hex digits); null when tracing is off. */
  trace_id: string | null;
  turns: CallTurn[];
  /** p50 and p95 of the turns' totals (ms); null without turns. */
  turn_latency: TurnLatencySummary | null;
  usage: CallUsage;
  cost: CallCost | null;
}
