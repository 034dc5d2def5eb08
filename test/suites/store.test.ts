/** Test suites and runs in the database (migration 010), the same on PGlite and (with DATABASE_URL) PostgreSQL. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createStore, type Store } from '../../src/store/index.js';
import { KEPT_RUNS, type TestResult } from '../../src/suites/store.js';
import { newResult } from '../../src/suites/runner.js';
import { runView } from '../../src/suites/service.js';
import { SuiteTest } from '../../src/suites/schema.js';
import { availableDbKinds, createTestDb, type TestDb } from '../helpers/db.js';

const tests = [SuiteTest.parse({ name: 'opens', script: [{ expect_node: 'greeting' }] }), SuiteTest.parse({ name: 'books', mode: 'voice', script: [{ say: 'book' }] })];
const fields = (assistantId: string) => ({ name: 'Front desk', assistant_id: assistantId, workflow_id: null, llm_config: null, tests });
const ASSISTANT = '9b2d4e61-0c7f-4a3b-8e19-6d5a2c4f8b31';

describe.each(availableDbKinds())('test suites on %s', (kind) => {
  let testDb: TestDb;
  let store: Store;
  let orgA: string;
  let orgB: string;

  beforeAll(async () => {
    testDb = await createTestDb(kind);
    store = createStore(testDb.db);
    orgA = (await store.keys.createKey('A')).organization.id;
    orgB = (await store.keys.createKey('B')).organization.id;
  });
  afterAll(async () => {
    await testDb.drop();
  });

  it('create, get, list (oldest first, with test counts), replace and delete, within one organization', async () => {
    const first = await store.testSuites.create(orgA, fields(ASSISTANT));
    expect(first).toMatchObject({ name: 'Front desk', assistant_id: ASSISTANT, workflow_id: null, llm_config: null, tests });
    expect(first.tests[1]!.mode).toBe('voice');
    const second = await store.testSuites.create(orgA, { ...fields(ASSISTANT), name: 'Second', llm_config: { provider: 'sandbox' } });
    expect(await store.testSuites.get(orgA, first.id)).toEqual(first);
    expect(await store.testSuites.get(orgB, first.id)).toBeNull();
    expect((await store.testSuites.list(orgA)).map((s) => [s.name, s.test_count])).toEqual([
      ['Front desk', 2],
      ['Second', 2],
    ]);
    expect(await store.testSuites.list(orgB)).toEqual([]);

    expect(await store.testSuites.replace(orgB, first.id, { ...fields(ASSISTANT), name: 'Stolen' })).toBeNull();
    const replaced = await store.testSuites.replace(orgA, first.id, { ...fields(ASSISTANT), name: 'Renamed', tests: [tests[0]!] });
    expect(replaced).toMatchObject({ name: 'Renamed', tests: [tests[0]], created_at: first.created_at });
    expect(Date.parse(replaced!.updated_at)).toBeGreaterThanOrEqual(Date.parse(first.updated_at));

    expect(await store.testSuites.delete(orgB, second.id)).toBe(false);
    expect(await store.testSuites.delete(orgA, second.id)).toBe(true);
    expect(await store.testSuites.get(orgA, second.id)).toBeNull();
  });

  it('runs: written running, saved as tests finish, read back newest first, org-scoped; deleted with their suite', async () => {
    const suite = await store.testSuites.create(orgA, fields(ASSISTANT));
    const deadline = new Date(Date.now() + 60_000);
    const run = await store.testSuites.createRun(orgA, suite.id, tests.map(newResult), deadline);
    expect(run).toMatchObject({ suite_id: suite.id, status: 'running', ended_at: null, deadline_at: deadline.toISOString() });
    expect(run.results.map((r) => [r.name, r.mode, r.status])).toEqual([
      ['opens', 'chat', 'pending'],
      ['books', 'voice', 'pending'],
    ]);
    const done: TestResult = { ...run.results[0]!, status: 'passed', passed: true, transcript: [{ role: 'assistant', content: 'Hello “there” \u{1F600}', node_id: 'greeting' }] };
    run.results[0] = done;
    await store.testSuites.saveRun(run);
    expect((await store.testSuites.getRun(orgA, suite.id, run.id))!.results[0]).toEqual(done);
    run.status = 'failed';
    run.ended_at = new Date().toISOString();
    await store.testSuites.saveRun(run);
    const read = await store.testSuites.getRun(orgA, suite.id, run.id);
    expect(read).toMatchObject({ status: 'failed', ended_at: run.ended_at });
    expect(await store.testSuites.getRun(orgB, suite.id, run.id)).toBeNull();

    const later = await store.testSuites.createRun(orgA, suite.id, tests.map(newResult), deadline);
    expect((await store.testSuites.listRuns(orgA, suite.id, 10)).map((r) => r.id)).toEqual([later.id, run.id]);
    expect(await store.testSuites.listRuns(orgB, suite.id, 10)).toEqual([]);

    await store.testSuites.delete(orgA, suite.id);
    expect(await store.testSuites.getRun(orgA, suite.id, run.id)).toBeNull();
  });

  it(`keeps each suite's newest ${KEPT_RUNS} runs`, async () => {
    const suite = await store.testSuites.create(orgA, fields(ASSISTANT));
    const other = await store.testSuites.create(orgA, fields(ASSISTANT));
    const kept = await store.testSuites.createRun(orgA, other.id, [], new Date());
    const ids: string[] = [];
    for (let i = 0; i < KEPT_RUNS + 3; i++) ids.push((await store.testSuites.createRun(orgA, suite.id, [], new Date())).id);
    const listed = (await store.testSuites.listRuns(orgA, suite.id, 1000)).map((r) => r.id);
    expect(listed).toHaveLength(KEPT_RUNS);
    expect(new Set(listed)).toEqual(new Set(ids.slice(3)));
    expect(await store.testSuites.getRun(orgA, other.id, kept.id)).not.toBeNull();
  });
});

describe('a run as the API shows it', () => {
  it('counts its tests, and a run still running past its deadline reads as failed, its unfinished tests lost', () => {
    const results = [
      { ...newResult({ name: 'a', mode: 'chat' }), status: 'passed' as const, passed: true },
      { ...newResult({ name: 'b', mode: 'chat' }), status: 'running' as const },
      newResult({ name: 'c', mode: 'voice' }),
    ];
    const run = { id: 'r', suite_id: 's', status: 'running' as const, results, created_at: '2025-01-01T00:00:00.000Z', ended_at: null, deadline_at: '2025-01-01T00:10:00.000Z' };
    const live = runView(run, Date.parse('2025-01-01T00:05:00Z'));
    expect(live).toMatchObject({ status: 'running', summary: { total: 3, passed: 1, failed: 0, running: 1, pending: 1 }, ended_at: null, duration_ms: null });
    const lost = runView(run, Date.parse('2025-01-01T00:10:01Z'));
    expect(lost).toMatchObject({ status: 'failed', summary: { total: 3, passed: 1, failed: 2, running: 0, pending: 0 }, ended_at: run.deadline_at });
    expect(lost.results[1]).toMatchObject({ status: 'failed', passed: false, failure: expect.stringContaining('the run was lost') });
    expect(lost.results[0]).toBe(results[0]);
  });
});
