/**
 * Which providers need a key this server may not have (each vendor's `<VENDOR>_API_KEY`, as its
 * provider declarations say: `registry.ts`), and what an assistant or a call would use of them.
 * A call whose assistant or workflow needs a key the server lacks is refused at start, before
 * pickup, with the reasons in `errors` (it would otherwise fail after the caller answered);
 * `POST /assistants` and `PATCH /assistants/{id}` answer with `warnings` saying the same, since an
 * assistant is not wrong for it: the key may be set before its first call.
 *
 * `custom-llm` and `openai-compatible` bring their own servers (`llm_config.url`,
 * `tts_config.base_url`), and the sandbox needs none: their declarations name no account.
 */
import { effectiveAssistant, type AssistantFields } from '../../engine/assistant.js';
import type { WorkflowDefinition } from '../../engine/schema.js';
import { formatPath } from '../../engine/paths.js';
import { apiKeyVariable, vendorEndpoint } from './declare.js';
import { findDeclaration } from './registry.js';
import type { ProviderSettings } from './types.js';

type Kind = 'llm' | 'realtime' | 'stt' | 'tts';

/** The variables set on this server, to ask whether a provider can run. */
export class ProviderKeys {
  constructor(private readonly settings: ProviderSettings) {}

  /** The variable a provider needs and this server does not have, or null. */
  missing(kind: Kind, provider: string): string | null {
    const account = findDeclaration(kind, provider)?.account;
    if (!account) return null;
    return vendorEndpoint(this.settings, account).apiKey ? null : apiKeyVariable(account);
  }

  /**
   * Every provider the assistant (with its defaults) and the workflow's node overrides would run
   * that needs a key this server lacks: one line each, naming where it is used, the provider and
   * the variable. Empty when every key is there.
   */
  problems(fields: AssistantFields, definition: WorkflowDefinition | null, options: { chat?: boolean } = {}): string[] {
    const assistant = effectiveAssistant(fields);
    const out: string[] = [];
    const check = (kind: Kind, path: string, provider: string | undefined, note = '') => {
      if (!provider) return;
      const variable = this.missing(kind, provider);
      if (variable) out.push(`${path}: provider "${provider}"${note} needs ${variable}, which is not set on this server`);
    };
    const llm = assistant.llm_config;
    const llmNote = fields.llm_config ? '' : ' (the default model)';
    if (assistant.realtime) {
      check('realtime', 'llm_config.provider', llm.provider);
    } else {
      check('llm', 'llm_config.provider', llm.provider, llmNote);
      if (!options.chat) {
        check('stt', 'stt_config.provider', assistant.stt_config?.provider, fields.stt_config ? '' : ' (the default transcriber)');
        check('tts', 'tts_config.provider', assistant.tts_config?.provider);
      }
    }
    for (const [i, node] of (definition?.nodes ?? []).entries()) {
      const blocks = node as unknown as Record<string, { provider?: string } | null | undefined>;
      check('llm', `${formatPath(['nodes', i, 'llm_config'], definition)}.provider`, blocks.llm_config?.provider ?? undefined);
      if (options.chat) continue;
      check('stt', `${formatPath(['nodes', i, 'stt_config'], definition)}.provider`, blocks.stt_config?.provider ?? undefined);
      check('tts', `${formatPath(['nodes', i, 'tts_config'], definition)}.provider`, blocks.tts_config?.provider ?? undefined);
    }
    return [...new Set(out)];
  }
}
