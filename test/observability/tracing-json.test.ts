/**
 * Traces for real (DECISIONS 21): the Node SDK exports over OTLP/HTTP in JSON to a receiver on
 * 127.0.0.1 (the collector's wire format), read back as a tree: `call` → `turn` → `stt`, `llm`,
 * `tts`, with the trace id the call reports. (Protobuf: tracing-proto.test.ts; off: tracing-off.test.ts.)
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTracing, stopTracing, tracingEnabled } from '../../src/observability/tracing.js';
import { startOtlpReceiver, type OtlpReceiver } from './otlp-receiver.js';
import { observedCall } from './tracing.js';

let receiver: OtlpReceiver;
beforeAll(async () => {
  receiver = await startOtlpReceiver();
  expect(await startTracing({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', OTEL_SERVICE_NAME: 'switchboard-test' })).toBe(true);
});
afterAll(async () => {
  await stopTracing();
  await receiver.close();
});

describe('a call traced over OTLP/HTTP (JSON)', () => {
  it('is one trace: call, its turn, and the turn\'s stt, llm and tts spans with their figures; its id is the call\'s trace_id', async () => {
    expect(tracingEnabled()).toBe(true);
    const { record, observed } = await observedCall();
    await stopTracing();
    expect(receiver.exports.every((e) => e.path === '/v1/traces' && e.contentType.includes('application/json'))).toBe(true);
    const spans = receiver.spans();
    const byName = (name: string) => spans.find((s) => s.name === name)!;
    const call = byName('call');
    expect(call.traceId).toBe(observed.trace_id);
    expect(observed.trace_id).toMatch(/^[0-9a-f]{32}$/);
    expect(call.parentSpanId).toBeUndefined();
    expect(call.attributes).toMatchObject({ 'switchboard.call.id': record.id, 'switchboard.transport': 'web', 'switchboard.call.ended_reason': 'customer-ended-call' });
    const turn = byName('turn');
    expect(turn.parentSpanId).toBe(call.spanId);
    expect(turn.attributes).toMatchObject({ 'switchboard.node.id': 'greeting', 'switchboard.turn.total_ms': 5, 'switchboard.turn.service_ms': 2 });
    for (const child of ['stt', 'llm', 'tts']) {
      expect(byName(child).parentSpanId, child).toBe(turn.spanId);
      expect(byName(child).traceId).toBe(call.traceId);
    }
    expect(byName('llm').attributes).toMatchObject({ 'gen_ai.system': 'sandbox', 'gen_ai.usage.input_tokens': observed.usage.llm[0]!.input_tokens });
    expect(byName('llm').attributes['switchboard.llm.time_to_first_token_ms']).toBeTypeOf('number');
    expect(byName('tts').attributes).toMatchObject({ 'switchboard.tts.characters': 'We open at nine.'.length });
    expect(byName('stt').attributes['switchboard.stt.latency_ms']).toBe(200);
  });
});
