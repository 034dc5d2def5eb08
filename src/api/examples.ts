import { DEFAULT_PRICES } from '../observability/pricing.js';
/**
 * Examples in the OpenAPI document: one front desk (Acme Dental) seen through every resource, as
 * the API really answers (test/api/openapi.test.ts parses each with its schema).
 */

const WORKFLOW_ID = '5f0c9a3e-8a41-4b7e-9a55-2f1d3c6b7e10';
const ASSISTANT_ID = '9b2d4e61-0c7f-4a3b-8e19-6d5a2c4f8b31';
const NUMBER_ID = '3e7a1b90-5d2c-4f68-a1e4-8c9b0d7f2a56';
const CALL_ID = 'c4a8e2f1-7b3d-4e59-9a06-1f5e8d2b6c73';
const CHAT_ID = 'd81f5c2a-3e9b-4a70-b6d4-7c2e1a9f0b58';
const CREATED = '2025-06-02T09:14:03.512Z';

export const definitionExample = {
  version: 1,
  entry_node: 'greeting',
  global_prompt: 'You are the receptionist of Acme Dental.',
  nodes: [
    {
      id: 'greeting',
      type: 'conversation',
      first_line: 'Hello, Acme Dental! How can I help?',
      instructions: 'Find out whether the caller wants to book or cancel.',
    },
    { id: 'human', type: 'transfer', destination: '+14155550123', first_line: 'Let me put you through.' },
    { id: 'bye', type: 'end', first_line: 'Thanks for calling, goodbye.' },
  ],
  edges: [
    { from: 'greeting', to: 'human', description: 'the caller asks for a person' },
    { from: 'greeting', to: 'bye', description: 'the caller is done' },
  ],
};

export const workflowCreateExample = { name: 'Front desk', definition: definitionExample };

export const workflowExample = {
  id: WORKFLOW_ID,
  name: 'Front desk',
  is_active: true,
  definition: definitionExample,
  layout: { greeting: { x: 240, y: 60 }, human: { x: 120, y: 200 }, bye: { x: 360, y: 200 } },
  created_at: CREATED,
  updated_at: CREATED,
};

export const workflowSummaryExample = {
  id: WORKFLOW_ID,
  name: 'Front desk',
  is_active: true,
  entry_node: 'greeting',
  node_count: 3,
  edge_count: 2,
  created_at: CREATED,
  updated_at: CREATED,
};

export const assistantCreateExample = {
  name: 'Acme Dental front desk',
  business_name: 'Acme Dental',
  first_message: 'Hello, Acme Dental, this is Robin. How can I help?',
  webhook_url: 'https://hooks.acme-dental.example/switchboard',
  llm_config: { provider: 'openai', model: 'gpt-4o-mini', temperature: 0.4 },
  stt_config: { provider: 'deepgram', language: 'en' },
  tts_config: { provider: 'elevenlabs', voice_id: '21m00Tcm4TlvDq8ikWAM' },
};

export const assistantExample = {
  id: ASSISTANT_ID,
  name: 'Acme Dental front desk',
  business_name: 'Acme Dental',
  notification_email: null,
  notification_emails: [],
  recording_consent: { enabled: false, message: 'This call may be recorded for quality and training purposes.' },
  first_message: 'Hello, Acme Dental, this is Robin. How can I help?',
  is_active: true,
  autonomous_silence_handling: true,
  silence_timeout_seconds: 30,
  max_duration_seconds: 600,
  voicemail_detection: false,
  voicemail_message: null,
  gdpr_mode: false,
  webhook_url: 'https://hooks.acme-dental.example/switchboard',
  webhook_secret: 'whsec_…Unw=',
  webhook_events: ['assistant-request', 'tool-calls', 'status-update', 'end-of-call-report'],
  analysis_plan: {
    structured_data_plan: {
      enabled: false,
      schema: null,
      messages: [
        {
          role: 'system',
          content:
            'You extract structured data from a phone call transcript. Answer with JSON that matches this JSON schema: {{schema}}',
        },
      ],
    },
    min_messages_threshold: 2,
  },
  stt_config: { provider: 'deepgram', model: 'nova-3', language: 'en' },
  llm_config: { provider: 'openai', model: 'gpt-4o-mini', temperature: 0.4 },
  tts_config: { provider: 'elevenlabs', voice_id: '21m00Tcm4TlvDq8ikWAM', model: 'eleven_flash_v2_5' },
  speech_config: {
    turn_taking: {
      endpointing_min_delay: 0.5,
      endpointing_max_delay: 3,
      interruption_min_duration: 0.5,
      interruption_min_words: 0,
      false_interruption_timeout: 2,
    },
    pronunciation: [],
    background_audio: { enabled: false, clip: null, volume: 0.5 },
    silence: {
      messages: ['Are you still there?'],
      final_message: "I haven't heard from you, so I'll end the call now. Goodbye.",
      first_check_seconds: 10,
      interval_seconds: 10,
      max_attempts: 2,
    },
    end_call_message: 'Goodbye.',
    first_message_outbound: null,
  },
  created_at: CREATED,
  updated_at: CREATED,
};

