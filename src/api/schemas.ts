/**
 * Request and response schemas of the REST API, from the engine's schemas. Responses are
 * documented (OpenAPI) but serialized as they are, without a second validation.
 */
import { PricingPatch, PricingTable } from '../observability/pricing.js';
import { z } from 'zod';
import {
  E164,
  HttpUrl,
  LIMITS,
  NODE_ID_PATTERN,
  WebhookEvents,
  WorkflowDefinition,
  assistantFields,
} from '../../engine/schema.js';
import { wellFormed } from '../../engine/text.js';
import { AssistantCreate, AssistantPatch } from '../../engine/assistant.js';
import { storable } from './storable.js';
import { accountCarriers, numberProviderDescription, numberProviders } from '../telephony/registry.js';
import {
  accountExample,
  assistantCreateExample,
  assistantExample,
  errorExamples,
  numberCreateExample,
  numberExample,
  workflowCreateExample,
  workflowExample,
  workflowSummaryExample,
} from './examples.js';

const definitionJsonSchema = (() => {
  const js = z.toJSONSchema(WorkflowDefinition, {
    target: 'openapi-3.0',
    io: 'input',
    unrepresentable: 'any',
  }) as Record<string, unknown>;
  delete js.$schema;
  return js;
})();

/**
 * The definition is checked by the engine's validator, which reports every problem at once
 * (graph and catalog rules too), so the request schema takes any value and documents the shape.
 */
export const DefinitionInput = z.unknown().meta({
  ...definitionJsonSchema,
  description:
    'Workflow definition (graph of nodes and edges); every problem is reported in one 400 response.',
});

export const IdParams = z.strictObject({ id: z.uuid() });

export const ErrorBody = z.object({
  error: z.string(),
  message: z.string().optional(),
  details: z.array(z.string()).optional(),
});

/** One entry of a call's or chat's `errors` (src/errors.ts; docs/errors.md). */
export const CallErrorEntry = z
  .object({
    code: z.string().describe('stable code to match on, e.g. PROVIDER_TIMEOUT, TWILIO_REST_ERROR, CALL_INTERNAL_ERROR (docs/errors.md); UNKNOWN for an entry kept before entries had codes'),
    message: z.string().describe('what went wrong, for people, e.g. "elevenlabs: HTTP 401 …" (the sentence `errors` held before it had codes)'),
    provider: z.string().optional().describe('the vendor or carrier that failed (deepgram, openai-tts, twilio, sip, …), when one did'),
  })
  .meta({ id: 'CallError', example: { code: 'PROVIDER_AUTH', message: 'elevenlabs: HTTP 401: invalid API key', provider: 'elevenlabs' } });

const Timestamp = z.string().describe('ISO 8601 UTC timestamp');
const WorkflowName = wellFormed().min(1).max(LIMITS.nameLength);

const Coordinate = z.number().min(-1_000_000).max(1_000_000);

/** Where the dashboard draws each node (DECISIONS 19): kept beside the definition, never in it. */
export const WorkflowLayout = z
  .record(
    z.string().regex(NODE_ID_PATTERN, 'must be the id of a node of the definition'),
    z.strictObject({ x: Coordinate, y: Coordinate }),
  )
  .describe(
    'where the dashboard draws each node, by node id: {"<node id>": {"x": number, "y": number}} (the centre, in the ' +
      "editor's units). Not part of the definition: calls never read it. Entries of nodes the definition does not have " +
      'are refused on write, and dropped when a new definition removes their node',
  );

export const WorkflowCreateBody = storable(
  z.strictObject({
    name: WorkflowName,
    definition: DefinitionInput,
    is_active: z.boolean().optional(),
    layout: WorkflowLayout.optional(),
  }),
).meta({ example: workflowCreateExample });

export const WorkflowPatchBody = storable(
  z.strictObject({
    name: WorkflowName.optional(),
    definition: DefinitionInput.optional(),
    is_active: z.boolean().optional(),
    layout: WorkflowLayout.optional().describe('replaces the whole layout; nodes left out are drawn where the dashboard places them'),
  }),
);

