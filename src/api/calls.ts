/**
 * Calls: status, assistant, workflow, current node and transcript (DECISIONS 8). A live call is
 * read from its session (the current state); every call, live or long over, from the call log
 * (kept CALL_RETENTION_DAYS, across restarts).
 */
import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { CallRecord } from '../calls/store.js';
import { describeCall, type LoggedCallStore } from '../calls/call-log.js';
import { transcriptText } from '../calls/transcript.js';
import { decodeCursor, InvalidCursorError, type CallLogEntry } from '../store/calls.js';
import { invalidRequest, notFound } from './errors.js';
import { errorResponses, IdParams } from './schemas.js';

export const CALL_STATUSES = ['ringing', 'in-progress', 'forwarding', 'ended'] as const;
/** DECISIONS 11 and 14 name the other two; inbound phone calls are the only ones made today. */
export const CALL_TYPES = ['inbound_phone_call', 'outbound_phone_call', 'web_call'] as const;

const CallMessage = z.object({
  role: z.string(),
  content: z.string(),
  time: z.string(),
  seconds_from_start: z.number(),
  node_id: z.string().nullable(),
});

const Timestamp = z.string().describe('ISO 8601 UTC timestamp');

export const Call = z.object({
  id: z.uuid(),
  type: z.enum(CALL_TYPES),
  status: z.enum(CALL_STATUSES),
  transport: z.string().describe('the carrier the call came through: twilio'),
  phone_number: z.object({ number: z.string(), name: z.string().nullable() }).nullable(),
  customer: z.object({ number: z.string() }).nullable(),
  assistant_id: z.string().nullable().describe('null for an inline assistant from assistant-request'),
  workflow_id: z.string().nullable(),
  definition_hash: z
    .string()
    .nullable()
    .describe(
      'sha256 (hex) of the canonical JSON (keys sorted) of the workflow definition the call ran, as it was at call start; null when no workflow ran',
    ),
  workflow_note: z.string().nullable().describe('why the number\'s workflow did not run, when it did not'),
  current_node: z.string().nullable(),
  nodes_visited: z.array(z.string()),
  transcript: z.string().describe('"Assistant: …" and "Caller: …" lines; empty with gdpr_mode once the call is over'),
  messages: z.array(CallMessage).describe('empty with gdpr_mode once the call is over'),
  created_at: Timestamp,
  started_at: Timestamp.nullable(),
  ended_at: Timestamp.nullable(),
  ended_reason: z.string().nullable(),
  errors: z.array(z.string()),
  structured_data: z
    .unknown()
    .describe("what the assistant's analysis plan extracted once the call ended (also in the end-of-call-report); null when nothing was")
    .nullable(),
});

const QueryTimestamp = z.iso.datetime({
  offset: true,
  error: 'must be an ISO 8601 timestamp with a time zone, such as 2025-06-01T00:00:00Z',
});

const isCursor = (cursor: string) => {
  try {
    decodeCursor(cursor);
    return true;
  } catch {
    return false;
  }
};
const NOT_A_CURSOR = 'not a cursor from a previous page (use next_cursor as it was given)';

export const CallListQuery = z
  .strictObject({
    limit: z.coerce.number().int().min(1).max(100).default(50).describe('calls per page, 1 to 100'),
    cursor: z.string().max(200).refine(isCursor, NOT_A_CURSOR).optional().describe('next_cursor of the page before'),
    status: z.enum(CALL_STATUSES).optional(),
    type: z.enum(CALL_TYPES).optional(),
    assistant_id: z.uuid().optional(),
    number_id: z.uuid().optional(),
    since: QueryTimestamp.optional().describe('calls created at or after this time'),
    until: QueryTimestamp.optional().describe('calls created before this time'),
  })
  .refine((q) => !q.since || !q.until || Date.parse(q.since) < Date.parse(q.until), {
    path: ['until'],
    message: 'must be later than since',
  });

