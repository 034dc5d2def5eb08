/** Phone numbers of an organization, each optionally running an assistant and a workflow. */
import { randomUUID } from 'node:crypto';
import {
  isPgError,
  PG_FOREIGN_KEY_VIOLATION,
  PG_UNIQUE_VIOLATION,
  type Db,
  type PgError,
} from './db.js';
import { ConflictError, UnknownReferenceError } from './errors.js';
import { iso } from './workflows.js';

export interface WebhookSettings {
  url: string;
  secret: string | null;
  events: string[];
}

export interface PhoneNumber {
  id: string;
  number: string;
  name: string | null;
  /** Who carries its calls: a carrier with numbers (src/telephony/registry.ts): `twilio`, `sip`, … */
  provider: string;
  assistant_id: string | null;
  workflow_id: string | null;
  webhook: WebhookSettings | null;
  created_at: string;
  updated_at: string;
}

export type NumberWrite = Partial<
  Pick<PhoneNumber, 'number' | 'name' | 'provider' | 'assistant_id' | 'workflow_id' | 'webhook'>
>;

interface NumberRow extends Omit<PhoneNumber, 'created_at' | 'updated_at'> {
  organization_id: string;
  created_at: Date;
  updated_at: Date;
}

const toNumber = (r: NumberRow): PhoneNumber => ({
  id: r.id,
  number: r.number,
  name: r.name,
  provider: r.provider,
  assistant_id: r.assistant_id,
  workflow_id: r.workflow_id,
  webhook: r.webhook,
  created_at: iso(r.created_at),
  updated_at: iso(r.updated_at),
});

const COLUMNS = ['number', 'name', 'provider', 'assistant_id', 'workflow_id', 'webhook'] as const;

export class NumberRepository {
  constructor(private readonly db: Db) {}

  async create(orgId: string, input: NumberWrite & { number: string }): Promise<PhoneNumber> {
    return this.mapErrors(input, async () => {
      const { rows } = await this.db.query<NumberRow>(
        `INSERT INTO numbers (id, organization_id, number, name, provider, assistant_id, workflow_id, webhook)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING *`,
        [
          randomUUID(),
          orgId,
          input.number,
          input.name ?? null,
          input.provider ?? 'twilio',
          input.assistant_id ?? null,
          input.workflow_id ?? null,
          input.webhook ? JSON.stringify(input.webhook) : null,
        ],
      );
      return toNumber(rows[0]!);
    });
  }

  async list(orgId: string): Promise<PhoneNumber[]> {
    const { rows } = await this.db.query<NumberRow>(
      'SELECT * FROM numbers WHERE organization_id = $1 ORDER BY created_at, id',
      [orgId],
    );
    return rows.map(toNumber);
  }

  async get(orgId: string, id: string): Promise<PhoneNumber | null> {
    const { rows } = await this.db.query<NumberRow>(
      'SELECT * FROM numbers WHERE id = $1 AND organization_id = $2',
      [id, orgId],
    );
    return rows[0] ? toNumber(rows[0]) : null;
  }

  /** The number a call to `e164` reaches, whatever its organization (telephony routing). */
  async findByNumber(e164: string): Promise<(PhoneNumber & { organization_id: string }) | null> {
    const { rows } = await this.db.query<NumberRow>('SELECT * FROM numbers WHERE number = $1', [e164]);
    return rows[0] ? { ...toNumber(rows[0]), organization_id: rows[0].organization_id } : null;
  }

  /** Sets the provided fields only (`null` clears a reference or the webhook). */
  async update(orgId: string, id: string, patch: NumberWrite): Promise<PhoneNumber | null> {
    const sets: string[] = [];
    const params: unknown[] = [id, orgId];
    for (const column of COLUMNS) {
      const value = patch[column];
      if (value === undefined) continue;
      params.push(column === 'webhook' && value !== null ? JSON.stringify(value) : value);
      sets.push(`${column} = $${params.length}`);
    }
    sets.push('updated_at = now()');
    return this.mapErrors(patch, async () => {
      const { rows } = await this.db.query<NumberRow>(
        `UPDATE numbers SET ${sets.join(', ')} WHERE id = $1 AND organization_id = $2 RETURNING *`,
        params,
      );
      return rows[0] ? toNumber(rows[0]) : null;
    });
  }

  async delete(orgId: string, id: string): Promise<boolean> {
    const { rows } = await this.db.query<{ id: string }>(
      'DELETE FROM numbers WHERE id = $1 AND organization_id = $2 RETURNING id',
      [id, orgId],
    );
    return rows.length > 0;
  }

  /** Turns constraint violations into errors that name the field at fault. */
  private async mapErrors<T>(input: NumberWrite, write: () => Promise<T>): Promise<T> {
    try {
      return await write();
    } catch (err) {
      if (isPgError(err, PG_FOREIGN_KEY_VIOLATION)) {
        const constraint = (err as PgError).constraint ?? '';
        const field = constraint.includes('workflow') ? 'workflow_id' : 'assistant_id';
        const kind = field === 'workflow_id' ? 'workflow' : 'assistant';
        throw new UnknownReferenceError([`${field}: no ${kind} with id "${String(input[field])}"`]);
      }
      if (isPgError(err, PG_UNIQUE_VIOLATION)) {
        throw new ConflictError([`number: ${String(input.number)} is already registered`]);
      }
      throw err;
    }
  }
}
