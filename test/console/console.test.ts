/**
 * The console's chats and web calls (GET /console, docs/dashboard.md) end to end, on a workflow's
 * page of the dashboard: a real Switchboard on 127.0.0.1 with the sandbox providers, driven from
 * headless Chromium. The page is given an API key, lists the workflows, draws the workflow (dagre
 * lays it out, Cytoscape draws it), runs a chat to its end node by typing, and runs a web call
 * whose microphone is a WAV file of the sandbox voice (Chromium's fake audio capture), with the
 * transcript, the current node, the latency and the report checked on the page and against the
 * API and the webhooks. The dashboard's other pages: test/console/dashboard.test.ts.
 *
 * `SCREENSHOTS=1` also writes docs/console-*.png.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { mulawDecode } from '../../src/audio/mulaw.js';
import { resample } from '../../src/audio/resample.js';
import { synthesizeSandboxSpeech } from '../../src/providers/sandbox/index.js';
import { browserAvailable, launchBrowser, type TestBrowser } from '../helpers/browser.js';
import { eventually, receivedMessages, sandboxAssistant, startCallingServer, type CallingServer } from '../helpers/calls.js';
import { wavHeader } from '../../src/audio/wav.js';

const SCREENSHOTS = process.env.SCREENSHOTS === '1';
const DOCS = new URL('../../docs/', import.meta.url);

/** What the caller says in the web call, 3 s and 8 s into the microphone's file: the words of the edges to booking, then to the end. */
const CALLER_LINES = ['I would like to book an appointment.', 'Goodbye, I am finished.'];

const deskWorkflow = (toolUrl: string) => ({
  version: 1,
  entry_node: 'greeting',
  global_prompt: 'You are the front desk of Acme Dental.',
  nodes: [
    { id: 'greeting', type: 'conversation', first_line: 'Hello, this is Acme Dental.', instructions: 'Find out what the caller needs.' },
    { id: 'booking', type: 'conversation', first_line: 'Let us book your appointment.', instructions: 'Ask for a day.' },
    { id: 'find_slot', type: 'tool', first_line: 'One moment please.', tool_name: 'find_slot', url: toolUrl, arguments: { day: 'monday' } },
    { id: 'billing', type: 'conversation', global: true, global_description: 'the caller has a question about a bill or a payment', first_line: 'Billing here.' },
    { id: 'human', type: 'transfer', destination: '+14155550123', first_line: 'Let me put you through.' },
    { id: 'bye', type: 'end', first_line: 'Thank you for calling, goodbye.' },
  ],
  edges: [
    { from: 'greeting', to: 'booking', description: 'the caller wants to book an appointment', message: 'Sure thing.' },
    { from: 'greeting', to: 'bye', description: 'the caller says goodbye or is finished' },
    { from: 'booking', to: 'find_slot', description: 'the caller names a day of the week' },
    { from: 'find_slot', to: 'bye' },
    { from: 'booking', to: 'bye', description: 'the caller says goodbye or is finished' },
    { from: 'billing', to: 'human', description: 'the caller wants to speak to a person' },
    { from: 'billing', to: 'bye', description: 'the caller says goodbye or is finished' },
  ],
});

/**
 * The caller's microphone: `lines` in the sandbox voice (μ-law 8 kHz modem audio), decoded and
 * upsampled to 48 kHz by our resampler (Chromium then converts it to its capture rate, 44.1 kHz,
 * and the page to 16 kHz: the modem survives all of it), as a 16-bit mono WAV: the first line
 * 3 s in (the greeting plays first), one every 5 s after it (the reply has played by then), and
 * 20 s of silence at the end (Chromium plays the file in a loop; the call is over long before the
 * first line comes round again).
 */
