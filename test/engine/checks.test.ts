import { describe, expect, it } from 'vitest';
import { callStartChecks, type AssistantForChecks } from '../../engine/checks.js';
import { CallRejectCodes, CallRejectedError } from '../../engine/errors.js';
import type { WorkflowDefinition } from '../../engine/schema.js';
import { conversation, definition, edge, end, validDefinition, validDefinitionWithOverrides } from './fixtures.js';

type Loose = Record<string, any>;

const pipeline: AssistantForChecks = {
  llm_config: { provider: 'openai', model: 'gpt-4o-mini' },
  stt_config: { provider: 'deepgram', model: 'nova-3', language: 'en' },
  tts_config: { provider: 'openai', voice_id: 'alloy' },
};
const realtime: AssistantForChecks = { llm_config: { provider: 'openai-realtime', model: 'gpt-realtime' } };

/** validDefinition() indices: 1 identify_caller (stt), 3 booking (llm), 4 not_found (tts). */
const withNodeBlock = (index: number, key: string, block: unknown): WorkflowDefinition => {
  const def = validDefinition() as Loose;
  def.nodes[index][key] = block;
  return def as WorkflowDefinition;
};

const codes = (problems: { code: string }[]) => problems.map((p) => p.code);

describe('callStartChecks: nothing to refuse', () => {
  it('passes a pipeline assistant with per-node overrides', () => {
    expect(callStartChecks(pipeline, validDefinitionWithOverrides())).toEqual([]);
  });

  it('passes a realtime assistant on a workflow without overrides', () => {
    expect(callStartChecks(realtime, validDefinition())).toEqual([]);
  });

  it('passes an assistant with no workflow, and blocks left to their defaults', () => {
    expect(callStartChecks(pipeline, null)).toEqual([]);
    expect(callStartChecks({ tts_config: { provider: 'sandbox' } }, null)).toEqual([]);
    expect(callStartChecks({ ...pipeline, llm_config: null, stt_config: undefined }, validDefinition())).toEqual([]);
  });

  it('accepts a node voice of its own provider, whatever the assistant speaks with', () => {
    const assistant = { ...pipeline, tts_config: { provider: 'elevenlabs', voice_id: 'JBFqnCBsd6RMkjVDRZzb' } };
    expect(callStartChecks(assistant, withNodeBlock(4, 'tts_config', { provider: 'openai', voice_id: 'nova' }))).toEqual([]);
  });
});

