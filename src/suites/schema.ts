/**
 * Test suites for assistants (DECISIONS 20): what a suite and its tests are, as zod schemas. The
 * API validates a suite with these and with the reference checks of `validate.ts` (nodes, tools,
 * the assistant and workflow), every problem in one 400; the OpenAPI document is made from them.
 */
import { z } from 'zod';
import { LlmConfig, LIMITS, TOOL_NAME_PATTERN } from '../../engine/schema.js';
import { wellFormed } from '../../engine/text.js';
import { Variables } from '../api/variables.js';

export const SUITE_LIMITS = {
  tests: 200,
  steps: 100,
  maxTurns: 50,
  defaultMaxTurns: 10,
  /** Per-test timeout bounds and defaults, seconds. */
  timeoutSeconds: 600,
  defaultChatTimeoutSeconds: 60,
  defaultVoiceTimeoutSeconds: 120,
  text: 4_000,
  patterns: 20,
} as const;

const Name = wellFormed().min(1).max(LIMITS.nameLength);
const Text = () => wellFormed().min(1).max(SUITE_LIMITS.text).refine((t) => t === '' || t.trim() !== '', 'must not be blank');
const NodeId = wellFormed().min(1).max(64);
const ToolName = wellFormed().regex(TOOL_NAME_PATTERN, 'must be 1 to 64 of A-Z, a-z, 0-9, _ and -');
const OneOrMore = <T extends z.ZodType>(item: T) => z.union([item, z.array(item).min(1).max(20)]);

/** What a script step may check after its turn (the expectations of `npm run chat` scripts). */
const StepExpectations = {
  expect_node: NodeId.optional().describe('the current node after the step'),
  expect_reply_contains: OneOrMore(wellFormed().min(1).max(500))
    .optional()
    .describe("words in the assistant's reply to this step (any case); in a voice test, what the caller heard"),
  expect_tool_call: OneOrMore(ToolName).optional().describe('tools called during this step (a tool node, or one of the model\'s tools)'),
  expect_status: z.enum(['active', 'ended']).optional().describe('whether the conversation goes on after the step'),
  expect_ended_reason: wellFormed().min(1).max(100).optional().describe('how it ended, e.g. assistant-ended-call'),
};

export const ScriptStep = z
  .strictObject({
    say: wellFormed()
      .min(1)
      .max(4_000)
      .refine((t) => t === '' || t.trim() !== '', 'must not be blank')
      .optional()
      .describe("the customer's message (a voice test speaks it); a step without `say` checks the conversation as it is (the first: the opening lines)"),
    ...StepExpectations,
  })
  .describe('a step needs `say` or an expectation, or both (checked with the suite)');
export type ScriptStep = z.infer<typeof ScriptStep>;

export const SimulatedCaller = z.strictObject({
  persona: Text().describe('who the caller is and how they talk'),
  goal: Text().describe('what the caller wants; the simulated caller hangs up once it is reached (or cannot be)'),
  max_turns: z
    .number()
    .int()
    .min(1)
    .max(SUITE_LIMITS.maxTurns)
    .default(SUITE_LIMITS.defaultMaxTurns)
    .describe(`the most the caller says (1 to ${SUITE_LIMITS.maxTurns}, default ${SUITE_LIMITS.defaultMaxTurns})`),
});

export const ExpectedToolCall = z.strictObject({
  name: ToolName,
  arguments: z.record(wellFormed(), z.unknown()).optional().describe('a subset of the arguments the call had (deep equality of each one given)'),
});

