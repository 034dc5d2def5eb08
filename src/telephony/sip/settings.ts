/**
 * A SIP trunk's settings in the organization's account (DECISIONS 15): `sip.inbound` (who may
 * send INVITEs) and `sip.outbound` (where ours go). Passwords are write-only: left out with the
 * same username, the one kept is kept; responses say only whether one is set.
 */
import { z } from 'zod';
import { E164 } from '../../../engine/schema.js';
import { wellFormed } from '../../../engine/text.js';
import type { SipSettings } from '../../store/account.js';
import type { CarrierAccountSettings } from '../carrier.js';
import { sipAddressRange, sipProxyProblem } from './addresses.js';

/** An address or a CIDR range (`203.0.113.0/24`, `2001:db8::/32`). */
const AddressOrRange = wellFormed().max(64).refine((v) => sipAddressRange(v) !== null, {
  error: 'must be an IPv4 or IPv6 address, or a CIDR range such as 203.0.113.0/24',
});
const SipSecret = wellFormed().min(1).max(128).regex(/^[^"\\\r\n]+$/, 'must not contain quotes, backslashes or line breaks');
const SipUser = wellFormed().min(1).max(64).regex(/^[A-Za-z0-9_.!~*'()&=+$,;?/-]+$/, 'must be a SIP user name (letters, digits and _.!~*\'()&=+$,;?/-)');

/** A SIP trunk's settings (DECISIONS 15); passwords are write-only (omitted with the same username, the one kept is kept). */
export const SipSettingsInput = z.strictObject({
  inbound: z
    .strictObject({
      allowed_addresses: z.array(AddressOrRange).max(100).default([]).describe('sources whose INVITEs are taken without credentials'),
      username: SipUser.optional().describe('digest credentials an INVITE from anywhere else must give'),
      password: SipSecret.optional(),
    })
    .nullable()
    .optional(),
  outbound: z
    .strictObject({
      proxy: wellFormed().max(256).refine((v) => sipProxyProblem(v) === null, {
        error: 'must be sip:host[:port][;transport=udp|tcp], e.g. sip:sip.telnyx.com or sip:192.0.2.10:5060;transport=tcp',
      }),
      username: SipUser.optional(),
      password: SipSecret.optional(),
      caller_id: E164.optional().describe('the From number of calls placed through the trunk (default: the number calling)'),
    })
    .nullable()
    .optional(),
});

export const SipSettingsView = z
  .object({
    inbound: z.object({ allowed_addresses: z.array(z.string()), username: z.string().nullable(), password_set: z.boolean() }).nullable(),
    outbound: z
      .object({ proxy: z.string(), username: z.string().nullable(), password_set: z.boolean(), caller_id: z.string().nullable() })
      .nullable(),
  })
  .describe('the SIP trunk (DECISIONS 15); passwords are never shown');

/**
 * The trunk settings to keep: each part given replaces the stored one (null clears it), and a
 * password left out is kept when the username is the same (passwords are never shown, so a
 * client changing one field cannot send them back).
 */
export function mergeSip(input: z.infer<typeof SipSettingsInput>, stored: SipSettings | null): SipSettings | { problem: string } {
  const out: SipSettings = { inbound: stored?.inbound ?? null, outbound: stored?.outbound ?? null };
  for (const side of ['inbound', 'outbound'] as const) {
    const given = input[side];
    if (given === undefined) continue;
    if (given === null) {
      out[side] = null;
      continue;
    }
    const before = stored?.[side];
    const password = given.password ?? (before?.username && before.username === given.username ? before.password : undefined);
    if (given.username && !password) return { problem: `sip.${side}.password: required with sip.${side}.username` };
    if (!given.username && given.password) return { problem: `sip.${side}.username: required with sip.${side}.password` };
    const part = { ...given, ...(password ? { password } : {}) };
    if (side === 'inbound') out.inbound = part as NonNullable<SipSettings['inbound']>;
    else out.outbound = part as NonNullable<SipSettings['outbound']>;
  }
  return out;
}

export const sipAccount: CarrierAccountSettings<SipSettings, z.infer<typeof SipSettingsInput>, z.infer<typeof SipSettingsView>> = {
  path: ['sip'],
  input: SipSettingsInput,
  view: SipSettingsView,
  read: (account) => account.sip ?? null,
  merge: mergeSip,
  show: (s) => ({
    inbound: s?.inbound
      ? { allowed_addresses: s.inbound.allowed_addresses, username: s.inbound.username ?? null, password_set: !!s.inbound.password }
      : null,
    outbound: s?.outbound
      ? {
          proxy: s.outbound.proxy,
          username: s.outbound.username ?? null,
          password_set: !!s.outbound.password,
          caller_id: s.outbound.caller_id ?? null,
        }
      : null,
  }),
  example: {
    inbound: { allowed_addresses: ['192.76.120.10', '64.16.250.0/24'], username: null, password_set: false },
    outbound: { proxy: 'sip:sip.telnyx.com', username: 'acme-dental', password_set: true, caller_id: '+15550100200' },
  },
  write: (settings) => ({ sip: settings }),
};
