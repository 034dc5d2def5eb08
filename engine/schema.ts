/**
 * zod schemas (and the types inferred from them) for workflow definitions and assistant config
 * blocks. The REST API validates request bodies with these same schemas and the OpenAPI document
 * is generated from them.
 */
import { z } from 'zod';
import { wellFormed } from './text.js';
import { BaseUrl } from './base-url.js';

export const LIMITS = {
  nodes: 500,
  edges: 2000,
  textLength: 20_000,
  nameLength: 200,
} as const;

export const NODE_ID_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;
export const TOOL_NAME_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;
export const E164_PATTERN = /^\+[1-9]\d{1,14}$/;
export const E164_MESSAGE = 'must be an E.164 number such as +14155550123';

export const WEBHOOK_EVENT_TYPES = [
  'assistant-request',
  'tool-calls',
  'status-update',
  'end-of-call-report',
] as const;
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];

export const Text = wellFormed().max(LIMITS.textLength);
export const E164 = wellFormed().regex(E164_PATTERN, E164_MESSAGE);
export const HttpUrl = z
  .string()
  .max(2048)
  .refine(isHttpUrl, 'must be an absolute http(s) URL');

export function isHttpUrl(value: string): boolean {
  try {
    const u = new URL(value);
    return (u.protocol === 'http:' || u.protocol === 'https:') && u.hostname !== '';
  } catch {
    return false;
  }
}

export const ChatMessage = z.strictObject({
  role: z.enum(['system', 'user', 'assistant']),
  content: Text,
});

/** JSON-Schema-style object describing a tool's parameters. */
export const ToolParameters = z.strictObject({
  type: z.literal('object'),
  properties: z.record(wellFormed(), z.unknown()).optional(),
  required: z.array(wellFormed()).optional(),
});

export const Tool = z.strictObject({
  name: wellFormed().regex(TOOL_NAME_PATTERN, 'must be 1 to 64 of A-Z, a-z, 0-9, _ and -'),
  description: Text.optional(),
  url: HttpUrl.optional(),
  async: z.boolean().optional(),
  parameters: ToolParameters.optional(),
});
export type Tool = z.infer<typeof Tool>;

const Provider = wellFormed().min(1).max(64);
const ModelName = wellFormed().min(1).max(200);

export const SttConfig = z.strictObject({
  provider: Provider,
  model: ModelName.optional(),
  language: wellFormed().min(1).max(32).optional(),
  keyterms: z.array(wellFormed().min(1).max(200)).max(100).optional(),
  smart_format: z.boolean().optional(),
  endpointing: z.number().int().min(0).max(10_000).optional(),
  numerals: z.boolean().optional(),
  filler_words: z.boolean().optional(),
  utterance_end_ms: z.number().int().min(0).max(10_000).optional(),
  no_delay: z.boolean().optional(),
  /** The server of provider `openai-compatible` (engine/base-url.ts). */
  base_url: BaseUrl.optional(),
});
export type SttConfig = z.infer<typeof SttConfig>;

/** The function a call offers its model to press keys on the phone's keypad (docs/keypad.md). */
export const PRESS_KEYS_TOOL = 'press_keys';
/** Functions Switchboard itself carries out, asked for by name in `llm_config.builtin_tools`. */
export const BUILTIN_TOOLS = [PRESS_KEYS_TOOL] as const;
export type BuiltinTool = (typeof BUILTIN_TOOLS)[number];

export const LlmConfig = z
  .strictObject({
    provider: Provider,
    model: ModelName.optional(),
    /** Base URL of an OpenAI-compatible server (provider `custom-llm`). */
    url: HttpUrl.optional(),
    max_completion_tokens: z.number().int().min(1).max(128_000).optional(),
    temperature: z.number().min(0).max(2).optional(),
    messages: z.array(ChatMessage).max(100).optional(),
    tools: z.array(Tool).max(128).optional(),
    /** Functions Switchboard carries out itself: `press_keys` (the keypad). */
    builtin_tools: z.array(z.enum(BUILTIN_TOOLS)).max(16).optional(),
  })
  .superRefine((config, ctx) => {
    // a builtin's name is its own: an assistant tool of that name would be one function twice
    const builtins = new Set<string>(config.builtin_tools ?? []);
    for (const [i, tool] of (config.tools ?? []).entries()) {
      if (builtins.has(tool.name)) {
        ctx.addIssue({ code: 'custom', path: ['tools', i, 'name'], message: `"${tool.name}" is the name of a builtin tool asked for in builtin_tools; choose another name` });
      }
    }
  });
