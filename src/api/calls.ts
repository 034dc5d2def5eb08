/** Calls: status, assistant, workflow, current node and transcript so far (DECISIONS 8). */
import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { CallRecord, CallStore } from '../calls/store.js';
import { notFound } from './errors.js';
import { errorResponses, IdParams } from './schemas.js';

const CallMessage = z.object({
  role: z.string(),
  content: z.string(),
  time: z.string(),
  seconds_from_start: z.number(),
  node_id: z.string().nullable(),
});

export const Call = z.object({
  id: z.uuid(),
  type: z.literal('inbound_phone_call'),
  status: z.enum(['ringing', 'in-progress', 'forwarding', 'ended']),
  phone_number: z.object({ number: z.string(), name: z.string().nullable() }),
  customer: z.object({ number: z.string() }),
  assistant_id: z.string().nullable().describe('null for an inline assistant from assistant-request'),
  workflow_id: z.string().nullable(),
  workflow_note: z.string().nullable().describe('why the number\'s workflow did not run, when it did not'),
  current_node: z.string().nullable(),
  nodes_visited: z.array(z.string()),
  transcript: z.string(),
  messages: z.array(CallMessage),
  created_at: z.string(),
  started_at: z.string().nullable(),
  ended_at: z.string().nullable(),
  ended_reason: z.string().nullable(),
  errors: z.array(z.string()),
});

export function callView(r: CallRecord) {
  return {
    id: r.id,
    type: r.type,
    status: r.status,
    phone_number: r.phone_number,
    customer: r.customer,
    assistant_id: r.assistant_id,
    workflow_id: r.workflow_id,
    workflow_note: r.workflow_note,
    current_node: r.current_node,
    nodes_visited: r.nodes_visited,
    transcript: r.messages.map((m) => `${m.role === 'user' ? 'Caller' : 'Assistant'}: ${m.content}`).join('\n'),
    messages: r.messages,
    created_at: r.created_at,
    started_at: r.started_at,
    ended_at: r.ended_at,
    ended_reason: r.ended_reason,
    errors: r.errors,
  };
}

export const callRoutes =
  (calls: CallStore): FastifyPluginAsyncZod =>
  async (app) => {
    const tags = ['calls'];
    app.get('/calls', {
      schema: {
        tags,
        summary: "The organization's recent calls, newest first",
        querystring: z.strictObject({ limit: z.coerce.number().int().min(1).max(500).default(100) }),
        response: { 200: z.object({ calls: z.array(Call) }), ...errorResponses },
      },
      handler: async (request) => ({
        calls: (await calls.list(request.organization.id, request.query.limit)).map(callView),
      }),
    });
    app.get('/calls/:id', {
      schema: { tags, summary: 'One call, live or ended', params: IdParams, response: { 200: z.object({ call: Call }), ...errorResponses } },
      handler: async (request) => {
        const record = await calls.get(request.params.id);
        if (!record || record.organization_id !== request.organization.id) throw notFound('call', request.params.id);
        return { call: callView(record) };
      },
    });
  };
