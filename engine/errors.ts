/**
 * One error root for all of Switchboard (undici-style, `lib/core/errors.js`): every error the
 * engine, a provider, a carrier, the store or a call raises is a `SwitchboardError` with a stable
 * `code` from `ErrorCodes`. Callers, logs and webhooks match on `code`, never on a message. The
 * engine imports nothing from `src/`, so the root lives here; `src/errors.ts` re-exports it.
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

/**
 * Every code an error (thrown, or kept in a call's `errors`) may carry, each key its own value.
 * A code, once shipped, never changes meaning nor spelling; new failures get new codes.
 */
export const ErrorCodes = Object.freeze({
  // engine
  CALL_REJECTED: 'CALL_REJECTED',
  CALL_REJECTED_REALTIME_OVERRIDE: CallRejectCodes.REALTIME_OVERRIDE,
  CALL_REJECTED_VOICE_PROVIDER_MISMATCH: CallRejectCodes.VOICE_PROVIDER_MISMATCH,
  CALL_REJECTED_MISSING_PROVIDER: CallRejectCodes.MISSING_PROVIDER,
  CALL_REJECTED_UNKNOWN_PROVIDER: CallRejectCodes.UNKNOWN_PROVIDER,
  CALL_REJECTED_INVALID_CONFIG: CallRejectCodes.INVALID_CONFIG,
  CALL_REJECTED_MISSING_VOICE: CallRejectCodes.MISSING_VOICE,
  CALL_REJECTED_MISSING_PROVIDER_KEY: CallRejectCodes.MISSING_PROVIDER_KEY,
  /** A provider the call would run has no adapter in this server (the service's check). */
  CALL_REJECTED_MISSING_ADAPTER: 'CALL_REJECTED_MISSING_ADAPTER',
  /** The number's assistant (or the one an assistant-request named) is not there. */
  CALL_REJECTED_UNKNOWN_ASSISTANT: 'CALL_REJECTED_UNKNOWN_ASSISTANT',
  NOT_STARTED: 'NOT_STARTED',
  SNAPSHOT_INVALID: 'SNAPSHOT_INVALID',
  SNAPSHOT_DEFINITION_MISMATCH: 'SNAPSHOT_DEFINITION_MISMATCH',
  WORKFLOW_COMPILE_FAILED: 'WORKFLOW_COMPILE_FAILED',
  // providers (STT, TTS, LLM, realtime)
  PROVIDER_AUTH: 'PROVIDER_AUTH',
  PROVIDER_HTTP_ERROR: 'PROVIDER_HTTP_ERROR',
  PROVIDER_TIMEOUT: 'PROVIDER_TIMEOUT',
  PROVIDER_DISCONNECTED: 'PROVIDER_DISCONNECTED',
  PROVIDER_PROTOCOL: 'PROVIDER_PROTOCOL',
  PROVIDER_ABORTED: 'PROVIDER_ABORTED',
  PROVIDER_NO_ADAPTER: 'PROVIDER_NO_ADAPTER',
  // carriers
  TWILIO_REST_ERROR: 'TWILIO_REST_ERROR',
  /** A carrier's API refused or failed a request (`CarrierApiError`, the carrier in `provider`). */
  CARRIER_API_ERROR: 'CARRIER_API_ERROR',
  SIP_TRANSFER_REFUSED: 'SIP_TRANSFER_REFUSED',
  DIAL_FAILED: 'DIAL_FAILED',
  CALL_START_FAILED: 'CALL_START_FAILED',
  CALL_CANCELED: 'CALL_CANCELED',
  TRANSFER_FAILED: 'TRANSFER_FAILED',
  // store
  STORE_IN_USE: 'STORE_IN_USE',
  STORE_UNKNOWN_REFERENCE: 'STORE_UNKNOWN_REFERENCE',
  STORE_CONFLICT: 'STORE_CONFLICT',
  STORE_UNAVAILABLE: 'STORE_UNAVAILABLE',
  INVALID_CURSOR: 'INVALID_CURSOR',
  DATA_DIR_IN_USE: 'DATA_DIR_IN_USE',
  // API and configuration
  API_ERROR: 'API_ERROR',
  REQUEST_INVALID: 'REQUEST_INVALID',
  CONFIG_INVALID: 'CONFIG_INVALID',
  // chats
  CHAT_UNKNOWN_REFERENCE: 'CHAT_UNKNOWN_REFERENCE',
  CHAT_REJECTED: 'CHAT_REJECTED',
  CHAT_NOT_FOUND: 'CHAT_NOT_FOUND',
  CHAT_ENDED: 'CHAT_ENDED',
  CHAT_BUSY: 'CHAT_BUSY',
  // test suites
  TEST_SUITE_INVALID: 'TEST_SUITE_INVALID',
  TEST_SUITE_NOT_FOUND: 'TEST_SUITE_NOT_FOUND',
  TEST_SUITE_NO_RUNNER: 'TEST_SUITE_NO_RUNNER',
  // audio
  WAV_INVALID: 'WAV_INVALID',
  BACKGROUND_CLIP_UNUSABLE: 'BACKGROUND_CLIP_UNUSABLE',
  // webhooks (outbound requests, and the verification helper's codes, DECISIONS 7)
  SB_BLOCKED_ADDRESS: 'SB_BLOCKED_ADDRESS',
  SB_DNS_FAILED: 'SB_DNS_FAILED',
  MISSING_HEADER: 'MISSING_HEADER',
  INVALID_TIMESTAMP: 'INVALID_TIMESTAMP',
  TIMESTAMP_OUT_OF_TOLERANCE: 'TIMESTAMP_OUT_OF_TOLERANCE',
  INVALID_SIGNATURE: 'INVALID_SIGNATURE',
  INVALID_PAYLOAD: 'INVALID_PAYLOAD',
  ASSISTANT_REQUEST_FAILED: 'ASSISTANT_REQUEST_FAILED',
  ASSISTANT_REQUEST_REJECTED: 'ASSISTANT_REQUEST_REJECTED',
  // queues and tools
  TWIML_INVALID: 'TWIML_INVALID',
  CLI_API_FAILURE: 'CLI_API_FAILURE',
  CLI_UNMET: 'CLI_UNMET',
  // what a call notes in its `errors` (src/errors.ts)
  CALL_INTERNAL_ERROR: 'CALL_INTERNAL_ERROR',
  CALL_STREAM_LOST: 'CALL_STREAM_LOST',
  CALL_WORKER_LOST: 'CALL_WORKER_LOST',
  CALL_SHUTDOWN: 'CALL_SHUTDOWN',
  /** A provider failed with an error that has no code of its own. */
  PROVIDER_FAILED: 'PROVIDER_FAILED',
  SILENCE_CHECK_IN_FAILED: 'SILENCE_CHECK_IN_FAILED',
  /** A warm transfer's summary could not be written by the model; the operator heard a fixed one. */
  TRANSFER_SUMMARY_FAILED: 'TRANSFER_SUMMARY_FAILED',
  RECORDING_START_FAILED: 'RECORDING_START_FAILED',
  RECORDING_NOT_KEPT: 'RECORDING_NOT_KEPT',
  BACKGROUND_AUDIO_FAILED: 'BACKGROUND_AUDIO_FAILED',
  /** An entry stored before errors had codes (a plain string): its code is not known. */
  UNKNOWN: 'UNKNOWN',
} as const);

