/**
 * Live control across two processes on PostgreSQL + Redis (DECISIONS 16): a web call runs in one
 * process, its controls are sent to the API of another; each is applied by the process that runs
 * the call before the other answers 202, and what it said is heard by the browser. Between a
 * control and its delivery the test restarts Redis (a private `redis-server` without persistence:
 * the word is lost with everything else): the control is still applied, once. A process that does
 * not take a control in time makes the request fail (503) having done nothing: the control is never
 * applied later. The call's process reaches Redis through a TCP proxy the test cuts, so that the
 * restart falls between the word and its delivery. Needs redis-server and PostgreSQL on
 * 127.0.0.1:5432 (or DATABASE_URL); skipped without them.
 */
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { WebCaller } from '../../src/sim/web-caller.js';
import { openDb } from '../../src/store/db.js';
import { eventually, frontDesk, sandboxAssistant, startCallingServer, type CallingServer } from '../helpers/calls.js';
import { createPostgresDb } from '../helpers/db.js';
import { startPrivateRedis, startTcpProxy, type PrivateRedis, type TcpProxy } from '../helpers/outages.js';

const PG_BASE = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

async function postgresAnswers(): Promise<boolean> {
  const c = new pg.Client({ connectionString: PG_BASE, connectionTimeoutMillis: 1000 });
  c.on('error', () => undefined);
  try {
    await c.connect();
    return true;
  } catch {
    return false;
  } finally {
    await c.end().catch(() => undefined);
  }
}
const ready = await postgresAnswers();

