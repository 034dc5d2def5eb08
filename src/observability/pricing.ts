/**
 * What a call cost (DECISIONS 21): its usage (./usage.ts) at the prices of a table shipped here,
 * with the date the vendors' public price pages were read, which an organization may override
 * (`PATCH /account {"pricing": …}`). Each price is keyed by kind and `provider/model` (carriers:
 * `transport/direction`) and names its unit in its field: `per_minute`,
 * `per_million_input_tokens`, `per_million_output_tokens`, `per_million_characters`,
 * `per_minute_input_audio`, `per_minute_output_audio`. A model the table has no price for is in
 * the breakdown with `unit_price: null` (and counts nothing), so that it shows rather than hides.
 */
import { z } from 'zod';
import type { CallUsage } from './usage.js';

export const PRICES_READ_ON = '2026-11-27';

const price = z.number().min(0).max(1_000_000);
export const SttPrice = z.strictObject({ per_minute: price });
export const LlmPrice = z.strictObject({ per_million_input_tokens: price, per_million_output_tokens: price });
export const TtsPrice = z.strictObject({ per_million_characters: price });
export const RealtimePrice = z.strictObject({ per_minute_input_audio: price, per_minute_output_audio: price });
export const CarrierPrice = z.strictObject({ per_minute: price });

export interface PriceTable {
  currency: 'USD';
  read_on: string;
  stt: Record<string, z.infer<typeof SttPrice>>;
  llm: Record<string, z.infer<typeof LlmPrice>>;
  tts: Record<string, z.infer<typeof TtsPrice>>;
  realtime: Record<string, z.infer<typeof RealtimePrice>>;
  carrier: Record<string, z.infer<typeof CarrierPrice>>;
}
export type PriceKind = 'stt' | 'llm' | 'tts' | 'realtime' | 'carrier';
export const PRICE_KINDS: readonly PriceKind[] = ['stt', 'llm', 'tts', 'realtime', 'carrier'];

const llm = (input: number, output: number) => ({ per_million_input_tokens: input, per_million_output_tokens: output });

/** The shipped prices, USD, as the vendors' public pages listed them on `PRICES_READ_ON` (pay as you go). */
export const DEFAULT_PRICES: PriceTable = {
  currency: 'USD',
  read_on: PRICES_READ_ON,
  stt: {
    'deepgram/nova-3': { per_minute: 0.0077 },
    'deepgram/nova-2': { per_minute: 0.0058 },
    'openai/gpt-4o-transcribe': { per_minute: 0.006 },
    'openai/gpt-4o-mini-transcribe': { per_minute: 0.003 },
    'sandbox/sandbox': { per_minute: 0 },
  },
  llm: {
    'openai/gpt-4o': llm(2.5, 10),
    'openai/gpt-4o-mini': llm(0.15, 0.6),
    'openai/gpt-4.1': llm(2, 8),
    'openai/gpt-4.1-mini': llm(0.4, 1.6),
    'openai/gpt-4.1-nano': llm(0.1, 0.4),
    'openai/gpt-5': llm(1.25, 10),
    'openai/gpt-5-mini': llm(0.25, 2),
    'openai/gpt-5-nano': llm(0.05, 0.4),
    'anthropic/claude-opus-4-5': llm(5, 25),
    'anthropic/claude-sonnet-4-5': llm(3, 15),
    'anthropic/claude-haiku-4-5': llm(1, 5),
    'google/gemini-2.5-pro': llm(1.25, 10),
    'google/gemini-2.5-flash': llm(0.3, 2.5),
    'google/gemini-2.5-flash-lite': llm(0.1, 0.4),
    'sandbox/sandbox': llm(0, 0),
  },
  tts: {
    'elevenlabs/eleven_flash_v2_5': { per_million_characters: 50 },
    'elevenlabs/eleven_turbo_v2_5': { per_million_characters: 50 },
    'elevenlabs/eleven_flash_v2': { per_million_characters: 50 },
    'elevenlabs/eleven_turbo_v2': { per_million_characters: 50 },
    'elevenlabs/eleven_multilingual_v2': { per_million_characters: 100 },
    'openai/tts-1': { per_million_characters: 15 },
    'openai/tts-1-hd': { per_million_characters: 30 },
    'openai/gpt-4o-mini-tts': { per_million_characters: 15 },
    'deepgram/aura-2': { per_million_characters: 30 },
    'sandbox/sandbox': { per_million_characters: 0 },
  },
  realtime: {
    'openai-realtime/gpt-realtime': { per_minute_input_audio: 0.032, per_minute_output_audio: 0.064 },
    'openai-realtime/gpt-realtime-mini': { per_minute_input_audio: 0.01, per_minute_output_audio: 0.02 },
    'sandbox-realtime/sandbox': { per_minute_input_audio: 0, per_minute_output_audio: 0 },
  },
  carrier: {
    'twilio/inbound': { per_minute: 0.0085 },
    'twilio/outbound': { per_minute: 0.014 },
    'sip/inbound': { per_minute: 0 },
    'sip/outbound': { per_minute: 0 },
    'web/inbound': { per_minute: 0 },
  },
};