export type ErrorCode = (typeof ErrorCodes)[keyof typeof ErrorCodes];

/**
 * The root of every Switchboard error. A subclass names the codes its instances may carry in a
 * static `codes` (one for most; a family such as `ProviderError` names each failure apart).
 */
export class SwitchboardError extends Error {
  static readonly codes: readonly ErrorCode[] = [];
  readonly code: ErrorCode;

  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }
}

/** True for any Switchboard error; with `code`, for that code only. */
export function isSwitchboardError(err: unknown, code?: ErrorCode): err is SwitchboardError {
  return err instanceof SwitchboardError && (code === undefined || err.code === code);
}

/** Base of the engine's errors. */
export class EngineError extends SwitchboardError {
  constructor(code: ErrorCode, message: string) {
    super(code, message);
    this.name = 'EngineError';
  }
}

/** Thrown (or logged) by the service when call-start checks refuse a call; lists every reason. */
export class CallRejectedError extends EngineError {
  static override readonly codes = [ErrorCodes.CALL_REJECTED] as const;
  readonly problems: ReadonlyArray<{ code: CallRejectCode; message: string }>;

  constructor(problems: ReadonlyArray<{ code: CallRejectCode; message: string }>) {
    super(
      ErrorCodes.CALL_REJECTED,
      `call rejected at start: ${problems.map((p) => `${p.code}: ${p.message}`).join('; ')}`,
    );
    this.name = 'CallRejectedError';
    this.problems = problems;
  }
}
