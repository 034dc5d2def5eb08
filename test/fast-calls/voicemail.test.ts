/**
 * Answering-machine detection's verdict on both kinds of call (`ActiveCall.answeredBy`), on the
 * memory transport and fake timers: a machine gets `voicemail_message` (the beep is over when
 * detection says so), heard whole, then the call hangs up `voicemail`; with no message it hangs
 * up at once; a person goes on with the conversation. (Detection itself, the beep and Twilio's
 * callbacks, over the Twilio stand-in: test/calls/outbound.test.ts.)
 */
import { describe, expect, it } from 'vitest';
import { callHarness, useFastCalls } from '../helpers/call-harness.js';

useFastCalls();

const kinds = [{ kind: 'pipeline' as const }, { kind: 'realtime' as const }];
const GREETING = 'Hi Cy, this is Acme calling about a delivery.';
const MESSAGE = 'Hi Cy, Acme here, please call us back.';

describe.each(kinds)('a machine answers ($kind call)', ({ kind }) => {
  it('gets voicemail_message whole, then the call hangs up (voicemail), answered_by machine', async () => {
    const h = callHarness({ kind, assistant: { first_message: GREETING, voicemail_detection: true, voicemail_message: MESSAGE } });
    await h.start();
    await h.advance(300);
    h.call.answeredBy('machine');
    const verdictAt = h.now();
    const report = await h.untilEnded(20_000);
    expect(report).toMatchObject({ ended_reason: 'voicemail', answered_by: 'machine' });
    expect(h.heard()).toContain(MESSAGE);
    expect(report.messages.map((m) => m.content)).toContain(MESSAGE);
    // the message was played whole before the hang-up through the carrier
    expect(h.transport.hangUps).toHaveLength(1);
    expect(h.rel(h.transport.hangUps[0]!)).toBeGreaterThanOrEqual(h.heardAt(MESSAGE));
    expect(h.heardAt(MESSAGE)).toBeGreaterThan(verdictAt);
    expect(h.notifier.statuses.at(-1)).toMatchObject({ status: 'ended', extra: { ended_reason: 'voicemail' } });
  });

  it('with no voicemail_message, hangs up at once (voicemail)', async () => {
    const h = callHarness({ kind, assistant: { first_message: GREETING, voicemail_detection: true } });
    await h.start();
    await h.advance(300);
    const framesBefore = h.transport.frames.length;
    h.call.answeredBy('machine');
    const verdictAt = h.now();
    const report = await h.untilEnded(5_000);
    expect(report).toMatchObject({ ended_reason: 'voicemail', answered_by: 'machine' });
    expect(h.rel(h.transport.hangUps[0]!) - verdictAt).toBeLessThanOrEqual(1);
    expect(h.transport.frames.filter((f) => f.sentAt > h.t0 + verdictAt)).toHaveLength(0);
    expect(h.transport.frames.length).toBe(framesBefore);
  });

  it('a person: the conversation goes on, answered_by human', async () => {
    const h = callHarness({ kind, assistant: { first_message: GREETING, voicemail_detection: true, voicemail_message: MESSAGE } });
    await h.start();
    await h.advance(300);
    h.call.answeredBy('human');
    await h.until('the greeting', () => h.heard().includes(GREETING), 10_000);
    await h.caller.say('Yes, speaking.');
    await h.until('the reply', () => h.heard().some((t) => t.startsWith('You said')), 10_000);
    h.caller.hangUp();
    const report = await h.untilEnded(5_000);
    expect(report).toMatchObject({ ended_reason: 'customer-ended-call', answered_by: 'human' });
    expect(h.heard()).not.toContain(MESSAGE);
  });
});
