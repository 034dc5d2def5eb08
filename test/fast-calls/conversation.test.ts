/**
 * A whole conversation on both kinds of call, on the memory transport and fake timers: an
 * assistant with no workflow says `first_message`, answers the caller in the model's words, and
 * when the caller hangs up the call ends `customer-ended-call` with the conversation in its
 * record, its status update and its report, the carrier leg left alone. (The same over a real
 * socket, once per family: test/calls/in-call.test.ts, realtime.test.ts, web-call.test.ts.)
 */
import { describe, expect, it } from 'vitest';
import { callHarness, useFastCalls } from '../helpers/call-harness.js';

useFastCalls();

const kinds = [{ kind: 'pipeline' as const }, { kind: 'realtime' as const }];
const GREETING = 'Hi there, how can I help?';

describe.each(kinds)('an assistant with no workflow ($kind call)', ({ kind }) => {
  it('says first_message, answers the caller in its own words, and ends customer-ended-call when the caller hangs up', async () => {
    const h = callHarness({ kind, assistant: { first_message: GREETING } });
    (kind === 'realtime' ? h.realtime : h.llm).reply({ text: 'Okay, we open at nine.' });
    await h.start();
    await h.until('the greeting', () => h.heard().includes(GREETING));
    await h.caller.say('What are your opening hours?');
    await h.until('the reply', () => h.heard().includes('Okay, we open at nine.'), 10_000);
    h.caller.hangUp();
    const report = await h.untilEnded(5_000);

    expect(h.heard()).toEqual([GREETING, 'Okay, we open at nine.']);
    expect(report.ended_reason).toBe('customer-ended-call');
    expect(report.messages.map((m) => [m.role, m.content])).toEqual([
      ['assistant', GREETING],
      ['user', 'What are your opening hours?'],
      ['assistant', 'Okay, we open at nine.'],
    ]);
    expect(report.workflow_id).toBeNull();
    expect(h.notifier.statuses.at(-1)).toMatchObject({ status: 'ended', extra: { ended_reason: 'customer-ended-call' } });
    // the caller hung up: nothing to hang up at the carrier
    expect(h.transport.hangUps).toEqual([]);
    expect(h.transport.closedAt).not.toBeNull();
  });
});
