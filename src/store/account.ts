/** Organization-wide settings: the default webhook and the telephony credentials. */
import type { Db } from './db.js';
import type { WebhookSettings } from './numbers.js';

export interface TwilioCredentials {
  account_sid: string;
  auth_token: string;
}

export interface AccountSettings {
  webhook: WebhookSettings | null;
  twilio: TwilioCredentials | null;
}

export class AccountRepository {
  constructor(private readonly db: Db) {}

  async get(orgId: string): Promise<AccountSettings> {
    const { rows } = await this.db.query<AccountSettings>(
      'SELECT webhook, twilio FROM account_settings WHERE organization_id = $1',
      [orgId],
    );
    return rows[0] ?? { webhook: null, twilio: null };
  }

  /** Replaces the provided settings (`null` clears one) and returns them all. */
  async update(orgId: string, patch: Partial<AccountSettings>): Promise<AccountSettings> {
    const json = (v: unknown) => (v === undefined || v === null ? null : JSON.stringify(v));
    const { rows } = await this.db.query<AccountSettings>(
      `INSERT INTO account_settings (organization_id, webhook, twilio) VALUES ($1, $2, $3)
       ON CONFLICT (organization_id) DO UPDATE SET
         webhook = CASE WHEN $4::boolean THEN EXCLUDED.webhook ELSE account_settings.webhook END,
         twilio = CASE WHEN $5::boolean THEN EXCLUDED.twilio ELSE account_settings.twilio END,
         updated_at = now()
       RETURNING webhook, twilio`,
      [orgId, json(patch.webhook), json(patch.twilio), patch.webhook !== undefined, patch.twilio !== undefined],
    );
    return rows[0]!;
  }

  async organizationName(orgId: string): Promise<string | null> {
    const { rows } = await this.db.query<{ name: string }>(
      'SELECT name FROM organizations WHERE id = $1',
      [orgId],
    );
    return rows[0]?.name ?? null;
  }
}
