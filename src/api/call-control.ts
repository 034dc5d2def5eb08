/**
 * `POST /calls/{id}/control`: live control of a call in progress (DECISIONS 16). The body is one
 * control (say, add-message, goto, transfer, end); it reaches the process that runs the call
 * (src/calls/control.ts `deliver`) and is applied there (src/calls/live-control.ts), or the request
 * fails having done nothing. See docs/control.md.
 */
import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { E164, LIMITS, TRANSFER_MODES, WARM_ONLY_MESSAGE, WARM_TRANSFER_FIELDS, WarmTransferFields } from '../../engine/schema.js';
import { wellFormed } from '../../engine/text.js';
import { describeCall, type LoggedCallStore } from '../calls/call-log.js';
import type { CallControl } from '../calls/control.js';
import type { LiveControl } from '../calls/live-control.js';
import type { CallRecord } from '../calls/store.js';
import { Call, callView } from './calls.js';
import { ApiError, invalidRequest, notFound, notTaken, RequestValidationError } from './errors.js';
import { errorResponses, ErrorBody, IdParams } from './schemas.js';
import { storable } from './storable.js';

const Said = wellFormed()
  .max(LIMITS.textLength)
  .refine((t) => t.trim() !== '', 'must not be empty');

const controlExample = { type: 'say', text: 'A specialist will join you in a moment.', interrupt: false };

export const ControlBody = storable(
  z
    .discriminatedUnion(
      'type',
      [
        z
          .strictObject({
            type: z.literal('say'),
            text: Said.describe('said in the assistant\'s voice'),
            interrupt: z
              .boolean()
              .optional()
              .describe('true: said at once, cutting what plays; false (default): after the line that plays'),
          })
          .describe('Say a line'),
        z
          .strictObject({
            type: z.literal('add-message'),
            role: z.enum(['system', 'user']),
            content: Said.describe("in the model's context from its next turn; not said"),
          })
          .describe("Add a message to the model's context"),
        z
          .strictObject({
            type: z.literal('goto'),
            node_id: wellFormed().describe("a node of the call's workflow (`assistant` for a call without one)"),
          })
          .describe('Move the workflow to a node; it says its first_line'),
        z
          .strictObject({
            type: z.literal('transfer'),
            destination: E164,
            mode: z
              .enum(TRANSFER_MODES)
              .optional()
              .describe('cold (default): the call moves at once. warm: the operator is dialled, told and joined, as by a warm transfer node'),
            // the warm fields are a warm transfer node's: the same bounds and messages
            operator_message: WarmTransferFields.operator_message.describe('warm only: what the operator hears; `{{summary}}` is the model\'s summary (default "Incoming transfer: {{summary}}")'),
            hold_message: WarmTransferFields.hold_message.describe('warm only: said to the caller while the operator is dialled'),
            ring_timeout_seconds: WarmTransferFields.ring_timeout_seconds.describe('warm only: 5 to 120; how long the operator\'s phone rings (default 30)'),
            require_acceptance: WarmTransferFields.require_acceptance.describe('warm only: the operator takes the call by pressing 1 (default false)'),
          })
          .describe('Transfer the call'),
        z
          .strictObject({
            type: z.literal('end'),
            message: Said.optional().describe('said first (what plays is cut); then the call ends `api-ended-call`'),
          })
          .describe('End the call'),
      ],
      { error: 'must be one of say, add-message, goto, transfer, end' },
    )
    .superRefine((body, ctx) => {
      if (body.type !== 'transfer' || body.mode === 'warm') return;
      for (const key of WARM_TRANSFER_FIELDS) {
        if (body[key] !== undefined) ctx.addIssue({ code: 'custom', path: [key], message: WARM_ONLY_MESSAGE });
      }
    }),
).meta({ id: 'CallControl', example: controlExample });

/** 409 `Call not live`: the call is not `in-progress` (or can take no control right now). */
const notLive = (message: string) => new ApiError(409, 'Call not live', message);

/** The node ids of the workflow a call runs (`assistant`: the assistant alone). */
function nodeIdsOf(record: CallRecord): string[] {
  const nodes = (record.definition as { nodes?: { id?: unknown }[] } | null)?.nodes;
  return nodes ? nodes.map((n) => String(n.id)) : ['assistant'];
}