describe.skipIf(!ready)('live control across two processes (PostgreSQL, a private Redis the test restarts)', () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
  });

  /**
   * `runner` runs the call and reaches Redis through `proxy`; `api` is another process on the same
   * database and Redis, where the controls are sent. A web call to the front desk, in progress.
   */
  async function setUp() {
    const redis: PrivateRedis = await startPrivateRedis();
    cleanups.push(() => redis.stop());
    let restartedAt = 0;
    /** Stops Redis and starts it again, empty (no persistence). */
    const restartRedis = async () => {
      await redis.restart();
      restartedAt = Date.now();
    };
    const proxy: TcpProxy = await startTcpProxy({ host: '127.0.0.1', port: redis.port });
    cleanups.push(() => proxy.close());
    const db = await createPostgresDb(PG_BASE, 'sb_control');
    const runner = await startCallingServer({ REDIS_URL: `redis://127.0.0.1:${proxy.port}` }, {}, {}, db);
    cleanups.push(async () => {
      await proxy.restore().catch(() => undefined);
      await runner.close();
    });
    const again = await openDb({ databaseUrl: db.url });
    const api = await startCallingServer({ REDIS_URL: redis.url }, {}, {}, { db: again, url: db.url, drop: () => again.close() });
    cleanups.push(() => api.close());

    const assistantId = await runner.createAssistant(sandboxAssistant());
    const workflowId = await runner.createWorkflow(frontDesk);
    const browser = new WebCaller({ baseUrl: runner.baseUrl, apiKey: runner.key });
    cleanups.push(() => browser.close());
    const callId = await browser.start({ assistant_id: assistantId, workflow_id: workflowId });
    await eventually('the call in progress', () => runner.runtime.calls.liveCall(callId));
    await browser.hear('Acme Dental');
    await browser.quiet();

    /** A control sent to the other process's API, with the runner's key (its organization's call). */
    const control = async (body: unknown) => {
      const res = await api.app.inject({
        method: 'POST',
        url: `/calls/${callId}/control`,
        headers: { authorization: `Bearer ${runner.key}` },
        payload: body as Record<string, unknown>,
      });
      return { status: res.statusCode, json: res.json(), headers: res.headers };
    };
    /** The call as the runner has it. */
    const record = () => runner.runtime.calls.liveCall(callId)?.record;
    // first of the cleanups: a process closed while its dial queue's worker still reconnects after
    // a Redis restart waits for that worker (main.ts bounds it), so the servers close once it is back
    cleanups.push(async () => {
      const settle = restartedAt + 5_000 - Date.now();
      if (restartedAt && settle > 0) await new Promise((r) => setTimeout(r, settle));
    });
    return { restartRedis, proxy, runner, api, browser, callId, control, record };
  }

  it('say, add-message and goto reach the process that runs the call and are applied before the answer', async () => {
    const { browser, control, record, callId } = await setUp();
    const said = await control({ type: 'say', text: 'A specialist is listening in.' });
    expect(said.status, JSON.stringify(said.json)).toBe(202);
    expect(said.json.call).toMatchObject({ id: callId, status: 'in-progress' });
    await browser.hear('specialist is listening');

    const added = await control({ type: 'add-message', role: 'system', content: 'The caller is a premium patient.' });
    expect(added.status).toBe(202);
    // the answer shows the call as its process has it once the control was applied
    expect(added.json.call.messages).toContainEqual(expect.objectContaining({ role: 'system', content: 'The caller is a premium patient.', source: 'control' }));

    const moved = await control({ type: 'goto', node_id: 'booking' });
    expect(moved.status).toBe(202);
    expect(moved.json.call.current_node).toBe('booking');
    await browser.hear('book your appointment');

    const wrong = await control({ type: 'goto', node_id: 'nowhere' });
    expect(wrong.status).toBe(400);
    expect(wrong.json.details).toEqual(['node_id: the workflow has no node "nowhere" (it has: greeting, booking, bye)']);

    await eventually('the said line in the record', () => record()?.messages.some((m) => m.content === 'A specialist is listening in.'));
    expect(record()!.messages.filter((m) => m.source === 'control').map((m) => [m.role, m.content])).toEqual([
      ['assistant', 'A specialist is listening in.'],
      ['system', 'The caller is a premium patient.'],
    ]);
    expect(record()!.nodes_visited).toEqual(['greeting', 'booking']);
  });

  it('a Redis restart between the control and its delivery: the control is applied, once, and the answer is 202', async () => {
    const { restartRedis, proxy, browser, control, record } = await setUp();
    // the call's process cannot reach Redis: the word waits there, untaken
    await proxy.cut();
    const answer = control({ type: 'say', text: 'Thank you for waiting, we are nearly done.' });
    await new Promise((r) => setTimeout(r, 300));
    await restartRedis(); // the word is gone with everything else
    await proxy.restore();
    const res = await answer;
    expect(res.status, JSON.stringify(res.json)).toBe(202);
    await browser.hear('nearly done');
    await browser.quiet();
    expect(record()!.messages.filter((m) => m.content === 'Thank you for waiting, we are nearly done.')).toEqual([
      expect.objectContaining({ role: 'assistant', source: 'control' }),
    ]);
    expect(browser.heard.filter((l) => /nearly done/i.test(l.text))).toHaveLength(1);
  });

  it('no process takes the control within 5 s: 503 having done nothing, and it is never applied later', async () => {
    const { proxy, browser, control, record } = await setUp();
    await proxy.cut();
    const started = Date.now();
    const res = await control({ type: 'say', text: 'This line must never be said.' });
    expect(res.status).toBe(503);
    expect(res.json).toMatchObject({ error: 'Unavailable', message: expect.stringContaining('nothing was done') });
    expect(res.headers['retry-after']).toBe('5');
    expect(Date.now() - started).toBeGreaterThanOrEqual(5_000);
    await proxy.restore();
    // the call's process reads its words again (on reconnecting, and every 2 s): none is left
    await new Promise((r) => setTimeout(r, 4_000));
    expect(record()!.messages.some((m) => m.content === 'This line must never be said.')).toBe(false);
    expect(browser.heardText()).not.toMatch(/never be said/i);
    // and the call still takes controls
    expect((await control({ type: 'say', text: 'Still here.' })).status).toBe(202);
    await browser.hear('still here');
  });

  it('end through the other process, across a Redis restart: its message is heard, then the call ends api-ended-call', async () => {
    const { restartRedis, proxy, browser, control, runner, callId } = await setUp();
    await proxy.cut();
    const answer = control({ type: 'end', message: 'We have to close the line now, goodbye.' });
    await new Promise((r) => setTimeout(r, 300));
    await restartRedis();
    await proxy.restore();
    expect((await answer).status).toBe(202);
    await browser.hear('close the line now');
    await browser.ended(20_000);
    const logged = await eventually('the call ended in the log', async () => {
      const c = await runner.store.calls.get(runner.orgId, callId);
      return c?.status === 'ended' ? c : null;
    });
    expect(logged.ended_reason).toBe('api-ended-call');
    expect(logged.messages.at(-1)).toMatchObject({ role: 'assistant', content: 'We have to close the line now, goodbye.', source: 'control' });
    expect(browser.events.at(-1)).toEqual({ type: 'ended', ended_reason: 'api-ended-call' });
  });

  it('POST /calls/{id}/end through the other process, across a Redis restart, ends the call: 202, api-ended-call', async () => {
    const { restartRedis, proxy, browser, api, runner, callId } = await setUp();
    await proxy.cut();
    const answer = api.app.inject({ method: 'POST', url: `/calls/${callId}/end`, headers: { authorization: `Bearer ${runner.key}` } });
    await new Promise((r) => setTimeout(r, 300));
    await restartRedis();
    await proxy.restore();
    const res = await answer;
    expect(res.statusCode, res.body).toBe(202);
    await browser.ended(20_000);
    await eventually('the call ended by the API', async () => (await runner.store.calls.get(runner.orgId, callId))?.ended_reason === 'api-ended-call', 15_000);
  });
});
