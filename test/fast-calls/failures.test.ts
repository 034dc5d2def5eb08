/**
 * When something fails mid-call, on the memory transport and fake timers: a provider failing ends
 * the call `pipeline-error-<provider>` with its reason in `errors`, the carrier leg hung up, the
 * media closed, the report sent, and nothing left running; a far end that goes away without a
 * hang-up ends it `customer-ended-call`, saying why.
 */
import { describe, expect, it } from 'vitest';
import { ProviderError } from '../../src/providers/types.js';
import { callHarness, useFastCalls, type CallHarness } from '../helpers/call-harness.js';

useFastCalls();

const GREETING = 'Hello, this is Acme Dental.';

/** The call ended `reason` the way a failure ends it: errors, hang-up, media closed, status and report. */
function expectFailedEnd(h: CallHarness, reason: string, error: { code: string; message: string; provider?: string }) {
  expect(h.endedReason).toBe(reason);
  expect(h.record.errors).toEqual([error]);
  expect(h.transport.hangUps).toHaveLength(1);
  expect(h.transport.closedAt).not.toBeNull();
  expect(h.transport.sentAfterClose).toBe(0);
  expect(h.notifier.statuses.at(-1)).toMatchObject({ status: 'ended', extra: { ended_reason: reason } });
  expect(h.notifier.reports[0]).toMatchObject({ ended_reason: reason, errors: [error] });
}

async function greetedPipeline(assistant: Record<string, unknown> = {}) {
  const h = callHarness({
    assistant: {
      first_message: GREETING,
      stt_config: { provider: 'deepgram' },
      llm_config: { provider: 'openai' },
      tts_config: { provider: 'elevenlabs', voice_id: 'EXAVITQu4vr4xnSDxMaL' },
      ...assistant,
    },
  });
  await h.start();
  await h.until('the greeting', () => h.heard().includes(GREETING));
  return h;
}

describe('a provider failing mid-call (pipeline call)', () => {
  it('the speech-to-text connection drops: pipeline-error-deepgram', async () => {
    const h = await greetedPipeline();
    h.stt.fail(new ProviderError('PROVIDER_DISCONNECTED', 'deepgram', 'the connection dropped mid-stream'));
    await h.untilEnded(1_000);
    expectFailedEnd(h, 'pipeline-error-deepgram', { code: 'PROVIDER_DISCONNECTED', message: 'deepgram: the connection dropped mid-stream', provider: 'deepgram' });
    expect(h.stt.sessions[0]!.closed).toBe(true);
  });

  it('the model fails mid-reply: pipeline-error-openai, and the request is not retried', async () => {
    const h = await greetedPipeline();
    h.llm.reply({ text: ['Let me check that. ', 'Your next'], chunkMs: 200, error: new ProviderError('PROVIDER_DISCONNECTED', 'openai', 'the stream ended early') });
    await h.caller.say('When is my next visit?');
    await h.untilEnded(5_000);
    expectFailedEnd(h, 'pipeline-error-openai', { code: 'PROVIDER_DISCONNECTED', message: 'openai: the stream ended early', provider: 'openai' });
    expect(h.llm.requests).toHaveLength(1);
  });

  it('text-to-speech fails on a sentence: pipeline-error-elevenlabs', async () => {
    const h = await greetedPipeline();
    h.tts.failOn = (text) => (text.includes('Tuesday') ? new ProviderError('PROVIDER_HTTP_ERROR', 'elevenlabs', 'quota exceeded', 429) : null);
    h.llm.reply({ text: 'Sure. Your next visit is on Tuesday.' });
    await h.caller.say('When is my next visit?');
    await h.untilEnded(5_000);
    expectFailedEnd(h, 'pipeline-error-elevenlabs', { code: 'PROVIDER_HTTP_ERROR', message: 'elevenlabs: quota exceeded', provider: 'elevenlabs' });
  });

  it('the speech-to-text refuses the call at start: pipeline-error-deepgram, before anything is said', async () => {
    const h = callHarness({ assistant: { first_message: GREETING, stt_config: { provider: 'deepgram' } } });
    h.stt.connectError = new ProviderError('PROVIDER_AUTH', 'deepgram', 'invalid API key', 401);
    await h.start();
    await h.untilEnded(1_000);
    expectFailedEnd(h, 'pipeline-error-deepgram', { code: 'PROVIDER_AUTH', message: 'deepgram: invalid API key', provider: 'deepgram' });
    expect(h.transport.frames).toEqual([]);
  });
});

