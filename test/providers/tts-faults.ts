/**
 * What every text-to-speech adapter must do with its vendor's fake, whatever the vendor: each
 * fault (a refused connection, a wrong key, 429 and 5xx refusals, a vendor that never answers
 * the connection or the text, a dropped connection, garbage, an error message) ends its session
 * with one `ProviderError` naming the adapter's provider, and a session opened beside it on the
 * same adapter and fake speaks to the end. The Cartesia, Deepgram Aura and OpenAI-compatible
 * tests run it; the fake must be left with no connection (`useFake` checks after each test).
 */
import { describe, expect, it } from 'vitest';
import type { TtsConfig } from '../../engine/schema.js';
import { ProviderError, type ProviderErrorCode, type ProviderSettings, type TtsProvider } from '../../src/providers/types.js';
import { recorder } from '../helpers/tts.js';

export type TtsFault = 'refuse-429' | 'refuse-503' | 'wrong-key' | 'hang' | 'silent' | 'drop' | 'garbage' | 'error-message';

export interface TtsFaultRig {
  /** As the adapter's errors name it (`cartesia`, `deepgram-tts`, …). */
  provider: string;
  config: TtsConfig;
  /** The adapter at the fake (or at `baseUrl`), with these timeouts. */
  adapter(options?: { baseUrl?: string; timeouts?: ProviderSettings['timeouts'] }): TtsProvider;
  /** The fake's next connection (or request) misbehaves so; the ones after it do not. */
  inject(fault: TtsFault): void;
}

/** Quick timeouts, so that a vendor that never answers fails within the test. */
const TIMEOUTS = { connectMs: 400, firstTokenMs: 400 };

const EXPECTED: Record<TtsFault, { code: ProviderErrorCode; status?: number }> = {
  'refuse-429': { code: 'PROVIDER_HTTP_ERROR', status: 429 },
  'refuse-503': { code: 'PROVIDER_HTTP_ERROR', status: 503 },
  'wrong-key': { code: 'PROVIDER_AUTH', status: 401 },
  hang: { code: 'PROVIDER_TIMEOUT' },
  silent: { code: 'PROVIDER_TIMEOUT' },
  drop: { code: 'PROVIDER_DISCONNECTED' },
  garbage: { code: 'PROVIDER_PROTOCOL' },
  'error-message': { code: 'PROVIDER_HTTP_ERROR' },
};

/** Opens a session, speaks two sentences and ends; resolves with how it ended (and its audio). */
async function speak(provider: TtsProvider, config: TtsConfig) {
  const rec = recorder();
  let outcome: 'done' | ProviderError;
  try {
    const session = await provider.open(config, rec.events);
    session.sendText('Hello there. ');
    session.flush();
    session.sendText('See you soon.');
    session.end();
    outcome = await rec.ended;
  } catch (err) {
    expect(err).toBeInstanceOf(ProviderError);
    outcome = err as ProviderError;
  }
  return { outcome, rec };
}

export const ALL_TTS_FAULTS = Object.keys(EXPECTED) as TtsFault[];

/** `faults`: those the vendor can have (a server without keys has no wrong key). */
export function ttsFaultSuite(name: string, faults: readonly TtsFault[], rig: () => TtsFaultRig): void {
  describe(`${name}: faults end only their own session`, () => {
    it('a vendor nothing listens at is PROVIDER_DISCONNECTED', async () => {
      const r = rig();
      const { outcome } = await speak(r.adapter({ baseUrl: 'http://127.0.0.1:9', timeouts: TIMEOUTS }), r.config);
      expect(outcome).toMatchObject({ name: 'ProviderError', code: 'PROVIDER_DISCONNECTED', provider: r.provider });
    });

    it.each(faults)('%s: one error of the provider; a session beside it speaks to the end', async (fault) => {
      const r = rig();
      const adapter = r.adapter({ timeouts: TIMEOUTS });
      r.inject(fault);
      const faulty = await speak(adapter, r.config);
      const healthy = await speak(adapter, r.config);
      const expected = EXPECTED[fault];
      expect(faulty.outcome).toMatchObject({ name: 'ProviderError', provider: r.provider, code: expected.code });
      if (expected.status !== undefined) expect((faulty.outcome as ProviderError).status).toBe(expected.status);
      expect(faulty.rec.errors.length).toBeLessThanOrEqual(1);
      expect(faulty.rec.doneCount).toBe(0);
      expect(healthy.outcome).toBe('done');
      expect(healthy.rec.errors).toEqual([]);
      expect(healthy.rec.audio().length).toBeGreaterThan(0);
      for (const c of healthy.rec.chunks) expect(c.length % 160).toBe(0);
      await (adapter as { close?: () => Promise<void> }).close?.();
    });
  });
}