export type LlmConfig = z.infer<typeof LlmConfig>;

export const TtsConfig = z.strictObject({
  provider: Provider,
  voice_id: wellFormed().min(1).max(200).optional(),
  model: ModelName.optional(),
  /** Base URL of a server of OpenAI's `/v1/audio/speech` (provider `openai-compatible`). */
  base_url: HttpUrl.optional(),
  stability: z.number().min(0).max(1).optional(),
  similarity_boost: z.number().min(0).max(1).optional(),
  style: z.number().min(0).max(1).optional(),
  use_speaker_boost: z.boolean().optional(),
  speed: z.number().min(0.25).max(4).optional(),
  apply_text_normalization: z.enum(['auto', 'on', 'off']).optional(),
  apply_language_text_normalization: z.boolean().optional(),
  language: wellFormed().min(1).max(32).optional(),
});
export type TtsConfig = z.infer<typeof TtsConfig>;

const Seconds = z.number().min(0).max(30);

/** The caller's voice-activity detector (docs/turn-taking.md). */
export const VAD_KINDS = ['webrtc', 'silero'] as const;
export type VadKind = (typeof VAD_KINDS)[number];

export const TurnTaking = z
  .strictObject({
    vad: z.enum(VAD_KINDS, { error: `must be one of ${VAD_KINDS.map((k) => `"${k}"`).join(', ')}` }).optional(),
    endpointing_min_delay: Seconds.optional(),
    endpointing_max_delay: Seconds.optional(),
    interruption_min_duration: Seconds.optional(),
    interruption_min_words: z.number().int().min(0).max(100).optional(),
    false_interruption_timeout: Seconds.optional(),
  })
  .refine(
    (t) =>
      t.endpointing_min_delay === undefined ||
      t.endpointing_max_delay === undefined ||
      t.endpointing_min_delay <= t.endpointing_max_delay,
    { message: 'endpointing_min_delay must not exceed endpointing_max_delay' },
  );

export const SpeechConfig = z.strictObject({
  turn_taking: TurnTaking.optional(),
  pronunciation: z
    .array(z.strictObject({ from: wellFormed().min(1).max(200), to: wellFormed().max(200) }))
    .max(500)
    .optional(),
  background_audio: z
    .strictObject({
      enabled: z.boolean().optional(),
      clip: wellFormed().min(1).max(2000).nullable().optional(),
      volume: z.number().min(0).max(1).optional(),
    })
    .optional(),
  silence: z
    .strictObject({
      messages: z.array(Text).max(20).optional(),
      final_message: Text.optional(),
      first_check_seconds: z.number().min(1).max(600).optional(),
      interval_seconds: z.number().min(1).max(600).optional(),
      max_attempts: z.number().int().min(0).max(20).optional(),
    })
    .optional(),
  end_call_message: Text.optional(),
  first_message_outbound: Text.nullable().optional(),
});
export type SpeechConfig = z.infer<typeof SpeechConfig>;

// ---------------------------------------------------------------------------------------------
// Workflow definition

const NodeId = z
  .string()
  .regex(NODE_ID_PATTERN, 'must be 1 to 64 of A-Z, a-z, 0-9, _ and -');

const nodeCommon = {
  id: NodeId,
  first_line: Text.optional(),
  llm_config: LlmConfig.optional(),
  tts_config: TtsConfig.optional(),
  stt_config: SttConfig.optional(),
};

export const ConversationNode = z.strictObject({
  ...nodeCommon,
  type: z.literal('conversation'),
  instructions: Text.optional(),
  global: z.boolean().optional(),
  global_description: Text.optional(),
});

export const ToolArgumentValue = z.union([Text, z.number(), z.boolean(), z.null()]);

export const ToolNode = z.strictObject({
  ...nodeCommon,
  type: z.literal('tool'),
  tool_name: wellFormed().regex(TOOL_NAME_PATTERN, 'must be 1 to 64 of A-Z, a-z, 0-9, _ and -'),
  url: HttpUrl,
  arguments: z.record(wellFormed(), ToolArgumentValue).optional(),
});

