/**
 * `autonomous_silence_handling` (DECISIONS 13) on both kinds of call, on the memory transport and
 * fake timers: `true` with `silence.messages` says them in turn; `true` with no messages has the
 * model write each check-in (offered no function, recorded like a reply, a fixed fallback line
 * when it fails or says nothing, and the call goes on); `false` says nothing until
 * `silence_timeout_seconds` of silence, then `end_call_message`, and hangs up `silence-timed-out`.
 */
import { describe, expect, it } from 'vitest';
import { SILENCE_CHECK_FALLBACK, SILENCE_CHECK_INSTRUCTION } from '../../engine/session.js';
import { ProviderError } from '../../src/providers/types.js';
import { callHarness, useFastCalls, type CallHarness } from '../helpers/call-harness.js';
import type { ModelRequest } from '../helpers/scripted-providers.js';

useFastCalls();

const kinds = [{ kind: 'pipeline' as const }, { kind: 'realtime' as const }];
const model = (h: CallHarness) => (h.assistant.realtime ? h.realtime : h.llm);
const provider = (h: CallHarness) => (h.assistant.realtime ? 'sandbox-realtime' : 'sandbox');

/** An assistant tool: a check-in must neither be offered it nor run it. */
const lookupTool = { name: 'lookup_order', description: 'Look up an order', url: 'https://tools.example.com/orders' };

/** Checks after 1 s, then every 3 s; the model writes them (no messages). */
const modelCheckIns = (maxAttempts: number) => ({
  messages: [],
  final_message: 'I will hang up now, goodbye.',
  first_check_seconds: 1,
  interval_seconds: 3,
  max_attempts: maxAttempts,
});

function assistant(h: { kind: 'pipeline' | 'realtime' }, fields: Record<string, unknown>) {
  return {
    first_message: 'Hi.',
    llm_config: { provider: h.kind === 'realtime' ? 'sandbox-realtime' : 'sandbox', tools: [lookupTool] },
    ...fields,
  };
}

/** When the first frame carrying `text` left for the caller (`now()` scale). */
function firstFrameOf(h: CallHarness, text: string): number {
  const f = h.transport.frames.find((x) => h.voice.decode(x.frame)?.text === text);
  if (!f) throw new Error(`"${text}" was never sent`);
  return h.rel(f.sentAt);
}

/** A gap the fake clock makes exact, give or take the millisecond a 0 ms timer takes inside a tick. */
const about = (ms: number) => expect.toSatisfy((gap: number) => gap >= ms && gap <= ms + 3, `${ms} ms (+3)`);

/** The request asked for a check-in: the instruction after the conversation (pipeline) or for the response (realtime). */
function isCheckIn(r: ModelRequest): boolean {
  if (r.instructions !== undefined) return r.instructions.endsWith(SILENCE_CHECK_INSTRUCTION);
  const last = r.messages.at(-1);
  return last?.role === 'system' && last.content === SILENCE_CHECK_INSTRUCTION;
}

describe.each(kinds)('autonomous silence handling with messages ($kind call)', ({ kind }) => {
  it('says the messages in turn, never asking the model, then the final message and hangs up', async () => {
    const h = callHarness({
      kind,
      assistant: assistant({ kind }, { speech_config: { silence: { ...modelCheckIns(2), messages: ['Still there?', 'Hello?'] } } }),
    });
    await h.start();
    const report = await h.untilEnded(30_000);
    expect(h.heard()).toEqual(['Hi.', 'Still there?', 'Hello?', 'I will hang up now, goodbye.']);
    expect(model(h).requests).toEqual([]);
    expect(report.ended_reason).toBe('silence-timed-out');
  });
});

describe.each(kinds)('silence counts from the far end\'s marks ($kind call)', ({ kind }) => {
  it('a far end that plays ahead of the pacer\'s clock (each mark answered 40 ms early) still gets every check (a realtime call once got none)', async () => {
    const h = callHarness({
      kind,
      transport: { markLatencyMs: -40 },
      assistant: assistant({ kind }, { speech_config: { silence: { ...modelCheckIns(2), messages: ['Still there?', 'Hello?'] } } }),
    });
    await h.start();
    const report = await h.untilEnded(30_000);
    // (the closing line's last 40 ms are not heard: the call hangs up on its early mark)
    expect(h.heard().slice(0, 3)).toEqual(['Hi.', 'Still there?', 'Hello?']);
    expect(h.transport.frames.some((f) => h.voice.decode(f.frame)?.text === 'I will hang up now, goodbye.')).toBe(true);
    expect(report.ended_reason).toBe('silence-timed-out');
  });
});