export const Expectations = z
  .strictObject({
    ended_reason: wellFormed().min(1).max(100).optional().describe('how the conversation ended (null while it goes on fails this)'),
    nodes_visited: z.array(NodeId).min(1).max(500).optional().describe('nodes visited in this order, as a subsequence (others may come between)'),
    tool_calls: z.array(ExpectedToolCall).min(1).max(100).optional().describe('tools called in this order, as a subsequence, each with a subset of its arguments'),
    transcript_matches: OneOrMore(wellFormed().min(1).max(1_000))
      .optional()
      .describe('regular expressions (JavaScript syntax, any case, ^ and $ at line ends) each matching the transcript ("Assistant: …" and "Caller: …" lines)'),
    structured_data: z
      .record(wellFormed(), z.unknown())
      .optional()
      .describe("a subset of what the assistant's analysis plan extracts from the conversation"),
  })
  .describe('at least one expectation (checked with the suite)');

export const Judge = z.strictObject({
  rubric: Text().describe("what the conversation must show; the suite's model reads the transcript against it and says pass or fail, with its reason"),
});

export const TestMode = z.enum(['chat', 'voice']);

export const SuiteTest = z
  .strictObject({
    name: Name.describe('unique within the suite'),
    mode: TestMode.default('chat').describe('chat: a text chat driven turn by turn; voice: a real call path (the simulated caller speaks and hears)'),
    variables: Variables.optional(),
    tool_results: z
      .record(wellFormed(), z.unknown())
      .optional()
      .describe("tool name → its result: the tool answers from here and its URL is never called (hermetic tests); tools not named here are called as in a chat"),
    script: z.array(ScriptStep).min(1).max(SUITE_LIMITS.steps).optional().describe('steps run in order; the first unmet expectation fails the test'),
    caller: SimulatedCaller.optional().describe("a simulated caller: the suite's model plays the persona toward the goal"),
    expect: Expectations.optional().describe('the end state, checked once the conversation is over'),
    judge: Judge.optional(),
    timeout_seconds: z
      .number()
      .int()
      .min(1)
      .max(SUITE_LIMITS.timeoutSeconds)
      .optional()
      .describe(
        `the test fails when it has not finished in this time (default ${SUITE_LIMITS.defaultChatTimeoutSeconds} s for chat, ` +
          `${SUITE_LIMITS.defaultVoiceTimeoutSeconds} s for voice; at most ${SUITE_LIMITS.timeoutSeconds})`,
      ),
  })
  .describe('a test has either `script` or `caller`, not both (checked with the suite)');
export type SuiteTest = z.infer<typeof SuiteTest>;
export type SuiteTestInput = z.input<typeof SuiteTest>;

const suiteFields = {
  name: Name,
  assistant_id: z.uuid().describe('the assistant under test'),
  workflow_id: z.uuid().nullable().optional().describe('the workflow it runs; absent or null: the assistant alone'),
  llm_config: LlmConfig.nullable()
    .optional()
    .describe("the model that plays simulated callers and judges (any LLM of the catalog); absent or null: the assistant's own model"),
  tests: z.array(SuiteTest).min(1).max(SUITE_LIMITS.tests),
};

export const TestSuiteCreate = z.strictObject(suiteFields);
export type TestSuiteCreate = z.infer<typeof TestSuiteCreate>;

export const TestSuitePatch = z
  .strictObject({
    name: suiteFields.name.optional(),
    assistant_id: suiteFields.assistant_id.optional(),
    workflow_id: suiteFields.workflow_id,
    llm_config: suiteFields.llm_config,
    tests: suiteFields.tests.optional(),
  })
  .describe('fields given are replaced whole; `tests` replaces every test');
export type TestSuitePatch = z.infer<typeof TestSuitePatch>;

/** The body of `POST /test-suites/{id}/runs`: all tests, or the ones named. */
export const RunCreate = z.strictObject({
  tests: z.array(Name).min(1).max(SUITE_LIMITS.tests).optional().describe('names of the tests to run (default: every test)'),
});

/** Every test's timeout, default filled in. */
export function testTimeoutSeconds(test: Pick<SuiteTest, 'mode' | 'timeout_seconds'>): number {
  return test.timeout_seconds ?? (test.mode === 'voice' ? SUITE_LIMITS.defaultVoiceTimeoutSeconds : SUITE_LIMITS.defaultChatTimeoutSeconds);
}
