/**
 * What an outage looks like from here (DECISIONS 22): PostgreSQL or Redis not answering. Such an
 * error is not a defect: the API answers 503 with `Retry-After`, a carrier's call is refused
 * before pickup, and the writes a call cannot lose go to the outbox (src/store/outbox.ts).
 */
import { ErrorCodes, SwitchboardError } from '../errors.js';

/** Thrown where a caller must know that nothing was done because a store is down. */
export class UnavailableError extends SwitchboardError {
  static override readonly codes = [ErrorCodes.STORE_UNAVAILABLE] as const;
  override name = 'UnavailableError';
  constructor(
    readonly what: 'database' | 'redis',
    override readonly cause?: unknown,
  ) {
    super(ErrorCodes.STORE_UNAVAILABLE, `the ${what === 'database' ? 'database' : 'queue (Redis)'} is not reachable`);
  }
}

/** Seconds a client is asked to wait before trying again during an outage. */
export const RETRY_AFTER_SECONDS = 5;

const NETWORK_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN', 'ECONNABORTED']);

const MESSAGES = [
  'Connection terminated',
  'Connection is closed',
  'connection timeout',
  'timeout exceeded when trying to connect',
  'Client has encountered a connection error',
  'Reached the max retries per request limit',
  'Stream isn\'t writeable',
  'the database system is',
  'terminating connection due to administrator command',
];

/**
 * True when `err` says a store did not answer (refused, reset, timed out, shutting down), not
 * that it refused what was asked: a constraint, a syntax error or bad data is never an outage.
 */
export function isOutage(err: unknown, depth = 0): boolean {
  if (!err || typeof err !== 'object' || depth > 4) return false;
  if (err instanceof UnavailableError) return true;
  const e = err as { code?: unknown; name?: unknown; message?: unknown; cause?: unknown; errors?: unknown };
  if (typeof e.code === 'string') {
    if (NETWORK_CODES.has(e.code)) return true;
    // SQLSTATE class 08 (connection exception), 57P01-57P03 (shutdown, cannot connect now)
    if (/^08...$/.test(e.code) || /^57P0[1-3]$/.test(e.code)) return true;
  }
  if (e.name === 'MaxRetriesPerRequestError') return true;
  if (typeof e.message === 'string' && MESSAGES.some((m) => (e.message as string).includes(m))) return true;
  if (Array.isArray(e.errors) && e.errors.some((x) => isOutage(x, depth + 1))) return true;
  return isOutage(e.cause, depth + 1);
}
