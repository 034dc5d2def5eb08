/**
 * Test suites through the API of a real listening server (real HTTP, the sandbox providers, a
 * real tool server; PostgreSQL and Redis when DATABASE_URL / REDIS_URL are set): the resource,
 * every problem of a bad suite in one 400, other organizations, runs with passing and failing
 * tests (scripts, simulated callers, judges, hermetic tools), a hung vendor, and that runs send
 * nothing but the tool-calls of tools they do not answer.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, sandboxAssistant, startCallingServer, type CallingServer } from '../helpers/calls.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';
import { startFakeOpenAiChat } from '../fakes/openai-chat.js';
import { TestRun, TestSuite } from '../../src/api/test-suites.js';
import { TestSuiteCreate } from '../../src/suites/schema.js';
import { testRunExample, testSuiteCreateExample, testSuiteExample } from '../../src/api/test-suite-examples.js';

let s: CallingServer;
let tools: Receiver;
let otherKey: string;

beforeAll(async () => {
  tools = await startReceiver();
  s = await startCallingServer();
  otherKey = (await s.store.keys.createKey('Other suites org')).key;
}, 120_000);
afterAll(async () => {
  await s?.close();
  await tools?.close();
});

async function http(method: string, path: string, body?: unknown, key: string = s.key): Promise<{ status: number; json: any }> {
  const res = await fetch(`${s.baseUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }),
  });
  const text = await res.text();
  return { status: res.status, json: text ? JSON.parse(text) : null };
}

/** Greeting → booking → a slot lookup (tool node) → confirmed → bye, with an assistant tool and a global billing node. */
function deskDefinition(toolUrl: string) {
  return {
    version: 1,
    entry_node: 'greeting',
    nodes: [
      { id: 'greeting', type: 'conversation', first_line: 'Hello {{customer_name}}, this is Acme Dental.' },
      { id: 'booking', type: 'conversation', first_line: 'Which day suits you?' },
      { id: 'find_slot', type: 'tool', tool_name: 'find_slot', url: toolUrl, arguments: { practice: 'acme', rush: false } },
      { id: 'confirmed', type: 'conversation', first_line: 'Your appointment is booked.' },
      { id: 'billing', type: 'conversation', global: true, global_description: 'the caller has a question about an invoice', first_line: 'I can help with your invoice.' },
      { id: 'bye', type: 'end', first_line: 'Thank you for calling, goodbye.' },
    ],
    edges: [
      { from: 'greeting', to: 'booking', description: 'the caller wants to book an appointment', message: 'Sure thing.' },
      { from: 'booking', to: 'find_slot', description: 'the caller names the day for the appointment' },
      { from: 'find_slot', to: 'confirmed' },
      { from: 'confirmed', to: 'bye', description: 'the caller says goodbye or is finished' },
      { from: 'billing', to: 'bye', description: 'the caller says goodbye or is finished' },
    ],
  };
}

const deskAssistant = (toolUrl: string) =>
  sandboxAssistant({
    llm_config: {
      provider: 'sandbox',
      tools: [
        {
          name: 'check_insurance',
          description: "check whether the practice takes the caller's insurance plan",
          url: toolUrl,
          parameters: { type: 'object', properties: { plan: { type: 'string' } }, required: ['plan'] },
        },
      ],
    },
  });

let desk: { assistantId: string; workflowId: string } | null = null;
async function frontDesk() {
  desk ??= { assistantId: await s.createAssistant(deskAssistant(tools.url)), workflowId: await s.createWorkflow(deskDefinition(tools.url)) };
  return desk;
}

async function createSuite(tests: unknown[], extra: Record<string, unknown> = {}): Promise<string> {
  const { assistantId, workflowId } = await frontDesk();
  const r = await http('POST', '/test-suites', { name: 'Front desk', assistant_id: assistantId, workflow_id: workflowId, tests, ...extra });
  expect(r.status, JSON.stringify(r.json)).toBe(201);
  return r.json.test_suite.id;
}

