/** Organizations and their API keys. Keys are stored only as SHA-256 hashes. */
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import type { Db, Queryable } from './db.js';

export const API_KEY_PATTERN = /^sk_live_[A-Za-z0-9_-]{43}$/;
const PREFIX_LENGTH = 'sk_live_'.length + 8;

export interface Organization {
  id: string;
  name: string;
}

/** A key as its organization sees it (GET /keys): never the key itself, which only its maker saw. */
export interface OrganizationKey {
  id: string;
  name: string | null;
  /** The key's first 16 characters (`sk_live_` and 8 more): enough to recognise it. */
  prefix: string;
  created_at: string;
  revoked_at: string | null;
}

/** Why a key of an organization was not revoked. */
export type RevokeOutcome = { kind: 'revoked'; key: OrganizationKey } | { kind: 'not-found' } | { kind: 'last-key' };

export interface ApiKeyInfo {
  id: string;
  prefix: string;
  organization_id: string;
  organization_name: string;
  created_at: string;
  revoked_at: string | null;
}

export function hashApiKey(key: string): string {
  return createHash('sha256').update(key).digest('hex');
}

export function generateApiKey(): string {
  return `sk_live_${randomBytes(32).toString('base64url')}`;
}

export class KeyRepository {
  constructor(private readonly db: Db) {}

  /** The organization a key belongs to, or null for a malformed, unknown or revoked key. */
  async authenticate(key: string): Promise<Organization | null> {
    return (await this.identify(key))?.organization ?? null;
  }

  /** The organization of a key and the key's id, or null for a malformed, unknown or revoked key. */
  async identify(key: string): Promise<{ organization: Organization; keyId: string } | null> {
    if (!API_KEY_PATTERN.test(key)) return null;
    const { rows } = await this.db.query<Organization & { key_id: string }>(
      `SELECT o.id, o.name, k.id AS key_id FROM api_keys k JOIN organizations o ON o.id = k.organization_id
        WHERE k.key_hash = $1 AND k.revoked_at IS NULL`,
      [hashApiKey(key)],
    );
    const row = rows[0];
    return row ? { organization: { id: row.id, name: row.name }, keyId: row.key_id } : null;
  }

  /** The organization's keys, active and revoked, oldest first. */
  async listForOrganization(orgId: string): Promise<OrganizationKey[]> {
    const { rows } = await this.db.query<KeyRow>(
      `SELECT id, name, prefix, created_at, revoked_at FROM api_keys WHERE organization_id = $1 ORDER BY created_at, id`,
      [orgId],
    );
    return rows.map(toOrganizationKey);
  }

  /** A new key of an existing organization: the key itself is in the answer and nowhere else. */
  async createForOrganization(orgId: string, name: string | null): Promise<{ key: OrganizationKey; secret: string }> {
    const secret = generateApiKey();
    const { rows } = await this.db.query<KeyRow>(
      `INSERT INTO api_keys (id, organization_id, prefix, key_hash, name) VALUES ($1, $2, $3, $4, $5)
       RETURNING id, name, prefix, created_at, revoked_at`,
      [randomUUID(), orgId, secret.slice(0, PREFIX_LENGTH), hashApiKey(secret), name],
    );
    return { key: toOrganizationKey(rows[0]!), secret };
  }

  /**
   * Revokes one active key of the organization, unless it is the organization's last active key
   * (an organization without a key could never use the API again). The organization's active
   * keys are locked first, so that two revocations at once cannot both take the last two.
   */
  async revokeForOrganization(orgId: string, id: string): Promise<RevokeOutcome> {
    return this.db.transaction(async (tx) => {
      const { rows } = await tx.query<{ id: string }>(
        'SELECT id FROM api_keys WHERE organization_id = $1 AND revoked_at IS NULL ORDER BY id FOR UPDATE',
        [orgId],
      );
      if (!rows.some((r) => r.id === id)) return { kind: 'not-found' };
      if (rows.length === 1) return { kind: 'last-key' };
      const revoked = await tx.query<KeyRow>(
        `UPDATE api_keys SET revoked_at = now() WHERE id = $1 RETURNING id, name, prefix, created_at, revoked_at`,
        [id],
      );
      return { kind: 'revoked', key: toOrganizationKey(revoked.rows[0]!) };
    });
  }

  /** Creates a key for the organization named `orgName` (made when it does not exist yet). */
  async createKey(orgName: string): Promise<{ key: string; organization: Organization; prefix: string }> {
    return this.db.transaction(async (tx) => {
      const organization = await findOrCreateOrganization(tx, orgName);
      const key = generateApiKey();
      const prefix = key.slice(0, PREFIX_LENGTH);
      await tx.query(
        'INSERT INTO api_keys (id, organization_id, prefix, key_hash) VALUES ($1, $2, $3, $4)',
        [randomUUID(), organization.id, prefix, hashApiKey(key)],
      );
      return { key, organization, prefix };
    });
  }

  async countKeys(): Promise<number> {
    const { rows } = await this.db.query<{ n: number }>('SELECT count(*)::int AS n FROM api_keys');
    return rows[0]?.n ?? 0;
  }

  async listKeys(): Promise<ApiKeyInfo[]> {
    const { rows } = await this.db.query<{
      id: string;
      prefix: string;
      organization_id: string;
      organization_name: string;
      created_at: Date;
      revoked_at: Date | null;
    }>(
      `SELECT k.id, k.prefix, k.organization_id, o.name AS organization_name, k.created_at, k.revoked_at
         FROM api_keys k JOIN organizations o ON o.id = k.organization_id
        ORDER BY k.created_at, k.id`,
    );
    return rows.map((r) => ({
      ...r,
      created_at: new Date(r.created_at).toISOString(),
      revoked_at: r.revoked_at ? new Date(r.revoked_at).toISOString() : null,
    }));
  }

  /** Revokes the keys whose prefix starts with `prefix`; refuses an ambiguous prefix. */
  async revoke(prefix: string): Promise<{ revoked: string[]; ambiguous: string[] }> {
    const matches = (await this.listKeys()).filter(
      (k) => k.revoked_at === null && k.prefix.startsWith(prefix),
    );
    if (matches.length > 1) return { revoked: [], ambiguous: matches.map((k) => k.prefix) };
    for (const k of matches) {
      await this.db.query('UPDATE api_keys SET revoked_at = now() WHERE id = $1', [k.id]);
    }
    return { revoked: matches.map((k) => k.prefix), ambiguous: [] };
  }
}

interface KeyRow {
  id: string;
  name: string | null;
  prefix: string;
  created_at: Date;
  revoked_at: Date | null;
}

const toOrganizationKey = (r: KeyRow): OrganizationKey => ({
  id: r.id,
  name: r.name,
  prefix: r.prefix,
  created_at: new Date(r.created_at).toISOString(),
  revoked_at: r.revoked_at ? new Date(r.revoked_at).toISOString() : null,
});

async function findOrCreateOrganization(tx: Queryable, name: string): Promise<Organization> {
  const existing = await tx.query<Organization>(
    'SELECT id, name FROM organizations WHERE name = $1 ORDER BY created_at LIMIT 1',
    [name],
  );
  if (existing.rows[0]) return existing.rows[0];
  const org = { id: randomUUID(), name };
  await tx.query('INSERT INTO organizations (id, name) VALUES ($1, $2)', [org.id, org.name]);
  return org;
}
