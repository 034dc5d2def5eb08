/**
 * Test suites and their runs (migration 010), on PostgreSQL or the embedded PGlite: the same SQL.
 * A suite's tests are stored whole as JSON; a run's results too, rewritten as its tests finish.
 * Each suite keeps its newest `KEPT_RUNS` runs; older ones are deleted as new ones start.
 */
import { randomUUID } from 'node:crypto';
import type { Db } from '../store/db.js';
import type { LlmConfig } from '../../engine/schema.js';
import type { CallError } from '../errors.js';
import type { SuiteTest } from './schema.js';

const iso = (d: Date | string) => new Date(d).toISOString();

/** The runs kept per suite (the oldest go as a new one starts). */
export const KEPT_RUNS = 100;

export interface TestSuite {
  id: string;
  name: string;
  assistant_id: string;
  workflow_id: string | null;
  llm_config: LlmConfig | null;
  tests: SuiteTest[];
  created_at: string;
  updated_at: string;
}

export interface TestSuiteSummary {
  id: string;
  name: string;
  assistant_id: string;
  workflow_id: string | null;
  test_count: number;
  created_at: string;
  updated_at: string;
}

export type RunStatus = 'running' | 'passed' | 'failed';
export type TestStatus = 'pending' | 'running' | 'passed' | 'failed';

/** A line of a test's conversation, as the assistant's side kept it. */
export interface TranscriptLine {
  role: 'assistant' | 'user' | 'tool';
  content: string;
  node_id: string | null;
  /** tool lines: the tool that answered */
  tool_name?: string;
}

/** A tool the assistant called during a test, and who answered it. */
export interface ToolCallRecord {
  name: string;
  arguments: Record<string, unknown>;
  node_id: string | null;
  /** `tool_results` (the test answered; no URL was called) or `url` (the tool-calls exchange, as in a chat). */
  answered_by: 'tool_results' | 'url';
  result?: unknown;
  error?: string;
}

export interface TestResult {
  name: string;
  mode: 'chat' | 'voice';
  status: TestStatus;
  /** null until the test has finished */
  passed: boolean | null;
  /** the first failed expectation, path first (`script[2].expect_node: …`); null when passed */
  failure: string | null;
  /** the chat (`test_chat`) or call (`test_call`) the test ran, kept like other chats and calls */
  chat_id: string | null;
  call_id: string | null;
  transcript: TranscriptLine[];
  nodes_visited: string[];
  tool_calls: ToolCallRecord[];
  ended_reason: string | null;
  judge: { passed: boolean; reason: string } | null;
  structured_data: unknown;
  errors: CallError[];
  /** what the customer side said: script `say` steps, or the simulated caller's lines */
  caller_turns: number;
  started_at: string | null;
  duration_ms: number | null;
}

export interface TestRun {
  id: string;
  suite_id: string;
  status: RunStatus;
  results: TestResult[];
  created_at: string;
  ended_at: string | null;
  /** a run still `running` after this was lost with its process */
  deadline_at: string;
}

interface SuiteRow {
  id: string;
  name: string;
  assistant_id: string;
  workflow_id: string | null;
  llm_config: LlmConfig | null;
  tests: SuiteTest[];
  created_at: Date;
  updated_at: Date;
}

interface RunRow {
  id: string;
  suite_id: string;
  status: RunStatus;
  results: TestResult[];
  created_at: Date;
  ended_at: Date | null;
  deadline_at: Date;
}

const toSuite = (r: SuiteRow): TestSuite => ({
  id: r.id,
  name: r.name,
  assistant_id: r.assistant_id,
  workflow_id: r.workflow_id,
  llm_config: r.llm_config,
  tests: r.tests,
  created_at: iso(r.created_at),
  updated_at: iso(r.updated_at),
});

const toRun = (r: RunRow): TestRun => ({
  id: r.id,
  suite_id: r.suite_id,
  status: r.status,
  results: r.results,
  created_at: iso(r.created_at),
  ended_at: r.ended_at ? iso(r.ended_at) : null,
  deadline_at: iso(r.deadline_at),
});

export interface SuiteFields {
  name: string;
  assistant_id: string;
  workflow_id: string | null;
  llm_config: LlmConfig | null;
  tests: SuiteTest[];
}

export class TestSuiteRepository {
  constructor(private readonly db: Db) {}

  async create(orgId: string, fields: SuiteFields): Promise<TestSuite> {
    const { rows } = await this.db.query<SuiteRow>(
      `INSERT INTO test_suites (id, organization_id, name, assistant_id, workflow_id, llm_config, tests)
       VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING *`,
      [randomUUID(), orgId, fields.name, fields.assistant_id, fields.workflow_id, json(fields.llm_config), JSON.stringify(fields.tests)],
    );
    return toSuite(rows[0]!);
  }

