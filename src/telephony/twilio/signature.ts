/**
 * Twilio request validation: `X-Twilio-Signature` is base64(HMAC-SHA1(auth token, URL followed by
 * the POST parameters sorted by name, each as name + value)).
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

export type FormParams = Record<string, string | string[]>;

export function twilioSignature(authToken: string, url: string, params: FormParams): string {
  let data = url;
  for (const name of Object.keys(params).sort()) {
    const value = params[name]!;
    const values = Array.isArray(value) ? [...value].sort() : [value];
    for (const v of values) data += name + v;
  }
  return createHmac('sha1', authToken).update(data, 'utf8').digest('base64');
}

export function verifyTwilioSignature(
  authToken: string,
  url: string,
  params: FormParams,
  signature: string | undefined,
): boolean {
  if (!signature) return false;
  const expected = Buffer.from(twilioSignature(authToken, url, params));
  const given = Buffer.from(signature);
  return expected.length === given.length && timingSafeEqual(expected, given);
}

/** Parses an `application/x-www-form-urlencoded` body; repeated names become arrays. */
export function parseForm(body: string): FormParams {
  const out: FormParams = Object.create(null) as FormParams;
  for (const [name, value] of new URLSearchParams(body)) {
    const existing = out[name];
    if (existing === undefined) out[name] = value;
    else if (Array.isArray(existing)) existing.push(value);
    else out[name] = [existing, value];
  }
  return out;
}
