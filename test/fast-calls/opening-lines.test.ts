/**
 * Review of issue 29: the lines the call says itself (the recording consent, the voicemail message)
 * are in the record as they were asked for. Before the controller, a pipeline call recorded each
 * of them whole, word for word, the moment it was asked for; the controller records only what was
 * heard once the line is over, so a machine (or caller) that hangs up in the middle of the line
 * loses it from the transcript, the report and the browser's messages.
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