export const numberCreateExample = {
  number: '+14155550100',
  name: 'Front desk line',
  assistant_id: ASSISTANT_ID,
  workflow_id: WORKFLOW_ID,
};

export const numberExample = {
  id: NUMBER_ID,
  number: '+14155550100',
  name: 'Front desk line',
  provider: 'twilio',
  assistant_id: ASSISTANT_ID,
  workflow_id: WORKFLOW_ID,
  webhook: null,
  created_at: CREATED,
  updated_at: CREATED,
};

export const placeCallExample = {
  number_id: NUMBER_ID,
  customer: { number: '+14155550142', name: 'Dana Whitfield' },
  variables: { appointment_day: 'Thursday' },
};

export const callExample = {
  id: CALL_ID,
  type: 'inbound_phone_call',
  status: 'ended',
  transport: 'twilio',
  phone_number: { number: '+14155550100', name: 'Front desk line' },
  customer: { number: '+14155550142', name: null },
  answered_by: null,
  assistant_id: ASSISTANT_ID,
  workflow_id: WORKFLOW_ID,
  definition_hash: '8f1e0c6a2b9d4f73e5a1c8b07d2f6e94a3c5b1d08e7f2a6c4b9d3e1f0a8c7b25',
  workflow_note: null,
  current_node: 'bye',
  nodes_visited: ['greeting', 'bye'],
  transcript:
    'Assistant: Hello, Acme Dental! How can I help?\nCaller: I just wanted your opening hours, that is all.\n' +
    'Assistant: Thanks for calling, goodbye.',
  messages: [
    {
      role: 'assistant',
      content: 'Hello, Acme Dental! How can I help?',
      time: '2025-06-02T09:14:04.120Z',
      seconds_from_start: 0.6,
      node_id: 'greeting',
    },
    {
      role: 'user',
      content: 'I just wanted your opening hours, that is all.',
      time: '2025-06-02T09:14:09.870Z',
      seconds_from_start: 6.35,
      node_id: 'greeting',
    },
    {
      role: 'assistant',
      content: 'Thanks for calling, goodbye.',
      time: '2025-06-02T09:14:11.030Z',
      seconds_from_start: 7.51,
      node_id: 'bye',
    },
  ],
  created_at: CREATED,
  started_at: '2025-06-02T09:14:03.520Z',
  ended_at: '2025-06-02T09:14:13.400Z',
  ended_reason: 'assistant-ended-call',
  errors: [],
  structured_data: null,
  variables: {},
  recording_url: null,
  transfer: null,
  trace_id: '4bf92f3577b34da6a3ce929d0e0e4736',
  turns: [
    {
      node_id: 'greeting',
      at: '2025-06-02T09:14:10.420Z',
      latency: { stt: 180.5, endpointing: 500.2, llm_first_token: 310.4, tts_first_audio: 140.8, service: 2.1, total: 612.3 },
    },
  ],
  turn_latency: { p50: 612.3, p95: 612.3 },
  usage: {
    stt: [{ provider: 'deepgram', model: 'nova-3', seconds: 9.88 }],
    llm: [{ provider: 'openai', model: 'gpt-4o-mini', input_tokens: 412, output_tokens: 18 }],
    tts: [{ provider: 'elevenlabs', model: 'eleven_flash_v2_5', characters: 64 }],
    realtime: [],
    carrier: [{ provider: 'twilio', direction: 'inbound', minutes: 0.1647 }],
  },
  cost: {
    currency: 'USD',
    total: 0.005941,
    breakdown: [
      { kind: 'stt', provider: 'deepgram', model: 'nova-3', quantity: 0.164666667, unit: 'minute', unit_price: 0.0077, amount: 0.001268 },
      { kind: 'llm', provider: 'openai', model: 'gpt-4o-mini', quantity: 0.000412, unit: 'million_input_tokens', unit_price: 0.15, amount: 0.000062 },
      { kind: 'llm', provider: 'openai', model: 'gpt-4o-mini', quantity: 0.000018, unit: 'million_output_tokens', unit_price: 0.6, amount: 0.000011 },
      { kind: 'tts', provider: 'elevenlabs', model: 'eleven_flash_v2_5', quantity: 0.000064, unit: 'million_characters', unit_price: 50, amount: 0.0032 },
      { kind: 'carrier', provider: 'twilio', model: 'inbound', quantity: 0.1647, unit: 'minute', unit_price: 0.0085, amount: 0.0014 },
    ],
    prices_read_on: '2026-11-27',
  },
};

