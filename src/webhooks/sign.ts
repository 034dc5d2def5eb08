/**
 * Webhook signatures: the Standard Webhooks algorithm (standardwebhooks.com) under this service's
 * header names (DECISIONS 7). Verification for customers lives in verify.ts.
 */
import { createHmac, randomBytes } from 'node:crypto';
import { USER_AGENT } from '../version.js';

/** Header names, lower-case (Node's HTTP stack lower-cases incoming names). */
export const WEBHOOK_HEADERS = {
  id: 'x-webhook-id',
  timestamp: 'x-webhook-timestamp',
  signature: 'x-webhook-signature',
  event: 'x-webhook-event',
} as const;

const SECRET_PREFIX = 'whsec_';

/**
 * The HMAC key of a secret: the base64-decoded part of a `whsec_` secret, else the UTF-8 bytes of
 * the secret as given.
 */
export function webhookSigningKey(secret: string): Buffer {
  return secret.startsWith(SECRET_PREFIX)
    ? Buffer.from(secret.slice(SECRET_PREFIX.length), 'base64')
    : Buffer.from(secret, 'utf8');
}

// decoded keys of the secrets in use: every attempt of every message signs with one of a few
const keyCache = new Map<string, Buffer>();
const KEY_CACHE_SIZE = 1024;

function cachedSigningKey(secret: string): Buffer {
  let key = keyCache.get(secret);
  if (!key) {
    if (keyCache.size >= KEY_CACHE_SIZE) keyCache.clear();
    key = webhookSigningKey(secret);
    keyCache.set(secret, key);
  }
  return key;
}

/** A message id: `msg_` + 24 random bytes in base64url. One per message, kept across retries. */
export function newMessageId(): string {
  return `msg_${randomBytes(24).toString('base64url')}`;
}

/** `v1,<base64 HMAC-SHA256(key, "<id>.<timestamp>.<body>")>` for one attempt. */
export function signWebhook(
  key: Buffer | string,
  messageId: string,
  timestampSeconds: number,
  body: string | Buffer,
): string {
  const hmacKey = typeof key === 'string' ? cachedSigningKey(key) : key;
  const hmac = createHmac('sha256', hmacKey);
  // two updates: the body is never copied into a concatenated string
  hmac.update(`${messageId}.${timestampSeconds}.`);
  hmac.update(body);
  return `v1,${hmac.digest('base64')}`;
}

export interface WebhookRequestHeadersInput {
  event: string;
  messageId: string;
  /** Unix seconds of this attempt. */
  timestampSeconds: number;
  /** The exact bytes that are sent. */
  body: string | Buffer;
  /** No secret (a number webhook may have none): the request goes out unsigned. */
  secret: Buffer | string | null;
}

/** Every header of one webhook request (SPEC 6.2 + DECISIONS 7). */
export function webhookRequestHeaders(input: WebhookRequestHeadersInput): Record<string, string> {
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    'user-assistant': USER_AGENT,
    'user-agent': USER_AGENT,
    [WEBHOOK_HEADERS.event]: input.event,
    [WEBHOOK_HEADERS.id]: input.messageId,
    [WEBHOOK_HEADERS.timestamp]: String(input.timestampSeconds),
  };
  if (input.secret !== null && input.secret !== '') {
    headers[WEBHOOK_HEADERS.signature] = signWebhook(
      input.secret,
      input.messageId,
      input.timestampSeconds,
      input.body,
    );
  }
  return headers;
}
