/** The sandbox model playing a test suite's simulated caller and judge (src/providers/sandbox/roles.ts, docs/sandbox.md): fixed rules, the same answer every time. */
import { describe, expect, it } from 'vitest';
import { createSandboxLlm } from '../../src/providers/sandbox/llm.js';
import { goalLines, rubricPhrases } from '../../src/providers/sandbox/roles.js';
import type { LlmEvent, LlmFunction, LlmMessage } from '../../src/providers/types.js';
import { callerFunctions, callerMessages, judgeFunctions, judgeMessages } from '../../src/suites/prompts.js';
import { judgeTranscript, nextCallerMove } from '../../src/suites/model.js';
import type { TranscriptLine } from '../../src/suites/store.js';

const sandbox = createSandboxLlm();
const providers = { llm: new Map([['sandbox', sandbox]]) };
const config = { provider: 'sandbox', model: 'sandbox' };
const signal = new AbortController().signal;

async function events(messages: LlmMessage[], tools: LlmFunction[]): Promise<LlmEvent[]> {
  const out: LlmEvent[] = [];
  for await (const e of sandbox.stream({ config, messages, tools })) out.push(e);
  return out;
}

const line = (role: TranscriptLine['role'], content: string): TranscriptLine => ({ role, content, node_id: null });

describe('the sandbox caller', () => {
  const caller = { persona: 'Brief and polite.', goal: 'I would like to book an appointment. The day I want is Tuesday!\nThanks, goodbye.' };

  it("says its goal's sentences and lines, one per turn, then hangs up with end_call", async () => {
    expect(goalLines(caller.goal)).toEqual(['I would like to book an appointment.', 'The day I want is Tuesday!', 'Thanks, goodbye.']);
    const transcript: TranscriptLine[] = [line('assistant', 'Hello, this is Acme Dental.')];
    const said: string[] = [];
    for (let turn = 0; turn < 5; turn++) {
      const move = await nextCallerMove(providers, config, caller, transcript, signal);
      if (move.kind === 'hang-up') {
        expect(move.reason).toBe('every line of the goal has been said');
        break;
      }
      said.push(move.text);
      transcript.push(line('user', move.text), line('assistant', 'Okay.'));
    }
    expect(said).toEqual(goalLines(caller.goal));
  });

  it('is recognised by its instructions only, counts its turns by its own messages, and asks nothing of a tool', async () => {
    const messages = callerMessages(caller, [line('assistant', 'Hi'), line('tool', '{}'), line('assistant', 'there'), line('user', 'I would like to book an appointment.')]);
    // the two assistant lines of one turn are one message; tool lines are left out
    expect(messages.slice(1)).toEqual([
      { role: 'user', content: 'Hi there' },
      { role: 'assistant', content: 'I would like to book an appointment.' },
    ]);
    const second = await events(messages, callerFunctions);
    expect(second.filter((e) => e.type === 'text').map((e) => (e as { text: string }).text).join('')).toBe('The day I want is Tuesday!');
    // an empty conversation still gets the first line
    expect((await nextCallerMove(providers, config, caller, [], signal)).kind).toBe('say');
  });
});

describe('the sandbox judge', () => {
  const transcript = [line('assistant', 'Your appointment is booked.'), line('user', 'Thanks'), line('assistant', 'Thank you for calling, goodbye.')];

  it('quoted phrases must be in the transcript, any case; after not, never, no or without they must not', async () => {
    expect(rubricPhrases('Must say "Booked" and “goodbye”. It must never say "invoice"; no "refund" either. Then "thanks".')).toEqual([
      { phrase: 'Booked', absent: false },
      { phrase: 'goodbye', absent: false },
      { phrase: 'invoice', absent: true },
      { phrase: 'refund', absent: true },
      { phrase: 'thanks', absent: false },
    ]);
    expect(await judgeTranscript(providers, config, 'The assistant says "BOOKED" and "goodbye", and never "invoice".', transcript, signal)).toEqual({
      passed: true,
      reason: 'every quoted phrase of the rubric holds ("BOOKED", "goodbye", not "invoice")',
    });
    expect(await judgeTranscript(providers, config, 'It must say "cancelled".', transcript, signal)).toEqual({
      passed: false,
      reason: 'the transcript does not contain "cancelled"',
    });
    expect(await judgeTranscript(providers, config, "It doesn't say \"goodbye\".", transcript, signal)).toEqual({
      passed: false,
      reason: 'the transcript contains "goodbye", which the rubric rules out',
    });
  });

  it("with no quoted phrase: every content word of the rubric must be in the transcript", async () => {
    expect(await judgeTranscript(providers, config, 'The appointment is booked.', transcript, signal)).toMatchObject({ passed: true });
    expect(await judgeTranscript(providers, config, 'The appointment was rescheduled politely.', transcript, signal)).toEqual({
      passed: false,
      reason: "the transcript lacks the rubric's words: rescheduled, politely",
    });
  });

  it('answers with one verdict call, the same every time', async () => {
    const messages = judgeMessages('Say "booked".', transcript);
    const first = await events(messages, judgeFunctions);
    expect(first).toEqual(await events(messages, judgeFunctions));
    expect(first[0]).toMatchObject({ type: 'tool_calls', calls: [{ name: 'verdict', arguments: JSON.stringify({ passed: true, reason: 'every quoted phrase of the rubric holds ("booked")' }) }] });
  });
});
