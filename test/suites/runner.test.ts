/**
 * The suite runner on a server's runtime (sandbox providers, real webhooks to a real tool server):
 * the bound on tests running at once, and a shutdown in the middle of a run.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { MemoryChatStore } from '../../src/chats/store.js';
import { SuiteRunner } from '../../src/suites/runner.js';
import { SuiteTest } from '../../src/suites/schema.js';
import { eventually, sandboxAssistant, startCallingServer, type CallingServer } from '../helpers/calls.js';
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

/** A suite whose every test calls a tool node at the tool server (which answers after `delayMs`). */
async function slowSuite(count: number) {
  const assistantId = await s.createAssistant(sandboxAssistant());
  const workflowId = await s.createWorkflow({
    version: 1,
    entry_node: 'lookup',
    nodes: [
      { id: 'lookup', type: 'tool', tool_name: 'lookup', url: tools.url, arguments: {} },
      { id: 'done', type: 'conversation', first_line: 'Found it.' },
      { id: 'bye', type: 'end', first_line: 'Bye.' },
    ],
    edges: [
      { from: 'lookup', to: 'done' },
      { from: 'done', to: 'bye', description: 'the caller is finished' },
    ],
  });
  const tests = Array.from({ length: count }, (_, i) => SuiteTest.parse({ name: `t${i}`, script: [{ expect_node: 'done' }] }));
  return s.store.testSuites.create(s.orgId, { name: 'Slow', assistant_id: assistantId, workflow_id: workflowId, llm_config: null, tests });
}

const answerAfter = (delayMs: number) => (req: { body: string }) => {
  const message = JSON.parse(req.body).message;
  return { delayMs, body: { results: message.tool_calls.map((c: { id: string }) => ({ tool_call_id: c.id, result: 'ok' })) } };
};

const runner = (slots: { chat?: number }) =>
  new SuiteRunner({ store: s.store, providers: s.runtime.providers, webhooks: s.runtime.webhooks, chats: new MemoryChatStore(), logger: pino({ level: 'silent' }), slots });

describe('the suite runner', () => {
  it('runs no more tests at once than its slots, and all of them', async () => {
    tools.setDefault(answerAfter(250));
    const suite = await slowSuite(6);
    const r = runner({ chat: 2 });
    const started = Date.now();
    const run = await r.start(s.orgId, suite, suite.tests);
    const done = await eventually('the run to end', async () => {
      const read = await s.store.testSuites.getRun(s.orgId, suite.id, run.id);
      return read?.status !== 'running' && read;
    });
    expect(done.status).toBe('passed');
    // three rounds of two tests, each waiting 250 ms for its tool
    expect(Date.now() - started).toBeGreaterThanOrEqual(750);
    const spans = done.results.map((x) => ({ from: Date.parse(x.started_at!), to: Date.parse(x.started_at!) + x.duration_ms! }));
    // the most running at any moment: at each start, those started and not yet over
    const most = Math.max(...spans.map((a) => spans.filter((b) => b.from <= a.from && a.from < b.to).length));
    expect(most).toBeLessThanOrEqual(2);
    expect(most).toBe(2);
    await r.close();
  }, 60_000);

  it('a shutdown stops the tests under way (each fails saying so) and writes the run to its end', async () => {
    tools.setDefault(answerAfter(4_000));
    const suite = await slowSuite(3);
    const r = runner({ chat: 1 });
    const run = await r.start(s.orgId, suite, suite.tests);
    await tools.waitForRequests(tools.requests.length + 1, 10_000);
    const closing = Date.now();
    await r.close();
    expect(Date.now() - closing).toBeLessThan(5_000);
    const read = (await s.store.testSuites.getRun(s.orgId, suite.id, run.id))!;
    expect(read.status).toBe('failed');
    expect(read.ended_at).not.toBeNull();
    expect(read.results.map((x) => [x.status, x.failure])).toEqual([
      ['failed', 'the server shut down before the test finished'],
      ['failed', 'the server shut down before the test finished'],
      ['failed', 'the server shut down before the test finished'],
    ]);
    await expect(r.start(s.orgId, suite, suite.tests)).rejects.toThrow(/shutting down/);
  }, 60_000);
});