describe('a provider failing mid-call (realtime call)', () => {
  async function greetedRealtime() {
    const h = callHarness({ kind: 'realtime', assistant: { first_message: GREETING, llm_config: { provider: 'openai-realtime' } } });
    await h.start();
    await h.until('the greeting', () => h.heard().includes(GREETING));
    return h;
  }

  it('the model connection drops: pipeline-error-openai-realtime', async () => {
    const h = await greetedRealtime();
    h.realtime.session!.fail(new ProviderError('PROVIDER_DISCONNECTED', 'openai-realtime', 'the socket closed'));
    await h.untilEnded(1_000);
    expectFailedEnd(h, 'pipeline-error-openai-realtime', { code: 'PROVIDER_DISCONNECTED', message: 'openai-realtime: the socket closed', provider: 'openai-realtime' });
    expect(h.realtime.sessions[0]!.closed).toBe(true);
  });

  it('a model silent for 8 s after a response was asked: pipeline-error-openai-realtime (PROVIDER_TIMEOUT)', async () => {
    const h = await greetedRealtime();
    h.realtime.reply({ text: 'Never said.', firstTokenMs: 60_000 });
    // a key press asks the model for a response (a spoken turn is answered by its server VAD instead)
    h.caller.press('1');
    const askedAt = h.now();
    await h.untilEnded(20_000);
    expectFailedEnd(h, 'pipeline-error-openai-realtime', { code: 'PROVIDER_TIMEOUT', message: 'openai-realtime: no answer from the realtime model for 8 s', provider: 'openai-realtime' });
    expect(h.rel(h.transport.hangUps[0]!) - askedAt).toBe(8_000);
  });
});

describe.each([{ kind: 'pipeline' as const }, { kind: 'realtime' as const }])('the far end ($kind call)', ({ kind }) => {
  it('gone without a hang-up: customer-ended-call, saying why; the carrier leg is hung up', async () => {
    const h = callHarness({ kind, assistant: { first_message: GREETING } });
    await h.start();
    await h.advance(200);
    h.transport.farEndGone('no media for 5 s');
    const report = await h.untilEnded(1_000);
    expect(report.ended_reason).toBe('customer-ended-call');
    expect(report.errors).toEqual([{ code: 'CALL_STREAM_LOST', message: 'the media stream went away: no media for 5 s' }]);
    expect(h.notifier.statuses.at(-1)).toMatchObject({ status: 'ended', extra: { ended_reason: 'customer-ended-call' } });
    expect(h.transport.hangUps).toHaveLength(1);
  });
});

describe('the transport throws (a bug in a carrier adapter)', () => {
  it.each([
    { what: 'sending audio', method: 'sendAudio' as const, where: 'media out.sendFrame' },
    { what: 'sending a mark', method: 'mark' as const, where: 'media out.sendMark' },
  ])('while $what: that call ends pipeline-error-switchboard, saying where; nothing reaches the process', async ({ method, where }) => {
    const h = callHarness({ assistant: { first_message: GREETING } });
    await h.start();
    await h.until('the greeting', () => h.heard().includes(GREETING));
    const original = h.transport[method].bind(h.transport) as (arg: never) => void;
    let thrown = 0;
    h.transport[method] = ((arg: never) => {
      if (thrown++ === 0) throw new TypeError('a carrier adapter bug');
      original(arg);
    }) as never;
    await h.caller.say('When is my next visit?');
    const report = await h.untilEnded(5_000);
    expect(thrown).toBeGreaterThan(0);
    expect(report.ended_reason).toBe('pipeline-error-switchboard');
    expect(report.errors).toEqual([{ code: 'CALL_INTERNAL_ERROR', message: `switchboard: internal error (${where}); the server log has the details under this call id` }]);
    expect(h.transport.hangUps).toHaveLength(1);
  });
});
