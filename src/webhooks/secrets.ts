/** Webhook signing secrets: generated as `whsec_` + 32 random bytes in base64, shown masked. */
import { randomBytes } from 'node:crypto';

export function generateWebhookSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

/** `whsec_…abcd`: enough to tell secrets apart, nothing to sign with. */
export function maskSecret(secret: string): string {
  const prefix = secret.startsWith('whsec_') ? 'whsec_' : '';
  return `${prefix}…${secret.slice(-4)}`;
}

/** A secret as the API shows it (`whsec_…abcd`), not one a person wrote. */
export function isMaskedSecret(secret: string): boolean {
  return /^(whsec_)?\u2026.{0,4}$/u.test(secret);
}

/**
 * A secret from a write: the masked form of the stored one, sent back as it was shown, is the
 * stored one again; `null` for a masked secret that matches none; any other secret as it is.
 */
export function restoreMaskedSecret(secret: string, stored: string | null | undefined): string | null {
  if (!isMaskedSecret(secret)) return secret;
  return stored && maskSecret(stored) === secret ? stored : null;
}

export const MASKED_SECRET_PROBLEM = 'is a masked secret (as the API shows it) that matches no stored secret; send the real one, or leave the field out to keep it';