describe('callStartChecks: one reason at a time', () => {
  it('refuses node model, voice and transcriber overrides under a realtime assistant', () => {
    const problems = callStartChecks(realtime, validDefinitionWithOverrides());
    expect(problems).toEqual([
      {
        code: CallRejectCodes.REALTIME_OVERRIDE,
        message: 'nodes[1] (identify_caller).stt_config: per-node transcriber overrides are not possible with realtime assistant provider "openai-realtime"',
      },
      {
        code: CallRejectCodes.REALTIME_OVERRIDE,
        message: 'nodes[3] (booking).llm_config: per-node model overrides are not possible with realtime assistant provider "openai-realtime"',
      },
      {
        code: CallRejectCodes.REALTIME_OVERRIDE,
        message: 'nodes[4] (not_found).tts_config: per-node voice overrides are not possible with realtime assistant provider "openai-realtime"',
      },
    ]);
  });

  it('refuses a node voice that its own provider does not have', () => {
    const problems = callStartChecks(pipeline, withNodeBlock(4, 'tts_config', { provider: 'openai', voice_id: 'rachel' }));
    expect(codes(problems)).toEqual([CallRejectCodes.VOICE_PROVIDER_MISMATCH]);
    expect(problems[0]!.message).toMatch(/^nodes\[4\] \(not_found\)\.tts_config\.voice_id: unknown voice "rachel" for provider "openai"/);
  });

  it('refuses a node voice without a provider that the assistant\'s provider does not have', () => {
    const problems = callStartChecks(pipeline, withNodeBlock(4, 'tts_config', { voice_id: 'rachel' }));
    expect(codes(problems)).toEqual([CallRejectCodes.MISSING_PROVIDER, CallRejectCodes.VOICE_PROVIDER_MISMATCH]);
    expect(problems[0]!.message).toMatch(/^nodes\[4\] \(not_found\)\.tts_config\.provider: required/);
    expect(problems[1]!.message).toMatch(
      /^nodes\[4\] \(not_found\)\.tts_config\.voice_id: voice "rachel" does not belong to the assistant's TTS provider "openai"/,
    );
    // A voice of the assistant's provider, or a provider whose voices are not enumerated: only the
    // missing provider remains.
    expect(codes(callStartChecks(pipeline, withNodeBlock(4, 'tts_config', { voice_id: 'nova' })))).toEqual([
      CallRejectCodes.MISSING_PROVIDER,
    ]);
    const elevenlabs = { ...pipeline, tts_config: { provider: 'elevenlabs', voice_id: 'abc' } };
    expect(codes(callStartChecks(elevenlabs, withNodeBlock(4, 'tts_config', { voice_id: 'rachel' })))).toEqual([
      CallRejectCodes.MISSING_PROVIDER,
    ]);
  });

  it('refuses config blocks without a provider, on the assistant and on nodes', () => {
    const inline = { ...pipeline, llm_config: { model: 'gpt-4o' } };
    const problems = callStartChecks(inline, withNodeBlock(3, 'llm_config', { temperature: 0.5 }));
    expect(problems.map((p) => [p.code, p.message.split(':')[0]])).toEqual([
      [CallRejectCodes.MISSING_PROVIDER, 'assistant.llm_config.provider'],
      [CallRejectCodes.MISSING_PROVIDER, 'nodes[3] (booking).llm_config.provider'],
    ]);
    expect(codes(callStartChecks({ ...pipeline, stt_config: { provider: '' } }, null))).toEqual([
      CallRejectCodes.MISSING_PROVIDER,
    ]);
    expect(codes(callStartChecks({ ...pipeline, stt_config: 'deepgram' as never }, null))).toEqual([
      CallRejectCodes.MISSING_PROVIDER,
    ]);
  });

  it('refuses unknown providers', () => {
    const problems = callStartChecks({ ...pipeline, stt_config: { provider: 'whisper' } }, null);
    expect(codes(problems)).toEqual([CallRejectCodes.UNKNOWN_PROVIDER]);
    expect(problems[0]!.message).toMatch(/^assistant\.stt_config\.provider: unknown stt provider "whisper"/);
    // A realtime provider is fine on the assistant's llm_config, never in its tts_config.
    expect(codes(callStartChecks({ ...pipeline, tts_config: { provider: 'openai-realtime' } }, null))).toEqual([
      CallRejectCodes.UNKNOWN_PROVIDER,
    ]);
    // A node naming a realtime provider (write-time validation refuses it too).
    const node = callStartChecks(pipeline, withNodeBlock(3, 'llm_config', { provider: 'openai-realtime' }));
    expect(codes(node)).toEqual([CallRejectCodes.UNKNOWN_PROVIDER]);
    expect(node[0]!.message).toMatch(/^nodes\[3\] \(booking\)\.llm_config\.provider: "openai-realtime" is a realtime/);
  });

  it('refuses a model, language or URL the provider cannot run', () => {
    const problems = callStartChecks(
      {
        llm_config: { provider: 'custom-llm', model: 'llama3' },
        stt_config: { provider: 'deepgram', language: 'tlh' },
        tts_config: { provider: 'openai', model: 'tts-9', voice_id: 'alloy' },
      },
      null,
    );
    expect(problems.map((p) => [p.code, p.message.split(':')[0]])).toEqual([
      [CallRejectCodes.INVALID_CONFIG, 'assistant.llm_config.url'],
      [CallRejectCodes.INVALID_CONFIG, 'assistant.tts_config.model'],
      [CallRejectCodes.INVALID_CONFIG, 'assistant.stt_config.language'],
    ]);
  });

  it('refuses a pipeline assistant that has no voice', () => {
    const noTts = callStartChecks({ llm_config: pipeline.llm_config }, null);
    expect(noTts).toEqual([
      {
        code: CallRejectCodes.MISSING_VOICE,
        message: 'assistant.tts_config: required for a pipeline assistant (a voice is provider-specific and no default exists)',
      },
    ]);
    const noVoice = callStartChecks({ ...pipeline, tts_config: { provider: 'elevenlabs' } }, null);
    expect(codes(noVoice)).toEqual([CallRejectCodes.MISSING_VOICE]);
    expect(noVoice[0]!.message).toMatch(/^assistant\.tts_config\.voice_id: required for provider "elevenlabs"/);
  });
});