  /** The organization's suites, oldest first. */
  async list(orgId: string): Promise<TestSuiteSummary[]> {
    const { rows } = await this.db.query<Omit<SuiteRow, 'tests' | 'llm_config'> & { test_count: number }>(
      `SELECT id, name, assistant_id, workflow_id, jsonb_array_length(tests)::int AS test_count, created_at, updated_at
         FROM test_suites WHERE organization_id = $1 ORDER BY created_at, id`,
      [orgId],
    );
    return rows.map((r) => ({
      id: r.id,
      name: r.name,
      assistant_id: r.assistant_id,
      workflow_id: r.workflow_id,
      test_count: r.test_count,
      created_at: iso(r.created_at),
      updated_at: iso(r.updated_at),
    }));
  }

  async get(orgId: string, id: string): Promise<TestSuite | null> {
    const { rows } = await this.db.query<SuiteRow>('SELECT * FROM test_suites WHERE id = $1 AND organization_id = $2', [id, orgId]);
    return rows[0] ? toSuite(rows[0]) : null;
  }

  /** Writes the whole suite (the service merges a patch first). */
  async replace(orgId: string, id: string, fields: SuiteFields): Promise<TestSuite | null> {
    const { rows } = await this.db.query<SuiteRow>(
      `UPDATE test_suites SET name = $3, assistant_id = $4, workflow_id = $5, llm_config = $6, tests = $7, updated_at = now()
        WHERE id = $1 AND organization_id = $2 RETURNING *`,
      [id, orgId, fields.name, fields.assistant_id, fields.workflow_id, json(fields.llm_config), JSON.stringify(fields.tests)],
    );
    return rows[0] ? toSuite(rows[0]) : null;
  }

  /** Deletes the suite and its runs. */
  async delete(orgId: string, id: string): Promise<boolean> {
    const { rows } = await this.db.query<{ id: string }>('DELETE FROM test_suites WHERE id = $1 AND organization_id = $2 RETURNING id', [id, orgId]);
    return rows.length > 0;
  }

  // ------------------------------------------------------------------------------------------
  // runs

  /** A new run, `running`; the suite's runs beyond the newest `KEPT_RUNS` are deleted. */
  async createRun(orgId: string, suiteId: string, results: TestResult[], deadlineAt: Date): Promise<TestRun> {
    const now = new Date();
    const { rows } = await this.db.query<RunRow>(
      `INSERT INTO test_suite_runs (id, organization_id, suite_id, status, results, created_at, deadline_at)
       VALUES ($1, $2, $3, 'running', $4, $5, $6) RETURNING *`,
      [randomUUID(), orgId, suiteId, JSON.stringify(results), now, deadlineAt],
    );
    await this.db.query(
      `DELETE FROM test_suite_runs WHERE suite_id = $1 AND id NOT IN (
         SELECT id FROM test_suite_runs WHERE suite_id = $1 ORDER BY created_at DESC, id DESC LIMIT $2)`,
      [suiteId, KEPT_RUNS],
    );
    return toRun(rows[0]!);
  }

  /** The run's results as they are now, and its end once it has one. */
  async saveRun(run: Pick<TestRun, 'id' | 'status' | 'results' | 'ended_at'>): Promise<void> {
    await this.db.query('UPDATE test_suite_runs SET status = $2, results = $3, ended_at = $4 WHERE id = $1', [
      run.id,
      run.status,
      JSON.stringify(run.results),
      run.ended_at,
    ]);
  }

  async getRun(orgId: string, suiteId: string, runId: string): Promise<TestRun | null> {
    const { rows } = await this.db.query<RunRow>(
      'SELECT * FROM test_suite_runs WHERE id = $1 AND suite_id = $2 AND organization_id = $3',
      [runId, suiteId, orgId],
    );
    return rows[0] ? toRun(rows[0]) : null;
  }

  /** The suite's runs, newest first. */
  async listRuns(orgId: string, suiteId: string, limit: number): Promise<TestRun[]> {
    const { rows } = await this.db.query<RunRow>(
      `SELECT * FROM test_suite_runs WHERE suite_id = $1 AND organization_id = $2
        ORDER BY created_at DESC, id DESC LIMIT $3`,
      [suiteId, orgId, limit],
    );
    return rows.map(toRun);
  }
}

const json = (value: unknown) => (value === null || value === undefined ? null : JSON.stringify(value));