/** The whole table, as `GET /account` shows it. */
export const PricingTable = z.object({
  currency: z.literal('USD'),
  read_on: z.string().describe('when the shipped prices were read from the vendors\' public pages'),
  stt: z.record(z.string(), SttPrice),
  llm: z.record(z.string(), LlmPrice),
  tts: z.record(z.string(), TtsPrice),
  realtime: z.record(z.string(), RealtimePrice),
  carrier: z.record(z.string(), CarrierPrice),
});

/** An organization's prices over the shipped ones: each entry given replaces the shipped entry; `null` removes an override. */
export type PriceOverrides = Partial<Record<PriceKind, Record<string, Record<string, number> | null>>>;

const key = z.string().min(1).max(200).regex(/^[A-Za-z0-9._:-]+\/[A-Za-z0-9._:*-]+$/, 'must be "provider/model" (carriers: "transport/direction")');
/** `PATCH /account {"pricing": …}`: the table's shape, any of its entries. */
export const PricingPatch = z
  .strictObject({
    currency: z.literal('USD').optional().describe('prices are in US dollars'),
    read_on: z.string().optional().describe('ignored: the date the shipped prices were read'),
    stt: z.record(key, SttPrice.nullable()).optional(),
    llm: z.record(key, LlmPrice.nullable()).optional(),
    tts: z.record(key, TtsPrice.nullable()).optional(),
    realtime: z.record(key, RealtimePrice.nullable()).optional(),
    carrier: z.record(key, CarrierPrice.nullable()).optional(),
  })
  .describe('prices to use for this organization, by kind and "provider/model"; an entry set to null goes back to the shipped price');

/** The stored overrides with a patch applied (entries replaced, nulls removed). */
export function applyPricingPatch(current: PriceOverrides | null, patch: z.infer<typeof PricingPatch>): PriceOverrides {
  const next: PriceOverrides = structuredClone(current ?? {});
  for (const kind of PRICE_KINDS) {
    const entries = patch[kind];
    if (!entries) continue;
    const table = (next[kind] ??= {});
    for (const [k, v] of Object.entries(entries)) {
      if (v === null) delete table[k];
      else table[k] = v;
    }
  }
  return next;
}

/** The whole table an organization prices with: the shipped prices, its overrides applied. */
export function pricingFor(overrides: PriceOverrides | null | undefined): PriceTable {
  const table = structuredClone(DEFAULT_PRICES);
  for (const kind of PRICE_KINDS) {
    for (const [k, v] of Object.entries(overrides?.[kind] ?? {})) {
      if (v) (table[kind] as Record<string, unknown>)[k] = v;
    }
  }
  return table;
}

export interface CostLine {
  kind: PriceKind;
  provider: string;
  model: string | null;
  quantity: number;
  unit: 'minute' | 'million_input_tokens' | 'million_output_tokens' | 'million_characters' | 'minute_input_audio' | 'minute_output_audio';
  /** null: the table has no price for it (it counts nothing in `total`). */
  unit_price: number | null;
  amount: number;
}

export interface CallCost {
  currency: 'USD';
  total: number;
  breakdown: CostLine[];
  /** When the shipped prices were read (an organization's own prices may differ). */
  prices_read_on: string;
}

const money = (n: number) => Math.round(n * 1_000_000) / 1_000_000;

/** The cost of `usage` at `prices`. */
export function costOf(usage: CallUsage, prices: PriceTable): CallCost {
  const lines: CostLine[] = [];
  const line = (kind: PriceKind, provider: string, model: string | null, quantity: number, unit: CostLine['unit'], unitPrice: number | null) => {
    if (quantity === 0 && unitPrice !== null) return;
    lines.push({ kind, provider, model, quantity, unit, unit_price: unitPrice, amount: unitPrice === null ? 0 : money(quantity * unitPrice) });
  };
  const find = <T>(table: Record<string, T>, provider: string, model: string | null): T | null =>
    table[`${provider}/${model ?? ''}`] ?? table[`${provider}/*`] ?? null;
  for (const u of usage.stt) line('stt', u.provider, u.model, u.seconds / 60, 'minute', find(prices.stt, u.provider, u.model)?.per_minute ?? null);
  for (const u of usage.llm) {
    const p = find(prices.llm, u.provider, u.model);
    line('llm', u.provider, u.model, u.input_tokens / 1e6, 'million_input_tokens', p?.per_million_input_tokens ?? null);
    line('llm', u.provider, u.model, u.output_tokens / 1e6, 'million_output_tokens', p?.per_million_output_tokens ?? null);
  }
  for (const u of usage.tts) line('tts', u.provider, u.model, u.characters / 1e6, 'million_characters', find(prices.tts, u.provider, u.model)?.per_million_characters ?? null);
  for (const u of usage.realtime) {
    const p = find(prices.realtime, u.provider, u.model);
    line('realtime', u.provider, u.model, u.input_audio_seconds / 60, 'minute_input_audio', p?.per_minute_input_audio ?? null);
    line('realtime', u.provider, u.model, u.output_audio_seconds / 60, 'minute_output_audio', p?.per_minute_output_audio ?? null);
  }
  for (const u of usage.carrier) line('carrier', u.provider, u.direction, u.minutes, 'minute', prices.carrier[`${u.provider}/${u.direction}`]?.per_minute ?? null);
  for (const l of lines) l.quantity = Math.round(l.quantity * 1e9) / 1e9;
  return { currency: 'USD', total: money(lines.reduce((sum, l) => sum + l.amount, 0)), breakdown: lines, prices_read_on: prices.read_on };
}
