import { describe, expect, it, vi } from 'vitest';
import { effectiveAssistant } from '../../engine/assistant.js';
import {
  assistantRequestMessage,
  endOfCallReportMessage,
  extractStructuredData,
  statusUpdateMessage,
  toolCallsMessage,
  transcriptText,
  type CallContext,
  type CompleteChat,
  type ReportMessage,
} from '../../src/webhooks/envelope.js';

const ctx: CallContext = {
  call: { id: '0b6f7a52-4c11-4c1e-9d7e-0d5f0f1f2a3b', type: 'inbound_phone_call', status: 'in-progress' },
  phone_number: { number: '+14155550100', name: 'Front desk' },
  customer: { number: '+14155550199' },
};
const at = Date.parse('2025-03-04T05:06:07.089Z');

const messages: ReportMessage[] = [
  { role: 'assistant', content: 'Hello, Acme Dental!', time: '2025-03-04T05:00:00.500Z', seconds_from_start: 0.5, node_id: 'greeting' },
  { role: 'user', content: 'I want to book for Tuesday.', time: '2025-03-04T05:00:03.000Z', seconds_from_start: 3, node_id: 'greeting' },
  { role: 'tool', content: '{"slots":["10:00"]}', time: '2025-03-04T05:00:04.000Z', seconds_from_start: 4, node_id: 'lookup' },
  { role: 'assistant', content: 'Tuesday at ten works.', time: '2025-03-04T05:00:05.000Z', seconds_from_start: 5, node_id: 'booking' },
];

const schema = {
  type: 'object',
  properties: { day: { type: 'string' }, time: { type: 'string' } },
  required: ['day'],
};

const assistantWith = (extra: Record<string, unknown> = {}) =>
  effectiveAssistant({
    name: 'Receptionist',
    tts_config: { provider: 'sandbox', voice_id: 'sandbox' },
    analysis_plan: { structured_data_plan: { enabled: true, schema }, min_messages_threshold: 2 },
    ...extra,
  });

const reportInput = {
  ended_reason: 'assistant-ended-call' as const,
  started_at: '2025-03-04T05:00:00.000Z',
  ended_at: '2025-03-04T05:01:30.250Z',
  messages,
  nodes_visited: ['greeting', 'lookup', 'booking'],
  assistant_id: 'a5b6c7d8-0000-4000-8000-000000000001',
  workflow_id: 'f5b6c7d8-0000-4000-8000-000000000002',
};

describe('envelopes (SPEC 6.2)', () => {
  const common = {
    timestamp: '2025-03-04T05:06:07.089Z',
    phone_number: { number: '+14155550100', name: 'Front desk' },
    customer: { number: '+14155550199' },
  };

  it('assistant-request: the common fields, call ringing', () => {
    expect(assistantRequestMessage(ctx, at)).toEqual({
      message: { type: 'assistant-request', ...common, call: { ...ctx.call, status: 'ringing' } },
    });
  });

  it('status-update: status for each lifecycle step; ended carries ended_reason', () => {
    for (const status of ['ringing', 'in-progress', 'forwarding'] as const) {
      const { message } = statusUpdateMessage(ctx, { status }, at);
      expect(message).toEqual({ type: 'status-update', ...common, call: { ...ctx.call, status }, status });
      expect('ended_reason' in message).toBe(false);
    }
    const ended = statusUpdateMessage(ctx, { status: 'ended', ended_reason: 'silence-timed-out' }, at).message;
    expect(ended).toMatchObject({ status: 'ended', ended_reason: 'silence-timed-out', call: { status: 'ended' } });
  });

  it('timestamps are ISO 8601 UTC with milliseconds', () => {
    expect(statusUpdateMessage(ctx, { status: 'ringing' }, Date.parse('2025-01-01T00:00:00Z')).message.timestamp).toBe(
      '2025-01-01T00:00:00.000Z',
    );
    expect(statusUpdateMessage(ctx, { status: 'ringing' }).message.timestamp).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  });

  it('tool-calls: tool_calls with id, name, arguments; node_id for a tool node only', () => {
    const calls = [{ id: 'tool_1', name: 'lookup_slots', arguments: { day: 'tuesday' } }];
    expect(toolCallsMessage(ctx, { tool_calls: calls, node_id: 'lookup' }, at)).toEqual({
      message: { type: 'tool-calls', ...common, call: ctx.call, tool_calls: calls, node_id: 'lookup' },
    });
    expect('node_id' in toolCallsMessage(ctx, { tool_calls: calls }, at).message).toBe(false);
  });

  it('a name-less number gives phone_number.name null', () => {
    const noName = { ...ctx, phone_number: { number: '+14155550100', name: null } };
    expect(statusUpdateMessage(noName, { status: 'ringing' }, at).message.phone_number).toEqual({ number: '+14155550100', name: null });
  });
});

