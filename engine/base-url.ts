/**
 * `base_url` of an STT or TTS block: where the customer's OpenAI-compatible server is (providers
 * `openai-compatible`, whose catalog entry `requires_url`). A chat model's block names its server
 * `url` (`custom-llm`), kept as it was (engine/catalog.ts `urlFieldOf`).
 */
import { z } from 'zod';

export const BaseUrl = z
  .string()
  .max(2048)
  .refine(isAbsoluteHttpUrl, 'must be an absolute http(s) URL')
  .describe("the server's base URL (provider openai-compatible): `/v1/audio/...` is added to it, `/v1` only when it does not end in it");

function isAbsoluteHttpUrl(value: string): boolean {
  try {
    const u = new URL(value);
    return (u.protocol === 'http:' || u.protocol === 'https:') && u.hostname !== '';
  } catch {
    return false;
  }
}
