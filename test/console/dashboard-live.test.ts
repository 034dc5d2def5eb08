/**
 * The dashboard's live call and test suites (DECISIONS 19, 16, 20; docs/dashboard.md) in headless
 * Chromium against a real Switchboard with the sandbox providers: a live web call's page listens
 * (the audio frames arrive and are counted in the page), sends a `say` by keyboard (it shows in the
 * transcript), shows a refused control's detail beside its field, and loses its controls once the
 * call ends; a test suite made through the API is run from its page and its run shows a passed
 * and a failed test with the failed expectation. No request to another host, no policy violation.
 *
 * `SCREENSHOTS=1` also writes docs/dashboard-call-live*.png, -test-suite.png and -test-run*.png.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { WebCaller } from '../../src/sim/web-caller.js';
import { browserAvailable, launchBrowser, type TestBrowser } from '../helpers/browser.js';
import { frontDesk, sandboxAssistant, startCallingServer, type CallingServer } from '../helpers/calls.js';
import { shot, until, watchPage } from '../helpers/dashboard.js';

describe.skipIf(!browserAvailable())('the dashboard: a live call, and test suites run', () => {
  let server: CallingServer;
  let browser: TestBrowser;
  let page: Page;
  let seen: { elsewhere: string[]; violations: string[] };
  let assistantId: string;
  let workflowId: string;
  const urls: string[] = [];

  beforeAll(async () => {
    server = await startCallingServer();
    // a caller who says nothing is not hung up on while the test listens and controls
    assistantId = await server.createAssistant(sandboxAssistant({ name: 'Front desk (sandbox)', silence_timeout_seconds: 120 }));
    workflowId = await server.createWorkflow(frontDesk, 'Acme front desk');
    browser = await launchBrowser();
    page = browser.page;
    await page.setViewportSize({ width: 1280, height: 800 });
    seen = watchPage(page, server.baseUrl);
    page.on('request', (r) => urls.push(r.url()));
    page.on('websocket', (ws) => urls.push(ws.url()));
    await page.goto(`${server.baseUrl}/console`);
    await page.fill('#key', server.key);
    await page.press('#key', 'Enter');
    await page.waitForSelector('[data-stat="today"]');
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await server?.close();
  });

  const failWithLogs = <T>(work: Promise<T>): Promise<T> =>
    work.catch((err: Error) => {
      err.message += `\nbrowser console:\n${browser.logs.join('\n')}`;
      throw err;
    });
  const open = async (hash: string, ready: string) => {
    await page.goto(`${server.baseUrl}/console#${hash}`);
    await page.waitForSelector(ready, { timeout: 15_000 });
  };
  const text = (selector: string) => page.textContent(selector).then((t) => t ?? '');

  it('a live web call: Listen plays its frames, a say sent by keyboard shows in the transcript, a refused control shows its detail, and the controls go when it ends', async () => {
    await failWithLogs(
      (async () => {
        const caller = new WebCaller({ baseUrl: server.baseUrl, apiKey: server.key });
        try {
          const callId = await caller.start({ assistant_id: assistantId, workflow_id: workflowId });
          await caller.hear(/Acme Dental/i);
          await open(`/calls/${callId}`, '#call-controls #listen-start');
          expect(await page.isVisible('#control-form')).toBe(true);

          // Listen: the socket's binary frames arrive and are played (640 bytes, 20 ms each)
          await page.click('#listen-start');
          await page.waitForSelector('#listen[data-listening="true"]');
          await until(page, "Number(document.querySelector('#listen').dataset.bytes) >= 640 * 25", 10_000);
          const frames = Number(await page.getAttribute('#listen', 'data-frames'));
          expect(Number(await page.getAttribute('#listen', 'data-bytes'))).toBe(frames * 640);
          expect(await page.evaluate('document.activeElement?.id')).toBe('listen-stop');

          // say, by keyboard: the line typed, Tab past the checkbox to Send, Enter
          const line = 'A specialist will join you in a moment.';
          await page.focus('#control-form textarea[name="text"]');
          await page.keyboard.type(line);
          await page.keyboard.press('Tab');
          await page.keyboard.press('Tab');
          expect(await page.evaluate('document.activeElement?.id')).toBe('send-control');
          await page.keyboard.press('Enter');
          await page.waitForSelector('#control-status');
          await until(page, `[...document.querySelectorAll('#call-transcript li .text')].some((t) => t.textContent === ${JSON.stringify(line)})`, 20_000);
          const meta = await page.$$eval('#call-transcript li', (lis, said) => lis.filter((li) => li.querySelector('.text')?.textContent === said).map((li) => li.querySelector('.meta')?.textContent), line);
          expect(meta).toEqual([expect.stringContaining('control')]);
          await caller.hear(/specialist/i);
          const { call } = (await server.api('GET', `/calls/${callId}`)).json;
          expect(call.messages).toEqual(expect.arrayContaining([expect.objectContaining({ role: 'assistant', content: line, source: 'control' })]));

          // a refused control: the API's detail beside the field it names, nothing done
          await page.selectOption('#control-form select[name="type"]', 'transfer');
          await page.fill('#control-form input[name="destination"]', '555-0100');
          await page.click('#send-control');
          await page.waitForSelector('#control-form .field[data-path="destination"] .problems');
          expect(await text('#control-form .field[data-path="destination"] .problems')).toMatch(/E\.164/);
          expect((await server.api('GET', `/calls/${callId}`)).json.call.status).toBe('in-progress');
          await shot(page, 'call-live');
          await page.selectOption('#control-form select[name="type"]', 'say');
          // the page and the graph's canvas follow the window's new width
          await page.setViewportSize({ width: 390, height: 844 });
          await until(page, 'document.documentElement.scrollWidth <= 390', 5_000);
          // and the drawing is fitted again: every node in sight, none left where 1280 px had it
          await until(
            page,
            `(() => { const cy = window.dashboard.graph; const e = cy.extent();
              return cy.width() <= 390 && cy.nodes().length > 0 && cy.nodes().every((n) => { const p = n.position(); return p.x >= e.x1 && p.x <= e.x2 && p.y >= e.y1 && p.y <= e.y2; }); })()`,
            5_000,
          );
          await shot(page, 'call-live-390');
          await page.setViewportSize({ width: 1280, height: 800 });

          // still listening all along: more frames came; Stop closes the socket
          expect(Number(await page.getAttribute('#listen', 'data-frames'))).toBeGreaterThan(frames);
          await page.click('#listen-stop');
          await page.waitForSelector('#listen[data-listening="false"] #listen-start');

          // end, asked twice: the call ends api-ended-call and its controls go
          await page.selectOption('#control-form select[name="type"]', 'end');
          await page.click('#send-control');
          expect((await server.api('GET', `/calls/${callId}`)).json.call.status).toBe('in-progress');
          await page.click('#send-control.armed');
          await caller.ended(20_000);
          await until(page, "!document.querySelector('#call-controls')", 10_000);
          expect(await text('#call-facts dd[data-field="ended_reason"]')).toBe('api-ended-call');
          // the key went in headers only: the listen socket's URL carries a one-time token
          expect(urls.filter((u) => u.includes(server.key))).toEqual([]);
          expect(urls.some((u) => u.startsWith(`${server.baseUrl.replace('http', 'ws')}/calls/listen?token=`))).toBe(true);
        } finally {
          await caller.close().catch(() => undefined);
        }
      })(),
    );
  }, 90_000);

  it('runs a test suite from its page: the run shows a passed and a failed test, with the failed expectation', async () => {
    await failWithLogs(
      (async () => {
        const made = await server.api('POST', '/test-suites', {
          name: 'Front desk checks',
          assistant_id: assistantId,
          workflow_id: workflowId,
          tests: [
            { name: 'books', script: [{ expect_node: 'greeting' }, { say: 'I would like to book an appointment.', expect_node: 'booking' }] },
            { name: 'says goodbye at once', script: [{ say: 'I would like to book an appointment.' }], expect: { nodes_visited: ['greeting', 'bye'] } },
          ],
        });
        expect(made.status, JSON.stringify(made.json)).toBe(201);
        const suiteId = made.json.test_suite.id as string;

        await open('/test-suites', `#suite-list tr[data-suite="${suiteId}"] a`);
        await page.click(`#suite-list tr[data-suite="${suiteId}"] td:first-child a`);
        await page.waitForSelector('#suite-tests');
        expect(await page.$$eval('#suite-tests tbody tr', (trs) => trs.map((tr) => tr.getAttribute('data-test')))).toEqual(['books', 'says goodbye at once']);
        expect(await text('[data-empty] h3')).toBe('Not run yet');

        await page.click('#run-suite');
        await until(page, `location.hash.startsWith('#/test-suites/${suiteId}/runs/')`);
        const runId = new URL(page.url()).hash.split('/')[4]!;
        await page.waitForSelector('.run-page');
        await until(page, "document.querySelector('.run-page')?.dataset.status !== 'running'", 60_000);
        const { run } = (await server.api('GET', `/test-suites/${suiteId}/runs/${runId}`)).json;
        expect(run.status).toBe('failed');
        expect(await page.getAttribute('.run-page', 'data-status')).toBe('failed');
        expect(await page.getAttribute('article[data-test="books"]', 'data-status')).toBe('passed');
        expect(await page.getAttribute('article[data-test="says goodbye at once"]', 'data-status')).toBe('failed');
        const failed = run.results.find((r: { name: string }) => r.name === 'says goodbye at once');
        expect(failed.failure).toMatch(/^expect\.nodes_visited/);
        expect(await text('article[data-test="says goodbye at once"] [data-field="failure"] code')).toBe(failed.failure);
        expect(await text('article[data-test="books"] [data-field="nodes"]')).toBe('greeting → booking');
        expect(await text('#run-summary')).toMatch(/^\s*1 passed · 1 failed of 2/);
        expect(await page.$$eval('article[data-test="says goodbye at once"] .transcript li .text', (ts) => ts.map((t) => t.textContent))).toContain('I would like to book an appointment.');
        await shot(page, 'test-run');
        await page.setViewportSize({ width: 390, height: 844 });
        expect(await page.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(390);
        await shot(page, 'test-run-390');
        await page.setViewportSize({ width: 1280, height: 800 });

        // the suite's page lists the run
        await page.click('text=The suite and its runs');
        await page.waitForSelector(`#run-list tr[data-run="${runId}"]`);
        expect(await page.$$eval(`#run-list tr[data-run="${runId}"] td`, (tds) => tds.slice(1, 4).map((td) => td.textContent))).toEqual(['failed', '1 / 2', '1']);
        await shot(page, 'test-suite');
      })(),
    );
  }, 90_000);

  it('asked nothing of another host and broke none of its policy', () => {
    expect(seen.elsewhere).toEqual([]);
    expect(urls.filter((u) => new URL(u).host !== new URL(server.baseUrl).host && !/^(data|blob):/.test(u))).toEqual([]);
    expect(seen.violations).toEqual([]);
  });
});