/** A control the call's record already shows to be wrong, before anything is sent. */
function problemsOn(record: CallRecord, control: LiveControl): string[] {
  if (control.type === 'goto') {
    const ids = nodeIdsOf(record);
    if (!ids.includes(control.node_id)) return [`node_id: the workflow has no node "${control.node_id}" (it has: ${ids.join(', ')})`];
  }
  return [];
}

export interface CallControlDeps {
  calls: LoggedCallStore;
  control: CallControl;
  /** Sessions are shared between processes (Redis): one a restart lost may still run in its process. */
  sharedSessions: boolean;
}

export const callControlRoutes =
  (deps: CallControlDeps): FastifyPluginAsyncZod =>
  async (app) => {
    app.post('/calls/:id/control', {
      // read as a workflow is (the value named in the details): a warm field is told as a transfer node's would be
      validatorCompiler: ({ schema, httpPart }) => (data) => {
        const result = (schema as unknown as z.ZodType).safeParse(data, { reportInput: true });
        return result.success ? { value: result.data } : { error: new RequestValidationError(httpPart ?? 'body', result.error.issues) };
      },
      schema: {
        operationId: 'controlCall',
        tags: ['calls'],
        summary: 'Control a live call: say, add a message, go to a node, transfer, end',
        description:
          'One control for a call `in-progress`, applied by the process that runs it before the answer: `say` (after the ' +
          'line that plays, or at once with `interrupt`), `add-message` (in the model\'s context from its next turn, not ' +
          'said), `goto` (the workflow moves to the node and says its first_line), `transfer` (cold, or warm as a warm ' +
          'transfer node: the operator dialled, told and joined; not completed, the call goes on in its node), `end` (its `message` ' +
          'said, then `api-ended-call`). What a control says or adds is in the call\'s messages with `source: "control"`. ' +
          '409 `Call not live` unless the call is in progress (or while it says its closing line, or while a warm transfer is ' +
          'under way for a `goto` or a warm `transfer`); a node the workflow ' +
          'does not have is 400; 503 when no process took the control within 5 s (nothing was done). docs/control.md.',
        params: IdParams,
        body: ControlBody,
        response: {
          202: z.object({ call: Call }).describe('Applied: the call as it is now'),
          409: ErrorBody.describe('Call not live'),
          ...errorResponses,
          503: ErrorBody.describe(
            'Unavailable: Redis did not take the control, or no process took it within 5 s; nothing was done (Retry-After)',
          ),
        },
      },
      handler: async (request, reply) => {
        const orgId = request.organization.id;
        const id = request.params.id;
        const control = request.body as LiveControl;
        // the call's session has its status and its workflow; the log knows every call
        const session = await deps.calls.get(id);
        const record = session && session.organization_id === orgId ? session : null;
        if (record) {
          if (record.status !== 'in-progress') throw notLive(`The call is ${record.status}; only a call in progress takes controls.`);
          const problems = problemsOn(record, control);
          if (problems.length > 0) throw invalidRequest(problems);
        } else {
          const logged = await deps.calls.callLog.get(orgId, id);
          if (!logged) throw notFound('call', id);
          // its session lost in a Redis restart, its process may still run it: the word goes there
          if (logged.status !== 'in-progress' || !deps.sharedSessions) {
            throw notLive(`The call is ${logged.status === 'in-progress' ? 'no longer running' : logged.status}; only a call in progress takes controls.`);
          }
        }
        const delivered = await deps.control.deliver(id, { kind: 'control', control });
        switch (delivered.kind) {
          case 'not-taken':
            throw notTaken();
          case 'not-live':
            throw notLive(`The call cannot take controls: ${delivered.message}.`);
          case 'invalid':
            throw invalidRequest(delivered.details);
          case 'applied': {
            reply.code(202);
            if (delivered.call) return { call: callView(delivered.call) };
            const now = (await deps.calls.get(id).catch(() => null)) ?? record;
            if (now) return { call: callView(describeCall(now)) };
            const logged = await deps.calls.callLog.get(orgId, id);
            return { call: callView(logged!) };
          }
        }
      },
    });
  };
