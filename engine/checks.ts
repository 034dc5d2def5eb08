/**
 * Call-start checks (SPEC 7.3, DECISIONS 8): the resolved assistant and the definition snapshot in,
 * every reason to refuse the call out. They fail closed: the call is rejected before pickup.
 *
 * Write-time validation cannot do this: it does not know which assistant will run the workflow,
 * and an inline assistant from an assistant-request answer may carry blocks without `provider`.
 */
import {
  catalogProblems,
  defaultCatalog,
  findProvider,
  isRealtimeProvider,
  type Catalog,
  type CatalogProvider,
  type ConfigBlockKind,
} from './catalog.js';
import { CallRejectCodes, type CallRejectCode } from './errors.js';
import { formatPath, quote } from './paths.js';
import type { WorkflowDefinition } from './schema.js';

export interface CallStartProblem {
  code: CallRejectCode;
  message: string;
}

type LooseBlock = Record<string, unknown> | null | undefined;

/** The resolved assistant snapshot; blocks may be missing, `null`, or lack `provider`. */
export interface AssistantForChecks {
  llm_config?: LooseBlock;
  stt_config?: LooseBlock;
  tts_config?: LooseBlock;
}

const BLOCKS: ReadonlyArray<readonly [key: 'llm_config' | 'tts_config' | 'stt_config', kind: ConfigBlockKind, what: string]> = [
  ['llm_config', 'llm', 'model'],
  ['tts_config', 'tts', 'voice'],
  ['stt_config', 'stt', 'transcriber'],
];

export function callStartChecks(
  assistant: AssistantForChecks,
  definition: WorkflowDefinition | null,
  catalog: Catalog = defaultCatalog,
): CallStartProblem[] {
  const problems: CallStartProblem[] = [];
  const add = (code: CallRejectCode, message: string) => problems.push({ code, message });

  const assistantLlm = asRecord(assistant.llm_config);
  const assistantTts = asRecord(assistant.tts_config);
  const realtimeProvider = isRealtimeProvider(catalog, assistantLlm?.provider)
    ? (assistantLlm!.provider as string)
    : undefined;

  // The assistant's own blocks. An absent block means the platform default.
  for (const [key, kind] of BLOCKS) {
    const block = assistant[key];
    if (block === undefined || block === null) continue;
    checkBlock(kind, block, `assistant.${key}`, kind === 'llm', catalog, add);
  }
  if (realtimeProvider === undefined) {
    if (!assistantTts) {
      add(
        CallRejectCodes.MISSING_VOICE,
        'assistant.tts_config: required for a pipeline assistant (a voice is provider-specific and no default exists)',
      );
    } else if (assistantTts.voice_id === undefined) {
      const provider = findProvider(catalog, 'tts', assistantTts.provider);
      if (provider && provider.default_voice === undefined) {
        add(
          CallRejectCodes.MISSING_VOICE,
          `assistant.tts_config.voice_id: required for provider ${quote(provider.id)} (it has no default voice)`,
        );
      }
    }
  }

  // The nodes' overrides.
  for (const [i, node] of (definition?.nodes ?? []).entries()) {
    const record = node as unknown as Record<string, unknown>;
    for (const [key, kind, what] of BLOCKS) {
      const block = record[key];
      if (block === undefined || block === null) continue;
      const path = formatPath(['nodes', i, key], definition); // `nodes[1] (booking).tts_config`
      if (realtimeProvider !== undefined) {
        add(
          CallRejectCodes.REALTIME_OVERRIDE,
          `${path}: per-node ${what} overrides are not possible with realtime assistant provider ${quote(realtimeProvider)}`,
        );
      }
      checkBlock(kind, block, path, false, catalog, add);
      if (kind === 'tts' && realtimeProvider === undefined) {
        checkInheritedVoice(asRecord(block), path, assistantTts, catalog, add);
      }
    }
  }
  return problems;
}

/** One block: `provider` present and known, then the catalog's model/language/voice rules. */
function checkBlock(
  kind: ConfigBlockKind,
  block: unknown,
  path: string,
  allowRealtime: boolean,
  catalog: Catalog,
  add: (code: CallRejectCode, message: string) => void,
): void {
  const record = asRecord(block);
  if (!record) {
    add(CallRejectCodes.MISSING_PROVIDER, `${path}: must be an object with a provider`);
    return;
  }
  const provider = record.provider;
  if (provider === undefined || provider === null || provider === '') {
    add(CallRejectCodes.MISSING_PROVIDER, `${path}.provider: required; a config block without a provider cannot run`);
    return;
  }
  let known: CatalogProvider | undefined = findProvider(catalog, kind, provider);
  if (!known && kind === 'llm' && allowRealtime) known = findProvider(catalog, 'realtime', provider);
  if (!known) {
    // catalogProblems words the realtime-on-a-node case and lists the allowed providers.
    const [message] = catalogProblems(kind, record, path, { allowRealtime }, catalog);
    add(CallRejectCodes.UNKNOWN_PROVIDER, message ?? `${path}.provider: unknown ${kind} provider`);
    return;
  }
  for (const message of catalogProblems(kind, record, path, { allowRealtime }, catalog)) {
    add(
      message.startsWith(`${path}.voice_id:`)
        ? CallRejectCodes.VOICE_PROVIDER_MISMATCH
        : CallRejectCodes.INVALID_CONFIG,
      message,
    );
  }
}

/**
 * A node voice without a provider of its own is spoken by the assistant's TTS provider: when
 * that provider enumerates its voices, the voice must be one of them.
 */
function checkInheritedVoice(
  block: Record<string, unknown> | undefined,
  path: string,
  assistantTts: Record<string, unknown> | undefined,
  catalog: Catalog,
  add: (code: CallRejectCode, message: string) => void,
): void {
  if (!block || typeof block.voice_id !== 'string') return;
  if (block.provider !== undefined && block.provider !== null && block.provider !== '') return;
  const provider = findProvider(catalog, 'tts', assistantTts?.provider);
  if (!provider?.voices || provider.voices.includes(block.voice_id)) return;
  add(
    CallRejectCodes.VOICE_PROVIDER_MISMATCH,
    `${path}.voice_id: voice ${quote(block.voice_id)} does not belong to the assistant's TTS provider ${quote(provider.id)} (one of ${provider.voices.map(quote).join(', ')})`,
  );
}

function asRecord(value: unknown): Record<string, unknown> | undefined {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : undefined;
}
