/**
 * Calls: status, assistant, workflow, current node and transcript (DECISIONS 8). A live call is
 * read from its session (the current state); every call, live or long over, from the call log
 * (kept CALL_RETENTION_DAYS, across restarts).
 */
import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { CALL_STATUSES, type CallRecord } from '../calls/store.js';
import { describeCall, type LoggedCallStore } from '../calls/call-log.js';
import { transcriptText } from '../calls/transcript.js';
import { decodeCursor, InvalidCursorError, type CallLogEntry } from '../store/calls.js';
import { ApiError, invalidRequest, notFound, notTaken } from './errors.js';
import { CallErrorEntry, errorResponses, ErrorBody, IdParams } from './schemas.js';
import { E164 } from '../../engine/schema.js';
import { wellFormed } from '../../engine/text.js';
import { storable } from './storable.js';
import { Variables } from './variables.js';
import type { OutboundCalls } from '../calls/outbound-calls.js';
import { callExample, placeCallExample, webCallExample } from './examples.js';
import type { CallService } from '../calls/service.js';
import { WebTelephony } from '../telephony/web/transport.js';
import { CARRIERS } from '../telephony/registry.js';
import { ChatCreateBody } from './chats.js';
import { CallObservedFields } from './observed.js';

/** `POST /calls/web` takes the body of `POST /chats` (DECISIONS 14). */
export const WebCallBody = ChatCreateBody.meta({ id: 'WebCallBody', example: webCallExample });

export { CALL_STATUSES };
/** Phone calls both ways, web calls (a browser: docs/web-calls.md), and the voice tests of test suites (docs/test-suites.md). */
export const CALL_TYPES = ['inbound_phone_call', 'outbound_phone_call', 'web_call', 'test_call'] as const;
/** The most customers one `POST /calls` takes (a campaign). */
export const MAX_CUSTOMERS = 1000;

const CallMessage = z.object({
  role: z.string(),
  content: z.string(),
  time: z.string(),
  seconds_from_start: z.number(),
  node_id: z.string().nullable(),
  source: z
    .literal('control')
    .optional()
    .describe('"control": a live control said (assistant) or added (system, user) it (POST /calls/{id}/control); absent otherwise'),
});

const Timestamp = z.string().describe('ISO 8601 UTC timestamp');

export const CallTransferView = z
  .object({
    mode: z.enum(['cold', 'warm']),
    destination: z.string().describe('E.164'),
    result: z
      .enum(['completed', 'no-answer', 'busy', 'declined', 'failed'])
      .nullable()
      .describe('null while a warm transfer is under way; a cold transfer the carrier took is completed'),
    summary: z.string().nullable().describe('warm: the model\'s summary the operator heard ({{summary}}); null for a cold transfer, and with gdpr_mode once the call is over'),
    operator_answered_at: Timestamp.nullable().describe('warm: when the operator answered'),
    joined_at: Timestamp.nullable().describe('warm: when the caller and the operator were joined'),
  })
  .meta({ id: 'CallTransfer' });

export const Call = z.object({
  id: z.uuid(),
  type: z.enum(CALL_TYPES),
  status: z.enum(CALL_STATUSES),
  transport: z.string().describe(`what carries the call: ${CARRIERS.map((c) => `${c.id} (${c.label})`).join(', ')} (docs/carriers.md)`),
  phone_number: z.object({ number: z.string(), name: z.string().nullable() }).nullable().describe('null for a web call'),
  customer: z
    .object({ number: z.string(), name: z.string().nullable().describe('as given to POST /calls; null for inbound calls') })
    .nullable()
    .describe('null for a web call'),
  answered_by: z
    .enum(['human', 'machine', 'unknown'])
    .nullable()
    .describe('outbound calls: who answered, as answering-machine detection said (null: nobody answered, not known yet, or an inbound call)'),
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
  errors: z.array(CallErrorEntry).describe('what went wrong, in order; ended_reason derives from the entry that ended the call'),
  structured_data: z
    .unknown()
    .describe("what the assistant's analysis plan extracted once the call ended (also in the end-of-call-report); null when nothing was")
    .nullable(),
  recording_url: z
    .string()
    .nullable()
    .describe(
      'GET /calls/{id}/recording, once the call ended recorded (its assistant has recording_consent.enabled and not gdpr_mode); ' +
        'the recording itself is kept RECORDING_RETENTION_DAYS. null when the call was not recorded',
    ),
  variables: z
    .record(z.string(), z.union([z.string(), z.number(), z.boolean()]))
    .describe('the {{variables}} given for the call (POST /calls, POST /calls/web, an assistant-request answer), as given; {} with gdpr_mode'),
  transfer: CallTransferView.nullable().describe('the call\'s transfer, cold or warm (docs/transfers.md); null when it had none'),
  ...CallObservedFields,
}).meta({ id: 'Call', example: callExample });