describe('end-of-call-report (DECISIONS 7)', () => {
  const complete: CompleteChat = async () => '{"day":"tuesday","time":"10:00"}';

  it('has every field, the transcript and messages, and the structured data', async () => {
    const { message } = await endOfCallReportMessage(ctx, reportInput, { assistant: assistantWith(), complete, at });
    expect(message).toEqual({
      type: 'end-of-call-report',
      timestamp: '2025-03-04T05:06:07.089Z',
      call: { ...ctx.call, status: 'ended' },
      phone_number: ctx.phone_number,
      customer: ctx.customer,
      ended_reason: 'assistant-ended-call',
      started_at: '2025-03-04T05:00:00.000Z',
      ended_at: '2025-03-04T05:01:30.250Z',
      duration_seconds: 90.25,
      transcript: 'Assistant: Hello, Acme Dental!\nCaller: I want to book for Tuesday.\nAssistant: Tuesday at ten works.',
      messages,
      nodes_visited: ['greeting', 'lookup', 'booking'],
      assistant_id: reportInput.assistant_id,
      workflow_id: reportInput.workflow_id,
      recording_url: null,
      transfer: null,
      trace_id: null,
      turns: [],
      turn_latency: null,
      usage: null,
      cost: null,
      analysis: { structured_data: { day: 'tuesday', time: '10:00' } },
    });
  });

  it('carries the recording_url of a recorded call', async () => {
    const url = 'https://voice.example.com/calls/c1/recording';
    const { message } = await endOfCallReportMessage(ctx, { ...reportInput, recording_url: url }, { assistant: assistantWith(), complete, at });
    expect(message.recording_url).toBe(url);
  });

  it('gdpr_mode: no transcript and no messages; the rest stays', async () => {
    const { message } = await endOfCallReportMessage(ctx, reportInput, {
      assistant: assistantWith({ gdpr_mode: true }),
      complete,
      at,
    });
    expect('transcript' in message).toBe(false);
    expect('messages' in message).toBe(false);
    expect(JSON.stringify(message)).not.toContain('Tuesday at ten');
    expect(message.analysis.structured_data).toEqual({ day: 'tuesday', time: '10:00' });
    expect(message.nodes_visited).toEqual(reportInput.nodes_visited);
  });

  it('a call rejected at start: errors, no start, zero duration, no assistant', async () => {
    const { message } = await endOfCallReportMessage(
      ctx,
      {
        ...reportInput,
        ended_reason: 'rejected-at-start',
        errors: [{ code: 'CALL_REJECTED_REALTIME_OVERRIDE', message: 'nodes[1].llm_config: per-node model overrides are not possible with a realtime assistant' }],
        started_at: null,
        messages: [],
        nodes_visited: [],
        assistant_id: null,
        workflow_id: null,
        workflow_note: 'the workflow is inactive',
      },
      { assistant: null, at },
    );
    expect(message).toMatchObject({
      ended_reason: 'rejected-at-start',
      errors: [{ code: 'CALL_REJECTED_REALTIME_OVERRIDE', message: 'nodes[1].llm_config: per-node model overrides are not possible with a realtime assistant' }],
      started_at: null,
      duration_seconds: 0,
      workflow_id: null,
      workflow_note: 'the workflow is inactive',
      transcript: '',
      messages: [],
      analysis: {},
    });
  });

  it('a structured-data failure is reported, never a missing report', async () => {
    const broken: CompleteChat = async () => {
      throw new Error('provider down');
    };
    const { message } = await endOfCallReportMessage(ctx, reportInput, { assistant: assistantWith(), complete: broken, at });
    expect(message.analysis).toEqual({ structured_data_error: 'structured data extraction failed: provider down' });
    expect(message.transcript).toBeDefined();
  });
});

