/**
 * The carriers' registry (DECISIONS 18): what is derived from the declarations (numbers'
 * providers, the account's settings, the variables, the outbound carriers of a process), and the
 * checks on the declarations themselves.
 */
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { declareCarrier, type AnyCarrierDeclaration } from '../../src/telephony/carrier.js';
import { Carriers } from '../../src/telephony/carriers.js';
import {
  accountCarriers,
  CARRIERS,
  carrierVariables,
  findCarrier,
  numberProviderDescription,
  numberProviders,
} from '../../src/telephony/registry.js';
import { AccountPatchBody, NumberCreateBody } from '../../src/api/schemas.js';

const bare = (id: string, extra: Partial<AnyCarrierDeclaration> = {}): AnyCarrierDeclaration =>
  declareCarrier({ id, label: id.toUpperCase(), create: () => null, ...extra });

describe('the registry', () => {
  it('lists every carrier once, by id; numbers are those of the carriers that have them, the first the default', () => {
    const ids = CARRIERS.map((c) => c.id);
    expect(new Set(ids).size).toBe(ids.length);
    for (const id of ['twilio', 'sip', 'web', 'telnyx']) expect(findCarrier(id)?.id).toBe(id);
    expect(numberProviders()[0]).toBe('twilio');
    expect(numberProviders()).not.toContain('web');
    expect(numberProviders(CARRIERS.filter((c) => c.id === 'twilio' || c.id === 'sip'))).toEqual(['twilio', 'sip']);
  });

  it("the numbers' provider is described from the declarations (Twilio and SIP: as before)", () => {
    const two = CARRIERS.filter((c) => c.id === 'twilio' || c.id === 'sip');
    expect(numberProviderDescription(two)).toBe('who carries its calls: Twilio Media Streams (default) or a SIP trunk (DECISIONS 15)');
    expect(numberProviderDescription([bare('a', { numbers: 'A' }), bare('b', { numbers: 'B' }), bare('c', { numbers: 'C' })])).toBe(
      'who carries its calls: A (default), B or C',
    );
    expect(() => numberProviders([bare('web')])).toThrow(/no carrier has numbers/);
  });

  it('a number takes any provider the registry has, and nothing else', () => {
    for (const provider of numberProviders()) expect(NumberCreateBody.safeParse({ number: '+14155550100', provider }).success).toBe(true);
    expect(NumberCreateBody.safeParse({ number: '+14155550100', provider: 'vonage' }).success).toBe(false);
    expect(NumberCreateBody.safeParse({ number: '+14155550100', provider: 'web' }).success).toBe(false);
  });

  it('<CARRIER>_API_BASE for every carrier with an API, read by the configuration with its default', () => {
    const vars = carrierVariables();
    expect(vars).toContainEqual({ name: 'TWILIO_API_BASE', default: 'https://api.twilio.com' });
    expect(vars).toContainEqual({ name: 'TELNYX_API_BASE', default: 'https://api.telnyx.com' });
    expect(carrierVariables([bare('my-carrier', { apiBase: 'https://api.example.com' })])).toEqual([{ name: 'MY_CARRIER_API_BASE', default: 'https://api.example.com' }]);
    const config = loadConfig({});
    for (const v of vars) expect(config[v.name]).toBe(v.default);
    expect(loadConfig({ TWILIO_API_BASE: 'http://127.0.0.1:9' }).TWILIO_API_BASE).toBe('http://127.0.0.1:9');
    expect(() => loadConfig({ TWILIO_API_BASE: 'not a url' })).toThrow(/TWILIO_API_BASE/);
  });

  it("the account's body takes each carrier's settings at its path, and refuses what no carrier declares", () => {
    const paths = accountCarriers().map((c) => c.account.path.join('.'));
    expect(paths).toEqual(expect.arrayContaining(['telephony.twilio', 'sip', 'telnyx']));
    expect(AccountPatchBody.safeParse({ telephony: { twilio: null }, sip: null }).success).toBe(true);
    expect(AccountPatchBody.safeParse({ telephony: { vonage: {} } }).success).toBe(false);
    expect(AccountPatchBody.safeParse({ vonage: {} }).success).toBe(false);
  });
});

describe('a process', () => {
  const context = (started: string[]) =>
    ({
      config: loadConfig({}),
      options: {},
      onUnavailable: () => undefined,
      started,
    }) as unknown as Parameters<typeof Carriers.start>[0];

  it('starts every carrier in order; one off here still has numbers, which say why they cannot call out', async () => {
    const started: string[] = [];
    const running = (id: string) => ({ instance: id, close: () => void started.push(`closed ${id}`) });
    const carriers = await Carriers.start(context(started), [
      bare('first', { numbers: 'First', create: () => (started.push('first'), running('first')) }),
      bare('off', { numbers: 'Off', off: { unusable: 'off here: turn it on', place: 'off' }, create: () => null }),
      bare('plain', { numbers: 'Plain', create: () => null }),
    ]);
    expect(started).toEqual(['first']);
    const outbound = carriers.outbound();
    expect(Object.keys(outbound)).toEqual(['first', 'off', 'plain']);
    expect(outbound.off!.unusable({ webhook: null, twilio: null })).toBe('off here: turn it on');
    expect(outbound.plain!.unusable({ webhook: null, twilio: null })).toBe('PLAIN is off on this server');
    await expect(outbound.off!.place({} as never, { webhook: null, twilio: null })).rejects.toThrow('off');
    await carriers.close();
    expect(started).toEqual(['first', 'closed first']);
  });

  it('a carrier that fails to start closes those started before it', async () => {
    const started: string[] = [];
    await expect(
      Carriers.start(context(started), [
        bare('a', { create: () => ({ instance: 'a', close: () => void started.push('closed a') }) }),
        bare('b', {
          create: () => {
            throw new Error('port in use');
          },
        }),
      ]),
    ).rejects.toThrow('port in use');
    expect(started).toEqual(['closed a']);
  });

  it('each carrier gets its own <CARRIER>_API_BASE', async () => {
    const seen: Record<string, string> = {};
    const config = loadConfig({ TWILIO_API_BASE: 'http://127.0.0.1:1' });
    await Carriers.start({ ...context([]), config }, [
      bare('twilio', { apiBase: 'https://api.twilio.com', create: (ctx) => ((seen.twilio = ctx.apiBase), null) }),
      bare('none', { create: (ctx) => ((seen.none = ctx.apiBase), null) }),
    ]);
    expect(seen).toEqual({ twilio: 'http://127.0.0.1:1', none: '' });
  });
});
