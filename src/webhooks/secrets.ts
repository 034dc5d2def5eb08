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
