/**
 * Examples of the test suites' OpenAPI document (DECISIONS 20): a suite for the Acme Dental front
 * desk of src/api/examples.ts, and a run of it (test/suites/api.test.ts parses each with its schema).
 */
import { exampleIds } from './examples.js';

const SUITE_ID = '0b6e2f47-1c9d-4a83-b5e2-7d4f9a1c3e60';
const RUN_ID = 'e3c7a915-2b4f-4d08-9e61-5a8f0c2d7b34';

export const testSuiteCreateExample = {
  name: 'Front desk regressions',
  assistant_id: exampleIds.assistant,
  workflow_id: exampleIds.workflow,
  tests: [
    {
      name: 'asks for a person',
      script: [
        { expect_node: 'greeting' },
        { say: 'Can I talk to a person please?', expect_node: 'human', expect_status: 'ended', expect_ended_reason: 'call-transferred' },
      ],
    },
    {
      name: 'a caller who is done',
      caller: { persona: 'A busy patient who speaks briefly.', goal: 'Say that you are done for today.', max_turns: 3 },
      expect: { ended_reason: 'assistant-ended-call', nodes_visited: ['greeting', 'bye'] },
      judge: { rubric: 'The assistant must say "goodbye" and must never say "invoice".' },
    },
  ],
};

export const testSuiteExample = {
  id: SUITE_ID,
  name: 'Front desk regressions',
  assistant_id: exampleIds.assistant,
  workflow_id: exampleIds.workflow,
  llm_config: null,
  tests: [
    {
      name: 'asks for a person',
      mode: 'chat',
      script: [
        { expect_node: 'greeting' },
        { say: 'Can I talk to a person please?', expect_node: 'human', expect_status: 'ended', expect_ended_reason: 'call-transferred' },
      ],
    },
    {
      name: 'a caller who is done',
      mode: 'chat',
      caller: { persona: 'A busy patient who speaks briefly.', goal: 'Say that you are done for today.', max_turns: 3 },
      expect: { ended_reason: 'assistant-ended-call', nodes_visited: ['greeting', 'bye'] },
      judge: { rubric: 'The assistant must say "goodbye" and must never say "invoice".' },
    },
  ],
  created_at: exampleIds.created,
  updated_at: exampleIds.created,
};

export const testSuiteSummaryExample = {
  id: SUITE_ID,
  name: 'Front desk regressions',
  assistant_id: exampleIds.assistant,
  workflow_id: exampleIds.workflow,
  test_count: 2,
  created_at: exampleIds.created,
  updated_at: exampleIds.created,
};

export const testRunExample = {
  id: RUN_ID,
  suite_id: SUITE_ID,
  status: 'failed',
  summary: { total: 2, passed: 1, failed: 1, running: 0, pending: 0 },
  results: [
    {
      name: 'asks for a person',
      mode: 'chat',
      status: 'passed',
      passed: true,
      failure: null,
      chat_id: exampleIds.chat,
      call_id: null,
      transcript: [
        { role: 'assistant', content: 'Hello, Acme Dental! How can I help?', node_id: 'greeting' },
        { role: 'user', content: 'Can I talk to a person please?', node_id: 'greeting' },
        { role: 'assistant', content: 'Let me put you through.', node_id: 'human' },
      ],
      nodes_visited: ['greeting', 'human'],
      tool_calls: [],
      ended_reason: 'call-transferred',
      judge: null,
      structured_data: null,
      errors: [],
      caller_turns: 1,
      started_at: '2025-06-02T09:30:00.114Z',
      duration_ms: 41,
    },
    {
      name: 'a caller who is done',
      mode: 'chat',
      status: 'failed',
      passed: false,
      failure: 'expect.ended_reason: ended_reason is "customer-ended-call", expected "assistant-ended-call"',
      chat_id: '7a2c9e41-5f3b-4d86-a0e7-2b8d6c1f4e95',
      call_id: null,
      transcript: [
        { role: 'assistant', content: 'Hello, Acme Dental! How can I help?', node_id: 'greeting' },
        { role: 'user', content: 'Say that you are done for today.', node_id: 'greeting' },
        { role: 'assistant', content: 'Okay, I understand: Say that you are done for today.', node_id: 'greeting' },
      ],
      nodes_visited: ['greeting'],
      tool_calls: [],
      ended_reason: 'customer-ended-call',
      judge: { passed: false, reason: 'the transcript does not contain "goodbye"' },
      structured_data: null,
      errors: [],
      caller_turns: 1,
      started_at: '2025-06-02T09:30:00.115Z',
      duration_ms: 63,
    },
  ],
  created_at: '2025-06-02T09:30:00.102Z',
  ended_at: '2025-06-02T09:30:00.181Z',
  duration_ms: 79,
};
