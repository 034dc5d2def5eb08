/** A test's expectations (src/suites/expectations.ts) and its tools (src/suites/tools.ts), on their own. */
import { describe, expect, it } from 'vitest';
import { endStateFailure, isSubset, stepFailure, type EndState } from '../../src/suites/expectations.js';
import { readVerdict } from '../../src/suites/model.js';
import { TestTools } from '../../src/suites/tools.js';
import type { ToolCallRecord } from '../../src/suites/store.js';
import type { ToolCallRequest } from '../../src/calls/notifier.js';

const call = (name: string, args: Record<string, unknown> = {}): ToolCallRecord => ({ name, arguments: args, node_id: null, answered_by: 'tool_results' });

describe('a script step', () => {
  const state = { node_id: 'booking', status: 'active' as const, ended_reason: null, reply: ['Sure thing.', 'Which day?'], tools: [call('find_slot')] };

  it('is met, or names the first expectation it does not meet', () => {
    expect(stepFailure({ expect_node: 'booking', expect_reply_contains: ['SURE', 'which day'], expect_tool_call: 'find_slot', expect_status: 'active' }, 'script[1]', state)).toBeNull();
    expect(stepFailure({ expect_node: 'bye', expect_reply_contains: 'nope' }, 'script[1]', state)).toBe('script[1].expect_node: node is "booking", expected "bye"');
    expect(stepFailure({ expect_reply_contains: ['sure', 'nope'] }, 'script[0]', state)).toBe(
      'script[0].expect_reply_contains: the reply does not contain "nope" (it was "Sure thing. Which day?")',
    );
    expect(stepFailure({ expect_tool_call: ['find_slot', 'crm'] }, 's', state)).toBe('s.expect_tool_call: tool crm was not called (called: find_slot)');
    expect(stepFailure({ expect_tool_call: 'crm' }, 's', { ...state, tools: [] })).toBe('s.expect_tool_call: tool crm was not called');
    expect(stepFailure({ expect_status: 'ended' }, 's', state)).toBe('s.expect_status: status is active, expected ended');
    expect(stepFailure({ expect_ended_reason: 'assistant-ended-call' }, 's', { ...state, status: 'ended', ended_reason: 'call-transferred' })).toBe(
      's.expect_ended_reason: ended_reason is "call-transferred", expected "assistant-ended-call"',
    );
    expect(stepFailure({ expect_reply_contains: 'x' }, 's', { ...state, reply: [] })).toBe('s.expect_reply_contains: the reply does not contain "x" (it was "(nothing)")');
  });
});