export const chatCreateExample = {
  assistant_id: ASSISTANT_ID,
  workflow_id: WORKFLOW_ID,
  variables: { customer_name: 'Dana' },
};

export const chatMessageExample = { text: 'I would like to book a cleaning.' };

export const chatExample = {
  id: CHAT_ID,
  type: 'chat',
  status: 'active',
  assistant_id: ASSISTANT_ID,
  workflow_id: WORKFLOW_ID,
  workflow_note: null,
  node_id: 'greeting',
  nodes_visited: ['greeting'],
  ended_reason: null,
  errors: [],
  variables: { customer_name: 'Dana' },
  messages: [
    { role: 'assistant', content: 'Hello, Acme Dental! How can I help?', node_id: 'greeting', time: '2025-06-02T09:20:11.205Z' },
    { role: 'user', content: 'I would like to book a cleaning.', node_id: 'greeting', time: '2025-06-02T09:20:19.871Z' },
    {
      role: 'assistant',
      content: 'Happy to help. Which day suits you best?',
      node_id: 'greeting',
      time: '2025-06-02T09:20:20.644Z',
    },
  ],
  created_at: '2025-06-02T09:20:11.190Z',
  updated_at: '2025-06-02T09:20:20.644Z',
};

export const errorExamples = {
  400: {
    error: 'Invalid request',
    message: 'The request is not valid.',
    details: ['name: required', 'workflow_id: must be a UUID'],
  },
  401: { error: 'Invalid API key', message: 'The API key is not valid: it is unknown, revoked or malformed.' },
  404: { error: 'Not found', message: `No workflow with id "${WORKFLOW_ID}".` },
  429: { error: 'Too many requests', message: 'Over 600 requests per minute for this organization; retry in 12 s.' },
  503: { error: 'Unavailable', message: 'The database or the queue is not reachable right now; nothing was done. Try again shortly.' },
};

export const accountExample = {
  id: '0a6c3f9e-2b7d-4e18-9c45-b3d1e8f27a64',
  name: 'Acme Dental',
  webhook: {
    url: 'https://hooks.acme-dental.example/switchboard',
    secret: 'whsec_…dA==',
    events: ['assistant-request', 'tool-calls', 'status-update', 'end-of-call-report'],
  },
  // each carrier's settings go between these, at their paths (src/api/schemas.ts, from the carriers' examples)
  outbound: { max_concurrent_calls: 10, calls_per_second: 1 },
  pricing: DEFAULT_PRICES,
};

export const webCallExample = { assistant_id: ASSISTANT_ID, workflow_id: WORKFLOW_ID, variables: { customer_name: 'Dana' } };

/** The ids the examples share, for the examples of other rooms (src/api/test-suite-examples.ts). */
export const exampleIds = { workflow: WORKFLOW_ID, assistant: ASSISTANT_ID, chat: CHAT_ID, created: CREATED } as const;

export const apiKeyExample = {
  id: '6b1e9d3f-4c8a-4f27-b0e5-2a7d9c3e1f48',
  name: 'CRM integration',
  prefix: 'sk_live_Q3vX9aLm',
  created_at: CREATED,
  revoked_at: null,
  current: false,
};

export const apiKeyCreateExample = { name: 'CRM integration' };

export const apiKeyCreatedExample = {
  key: { ...apiKeyExample, secret: 'sk_live_Q3vX9aLmT0c2bW8nY5rE1uK7pZ4hJ6sD3fG9aQ2xV0c' },
};
