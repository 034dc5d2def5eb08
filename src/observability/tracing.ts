/**
 * OpenTelemetry traces (DECISIONS 21), off unless `OTEL_EXPORTER_OTLP_ENDPOINT` (or
 * `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set; then the Node SDK exports over OTLP/HTTP, in
 * protobuf (`http/protobuf`, the default) or JSON (`OTEL_EXPORTER_OTLP_PROTOCOL=http/json`), as the
 * standard `OTEL_*` variables say (service name, headers, sampling, batch sizes).
 *
 * One trace per call: a `call` span for the call's life, a `turn` span per caller turn, and under
 * the turn (or the call, outside turns) `stt`, `llm`, `tts`, `tool` spans; `webhook` spans for
 * each delivery attempt of the call's notifications, in whichever process delivers them (the
 * notification carries the call's `traceparent`). The API's requests get HTTP spans
 * (`@fastify/otel`). With tracing off nothing here allocates a span.
 */
import { context, trace, type Attributes, type Span, type SpanContext, type Tracer, SpanStatusCode, isSpanContextValid, ROOT_CONTEXT } from '@opentelemetry/api';

const TRACER = 'switchboard';
let enabled = false;
let shutdown: (() => Promise<void>) | null = null;

/** Whether tracing is on in this process. */
export function tracingEnabled(): boolean {
  return enabled;
}

/** Tracing is asked for by the standard variables. */
export function tracingConfigured(env: NodeJS.ProcessEnv = process.env): boolean {
  return !!(env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) && env.OTEL_SDK_DISABLED !== 'true';
}

/**
 * Starts the SDK when the variables ask for it (main.ts, before the app is built); returns
 * whether it did. `stopTracing` flushes and stops it.
 */
export async function startTracing(env: NodeJS.ProcessEnv = process.env): Promise<boolean> {
  if (enabled || !tracingConfigured(env)) return enabled;
  const protocol = env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? env.OTEL_EXPORTER_OTLP_PROTOCOL ?? 'http/protobuf';
  // the traces endpoint as is, or the base endpoint with the signal's path (the OTLP exporter spec)
  const url = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? `${env.OTEL_EXPORTER_OTLP_ENDPOINT!.replace(/\/+$/, '')}/v1/traces`;
  const [{ NodeSDK }, exporter] = await Promise.all([
    import('@opentelemetry/sdk-node'),
    protocol === 'http/json'
      ? import('@opentelemetry/exporter-trace-otlp-http').then((m) => new m.OTLPTraceExporter({ url }))
      : import('@opentelemetry/exporter-trace-otlp-proto').then((m) => new m.OTLPTraceExporter({ url })),
  ]);
  const sdk = new NodeSDK({
    serviceName: env.OTEL_SERVICE_NAME ?? 'switchboard',
    traceExporter: exporter,
    // spans are ours (and the API's, by @fastify/otel): no monkey-patching of modules
    instrumentations: [],
  });
  sdk.start();
  shutdown = () => sdk.shutdown();
  enabled = true;
  return true;
}

/** Flushes what is buffered and stops (the end of the process; tests). */
export async function stopTracing(): Promise<void> {
  const stop = shutdown;
  shutdown = null;
  enabled = false;
  await stop?.();
}

export function tracer(): Tracer {
  return trace.getTracer(TRACER);
}

/** A span under `parent` (a root span when null), or null with tracing off. */
export function startSpan(name: string, parent: Span | SpanContext | null, attributes: Attributes = {}, startTime?: number): Span | null {
  if (!enabled) return null;
  const ctx = parent === null ? ROOT_CONTEXT : trace.setSpanContext(ROOT_CONTEXT, 'spanContext' in parent ? parent.spanContext() : parent);
  return tracer().startSpan(name, { attributes, ...(startTime !== undefined ? { startTime } : {}), ...(parent === null ? { root: true } : {}) }, ctx);
}

/** Ends `span` with an error status when `error` is given. */
export function endSpan(span: Span | null, attributes: Attributes = {}, error?: string, endTime?: number): void {
  if (!span) return;
  span.setAttributes(attributes);
  if (error) span.setStatus({ code: SpanStatusCode.ERROR, message: error });
  span.end(endTime);
}

/** performance.now() ms as the epoch ms OpenTelemetry takes for a span's times. */
export const epochMs = (performanceMs: number) => performance.timeOrigin + performanceMs;

/** `00-<trace id>-<span id>-01` of a span (W3C trace context), to carry it to another process. */
export function traceparentOf(span: Span | null): string | null {
  const c = span?.spanContext();
  return c && isSpanContextValid(c) ? `00-${c.traceId}-${c.spanId}-0${c.traceFlags & 1}` : null;
}

/** The span context a `traceparent` names, or null. */
export function parseTraceparent(value: string | null | undefined): SpanContext | null {
  const m = value ? /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/.exec(value) : null;
  if (!m) return null;
  const c: SpanContext = { traceId: m[1]!, spanId: m[2]!, traceFlags: Number.parseInt(m[3]!, 16), isRemote: true };
  return isSpanContextValid(c) ? c : null;
}

/** The trace id of a span, or null (tracing off). */
export function traceIdOf(span: Span | null): string | null {
  const c = span?.spanContext();
  return c && isSpanContextValid(c) ? c.traceId : null;
}

// ---------------------------------------------------------------------------------------------
// each live call's spans in this process, for what happens in its name away from the call
// (its notifications' deliveries)

const calls = new Map<string, string>();
const MAX_REMEMBERED = 10_000;

/** The call's `traceparent` (its `call` span), while this process remembers it. */
export function callTraceparent(callId: string): string | null {
  return calls.get(callId) ?? null;
}

export function rememberCall(callId: string, traceparent: string | null): void {
  if (!traceparent) return;
  calls.set(callId, traceparent);
  // the oldest are forgotten: a report sent after that is a trace of its own
  if (calls.size > MAX_REMEMBERED) calls.delete(calls.keys().next().value!);
}

export { context };
