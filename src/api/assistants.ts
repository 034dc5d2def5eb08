/** Assistants: SPEC 2.5 and 4.3, DECISIONS 5. */
import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import {
  applyAssistantPatch,
  assistantProblems,
  effectiveAssistant,
  type AssistantFields,
  type AssistantPatch,
} from '../../engine/assistant.js';
import type { LlmConfig, TtsConfig } from '../../engine/schema.js';
import type { Store } from '../store/index.js';
import type { BackgroundAudio } from '../audio/background.js';
import type { ProviderKeys } from '../providers/keys.js';
import { keyVariables } from '../providers/registry.js';
import type { StoredAssistant } from '../store/assistants.js';
import { generateWebhookSecret, maskSecret, MASKED_SECRET_PROBLEM, restoreMaskedSecret } from '../webhooks/secrets.js';
import { MASKED_URL_PROBLEM, maskUrlCredentials, restoreMaskedUrl } from '../webhooks/url-credentials.js';
import { invalidRequest, notFound } from './errors.js';
import {
  Assistant,
  AssistantCreateBody,
  AssistantPatchBody,
  ErrorBody,
  errorResponses,
  IdParams,
} from './schemas.js';

/** The stored fields checked as a whole; a webhook URL without a secret gets one generated. */
function prepare(fields: AssistantFields): { fields: AssistantFields; generatedSecret: boolean } {
  const problems = assistantProblems(fields);
  if (problems.length > 0) throw invalidRequest(problems, 'The assistant is not valid.');
  if (fields.webhook_url && !fields.webhook_secret) {
    return { fields: { ...fields, webhook_secret: generateWebhookSecret() }, generatedSecret: true };
  }
  return { fields, generatedSecret: false };
}

/** The URLs of an LLM block (custom-llm server, tools) with `url` mapped; the rest as it is. */
function mapLlmUrls<T extends LlmConfig | null | undefined>(llm: T, map: (url: string, path: string) => string): T {
  if (!llm) return llm;
  const out: LlmConfig = { ...llm };
  if (llm.url !== undefined) out.url = map(llm.url, 'llm_config.url');
  if (llm.tools) out.tools = llm.tools.map((t, i) => (t.url === undefined ? t : { ...t, url: map(t.url, `llm_config.tools[${i}].url`) }));
  return out as T;
}

/** The voice block with its server's URL (`openai-compatible`'s `base_url`) mapped. */
function mapTtsUrl<T extends TtsConfig | null | undefined>(tts: T, map: (url: string, path: string) => string): T {
  if (!tts || tts.base_url === undefined) return tts;
  return { ...tts, base_url: map(tts.base_url, 'tts_config.base_url') } as T;
}

/**
 * A write's URLs (webhook, custom-llm and speech servers, tools) sent back as they were shown, credentials
 * masked, become the stored URLs again, and so does a masked `webhook_secret`; a masked value
 * that matches nothing stored is refused.
 */
function restoreAssistantUrls<T extends AssistantPatch>(input: T, current: AssistantFields | null): T {
  const stored = current
    ? [current.webhook_url, current.llm_config?.url, current.tts_config?.base_url, ...(current.llm_config?.tools ?? []).map((t) => t.url)]
    : [];
  const problems: string[] = [];
  const restore = (url: string, path: string) => {
    const real = restoreMaskedUrl(url, stored);
    if (real === null) problems.push(`${path}: ${MASKED_URL_PROBLEM}`);
    return real ?? url;
  };
  const out: T = { ...input };
  if (typeof input.webhook_url === 'string') out.webhook_url = restore(input.webhook_url, 'webhook_url');
  if (typeof input.webhook_secret === 'string') {
    const secret = restoreMaskedSecret(input.webhook_secret, current?.webhook_secret);
    if (secret === null) problems.push(`webhook_secret: ${MASKED_SECRET_PROBLEM}`);
    else out.webhook_secret = secret;
  }
  if (input.llm_config) out.llm_config = mapLlmUrls(input.llm_config, restore);
  if (input.tts_config) out.tts_config = mapTtsUrl(input.tts_config, restore);
  if (problems.length > 0) throw invalidRequest(problems, 'The assistant is not valid.');
  return out;
}

export function assistantView(stored: StoredAssistant, showSecret = false) {
  const { realtime: _derived, ...effective } = effectiveAssistant(stored.fields);
  const secret = effective.webhook_secret;
  return {
    id: stored.id,
    ...effective,
    // credentials in URLs are write-only like the secret (docs/decisions.md, API)
    webhook_url: effective.webhook_url === null ? null : maskUrlCredentials(effective.webhook_url),
    llm_config: mapLlmUrls(effective.llm_config, maskUrlCredentials),
    tts_config: mapTtsUrl(effective.tts_config, maskUrlCredentials),
    webhook_secret: secret && !showSecret ? maskSecret(secret) : secret,
    created_at: stored.created_at,
    updated_at: stored.updated_at,
  };
}

