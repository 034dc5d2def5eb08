/**
 * Assistants: the request schemas (create, patch), the create rules of SPEC 2.5 with the catalog
 * checks, and the effective view with platform defaults filled in (DECISIONS 5). Pure.
 */
import { z } from 'zod';
import {
  assistantFields,
  WEBHOOK_EVENT_TYPES,
  type LlmConfig,
  type SttConfig,
  type TtsConfig,
  type VadKind,
  type WebhookEventType,
} from './schema.js';
import {
  BACKGROUND_CLIPS,
  backgroundClipProblem,
  catalogProblems,
  defaultCatalog,
  findProvider,
  isRealtimeProvider,
  type Catalog,
} from './catalog.js';

type FieldName = keyof typeof assistantFields;

export const AssistantCreate = z.strictObject(assistantFields).partial().required({ name: true });
export type AssistantCreate = z.infer<typeof AssistantCreate>;

/** PATCH: any field; `null` resets a field to its platform default (name cannot be reset). */
export const AssistantPatch = z.strictObject(
  Object.fromEntries(
    Object.entries(assistantFields).map(([k, s]) => [
      k,
      k === 'name' ? s.optional() : s.nullable().optional(),
    ]),
  ) as unknown as {
    [K in FieldName]: K extends 'name'
      ? z.ZodOptional<(typeof assistantFields)[K]>
      : z.ZodOptional<z.ZodNullable<(typeof assistantFields)[K]>>;
  },
);
export type AssistantPatch = z.infer<typeof AssistantPatch>;

/** What is stored: only the fields the customer set. */
export type AssistantFields = Partial<AssistantCreate> & { name: string };

/** Applies a patch to stored fields: provided fields replaced whole, `null` removes. */
export function applyAssistantPatch(stored: AssistantFields, patch: AssistantPatch): AssistantFields {
  const next: Record<string, unknown> = { ...stored };
  for (const [key, value] of Object.entries(patch)) {
    if (value === undefined) continue;
    if (value === null) delete next[key];
    else next[key] = value;
  }
  return next as AssistantFields;
}

export function isRealtimeAssistant(
  fields: { llm_config?: { provider?: unknown } | null },
  catalog: Catalog = defaultCatalog,
): boolean {
  return isRealtimeProvider(catalog, fields.llm_config?.provider);
}

/** Every problem with an assistant's fields beyond their types (SPEC 2.5 create rules, catalog). */
export function assistantProblems(
  fields: Partial<AssistantCreate>,
  catalog: Catalog = defaultCatalog,
): string[] {
  const problems: string[] = [];
  if (fields.name === undefined) problems.push('name: required');
  if (fields.llm_config) {
    problems.push(...catalogProblems('llm', fields.llm_config, 'llm_config', { allowRealtime: true }, catalog));
  }
  if (fields.stt_config) {
    problems.push(...catalogProblems('stt', fields.stt_config, 'stt_config', { allowRealtime: false }, catalog));
  }
  if (fields.tts_config) {
    problems.push(...catalogProblems('tts', fields.tts_config, 'tts_config', { allowRealtime: false }, catalog));
  }
  if (isRealtimeAssistant(fields, catalog)) {
    const provider = String(fields.llm_config?.provider);
    if (fields.stt_config) {
      problems.push(
        `stt_config: not used by a realtime assistant (llm_config.provider "${provider}" hears the caller itself); remove it`,
      );
    }
    if (fields.tts_config) {
      problems.push(
        `tts_config: not used by a realtime assistant (llm_config.provider "${provider}" speaks itself); remove it`,
      );
    }
  } else if (!fields.tts_config) {
    problems.push(
      'tts_config: required for a pipeline assistant (a voice is specific to a provider and has no default), e.g. {"provider":"elevenlabs","voice_id":"..."}',
    );
  } else if (fields.tts_config.voice_id === undefined) {
    const provider = findProvider(catalog, 'tts', fields.tts_config.provider);
    const hint = provider?.voices ? ` (one of ${provider.voices.map((v) => `"${v}"`).join(', ')})` : '';
    problems.push(`tts_config.voice_id: required for a pipeline assistant${hint}`);
  }
  const turnTaking = { ...DEFAULT_TURN_TAKING, ...fields.speech_config?.turn_taking };
  if (turnTaking.endpointing_min_delay > turnTaking.endpointing_max_delay) {
    problems.push(
      `speech_config.turn_taking: endpointing_min_delay (${turnTaking.endpointing_min_delay} s) must not exceed endpointing_max_delay (${turnTaking.endpointing_max_delay} s)`,
    );
  }
  const background = fields.speech_config?.background_audio;
  if (background?.clip !== undefined && background.clip !== null) {
    // https is required where the clip is fetched (the API checks that, and fetches it)
    const problem = backgroundClipProblem(background.clip, { allowHttp: true });
    if (problem) problems.push(`speech_config.background_audio.clip: ${problem}`);
  } else if (background?.enabled) {
    const names = BACKGROUND_CLIPS.map((c) => `"${c.id}"`).join(', ');
    problems.push(`speech_config.background_audio.clip: required when background audio is enabled (${names}, or an https URL of a WAV file)`);
  }
  const plan = fields.analysis_plan?.structured_data_plan;
  if (plan?.enabled && (plan.schema === undefined || plan.schema === null)) {
    problems.push('analysis_plan.structured_data_plan.schema: required when the plan is enabled');
  }
  return problems;
}

