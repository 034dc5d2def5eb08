/** Every adapter, by catalog provider id: one per provider in `engine/catalog.ts`. */
import type { Config } from '../config.js';
import type { Providers, ProviderSettings } from './types.js';
import { createDeepgramStt } from './stt/deepgram.js';
import { createOpenAiLlm } from './llm/openai.js';
import { createElevenLabsTts } from './tts/elevenlabs.js';
import { createOpenAiTts } from './tts/openai.js';
import { createOpenAiRealtime } from './realtime/openai.js';
import {
  createSandboxLlm,
  createSandboxRealtime,
  createSandboxStt,
  createSandboxTts,
} from './sandbox/index.js';

export function providerSettings(config: Config): ProviderSettings {
  return {
    deepgram: { baseUrl: config.DEEPGRAM_API_BASE, apiKey: config.DEEPGRAM_API_KEY },
    openai: { baseUrl: config.OPENAI_API_BASE, apiKey: config.OPENAI_API_KEY },
    elevenlabs: { baseUrl: config.ELEVENLABS_API_BASE, apiKey: config.ELEVENLABS_API_KEY },
  };
}

export function createProviders(settings: ProviderSettings): Providers {
  const stt = [createDeepgramStt(settings), createSandboxStt()];
  const llm = [createOpenAiLlm(settings, 'openai'), createOpenAiLlm(settings, 'custom-llm'), createSandboxLlm()];
  const tts = [createElevenLabsTts(settings), createOpenAiTts(settings), createSandboxTts()];
  const realtime = [createOpenAiRealtime(settings), createSandboxRealtime()];
  return {
    stt: new Map(stt.map((p) => [p.id, p])),
    llm: new Map(llm.map((p) => [p.id, p])),
    tts: new Map(tts.map((p) => [p.id, p])),
    realtime: new Map(realtime.map((p) => [p.id, p])),
  };
}