function callerWav(lines: string[]): Buffer {
  const rate = 48_000;
  const samples = new Int16Array(rate * (3 + 5 * lines.length + 20));
  lines.forEach((line, i) => samples.set(resample(mulawDecode(synthesizeSandboxSpeech(line)), 8000, rate), rate * (3 + 5 * i)));
  const data = Buffer.from(samples.buffer, samples.byteOffset, samples.byteLength);
  const header = wavHeader({ sampleRate: rate, channels: 1, dataBytes: data.length });
  return Buffer.concat([header, data]);
}

/** The transcript as the page shows it: [who, text, meta] per line. */
const transcript = (page: Page) =>
  page.$$eval('#transcript li', (items) =>
    items.map((li) => [...li.querySelectorAll('span')].map((s) => s.textContent ?? '')),
  );
/** The graph's current node, as its list under the canvas says and as Cytoscape draws it (after the render's effect). */
async function currentNode(page: Page) {
  const listed = await page.$$eval('.graph-nodes li.current', (nodes) => nodes.map((n) => n.getAttribute('data-node')));
  await until(page, `window.dashboard.graph.nodes(".current").map((n) => n.id()).join() === ${JSON.stringify(listed.join())}`);
  return listed;
}
const takenEdges = (page: Page) => page.$$eval('.graph-edges li.taken', (gs) => gs.map((g) => g.getAttribute('data-to')));
const report = (page: Page) =>
  page.$$eval('#report dd', (dds) => Object.fromEntries(dds.map((dd) => [dd.getAttribute('data-field'), dd.textContent])));
const status = (page: Page) => page.textContent('#try-status');

/**
 * Waits until `expression` is truthy in the page. Polled with page.evaluate (the page's policy
 * forbids eval, which page.waitForFunction uses for a string; the DOM has no types here).
 */
async function until(page: Page, expression: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await page.evaluate(expression))) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${expression}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function shot(page: Page, name: string) {
  if (SCREENSHOTS) await page.screenshot({ path: new URL(`console-${name}.png`, DOCS).pathname, fullPage: true });
}