// ---------------------------------------------------------------------------------------------
// Effective values

export const DEFAULT_TURN_TAKING = {
  /** WebRTC's detector with a modulation check: it passes the fixtures at a fraction of Silero's CPU (docs/turn-taking.md). */
  vad: 'webrtc' as VadKind,
  endpointing_min_delay: 0.5,
  endpointing_max_delay: 3.0,
  interruption_min_duration: 0.5,
  interruption_min_words: 0,
  false_interruption_timeout: 2.0,
} as const;

export const DEFAULT_SILENCE = {
  messages: ['Are you still there?'],
  final_message: "I haven't heard from you, so I'll end the call now. Goodbye.",
  first_check_seconds: 10,
  interval_seconds: 10,
  max_attempts: 2,
} as const;

export const DEFAULT_STRUCTURED_DATA_MESSAGES = [
  {
    role: 'system' as const,
    content:
      'You extract structured data from a phone call transcript. Answer with JSON that matches this JSON schema: {{schema}}',
  },
];

export interface EffectiveAssistant {
  name: string;
  business_name: string | null;
  notification_email: string | null;
  notification_emails: string[];
  recording_consent: { enabled: boolean; message: string };
  first_message: string | null;
  is_active: boolean;
  autonomous_silence_handling: boolean;
  silence_timeout_seconds: number;
  max_duration_seconds: number;
  voicemail_detection: boolean;
  voicemail_message: string | null;
  gdpr_mode: boolean;
  webhook_url: string | null;
  webhook_secret: string | null;
  webhook_events: WebhookEventType[];
  analysis_plan: {
    structured_data_plan: {
      enabled: boolean;
      schema: Record<string, unknown> | null;
      messages: { role: 'system' | 'user' | 'assistant'; content: string }[];
    };
    min_messages_threshold: number;
  };
  stt_config: SttConfig | null;
  llm_config: LlmConfig;
  tts_config: TtsConfig | null;
  speech_config: {
      pronunciation: { from: string; to: string }[];
      end_call_message: string;
      turn_taking: { [K in Exclude<keyof typeof DEFAULT_TURN_TAKING, 'vad'>]: number } & { vad: VadKind };
      silence: {
        messages: string[];
        final_message: string;
        first_check_seconds: number;
        interval_seconds: number;
        max_attempts: number;
      };
      background_audio: { enabled: boolean; clip: string | null; volume: number };
      first_message_outbound: string | null;
    };
  /** Derived: whether the assistant runs one realtime (speech-to-speech) model. */
  realtime: boolean;
}