/** What a warm transfer's operator hears when the node gives no `operator_message`. */
export const DEFAULT_OPERATOR_MESSAGE = 'Incoming transfer: {{summary}}';
export const DEFAULT_RING_TIMEOUT_SECONDS = 30;
/** The fields only a warm transfer takes (DECISIONS 16), on a node or a live control. */
export const WARM_TRANSFER_FIELDS = ['operator_message', 'hold_message', 'ring_timeout_seconds', 'require_acceptance'] as const;
/** The problem with a warm-only field on a cold transfer (node or live control). */
export const WARM_ONLY_MESSAGE = 'only allowed on a warm transfer ("mode": "warm")';
export const TRANSFER_MODES = ['cold', 'warm'] as const;

/** A warm transfer's own settings, as a transfer node and a live control's `transfer` take them. */
export const WarmTransferFields = {
  /** Warm only: what the operator hears when they answer; `{{summary}}` is the model's summary. */
  operator_message: Text.optional(),
  /** Warm only: said to the caller after `first_line`, while the operator is dialled. */
  hold_message: Text.optional(),
  /** Warm only: how long the operator's phone rings before the transfer fails `no-answer`. */
  ring_timeout_seconds: z.number().int().min(5).max(120).optional(),
  /** Warm only: the operator takes the call by pressing 1. */
  require_acceptance: z.boolean().optional(),
};

export const TransferNode = z.strictObject({
  ...nodeCommon,
  type: z.literal('transfer'),
  destination: E164,
  /** `cold` (default): the carrier moves the call; `warm`: an operator is dialled, told, then joined. */
  mode: z.enum(TRANSFER_MODES).optional(),
  ...WarmTransferFields,
});

export const EndNode = z.strictObject({
  ...nodeCommon,
  type: z.literal('end'),
});

export const WorkflowNode = z.discriminatedUnion('type', [
  ConversationNode,
  ToolNode,
  TransferNode,
  EndNode,
]);
export type ConversationNode = z.infer<typeof ConversationNode>;
export type ToolNode = z.infer<typeof ToolNode>;
export type TransferNode = z.infer<typeof TransferNode>;
export type EndNode = z.infer<typeof EndNode>;
export type WorkflowNode = z.infer<typeof WorkflowNode>;
export type NodeType = WorkflowNode['type'];
export const NODE_TYPES: readonly NodeType[] = ['conversation', 'tool', 'transfer', 'end'];

export const WorkflowEdge = z.strictObject({
  from: NodeId,
  to: NodeId,
  description: Text.optional(),
  message: Text.optional(),
});
export type WorkflowEdge = z.infer<typeof WorkflowEdge>;

export const WorkflowDefinition = z.strictObject({
  version: z.literal(1),
  entry_node: NodeId,
  global_prompt: Text.optional(),
  nodes: z.array(WorkflowNode).min(1).max(LIMITS.nodes),
  edges: z.array(WorkflowEdge).max(LIMITS.edges),
});
export type WorkflowDefinition = z.infer<typeof WorkflowDefinition>;

// ---------------------------------------------------------------------------------------------
// Assistant

export const AnalysisPlan = z.strictObject({
  structured_data_plan: z
    .strictObject({
      enabled: z.boolean().optional(),
      schema: z.record(wellFormed(), z.unknown()).nullable().optional(),
      messages: z.array(ChatMessage).max(20).optional(),
    })
    .optional(),
  min_messages_threshold: z.number().int().min(0).max(10_000).optional(),
});

export const WebhookEvents = z.array(z.enum(WEBHOOK_EVENT_TYPES)).max(4);

/** Every assistant field a client may write (create and patch). */
export const assistantFields = {
  name: wellFormed().min(1).max(LIMITS.nameLength),
  business_name: wellFormed().max(LIMITS.nameLength),
  notification_email: z.email().max(320),
  notification_emails: z.array(z.email().max(320)).max(50),
  recording_consent: z.strictObject({ enabled: z.boolean().optional(), message: Text.optional() }),
  first_message: Text,
  is_active: z.boolean(),
  autonomous_silence_handling: z.boolean(),
  silence_timeout_seconds: z.number().int().min(1).max(3600),
  max_duration_seconds: z.number().int().min(10).max(43_200),
  voicemail_detection: z.boolean(),
  voicemail_message: Text,
  gdpr_mode: z.boolean(),
  webhook_url: HttpUrl,
  webhook_secret: wellFormed().min(8).max(512),
  webhook_events: WebhookEvents,
  analysis_plan: AnalysisPlan,
  stt_config: SttConfig,
  llm_config: LlmConfig,
  tts_config: TtsConfig,
  speech_config: SpeechConfig,
} as const;