describe.skipIf(!browserAvailable())('the console (GET /console) in headless Chromium', () => {
  let server: CallingServer;
  let browser: TestBrowser;
  let dir: string;
  let assistantId: string;
  let workflowId: string;
  let page: Page;
  const definition = () => deskWorkflow(`${server.receiver.url}/tools`);

  beforeAll(async () => {
    server = await startCallingServer();
    const assistant = await server.api('POST', '/assistants', sandboxAssistant({ name: 'Front desk (sandbox)' }));
    expect(assistant.status).toBe(201);
    assistantId = assistant.json.assistant.id;
    const other = await server.api('POST', '/workflows', { name: 'Other flow', definition: { version: 1, entry_node: 'only', nodes: [{ id: 'only', type: 'end' }], edges: [] } });
    expect(other.status).toBe(201);
    const workflow = await server.api('POST', '/workflows', { name: 'Acme front desk', definition: definition() });
    expect(workflow.status, JSON.stringify(workflow.json)).toBe(201);
    workflowId = workflow.json.workflow.id;
    dir = await mkdtemp(join(tmpdir(), 'switchboard-console-'));
    const wav = join(dir, 'caller.wav');
    await writeFile(wav, callerWav(CALLER_LINES));
    browser = await launchBrowser({ microphoneWav: wav });
    page = browser.page;
  });

  afterAll(async () => {
    await browser?.close();
    await server?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  /** The desk workflow's page as a user finds it on coming back to the tab (the key kept): each test starts from here. */
  async function fresh() {
    await page.goto(`${server.baseUrl}/console#/workflows/${workflowId}`);
    await page.reload();
    await page.waitForSelector('.graph-nodes li[data-node]');
    await page.selectOption('#assistant', assistantId);
    await until(page, "document.querySelectorAll('.graph-nodes li').length === 6 && !document.querySelector('#start-call').disabled");
  }

  const failWithLogs = <T>(work: Promise<T>): Promise<T> =>
    work.catch((err: Error) => {
      err.message += `\nbrowser console:\n${browser.logs.join('\n')}`;
      throw err;
    });

  it('serves the page, its bundle and its worklet without a key, compressed, with types and cache headers', async () => {
    // every body read to its end: a response left unread keeps its connection busy, and the server's close waits for it
    const get = async (path: string, headers: Record<string, string> = {}) => {
      const res = await fetch(`${server.baseUrl}${path}`, { headers: { 'accept-encoding': 'identity', ...headers } });
      return { status: res.status, headers: res.headers, body: await res.text() };
    };
    const html = await get('/console');
    expect(html.status).toBe(200);
    expect(html.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(html.headers.get('cache-control')).toBe('no-cache');
    expect(html.headers.get('content-security-policy')).toContain("script-src 'self'");
    expect(html.headers.get('content-security-policy')).toContain("style-src 'self';");
    // connections to the page's own origin only: no other host, not even by WebSocket
    const host = new URL(server.baseUrl).host;
    expect(html.headers.get('content-security-policy')).toContain(`connect-src 'self' ws://${host} wss://${host};`);
    expect(html.headers.get('content-security-policy')).not.toMatch(/ws: |wss: |\*|unsafe/);
    // nothing from elsewhere: every file the page names is one of its own
    const named = [...html.body.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]);
    expect(named).toEqual(['data:,', '/console/dashboard.css', '/console/dashboard.js']);
    expect((await get('/console/')).status).toBe(200);

    const revalidated = await get('/console', { 'if-none-match': html.headers.get('etag')! });
    expect(revalidated.status).toBe(304);

    for (const [path, type] of [
      ['/console/dashboard.js', 'text/javascript; charset=utf-8'],
      ['/console/dashboard.css', 'text/css; charset=utf-8'],
      ['/console/mic-worklet.js', 'text/javascript; charset=utf-8'],
      ['/console/dashboard.js.LEGAL.txt', 'text/plain; charset=utf-8'],
    ] as const) {
      const res = await get(path);
      expect(res.status, path).toBe(200);
      expect(res.headers.get('content-type'), path).toBe(type);
      expect(res.headers.get('cache-control'), path).toBe('no-cache');
      expect(res.headers.get('content-encoding'), path).toBeNull();
    }
    // the bundle carries its libraries' licences (Preact, htm, Cytoscape, dagre) beside it
    expect((await get('/console/dashboard.js.LEGAL.txt')).body).toMatch(/license/i);

    // compressed as the browser accepts: brotli, else gzip; the same bytes once decoded
    const plain = await get('/console/dashboard.js');
    const raw = async (encoding: string) => {
      const res = await fetch(`${server.baseUrl}/console/dashboard.js`, { headers: { 'accept-encoding': encoding } });
      const body = Buffer.from(await res.arrayBuffer());
      return { encoding: res.headers.get('content-encoding'), etag: res.headers.get('etag'), vary: res.headers.get('vary'), body };
    };
    // Node's fetch decodes what it is sent; the encoding and the ETag say what was sent
    const br = await raw('gzip, br');
    const gz = await raw('gzip');
    expect([br.encoding, gz.encoding]).toEqual(['br', 'gzip']);
    expect(br.vary).toBe('accept-encoding');
    expect(br.body.toString()).toBe(plain.body);
    expect(gz.body.toString()).toBe(plain.body);
    expect(new Set([br.etag, gz.etag, plain.headers.get('etag')]).size).toBe(3);

    const missing = await get('/console/%2e%2e/package.json'); // a file of its own list, or nothing
    expect(missing.status).toBe(404);
    expect((await get('/console/app.js')).status).toBe(404);
    expect((await get('/console/bundle.js')).status).toBe(404);
    // not part of the API's description
    const openapi = JSON.parse((await get('/openapi.json')).body) as { paths: Record<string, unknown> };
    expect(Object.keys(openapi.paths).filter((p) => p.startsWith('/console'))).toEqual([]);
  });

  it('asks for a key, lists the workflows, and draws the workflow laid out by dagre', async () => {
    await failWithLogs(
      (async () => {
        await page.goto(`${server.baseUrl}/console`);
        await page.fill('#key', 'sk_live_not-a-key');
        await page.click('#use-key');
        await page.waitForSelector('#status.bad');
        expect(await page.textContent('#status')).toContain('Invalid API key');
        expect(await page.$('nav')).toBeNull();

        await page.fill('#key', server.key);
        await page.click('#use-key');
        await page.waitForSelector('nav');
        // the key stays in this tab's session storage: a reload needs no typing
        expect(await page.evaluate("sessionStorage.getItem('switchboard.console.key')")).toBe(server.key);
        await page.reload();
        await page.waitForSelector('nav');

        await page.click('nav a[data-page="workflows"]');
        await page.waitForSelector('#workflow-list');
        const workflows = await page.$$eval('#workflow-list tbody tr td:first-child a', (o) => o.map((x) => x.textContent));
        expect(workflows).toEqual(['Other flow', 'Acme front desk']);
        await page.click('#workflow-list a:text("Acme front desk")');
        await until(page, "document.querySelectorAll('.graph-nodes li').length === 6");
        expect(await page.textContent('.page-head h1')).toBe('Acme front desk');
        const assistants = await page.$$eval('#assistant option', (o) => o.map((x) => [x.getAttribute('value'), x.textContent]));
        expect(assistants).toEqual([[assistantId, 'Front desk (sandbox)']]);

        // one node per workflow node, placed by dagre (no layout saved yet): ranks go down the edges
        const def = definition();
        const nodes = await page.$$eval('.graph-nodes li', (lis) => lis.map((li) => ({ id: li.getAttribute('data-node'), cls: li.getAttribute('class') })));
        expect(nodes.map((n) => n.id).sort()).toEqual(def.nodes.map((n) => n.id).sort());
        const cls = Object.fromEntries(nodes.map((n) => [n.id, n.cls]));
        for (const n of def.nodes) expect(cls[n.id]).toContain(`k-${n.type}`);
        expect(cls.billing).toContain('global');
        expect(cls.greeting).toContain('entry');
        await until(page, 'window.dashboard.graph?.nodes().length === 6 && window.dashboard.graph.edges().length === 7');
        const at = (await page.evaluate('Object.fromEntries(window.dashboard.graph.nodes().map((n) => [n.id(), n.position()]))')) as Record<string, { x: number; y: number }>;
        expect(Object.keys(at).sort()).toEqual(def.nodes.map((n) => n.id).sort());
        expect(at.greeting!.y).toBeLessThan(at.booking!.y);
        expect(at.booking!.y).toBeLessThan(at.find_slot!.y);
        expect(at.find_slot!.y).toBeLessThan(at.bye!.y);
        expect(at.billing!.y).toBeLessThan(at.human!.y);
        expect(new Set(Object.values(at).map((p) => `${p.x},${p.y}`)).size).toBe(6); // no two in one place
        const drawnEdges = (await page.evaluate('window.dashboard.graph.edges().map((e) => e.source().id() + ">" + e.target().id())')) as string[];
        const listedEdges = await page.$$eval('.graph-edges li', (gs) => gs.map((g) => `${g.getAttribute('data-from')}>${g.getAttribute('data-to')}`));
        expect(drawnEdges.sort()).toEqual(def.edges.map((e) => `${e.from}>${e.to}`).sort());
        expect(listedEdges.sort()).toEqual(drawnEdges.sort());
        // drawn on a canvas the page's policy allows: no <style> element added, no violation
        expect(await page.evaluate("document.querySelectorAll('style').length")).toBe(0);
        expect(browser.logs.filter((l) => /Content Security Policy/i.test(l))).toEqual([]);
      })(),
    );
  });

  it('runs a chat to its end node: transcript, current node, ended reason', async () => {
    await failWithLogs(
      (async () => {
        await fresh();
        await page.click('#start-chat');
        await page.waitForSelector('#transcript li');
        expect(await transcript(page)).toEqual([['Assistant', 'Hello, this is Acme Dental.', 'greeting']]);
        expect(await currentNode(page)).toEqual(['greeting']);

        await page.fill('#say-text', 'I would like to book an appointment');
        await page.press('#say-text', 'Enter');
        await until(page, "document.querySelectorAll('#transcript li').length === 4");
        expect(await transcript(page)).toEqual([
          ['Assistant', 'Hello, this is Acme Dental.', 'greeting'],
          ['Caller', 'I would like to book an appointment', 'greeting'],
          ['Assistant', 'Sure thing.', 'greeting'],
          ['Assistant', 'Let us book your appointment.', 'booking'],
        ]);
        expect(await currentNode(page)).toEqual(['booking']);
        expect(await takenEdges(page)).toEqual(['booking']);

        await page.fill('#say-text', 'Goodbye, I am finished');
        await page.click('#say-send');
        await page.waitForSelector('#report:not([hidden]) dd');
        expect((await transcript(page)).slice(4)).toEqual([
          ['Caller', 'Goodbye, I am finished', 'booking'],
          ['Assistant', 'Thank you for calling, goodbye.', 'bye'],
        ]);
        expect(await currentNode(page)).toEqual(['bye']);
        expect(await report(page)).toEqual({ ended_reason: 'assistant-ended-call', nodes_visited: 'greeting → booking → bye' });
        expect(await page.isHidden('#say-form')).toBe(true);
        // a reply time per message
        const rows = await page.$$eval('#latency tbody tr', (trs) => trs.map((tr) => [...tr.children].map((td) => td.textContent)));
        expect(rows).toHaveLength(2);
        for (const row of rows) expect(row[2]).toMatch(/^\d+ ms$/);

        // what the page showed is the server's chat
        const { json } = await server.api('GET', '/chats');
        const chat = json.chats[0];
        expect(chat).toMatchObject({ status: 'ended', ended_reason: 'assistant-ended-call', assistant_id: assistantId, workflow_id: workflowId });
        expect(chat.nodes_visited).toEqual(['greeting', 'booking', 'bye']);
        await shot(page, 'chat');
      })(),
    );
  });

  it('runs a web call with the microphone: the caller is heard, the node moves to the end, the report shows', async () => {
    await failWithLogs(
      (async () => {
        await fresh();
        await page.click('#start-call');
        await until(page, "/in progress/.test(document.querySelector('#try-status').textContent)", 10_000);
        const callId = /Web call ([0-9a-f-]{36})/.exec((await status(page)) ?? '')![1]!;
        const live = await server.api('GET', `/calls/${callId}`);
        expect(live.json.call).toMatchObject({ type: 'web_call', transport: 'web', assistant_id: assistantId, workflow_id: workflowId });
        // the microphone as the modem needs it: no processing, into a 16 kHz context
        const settings = await page.evaluate('window.dashboard.session.audio.stream.getAudioTracks()[0].getSettings()');
        expect(settings).toMatchObject({ echoCancellation: false, noiseSuppression: false, autoGainControl: false });
        expect(await page.evaluate('window.dashboard.session.audio.ctx.sampleRate')).toBe(16000);

        // the first line moves the call to booking (the graph follows), the second to the end
        await until(page, "document.querySelector('.graph-nodes li.current')?.dataset.node === 'booking'", 20_000);
        await shot(page, 'web-call-live');
        expect(await takenEdges(page)).toEqual(['booking']);
        await page.waitForSelector('#report:not([hidden]) dd[data-field="duration"]', { timeout: 20_000 });

        const lines = await transcript(page);
        expect(lines.map(([who, text]) => [who, text])).toEqual([
          ['Assistant', 'Hello, this is Acme Dental.'],
          ['Caller', CALLER_LINES[0]],
          ['Assistant', 'Sure thing.'],
          ['Assistant', 'Let us book your appointment.'],
          ['Caller', CALLER_LINES[1]],
          ['Assistant', 'Thank you for calling, goodbye.'],
        ]);
        const times = lines.map(([, , meta]) => /^(\w+) · (\d+\.\d) s$/.exec(meta!)?.slice(1));
        expect(times.map((t) => t?.[0])).toEqual(['greeting', 'greeting', 'greeting', 'booking', 'booking', 'bye']);
        const seconds = times.map((t) => Number(t?.[1]));
        expect(seconds).toEqual([...seconds].sort((a, b) => a - b));
        expect(await currentNode(page)).toEqual(['bye']);
        const shown = await report(page);
        expect(shown).toMatchObject({ ended_reason: 'assistant-ended-call', nodes_visited: 'greeting → booking → bye' });
        expect(shown.duration).toMatch(/^\d+\.\d s$/);
        expect(await status(page)).toBe('Web call ended: assistant-ended-call');

        // each caller turn: its latency at the browser, and the server's split of it
        const rows = await page.$$eval('#latency tbody tr', (trs) => trs.map((tr) => [...tr.children].map((td) => td.textContent ?? '')));
        expect(rows.map(([n, node]) => [n, node])).toEqual([['1', 'greeting'], ['2', 'booking']]);
        for (const [, , atBrowser, atServer, split] of rows) {
          const browserMs = Number(/^(\d+) ms$/.exec(atBrowser!)?.[1]);
          const serverMs = Number(/^(\d+) ms$/.exec(atServer!)?.[1]);
          expect(browserMs).toBeGreaterThanOrEqual(0);
          expect(browserMs).toBeLessThan(2000);
          expect(serverMs).toBeGreaterThanOrEqual(0);
          expect(serverMs).toBeLessThan(2000);
          expect(split).toMatch(/^providers \d+ ms \(model \d+ ms, TTS \d+ ms\) · service \d+ ms · network \+ buffer -?\d+ ms$/);
        }
        expect(await page.$$eval('#latency tbody tr:first-child .bar span', (s) => s.map((x) => x.className))).toContain('service');
        await shot(page, 'web-call');

        // what the page showed is the call's record, and the webhook's end-of-call-report
        const ended = await server.api('GET', `/calls/${callId}`);
        expect(ended.json.call).toMatchObject({ status: 'ended', ended_reason: 'assistant-ended-call', nodes_visited: ['greeting', 'booking', 'bye'] });
        const eocr = await eventually('the end-of-call-report', () =>
          receivedMessages(server.receiver, 'end-of-call-report').find((m) => m.call?.id === callId),
        );
        expect(eocr).toMatchObject({ ended_reason: 'assistant-ended-call', nodes_visited: ['greeting', 'booking', 'bye'], workflow_id: workflowId });
        for (const line of CALLER_LINES) expect(eocr.transcript).toContain(`Caller: ${line}`);
        expect(eocr.messages.map((m: { role: string; content: string }) => [m.role, m.content])).toEqual(lines.map(([who, text]) => [who === 'Caller' ? 'user' : 'assistant', text]));
      })(),
    );
  }, 60_000);

  it('hangs a web call up with its button: the call ends customer-ended-call and its report shows', async () => {
    await failWithLogs(
      (async () => {
        await fresh();
        await page.click('#start-call');
        await until(page, "document.querySelector('#transcript .msg.assistant') !== null", 10_000);
        const callId = /Web call ([0-9a-f-]{36})/.exec((await status(page)) ?? '')![1]!;
        expect(await page.isEnabled('#hangup')).toBe(true);
        await page.click('#hangup');
        await page.waitForSelector('#report:not([hidden]) dd[data-field="duration"]', { timeout: 10_000 });
        expect(await report(page)).toMatchObject({ ended_reason: 'customer-ended-call', nodes_visited: 'greeting' });
        expect(await status(page)).toBe('Web call ended: customer-ended-call');
        expect(await page.isEnabled('#start-call')).toBe(true);
        const { json } = await server.api('GET', `/calls/${callId}`);
        expect(json.call).toMatchObject({ status: 'ended', ended_reason: 'customer-ended-call' });
      })(),
    );
  });
});
