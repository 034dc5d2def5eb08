/** Assistants of an organization: the fields the customer set, stored as given. */
import { randomUUID } from 'node:crypto';
import type { AssistantFields } from '../../engine/assistant.js';
import { isStillReferenced, type Db } from './db.js';
import { InUseError } from './errors.js';
import { iso, numbersUsing } from './workflows.js';

export interface StoredAssistant {
  id: string;
  fields: AssistantFields;
  created_at: string;
  updated_at: string;
}

interface AssistantRow {
  id: string;
  fields: AssistantFields;
  created_at: Date;
  updated_at: Date;
}

const toAssistant = (r: AssistantRow): StoredAssistant => ({
  id: r.id,
  fields: r.fields,
  created_at: iso(r.created_at),
  updated_at: iso(r.updated_at),
});

export class AssistantRepository {
  constructor(private readonly db: Db) {}

  async create(orgId: string, fields: AssistantFields): Promise<StoredAssistant> {
    const { rows } = await this.db.query<AssistantRow>(
      'INSERT INTO assistants (id, organization_id, fields) VALUES ($1, $2, $3) RETURNING *',
      [randomUUID(), orgId, JSON.stringify(fields)],
    );
    return toAssistant(rows[0]!);
  }

  async list(orgId: string): Promise<StoredAssistant[]> {
    const { rows } = await this.db.query<AssistantRow>(
      'SELECT * FROM assistants WHERE organization_id = $1 ORDER BY created_at, id',
      [orgId],
    );
    return rows.map(toAssistant);
  }

  async get(orgId: string, id: string): Promise<StoredAssistant | null> {
    const { rows } = await this.db.query<AssistantRow>(
      'SELECT * FROM assistants WHERE id = $1 AND organization_id = $2',
      [id, orgId],
    );
    return rows[0] ? toAssistant(rows[0]) : null;
  }

  /**
   * Read-modify-write of the stored fields under a row lock, so two concurrent patches of
   * different fields both land. `change` may throw to refuse the patch (nothing is written).
   */
  async update(
    orgId: string,
    id: string,
    change: (current: AssistantFields) => AssistantFields,
  ): Promise<StoredAssistant | null> {
    return this.db.transaction(async (tx) => {
      const { rows } = await tx.query<AssistantRow>(
        'SELECT * FROM assistants WHERE id = $1 AND organization_id = $2 FOR UPDATE',
        [id, orgId],
      );
      if (!rows[0]) return null;
      const next = change(rows[0].fields);
      const updated = await tx.query<AssistantRow>(
        'UPDATE assistants SET fields = $2, updated_at = now() WHERE id = $1 RETURNING *',
        [id, JSON.stringify(next)],
      );
      return toAssistant(updated.rows[0]!);
    });
  }

  async delete(orgId: string, id: string): Promise<boolean> {
    try {
      const { rows } = await this.db.query<{ id: string }>(
        'DELETE FROM assistants WHERE id = $1 AND organization_id = $2 RETURNING id',
        [id, orgId],
      );
      return rows.length > 0;
    } catch (err) {
      if (!isStillReferenced(err)) throw err;
      throw new InUseError('assistant', await numbersUsing(this.db, 'assistant_id', id));
    }
  }
}
