/**
 * Driving the dashboard in Chromium (test/console): waiting on the page, watching that it talks to
 * its own origin only and breaks none of its policy, and the screenshots for docs/.
 */
import type { Page } from 'playwright-core';

/**
 * Waits until `expression` is truthy in the page. Polled with page.evaluate (the page's policy
 * forbids eval, which page.waitForFunction uses for a string; the DOM has no types here).
 */
export async function until(page: Page, expression: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await page.evaluate(expression))) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${expression}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Every request to anything but `origin` (data: and blob: URLs are the page's own), and every policy violation the page reports. */
export function watchPage(page: Page, origin: string): { elsewhere: string[]; violations: string[] } {
  const seen = { elsewhere: [] as string[], violations: [] as string[] };
  page.on('request', (r) => {
    const url = r.url();
    if (url.startsWith('data:') || url.startsWith('blob:')) return;
    const own = new URL(origin);
    const u = new URL(url);
    if (u.host !== own.host) seen.elsewhere.push(url);
  });
  page.on('console', (m) => {
    if (/Content Security Policy|Refused to/i.test(m.text())) seen.violations.push(m.text());
  });
  page.on('pageerror', (e) => seen.violations.push(`uncaught: ${e.message}`));
  return seen;
}

const DOCS = new URL('../../docs/', import.meta.url);

/** `SCREENSHOTS=1`: the page into docs/dashboard-<name>.png (the whole page). */
export async function shot(page: Page, name: string): Promise<void> {
  if (process.env.SCREENSHOTS !== '1') return;
  await page.screenshot({ path: new URL(`dashboard-${name}.png`, DOCS).pathname, fullPage: true });
}
