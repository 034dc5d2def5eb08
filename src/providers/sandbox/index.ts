/** The offline sandbox providers (demo, tests, benchmarks): see docs/sandbox.md. */
export { createSandboxStt, SandboxSttSession, type SandboxSttStats } from './stt.js';
export { createSandboxTts, synthesizeSandboxSpeech, sandboxSpeechBytes } from './tts.js';
export { createSandboxLlm, decide as decideSandboxReply, contentWords, bestFunction } from './llm.js';
export { createSandboxRealtime } from './realtime.js';
export { MODEM, modulateText, FskReceiver } from './modem.js';
