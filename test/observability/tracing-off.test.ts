/** With no OTLP endpoint, tracing is off: no span, no trace id, nothing sent; usage and cost are kept all the same. */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTracing, tracingConfigured, tracingEnabled } from '../../src/observability/tracing.js';
import { startOtlpReceiver, type OtlpReceiver } from './otlp-receiver.js';
import { observedCall } from './tracing.js';

let receiver: OtlpReceiver;
beforeAll(async () => {
  receiver = await startOtlpReceiver();
});
afterAll(async () => {
  await receiver.close();
});

it('sends nothing and reports no trace id, and still keeps usage, turns and cost', async () => {
  expect(tracingConfigured({ OTEL_SERVICE_NAME: 'x' })).toBe(false);
  expect(tracingConfigured({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_SDK_DISABLED: 'true' })).toBe(false);
  expect(await startTracing({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_SDK_DISABLED: 'true' })).toBe(false);
  expect(tracingEnabled()).toBe(false);
  const { observed } = await observedCall();
  await new Promise((r) => setTimeout(r, 200));
  expect(receiver.exports).toEqual([]);
  expect(observed.trace_id).toBeNull();
  expect(observed.turns).toHaveLength(1);
  expect(observed.turns[0]!.latency).toEqual({ stt: 200, endpointing: 100, llm_first_token: 1, tts_first_audio: 1, service: 2, total: 5 });
  expect(observed.usage.llm[0]!.provider).toBe('sandbox');
  expect(observed.usage.tts).toEqual([{ provider: 'sandbox', model: 'sandbox', characters: 'We open at nine.'.length }]);
  expect(observed.usage.carrier[0]!).toMatchObject({ provider: 'web', direction: 'inbound' });
  expect(observed.cost!.total).toBe(0);
});
