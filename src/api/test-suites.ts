/**
 * Test suites for assistants (DECISIONS 20, docs/test-suites.md): `POST/GET /test-suites`,
 * `GET/PATCH/DELETE /test-suites/{id}`, `POST/GET /test-suites/{id}/runs`,
 * `GET /test-suites/{id}/runs/{run_id}`. A suite is checked whole on every write, every problem
 * in one 400; a run answers 202 at once and its tests go on in the background.
 */
import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { LlmConfig } from '../../engine/schema.js';
import { TestSuiteService } from '../suites/service.js';
import { TestSuiteError } from '../suites/errors.js';
import type { SuiteRunner } from '../suites/runner.js';
import { RunCreate, SuiteTest, TestSuiteCreate, TestSuitePatch } from '../suites/schema.js';
import type { Store } from '../store/index.js';
import { ApiError, invalidRequest } from './errors.js';
import { CallErrorEntry, errorResponses, IdParams } from './schemas.js';
import { testRunExample, testSuiteCreateExample, testSuiteExample, testSuiteSummaryExample } from './test-suite-examples.js';

/** The body's JSON Schema, for the document: the suite is checked by `checkSuite`, which reports every problem at once. */
function documented(schema: z.ZodType, description: string) {
  const js = z.toJSONSchema(schema, { target: 'openapi-3.0', io: 'input', unrepresentable: 'any' }) as Record<string, unknown>;
  delete js.$schema;
  return z.unknown().meta({ ...js, description });
}

export const TestSuiteBody = documented(TestSuiteCreate, 'A test suite; every problem (shape, unknown nodes, tools, assistant or workflow) in one 400.').meta({
  example: testSuiteCreateExample,
});
export const TestSuitePatchBody = documented(TestSuitePatch, 'Fields given are replaced whole; the suite as it then is is checked like a new one.');

const Timestamp = z.string().describe('ISO 8601 UTC timestamp');

