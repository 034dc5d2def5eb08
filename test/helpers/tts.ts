/**
 * What the text-to-speech adapter tests share: their vendor fake started once per file and left
 * with no connection after each test, settings that point one vendor at its fake, a recorder of
 * what a session reports, and the leak baseline (sockets and timers alive in the process).
 */
import { afterAll, afterEach, beforeAll } from 'vitest';
import type { ProviderError, ProviderSettings } from '../../src/providers/types.js';
import type { FakeConnections } from '../fakes/http.js';

/**
 * Starts the fake before the file's tests and closes it after them. After each test, `reset`
 * puts it back as it was (script, records), then its idle keep-alive connections are closed and
 * the test waits until none is left: a connection that outlives its test fails the test.
 */
export function useFake<F extends FakeConnections & { close(): Promise<void> }>(
  start: () => Promise<F>,
  reset: (fake: F) => void | Promise<void>,
): void {
  let fake: F | undefined;
  beforeAll(async () => {
    fake = await start();
  });
  afterAll(async () => {
    await fake?.close();
  });
  afterEach(async () => {
    if (!fake) return;
    await reset(fake);
    fake.closeIdleHttpConnections();
    await fake.waitForNoConnections();
  });
}

/** An address where nothing listens: the vendors a test does not talk to. */
const NOWHERE = 'http://127.0.0.1:9';

/** Provider settings with `vendor` at `endpoint` (its fake) and the others nowhere. */
export function fakeSettings(
  vendor: 'openai' | 'elevenlabs' | 'cartesia' | 'deepgram',
  endpoint: ProviderSettings['openai'],
  timeouts?: ProviderSettings['timeouts'],
): ProviderSettings {
  return {
    deepgram: { baseUrl: NOWHERE },
    openai: { baseUrl: NOWHERE },
    elevenlabs: { baseUrl: NOWHERE },
    cartesia: { baseUrl: NOWHERE },
    [vendor]: endpoint,
    ...(timeouts ? { timeouts } : {}),
  };
}

/** Collects what a session reports, with promises for its end. */
export function recorder() {
  const chunks: Buffer[] = [];
  const errors: ProviderError[] = [];
  let doneCount = 0;
  let resolveEnd!: (outcome: 'done' | ProviderError) => void;
  const ended = new Promise<'done' | ProviderError>((r) => (resolveEnd = r));
  let audioWaiters: Array<{ bytes: number; resolve: () => void }> = [];
  const total = () => chunks.reduce((n, c) => n + c.length, 0);
  return {
    chunks,
    errors,
    ended,
    get doneCount() {
      return doneCount;
    },
    audio: () => Buffer.concat(chunks),
    /** Resolves once at least `bytes` of audio have arrived. */
    audioAtLeast(bytes: number) {
      return new Promise<void>((resolve) => {
        if (total() >= bytes) resolve();
        else audioWaiters.push({ bytes, resolve });
      });
    },
    events: {
      onAudio(mulaw: Buffer) {
        chunks.push(Buffer.from(mulaw));
        const n = total();
        audioWaiters = audioWaiters.filter((w) => (n >= w.bytes ? (w.resolve(), false) : true));
      },
      onDone() {
        doneCount++;
        resolveEnd('done');
      },
      onError(err: ProviderError) {
        errors.push(err);
        resolveEnd(err);
      },
    },
  };
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * Sockets and timers alive in this process, read once the test runner's own throttled report
 * timer (100 ms) has gone, so that a difference can only be ours.
 */
export async function quietHandles() {
  await sleep(150);
  const info = process.getActiveResourcesInfo();
  return {
    timers: info.filter((x) => x === 'Timeout').length,
    sockets: info.filter((x) => x === 'TCPSocketWrap').length,
  };
}
