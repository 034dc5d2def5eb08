/** Traces over OTLP/HTTP in protobuf (the default protocol) to a receiver on 127.0.0.1. */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTracing, stopTracing } from '../../src/observability/tracing.js';
import { startOtlpReceiver, type OtlpReceiver } from './otlp-receiver.js';
import { observedCall } from './tracing.js';

let receiver: OtlpReceiver;
beforeAll(async () => {
  receiver = await startOtlpReceiver();
  expect(await startTracing({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url })).toBe(true);
});
afterAll(async () => {
  await stopTracing();
  await receiver.close();
});

it('exports the call\'s spans as protobuf (http/protobuf, the default), with its trace id in them', async () => {
  const { observed } = await observedCall();
  await stopTracing();
  expect(receiver.exports.length).toBeGreaterThan(0);
  const body = Buffer.concat(receiver.exports.map((e) => e.body));
  expect(receiver.exports.every((e) => e.path === '/v1/traces' && e.contentType === 'application/x-protobuf')).toBe(true);
  // protobuf keeps strings as they are and ids as their 16 raw bytes
  for (const name of ['call', 'turn', 'llm', 'tts', 'stt']) expect(body.includes(Buffer.from(name)), name).toBe(true);
  expect(body.includes(Buffer.from(observed.trace_id!, 'hex'))).toBe(true);
});
