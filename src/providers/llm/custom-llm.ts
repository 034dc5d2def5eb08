/**
 * `custom-llm`: any OpenAI-compatible chat completions server of the customer's (Ollama, vLLM,
 * llama.cpp, ...) at the block's `llm_config.url`, any model name. The OpenAI adapter serves it
 * (`llm/openai.ts`); the server's OpenAI key is never sent there.
 */
import { declareProvider } from '../declare.js';
import { createOpenAiLlm } from './openai.js';

export const provider = declareProvider({
  catalog: {
    id: 'custom-llm',
    kind: 'llm',
    description:
      'Any OpenAI-compatible chat completions server (Ollama, vLLM, llama.cpp, ...) at llm_config.url.',
    models: null,
    default_model: null,
    requires_url: true,
  },
  account: null,
  needs: 'its own `llm_config.url` (and key), none of the server\'s',
  create: (settings) => createOpenAiLlm(settings, 'custom-llm'),
});