/** The earliest instant the databases read: PostgreSQL has no year 0 (`0000-01-01` is out of range there). */
export const EARLIEST_TIME = '0001-01-01T00:00:00Z';
const inTimeRange = (at: string) => !(Date.parse(at) < Date.parse(EARLIEST_TIME));

const QueryTimestamp = z.iso
  .datetime({
    offset: true,
    error: 'must be an ISO 8601 timestamp with a time zone, such as 2025-06-01T00:00:00Z',
  })
  .refine(inTimeRange, `must be at or after ${EARLIEST_TIME}`);

const isCursor = (cursor: string) => {
  try {
    return inTimeRange(decodeCursor(cursor).created_at);
  } catch {
    return false;
  }
};
const NOT_A_CURSOR = 'not a cursor from a previous page (use next_cursor as it was given)';

export const CallListQuery = z
  .strictObject({
    limit: z.coerce.number().int().min(1).max(100).default(50).describe('calls per page, 1 to 100'),
    cursor: wellFormed().max(200).refine(isCursor, NOT_A_CURSOR).optional().describe('next_cursor of the page before'),
    status: z.enum(CALL_STATUSES).optional(),
    type: z.enum(CALL_TYPES).optional(),
    assistant_id: z.uuid().optional(),
    number_id: z.uuid().optional(),
    since: QueryTimestamp.optional().describe(`calls created at or after this time (${EARLIEST_TIME} or later)`),
    until: QueryTimestamp.optional().describe(`calls created before this time (${EARLIEST_TIME} or later)`),
    customer: z
      .string()
      .regex(/^\+?[0-9]{1,15}$/, 'must be digits, optionally after a +, such as 415555 or +1415')
      .optional()
      .describe('a search: calls whose customer number contains these digits (web calls have none)'),
  })
  .refine((q) => !q.since || !q.until || Date.parse(q.since) < Date.parse(q.until), {
    path: ['until'],
    message: 'must be later than since',
  });

/** The default period of `GET /calls/stats`: the last 7 days. */
const STATS_DAYS = 7;

export const CallStatsQuery = z
  .strictObject({
    since: QueryTimestamp.optional().describe(`start of the period (default: ${STATS_DAYS} days before until)`),
    until: QueryTimestamp.optional().describe('end of the period, excluded (default: now)'),
  })
  .refine((q) => !q.since || !q.until || Date.parse(q.since) < Date.parse(q.until), {
    path: ['until'],
    message: 'must be later than since',
  });

