/** Workflows: SPEC 4.1, DECISIONS 3. */
import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { validateDefinition } from '../../engine/validate.js';
import type { WorkflowDefinition } from '../../engine/schema.js';
import type { Store } from '../store/index.js';
import { invalidDefinition, invalidRequest, notFound } from './errors.js';
import type { WorkflowLayout } from '../store/workflows.js';
import {
  ErrorBody,
  errorResponses,
  IdParams,
  Workflow,
  WorkflowCreateBody,
  WorkflowPatchBody,
  WorkflowSummary,
} from './schemas.js';

function checkedDefinition(input: unknown): WorkflowDefinition {
  const result = validateDefinition(input);
  if (!result.ok) throw invalidDefinition(result.details);
  return result.definition;
}

/** A layout names only nodes of the definition it is kept beside. */
function checkLayout(layout: WorkflowLayout | undefined, definition: WorkflowDefinition): void {
  if (!layout) return;
  const ids = new Set(definition.nodes.map((n) => n.id));
  const unknown = Object.keys(layout).filter((id) => !ids.has(id));
  if (unknown.length > 0) {
    throw invalidRequest(unknown.map((id) => `layout.${id}: the definition has no node "${id}"`));
  }
}

export const workflowRoutes =
  (store: Store): FastifyPluginAsyncZod =>
  async (app) => {
    const tags = ['workflows'];

    app.post('/workflows', {
      schema: {
        operationId: 'createWorkflow',
        tags,
        summary: 'Create a workflow (the definition is validated on write)',
        body: WorkflowCreateBody,
        response: { 201: z.object({ workflow: Workflow }), ...errorResponses },
      },
      handler: async (request, reply) => {
        const { name, definition, is_active, layout } = request.body;
        const checked = checkedDefinition(definition);
        checkLayout(layout, checked);
        const workflow = await store.workflows.create(request.organization.id, {
          name,
          definition: checked,
          is_active: is_active ?? true,
          ...(layout ? { layout } : {}),
        });
        return reply.code(201).send({ workflow });
      },
    });

    app.get('/workflows', {
      schema: {
        operationId: 'listWorkflows',
        tags,
        summary: "List the organization's workflows, oldest first (summaries)",
        response: { 200: z.object({ workflows: z.array(WorkflowSummary) }), ...errorResponses },
      },
      handler: async (request) => ({ workflows: await store.workflows.list(request.organization.id) }),
    });

    app.get('/workflows/:id', {
      schema: {
        operationId: 'getWorkflow',
        tags,
        summary: 'Get a workflow with its full definition and its layout',
        params: IdParams,
        response: { 200: z.object({ workflow: Workflow }), ...errorResponses },
      },
      handler: async (request) => {
        const workflow = await store.workflows.get(request.organization.id, request.params.id);
        if (!workflow) throw notFound('workflow', request.params.id);
        return { workflow };
      },
    });

    app.patch('/workflows/:id', {
      schema: {
        operationId: 'updateWorkflow',
        tags,
        summary: 'Update name, is_active or layout, or replace the definition entirely',
        description:
          'A new definition applies to the next call; calls in progress finish on the definition they started with. ' +
          '`layout` (where the dashboard draws each node) is kept beside the definition and replaced whole; it may name ' +
          'only nodes of the definition (the new one when both are sent). Nothing is written when any part is refused.',
        params: IdParams,
        body: WorkflowPatchBody,
        response: { 200: z.object({ workflow: Workflow }), ...errorResponses },
      },
      handler: async (request) => {
        const { name, is_active, definition, layout } = request.body;
        const checked = definition === undefined ? undefined : checkedDefinition(definition);
        if (layout) {
          const against = checked ?? (await store.workflows.get(request.organization.id, request.params.id))?.definition;
          if (!against) throw notFound('workflow', request.params.id);
          checkLayout(layout, against);
        }
        const workflow = await store.workflows.update(request.organization.id, request.params.id, {
          name,
          is_active,
          definition: checked,
          layout,
        });
        if (!workflow) throw notFound('workflow', request.params.id);
        return { workflow };
      },
    });

    app.delete('/workflows/:id', {
      schema: {
        operationId: 'deleteWorkflow',
        tags,
        summary: 'Delete a workflow (409 while a number runs it)',
        params: IdParams,
        response: { 204: z.undefined(), 409: ErrorBody.describe('In use'), ...errorResponses },
      },
      handler: async (request, reply) => {
        const deleted = await store.workflows.delete(request.organization.id, request.params.id);
        if (!deleted) throw notFound('workflow', request.params.id);
        return reply.code(204).send();
      },
    });
  };