export const TestSuite = z
  .object({
    id: z.uuid(),
    name: z.string(),
    assistant_id: z.uuid(),
    workflow_id: z.uuid().nullable(),
    llm_config: LlmConfig.nullable().describe("the model of simulated callers and judges; null: the assistant's own"),
    tests: z.array(SuiteTest).describe('as given, defaults filled in (mode, max_turns)'),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .meta({ id: 'TestSuite', example: testSuiteExample });

export const TestSuiteSummary = z
  .object({
    id: z.uuid(),
    name: z.string(),
    assistant_id: z.uuid(),
    workflow_id: z.uuid().nullable(),
    test_count: z.number().int(),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .meta({ id: 'TestSuiteSummary', example: testSuiteSummaryExample });

const TranscriptLine = z.object({
  role: z.enum(['assistant', 'user', 'tool']).describe('user: the customer side (in a voice test, what the assistant heard)'),
  content: z.string(),
  node_id: z.string().nullable(),
  tool_name: z.string().optional(),
});

const ToolCallRecord = z.object({
  name: z.string(),
  arguments: z.record(z.string(), z.unknown()),
  node_id: z.string().nullable().describe('the tool node that called it; null for the model\'s own tools'),
  answered_by: z.enum(['tool_results', 'url']).describe('tool_results: the test answered and no URL was called; url: the tool-calls exchange'),
  result: z.unknown().optional(),
  error: z.string().optional(),
});

export const TestResult = z.object({
  name: z.string(),
  mode: z.enum(['chat', 'voice']),
  status: z.enum(['pending', 'running', 'passed', 'failed']),
  passed: z.boolean().nullable().describe('null until the test has finished'),
  failure: z.string().nullable().describe('the first failed expectation, path first (script[2].expect_node: …, expect.tool_calls[0]: …, judge: …, timeout_seconds: …)'),
  chat_id: z.uuid().nullable().describe('chat mode: the test_chat it ran (GET /chats/{id}, kept 24 h)'),
  call_id: z.uuid().nullable().describe('voice mode: the test_call it ran (GET /calls/{id})'),
  transcript: z.array(TranscriptLine),
  nodes_visited: z.array(z.string()),
  tool_calls: z.array(ToolCallRecord),
  ended_reason: z.string().nullable().describe('null when the conversation had not ended'),
  judge: z.object({ passed: z.boolean(), reason: z.string() }).nullable(),
  structured_data: z.unknown().nullable().describe('what the analysis plan extracted, when the test expects structured data'),
  errors: z.array(CallErrorEntry),
  caller_turns: z.number().int().describe('what the customer side said: script steps with say, or the simulated caller\'s lines'),
  started_at: Timestamp.nullable(),
  duration_ms: z.number().int().nullable(),
});

export const TestRun = z
  .object({
    id: z.uuid(),
    suite_id: z.uuid(),
    status: z.enum(['running', 'passed', 'failed']),
    summary: z.object({ total: z.number().int(), passed: z.number().int(), failed: z.number().int(), running: z.number().int(), pending: z.number().int() }),
    results: z.array(TestResult).describe('one per test run, in the suite\'s order'),
    created_at: Timestamp,
    ended_at: Timestamp.nullable(),
    duration_ms: z.number().int().nullable(),
  })
  .meta({ id: 'TestRun', example: testRunExample });

const RunParams = z.strictObject({ id: z.uuid(), run_id: z.uuid() });

function toApiError(err: unknown): unknown {
  if (!(err instanceof TestSuiteError)) return err;
  switch (err.code) {
    case 'TEST_SUITE_INVALID':
      return invalidRequest(err.details, err.message);
    case 'TEST_SUITE_NOT_FOUND':
      return new ApiError(404, 'Not found', err.message);
    case 'TEST_SUITE_NO_RUNNER':
      return new ApiError(503, 'Unavailable', err.message, undefined, { 'retry-after': '60' });
  }
}

const answering = async <T>(work: () => Promise<T>): Promise<T> => {
  try {
    return await work();
  } catch (err) {
    throw toApiError(err);
  }
};

export const testSuiteRoutes =
  (deps: { store: Store; runner: SuiteRunner | null }): FastifyPluginAsyncZod =>
  async (app) => {
    const suites = new TestSuiteService(deps.store, deps.runner);
    app.addHook('onClose', async () => suites.close());
    const tags = ['test-suites'];
    const one = z.object({ test_suite: TestSuite });

    app.post('/test-suites', {
      schema: {
        operationId: 'createTestSuite',
        tags,
        summary: 'Create a test suite for an assistant (checked whole: every problem in one 400)',
        body: TestSuiteBody,
        response: { 201: one, ...errorResponses },
      },
      handler: async (request, reply) => {
        const suite = await answering(() => suites.create(request.organization.id, request.body));
        return reply.code(201).send({ test_suite: suite });
      },
    });

    app.get('/test-suites', {
      schema: {
        operationId: 'listTestSuites',
        tags,
        summary: "The organization's test suites, oldest first (summaries)",
        response: { 200: z.object({ test_suites: z.array(TestSuiteSummary) }), ...errorResponses },
      },
      handler: async (request) => ({ test_suites: await suites.list(request.organization.id) }),
    });

    app.get('/test-suites/:id', {
      schema: { operationId: 'getTestSuite', tags, summary: 'One test suite with its tests', params: IdParams, response: { 200: one, ...errorResponses } },
      handler: async (request) => ({ test_suite: await answering(() => suites.get(request.organization.id, request.params.id)) }),
    });

    app.patch('/test-suites/:id', {
      schema: {
        operationId: 'updateTestSuite',
        tags,
        summary: 'Replace fields of a test suite (tests replaced whole)',
        params: IdParams,
        body: TestSuitePatchBody,
        response: { 200: one, ...errorResponses },
      },
      handler: async (request) => ({ test_suite: await answering(() => suites.update(request.organization.id, request.params.id, request.body)) }),
    });

    app.delete('/test-suites/:id', {
      schema: {
        operationId: 'deleteTestSuite',
        tags,
        summary: 'Delete a test suite and its runs',
        params: IdParams,
        response: { 204: z.undefined(), ...errorResponses },
      },
      handler: async (request, reply) => {
        await answering(() => suites.delete(request.organization.id, request.params.id));
        return reply.code(204).send();
      },
    });

    app.post('/test-suites/:id/runs', {
      schema: {
        operationId: 'runTestSuite',
        tags,
        summary: 'Run the suite (or the tests named): 202 at once, results as tests finish',
        description:
          'Tests run in parallel within the server\'s bounds, each within its timeout_seconds; a test whose vendor hangs fails, the run goes on. ' +
          'Runs send no notifications, no e-mails and no webhooks but the tool-calls of tools that `tool_results` does not answer. ' +
          'Poll GET /test-suites/{id}/runs/{run_id} until status is passed or failed.',
        params: IdParams,
        body: RunCreate.nullable().optional().describe('absent: every test of the suite'),
        response: { 202: z.object({ run: TestRun }), ...errorResponses },
      },
      handler: async (request, reply) => {
        const run = await answering(() => suites.startRun(request.organization.id, request.params.id, request.body));
        return reply.code(202).send({ run });
      },
    });

    app.get('/test-suites/:id/runs', {
      schema: {
        operationId: 'listTestRuns',
        tags,
        summary: "The suite's runs, newest first (the newest 100 are kept)",
        params: IdParams,
        querystring: z.strictObject({ limit: z.coerce.number().int().min(1).max(100).default(20).describe('runs listed, 1 to 100') }),
        response: { 200: z.object({ runs: z.array(TestRun) }), ...errorResponses },
      },
      handler: async (request) => ({ runs: await answering(() => suites.listRuns(request.organization.id, request.params.id, request.query.limit)) }),
    });

    app.get('/test-suites/:id/runs/:run_id', {
      schema: {
        operationId: 'getTestRun',
        tags,
        summary: 'One run: its status and every test\'s result',
        params: RunParams,
        response: { 200: z.object({ run: TestRun }), ...errorResponses },
      },
      handler: async (request) => ({ run: await answering(() => suites.getRun(request.organization.id, request.params.id, request.params.run_id)) }),
    });
  };
