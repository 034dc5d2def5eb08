/**
 * `verifyWebhook`: what a customer's endpoint calls to check that a request came from Switchboard
 * (Standard Webhooks algorithm under the `X-Webhook-*` header names). Throws
 * `WebhookVerificationError` (with a stable `code`) on anything but a valid, fresh request.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { ErrorCodes, SwitchboardError } from '../../engine/errors.js';
import { WEBHOOK_HEADERS, webhookSigningKey } from './sign.js';
import type { WebhookBody } from './envelope.js';

export type WebhookVerificationErrorCode =
  | 'MISSING_HEADER'
  | 'INVALID_TIMESTAMP'
  | 'TIMESTAMP_OUT_OF_TOLERANCE'
  | 'INVALID_SIGNATURE'
  | 'INVALID_PAYLOAD';

export class WebhookVerificationError extends SwitchboardError {
  static override readonly codes = [
    ErrorCodes.MISSING_HEADER,
    ErrorCodes.INVALID_TIMESTAMP,
    ErrorCodes.TIMESTAMP_OUT_OF_TOLERANCE,
    ErrorCodes.INVALID_SIGNATURE,
    ErrorCodes.INVALID_PAYLOAD,
  ] as const;
  override name = 'WebhookVerificationError';
  declare readonly code: WebhookVerificationErrorCode;
  constructor(code: WebhookVerificationErrorCode, message: string) {
    super(code, message);
  }
}

/** Plain objects (Node, Express, Fastify) with any header-name case, or a Fetch `Headers`. */
export type IncomingHeaders =
  | Record<string, string | string[] | undefined>
  | { get(name: string): string | null };

export interface VerifyWebhookOptions {
  /** Largest accepted distance between the request's timestamp and now. Default 300 s. */
  toleranceSeconds?: number;
  /** The current time (a `Date` or Unix milliseconds); default the system clock. */
  now?: Date | number;
}

export interface VerifiedWebhook<P = WebhookBody> {
  ok: true;
  /** `X-Webhook-Id`: the same on every retry of one message; use it to drop duplicates. */
  id: string;
  /** `X-Webhook-Timestamp` of this attempt, Unix seconds. */
  timestamp: number;
  /** `X-Webhook-Event`, or `message.type` when the header is absent. */
  event: string;
  /** The parsed JSON body: `{ message: { type, timestamp, call, ... } }`. */
  payload: P;
}

function header(headers: IncomingHeaders, name: string): string | undefined {
  if (typeof (headers as { get?: unknown }).get === 'function') {
    return (headers as { get(name: string): string | null }).get(name) ?? undefined;
  }
  const record = headers as Record<string, string | string[] | undefined>;
  let value = record[name];
  if (value === undefined) {
    for (const key of Object.keys(record)) {
      if (key.toLowerCase() === name) {
        value = record[key];
        break;
      }
    }
  }
  return Array.isArray(value) ? value.join(' ') : value;
}

/**
 * Checks a webhook request: the raw body exactly as received (not re-serialized JSON), its
 * headers, and the signing secret (`whsec_...`, or any other string used as UTF-8 bytes).
 * Returns the parsed payload; throws `WebhookVerificationError` otherwise.
 */
export function verifyWebhook<P = WebhookBody>(
  rawBody: string | Buffer | Uint8Array,
  headers: IncomingHeaders,
  secret: string,
  options: VerifyWebhookOptions = {},
): VerifiedWebhook<P> {
  const id = header(headers, WEBHOOK_HEADERS.id);
  const timestampText = header(headers, WEBHOOK_HEADERS.timestamp);
  const signatures = header(headers, WEBHOOK_HEADERS.signature);
  for (const [name, value] of [
    ['X-Webhook-Id', id],
    ['X-Webhook-Timestamp', timestampText],
    ['X-Webhook-Signature', signatures],
  ] as const) {
    if (value === undefined || value === '') {
      throw new WebhookVerificationError('MISSING_HEADER', `the ${name} header is missing`);
    }
  }

  if (!/^\d{1,12}$/.test(timestampText!)) {
    throw new WebhookVerificationError(
      'INVALID_TIMESTAMP',
      'X-Webhook-Timestamp must be Unix seconds (digits only)',
    );
  }
  const timestamp = Number(timestampText);
  const nowMs = options.now === undefined ? Date.now() : Number(options.now);
  const tolerance = options.toleranceSeconds ?? 300;
  const skew = Math.floor(nowMs / 1000) - timestamp;
  if (Math.abs(skew) > tolerance) {
    throw new WebhookVerificationError(
      'TIMESTAMP_OUT_OF_TOLERANCE',
      `X-Webhook-Timestamp is ${Math.abs(skew)} s ${skew > 0 ? 'old' : 'in the future'}; at most ${tolerance} s are accepted`,
    );
  }

  const body = typeof rawBody === 'string' ? Buffer.from(rawBody, 'utf8') : rawBody;
  const expected = createHmac('sha256', webhookSigningKey(secret))
    .update(`${id}.${timestampText}.`)
    .update(body)
    .digest();
  let matched = false;
  for (const candidate of signatures!.split(' ')) {
    const comma = candidate.indexOf(',');
    if (comma < 0 || candidate.slice(0, comma) !== 'v1') continue;
    const given = Buffer.from(candidate.slice(comma + 1), 'base64');
    // no early exit: every candidate is compared, each in constant time
    if (given.length === expected.length && timingSafeEqual(given, expected)) matched = true;
  }
  if (!matched) {
    throw new WebhookVerificationError(
      'INVALID_SIGNATURE',
      'no X-Webhook-Signature matches: wrong secret, or the body was changed (verify the raw bytes, not re-serialized JSON)',
    );
  }

  let payload: P;
  try {
    payload = JSON.parse(Buffer.from(body).toString('utf8')) as P;
  } catch {
    throw new WebhookVerificationError('INVALID_PAYLOAD', 'the body is not JSON');
  }
  const event =
    header(headers, WEBHOOK_HEADERS.event) ??
    String((payload as { message?: { type?: unknown } })?.message?.type ?? '');
  return { ok: true, id: id!, timestamp, event, payload };
}