/** What the API shows of a call, from the log or a session (`describeCall`). */
export function callView(c: CallLogEntry) {
  return {
    id: c.id,
    type: c.type,
    status: c.status,
    transport: c.transport,
    phone_number: c.phone_number,
    customer: c.customer,
    assistant_id: c.assistant_id,
    workflow_id: c.workflow_id,
    definition_hash: c.definition_hash,
    workflow_note: c.workflow_note,
    current_node: c.current_node,
    nodes_visited: c.nodes_visited,
    transcript: transcriptText(c.messages),
    messages: c.messages,
    created_at: c.created_at,
    started_at: c.started_at,
    ended_at: c.ended_at,
    ended_reason: c.ended_reason,
    errors: c.errors,
    structured_data: c.structured_data ?? null,
    // the log's type and status are those of the session records it was written from
  } as z.infer<typeof Call>;
}

/**
 * A call as its session has it, with what only the log still knows: an ended call's record no
 * longer holds its definition (nor, with gdpr_mode, its engine snapshot) to hash.
 */
function sessionView(session: CallRecord, logged: CallLogEntry | null) {
  const entry = describeCall(session);
  if (entry.definition_hash === null && logged) entry.definition_hash = logged.definition_hash;
  return callView(entry);
}

/** How long a read waits for this process's call-log writes to land first. */
const SETTLE_MS = 2_000;

export const callRoutes =
  (calls: LoggedCallStore): FastifyPluginAsyncZod =>
  async (app) => {
    const tags = ['calls'];

    /** The call's live session, when there is one and it is the organization's; a session store that fails is no session. */
    const sessionOf = async (orgId: string, id: string, log: { warn: (o: object, m: string) => void }): Promise<CallRecord | null> => {
      try {
        const record = await calls.get(id);
        return record && record.organization_id === orgId ? record : null;
      } catch (err) {
        log.warn({ err, callId: id }, 'call session unreadable; answering from the call log');
        return null;
      }
    };

    app.get('/calls', {
      schema: {
        tags,
        summary: "The organization's calls, newest first, a page at a time",
        description:
          'Every call kept in the call log (CALL_RETENTION_DAYS), newest first. Pass `next_cursor` as `cursor` for the next page; ' +
          'it is null on the last page. Filters combine; `since` and `until` bound `created_at`.',
        querystring: CallListQuery,
        response: {
          200: z.object({
            calls: z.array(Call),
            next_cursor: z.string().nullable().describe('the cursor of the next page; null when there is none'),
          }),
          ...errorResponses,
        },
      },
      handler: async (request) => {
        const orgId = request.organization.id;
        // what this process has just saved (a call that just started or ended) is in the page
        await calls.settled(SETTLE_MS);
        let page;
        try {
          page = await calls.callLog.list(orgId, request.query);
        } catch (err) {
          if (err instanceof InvalidCursorError) throw invalidRequest([`query.cursor: ${NOT_A_CURSOR}`]);
          throw err;
        }
        // a live call's session is ahead of the log (node, transcript so far)
        const views = await Promise.all(
          page.calls.map(async (logged) => {
            if (logged.status === 'ended') return callView(logged);
            const session = await sessionOf(orgId, logged.id, request.log);
            return session ? sessionView(session, logged) : callView(logged);
          }),
        );
        return { calls: views, next_cursor: page.next_cursor };
      },
    });

    app.get('/calls/:id', {
      schema: {
        tags,
        summary: 'One call, live or ended',
        description: 'A live call as it is now; an ended one as long as the call log keeps it (CALL_RETENTION_DAYS).',
        params: IdParams,
        response: { 200: z.object({ call: Call }), ...errorResponses },
      },
      handler: async (request) => {
        const orgId = request.organization.id;
        const id = request.params.id;
        // a live call: its session has the current state
        const session = await sessionOf(orgId, id, request.log);
        if (session && session.status !== 'ended') return { call: sessionView(session, null) };
        // an ended one: the log has all of it once this process's last writes are in
        if (session) await calls.settled(SETTLE_MS);
        const logged = await calls.callLog.get(orgId, id);
        if (logged && (logged.status === 'ended' || !session)) return { call: callView(logged) };
        if (session) return { call: sessionView(session, logged) };
        throw notFound('call', id);
      },
    });
  };
