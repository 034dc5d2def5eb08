/**
 * Review of issue 29: the lines the call says itself (the recording consent, the voicemail message)
 * are in the record as they were asked for. Before the controller, a pipeline call recorded each
 * of them whole, word for word, the moment it was asked for; the controller records only what was
 * heard once the line is over, so a machine (or caller) that hangs up in the middle of the line
 * loses it from the transcript, the report and the browser's messages.
 * And two changes the controller made on a realtime call before its engine starts, pinned here
 * (both fail on 1683b94): max_duration_seconds now ends it, and a key over the consent is not input.
 */
import { describe, expect, it } from 'vitest';
import { callHarness, useFastCalls } from '../helpers/call-harness.js';

useFastCalls();

const voicemail = 'Hello, this is Acme calling about your order. Please call us back at five five five, one two three four.';
const consent = 'This call is recorded.\nPlease stay on the line.';

describe('a pipeline call: the lines it says before and instead of the conversation', () => {
  it('keeps the voicemail message in the report when the machine hangs up in the middle of it', async () => {
    const h = callHarness({ assistant: { voicemail_message: voicemail } });
    await h.start();
    h.call.answeredBy('machine');
    await h.until('the voicemail message under way', () => h.transport.frames.length > 20);
    // the answering machine stops recording and hangs up before the message is over
    h.caller.hangUp();
    const report = await h.untilEnded();
    expect(report.ended_reason).toBe('customer-ended-call');
    expect(report.messages.map((m) => [m.role, m.content])).toEqual([['assistant', voicemail]]);
  });

  it('keeps the recording consent word for word, in the record from when it was asked for', async () => {
    const h = callHarness({ assistant: { recording_consent: { enabled: true, message: consent } } });
    await h.start();
    // the browser is told the line (and GET /calls shows it) as soon as it is said, not once it is over
    expect(h.messages()).toEqual([['assistant', consent]]);
    await h.until('the consent heard', () => h.heard().length > 0 && h.transport.marks.every((m) => m.answeredAt !== null));
    h.caller.hangUp();
    const report = await h.untilEnded();
    expect(report.messages.map((m) => [m.role, m.content])).toEqual([['assistant', consent]]);
  });
});

describe('a realtime call before its engine has started (the recording consent playing)', () => {
  const long = 'This call is recorded. '.repeat(30).trim();

  it('max_duration_seconds ends it exceeded-max-duration, as a pipeline call (before the controller it was lost, and the call ran on)', async () => {
    const h = callHarness({ kind: 'realtime', assistant: { max_duration_seconds: 10, first_message: 'Hi.', recording_consent: { enabled: true, message: long } } });
    await h.start();
    const report = await h.untilEnded();
    expect(report.ended_reason).toBe('exceeded-max-duration');
    expect(report.messages.map((m) => m.content)).not.toContain('Hi.');
  });

  it('a key pressed over it is not caller input, as in a pipeline call (before the controller the transcript had "DTMF: 5" ahead of the consent)', async () => {
    const h = callHarness({ kind: 'realtime', assistant: { first_message: 'Hi there.', recording_consent: { enabled: true, message: 'This call is recorded.' } } });
    await h.start();
    await h.until('the consent under way', () => h.transport.frames.length > 5);
    h.caller.press('5');
    await h.until('the first line heard', () => h.heard().includes('Hi there.'));
    h.caller.hangUp();
    const report = await h.untilEnded();
    expect(report.messages.map((m) => [m.role, m.content])).toEqual([
      ['assistant', 'This call is recorded.'],
      ['assistant', 'Hi there.'],
    ]);
  });
});