function withModelDefault<T extends { provider: string; model?: string }>(
  catalog: Catalog,
  kind: 'llm' | 'stt' | 'tts' | 'realtime',
  block: T,
): T {
  if (block.model !== undefined) return block;
  const provider = findProvider(catalog, kind, block.provider);
  return provider?.default_model ? { ...block, model: provider.default_model } : block;
}

/** The assistant as a call runs it: every unset field at its platform default. */
export function effectiveAssistant(
  fields: AssistantFields,
  catalog: Catalog = defaultCatalog,
): EffectiveAssistant {
  const realtime = isRealtimeAssistant(fields, catalog);
  const llmBlock = fields.llm_config ?? { provider: 'openai', model: 'gpt-4o-mini' };
  const llm_config = withModelDefault(catalog, realtime ? 'realtime' : 'llm', llmBlock);
  let stt_config: SttConfig | null = null;
  if (!realtime) {
    const stt = withModelDefault(catalog, 'stt', fields.stt_config ?? { provider: 'deepgram' });
    const sttProvider = findProvider(catalog, 'stt', stt.provider);
    stt_config =
      stt.language === undefined && sttProvider?.default_language
        ? { ...stt, language: sttProvider.default_language }
        : stt;
  }
  let tts_config: TtsConfig | null = null;
  if (!realtime && fields.tts_config) {
    tts_config = withModelDefault(catalog, 'tts', fields.tts_config);
  }
  const speech = fields.speech_config ?? {};
  const plan = fields.analysis_plan ?? {};
  return {
    name: fields.name,
    business_name: fields.business_name ?? null,
    notification_email: fields.notification_email ?? null,
    notification_emails: fields.notification_emails ?? [],
    recording_consent: {
      enabled: fields.recording_consent?.enabled ?? false,
      message:
        fields.recording_consent?.message ??
        'This call may be recorded for quality and training purposes.',
    },
    first_message: fields.first_message ?? null,
    is_active: fields.is_active ?? true,
    autonomous_silence_handling: fields.autonomous_silence_handling ?? true,
    silence_timeout_seconds: fields.silence_timeout_seconds ?? 30,
    max_duration_seconds: fields.max_duration_seconds ?? 600,
    voicemail_detection: fields.voicemail_detection ?? false,
    voicemail_message: fields.voicemail_message ?? null,
    gdpr_mode: fields.gdpr_mode ?? false,
    webhook_url: fields.webhook_url ?? null,
    webhook_secret: fields.webhook_secret ?? null,
    webhook_events: fields.webhook_events ?? [...WEBHOOK_EVENT_TYPES],
    analysis_plan: {
      structured_data_plan: {
        enabled: plan.structured_data_plan?.enabled ?? false,
        schema: plan.structured_data_plan?.schema ?? null,
        messages: plan.structured_data_plan?.messages ?? DEFAULT_STRUCTURED_DATA_MESSAGES,
      },
      min_messages_threshold: plan.min_messages_threshold ?? 2,
    },
    stt_config,
    llm_config,
    tts_config,
    speech_config: {
      turn_taking: { ...DEFAULT_TURN_TAKING, ...speech.turn_taking },
      pronunciation: speech.pronunciation ?? [],
      background_audio: {
        enabled: speech.background_audio?.enabled ?? false,
        clip: speech.background_audio?.clip ?? null,
        volume: speech.background_audio?.volume ?? 0.5,
      },
      silence: { ...DEFAULT_SILENCE, ...speech.silence, messages: speech.silence?.messages ?? [...DEFAULT_SILENCE.messages] },
      end_call_message: speech.end_call_message ?? 'Goodbye.',
      first_message_outbound: speech.first_message_outbound ?? null,
    },
    realtime,
  };
}
