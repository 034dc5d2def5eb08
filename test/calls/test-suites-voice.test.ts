/**
 * Voice tests of test suites (DECISIONS 20) over a real call path, in real time: the simulated
 * caller's sandbox voice through the assistant's STT, turn-taking and TTS (pipeline and realtime),
 * its tools answered by `tool_results`, the call kept in the call log as a `test_call`, and nothing
 * sent: no status-update, no report, no tool-calls to the tool's URL.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, realtimeSandboxAssistant, sandboxAssistant, startCallingServer, type CallingServer } from '../helpers/calls.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';

let s: CallingServer;
let tools: Receiver;
beforeAll(async () => {
  s = await startCallingServer();
  tools = await startReceiver();
}, 120_000);
afterAll(async () => {
  await s?.close();
  await tools?.close();
});

function desk(toolUrl: string) {
  return {
    version: 1,
    entry_node: 'greeting',
    nodes: [
      { id: 'greeting', type: 'conversation', first_line: 'Hello, this is Acme Dental.' },
      { id: 'booking', type: 'conversation', first_line: 'Which day suits you?' },
      { id: 'find_slot', type: 'tool', tool_name: 'find_slot', url: toolUrl, arguments: { practice: 'acme' } },
      { id: 'confirmed', type: 'conversation', first_line: 'Your appointment is booked.' },
      { id: 'bye', type: 'end', first_line: 'Thank you for calling, goodbye.' },
    ],
    edges: [
      { from: 'greeting', to: 'booking', description: 'the caller wants to book an appointment', message: 'Sure thing.' },
      { from: 'booking', to: 'find_slot', description: 'the caller names the day for the appointment' },
      { from: 'find_slot', to: 'confirmed' },
      { from: 'confirmed', to: 'bye', description: 'the caller says goodbye or is finished' },
    ],
  };
}

async function runSuite(body: Record<string, unknown>): Promise<any> {
  const created = await s.api('POST', '/test-suites', body);
  expect(created.status, JSON.stringify(created.json)).toBe(201);
  const id = created.json.test_suite.id;
  const started = await s.api('POST', `/test-suites/${id}/runs`);
  expect(started.status).toBe(202);
  return eventually(
    'the run to end',
    async () => {
      const r = await s.api('GET', `/test-suites/${id}/runs/${started.json.run.id}`);
      return r.json.run.status !== 'running' && r.json.run;
    },
    90_000,
    200,
  );
}

describe('voice tests', () => {
  it('script, simulated caller and judge, and a failing step, over real calls that send nothing', async () => {
    tools.requests.length = 0;
    s.receiver.requests.length = 0;
    const assistantId = await s.createAssistant(sandboxAssistant());
    const workflowId = await s.createWorkflow(desk(tools.url));
    const run = await runSuite({
      name: 'Voice',
      assistant_id: assistantId,
      workflow_id: workflowId,
      tests: [
        {
          name: 'books by voice',
          mode: 'voice',
          tool_results: { find_slot: { slot: 'Tuesday 10:00' } },
          script: [
            { expect_node: 'greeting', expect_reply_contains: 'Acme Dental' },
            { say: 'I would like to book an appointment', expect_node: 'booking', expect_reply_contains: ['Sure thing', 'Which day'] },
            { say: 'The day I want is Tuesday', expect_tool_call: 'find_slot', expect_node: 'confirmed', expect_reply_contains: 'booked' },
            { say: 'Thanks, goodbye', expect_status: 'ended', expect_ended_reason: 'assistant-ended-call' },
          ],
          expect: { nodes_visited: ['greeting', 'booking', 'find_slot', 'confirmed', 'bye'], transcript_matches: '^Caller: The day I want is Tuesday$' },
        },
        {
          name: 'a caller by voice',
          mode: 'voice',
          caller: { persona: 'A patient.', goal: 'I would like to book an appointment. Thanks, goodbye.', max_turns: 3 },
          expect: { nodes_visited: ['booking'] },
          judge: { rubric: 'The assistant must say "Which day" and never "invoice".' },
        },
        { name: 'wrong node by voice', mode: 'voice', script: [{ say: 'I would like to book an appointment', expect_node: 'bye' }] },
      ],
    });
    const r = Object.fromEntries(run.results.map((x: any) => [x.name, x]));

    expect(r['books by voice']).toMatchObject({ passed: true, failure: null, mode: 'voice', chat_id: null, ended_reason: 'assistant-ended-call', caller_turns: 3 });
    expect(r['books by voice'].tool_calls).toEqual([{ name: 'find_slot', arguments: { practice: 'acme' }, node_id: 'find_slot', answered_by: 'tool_results', result: { slot: 'Tuesday 10:00' } }]);
    // what the assistant heard the caller say, through its own STT
    expect(r['books by voice'].transcript.filter((l: any) => l.role === 'user').map((l: any) => l.content)).toEqual([
      'I would like to book an appointment',
      'The day I want is Tuesday',
      'Thanks, goodbye',
    ]);

    expect(r['a caller by voice']).toMatchObject({ passed: true, caller_turns: 2, ended_reason: 'customer-ended-call', judge: { passed: true } });

    // the test is over at its first failed step: the caller hangs up
    expect(r['wrong node by voice']).toMatchObject({ passed: false, failure: 'script[0].expect_node: node is "booking", expected "bye"', ended_reason: 'customer-ended-call' });

    // each is a test_call in the call log, and nothing was sent anywhere
    const call = await s.api('GET', `/calls/${r['books by voice'].call_id}`);
    expect(call.json.call).toMatchObject({ type: 'test_call', transport: 'test', status: 'ended', ended_reason: 'assistant-ended-call', phone_number: null, customer: null, workflow_id: workflowId });
    expect(call.json.call.transcript).toContain('Caller: The day I want is Tuesday');
    const listed = await s.api('GET', '/calls?type=test_call');
    expect(listed.json.calls.map((c: any) => c.id).sort()).toEqual(run.results.map((x: any) => x.call_id).sort());
    expect(tools.requests).toEqual([]);
    expect(s.receiver.requests).toEqual([]);
  }, 120_000);

  it('a realtime assistant (sandbox-realtime) hears the sandbox voice itself', async () => {
    const assistantId = await s.createAssistant(realtimeSandboxAssistant());
    const workflowId = await s.createWorkflow(desk(tools.url));
    const run = await runSuite({
      name: 'Realtime voice',
      assistant_id: assistantId,
      workflow_id: workflowId,
      tests: [
        {
          name: 'books',
          mode: 'voice',
          script: [
            { expect_reply_contains: 'Acme Dental' },
            { say: 'I would like to book an appointment', expect_node: 'booking', expect_reply_contains: 'Which day' },
          ],
        },
      ],
    });
    expect(run.results[0]).toMatchObject({ passed: true, ended_reason: 'customer-ended-call' });
  }, 120_000);
});
