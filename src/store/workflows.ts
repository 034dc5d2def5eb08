/** Workflows of an organization. The definition is stored whole; the summary columns beside it. */
import { randomUUID } from 'node:crypto';
import type { WorkflowDefinition } from '../../engine/schema.js';
import { isStillReferenced, type Db } from './db.js';
import { InUseError } from './errors.js';

/** Where the dashboard's editor draws each node, by node id (DECISIONS 19); never part of the definition. */
export type WorkflowLayout = Record<string, { x: number; y: number }>;

export interface Workflow {
  id: string;
  name: string;
  is_active: boolean;
  definition: WorkflowDefinition;
  layout: WorkflowLayout;
  created_at: string;
  updated_at: string;
}

export interface WorkflowSummary {
  id: string;
  name: string;
  is_active: boolean;
  entry_node: string;
  node_count: number;
  edge_count: number;
  created_at: string;
  updated_at: string;
}

interface WorkflowRow {
  id: string;
  name: string;
  is_active: boolean;
  definition: WorkflowDefinition;
  layout: WorkflowLayout | null;
  entry_node: string;
  node_count: number;
  edge_count: number;
  created_at: Date;
  updated_at: Date;
}

export const iso = (d: Date | string) => new Date(d).toISOString();

const toWorkflow = (r: WorkflowRow): Workflow => ({
  id: r.id,
  name: r.name,
  is_active: r.is_active,
  definition: r.definition,
  layout: r.layout ?? {},
  created_at: iso(r.created_at),
  updated_at: iso(r.updated_at),
});

const summaryColumns = (d: WorkflowDefinition) => [d.entry_node, d.nodes.length, d.edges.length];

/** The layout's entries for the definition's nodes only: a node removed takes its position with it. */
export function layoutFor(layout: WorkflowLayout, definition: WorkflowDefinition): WorkflowLayout {
  const ids = new Set(definition.nodes.map((n) => n.id));
  return Object.fromEntries(Object.entries(layout).filter(([id]) => ids.has(id)));
}

export class WorkflowRepository {
  constructor(private readonly db: Db) {}

  async create(
    orgId: string,
    input: { name: string; definition: WorkflowDefinition; is_active: boolean; layout?: WorkflowLayout },
  ): Promise<Workflow> {
    const { rows } = await this.db.query<WorkflowRow>(
      `INSERT INTO workflows (id, organization_id, name, is_active, definition, entry_node, node_count, edge_count, layout)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING *`,
      [
        randomUUID(),
        orgId,
        input.name,
        input.is_active,
        JSON.stringify(input.definition),
        ...summaryColumns(input.definition),
        JSON.stringify(layoutFor(input.layout ?? {}, input.definition)),
      ],
    );
    return toWorkflow(rows[0]!);
  }

  async list(orgId: string): Promise<WorkflowSummary[]> {
    const { rows } = await this.db.query<WorkflowRow>(
      `SELECT id, name, is_active, entry_node, node_count, edge_count, created_at, updated_at
         FROM workflows WHERE organization_id = $1 ORDER BY created_at, id`,
      [orgId],
    );
    return rows.map((r) => ({
      id: r.id,
      name: r.name,
      is_active: r.is_active,
      entry_node: r.entry_node,
      node_count: r.node_count,
      edge_count: r.edge_count,
      created_at: iso(r.created_at),
      updated_at: iso(r.updated_at),
    }));
  }

  async get(orgId: string, id: string): Promise<Workflow | null> {
    const { rows } = await this.db.query<WorkflowRow>(
      'SELECT * FROM workflows WHERE id = $1 AND organization_id = $2',
      [id, orgId],
    );
    return rows[0] ? toWorkflow(rows[0]) : null;
  }

  async update(
    orgId: string,
    id: string,
    patch: { name?: string | undefined; is_active?: boolean | undefined; definition?: WorkflowDefinition | undefined; layout?: WorkflowLayout | undefined },
  ): Promise<Workflow | null> {
    const d = patch.definition;
    // the layout keeps only the nodes of the definition it ends up beside (the new one, or the one kept)
    const { rows } = await this.db.query<WorkflowRow>(
      `UPDATE workflows SET
         name = COALESCE($3, name),
         is_active = COALESCE($4, is_active),
         definition = COALESCE($5::jsonb, definition),
         entry_node = COALESCE($6, entry_node),
         node_count = COALESCE($7, node_count),
         edge_count = COALESCE($8, edge_count),
         layout = (SELECT COALESCE(jsonb_object_agg(l.key, l.value), '{}'::jsonb)
                     FROM jsonb_each(COALESCE($9::jsonb, workflows.layout)) AS l
                    WHERE l.key IN (SELECT n->>'id' FROM jsonb_array_elements(COALESCE($5::jsonb, workflows.definition)->'nodes') AS n)),
         updated_at = now()
       WHERE id = $1 AND organization_id = $2 RETURNING *`,
      [
        id,
        orgId,
        patch.name ?? null,
        patch.is_active ?? null,
        d ? JSON.stringify(d) : null,
        ...(d ? summaryColumns(d) : [null, null, null]),
        patch.layout ? JSON.stringify(patch.layout) : null,
      ],
    );
    return rows[0] ? toWorkflow(rows[0]) : null;
  }

  /**
   * Deletes a workflow. The foreign key from numbers makes the database refuse while a number
   * runs it, even when an attach races with this delete.
   */
  async delete(orgId: string, id: string): Promise<boolean> {
    try {
      const { rows } = await this.db.query<{ id: string }>(
        'DELETE FROM workflows WHERE id = $1 AND organization_id = $2 RETURNING id',
        [id, orgId],
      );
      return rows.length > 0;
    } catch (err) {
      if (!isStillReferenced(err)) throw err;
      throw new InUseError('workflow', await numbersUsing(this.db, 'workflow_id', id));
    }
  }
}

/** The numbers that reference a workflow or an assistant, for a 409's details. */
export async function numbersUsing(
  db: Db,
  column: 'workflow_id' | 'assistant_id',
  id: string,
): Promise<{ id: string; number: string }[]> {
  const { rows } = await db.query<{ id: string; number: string }>(
    `SELECT id, number FROM numbers WHERE ${column} = $1 ORDER BY created_at, id`,
    [id],
  );
  return rows;
}