/** Starts a run and polls it to its end. */
async function run(suiteId: string, body?: unknown, timeoutMs = 30_000): Promise<any> {
  const started = await http('POST', `/test-suites/${suiteId}/runs`, body);
  expect(started.status, JSON.stringify(started.json)).toBe(202);
  expect(started.json.run.status).toBe('running');
  return eventually(
    'the run to end',
    async () => {
      const r = await http('GET', `/test-suites/${suiteId}/runs/${started.json.run.id}`);
      return r.json.run.status !== 'running' && r.json.run;
    },
    timeoutMs,
  );
}

const byName = (run: any) => Object.fromEntries(run.results.map((r: any) => [r.name, r]));

describe('the test suite resource', () => {
  it('create (201, defaults filled), get, list summaries, patch (fields replaced whole, checked again), delete (204)', async () => {
    const { assistantId, workflowId } = await frontDesk();
    const created = await http('POST', '/test-suites', {
      name: 'Regressions',
      assistant_id: assistantId,
      workflow_id: workflowId,
      tests: [{ name: 'opens', script: [{ expect_node: 'greeting' }] }, { name: 'caller', caller: { persona: 'A patient.', goal: 'Book.' } }],
    });
    expect(created.status, JSON.stringify(created.json)).toBe(201);
    const suite = created.json.test_suite;
    expect(TestSuite.safeParse(suite).success).toBe(true);
    expect(suite).toMatchObject({ name: 'Regressions', assistant_id: assistantId, workflow_id: workflowId, llm_config: null });
    expect(suite.tests).toEqual([
      { name: 'opens', mode: 'chat', script: [{ expect_node: 'greeting' }] },
      { name: 'caller', mode: 'chat', caller: { persona: 'A patient.', goal: 'Book.', max_turns: 10 } },
    ]);
    expect((await http('GET', `/test-suites/${suite.id}`)).json.test_suite).toEqual(suite);
    const listed = (await http('GET', '/test-suites')).json.test_suites;
    expect(listed).toContainEqual({ id: suite.id, name: 'Regressions', assistant_id: assistantId, workflow_id: workflowId, test_count: 2, created_at: suite.created_at, updated_at: suite.updated_at });

    const patched = await http('PATCH', `/test-suites/${suite.id}`, { name: 'Renamed', workflow_id: null, llm_config: { provider: 'sandbox' }, tests: [{ name: 'alone', script: [{ expect_node: 'assistant' }] }] });
    expect(patched.status, JSON.stringify(patched.json)).toBe(200);
    expect(patched.json.test_suite).toMatchObject({ name: 'Renamed', workflow_id: null, llm_config: { provider: 'sandbox' }, tests: [{ name: 'alone', mode: 'chat' }] });
    // the patched suite is checked whole: the assistant alone has no node "greeting"
    const bad = await http('PATCH', `/test-suites/${suite.id}`, { tests: [{ name: 'x', script: [{ expect_node: 'greeting' }] }], colour: 'red' });
    expect(bad.status).toBe(400);
    expect(bad.json.details).toEqual(['colour: unknown field', 'tests[0].script[0].expect_node: unknown node "greeting" (nodes: "assistant")']);
    expect((await http('GET', `/test-suites/${suite.id}`)).json.test_suite.name).toBe('Renamed');

    expect((await http('DELETE', `/test-suites/${suite.id}`)).status).toBe(204);
    expect((await http('GET', `/test-suites/${suite.id}`)).status).toBe(404);
    expect((await http('DELETE', `/test-suites/${suite.id}`)).status).toBe(404);
  });

  it('every problem of a suite in one 400: shape, unknown nodes, tools, assistant, workflow, model, patterns, names, voice', async () => {
    const { assistantId, workflowId } = await frontDesk();
    const r = await http('POST', '/test-suites', {
      name: '',
      assistant_id: assistantId,
      workflow_id: workflowId,
      llm_config: { provider: 'nope' },
      extra: true,
      tests: [
        {
          name: 'twice',
          tool_results: { find_slot: {}, ghost_tool: {} },
          script: [{ say: 'hi', expect_node: 'nowhere', expect_tool_call: ['find_slot', 'zap'] }, {}],
          expect: { nodes_visited: ['greeting', 'attic'], tool_calls: [{ name: 'check_insurance' }, { name: 'frobnicate' }], transcript_matches: ['ok', '(unclosed'] },
        },
        { name: 'twice', caller: { persona: 'p', goal: 'g', max_turns: 0 }, script: [{ say: 'x' }] },
        { name: 'neither', mode: 'phone', judge: { rubric: '' } },
      ],
    });
    expect(r.status).toBe(400);
    expect(r.json.error).toBe('Invalid request');
    const missing = (wanted: string[]) => wanted.filter((d) => !r.json.details.includes(d));
    expect(
      missing([
        'name: must not be empty',
        'extra: unknown field',
        'tests[0].script[1]: a step needs `say` or an expectation',
        'tests[0].script[0].expect_node: unknown node "nowhere" (nodes: "greeting", "booking", "find_slot", "confirmed", "billing", "bye")',
        'tests[0].script[0].expect_tool_call[1]: unknown tool "zap" (tools: "check_insurance", "find_slot")',
        'tests[0].expect.nodes_visited[1]: unknown node "attic" (nodes: "greeting", "booking", "find_slot", "confirmed", "billing", "bye")',
        'tests[0].expect.tool_calls[1].name: unknown tool "frobnicate" (tools: "check_insurance", "find_slot")',
        'tests[0].tool_results.ghost_tool: unknown tool "ghost_tool" (tools: "check_insurance", "find_slot")',
        'tests[1]: a test needs either `script` or `caller` (not both)',
        'tests[1].caller.max_turns: must be at least 1',
        'tests[1].name: "twice" is the name of tests[0] too; test names are unique in a suite',
        'tests[2]: a test needs either `script` or `caller` (not both)',
        'tests[2].judge.rubric: must not be empty',
      ]),
    ).toEqual([]);
    expect(r.json.details.some((d: string) => d.startsWith('tests[2].mode: '))).toBe(true);
    expect(r.json.details.some((d: string) => d.startsWith('tests[0].expect.transcript_matches[1]: not a regular expression ('))).toBe(true);
    expect(r.json.details.some((d: string) => d.startsWith('llm_config.provider: unknown llm provider "nope"'))).toBe(true);

    const unknown = await http('POST', '/test-suites', {
      name: 'x',
      assistant_id: '00000000-0000-4000-8000-000000000001',
      workflow_id: '00000000-0000-4000-8000-000000000002',
      tests: [{ name: 'a', script: [{ say: 'hi' }] }],
    });
    expect(unknown.status).toBe(400);
    expect(unknown.json.details).toEqual([
      'assistant_id: no assistant with id "00000000-0000-4000-8000-000000000001"',
      'workflow_id: no workflow with id "00000000-0000-4000-8000-000000000002"',
    ]);

    // a voice test needs an assistant that hears the sandbox voice
    const deepgram = await s.createAssistant(sandboxAssistant({ stt_config: { provider: 'deepgram' } }));
    const voice = await http('POST', '/test-suites', { name: 'x', assistant_id: deepgram, tests: [{ name: 'v', mode: 'voice', script: [{ say: 'hi' }] }] });
    expect(voice.status).toBe(400);
    expect(voice.json.details).toEqual([expect.stringMatching(/^tests\[0\]\.mode: voice tests speak with the sandbox voice: the assistant's stt_config\.provider must be "sandbox"/)]);

    // any voice goes: the caller's ear reads the sandbox voice, or the call's record says what was heard
    const otherVoice = await s.createAssistant(sandboxAssistant({ tts_config: { provider: 'elevenlabs', voice_id: 'Rachel' } }));
    expect((await http('POST', '/test-suites', { name: 'x', assistant_id: otherVoice, tests: [{ name: 'v', mode: 'voice', script: [{ say: 'hi' }] }] })).status).toBe(201);

    for (const body of ['[]', 'null', '"suite"']) expect((await http('POST', '/test-suites', body)).status).toBe(400);
  });

  it("another organization's suites and runs do not exist (404), nor its assistants and workflows (400)", async () => {
    const suiteId = await createSuite([{ name: 'opens', script: [{ expect_node: 'greeting' }] }]);
    const done = await run(suiteId);
    for (const [method, path, body] of [
      ['GET', `/test-suites/${suiteId}`],
      ['PATCH', `/test-suites/${suiteId}`, { name: 'mine now' }],
      ['DELETE', `/test-suites/${suiteId}`],
      ['POST', `/test-suites/${suiteId}/runs`],
      ['GET', `/test-suites/${suiteId}/runs`],
      ['GET', `/test-suites/${suiteId}/runs/${done.id}`],
    ] as const) {
      const r = await http(method, path, body, otherKey);
      expect(r.status, `${method} ${path}`).toBe(404);
      expect(r.json.error).toBe('Not found');
    }
    expect((await http('GET', '/test-suites', undefined, otherKey)).json.test_suites).toEqual([]);
    expect((await http('GET', `/test-suites/${suiteId}`)).status).toBe(200);
    // not a UUID, or a run of another suite
    expect((await http('GET', '/test-suites/nope')).status).toBe(404);
    expect((await http('GET', `/test-suites/${suiteId}/runs/nope`)).status).toBe(404);
    const other = await createSuite([{ name: 'opens', script: [{ expect_node: 'greeting' }] }]);
    expect((await http('GET', `/test-suites/${other}/runs/${done.id}`)).status).toBe(404);

    const { assistantId, workflowId } = await frontDesk();
    const theirs = await http('POST', '/test-suites', { name: 'x', assistant_id: assistantId, workflow_id: workflowId, tests: [{ name: 'a', script: [{ say: 'hi' }] }] }, otherKey);
    expect(theirs.status).toBe(400);
    expect(theirs.json.details).toEqual([`assistant_id: no assistant with id "${assistantId}"`, `workflow_id: no workflow with id "${workflowId}"`]);
  });
});

describe('runs', () => {
  it('passing and failing tests, each with the first failed expectation, its transcript, nodes, tool calls, judge and time; tools answered by tool_results are never called', async () => {
    tools.requests.length = 0;
    s.receiver.requests.length = 0;
    tools.setDefault((req) => {
      const message = JSON.parse(req.body).message;
      return { body: { results: message.tool_calls.map((c: { id: string }) => ({ tool_call_id: c.id, result: { slot: 'from the URL' } })) } };
    });
    const suiteId = await createSuite([
      {
        name: 'books',
        variables: { customer_name: 'Ada' },
        tool_results: { find_slot: { slot: 'Tuesday 10:00' } },
        script: [
          { expect_node: 'greeting', expect_reply_contains: 'Hello Ada' },
          { say: 'I would like to book an appointment', expect_node: 'booking', expect_reply_contains: ['Sure thing', 'Which day'] },
          { say: 'The day I want is Tuesday', expect_tool_call: 'find_slot', expect_node: 'confirmed', expect_reply_contains: 'booked' },
          { say: 'Thanks, that is all, goodbye', expect_status: 'ended', expect_ended_reason: 'assistant-ended-call' },
        ],
        expect: {
          ended_reason: 'assistant-ended-call',
          nodes_visited: ['greeting', 'find_slot', 'bye'],
          tool_calls: [{ name: 'find_slot', arguments: { practice: 'acme' } }],
          transcript_matches: ['^Caller: The day I want is Tuesday$', 'booked'],
        },
      },
      { name: 'wrong node', script: [{ say: 'I would like to book an appointment', expect_node: 'billing' }, { say: 'never said' }] },
      { name: 'tool by URL', script: [{ say: 'Do you take my insurance plan?', expect_tool_call: 'check_insurance', expect_reply_contains: 'from the URL' }] },
      {
        name: 'caller and judge',
        tool_results: { find_slot: { slot: 'Tuesday 10:00' } },
        caller: { persona: 'A patient in a hurry.', goal: 'I would like to book an appointment. The day I want is Tuesday. Thanks, goodbye.', max_turns: 5 },
        expect: { ended_reason: 'assistant-ended-call' },
        judge: { rubric: 'The assistant must say "booked" and "goodbye", and never mention an "invoice".' },
      },
      {
        name: 'judged and failed',
        caller: { persona: 'A patient.', goal: 'I have a question about my invoice.', max_turns: 3 },
        expect: { nodes_visited: ['billing'] },
        judge: { rubric: 'The assistant must never say "invoice".' },
      },
      { name: 'max turns', caller: { persona: 'Chatty.', goal: 'Hello. Hello again. And again. Once more.', max_turns: 2 }, expect: { ended_reason: 'customer-ended-call' } },
      { name: 'wrong tool call arguments', tool_results: { find_slot: {} }, script: [{ say: 'I would like to book an appointment' }, { say: 'The day I want is Tuesday' }], expect: { tool_calls: [{ name: 'find_slot', arguments: { practice: 'other' } }] } },
    ]);
    const done = await run(suiteId);
    expect(TestRun.safeParse(done).success).toBe(true);
    expect(done).toMatchObject({ status: 'failed', summary: { total: 7, passed: 4, failed: 3, running: 0, pending: 0 } });
    expect(done.duration_ms).toBeGreaterThanOrEqual(0);
    const r = byName(done);

    expect(r.books).toMatchObject({ status: 'passed', passed: true, failure: null, mode: 'chat', call_id: null, ended_reason: 'assistant-ended-call', caller_turns: 3, judge: null });
    expect(r.books.nodes_visited).toEqual(['greeting', 'booking', 'find_slot', 'confirmed', 'bye']);
    expect(r.books.tool_calls).toEqual([{ name: 'find_slot', arguments: { practice: 'acme', rush: false }, node_id: 'find_slot', answered_by: 'tool_results', result: { slot: 'Tuesday 10:00' } }]);
    expect(r.books.transcript).toContainEqual({ role: 'tool', content: '{"slot":"Tuesday 10:00"}', node_id: 'find_slot', tool_name: 'find_slot' });
    expect(r.books.transcript[0]).toEqual({ role: 'assistant', content: 'Hello Ada, this is Acme Dental.', node_id: 'greeting' });
    expect(r.books.duration_ms).toBeGreaterThan(0);
    expect(Date.parse(r.books.started_at)).toBeGreaterThan(0);

    expect(r['wrong node']).toMatchObject({ passed: false, failure: 'script[0].expect_node: node is "booking", expected "billing"', caller_turns: 1 });
    expect(r['wrong node'].transcript.map((l: any) => l.content)).not.toContain('never said');

    expect(r['tool by URL']).toMatchObject({ passed: true });
    expect(r['tool by URL'].tool_calls).toEqual([
      { name: 'check_insurance', arguments: { plan: 'Do you take my insurance plan?' }, node_id: null, answered_by: 'url', result: { slot: 'from the URL' } },
    ]);

    expect(r['caller and judge']).toMatchObject({ passed: true, caller_turns: 3, judge: { passed: true, reason: expect.stringContaining('"booked"') } });
    expect(r['caller and judge'].transcript.filter((l: any) => l.role === 'user').map((l: any) => l.content)).toEqual([
      'I would like to book an appointment.',
      'The day I want is Tuesday.',
      'Thanks, goodbye.',
    ]);
    expect(r['judged and failed']).toMatchObject({
      passed: false,
      failure: 'judge: the transcript contains "invoice", which the rubric rules out',
      judge: { passed: false },
      ended_reason: 'customer-ended-call',
    });
    expect(r['max turns']).toMatchObject({ passed: true, caller_turns: 2, ended_reason: 'customer-ended-call' });
    // (the arguments as stored: PostgreSQL's jsonb may order their keys its own way)
    expect(r['wrong tool call arguments'].failure).toMatch(
      /^expect\.tool_calls\[0\]: no call of find_slot with arguments \{"practice":"other"\} in that order \(calls: find_slot\(\{.*"practice":"acme".*\}\)\)$/,
    );

    // the tool server saw the one tool that tool_results did not answer, as a test chat's; the account webhook nothing
    expect(tools.requests.map((q) => JSON.parse(q.body).message.tool_calls.map((c: { name: string }) => c.name))).toEqual([['check_insurance']]);
    expect(JSON.parse(tools.requests[0]!.body).message.call).toMatchObject({ id: r['tool by URL'].chat_id, type: 'test_chat' });
    expect(s.receiver.requests).toEqual([]);

    // the chats are kept, marked as a test's
    const chat = await http('GET', `/chats/${r.books.chat_id}`);
    expect(chat.json.chat).toMatchObject({ type: 'test_chat', status: 'ended', ended_reason: 'assistant-ended-call', workflow_id: desk!.workflowId });
    expect((await http('GET', '/chats')).json.chats.map((c: any) => c.id)).toContain(r.books.chat_id);

    const runs = (await http('GET', `/test-suites/${suiteId}/runs`)).json.runs;
    expect(runs.map((x: any) => x.id)).toEqual([done.id]);
  });

  it('runs only the tests named; an unknown name, or a bad body, is a 400', async () => {
    const suiteId = await createSuite([
      { name: 'a', script: [{ expect_node: 'greeting' }] },
      { name: 'b', script: [{ expect_node: 'bye' }] },
    ]);
    const done = await run(suiteId, { tests: ['a'] });
    expect(done.results.map((x: any) => [x.name, x.passed])).toEqual([['a', true]]);
    expect(done.status).toBe('passed');
    const unknown = await http('POST', `/test-suites/${suiteId}/runs`, { tests: ['a', 'zz'] });
    expect(unknown.status).toBe(400);
    expect(unknown.json.details).toEqual(['tests[1]: no test named "zz" in the suite']);
    expect((await http('POST', `/test-suites/${suiteId}/runs`, { tests: 'a' })).status).toBe(400);
    expect((await http('POST', `/test-suites/${suiteId}/runs`, { every: true })).json.details).toEqual(['every: unknown field']);
  });

  it('a hung vendor fails its test at its timeout (its request cut), never the run', async () => {
    let cut = 0;
    const hung: Server = createServer((req) => {
      req.resume();
      req.socket.on('close', () => cut++);
    });
    await new Promise<void>((resolve) => hung.listen(0, '127.0.0.1', resolve));
    try {
      const url = `http://127.0.0.1:${(hung.address() as AddressInfo).port}/v1`;
      const suiteId = await createSuite(
        [
          { name: 'scripted', script: [{ say: 'I would like to book an appointment', expect_node: 'booking' }] },
          { name: 'hung caller', timeout_seconds: 2, caller: { persona: 'p', goal: 'Book.' } },
        ],
        { llm_config: { provider: 'custom-llm', url, model: 'stuck' } },
      );
      const started = Date.now();
      const done = await run(suiteId);
      expect(Date.now() - started).toBeLessThan(15_000);
      const r = byName(done);
      expect(r.scripted.passed).toBe(true);
      expect(r['hung caller']).toMatchObject({ passed: false, failure: 'timeout_seconds: the test did not finish within 2 s', caller_turns: 0 });
      expect(r['hung caller'].duration_ms).toBeGreaterThanOrEqual(2_000);
      expect(r['hung caller'].transcript[0]).toMatchObject({ role: 'assistant', content: 'Hello {{customer_name}}, this is Acme Dental.' });
      expect(done.status).toBe('failed');
      await eventually('the hung request to be cut', () => cut > 0, 5_000);
    } finally {
      hung.closeAllConnections();
      await new Promise((resolve) => hung.close(resolve));
    }
  });

  it('a suite whose assistant was deleted: every test fails saying so', async () => {
    const assistantId = await s.createAssistant(sandboxAssistant());
    const r = await http('POST', '/test-suites', { name: 'orphan', assistant_id: assistantId, tests: [{ name: 'a', script: [{ expect_node: 'assistant' }] }] });
    expect(r.status).toBe(201);
    expect((await http('DELETE', `/assistants/${assistantId}`)).status).toBe(204);
    const done = await run(r.json.test_suite.id);
    expect(done.results[0]).toMatchObject({ passed: false, failure: `assistant_id: the suite's assistant ${assistantId} no longer exists` });
  });
});

describe('any catalog LLM as caller, judge and extractor', () => {
  it('an OpenAI-compatible model (custom-llm, the OpenAI wire fake) plays the caller (hanging up with end_call), judges with a verdict call, and fills the structured data the test expects', async () => {
    const fake = await startFakeOpenAiChat({
      apiKey: null,
      completionFor: ({ body }) => {
        const messages = body.messages as { role: string; content: string }[];
        const system = messages.filter((m) => m.role === 'system').map((m) => m.content).join('\n');
        if (system.includes('You are testing a voice assistant')) {
          const said = messages.filter((m) => m.role === 'assistant').length;
          return said === 0 ? { text: ['I need a cleaning on Tuesday.'] } : { toolCalls: [{ name: 'end_call', arguments: '{"reason":"booked"}' }] };
        }
        if (system.includes('You are judging a conversation')) {
          const transcript = messages[messages.length - 1]!.content;
          const passed = transcript.includes('Caller: I need a cleaning on Tuesday.');
          return { toolCalls: [{ name: 'verdict', arguments: JSON.stringify({ passed, reason: passed ? 'the caller was heard' : 'no request heard' }) }] };
        }
        if (system.includes('You extract structured data')) return { text: ['```json\n{"day": "Tuesday", "service": "cleaning"}\n```'] };
        return { text: ['Certainly, Tuesday it is.'] };
      },
    });
    try {
      const llm = { provider: 'custom-llm', url: `${fake.url}/v1`, model: 'fake-model' };
      const assistantId = await s.createAssistant(
        sandboxAssistant({
          llm_config: llm,
          first_message: 'Hello, Acme Dental.',
          analysis_plan: { structured_data_plan: { enabled: true, schema: { type: 'object', properties: { day: { type: 'string' }, service: { type: 'string' } } } }, min_messages_threshold: 2 },
        }),
      );
      const created = await http('POST', '/test-suites', {
        name: 'Real model',
        assistant_id: assistantId,
        llm_config: llm,
        tests: [
          {
            name: 'books',
            caller: { persona: 'A patient.', goal: 'Book a cleaning on Tuesday.' },
            expect: { ended_reason: 'customer-ended-call', structured_data: { day: 'Tuesday' }, transcript_matches: '^Assistant: Certainly, Tuesday it is\\.$' },
            judge: { rubric: 'The caller asks for a cleaning on Tuesday and the assistant agrees.' },
          },
          { name: 'wrong data', caller: { persona: 'A patient.', goal: 'Book.' }, expect: { structured_data: { day: 'Friday' } } },
        ],
      });
      expect(created.status, JSON.stringify(created.json)).toBe(201);
      const done = await run(created.json.test_suite.id);
      const r = byName(done);
      expect(r.books).toMatchObject({ passed: true, caller_turns: 1, judge: { passed: true, reason: 'the caller was heard' }, structured_data: { day: 'Tuesday', service: 'cleaning' } });
      expect(r['wrong data']).toMatchObject({
        passed: false,
        failure: 'expect.structured_data: extracted {"day":"Tuesday","service":"cleaning"}, expected at least {"day":"Friday"}',
      });
      // the caller and the judge were offered their one function each
      const offered = fake.requests.map((q) => ((q.body.tools as { function: { name: string } }[] | undefined) ?? []).map((t) => t.function.name).join(','));
      expect(offered).toContain('end_call');
      expect(offered).toContain('verdict');
    } finally {
      await fake.close();
    }
  });
});

describe('the documented examples', () => {
  it('are what the API takes and answers', () => {
    expect(TestSuiteCreate.safeParse(testSuiteCreateExample).success).toBe(true);
    expect(TestSuite.safeParse(testSuiteExample).success).toBe(true);
    expect(TestRun.safeParse(testRunExample).success).toBe(true);
  });
});
