/** The OpenAPI shapes of what is observed of a call (DECISIONS 21; src/observability/). */
import { z } from 'zod';

const ms = (what: string) => z.number().nullable().describe(`${what} (ms); null where the call cannot know it`);

export const CallTurnSchema = z.object({
  node_id: z.string().nullable(),
  at: z.string().describe("when the caller's turn ended (ISO 8601)"),
  latency: z.object({
    stt: ms("the end of the caller's speech (by the STT's word timings) to its final transcript"),
    endpointing: ms('the final transcript to the end of the turn (the configured wait)'),
    llm_first_token: ms("the model's request to its first token"),
    tts_first_audio: ms("the turn's first TTS request to its first audio"),
    service: z.number().describe("Switchboard's own share of total: everything but waiting for providers (ms)"),
    total: z.number().describe("the end of the caller's turn to the reply's first audio frame (ms)"),
  }),
});

const row = { provider: z.string(), model: z.string().nullable() };
export const CallUsageSchema = z.object({
  stt: z.array(z.object({ ...row, seconds: z.number().describe('caller audio sent to the model') })),
  llm: z.array(z.object({ ...row, input_tokens: z.number(), output_tokens: z.number() }).describe("as the vendor's usage fields count them")),
  tts: z.array(z.object({ ...row, characters: z.number() })),
  realtime: z.array(z.object({ ...row, input_audio_seconds: z.number(), output_audio_seconds: z.number() })),
  carrier: z.array(z.object({ provider: z.string().describe('twilio, sip or web'), direction: z.enum(['inbound', 'outbound']), minutes: z.number() })),
});

export const CallCostSchema = z.object({
  currency: z.literal('USD'),
  total: z.number(),
  breakdown: z.array(
    z.object({
      kind: z.enum(['stt', 'llm', 'tts', 'realtime', 'carrier']),
      provider: z.string(),
      model: z.string().nullable().describe('the model; for a carrier, the direction'),
      quantity: z.number(),
      unit: z.string().describe('minute, million_input_tokens, million_output_tokens, million_characters, minute_input_audio, minute_output_audio'),
      unit_price: z.number().nullable().describe('null: no price for it in the table (it counts nothing in total)'),
      amount: z.number(),
    }),
  ),
  prices_read_on: z.string().describe('when the shipped prices were read from the vendors'),
});

/** The call's fields from its observation: null until the call has ended (and for calls logged before they were kept). */
export const CallObservedFields = {
  trace_id: z.string().nullable().describe("the call's OpenTelemetry trace id (32 hex digits); null when tracing is off or before the call ended"),
  turns: z.array(CallTurnSchema).describe("each caller turn's latency split; empty until the call ended"),
  turn_latency: z.object({ p50: z.number(), p95: z.number() }).nullable().describe("p50 and p95 of the turns' totals (ms)"),
  usage: CallUsageSchema.nullable().describe('what the call used, by provider and model; null until it ended'),
  cost: CallCostSchema.nullable().describe("what the call cost at the organization's prices (GET /account pricing); null until it ended"),
};