describe.each(kinds)('autonomous silence handling without messages ($kind call)', ({ kind }) => {
  it('the model writes each check-in, offered no function, and it is recorded like a reply', async () => {
    const h = callHarness({ kind, assistant: assistant({ kind }, { speech_config: { silence: modelCheckIns(2) } }) });
    model(h).reply({ text: 'Are you still on the line?' }, { text: 'Hello, are you with me?' });
    await h.start();
    const report = await h.untilEnded(30_000);
    const said = ['Hi.', 'Are you still on the line?', 'Hello, are you with me?', 'I will hang up now, goodbye.'];
    expect(h.heard()).toEqual(said);
    expect(report.messages.map((m) => [m.role, m.content])).toEqual(said.map((t) => ['assistant', t]));
    expect(report.ended_reason).toBe('silence-timed-out');
    // the same timing as fixed messages: first_check_seconds, then interval_seconds
    const [first, second] = model(h).requests;
    expect(h.rel(first!.at) - h.heardAt('Hi.')).toEqual(about(1_000));
    expect(h.rel(second!.at) - h.heardAt(said[1]!)).toEqual(about(3_000));
    for (const r of [first!, second!]) {
      expect(isCheckIn(r)).toBe(true);
      expect(r.functions).toEqual([]);
    }
    // the second check-in sees the first in the conversation, as the model's words
    expect(second!.messages.filter((m) => m.role === 'assistant').map((m) => m.content)).toEqual(said.slice(0, 2));
    expect(h.record.errors).toEqual([]);
  });

  it('a check-in the model fails or leaves empty gets the fallback line, and the call goes on', async () => {
    const h = callHarness({ kind, assistant: assistant({ kind }, { speech_config: { silence: modelCheckIns(3) } }) });
    model(h).reply(
      { error: new ProviderError('PROVIDER_HTTP_ERROR', provider(h), 'the model is overloaded', 503) },
      // a function call, though none was offered: not run, and the check-in said nothing
      { calls: [{ name: 'lookup_order', arguments: { order: '1' } }] },
    );
    await h.start();
    await h.until('two check-ins', () => h.heard().filter((t) => t === SILENCE_CHECK_FALLBACK).length === 2, 10_000);
    await h.caller.say('Yes, I am here.');
    await h.until('the reply', () => h.heard().includes('You said: Yes, I am here.'), 5_000);
    h.caller.hangUp();
    const report = await h.untilEnded();
    expect(report.ended_reason).toBe('customer-ended-call');
    expect(report.messages.map((m) => [m.role, m.content])).toEqual([
      ['assistant', 'Hi.'],
      ['assistant', SILENCE_CHECK_FALLBACK],
      ['assistant', SILENCE_CHECK_FALLBACK],
      ['user', 'Yes, I am here.'],
      ['assistant', 'You said: Yes, I am here.'],
    ]);
    expect(h.notifier.toolRequests).toEqual([]);
    // the failure is noted, the empty check-in is not a failure
    expect(report.errors).toEqual([
      {
        code: 'SILENCE_CHECK_IN_FAILED',
        message: `${provider(h)}: the silence check-in failed (the model is overloaded); "${SILENCE_CHECK_FALLBACK}" was said instead`,
        provider: provider(h),
      },
    ]);
    // the caller's turn is a turn like any other: functions offered again
    expect(model(h).requests.at(-1)!.functions).toContain('lookup_order');
  });

  it('the caller speaking over a check-in cuts it, and no fallback follows', async () => {
    const h = callHarness({ kind, assistant: assistant({ kind }, { speech_config: { silence: modelCheckIns(3) } }) });
    model(h).reply({ text: 'Are you still there, or should I call you back later this afternoon?' });
    await h.start();
    await h.until('the check-in playing', () => h.transport.frames.some((f) => h.voice.decode(f.frame)?.text.startsWith('Are you still there, or')), 5_000);
    await h.advance(300);
    // longer than interruption_min_duration (0.5 s): a shorter sound would not cut it
    await h.caller.say('Sorry, I am back, I had to answer the door.');
    await h.until('the reply', () => h.heard().includes('You said: Sorry, I am back, I had to answer the door.'), 5_000);
    expect(h.heard()).not.toContain(SILENCE_CHECK_FALLBACK);
    expect(h.transport.clears.length).toBeGreaterThan(0);
  });
});

describe.each(kinds)('no autonomous silence handling ($kind call)', ({ kind }) => {
  const fields = {
    autonomous_silence_handling: false,
    silence_timeout_seconds: 5,
    // ignored without autonomous handling: no check-in is ever said
    speech_config: { end_call_message: 'Nobody there, goodbye.', silence: { messages: ['Hello?'], first_check_seconds: 1, interval_seconds: 1 } },
  };

  it('says nothing for silence_timeout_seconds, then end_call_message, and hangs up silence-timed-out', async () => {
    const h = callHarness({ kind, assistant: assistant({ kind }, fields) });
    await h.start();
    await h.until('the greeting', () => h.heard().includes('Hi.'));
    await h.advance(4_900);
    expect(h.transport.frames.filter((f) => h.voice.decode(f.frame)?.text !== 'Hi.')).toEqual([]);
    const report = await h.untilEnded(10_000);
    expect(h.heard()).toEqual(['Hi.', 'Nobody there, goodbye.']);
    expect(firstFrameOf(h, 'Nobody there, goodbye.') - h.heardAt('Hi.')).toEqual(about(5_000));
    expect(h.rel(h.transport.hangUps[0]!)).toBeGreaterThanOrEqual(h.heardAt('Nobody there, goodbye.'));
    expect(report.ended_reason).toBe('silence-timed-out');
    expect(report.messages.map((m) => m.content)).toEqual(['Hi.', 'Nobody there, goodbye.']);
    expect(model(h).requests).toEqual([]);
    expect(h.notifier.statuses.at(-1)).toMatchObject({ status: 'ended', extra: { ended_reason: 'silence-timed-out' } });
  });

  it('the caller speaking starts the count again; with no end_call_message it hangs up at once', async () => {
    const h = callHarness({ kind, assistant: assistant({ kind }, { ...fields, speech_config: { ...fields.speech_config, end_call_message: '' } }) });
    await h.start();
    await h.until('the greeting', () => h.heard().includes('Hi.'));
    await h.advance(3_000);
    await h.caller.say('What are your opening hours?');
    await h.until('the reply', () => h.heard().includes('You said: What are your opening hours.'), 5_000);
    const report = await h.untilEnded(10_000);
    expect(h.rel(h.transport.hangUps[0]!) - h.heardAt('You said: What are your opening hours.')).toEqual(about(5_000));
    expect(h.heard()).toEqual(['Hi.', 'You said: What are your opening hours.']);
    expect(report.ended_reason).toBe('silence-timed-out');
  });
});
