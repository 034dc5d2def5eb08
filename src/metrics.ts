/**
 * `GET /metrics` in Prometheus format: live calls, calls by ended_reason, turn latency, webhook
 * deliveries by outcome, provider errors, and the process's own figures. One registry per
 * runtime, so that tests and benchmarks can run several in one process.
 */
import type { CallObserved } from './observability/observed.js';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { TurnLatency } from './calls/latency.js';
import type { DeliveryAttemptRecord } from './store/deliveries.js';
import type { DeliveryRecorder } from './webhooks/notify.js';

const LATENCY_BUCKETS_SECONDS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];

export class Metrics {
  readonly registry = new Registry();
  private readonly callsEnded: Counter<'ended_reason'>;
  private readonly turnTotal: Histogram;
  private readonly turnService: Histogram;
  private readonly turnProvider: Histogram;
  private readonly deliveries: Counter<'event' | 'outcome'>;
  private readonly providerErrors: Counter<'provider'>;
  private readonly replays: Counter;
  private readonly unhandled: Counter;
  private readonly requeued: Counter<'event'>;
  private readonly outbox: Counter<'event' | 'kind'>;
  private readonly swept: Counter<'ended_reason'>;
  private readonly refused: Counter<'transport'>;
  private readonly dialRequeues: Counter;
  private readonly uncaught: Counter;

  private readonly usageStt = new Counter({ name: 'switchboard_usage_stt_seconds_total', help: 'Caller audio sent to speech-to-text, by provider and model (ended calls).', labelNames: ['provider', 'model'], registers: [this.registry] });
  private readonly usageTokens = new Counter({ name: 'switchboard_usage_llm_tokens_total', help: "Language-model tokens, as the vendors count them, by provider, model and direction (input, output).", labelNames: ['provider', 'model', 'direction'], registers: [this.registry] });
  private readonly usageCharacters = new Counter({ name: 'switchboard_usage_tts_characters_total', help: 'Characters sent to text-to-speech, by provider and model.', labelNames: ['provider', 'model'], registers: [this.registry] });
  private readonly usageRealtime = new Counter({ name: 'switchboard_usage_realtime_audio_seconds_total', help: "A realtime model's audio, by provider, model and direction (input: the caller's; output: the model's).", labelNames: ['provider', 'model', 'direction'], registers: [this.registry] });
  private readonly usageCarrier = new Counter({ name: 'switchboard_usage_carrier_minutes_total', help: "Calls' answered minutes, by transport and direction.", labelNames: ['provider', 'direction'], registers: [this.registry] });
  private readonly costTotal = new Counter({ name: 'switchboard_cost_usd_total', help: "What ended calls cost at their organizations' prices (USD), by kind and provider.", labelNames: ['kind', 'provider'], registers: [this.registry] });

  constructor(liveCalls: () => number, options: { processMetrics?: boolean; outboxPending?: () => number } = {}) {
    const registers = [this.registry];
    if (options.processMetrics ?? true) collectDefaultMetrics({ register: this.registry, prefix: 'switchboard_' });
    new Gauge({
      name: 'switchboard_live_calls',
      help: 'Calls this process is carrying now.',
      registers,
      collect() {
        this.set(liveCalls());
      },
    });
    this.callsEnded = new Counter({
      name: 'switchboard_calls_ended_total',
      help: 'Calls ended, by ended_reason.',
      labelNames: ['ended_reason'],
      registers,
    });
    const histogram = (name: string, help: string) =>
      new Histogram({ name, help, buckets: LATENCY_BUCKETS_SECONDS, registers });
    this.turnTotal = histogram(
      'switchboard_turn_latency_seconds',
      "Caller's end of turn to the first audio frame of the reply.",
    );
    this.turnService = histogram(
      'switchboard_turn_service_seconds',
      'The service\'s own share of a turn (everything but waiting for providers).',
    );
    this.turnProvider = histogram('switchboard_turn_provider_wait_seconds', 'Time a turn waited for the model and TTS.');
    this.deliveries = new Counter({
      name: 'switchboard_webhook_deliveries_total',
      help: 'Webhook delivery attempts, by event and outcome.',
      labelNames: ['event', 'outcome'],
      registers,
    });
    this.providerErrors = new Counter({
      name: 'switchboard_provider_errors_total',
      help: 'Calls ended by a provider failure, by provider.',
      labelNames: ['provider'],
      registers,
    });
    this.replays = new Counter({
      name: 'switchboard_voice_webhook_replays_total',
      help: 'Signed voice webhooks refused because their call (carrier call id) already had one.',
      registers,
    });
    this.unhandled = new Counter({
      name: 'switchboard_unhandled_rejections_total',
      help: 'Promise rejections nobody handled (defects; each is logged at error level).',
      registers,
    });
    this.uncaught = new Counter({
      name: 'switchboard_uncaught_exceptions_total',
      help: 'Errors thrown outside every guard (uncaughtException: defects; each is logged at error level, with its call id when it has one); the process keeps serving.',
      registers,
    });
    this.requeued = new Counter({
      name: 'switchboard_webhooks_requeued_total',
      help: 'Notifications the delivery queue had lost (a Redis restart), queued again from the database by the reconciler.',
      labelNames: ['event'],
      registers,
    });
    this.outbox = new Counter({
      name: 'switchboard_outbox_writes_total',
      help: 'Database writes through the outbox during an outage: deferred (kept), written (later), dropped (outbox full or bad data).',
      labelNames: ['event', 'kind'],
      registers,
    });
    this.swept = new Counter({
      name: 'switchboard_calls_swept_total',
      help: 'Calls left unfinished in the call log with no live session anywhere, ended by the sweep.',
      labelNames: ['ended_reason'],
      registers,
    });
    this.refused = new Counter({
      name: 'switchboard_calls_refused_unavailable_total',
      help: 'New calls refused before pickup because the database or Redis did not answer.',
      labelNames: ['transport'],
      registers,
    });
    this.dialRequeues = new Counter({
      name: 'switchboard_dial_requeued_total',
      help: 'Queued outbound calls the dial queue had lost (a Redis restart), queued again from the call log by the sweep.',
      registers,
    });
    this.outageMetrics(registers, options.outboxPending ?? (() => 0));
  }

