/**
 * Test suites of an organization (DECISIONS 20): written only when sound (`checkSuite`: every
 * problem at once), run in the background (`SuiteRunner`), their runs read back. Another
 * organization's suites and runs do not exist for the caller.
 */
import type { Store } from '../store/index.js';
import { quote } from '../../engine/paths.js';
import { formatZodIssues } from '../../engine/validate.js';
import type { SuiteRunner } from './runner.js';
import { TestSuiteError } from './errors.js';
import { RunCreate, type TestSuiteCreate } from './schema.js';
import type { TestRun, TestSuite, TestSuiteSummary } from './store.js';
import { checkSuite, referencedIds, type SuiteReferences } from './validate.js';

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A run as the API shows it: a run its process lost (past its deadline, still `running`) reads as failed. */
export function runView(run: TestRun, now = Date.now()) {
  const lost = run.status === 'running' && Date.parse(run.deadline_at) < now;
  const results = lost
    ? run.results.map((r) =>
        r.status === 'pending' || r.status === 'running'
          ? { ...r, status: 'failed' as const, passed: false, failure: 'the run was lost: the process running it stopped before this test finished' }
          : r,
      )
    : run.results;
  const count = (status: string) => results.filter((r) => r.status === status).length;
  return {
    id: run.id,
    suite_id: run.suite_id,
    status: lost ? ('failed' as const) : run.status,
    summary: { total: results.length, passed: count('passed'), failed: count('failed'), running: count('running'), pending: count('pending') },
    results,
    created_at: run.created_at,
    ended_at: lost ? run.deadline_at : run.ended_at,
    duration_ms: run.ended_at ? Date.parse(run.ended_at) - Date.parse(run.created_at) : null,
  };
}
export type RunView = ReturnType<typeof runView>;

export class TestSuiteService {
  constructor(
    private readonly store: Store,
    /** Runs suites; null where this server runs no conversations (runs are then refused). */
    private readonly runner: SuiteRunner | null,
  ) {}

  async create(organizationId: string, body: unknown): Promise<TestSuite> {
    const suite = await this.checked(organizationId, body);
    return this.store.testSuites.create(organizationId, fields(suite));
  }

  list(organizationId: string): Promise<TestSuiteSummary[]> {
    return this.store.testSuites.list(organizationId);
  }

  async get(organizationId: string, id: string): Promise<TestSuite> {
    const suite = await this.store.testSuites.get(organizationId, id);
    if (!suite) throw new TestSuiteError('TEST_SUITE_NOT_FOUND', `No test suite with id ${quote(id)}.`);
    return suite;
  }

  /** The fields given replace the stored ones whole; the suite as it then is must be sound. */
  async update(organizationId: string, id: string, patch: unknown): Promise<TestSuite> {
    const stored = await this.get(organizationId, id);
    if (!isRecord(patch)) throw new TestSuiteError('TEST_SUITE_INVALID', 'The test suite is not valid.', ['(root): expected an object']);
    const merged: Record<string, unknown> = {
      name: stored.name,
      assistant_id: stored.assistant_id,
      ...(stored.workflow_id ? { workflow_id: stored.workflow_id } : {}),
      ...(stored.llm_config ? { llm_config: stored.llm_config } : {}),
      tests: stored.tests,
      ...patch,
    };
    const suite = await this.checked(organizationId, merged);
    const updated = await this.store.testSuites.replace(organizationId, id, fields(suite));
    if (!updated) throw new TestSuiteError('TEST_SUITE_NOT_FOUND', `No test suite with id ${quote(id)}.`);
    return updated;
  }

  async delete(organizationId: string, id: string): Promise<void> {
    if (!(await this.store.testSuites.delete(organizationId, id))) {
      throw new TestSuiteError('TEST_SUITE_NOT_FOUND', `No test suite with id ${quote(id)}.`);
    }
  }

  /** Starts a run of the suite (its tests named in `body.tests`, else all): `running`, results to come. */
  async startRun(organizationId: string, id: string, body: unknown): Promise<RunView> {
    const suite = await this.get(organizationId, id);
    const parsed = RunCreate.safeParse(body ?? {});
    if (!parsed.success) throw new TestSuiteError('TEST_SUITE_INVALID', 'The request is not valid.', formatZodIssues(parsed.error.issues, '', body));
    const names = parsed.data.tests;
    const unknown = (names ?? []).flatMap((name, i) => (suite.tests.some((t) => t.name === name) ? [] : [`tests[${i}]: no test named ${quote(name)} in the suite`]));
    if (unknown.length > 0) throw new TestSuiteError('TEST_SUITE_INVALID', 'The request is not valid.', unknown);
    if (!this.runner) throw new TestSuiteError('TEST_SUITE_NO_RUNNER', 'This server runs no conversations; test suites cannot run here.');
    const tests = names ? suite.tests.filter((t) => names.includes(t.name)) : suite.tests;
    return runView(await this.runner.start(organizationId, suite, tests));
  }

  async getRun(organizationId: string, suiteId: string, runId: string): Promise<RunView> {
    const run = await this.store.testSuites.getRun(organizationId, suiteId, runId);
    if (!run) throw new TestSuiteError('TEST_SUITE_NOT_FOUND', `No run with id ${quote(runId)} of test suite ${quote(suiteId)}.`);
    return runView(run);
  }

  async listRuns(organizationId: string, suiteId: string, limit: number): Promise<RunView[]> {
    await this.get(organizationId, suiteId);
    return (await this.store.testSuites.listRuns(organizationId, suiteId, limit)).map((r) => runView(r));
  }

  close(): Promise<void> {
    return this.runner?.close() ?? Promise.resolve();
  }

  /** The suite parsed, or every problem of it (its shape, what it names). */
  private async checked(organizationId: string, body: unknown): Promise<TestSuiteCreate> {
    const { assistantId, workflowId } = referencedIds(body);
    const [assistant, workflow] = await Promise.all([
      assistantId ? this.store.assistants.get(organizationId, assistantId) : Promise.resolve(null),
      workflowId ? this.store.workflows.get(organizationId, workflowId) : Promise.resolve(null),
    ]);
    const refs: SuiteReferences = { assistant: assistant?.fields ?? null, workflow };
    const result = checkSuite(body, refs);
    if (!result.ok) throw new TestSuiteError('TEST_SUITE_INVALID', 'The test suite is not valid.', result.details);
    return result.suite;
  }
}

function fields(suite: TestSuiteCreate) {
  return {
    name: suite.name,
    assistant_id: suite.assistant_id,
    workflow_id: suite.workflow_id ?? null,
    llm_config: suite.llm_config ?? null,
    tests: suite.tests,
  };
}