describe('the end state', () => {
  const state: EndState = {
    ended_reason: 'assistant-ended-call',
    nodes_visited: ['greeting', 'booking', 'find_slot', 'confirmed', 'bye'],
    tool_calls: [call('find_slot', { practice: 'acme', when: { day: 'Tue', hour: 10 } }), call('notify', { to: 'ada' })],
    transcript: [
      { role: 'assistant', content: 'Hello.', node_id: 'greeting' },
      { role: 'user', content: 'Book me in', node_id: 'greeting' },
      { role: 'tool', content: '{"secret":1}', node_id: 'find_slot', tool_name: 'find_slot' },
      { role: 'assistant', content: 'Booked.', node_id: 'confirmed' },
    ],
  };

  it('ended_reason, nodes in order as a subsequence, tool calls with a subset of their arguments, transcript patterns', () => {
    expect(
      endStateFailure(
        {
          ended_reason: 'assistant-ended-call',
          nodes_visited: ['greeting', 'confirmed', 'bye'],
          tool_calls: [{ name: 'find_slot', arguments: { when: { day: 'Tue' } } }, { name: 'notify' }],
          transcript_matches: ['^caller: book me in$', 'Booked\\.'],
        },
        state,
      ),
    ).toBeNull();
    expect(endStateFailure({ ended_reason: 'call-transferred' }, state)).toBe('expect.ended_reason: ended_reason is "assistant-ended-call", expected "call-transferred"');
    expect(endStateFailure({ ended_reason: 'x' }, { ...state, ended_reason: null })).toBe('expect.ended_reason: the conversation had not ended, expected "x"');
    expect(endStateFailure({ nodes_visited: ['booking', 'greeting'] }, state)).toBe(
      'expect.nodes_visited[1]: "greeting" was not visited in that order (visited: greeting → booking → find_slot → confirmed → bye)',
    );
    expect(endStateFailure({ tool_calls: [{ name: 'notify' }, { name: 'find_slot' }] }, state)).toMatch(/^expect\.tool_calls\[1\]: no call of find_slot in that order \(calls: find_slot\(/);
    expect(endStateFailure({ tool_calls: [{ name: 'find_slot', arguments: { when: { day: 'Wed' } } }] }, state)).toMatch(
      /^expect\.tool_calls\[0\]: no call of find_slot with arguments \{"when":\{"day":"Wed"\}\} in that order/,
    );
    // the tool's lines are not in the transcript the patterns read
    expect(endStateFailure({ transcript_matches: 'secret' }, state)).toBe('expect.transcript_matches: the transcript does not match /secret/');
    expect(endStateFailure({ transcript_matches: ['Hello', 'nope'] }, state)).toBe('expect.transcript_matches[1]: the transcript does not match /nope/');
  });

  it('structured data: a subset of what was extracted, or why nothing was', () => {
    const want = { structured_data: { day: 'Tuesday', patient: { name: 'Ada' } } };
    expect(endStateFailure(want, { ...state, structured_data: { data: { day: 'Tuesday', patient: { name: 'Ada', age: 40 }, extra: true } } })).toBeNull();
    expect(endStateFailure(want, { ...state, structured_data: { data: { day: 'Monday' } } })).toBe(
      'expect.structured_data: extracted {"day":"Monday"}, expected at least {"day":"Tuesday","patient":{"name":"Ada"}}',
    );
    expect(endStateFailure(want, { ...state, structured_data: { error: "the model's answer is not JSON" } })).toBe("expect.structured_data: the model's answer is not JSON");
    expect(endStateFailure(want, state)).toMatch(/^expect\.structured_data: nothing was extracted/);
  });

  it('subsets compare objects field by field and everything else whole', () => {
    expect(isSubset({ a: [1, 2] }, { a: [1, 2], b: 1 })).toBe(true);
    expect(isSubset({ a: [1] }, { a: [1, 2] })).toBe(false);
    expect(isSubset({ a: null }, { a: null })).toBe(true);
    expect(isSubset({ a: undefined }, {})).toBe(false);
    expect(isSubset({}, [])).toBe(false);
  });
});

describe("a judge's verdict", () => {
  it('is read from the function arguments or JSON in the text', () => {
    expect(readVerdict('{"passed": true, "reason": "fine"}')).toEqual({ passed: true, reason: 'fine' });
    expect(readVerdict('Verdict: {"passed": false}')).toEqual({ passed: false, reason: '(no reason given)' });
    expect(readVerdict('PASS')).toBeNull();
    expect(readVerdict('{"passed": "yes"}')).toBeNull();
  });
});

describe("a test's tools", () => {
  const request = (id: string, name: string): ToolCallRequest => ({ id, name, arguments: { n: id } });

  it('tool_results answer the tools they name; the rest go to the exchange; every call is kept with who answered it', async () => {
    const forwarded: ToolCallRequest[][] = [];
    const tools = new TestTools({ lookup: { found: true }, nothing: null }, async (calls) => {
      forwarded.push(calls);
      return calls.map((c) => (c.name === 'broken' ? { tool_call_id: c.id, error: 'HTTP 500' } : { tool_call_id: c.id, result: `url ${c.id}` }));
    });
    const outcomes = await tools.call([request('1', 'lookup'), request('2', 'crm'), request('3', 'nothing'), request('4', 'broken')], { nodeId: 'n' });
    expect(outcomes).toEqual([
      { tool_call_id: '1', result: { found: true } },
      { tool_call_id: '2', result: 'url 2' },
      { tool_call_id: '3', result: null },
      { tool_call_id: '4', error: 'HTTP 500' },
    ]);
    expect(forwarded.map((calls) => calls.map((c) => c.name))).toEqual([['crm', 'broken']]);
    expect(tools.calls).toEqual([
      { name: 'lookup', arguments: { n: '1' }, node_id: 'n', answered_by: 'tool_results', result: { found: true } },
      { name: 'crm', arguments: { n: '2' }, node_id: 'n', answered_by: 'url', result: 'url 2' },
      { name: 'nothing', arguments: { n: '3' }, node_id: 'n', answered_by: 'tool_results', result: null },
      { name: 'broken', arguments: { n: '4' }, node_id: 'n', answered_by: 'url', error: 'HTTP 500' },
    ]);
    // all answered here: the exchange is not called at all; async tools get no results back
    expect(await tools.call([request('5', 'lookup')], { async: true })).toEqual([]);
    expect(forwarded).toHaveLength(1);
    expect(tools.since(4)).toEqual([{ name: 'lookup', arguments: { n: '5' }, node_id: null, answered_by: 'tool_results', result: { found: true } }]);
  });
});