  /** What the outages page (docs/outages.md) tells an operator to watch. */
  private outageMetrics(registers: Registry[], outboxPending: () => number): void {
    new Gauge({
      name: 'switchboard_outbox_pending',
      help: 'Database writes kept in the outbox because PostgreSQL did not answer, not yet written.',
      registers,
      collect() {
        this.set(outboxPending());
      },
    });
  }

  /** A notification the queue had lost, queued again by the reconciler. */
  webhookRequeued(event: string): void {
    this.requeued.inc({ event });
  }

  /** A write kept in the outbox (`deferred`), written later (`written`) or dropped. */
  outboxEvent(event: 'deferred' | 'written' | 'dropped', kind: string): void {
    this.outbox.inc({ event, kind });
  }

  /** A call found unfinished in the call log with no live session anywhere, ended by the sweep. */
  callSwept(reason: string): void {
    this.swept.inc({ ended_reason: reason });
  }

  /** A queued outbound call the dial queue lost, queued again. */
  dialRequeued(): void {
    this.dialRequeues.inc();
  }

  /** A new call refused before pickup because the database or Redis did not answer. */
  callRefusedUnavailable(transport: string): void {
    this.refused.inc({ transport });
  }

  voiceWebhookReplayed(): void {
    this.replays.inc();
  }

  unhandledRejection(): void {
    this.unhandled.inc();
  }

  uncaughtException(): void {
    this.uncaught.inc();
  }

  callEnded(reason: string): void {
    this.callsEnded.inc({ ended_reason: reason });
    if (reason.startsWith('pipeline-error-') && reason !== 'pipeline-error-switchboard') this.providerErrors.inc({ provider: reason.slice('pipeline-error-'.length) });
  }

  /** An ended call's usage and cost (src/observability/): the counters by provider and model. */
  callObserved(observed: CallObserved | null | undefined): void {
    if (!observed) return;
    const u = observed.usage;
    const model = (m: string | null) => m ?? '';
    for (const r of u.stt) this.usageStt.inc({ provider: r.provider, model: model(r.model) }, r.seconds);
    for (const r of u.llm) {
      this.usageTokens.inc({ provider: r.provider, model: model(r.model), direction: 'input' }, r.input_tokens);
      this.usageTokens.inc({ provider: r.provider, model: model(r.model), direction: 'output' }, r.output_tokens);
    }
    for (const r of u.tts) this.usageCharacters.inc({ provider: r.provider, model: model(r.model) }, r.characters);
    for (const r of u.realtime) {
      this.usageRealtime.inc({ provider: r.provider, model: model(r.model), direction: 'input' }, r.input_audio_seconds);
      this.usageRealtime.inc({ provider: r.provider, model: model(r.model), direction: 'output' }, r.output_audio_seconds);
    }
    for (const r of u.carrier) this.usageCarrier.inc({ provider: r.provider, direction: r.direction }, r.minutes);
    for (const l of observed.cost?.breakdown ?? []) if (l.amount > 0) this.costTotal.inc({ kind: l.kind, provider: l.provider }, l.amount);
  }

  turn(latency: TurnLatency): void {
    this.turnTotal.observe(latency.totalMs / 1000);
    this.turnService.observe(latency.serviceMs / 1000);
    this.turnProvider.observe(latency.providerWaitMs / 1000);
  }

  /** Counts every delivery attempt on its way to the attempt log. */
  countingRecorder(inner: DeliveryRecorder | null): DeliveryRecorder {
    return {
      record: async (attempt: DeliveryAttemptRecord) => {
        this.deliveries.inc({ event: attempt.event, outcome: attempt.outcome });
        await inner?.record(attempt);
      },
    };
  }

  render(): Promise<string> {
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}
