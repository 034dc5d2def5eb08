/** Workflows: SPEC 4.1, DECISIONS 3. */
import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { validateDefinition } from '../../engine/validate.js';
import type { WorkflowDefinition } from '../../engine/schema.js';
import type { Store } from '../store/index.js';
import { invalidDefinition, notFound } from './errors.js';
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
        const { name, definition, is_active } = request.body;
        const workflow = await store.workflows.create(request.organization.id, {
          name,
          definition: checkedDefinition(definition),
          is_active: is_active ?? true,
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
        summary: 'Get a workflow with its full definition',
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
        summary: 'Update name, is_active, or replace the definition entirely',
        description:
          'A new definition applies to the next call; calls in progress finish on the definition they started with.',
        params: IdParams,
        body: WorkflowPatchBody,
        response: { 200: z.object({ workflow: Workflow }), ...errorResponses },
      },
      handler: async (request) => {
        const { name, is_active, definition } = request.body;
        const workflow = await store.workflows.update(request.organization.id, request.params.id, {
          name,
          is_active,
          definition: definition === undefined ? undefined : checkedDefinition(definition),
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

