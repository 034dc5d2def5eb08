/**
 * Telnyx's settings in the organization's account (DECISIONS 18): `telnyx: {api_key, public_key,
 * connection_id}`. The API key (Call Control requests) is write-only: never shown, only whether
 * one is set, and kept when a write leaves it out. The public key verifies Telnyx's webhooks; the
 * connection (the Call Control application) is what outbound calls are placed through.
 */
import { z } from 'zod';
import { wellFormed } from '../../../engine/text.js';
import type { AccountSettings } from '../../store/account.js';
import type { CarrierAccountSettings } from '../carrier.js';
import { publicKeyBytes } from './signature.js';

export interface TelnyxSettings {
  api_key: string;
  /** Base64 of the 32 raw bytes of Telnyx's Ed25519 public key (the portal's "Public Key"). */
  public_key: string;
  /** The Call Control application (connection) outbound calls are placed through. */
  connection_id: string;
}

export const TelnyxSettingsInput = z.strictObject({
  api_key: wellFormed()
    .min(8)
    .max(256)
    .regex(/^\S+$/, 'must be a Telnyx API key (no spaces)')
    .optional()
    .describe('Call Control requests are made with it; write-only (never shown); left out, the one kept is kept'),
  public_key: wellFormed()
    .max(64)
    .refine((v) => publicKeyBytes(v) !== null, { error: "must be Telnyx's public key: base64 of 32 bytes (an Ed25519 key), as the portal shows it" })
    .describe("verifies Telnyx's webhooks (telnyx-signature-ed25519)"),
  connection_id: wellFormed()
    .min(1)
    .max(128)
    .regex(/^[A-Za-z0-9_.:-]+$/, 'must be a Telnyx connection id (letters, digits and _.:-)')
    .describe('the Call Control application outbound calls are placed through'),
});

export const TelnyxSettingsView = z
  .object({ public_key: z.string(), connection_id: z.string(), api_key_set: z.boolean() })
  .nullable()
  .describe('Telnyx Call Control (DECISIONS 18); the API key is never shown');

/** The settings kept in an account, or null. */
export const telnyxSettings = (account: AccountSettings): TelnyxSettings | null =>
  (account.carriers?.telnyx as TelnyxSettings | undefined) ?? null;

export const telnyxAccount: CarrierAccountSettings<TelnyxSettings, z.infer<typeof TelnyxSettingsInput>, z.infer<typeof TelnyxSettingsView>> = {
  path: ['telnyx'],
  input: TelnyxSettingsInput,
  view: TelnyxSettingsView,
  read: telnyxSettings,
  merge: (input, stored) => {
    const apiKey = input.api_key ?? stored?.api_key;
    if (!apiKey) return { problem: 'telnyx.api_key: required (it is never shown; once set, leave it out to keep it)' };
    return { api_key: apiKey, public_key: input.public_key, connection_id: input.connection_id };
  },
  show: (stored) => (stored ? { public_key: stored.public_key, connection_id: stored.connection_id, api_key_set: true } : null),
  example: { public_key: 'eu2zvPjhY6odxV34Z/EsRiERvTodkev4Fq0SlK90Izg=', connection_id: '2811212257810187875', api_key_set: true },
  write: (settings) => ({ carriers: { telnyx: settings } }),
};