/**
 * A background clip given in a write is loaded now (a URL fetched under the webhook address
 * rules, at most 10 MB, and kept for calls), so that an unusable one is a 400 here rather than a
 * call without its background later.
 */
async function checkBackgroundClip(background: BackgroundAudio | undefined, body: AssistantPatch): Promise<void> {
  const clip = body.speech_config?.background_audio?.clip;
  if (!background || typeof clip !== 'string') return;
  const problem = await background.problem(clip);
  if (problem) throw invalidRequest([`speech_config.background_audio.clip: ${problem}`], 'The assistant is not valid.');
}

export interface AssistantRoutesOptions {
  /** Loads background clips to check them (DECISIONS 13). */
  background?: BackgroundAudio;
  /** The providers' keys this server has: writes warn of the ones the assistant needs and lacks. */
  keys?: ProviderKeys;
}

/** What a write answers beside the assistant: the providers it needs whose keys this server lacks. */
const written = z.object({
  assistant: Assistant,
  warnings: z
    .array(z.string())
    .describe(
      `Providers this assistant needs whose key (${keyVariables().join(', ')}) is not set on this server: ` +
        'the assistant is saved, but its calls are refused at start (CALL_REJECTED_MISSING_PROVIDER_KEY) until the key is set. Empty when none.',
    ),
});

export const assistantRoutes =
  (store: Store, options: AssistantRoutesOptions = {}): FastifyPluginAsyncZod =>
  async (app) => {
    const tags = ['assistants'];

    app.post('/assistants', {
      schema: {
        operationId: 'createAssistant',
        tags,
        summary: 'Create an assistant (name required; pipeline assistants also need tts_config)',
        body: AssistantCreateBody,
        response: { 201: written, ...errorResponses },
      },
      handler: async (request, reply) => {
        const { fields, generatedSecret } = prepare(restoreAssistantUrls(request.body, null) as AssistantFields);
        await checkBackgroundClip(options.background, request.body);
        const stored = await store.assistants.create(request.organization.id, fields);
        const warnings = options.keys?.problems(stored.fields, null) ?? [];
        return reply.code(201).send({ assistant: assistantView(stored, generatedSecret), warnings });
      },
    });

    app.get('/assistants', {
      schema: {
        operationId: 'listAssistants',
        tags,
        summary: "List the organization's assistants, oldest first",
        response: { 200: z.object({ assistants: z.array(Assistant) }), ...errorResponses },
      },
      handler: async (request) => ({
        assistants: (await store.assistants.list(request.organization.id)).map((a) => assistantView(a)),
      }),
    });

    app.get('/assistants/:id', {
      schema: {
        operationId: 'getAssistant',
        tags,
        summary: 'Get an assistant, with the warnings a write would give (providers whose key this server lacks)',
        params: IdParams,
        response: { 200: written, ...errorResponses },
      },
      handler: async (request) => {
        const stored = await store.assistants.get(request.organization.id, request.params.id);
        if (!stored) throw notFound('assistant', request.params.id);
        return { assistant: assistantView(stored), warnings: options.keys?.problems(stored.fields, null) ?? [] };
      },
    });

    app.patch('/assistants/:id', {
      schema: {
        operationId: 'updateAssistant',
        tags,
        summary: 'Update an assistant: provided top-level fields replaced whole, null resets to the default',
        params: IdParams,
        body: AssistantPatchBody,
        response: { 200: written, ...errorResponses },
      },
      handler: async (request) => {
        await checkBackgroundClip(options.background, request.body);
        let generated = false;
        const stored = await store.assistants.update(request.organization.id, request.params.id, (current) => {
          const result = prepare(applyAssistantPatch(current, restoreAssistantUrls(request.body, current)));
          generated = result.generatedSecret;
          return result.fields;
        });
        if (!stored) throw notFound('assistant', request.params.id);
        return { assistant: assistantView(stored, generated), warnings: options.keys?.problems(stored.fields, null) ?? [] };
      },
    });

    app.delete('/assistants/:id', {
      schema: {
        operationId: 'deleteAssistant',
        tags,
        summary: 'Delete an assistant (409 while a number uses it)',
        params: IdParams,
        response: { 204: z.undefined(), 409: ErrorBody.describe('In use'), ...errorResponses },
      },
      handler: async (request, reply) => {
        const deleted = await store.assistants.delete(request.organization.id, request.params.id);
        if (!deleted) throw notFound('assistant', request.params.id);
        return reply.code(204).send();
      },
    });
  };
