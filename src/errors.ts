/**
 * Switchboard's one error root (`SwitchboardError`, stable `code`s in `ErrorCodes`; it lives in
 * the engine, which imports nothing from `src/`), and what a call or chat keeps of a failure: an
 * entry of its `errors` (`{code, message, provider?}`) and the `ended_reason` it ends with.
 */
import { ErrorCodes, isSwitchboardError, type ErrorCode } from '../engine/errors.js';

export {
  CallRejectCodes,
  CallRejectedError,
  EngineError,
  ErrorCodes,
  isSwitchboardError,
  SwitchboardError,
  type CallRejectCode,
  type ErrorCode,
} from '../engine/errors.js';

/**
 * One entry of a call's (or chat's) `errors`: the stable `code`, the sentence for people
 * (`elevenlabs: HTTP 401 …`, as it was before entries had codes) and the vendor or carrier it
 * names, when one failed.
 */
export interface CallError {
  code: ErrorCode;
  message: string;
  provider?: string;
}

/** An entry of `errors`. */
export function callError(code: ErrorCode, message: string, provider?: string): CallError {
  return provider === undefined ? { code, message } : { code, message, provider };
}

/**
 * An entry for a thrown error: its own code and provider when it is one of ours, else `fallback`
 * (and `provider`). `message` is the sentence kept; the error's own when not given.
 */
export function callErrorFrom(err: unknown, fallback: ErrorCode, options: { message?: string; provider?: string } = {}): CallError {
  const named = (err as { provider?: unknown } | null)?.provider;
  const provider = typeof named === 'string' ? named : options.provider;
  const code = isSwitchboardError(err) ? err.code : fallback;
  return callError(code, options.message ?? (err instanceof Error ? err.message : String(err)), provider);
}

/**
 * `errors` as stored, old or new: entries written before they had codes are plain strings, read
 * as `{code: "UNKNOWN", message: <the string>}`; anything else that is not an entry is dropped.
 */
export function readCallErrors(stored: unknown): CallError[] {
  if (!Array.isArray(stored)) return [];
  const out: CallError[] = [];
  for (const e of stored) {
    if (typeof e === 'string') out.push(callError(ErrorCodes.UNKNOWN, e));
    else if (e && typeof e === 'object' && typeof (e as CallError).message === 'string') {
      const { code, message, provider } = e as CallError;
      out.push(callError(typeof code === 'string' && (code as string) !== '' ? code : ErrorCodes.UNKNOWN, message, typeof provider === 'string' ? provider : undefined));
    }
  }
  return out;
}

/** Codes whose call never started: the call-start checks and the service's own (DECISIONS 8). */
const REJECTED_AT_START = new Set<string>([
  ErrorCodes.CALL_REJECTED,
  ErrorCodes.CALL_REJECTED_REALTIME_OVERRIDE,
  ErrorCodes.CALL_REJECTED_VOICE_PROVIDER_MISMATCH,
  ErrorCodes.CALL_REJECTED_MISSING_PROVIDER,
  ErrorCodes.CALL_REJECTED_UNKNOWN_PROVIDER,
  ErrorCodes.CALL_REJECTED_INVALID_CONFIG,
  ErrorCodes.CALL_REJECTED_MISSING_VOICE,
  ErrorCodes.CALL_REJECTED_MISSING_PROVIDER_KEY,
  ErrorCodes.CALL_REJECTED_MISSING_ADAPTER,
  ErrorCodes.CALL_REJECTED_UNKNOWN_ASSISTANT,
  ErrorCodes.ASSISTANT_REQUEST_REJECTED,
]);

/**
 * The `ended_reason` of a call that ends because of `error` (DECISIONS 7 and 8): the one place
 * that maps a failure to how the call ended. A vendor or carrier that failed is named:
 * `pipeline-error-<provider>` (`pipeline-error-openai-tts`, `pipeline-error-twilio`,
 * `pipeline-error-sip`); a failure inside Switchboard is `pipeline-error-switchboard`.
 */
export function endedReasonFor(error: CallError): string {
  if (REJECTED_AT_START.has(error.code)) return 'rejected-at-start';
  switch (error.code) {
    case ErrorCodes.ASSISTANT_REQUEST_FAILED:
      return 'assistant-request-failed';
    case ErrorCodes.DIAL_FAILED:
      return 'dial-failed';
    case ErrorCodes.CALL_START_FAILED:
      return `call-start-error-${error.provider ?? 'unknown'}`;
    case ErrorCodes.CALL_INTERNAL_ERROR:
      return 'pipeline-error-switchboard';
  }
  return `pipeline-error-${error.provider ?? 'unknown'}`;
}

/** The sentences of `errors`, for people (an e-mail's notes, a log line). */
export function errorMessages(errors: readonly CallError[]): string[] {
  return errors.map((e) => e.message);
}
