/**
 * Twilio's settings in the organization's account (DECISIONS 6): `telephony.twilio`, the account
 * SID and auth token its calls are signed and controlled with. The token is shown masked.
 */
import { z } from 'zod';
import { wellFormed } from '../../../engine/text.js';
import type { TwilioCredentials } from '../../store/account.js';
import { maskSecret } from '../../webhooks/secrets.js';
import type { CarrierAccountSettings } from '../carrier.js';

export const TwilioSettingsInput = z.strictObject({
  account_sid: wellFormed().regex(/^AC[0-9a-fA-F]{32}$/, 'must be a Twilio account SID (AC + 32 hex digits)'),
  auth_token: wellFormed().min(8).max(256),
});

export const TwilioSettingsView = z.object({ account_sid: z.string(), auth_token: z.string() }).nullable();

export const twilioAccount: CarrierAccountSettings<TwilioCredentials, z.infer<typeof TwilioSettingsInput>, z.infer<typeof TwilioSettingsView>> = {
  path: ['telephony', 'twilio'],
  input: TwilioSettingsInput,
  view: TwilioSettingsView,
  read: (account) => account.twilio,
  // given whole each time (a masked auth token sent back is refused by the schema: too short to be one)
  merge: (input) => input,
  show: (stored) => (stored ? { account_sid: stored.account_sid, auth_token: maskSecret(stored.auth_token) } : null),
  example: { account_sid: 'AC8f3e2d1c0b9a87f6e5d4c3b2a1908f7e', auth_token: '…6789' },
  write: (settings) => ({ twilio: settings }),
};
