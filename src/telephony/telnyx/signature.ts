/**
 * Telnyx webhook signatures: `telnyx-signature-ed25519` is base64(Ed25519 signature, by Telnyx's
 * key, over `<telnyx-timestamp>|<the body's exact bytes>`), verified with the account's public key
 * (base64 of its 32 raw bytes, as Telnyx's portal shows it). A timestamp more than five minutes
 * from now is refused, as Telnyx's own SDK refuses it: a replay of an old request is not taken.
 */
import { createPublicKey, generateKeyPairSync, sign, verify, type KeyObject } from 'node:crypto';

export const SIGNATURE_HEADER = 'telnyx-signature-ed25519';
export const TIMESTAMP_HEADER = 'telnyx-timestamp';
/** Seconds a signed request may be early or late (Telnyx's SDK: 300). */
export const TIMESTAMP_TOLERANCE_SECONDS = 300;

const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;

/** The raw 32 bytes of a base64 Ed25519 public key, or null when it is not one. */
export function publicKeyBytes(publicKey: string): Buffer | null {
  if (!BASE64.test(publicKey) || publicKey.length % 4 !== 0) return null;
  const raw = Buffer.from(publicKey, 'base64');
  return raw.length === 32 ? raw : null;
}

/** The key object of a base64 Ed25519 public key (null when it is not one). */
function keyOf(publicKey: string): KeyObject | null {
  const raw = publicKeyBytes(publicKey);
  if (!raw) return null;
  try {
    return createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: raw.toString('base64url') }, format: 'jwk' });
  } catch {
    return null;
  }
}

const signed = (timestamp: string, payload: Buffer | string) =>
  Buffer.concat([Buffer.from(`${timestamp}|`, 'utf8'), typeof payload === 'string' ? Buffer.from(payload, 'utf8') : payload]);

export type SignatureProblem = 'missing' | 'timestamp' | 'signature';

/**
 * Why a request's signature does not hold, or null when it does: `missing` (a header, or the
 * key), `timestamp` (not whole seconds, or out of tolerance), `signature` (not a signature of
 * this body at this time by this key).
 */
export function telnyxSignatureProblem(
  publicKey: string | undefined,
  payload: Buffer | string,
  signature: string | undefined,
  timestamp: string | undefined,
  nowSeconds = Date.now() / 1000,
): SignatureProblem | null {
  if (!publicKey || !signature || !timestamp) return 'missing';
  if (!/^\d{1,15}$/.test(timestamp) || Math.abs(nowSeconds - Number(timestamp)) > TIMESTAMP_TOLERANCE_SECONDS) return 'timestamp';
  const key = keyOf(publicKey);
  if (!key) return 'missing';
  if (!BASE64.test(signature)) return 'signature';
  const bytes = Buffer.from(signature, 'base64');
  if (bytes.length !== 64) return 'signature';
  try {
    return verify(null, signed(timestamp, payload), key, bytes) ? null : 'signature';
  } catch {
    return 'signature';
  }
}

/** An Ed25519 key pair as Telnyx has one: the private key signs, `publicKey` is base64 of its 32 raw bytes. */
export function telnyxKeyPair(): { privateKey: KeyObject; publicKey: string } {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  const x = publicKey.export({ format: 'jwk' }).x!;
  return { privateKey, publicKey: Buffer.from(x, 'base64url').toString('base64') };
}

/** The `telnyx-signature-ed25519` of `payload` at `timestamp` (the stand-in signs with it). */
export function telnyxSignature(privateKey: KeyObject, timestamp: string, payload: Buffer | string): string {
  return sign(null, signed(timestamp, payload), privateKey).toString('base64');
}
