/** Organization-wide settings: the default webhook and the telephony credentials. */
import type { PriceOverrides } from '../observability/pricing.js';
import type { Db } from './db.js';
import type { WebhookSettings } from './numbers.js';

export interface TwilioCredentials {
  account_sid: string;
  auth_token: string;
}

/** Outbound dialling limits (DECISIONS 11); unset fields take the defaults. */
export interface OutboundSettings {
  max_concurrent_calls?: number;
  calls_per_second?: number;
}

export const DEFAULT_OUTBOUND = { max_concurrent_calls: 10, calls_per_second: 1 } as const;

/** The limits in force: the organization's, defaults filled in. */
export function outboundLimits(s: Pick<AccountSettings, 'outbound'>): Required<OutboundSettings> {
  return { ...DEFAULT_OUTBOUND, ...(s.outbound ?? {}) };
}

/** A SIP trunk's settings (DECISIONS 15); the passwords are never returned by the API. */
export interface SipSettings {
  inbound?: {
    /** Addresses and CIDR ranges whose INVITEs are taken without credentials. */
    allowed_addresses: string[];
    username?: string;
    password?: string;
  } | null;
  outbound?: {
    /** `sip:host[:port][;transport=tcp]`: where our INVITEs go. */
    proxy: string;
    username?: string;
    password?: string;
    /** The From number of calls we place (default: the number's own). */
    caller_id?: string;
  } | null;
}

export interface AccountSettings {
  webhook: WebhookSettings | null;
  twilio: TwilioCredentials | null;
  outbound?: OutboundSettings | null;
  sip?: SipSettings | null;
  /** The organization's own prices over the shipped ones (src/observability/pricing.ts). */
  pricing?: PriceOverrides | null;
  /**
   * The settings of every other carrier, by carrier id (`{telnyx: {...}}`), each the carrier's
   * own shape (src/telephony/<carrier>/settings.ts). Absent when none are set. In a write, each
   * carrier given replaces its own (null removes it); the others are left as they are.
   */
  carriers?: Record<string, unknown | null>;
}

type AccountRow = Omit<AccountSettings, 'carriers'> & { carriers: Record<string, unknown> | null };

/** A row as the repository returns it: `carriers` only when some are set. */
const settingsFrom = ({ carriers, pricing, ...row }: AccountRow): AccountSettings => ({
  ...row,
  ...(carriers && Object.keys(carriers).length > 0 ? { carriers } : {}),
  ...(pricing ? { pricing } : {}),
});

export class AccountRepository {
  constructor(private readonly db: Db) {}

  async get(orgId: string): Promise<AccountSettings> {
    const { rows } = await this.db.query<AccountRow>(
      'SELECT webhook, twilio, outbound, sip, carriers, pricing FROM account_settings WHERE organization_id = $1',
      [orgId],
    );
    return rows[0] ? settingsFrom(rows[0]) : { webhook: null, twilio: null, outbound: null, sip: null };
  }

  /** Replaces the provided settings (`null` clears one) and returns them all. */
  async update(orgId: string, patch: Partial<AccountSettings>): Promise<AccountSettings> {
    const json = (v: unknown) => (v === undefined || v === null ? null : JSON.stringify(v));
    // carriers: the ones given are set (or, null, removed); the others are kept
    const given = Object.entries(patch.carriers ?? {});
    const setCarriers = Object.fromEntries(given.filter(([, v]) => v !== null && v !== undefined));
    const removed = given.filter(([, v]) => v === null).map(([id]) => id);
    const { rows } = await this.db.query<AccountRow>(
      `INSERT INTO account_settings (organization_id, webhook, twilio, outbound, sip, carriers, pricing) VALUES ($1, $2, $3, $6, $8, $11::jsonb, $13::jsonb)
       ON CONFLICT (organization_id) DO UPDATE SET
         webhook = CASE WHEN $4::boolean THEN EXCLUDED.webhook ELSE account_settings.webhook END,
         twilio = CASE WHEN $5::boolean THEN EXCLUDED.twilio ELSE account_settings.twilio END,
         outbound = CASE WHEN $7::boolean THEN EXCLUDED.outbound ELSE account_settings.outbound END,
         sip = CASE WHEN $9::boolean THEN EXCLUDED.sip ELSE account_settings.sip END,
         carriers = CASE WHEN $10::boolean
           THEN (COALESCE(account_settings.carriers, '{}'::jsonb) - ARRAY(SELECT jsonb_array_elements_text($12::jsonb))) || $11::jsonb
           ELSE account_settings.carriers END,
         pricing = CASE WHEN $14::boolean THEN EXCLUDED.pricing ELSE account_settings.pricing END,
         updated_at = now()
       RETURNING webhook, twilio, outbound, sip, carriers, pricing`,
      [
        orgId,
        json(patch.webhook),
        json(patch.twilio),
        patch.webhook !== undefined,
        patch.twilio !== undefined,
        json(patch.outbound),
        patch.outbound !== undefined,
        json(patch.sip),
        patch.sip !== undefined,
        given.length > 0,
        JSON.stringify(setCarriers),
        JSON.stringify(removed),
        json(patch.pricing),
        patch.pricing !== undefined,
      ],
    );
    return settingsFrom(rows[0]!);
  }

  async organizationName(orgId: string): Promise<string | null> {
    const { rows } = await this.db.query<{ name: string }>(
      'SELECT name FROM organizations WHERE id = $1',
      [orgId],
    );
    return rows[0]?.name ?? null;
  }
}
