/**
 * What both tracing tests run: a call's observer with its metered providers (the sandbox model and
 * voice), a turn with the model and the TTS, then the call's end; the spans are flushed by
 * `stopTracing` to the receiver.
 */
import { newCallRecord } from '../../src/calls/store.js';
import { meteredProviders } from '../../src/calls/metered-providers.js';
import { CallObserver } from '../../src/observability/call-observer.js';
import { DEFAULT_PRICES } from '../../src/observability/pricing.js';
import { createSandboxLlm } from '../../src/providers/sandbox/llm.js';
import { createSandboxTts } from '../../src/providers/sandbox/tts.js';
import type { TurnLatency } from '../../src/calls/latency.js';

export async function observedCall() {
  const record = newCallRecord({ organization_id: '00000000-0000-4000-8000-000000000001', number_id: '', phone_number: { number: '+15550100', name: null }, customer: { number: '+15550199' }, transport: 'web', transport_ids: {} });
  const observer = new CallObserver(record);
  const providers = meteredProviders({ stt: new Map(), llm: new Map([['sandbox', createSandboxLlm()]]), tts: new Map([['sandbox', createSandboxTts()]]), realtime: new Map() }, observer);
  const t0 = performance.now();
  observer.turnBegan('greeting', t0, { speechEndedAt: t0 - 300, transcribedAt: t0 - 100 });
  for await (const _ of providers.llm.get('sandbox')!.stream({ config: { provider: 'sandbox' }, messages: [{ role: 'user', content: 'What time do you open?' }], tools: [] })) void _;
  await new Promise<void>((resolve, reject) => {
    void providers.tts.get('sandbox')!.open({ provider: 'sandbox' } as never, { onAudio: () => undefined, onDone: resolve, onError: reject }).then((s) => {
      s.sendText('We open at nine.');
      s.flush();
      s.end();
    });
  });
  const latency = { callId: record.id, nodeId: 'greeting', speechEndedAt: t0 - 300, transcribedAt: t0 - 100, endOfTurnAt: t0, modelRequestedAt: t0 + 1, firstTokenAt: t0 + 2, modelReadyAt: t0 + 3, ttsRequestedAt: t0 + 3, ttsFirstAudioAt: t0 + 4, firstFrameAt: t0 + 5, totalMs: 5, modelFirstTokenMs: 1, modelWaitMs: 2, ttsWaitMs: 1, providerWaitMs: 3, serviceMs: 2, outbound: { framesSent: 0, framesLate: 0, maxLateMs: 0 } } satisfies TurnLatency;
  observer.turnReported(latency);
  Object.assign(record, { status: 'ended', started_at: new Date(Date.now() - 30_000).toISOString(), ended_at: new Date().toISOString(), ended_reason: 'customer-ended-call' });
  return { record, observed: observer.finish(record, DEFAULT_PRICES) };
}
