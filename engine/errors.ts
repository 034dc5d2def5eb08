/**
 * Stable error codes of the engine (undici-style): callers, logs and webhooks match on `code`,
 * never on the wording of a message.
 */

/** Why a call is refused at call start (SPEC 7.3, DECISIONS 8). */
export const CallRejectCodes = {
  /** A node overrides `llm_config`, `tts_config` or `stt_config` under a realtime assistant. */
  REALTIME_OVERRIDE: 'CALL_REJECTED_REALTIME_OVERRIDE',
  /** A node `tts_config.voice_id` is not a voice of the effective TTS provider. */
  VOICE_PROVIDER_MISMATCH: 'CALL_REJECTED_VOICE_PROVIDER_MISMATCH',
  /** A config block (assistant or node) has no `provider`. */
  MISSING_PROVIDER: 'CALL_REJECTED_MISSING_PROVIDER',
  /** A config block names a provider the catalog does not know (for that kind of block). */
  UNKNOWN_PROVIDER: 'CALL_REJECTED_UNKNOWN_PROVIDER',
  /** A config block names a model, language or URL its provider cannot run. */
  INVALID_CONFIG: 'CALL_REJECTED_INVALID_CONFIG',
  /** A pipeline assistant has no voice: no `tts_config`, or no `voice_id` and no default voice. */
  MISSING_VOICE: 'CALL_REJECTED_MISSING_VOICE',
  /** A provider the call would run needs a key (DEEPGRAM_API_KEY, …) the server does not have. */
  MISSING_PROVIDER_KEY: 'CALL_REJECTED_MISSING_PROVIDER_KEY',
} as const;

export type CallRejectCode = (typeof CallRejectCodes)[keyof typeof CallRejectCodes];

/** Base of the engine's errors: every one carries a stable `code`. */
export class EngineError extends Error {
  readonly code: string;

  constructor(code: string, message: string) {
    super(message);
    this.name = 'EngineError';
    this.code = code;
  }
}

/** Thrown (or logged) by the service when call-start checks refuse a call; lists every reason. */
export class CallRejectedError extends EngineError {
  readonly problems: ReadonlyArray<{ code: CallRejectCode; message: string }>;

  constructor(problems: ReadonlyArray<{ code: CallRejectCode; message: string }>) {
    super(
      'CALL_REJECTED',
      `call rejected at start: ${problems.map((p) => `${p.code}: ${p.message}`).join('; ')}`,
    );
    this.name = 'CallRejectedError';
    this.problems = problems;
  }
}
