/**
 * The dashboard (GET /console, DECISIONS 19, docs/dashboard.md), every page driven in headless
 * Chromium against a real Switchboard on 127.0.0.1 with the sandbox providers: the key, the
 * overview, the call log (filters, search), a recorded phone call's page (transcript, path on the
 * graph, the recording played in the page's <audio> with the line being spoken lit), the workflow
 * editor (add, connect, move and delete nodes; an invalid save shows each problem on its node and
 * edge; fixed and saved with its layout), an assistant made and edited (a refused save with the
 * detail beside its field, the missing-key warnings, a chat refused with its details), numbers,
 * the account, API keys made and revoked, test suites, empty states, the keyboard and a 390 px
 * wide screen. Throughout: no request to another host, no policy violation, the key in no URL.
 *
 * `SCREENSHOTS=1` also writes docs/dashboard-*.png.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { browserAvailable, launchBrowser, type TestBrowser } from '../helpers/browser.js';
import { callIdOf, eventually, frontDesk, receivedMessages, sandboxAssistant, startCallingServer, type CallingServer } from '../helpers/calls.js';
import { shot, until, watchPage } from '../helpers/dashboard.js';

const KEY = /^sk_live_[A-Za-z0-9_-]{43}$/;
const consent = { recording_consent: { enabled: true, message: 'This call is recorded.' } };

describe.skipIf(!browserAvailable())('the dashboard in headless Chromium', () => {
  let server: CallingServer;
  let browser: TestBrowser;
  let page: Page;
  let seen: { elsewhere: string[]; violations: string[] };
  let callId: string;
  let workflowId: string;
  let assistantId: string;
  const urls: string[] = [];

  beforeAll(async () => {
    server = await startCallingServer();
    // a recorded phone call: the greeting, one line from the caller, the reply, a hang-up
    const set = await server.setUpNumber({ assistant: sandboxAssistant({ name: 'Front desk (sandbox)', ...consent }), definition: frontDesk });
    workflowId = set.workflowId!;
    assistantId = set.assistantId;
    await server.api('PATCH', `/workflows/${workflowId}`, { name: 'Acme front desk' });
    const caller = server.caller(set.number);
    callId = callIdOf(await caller.dial());
    await caller.hear(/Acme Dental/i);
    await caller.quiet(400);
    await caller.say('I would like to book an appointment.');
    await caller.hear(/book your appointment/i);
    await caller.quiet(400);
    await caller.hangUp();
    await eventually('the report', () => receivedMessages(server.receiver, 'end-of-call-report').find((m) => m.call.id === callId), 20_000);
    await eventually('the recording', async () => (await server.api('GET', `/calls/${callId}`)).json.call.recording_url ?? undefined, 20_000);

    browser = await launchBrowser();
    page = browser.page;
    await page.setViewportSize({ width: 1280, height: 800 });
    seen = watchPage(page, server.baseUrl);
    page.on('request', (r) => urls.push(r.url()));
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

  it('takes the key, then shows the overview: calls today and over 7 days, ended reasons, the latest calls', async () => {
    await failWithLogs(
      (async () => {
        await page.goto(`${server.baseUrl}/console`);
        await page.fill('#key', server.key);
        await page.press('#key', 'Enter');
        await page.waitForSelector('[data-stat="today"]');
        expect(await text('.top .org')).toBe((await server.api('GET', '/account')).json.account.name);
        expect(Number(await text('[data-stat="today"] .stat-value'))).toBeGreaterThanOrEqual(1);
        expect(Number(await text('[data-stat="week"] .stat-value'))).toBeGreaterThanOrEqual(1);
        expect(await text('[data-stat="live"] .stat-value')).toBe('0');
        expect(await text('[data-stat="duration"] .stat-value')).toMatch(/^\d+ s$/);
        // the caller's turn of the recorded call, kept in its observation (DECISIONS 21)
        expect(await text('[data-stat="latency"] .stat-value')).toMatch(/^\d+ \/ \d+ ms$/);
        expect(await text('tr[data-reason="customer-ended-call"] td.num')).toBe('1');
        expect(await page.$$eval('ul.recent a', (as) => as.map((a) => a.getAttribute('href')))).toContain(`#/calls/${callId}`);
        await shot(page, 'overview');
      })(),
    );
  });

  it('is usable by keyboard: Tab reaches the pages, Enter opens one', async () => {
    await failWithLogs(
      (async () => {
        await page.focus('body');
        for (let i = 0; i < 12 && (await page.evaluate('document.activeElement?.dataset?.page')) !== 'calls'; i++) await page.keyboard.press('Tab');
        expect(await page.evaluate('document.activeElement?.dataset?.page')).toBe('calls');
        await page.keyboard.press('Enter');
        await page.waitForSelector('#call-list');
        expect(new URL(page.url()).hash).toBe('#/calls');
        expect(await page.getAttribute('nav a[data-page="calls"]', 'aria-current')).toBe('page');
      })(),
    );
  });

  it('lists the calls, filters them, and finds one by its customer number', async () => {
    await failWithLogs(
      (async () => {
        await open('/calls', '#call-list');
        expect(await page.$$eval('#call-list tbody tr', (trs) => trs.map((tr) => tr.getAttribute('data-call')))).toEqual([callId]);
        const row = await page.$$eval(`tr[data-call="${callId}"] td`, (tds) => tds.map((td) => td.textContent));
        expect(row).toEqual(expect.arrayContaining(['inbound', '+15005550006', 'Front desk (sandbox)', 'customer-ended-call', 'greeting → booking']));
        await shot(page, 'calls');

        // a search: digits of the customer's number, typed as a person would
        await page.fill('input[name="customer"]', '500-555');
        await page.click('form.filters button[type="submit"]');
        await until(page, "location.hash.includes('customer=500555')");
        await page.waitForSelector(`tr[data-call="${callId}"]`);
        await page.fill('input[name="customer"]', '999999');
        await page.click('form.filters button[type="submit"]');
        await page.waitForSelector('[data-empty]');
        expect(await text('[data-empty] h3')).toBe('No call matches these filters');

        // filters: the status, then cleared
        await open('/calls', '#call-list');
        await page.selectOption('select[name="status"]', 'in-progress');
        await page.waitForSelector('[data-empty]');
        await page.click('text=Clear filters');
        await page.waitForSelector(`tr[data-call="${callId}"]`);
      })(),
    );
  });

  it("opens a call: its transcript with node and time, its path on the graph, its recording played in the page lighting the line spoken", async () => {
    await failWithLogs(
      (async () => {
        await open('/calls', `tr[data-call="${callId}"]`);
        await page.click(`tr[data-call="${callId}"] a`);
        await page.waitForSelector('#call-facts');
        expect(new URL(page.url()).hash).toBe(`#/calls/${callId}`);
        expect(await text('#call-facts dd[data-field="ended_reason"]')).toBe('customer-ended-call');
        // the workflow's name once its definition is fetched (its id until then)
        await until(page, `document.querySelector('#call-facts dd[data-field="workflow"]')?.textContent === 'Acme front desk'`);
        const lines = await page.$$eval('#call-transcript li', (lis) => lis.map((li) => [li.querySelector('.who')?.textContent, li.querySelector('.text')?.textContent, li.querySelector('.meta')?.textContent]));
        const { call } = (await server.api('GET', `/calls/${callId}`)).json;
        expect(lines.map(([who, t]) => [who, t])).toEqual(call.messages.map((m: { role: string; content: string }) => [m.role === 'user' ? 'Caller' : 'Assistant', m.content]));
        // m:ss into the call, and the node (none for the consent line, said before the workflow starts)
        for (const [i, [, , meta]] of lines.entries()) {
          const node = call.messages[i].node_id;
          expect(meta).toMatch(new RegExp(`^\\d+:\\d\\d${node ? ` · ${node}` : ''}$`));
        }
        expect(lines.filter(([, , meta]) => / · (greeting|booking)$/.test(meta ?? '')).length).toBeGreaterThanOrEqual(3);

        // the path on the graph: greeting, then booking
        await page.waitForSelector('.graph-nodes li.visited', { state: 'attached' });
        expect(await page.$$eval('.graph-nodes li.visited', (lis) => lis.map((li) => li.getAttribute('data-node')))).toEqual(['greeting', 'booking']);
        expect(await page.$$eval('.graph-edges li.taken', (lis) => lis.map((li) => `${li.getAttribute('data-from')}>${li.getAttribute('data-to')}`))).toEqual(['greeting>booking']);
        await until(page, 'window.dashboard.graph?.nodes(".visited").map((n) => n.id()).sort().join() === "booking,greeting"');
        await until(page, 'window.dashboard.graph.nodes(".current").map((n) => n.id()).join() === "booking"');

        // the recording: fetched with the key into a blob, played by the browser's own player
        await page.waitForSelector('#recording[src^="blob:"]', { timeout: 20_000 });
        await until(page, "document.querySelector('#recording').readyState >= 2", 10_000);
        expect(await page.evaluate("document.querySelector('#recording').duration")).toBeGreaterThan(3);
        await page.evaluate("document.querySelector('#recording').play()");
        await until(page, "document.querySelector('#recording').currentTime > 0.5", 10_000);
        await page.waitForSelector('#call-transcript li.speaking');
        // a line's time plays from it: the line is lit (a line the recording reaches; the simulated
        // caller sends no audio between its lines, so its recording is shorter than the call)
        const duration = (await page.evaluate("document.querySelector('#recording').duration")) as number;
        const target = call.messages.map((m: { seconds_from_start: number }, i: number) => [m.seconds_from_start, i]).filter(([at]: number[]) => at! > 0.5 && at! < duration - 0.3).pop()[1];
        await page.click(`#call-transcript li:nth-child(${target + 1}) .meta button`);
        await until(page, `document.querySelectorAll('#call-transcript li')[${target}].classList.contains('speaking')`, 10_000);
        expect(await page.$$eval('#call-transcript li.speaking', (lis) => lis.length)).toBe(1);
        expect(await page.evaluate('document.querySelector("#recording").paused')).toBe(false);
        await page.evaluate("document.querySelector('#recording').pause()");
        // each caller turn's latency split, as the call's record keeps it
        const turns = await page.$$eval('#call-turns tbody tr', (trs) => trs.map((tr) => [...tr.children].map((td) => td.textContent)));
        expect(turns.length).toBe(call.turns.length);
        expect(turns.length).toBeGreaterThanOrEqual(1);
        expect(turns[0]![1]).toBe(call.turns[0].node_id);
        expect(turns[0]!.at(-1)).toBe(`${Math.round(call.turns[0].latency.total)} ms`);
        // webhooks sent for the call; no e-mail (no address)
        await page.waitForSelector('#call-webhooks');
        const events = await page.$$eval('#call-webhooks tbody tr td:nth-child(2)', (tds) => tds.map((td) => td.textContent));
        expect(events).toEqual(expect.arrayContaining(['status-update', 'end-of-call-report']));
        expect(await page.$$eval('#call-webhooks .outcome', (s) => [...new Set(s.map((x) => x.textContent))])).toEqual(['delivered']);
        expect(await text('.call-page')).toContain('No e-mail was sent for this call');
        // the key went in headers only: never in a URL
        expect(urls.filter((u) => u.includes(server.key))).toEqual([]);
        await shot(page, 'call');
      })(),
    );
  }, 60_000);

  /** A node's place on the screen, to click it on the canvas as a person would. */
  async function clickNode(id: string) {
    const box = await page.locator('.graph-canvas').boundingBox();
    const at = (await page.evaluate(`window.dashboard.graph.getElementById(${JSON.stringify(id)}).renderedPosition()`)) as { x: number; y: number };
    await page.mouse.click(box!.x + at.x, box!.y + at.y);
  }
  const problemNodes = () => page.$$eval('.graph-nodes li.problem', (lis) => lis.map((li) => li.getAttribute('data-node')));

  it('edits a workflow: adds, connects, moves and deletes nodes; an invalid save shows each problem on its node and edge; fixed, it saves with its layout', async () => {
    await failWithLogs(
      (async () => {
        await open(`/workflows/${workflowId}`, '.graph-nodes li[data-node="greeting"]');
        // a transfer node, connected from greeting with the form and from booking on the canvas
        await page.selectOption('#new-node-type', 'transfer');
        await page.click('#add-node');
        await page.waitForSelector('#inspector[data-node="transfer_1"]');
        await page.click('.graph-nodes li[data-node="greeting"] button');
        await page.selectOption('#edge-target', 'transfer_1');
        await page.click('#add-edge');
        await page.waitForSelector('.graph-edges li[data-from="greeting"][data-to="transfer_1"].selected');
        await page.click('.graph-nodes li[data-node="booking"] button');
        await page.click('#connect-node');
        await page.waitForSelector('.connecting');
        await clickNode('transfer_1');
        await page.waitForSelector('.graph-edges li[data-from="booking"][data-to="transfer_1"]');
        // Cytoscape follows the lists after the render (an effect): waited for, not read at once
        await until(page, 'window.dashboard.graph.edges().length === 4');
        // an end node added, then deleted
        await page.selectOption('#new-node-type', 'end');
        await page.click('#add-node');
        await page.waitForSelector('.graph-nodes li[data-node="end_1"]');
        await page.click('#delete-node');
        await until(page, "!document.querySelector('.graph-nodes li[data-node=\"end_1\"]')");
        await until(page, 'window.dashboard.graph.getElementById("end_1").length === 0');

        // saved as it is: refused, every problem on its node or edge
        await page.click('#save-workflow');
        await page.waitForSelector('#editor-status.bad');
        expect(await text('#editor-status')).toMatch(/^Not saved: \d+ problems/);
        expect(await problemNodes()).toEqual(['transfer_1']);
        await until(page, 'window.dashboard.graph.nodes(".problem").map((n) => n.id()).join() === "transfer_1"');
        const badEdges = await page.$$eval('.graph-edges li.problem', (lis) => lis.map((li) => `${li.getAttribute('data-from')}>${li.getAttribute('data-to')}`));
        expect(badEdges.sort()).toEqual(['booking>transfer_1', 'greeting>transfer_1']);
        expect(await text('#problems li[data-node="transfer_1"]')).toMatch(/destination/);
        await shot(page, 'workflow-problems');
        // the node's problem beside its field
        await page.click('#problems li[data-node="transfer_1"] button');
        await page.waitForSelector('#inspector[data-node="transfer_1"]');
        expect(await text('#inspector .field[data-path="destination"] .problems')).toMatch(/required/);
        await page.fill('#inspector input[name="destination"]', '+14155550199');
        await page.fill('#inspector textarea[name="first_line"]', 'Let me put you through.');
        // each edge's description
        for (const from of ['greeting', 'booking']) {
          await page.click(`.graph-edges li[data-from="${from}"][data-to="transfer_1"] button`);
          await page.waitForSelector('#inspector[data-edge]');
          expect(await text('#inspector .field[data-path="description"] .problems')).toMatch(/required/);
          await page.fill('#inspector textarea[name="description"]', 'the caller asks for a person');
        }
        // moved by keyboard: the canvas focused, the node selected, three steps right
        await page.click('.graph-nodes li[data-node="transfer_1"] button');
        const before = (await page.evaluate('window.dashboard.graph.getElementById("transfer_1").position()')) as { x: number; y: number };
        await page.focus('.graph-canvas');
        for (let i = 0; i < 3; i++) await page.keyboard.press('ArrowRight');
        await page.click('#save-workflow');
        await until(page, "/^Saved/.test(document.querySelector('#editor-status')?.textContent ?? '')");
        expect(await problemNodes()).toEqual([]);

        const { workflow } = (await server.api('GET', `/workflows/${workflowId}`)).json;
        expect(workflow.definition.nodes.find((n: { id: string }) => n.id === 'transfer_1')).toEqual({ id: 'transfer_1', type: 'transfer', destination: '+14155550199', first_line: 'Let me put you through.' });
        expect(workflow.definition.edges.filter((e: { to: string }) => e.to === 'transfer_1')).toEqual([
          { from: 'greeting', to: 'transfer_1', description: 'the caller asks for a person' },
          { from: 'booking', to: 'transfer_1', description: 'the caller asks for a person' },
        ]);
        expect(workflow.definition).not.toHaveProperty('layout');
        expect(Object.keys(workflow.layout).sort()).toEqual(['booking', 'bye', 'greeting', 'transfer_1']);
        expect(workflow.layout.transfer_1).toEqual({ x: before.x + 30, y: before.y });
        await shot(page, 'workflow');

        // a reload draws the nodes where they were saved
        await page.reload();
        await page.waitForSelector('.graph-nodes li[data-node="transfer_1"]');
        const saved = workflow.layout.transfer_1 as { x: number; y: number };
        await until(page, `(({ x, y }) => x === ${saved.x} && y === ${saved.y})(window.dashboard.graph.getElementById("transfer_1").position())`);
      })(),
    );
  }, 60_000);

  it('makes an assistant (a refused save shows the detail beside its field; missing keys are warned beside the provider), edits it, and shows a refused chat\'s details', async () => {
    await failWithLogs(
      (async () => {
        await open('/assistants', '#assistant-list');
        expect(await page.$$eval(`tr[data-assistant="${assistantId}"] .badge`, (b) => b.map((x) => x.textContent))).toContain('sandbox');
        await page.click('#add-assistant');
        await page.waitForSelector('#assistant-form');
        await page.fill('input[name="name"]', 'Night line');
        await page.selectOption('select[name="llm_config.provider"]', 'openai');
        await page.selectOption('select[name="llm_config.model"]', 'gpt-4o-mini');
        await page.selectOption('select[name="tts_config.provider"]', 'elevenlabs');
        await page.click('#save-assistant');
        await page.waitForSelector('#assistant-status.bad');
        expect(await text('.field[data-path="tts_config.voice_id"] .problems')).toMatch(/required for a pipeline assistant/);
        await shot(page, 'assistant-problem');

        await page.selectOption('select[name="tts_config.provider"]', 'sandbox');
        await page.selectOption('select[name="tts_config.voice_id"]', 'sandbox');
        await page.click('#save-assistant');
        await until(page, "/^#\\/assistants\\/[0-9a-f-]{36}$/.test(location.hash)");
        const id = new URL(page.url()).hash.split('/')[2]!;
        await page.waitForSelector('#assistant-warnings');
        expect(await text('#assistant-warnings')).toContain('OPENAI_API_KEY');
        expect(await text('.field[data-path="llm_config.provider"] .warnings')).toContain('needs OPENAI_API_KEY');
        const made = (await server.api('GET', `/assistants/${id}`)).json.assistant;
        expect(made).toMatchObject({ name: 'Night line', llm_config: { provider: 'openai', model: 'gpt-4o-mini' }, tts_config: { provider: 'sandbox', voice_id: 'sandbox' } });

        // edited: only what changed is sent
        await page.fill('input[name="business_name"]', 'Acme Night');
        await page.fill('input[name="max_duration_seconds"]', '900');
        await page.click('#save-assistant');
        await until(page, "/^Saved/.test(document.querySelector('#assistant-status')?.textContent ?? '')");
        expect((await server.api('GET', `/assistants/${id}`)).json.assistant).toMatchObject({ business_name: 'Acme Night', max_duration_seconds: 900, llm_config: { provider: 'openai' } });
        await shot(page, 'assistant');

        // a chat the server refuses: its details, beside the assistant they are about
        await page.click('#start-chat');
        await page.waitForSelector('#try-status.bad');
        expect(await text('#try-status')).toMatch(/^Chat rejected/);
        expect(await text('.try .problems')).toMatch(/^llm_config\.provider: provider "openai".*needs OPENAI_API_KEY/);
      })(),
    );
  }, 60_000);

  it('adds, edits and deletes a number, with a refused one\'s detail beside its field', async () => {
    await failWithLogs(
      (async () => {
        await open('/numbers', '#number-list');
        await page.click('#add-number');
        await page.waitForSelector('form[data-number-form="new"]');
        await page.fill('form[data-number-form="new"] input[name="number"]', '555-0177');
        await page.click('form[data-number-form="new"] button[type="submit"]');
        await page.waitForSelector('form[data-number-form="new"] .field[data-path="number"] .problems');
        expect(await text('form[data-number-form="new"] .field[data-path="number"] .problems')).toMatch(/E\.164/);
        await page.fill('form[data-number-form="new"] input[name="number"]', '+14155550177');
        await page.selectOption('form[data-number-form="new"] select[name="assistant_id"]', assistantId);
        await page.click('form[data-number-form="new"] button[type="submit"]');
        await page.waitForSelector('#number-list tr:has-text("+14155550177")');
        const added = (await server.api('GET', '/numbers')).json.numbers.find((n: { number: string }) => n.number === '+14155550177');
        expect(added).toMatchObject({ assistant_id: assistantId, workflow_id: null, provider: 'twilio' });
        await shot(page, 'numbers');
        // edited: the workflow attached
        await page.click(`tr[data-number="${added.id}"] button:has-text("Edit")`);
        await page.selectOption(`form[data-number-form="${added.id}"] select[name="workflow_id"]`, workflowId);
        await page.click(`form[data-number-form="${added.id}"] button[type="submit"]`);
        await page.waitForSelector(`tr[data-number="${added.id}"] a[href="#/workflows/${workflowId}"]`);
        // deleted (a second press confirms)
        await page.click(`tr[data-number="${added.id}"] button.danger`);
        await page.click(`tr[data-number="${added.id}"] button.danger.armed`);
        await until(page, `!document.querySelector('tr[data-number="${added.id}"]')`);
        expect((await server.api('GET', `/numbers/${added.id}`)).status).toBe(404);
      })(),
    );
  });

  it('saves the account section by section, a refused value\'s detail beside its field', async () => {
    await failWithLogs(
      (async () => {
        await open('/account', '#account-outbound');
        await page.fill('#account-outbound input[name="max_concurrent_calls"]', '0');
        await page.click('#account-outbound button[type="submit"]');
        await page.waitForSelector('#account-outbound .field[data-path="outbound.max_concurrent_calls"] .problems');
        await page.fill('#account-outbound input[name="max_concurrent_calls"]', '5');
        await page.click('#account-outbound button[type="submit"]');
        await page.waitForSelector('#account-outbound .status');
        expect((await server.api('GET', '/account')).json.account.outbound.max_concurrent_calls).toBe(5);
        await shot(page, 'account');
      })(),
    );
  });

  it('makes an API key shown once, and revokes it; the last active key cannot be revoked', async () => {
    await failWithLogs(
      (async () => {
        await open('/keys', '#key-list');
        expect(await page.$$eval('#key-list tbody tr', (trs) => trs.length)).toBe(1);
        expect(await page.isDisabled('#key-list tbody tr button.danger')).toBe(true);
        await page.fill('input[name="key-name"]', 'CI pipeline');
        await page.click('#create-key');
        await page.waitForSelector('#new-key-secret');
        const secret = await text('#new-key-secret');
        expect(secret).toMatch(KEY);
        await until(page, "document.querySelectorAll('#key-list tbody tr').length === 2");
        expect((await server.app.inject({ method: 'GET', url: '/workflows', headers: { authorization: `Bearer ${secret}` } })).statusCode).toBe(200);
        await shot(page, 'keys');
        // shown once: gone from the page once dismissed, and from every answer
        await page.click('#made-key button:has-text("I have kept it")');
        expect(await page.content()).not.toContain(secret);
        const { keys } = (await server.api('GET', '/keys')).json;
        const ci = keys.find((k: { name: string }) => k.name === 'CI pipeline');
        await page.click(`tr[data-key="${ci.id}"] button.danger`);
        await page.click(`tr[data-key="${ci.id}"] button.danger.armed`);
        await page.waitForSelector(`tr[data-key="${ci.id}"].revoked`);
        expect((await server.app.inject({ method: 'GET', url: '/workflows', headers: { authorization: `Bearer ${secret}` } })).statusCode).toBe(401);
        expect(await page.isDisabled('#key-list tbody tr:not(.revoked) button.danger')).toBe(true);
      })(),
    );
  });

  it('lists the test suites, with an empty state before the first', async () => {
    await open('/test-suites', '[data-empty]');
    expect(await text('[data-empty] h3')).toBe('No test suites yet');
    const made = await server.api('POST', '/test-suites', {
      name: 'Front desk checks',
      assistant_id: assistantId,
      workflow_id: workflowId,
      tests: [{ name: 'books', mode: 'chat', script: [{ say: 'I would like to book an appointment.' }, { expect_node: 'booking' }] }],
    });
    expect(made.status, JSON.stringify(made.json)).toBe(201);
    await page.reload(); // the same address: a reload reads the list again
    await page.waitForSelector(`#suite-list tr[data-suite="${made.json.test_suite.id}"]`);
    expect(await page.$$eval(`tr[data-suite="${made.json.test_suite.id}"] td`, (tds) => tds.slice(0, 3).map((td) => td.textContent))).toEqual(['Front desk checks', 'Front desk (sandbox)', '1']);
    await shot(page, 'test-suites');
  });

  it('says on every page of an organization with nothing yet what to do next', async () => {
    await failWithLogs(
      (async () => {
        const { key } = await server.store.keys.createKey('Empty organization');
        await page.click('#forget-key');
        await page.waitForSelector('#key-form');
        await page.fill('#key', key);
        await page.click('#use-key');
        for (const [hash, title] of [
          ['/', 'No calls yet'],
          ['/calls', 'No calls yet'],
          ['/workflows', 'No workflows yet'],
          ['/assistants', 'No assistants yet'],
          ['/numbers', 'No numbers yet'],
          ['/test-suites', 'No test suites yet'],
        ] as const) {
          await open(hash, '[data-empty]');
          expect(await text('[data-empty] h3'), hash).toMatch(title);
          expect((await text('[data-empty] .empty-text')).length, hash).toBeGreaterThan(40);
        }
        await open('/', '[data-empty]');
        await shot(page, 'empty');
        // back to the organization with calls
        await page.click('#forget-key');
        await page.fill('#key', server.key);
        await page.click('#use-key');
        await page.waitForSelector('[data-stat="today"]');
      })(),
    );
  });

  it('fits a 390 px wide screen: every page without sideways scrolling, the pages behind a menu', async () => {
    await failWithLogs(
      (async () => {
        await page.setViewportSize({ width: 390, height: 844 });
        for (const [hash, ready, name] of [
          ['/', '[data-stat="today"]', 'overview'],
          ['/calls', '#call-list', 'calls'],
          [`/calls/${callId}`, '#call-facts', 'call'],
          ['/workflows', '#workflow-list', null],
          [`/workflows/${workflowId}`, '.graph-nodes li', 'workflow'],
          ['/assistants', '#assistant-list', null],
          [`/assistants/${assistantId}`, '#assistant-form', null],
          ['/numbers', '#number-list', null],
          ['/account', '#account-outbound', null],
          ['/keys', '#key-list', null],
          ['/test-suites', '#suite-list', null],
        ] as const) {
          await open(hash, ready);
          expect(await page.evaluate('document.documentElement.scrollWidth'), hash).toBeLessThanOrEqual(390);
          if (name) await shot(page, `${name}-390`);
        }
        expect(await page.isVisible('nav')).toBe(false);
        await page.click('.menu-toggle');
        await page.click('nav a[data-page="calls"]');
        await page.waitForSelector('#call-list');
        expect(await page.isVisible('nav')).toBe(false);
        await page.setViewportSize({ width: 1280, height: 800 });
      })(),
    );
  }, 60_000);

  it('asked nothing of another host and broke none of its policy', () => {
    expect(seen.elsewhere).toEqual([]);
    expect(seen.violations).toEqual([]);
    expect(urls.length).toBeGreaterThan(20);
  });
});