describe('callStartChecks: details name the node', () => {
  it('puts the node id after its index, on the path of every node detail', () => {
    const def = definition(
      [conversation('greet', { tts_config: { provider: 'openai', voice_id: 'rachel' } }), end('bye', { llm_config: { model: 'gpt-4o' } as never })],
      [edge('greet', 'bye', 'Done.')],
    );
    const problems = callStartChecks(pipeline, def);
    expect(problems.map((p) => [p.code, p.message.split(': ')[0]])).toEqual([
      [CallRejectCodes.VOICE_PROVIDER_MISMATCH, 'nodes[0] (greet).tts_config.voice_id'],
      [CallRejectCodes.MISSING_PROVIDER, 'nodes[1] (bye).llm_config.provider'],
    ]);
    expect(problems[1]!.message).toBe('nodes[1] (bye).llm_config.provider: required; a config block without a provider cannot run');
  });
});

describe('callStartChecks: every reason at once', () => {
  it('lists all of them', () => {
    const assistant: AssistantForChecks = {
      llm_config: { provider: 'openai-realtime' },
      stt_config: { model: 'nova-3' },
      tts_config: { provider: 'acme-tts' },
    };
    const def = definition(
      [
        conversation('a', { llm_config: { provider: 'openai', model: 'gpt-4o' } }),
        conversation('b', { tts_config: { voice_id: 'alloy' } as never, stt_config: { provider: 'deepgram' } }),
        end('c'),
      ],
      [edge('a', 'b', 'Next.'), edge('b', 'c', 'Done.')],
    );
    const problems = callStartChecks(assistant, def);
    expect(problems.map((p) => [p.code, p.message.split(':')[0]])).toEqual([
      [CallRejectCodes.UNKNOWN_PROVIDER, 'assistant.tts_config.provider'],
      [CallRejectCodes.MISSING_PROVIDER, 'assistant.stt_config.provider'],
      [CallRejectCodes.REALTIME_OVERRIDE, 'nodes[0] (a).llm_config'],
      [CallRejectCodes.REALTIME_OVERRIDE, 'nodes[1] (b).tts_config'],
      [CallRejectCodes.MISSING_PROVIDER, 'nodes[1] (b).tts_config.provider'],
      [CallRejectCodes.REALTIME_OVERRIDE, 'nodes[1] (b).stt_config'],
    ]);
  });

  it('gives the service an error that carries every problem', () => {
    const problems = callStartChecks(realtime, validDefinitionWithOverrides());
    const error = new CallRejectedError(problems);
    expect(error.code).toBe('CALL_REJECTED');
    expect(error.problems).toHaveLength(3);
    expect(error.message).toContain('CALL_REJECTED_REALTIME_OVERRIDE: nodes[1] (identify_caller).stt_config');
  });

  it('uses stable codes', () => {
    expect(CallRejectCodes).toEqual({
      REALTIME_OVERRIDE: 'CALL_REJECTED_REALTIME_OVERRIDE',
      VOICE_PROVIDER_MISMATCH: 'CALL_REJECTED_VOICE_PROVIDER_MISMATCH',
      MISSING_PROVIDER: 'CALL_REJECTED_MISSING_PROVIDER',
      UNKNOWN_PROVIDER: 'CALL_REJECTED_UNKNOWN_PROVIDER',
      INVALID_CONFIG: 'CALL_REJECTED_INVALID_CONFIG',
      MISSING_VOICE: 'CALL_REJECTED_MISSING_VOICE',
      MISSING_PROVIDER_KEY: 'CALL_REJECTED_MISSING_PROVIDER_KEY',
    });
  });
});