// named schemas (`id`) are components of the OpenAPI document, and types of a generated client
export const Workflow = z
  .object({
    id: z.uuid(),
    name: z.string(),
    is_active: z.boolean(),
    definition: WorkflowDefinition,
    layout: WorkflowLayout,
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .meta({ id: 'Workflow', example: workflowExample });

export const WorkflowSummary = z.object({
  id: z.uuid(),
  name: z.string(),
  is_active: z.boolean(),
  entry_node: z.string(),
  node_count: z.number().int(),
  edge_count: z.number().int(),
  created_at: Timestamp,
  updated_at: Timestamp,
}).meta({ id: 'WorkflowSummary', example: workflowSummaryExample });

export const AssistantCreateBody = storable(AssistantCreate).meta({ example: assistantCreateExample });
export const AssistantPatchBody = storable(AssistantPatch);

export const Assistant = z.object({
  id: z.uuid(),
  ...Object.fromEntries(Object.entries(assistantFields).map(([k, s]) => [k, s.nullable()])),
  webhook_secret: z.string().nullable().describe('masked (whsec_…abcd) except in the response that generated it'),
  created_at: Timestamp,
  updated_at: Timestamp,
}).meta({ id: 'Assistant', example: assistantExample });

export const WebhookSettingsInput = z.strictObject({
  url: HttpUrl,
  secret: wellFormed().min(8).max(512).optional().describe('generated (whsec_...) when omitted'),
  events: WebhookEvents.optional().describe('default: all four event types'),
});

export const WebhookSettings = z.object({
  url: z.string().describe('credentials in it shown masked (https://user:****@host/...); sent back as shown, they are kept'),
  secret: z.string().nullable(),
  events: z.array(z.string()),
});

const NumberFields = z.strictObject({
  number: E164,
  name: wellFormed().max(LIMITS.nameLength).nullable().optional(),
  provider: z.enum(numberProviders()).optional().describe(numberProviderDescription()),
  assistant_id: z.uuid().nullable().optional(),
  workflow_id: z.uuid().nullable().optional(),
  webhook: WebhookSettingsInput.nullable().optional(),
});

export const NumberCreateBody = storable(NumberFields).meta({ example: numberCreateExample });
export const NumberPatchBody = storable(NumberFields.partial());

export const PhoneNumber = z.object({
  id: z.uuid(),
  number: z.string(),
  name: z.string().nullable(),
  provider: z.enum(numberProviders()),
  assistant_id: z.uuid().nullable(),
  workflow_id: z.uuid().nullable(),
  webhook: WebhookSettings.nullable(),
  created_at: Timestamp,
  updated_at: Timestamp,
}).meta({ id: 'PhoneNumber', example: numberExample });

export { SipSettingsInput } from '../telephony/sip/settings.js';

type CarrierAccount = ReturnType<typeof accountCarriers>[number]['account'];

/**
 * The carriers' settings in the account's body (src/telephony/registry.ts), each at its path:
 * `telephony.twilio`, `sip`, … `part` gives one carrier's value at its path (a schema, an
 * example); a group (`telephony`) is made of its members by `group`.
 */
function carrierFields<T>(part: (account: CarrierAccount) => T, group: (shape: Record<string, T>) => T): Record<string, T> {
  const fields: Record<string, T> = {};
  const groups: Record<string, Record<string, T>> = {};
  const order: string[] = [];
  for (const { account } of accountCarriers()) {
    const [first, second] = account.path;
    if (second === undefined) {
      fields[first] = part(account);
      order.push(first);
    } else {
      if (!groups[first]) {
        groups[first] = {};
        order.push(first);
      }
      groups[first][second] = part(account);
    }
  }
  return Object.fromEntries(order.map((key) => [key, groups[key] ? group(groups[key]) : fields[key]!]));
}

/** Values at the carriers' paths, a group an object of its members. */
const carrierValues = (part: (account: CarrierAccount) => unknown) => carrierFields<unknown>(part, (shape) => shape);

export const AccountPatchBody = storable(
  z.strictObject({
    webhook: WebhookSettingsInput.nullable().optional(),
    // each carrier's settings (null clears them), where it declares them
    ...carrierFields<z.ZodType>(
      (account) => account.input.nullable().optional(),
      (shape) => z.strictObject(shape).optional(),
    ),
    outbound: z
      .strictObject({
        max_concurrent_calls: z
          .number()
          .int()
          .min(1)
          .max(1000)
          .optional()
          .describe('live outbound calls of the organization never exceed this (default 10)'),
        calls_per_second: z
          .number()
          .gt(0)
          .max(100)
          .optional()
          .describe('dialling never goes faster than this; fractions allowed, 0.5 is one call every 2 s (default 1)'),
      })
      .nullable()
      .optional()
      .describe('outbound dialling limits (DECISIONS 11); null restores the defaults'),
    pricing: PricingPatch.nullable()
      .optional()
      .describe('prices for calls\' cost (docs/usage.md): entries given replace the shipped ones, an entry set to null goes back to it; null restores them all'),
  }),
);

export const OutboundLimits = z.object({
  max_concurrent_calls: z.number().int(),
  calls_per_second: z.number(),
});

export const Account = z.object({
  id: z.uuid(),
  name: z.string(),
  webhook: WebhookSettings.nullable(),
  ...carrierFields<z.ZodType>(
    (account) => account.view,
    (shape) => z.object(shape),
  ),
  outbound: OutboundLimits.describe('outbound dialling limits, defaults filled in'),
  pricing: PricingTable.describe("the prices calls' cost is computed at: the shipped table, with the date its prices were read, the organization's own applied"),
}).meta({
  id: 'Account',
  example: {
    id: accountExample.id,
    name: accountExample.name,
    webhook: accountExample.webhook,
    ...carrierValues((account) => account.example),
    outbound: accountExample.outbound,
    pricing: accountExample.pricing,
  },
});

export const errorResponses = {
  400: ErrorBody.meta({ description: 'Invalid request', example: errorExamples[400] }),
  401: ErrorBody.meta({ description: 'Invalid API key', example: errorExamples[401] }),
  404: ErrorBody.meta({ description: 'Not found', example: errorExamples[404] }),
  429: ErrorBody.meta({ description: 'Too many requests', example: errorExamples[429] }),
  503: ErrorBody.meta({ description: 'Unavailable: the database or Redis does not answer; nothing was done (Retry-After says when to try again; docs/outages.md)', example: errorExamples[503] }),
};
