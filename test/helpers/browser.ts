/**
 * Headless Chromium for the console's tests (test/console): Debian's `chromium` driven through
 * `playwright-core` (no browser download), a fresh profile each time, the fake media devices
 * (every getUserMedia prompt granted) and, when given, a WAV file as the microphone (Chromium
 * plays it in a loop).
 */
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';

export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/**
 * Whether the browser tests can run: Chromium is installed (`apt-get install chromium`, or
 * CHROMIUM_PATH). Without it they are skipped with a warning, so that `npm test` passes on a
 * machine with Node alone; CI installs it and sets REQUIRE_BROWSER=1, which turns a missing
 * browser into a failure instead of a skip.
 */
export function browserAvailable(): boolean {
  if (existsSync(CHROMIUM)) return true;
  if (process.env.REQUIRE_BROWSER === '1') throw new Error(`REQUIRE_BROWSER=1 but there is no Chromium at ${CHROMIUM} (apt-get install chromium, or set CHROMIUM_PATH)`);
  process.stderr.write(`\n[browser tests skipped] no Chromium at ${CHROMIUM}: apt-get install chromium, or set CHROMIUM_PATH\n`);
  return false;
}

export interface TestBrowser {
  context: BrowserContext;
  page: Page;
  /** Everything the page printed to its console and its uncaught errors, for failure messages. */
  logs: string[];
  close(): Promise<void>;
}

export async function launchBrowser(options: { microphoneWav?: string } = {}): Promise<TestBrowser> {
  const profile = await mkdtemp(join(tmpdir(), 'switchboard-chromium-'));
  const args = [
    '--headless',
    '--no-sandbox',
    '--disable-gpu',
    '--disable-quic',
    '--no-first-run',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
    '--use-fake-ui-for-media-stream',
    '--use-fake-device-for-media-stream',
    ...(options.microphoneWav ? [`--use-file-for-fake-audio-capture=${options.microphoneWav}`] : []),
    '--autoplay-policy=no-user-gesture-required',
  ];
  // launchPersistentContext passes the fresh profile as --user-data-dir (Playwright refuses it in args)
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args,
    viewport: { width: 1360, height: 780 },
  });
  const page = context.pages()[0] ?? (await context.newPage());
  const logs: string[] = [];
  page.on('console', (m) => logs.push(`[${m.type()}] ${m.text()}`));
  page.on('pageerror', (err) => logs.push(`[pageerror] ${err.message}`));
  return {
    context,
    page,
    logs,
    async close() {
      await context.close().catch(() => undefined);
      await rm(profile, { recursive: true, force: true });
    },
  };
}
