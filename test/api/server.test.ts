/** The same app on a real listening server, spoken to over HTTP with undici. */
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Agent, fetch, request } from 'undici';
import { BODY_LIMIT } from '../../src/app.js';
import { build, sampleDefinition, type TestApp } from '../helpers/app.js';

let t: TestApp;
let base: string;
const agent = new Agent({ keepAliveTimeout: 10_000 });

beforeAll(async () => {
  t = await build();
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  const { port } = t.app.server.address() as AddressInfo;
  base = `http://127.0.0.1:${port}`;
});
afterAll(async () => {
  await agent.close();
  await t.close();
});

async function call(method: 'GET' | 'POST' | 'PATCH' | 'DELETE', path: string, body?: unknown, key: string | null = t.key) {
  const res = await request(`${base}${path}`, {
    method,
    dispatcher: agent,
    headers: {
      ...(key === null ? {} : { authorization: `Bearer ${key}` }),
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.body.text();
  return {
    status: res.statusCode,
    headers: res.headers,
    text,
    json: () => JSON.parse(text) as Record<string, any>,
  };
}

describe('over HTTP', () => {
  it('create → attach → delete refused (409) → detach → delete (204) → gone (404)', async () => {
    const created = await call('POST', '/workflows', { name: 'Front desk', definition: sampleDefinition(4) });
    expect(created.status).toBe(201);
    expect(created.headers['content-type']).toMatch(/^application\/json/);
    const workflow = created.json().workflow;
    expect(workflow).toMatchObject({ name: 'Front desk', is_active: true, definition: sampleDefinition(4) });

    const number = await call('POST', '/numbers', { number: '+14155550142', name: 'Main line' });
    expect(number.status).toBe(201);
    const numberId = number.json().number.id;

    const attached = await call('PATCH', `/numbers/${numberId}`, { workflow_id: workflow.id });
    expect(attached.status).toBe(200);
    expect(attached.json().number.workflow_id).toBe(workflow.id);

    const refused = await call('DELETE', `/workflows/${workflow.id}`);
    expect(refused.status).toBe(409);
    expect(refused.json()).toEqual({
      error: 'In use',
      message: expect.stringContaining('PATCH /numbers/{id}'),
      details: [`number ${numberId} (+14155550142)`],
    });
    expect((await call('GET', `/workflows/${workflow.id}`)).status).toBe(200);

    const detached = await call('PATCH', `/numbers/${numberId}`, { workflow_id: null });
    expect(detached.status).toBe(200);
    expect(detached.json().number.workflow_id).toBeNull();

    const deleted = await call('DELETE', `/workflows/${workflow.id}`);
    expect(deleted.status).toBe(204);
    expect(deleted.text).toBe('');
    expect(deleted.headers['content-type']).toBeUndefined();

    const gone = await call('GET', `/workflows/${workflow.id}`);
    expect(gone.status).toBe(404);
    expect(gone.json()).toEqual({ error: 'Not found', message: expect.any(String) });
    const list = (await call('GET', '/workflows')).json().workflows as { id: string }[];
    expect(list.some((w) => w.id === workflow.id)).toBe(false);
  });

  it('401 without a key, and with a bad one (fetch)', async () => {
    for (const headers of [{}, { authorization: 'Bearer sk_live_nope' }, { authorization: 'Basic Zm9vOmJhcg==' }]) {
      const res = await fetch(`${base}/workflows`, { headers, dispatcher: agent });
      expect(res.status).toBe(401);
      expect(res.headers.get('content-type')).toMatch(/^application\/json/);
      expect(await res.json()).toEqual({ error: 'Invalid API key', message: expect.any(String) });
    }
  });

  it('413 for a body over 1 MiB, announced by Content-Length', async () => {
    const res = await fetch(`${base}/workflows`, {
      method: 'POST',
      dispatcher: agent,
      headers: { authorization: `Bearer ${t.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'x'.repeat(BODY_LIMIT), definition: sampleDefinition() }),
    });
    expect(res.status).toBe(413);
    expect(await res.json()).toEqual({ error: 'Payload too large', message: expect.any(String) });
  });

  it('413 for a body over 1 MiB sent chunked, without Content-Length', async () => {
    const chunk = Buffer.alloc(64 * 1024, 'x');
    let sent = 0;
    const stream = new Readable({
      read() {
        if (sent === 0) this.push('{"name":"');
        if (sent > BODY_LIMIT + chunk.length) {
          this.push('"}');
          this.push(null);
          return;
        }
        sent += chunk.length;
        this.push(chunk);
      },
    });
    const res = await request(`${base}/workflows`, {
      method: 'POST',
      dispatcher: agent,
      headers: { authorization: `Bearer ${t.key}`, 'content-type': 'application/json' },
      body: stream,
    }).catch((err: Error) => err);
    // the server may answer before the client has finished sending; it must never accept it
    if (res instanceof Error) {
      expect(res.message).toMatch(/closed|reset|socket|EPIPE/i);
    } else {
      expect(res.statusCode).toBe(413);
      expect(await res.body.json()).toEqual({ error: 'Payload too large', message: expect.any(String) });
    }
    // and the server is still fine
    expect((await call('GET', '/workflows')).status).toBe(200);
  });

  it('400 for malformed JSON and 404 for an unknown route, over the wire', async () => {
    const res = await request(`${base}/workflows`, {
      method: 'POST',
      dispatcher: agent,
      headers: { authorization: `Bearer ${t.key}`, 'content-type': 'application/json' },
      body: '{"name":',
    });
    expect(res.statusCode).toBe(400);
    expect(await res.body.json()).toEqual({
      error: 'Invalid request',
      message: expect.any(String),
      details: ['body: malformed JSON'],
    });
    const unknown = await call('GET', '/nope');
    expect(unknown.status).toBe(404);
    expect(unknown.json().error).toBe('Not found');
  });

  it('serves concurrent clients on kept-alive connections', async () => {
    const results = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        i % 4 === 0
          ? call('POST', '/workflows', { name: `Concurrent ${i}`, definition: sampleDefinition() })
          : call('GET', i % 4 === 1 ? '/workflows' : i % 4 === 2 ? '/catalog' : '/account'),
      ),
    );
    for (const [i, r] of results.entries()) expect(r.status, `request ${i}`).toBe(i % 4 === 0 ? 201 : 200);
  });

  it('/healthz, /readyz and /openapi.json over HTTP', async () => {
    expect(await (await fetch(`${base}/healthz`, { dispatcher: agent })).json()).toEqual({ status: 'ok' });
    const ready = await fetch(`${base}/readyz`, { dispatcher: agent });
    expect(ready.status).toBe(200);
    const openapi = await fetch(`${base}/openapi.json`, { dispatcher: agent });
    expect(((await openapi.json()) as { openapi: string }).openapi).toMatch(/^3\./);
  });
});