export const CallStats = z
  .object({
    since: Timestamp,
    until: Timestamp,
    calls: z.number().int().describe('calls created in the period'),
    by_status: z.record(z.string(), z.number().int()).describe("the period's calls by status"),
    by_ended_reason: z.record(z.string(), z.number().int()).describe("the period's ended calls by ended_reason"),
    mean_duration_seconds: z.number().nullable().describe('mean of ended_at − started_at over the calls that have both; null when none has'),
    live: z.number().int().describe('calls ringing, in progress or being forwarded now, whenever they were created'),
    turn_latency_ms: z
      .object({ p50: z.number(), p95: z.number(), turns: z.number().int() })
      .nullable()
      .describe("p50 and p95 (nearest rank) of the totals of every caller turn of the period's ended calls (each call's turns); null without any"),
  })
  .meta({
    id: 'CallStats',
    example: {
      since: '2025-06-01T00:00:00.000Z',
      until: '2025-06-08T00:00:00.000Z',
      calls: 412,
      by_status: { ended: 409, 'in-progress': 3 },
      by_ended_reason: { 'customer-ended-call': 301, 'assistant-ended-call': 88, 'call-transferred': 17, 'silence-timed-out': 3 },
      mean_duration_seconds: 94.6,
      live: 3,
      turn_latency_ms: { p50: 612, p95: 1180, turns: 2893 },
    },
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
    answered_by: (c.answered_by ?? null) as 'human' | 'machine' | 'unknown' | null,
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
    recording_url: c.recording_ref ?? null,
    variables: c.variables ?? {},
    transfer: c.transfer ?? null,
    trace_id: c.observed?.trace_id ?? null,
    turns: c.observed?.turns ?? [],
    turn_latency: c.observed?.turn_latency ?? null,
    usage: c.observed?.usage ?? null,
    cost: c.observed?.cost ?? null,
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

const Customer = z.strictObject({
  number: E164,
  name: wellFormed().min(1).max(200).optional().describe('said as {{customer.name}}'),
});

export const PlaceCallBody = storable(
  z
    .strictObject({
      number_id: z.uuid().describe("the organization's number the call is made from"),
      customer: Customer.optional().describe('one call'),
      customers: z
        .array(Customer)
        .min(1)
        .max(MAX_CUSTOMERS)
        .optional()
        .describe(`a campaign: one call per customer, 1 to ${MAX_CUSTOMERS}`),
      assistant_id: z.uuid().optional().describe("default: the number's assistant"),
      workflow_id: z.uuid().nullable().optional().describe("default: the number's workflow; null: the assistant alone"),
      variables: Variables.optional(),
    })
    .superRefine((b, ctx) => {
      if (b.customer && b.customers) ctx.addIssue({ code: 'custom', path: ['customers'], message: 'give customer or customers, not both' });
      if (!b.customer && !b.customers) ctx.addIssue({ code: 'custom', path: ['customer'], message: 'required (or customers, for a list)' });
    }),
).meta({ example: placeCallExample });

/** How long a read waits for this process's call-log writes to land first. */
const SETTLE_MS = 2_000;

/** What `POST /calls/web` needs: the call service, and the address browsers reach. */
export interface WebCallDeps {
  calls: Pick<CallService, 'openWeb'>;
  publicUrl: string;
}

export const callRoutes =
  (calls: LoggedCallStore, outbound: OutboundCalls, web: WebCallDeps): FastifyPluginAsyncZod =>
  async (app) => {
    const tags = ['calls'];

    app.post('/calls/web', {
      schema: {
        operationId: 'createWebCall',
        tags,
        summary: 'Start a web call: talk to an assistant from a browser',
        description:
          'Makes a call of type `web_call` that runs the same pipeline, engine, webhooks and report as a phone call, with ' +
          'no phone: the answer\'s `url` is a WebSocket (a one-time token, valid 60 s) that carries 16 kHz 16-bit mono PCM ' +
          'both ways and JSON control messages (docs/web-calls.md). The body is that of `POST /chats`. An unknown assistant ' +
          'or workflow is 400 `Invalid request`; a failed call-start check is 400 `Call rejected` and nothing is made.',
        body: WebCallBody,
        response: {
          201: z.object({
            call: Call,
            url: z.string().describe('ws(s)://…/calls/web/stream?token=…: open it within 60 s; the token works once'),
          }),
          ...errorResponses,
          503: ErrorBody.describe('Unavailable: the server is shutting down, or the database or Redis does not answer (nothing was done; Retry-After)'),
        },
      },
      handler: async (request, reply) => {
        const body = request.body;
        const outcome = await web.calls.openWeb({
          organizationId: request.organization.id,
          assistantId: body.assistant_id,
          workflowId: body.workflow_id ?? null,
          ...(body.variables ? { variables: body.variables } : {}),
        });
        if (outcome.kind === 'invalid') throw invalidRequest(outcome.details);
        if (outcome.kind === 'rejected') {
          throw new ApiError(400, 'Call rejected', 'The call-start checks failed; no call was made.', outcome.details);
        }
        if (outcome.kind === 'busy') throw new ApiError(503, 'Unavailable', 'The server is shutting down; start the call on another.');
        reply.code(201);
        return { call: callView(describeCall(outcome.record)), url: WebTelephony.streamUrl(web.publicUrl, outcome.token) };
      },
    });

    app.post('/calls', {
      schema: {
        operationId: 'placeCall',
        tags,
        summary: 'Place an outbound call, or one per customer of a list',
        description:
          'Queues a call from one of your numbers to `customer` (or one per entry of `customers`, a campaign of up to ' +
          `${MAX_CUSTOMERS}). The assistant and workflow default to the number's. Everything is checked before anything is ` +
          'queued: an unknown number, assistant or workflow, or an account without Twilio credentials, is 400 `Invalid request`; ' +
          'a failed call-start check is 400 `Call rejected` with every reason. Queued calls are dialled within the account\'s ' +
          '`outbound` limits (`max_concurrent_calls`, `calls_per_second`) and survive a restart. With `voicemail_detection` a ' +
          'machine gets `voicemail_message` after the beep; a person hears `speech_config.first_message_outbound` at once.',
        body: PlaceCallBody,
        response: {
          201: z.union([z.object({ call: Call }), z.object({ calls: z.array(Call) })]),
          ...errorResponses,
        },
      },
      handler: async (request, reply) => {
        const body = request.body;
        const customers = body.customers ?? (body.customer ? [body.customer] : []);
        const outcome = await outbound.place(request.organization.id, {
          number_id: body.number_id,
          customers,
          assistant_id: body.assistant_id,
          workflow_id: body.workflow_id,
          variables: body.variables,
        });
        if (outcome.kind === 'invalid') throw invalidRequest(outcome.details);
        if (outcome.kind === 'rejected') {
          throw new ApiError(400, 'Call rejected', 'The call-start checks failed; nothing was dialled.', outcome.details);
        }
        const views = outcome.calls.map((r) => callView(describeCall(r)));
        reply.code(201);
        return body.customers ? { calls: views } : { call: views[0]! };
      },
    });

    app.post('/calls/:id/end', {
      schema: {
        operationId: 'endCall',
        tags,
        summary: 'End a call: queued, ringing or live',
        description:
          'A queued call leaves the queue and a ringing one is canceled at the carrier (`ended_reason` `canceled`); a live ' +
          'call is hung up by the process that runs it (`api-ended-call`; the answer shows it still live, its status-update ' +
          '`ended` follows). 409 `Call ended` when it is already over. 503 when no process took the word within 5 s ' +
          '(withdrawn: nothing was done; try again).',
        params: IdParams,
        response: { 202: z.object({ call: Call }), 409: ErrorBody.describe('Call ended'), ...errorResponses },
      },
      handler: async (request, reply) => {
        const outcome = await outbound.end(request.organization.id, request.params.id);
        if (outcome.kind === 'not-found') throw notFound('call', request.params.id);
        if (outcome.kind === 'not-taken') throw notTaken();
        if (outcome.kind === 'already-ended') {
          throw new ApiError(409, 'Call ended', `The call ended (${outcome.call.ended_reason ?? 'unknown'}) at ${outcome.call.ended_at ?? 'an unknown time'}.`);
        }
        reply.code(202);
        return { call: callView(describeCall(outcome.call)) };
      },
    });

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
        operationId: 'listCalls',
        tags,
        summary: "The organization's calls, newest first, a page at a time",
        description:
          'Every call kept in the call log (CALL_RETENTION_DAYS), newest first. Pass `next_cursor` as `cursor` for the next page; ' +
          'it is null on the last page. Filters combine; `since` and `until` bound `created_at`; `customer` finds the calls ' +
          'whose customer number contains its digits.',
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

    app.get('/calls/stats', {
      schema: {
        operationId: 'getCallStats',
        tags,
        summary: "The organization's calls over a period: how many, by status and ended reason, mean duration; live calls now",
        description: `The period is [since, until) of \`created_at\`; by default the last ${STATS_DAYS} days. \`live\` counts every call not over now.`,
        querystring: CallStatsQuery,
        response: { 200: z.object({ stats: CallStats }), ...errorResponses },
      },
      handler: async (request) => {
        const until = request.query.until ? new Date(request.query.until) : new Date();
        const since = request.query.since ? new Date(request.query.since) : new Date(until.getTime() - STATS_DAYS * 86_400_000);
        if (!(since < until)) throw invalidRequest(['query.since: must be earlier than until (now, when until is not given)']);
        await calls.settled(SETTLE_MS);
        const stats = await calls.callLog.stats(request.organization.id, { since: since.toISOString(), until: until.toISOString() });
        return { stats: { since: since.toISOString(), until: until.toISOString(), ...stats } };
      },
    });

    app.get('/calls/:id', {
      schema: {
        operationId: 'getCall',
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