describe('extractStructuredData', () => {
  const plan = assistantWith().analysis_plan;

  it('replaces {{schema}} in the plan messages and appends the transcript', async () => {
    const complete = vi.fn<CompleteChat>(async () => '```json\n{"day":"tuesday"}\n```');
    const out = await extractStructuredData({ plan, messages, transcript: transcriptText(messages), complete });
    expect(out).toEqual({ structured_data: { day: 'tuesday' } });
    const [turns] = complete.mock.calls[0]!;
    expect(turns[0]!.role).toBe('system');
    expect(turns[0]!.content).toContain(JSON.stringify(schema));
    expect(turns[0]!.content).not.toContain('{{schema}}');
    expect(turns.at(-1)).toEqual({ role: 'user', content: `Transcript of the call:\n${transcriptText(messages)}` });
  });

  it('uses a {{transcript}} placeholder when the plan has one', async () => {
    const complete = vi.fn<CompleteChat>(async () => '{"day":"x"}');
    const custom = {
      ...plan,
      structured_data_plan: {
        ...plan.structured_data_plan,
        messages: [{ role: 'user' as const, content: 'Schema {{schema}}. Call: {{transcript}}' }],
      },
    };
    await extractStructuredData({ plan: custom, messages, transcript: 'Assistant: hi', complete });
    expect(complete.mock.calls[0]![0]).toEqual([{ role: 'user', content: `Schema ${JSON.stringify(schema)}. Call: Assistant: hi` }]);
  });

  it('is off when the plan is disabled or the call is under min_messages_threshold', async () => {
    const complete = vi.fn<CompleteChat>(async () => '{"day":"mon"}');
    const off = { ...plan, structured_data_plan: { ...plan.structured_data_plan, enabled: false } };
    expect(await extractStructuredData({ plan: off, messages, transcript: '', complete })).toBeNull();
    // three spoken messages (the tool message does not count)
    expect(await extractStructuredData({ plan: { ...plan, min_messages_threshold: 4 }, messages, transcript: '', complete })).toBeNull();
    expect(complete).not.toHaveBeenCalled();
    expect(await extractStructuredData({ plan: { ...plan, min_messages_threshold: 3 }, messages, transcript: '', complete })).toEqual({
      structured_data: { day: 'mon' },
    });
  });

  it('an answer that is not JSON, or does not match the schema, is an error', async () => {
    const run = (answer: string) =>
      extractStructuredData({ plan, messages, transcript: '', complete: async () => answer });
    expect(await run('Sure! The day is Tuesday.')).toEqual({
      structured_data_error: 'the model\'s answer is not JSON: "Sure! The day is Tuesday."',
    });
    expect(await run('{"time":"10:00"}')).toEqual({ structured_data_error: "the model's answer does not match the schema: $.day: required" });
    expect(await run('{"day": 3}')).toEqual({
      structured_data_error: "the model's answer does not match the schema: $.day: expected string, got number",
    });
    expect(await run('[1]')).toEqual({ structured_data_error: "the model's answer does not match the schema: $: expected object, got array" });
  });

  it('a model that does not answer in time is an error, and is aborted', async () => {
    let signal: AbortSignal | undefined;
    const hang: CompleteChat = (_m, o) => {
      signal = o.signal;
      return new Promise(() => undefined);
    };
    const out = await extractStructuredData({ plan, messages, transcript: '', complete: hang, timeoutMs: 20 });
    expect(out).toEqual({ structured_data_error: 'structured data extraction failed: the model did not answer within 0.02 s' });
    expect(signal?.aborted).toBe(true);
  });

  it('without a model or a schema, the error says so', async () => {
    expect(await extractStructuredData({ plan, messages, transcript: '' })).toEqual({
      structured_data_error: 'no language model is available for structured data',
    });
    const noSchema = { ...plan, structured_data_plan: { ...plan.structured_data_plan, schema: null } };
    expect(await extractStructuredData({ plan: noSchema, messages, transcript: '', complete: async () => '{}' })).toEqual({
      structured_data_error: 'the analysis plan has no schema',
    });
  });
});
