/** A call's cost from its usage at a price table: each line, unknown models shown and not counted, an organization's own prices. */
import { describe, expect, it } from 'vitest';
import { applyPricingPatch, costOf, DEFAULT_PRICES, pricingFor } from '../../src/observability/pricing.js';
import { UsageMeter } from '../../src/observability/usage.js';

describe('costOf', () => {
  it('prices each kind by its unit; a model with no price is in the breakdown with unit_price null and counts nothing', () => {
    const m = new UsageMeter();
    m.stt('deepgram', 'nova-3', 90);
    m.llm('openai', 'gpt-4o-mini', 2_000_000, 500_000);
    m.llm('openai', 'gpt-4o-mini', 1_000_000, 500_000);
    m.tts('elevenlabs', 'eleven_flash_v2_5', 10_000);
    m.realtime('openai-realtime', 'gpt-realtime', 60, 30);
    m.carrier('twilio', 'inbound', 2);
    m.llm('acme', 'mystery-1', 1000, 1000);
    const cost = costOf(m.snapshot(), DEFAULT_PRICES);
    const amount = (kind: string, unit: string) => cost.breakdown.find((l) => l.kind === kind && l.unit === unit && l.provider !== 'acme')!.amount;
    expect(amount('stt', 'minute')).toBeCloseTo(1.5 * 0.0077, 6);
    expect(amount('llm', 'million_input_tokens')).toBeCloseTo(3 * 0.15, 6);
    expect(amount('llm', 'million_output_tokens')).toBeCloseTo(1 * 0.6, 6);
    expect(amount('tts', 'million_characters')).toBeCloseTo(0.01 * 50, 6);
    expect(amount('realtime', 'minute_input_audio')).toBeCloseTo(0.032, 6);
    expect(amount('realtime', 'minute_output_audio')).toBeCloseTo(0.5 * 0.064, 6);
    expect(amount('carrier', 'minute')).toBeCloseTo(2 * 0.0085, 6);
    const unknown = cost.breakdown.filter((l) => l.provider === 'acme');
    expect(unknown.map((l) => [l.unit_price, l.amount])).toEqual([[null, 0], [null, 0]]);
    expect(cost.total).toBeCloseTo(cost.breakdown.reduce((s, l) => s + l.amount, 0), 6);
    expect(cost).toMatchObject({ currency: 'USD', prices_read_on: DEFAULT_PRICES.read_on });
  });

  it("an organization's prices replace the shipped ones entry by entry; null goes back", () => {
    const overrides = applyPricingPatch(null, { stt: { 'deepgram/nova-3': { per_minute: 1 } } });
    const m = new UsageMeter();
    m.stt('deepgram', 'nova-3', 60);
    expect(costOf(m.snapshot(), pricingFor(overrides)).total).toBe(1);
    expect(costOf(m.snapshot(), pricingFor(applyPricingPatch(overrides, { stt: { 'deepgram/nova-3': null } }))).total).toBe(0.0077);
  });
});
