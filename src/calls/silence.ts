/** What the engine does on `timer.silence` for an assistant (DECISIONS 13). */
import type { EffectiveAssistant } from '../../engine/assistant.js';
import type { SilencePolicy } from '../../engine/compile.js';

/**
 * `autonomous_silence_handling`: the checks of `speech_config.silence` (the model writes each
 * check-in when `messages` is empty). Without it there are no check-ins: the first check is the
 * last, and says `end_call_message`.
 */
export function silencePolicy(assistant: EffectiveAssistant): SilencePolicy {
  const speech = assistant.speech_config;
  if (!assistant.autonomous_silence_handling) {
    return { messages: [], final_message: speech.end_call_message || null, max_attempts: 0 };
  }
  const { messages, final_message, max_attempts } = speech.silence;
  return { messages, final_message, max_attempts };
}
