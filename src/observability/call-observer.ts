/**
 * What is observed of one call while it runs: its usage (./usage.ts), its turns (./turns.ts), its
 * spans (./tracing.ts), and at its end, its cost at the organization's prices: `finish` puts them
 * on the record (`observed`) before the report is made. Made by `createCall` (src/calls/call.ts);
 * its providers feed it through src/calls/metered-providers.ts, the turn clock through
 * `turnBegan`, `turnDropped` and `turnReported`.
 */
import type { Span } from '@opentelemetry/api';
import type { TurnLatency } from '../calls/latency.js';
import type { TurnEndDetail } from '../calls/turn-clock.js';
import type { CallRecord } from '../calls/store.js';
import type { CallObserved } from './observed.js';
import { costOf, type PriceTable } from './pricing.js';
import { endSpan, epochMs, rememberCall, startSpan, traceIdOf, traceparentOf } from './tracing.js';
import { turnOf, turnSummary, type CallTurn } from './turns.js';
import { UsageMeter } from './usage.js';

export class CallObserver {
  readonly usage = new UsageMeter();
  private readonly turns: CallTurn[] = [];
  private readonly callSpan: Span | null;
  private turnSpan: Span | null = null;

  constructor(private readonly record: CallRecord) {
    this.callSpan = startSpan('call', null, {
      'switchboard.call.id': record.id,
      'switchboard.organization.id': record.organization_id,
      'switchboard.call.type': record.type,
      'switchboard.transport': record.transport,
      ...(record.assistant_id ? { 'switchboard.assistant.id': record.assistant_id } : {}),
      ...(record.workflow_id ? { 'switchboard.workflow.id': record.workflow_id } : {}),
    });
    rememberCall(record.id, traceparentOf(this.callSpan));
  }

  /** Where a provider's or tool's span goes now: the turn under way, else the call. */
  parent(): Span | null {
    return this.turnSpan ?? this.callSpan;
  }

  /** A caller's turn ended (`at`, performance.now()): its span, and its STT's from the caller's last words. */
  turnBegan(nodeId: string | null, at: number, detail: TurnEndDetail): void {
    if (!this.callSpan) return;
    this.turnDropped();
    this.turnSpan = startSpan('turn', this.callSpan, { 'switchboard.node.id': nodeId ?? '' }, epochMs(at));
    if (detail.speechEndedAt != null && detail.transcribedAt != null && this.turnSpan) {
      const stt = startSpan('stt', this.turnSpan, { 'switchboard.stt.latency_ms': detail.transcribedAt - detail.speechEndedAt }, epochMs(detail.speechEndedAt));
      endSpan(stt, {}, undefined, epochMs(detail.transcribedAt));
    }
  }

  /** The pending turn got no reply of its own (the caller spoke again, or a newer turn replaced it). */
  turnDropped(): void {
    endSpan(this.turnSpan, { 'switchboard.turn.abandoned': true });
    this.turnSpan = null;
  }

  /** A turn closed with its reply's first frame: its latency is kept, its span ends. */
  turnReported(latency: TurnLatency): void {
    const turn = turnOf(latency);
    this.turns.push(turn);
    const span = this.turnSpan;
    this.turnSpan = null;
    const l = turn.latency;
    endSpan(
      span,
      {
        'switchboard.turn.total_ms': l.total,
        'switchboard.turn.service_ms': l.service,
        ...(l.llm_first_token !== null ? { 'switchboard.turn.llm_first_token_ms': l.llm_first_token } : {}),
        ...(l.tts_first_audio !== null ? { 'switchboard.turn.tts_first_audio_ms': l.tts_first_audio } : {}),
        ...(l.endpointing !== null ? { 'switchboard.turn.endpointing_ms': l.endpointing } : {}),
        ...(l.stt !== null ? { 'switchboard.turn.stt_ms': l.stt } : {}),
      },
      undefined,
      epochMs(latency.firstFrameAt),
    );
  }

  /**
   * The call is over (`r` is ended): the carrier's minutes, the usage, the cost at `prices` (null:
   * the prices could not be read), the turns; the call span ends.
   */
  finish(r: CallRecord, prices: PriceTable | null): CallObserved {
    if (r.started_at && r.ended_at && r.transport) {
      const minutes = Math.max(0, Date.parse(r.ended_at) - Date.parse(r.started_at)) / 60_000;
      this.usage.carrier(r.transport, r.type === 'outbound_phone_call' ? 'outbound' : 'inbound', minutes);
    }
    const usage = this.usage.snapshot();
    const cost = prices ? costOf(usage, prices) : null;
    this.turnDropped();
    const observed: CallObserved = {
      trace_id: traceIdOf(this.callSpan),
      turns: [...this.turns],
      turn_latency: turnSummary(this.turns),
      usage,
      cost,
    };
    endSpan(this.callSpan, {
      'switchboard.call.ended_reason': r.ended_reason ?? '',
      'switchboard.call.turns': this.turns.length,
      ...(cost ? { 'switchboard.call.cost_usd': cost.total } : {}),
    });
    return observed;
  }

  get id(): string {
    return this.record.id;
  }
}
