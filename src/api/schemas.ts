/**
 * Request and response schemas of the REST API, from the engine's schemas. Responses are
 * documented (OpenAPI) but serialized as they are, without a second validation.
 */
import { z } from 'zod';
import {
  E164,
  HttpUrl,
  LIMITS,
  WebhookEvents,
  WorkflowDefinition,
  assistantFields,
} from '../../engine/schema.js';
import { wellFormed } from '../../engine/text.js';
import { AssistantCreate, AssistantPatch } from '../../engine/assistant.js';
import { storable } from './storable.js';
import { sipAddressRange, sipProxyProblem } from '../telephony/sip/addresses.js';
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

export const WorkflowCreateBody = storable(
  z.strictObject({
    name: WorkflowName,
    definition: DefinitionInput,
    is_active: z.boolean().optional(),
  }),
).meta({ example: workflowCreateExample });

export const WorkflowPatchBody = storable(
  z.strictObject({
    name: WorkflowName.optional(),
    definition: DefinitionInput.optional(),
    is_active: z.boolean().optional(),
  }),
);

// named schemas (`id`) are components of the OpenAPI document, and types of a generated client
export const Workflow = z
  .object({
    id: z.uuid(),
    name: z.string(),
    is_active: z.boolean(),
    definition: WorkflowDefinition,
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
  provider: z.enum(['twilio', 'sip']).optional().describe('who carries its calls: Twilio Media Streams (default) or a SIP trunk (DECISIONS 15)'),
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
  provider: z.enum(['twilio', 'sip']),
  assistant_id: z.uuid().nullable(),
  workflow_id: z.uuid().nullable(),
  webhook: WebhookSettings.nullable(),
  created_at: Timestamp,
  updated_at: Timestamp,
}).meta({ id: 'PhoneNumber', example: numberExample });

/** An address or a CIDR range (`203.0.113.0/24`, `2001:db8::/32`). */
const AddressOrRange = wellFormed().max(64).refine((v) => sipAddressRange(v) !== null, {
  error: 'must be an IPv4 or IPv6 address, or a CIDR range such as 203.0.113.0/24',
});
const SipSecret = wellFormed().min(1).max(128).regex(/^[^"\\\r\n]+$/, 'must not contain quotes, backslashes or line breaks');
const SipUser = wellFormed().min(1).max(64).regex(/^[A-Za-z0-9_.!~*'()&=+$,;?/-]+$/, 'must be a SIP user name (letters, digits and _.!~*\'()&=+$,;?/-)');

/** A SIP trunk's settings (DECISIONS 15); passwords are write-only (omitted with the same username, the one kept is kept). */
export const SipSettingsInput = z.strictObject({
  inbound: z
    .strictObject({
      allowed_addresses: z.array(AddressOrRange).max(100).default([]).describe('sources whose INVITEs are taken without credentials'),
      username: SipUser.optional().describe('digest credentials an INVITE from anywhere else must give'),
      password: SipSecret.optional(),
    })
    .nullable()
    .optional(),
  outbound: z
    .strictObject({
      proxy: wellFormed().max(256).refine((v) => sipProxyProblem(v) === null, {
        error: 'must be sip:host[:port][;transport=udp|tcp], e.g. sip:sip.telnyx.com or sip:192.0.2.10:5060;transport=tcp',
      }),
      username: SipUser.optional(),
      password: SipSecret.optional(),
      caller_id: E164.optional().describe('the From number of calls placed through the trunk (default: the number calling)'),
    })
    .nullable()
    .optional(),
});

export const AccountPatchBody = storable(
  z.strictObject({
    webhook: WebhookSettingsInput.nullable().optional(),
    telephony: z
      .strictObject({
        twilio: z
          .strictObject({
            account_sid: wellFormed().regex(/^AC[0-9a-fA-F]{32}$/, 'must be a Twilio account SID (AC + 32 hex digits)'),
            auth_token: wellFormed().min(8).max(256),
          })
          .nullable()
          .optional(),
      })
      .optional(),
    sip: SipSettingsInput.nullable().optional(),
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
  telephony: z.object({
    twilio: z.object({ account_sid: z.string(), auth_token: z.string() }).nullable(),
  }),
  sip: z
    .object({
      inbound: z.object({ allowed_addresses: z.array(z.string()), username: z.string().nullable(), password_set: z.boolean() }).nullable(),
      outbound: z
        .object({ proxy: z.string(), username: z.string().nullable(), password_set: z.boolean(), caller_id: z.string().nullable() })
        .nullable(),
    })
    .describe('the SIP trunk (DECISIONS 15); passwords are never shown'),
  outbound: OutboundLimits.describe('outbound dialling limits, defaults filled in'),
}).meta({ id: 'Account', example: accountExample });

export const errorResponses = {
  400: ErrorBody.meta({ description: 'Invalid request', example: errorExamples[400] }),
  401: ErrorBody.meta({ description: 'Invalid API key', example: errorExamples[401] }),
  404: ErrorBody.meta({ description: 'Not found', example: errorExamples[404] }),
  429: ErrorBody.meta({ description: 'Too many requests', example: errorExamples[429] }),
  503: ErrorBody.meta({ description: 'Unavailable: the database or Redis does not answer; nothing was done (Retry-After says when to try again; docs/outages.md)', example: errorExamples[503] }),
};
