/**
 * The error table of DECISIONS 2, case by case: every refusal has exactly the documented body,
 * and nothing a client sends turns into a 500.
 */
import { connect, type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import Fastify, { type LightMyRequestResponse } from 'fastify';
import { request as httpRequest } from 'undici';
import { BODY_LIMIT } from '../../src/app.js';
import { registerErrorHandler } from '../../src/api/errors.js';
import type { TwilioTelephony } from '../../src/telephony/twilio/transport.js';
import { twilioRoutes, VOICE_PATH } from '../../src/telephony/twilio/routes.js';
import { build, pipelineAssistant, sampleDefinition, type TestApp } from '../helpers/app.js';

let t: TestApp;
let ids: { workflow: string; assistant: string; number: string };

beforeAll(async () => {
  t = await build();
  const workflow = (await t.request('POST', '/workflows', { name: 'W', definition: sampleDefinition() })).json();
  const assistant = (await t.request('POST', '/assistants', pipelineAssistant)).json();
  const number = (await t.request('POST', '/numbers', { number: '+14155550199' })).json();
  ids = { workflow: workflow.workflow.id, assistant: assistant.assistant.id, number: number.number.id };
});
afterAll(async () => {
  await t.close();
});

/** Every write endpoint, as [method, url] (ids filled in once they exist). */
const writes = () =>
  [
    ['POST', '/workflows'],
    ['PATCH', `/workflows/${ids.workflow}`],
    ['POST', '/assistants'],
    ['PATCH', `/assistants/${ids.assistant}`],
    ['POST', '/numbers'],
    ['PATCH', `/numbers/${ids.number}`],
    ['PATCH', '/account'],
  ] as const;

function raw(method: string, url: string, payload: string | Buffer | undefined, headers: Record<string, string> = {}) {
  return t.app.inject({
    method: method as 'POST',
    url,
    headers: { authorization: `Bearer ${t.key}`, ...headers },
    ...(payload === undefined ? {} : { payload }),
  });
}

const json = { 'content-type': 'application/json' };

function expectInvalidRequest(res: LightMyRequestResponse, detail?: RegExp) {
  expect(res.statusCode, res.body).toBe(400);
  const body = res.json();
  expect(body.error).toBe('Invalid request');
  expect(Object.keys(body).every((k) => ['error', 'message', 'details'].includes(k))).toBe(true);
  expect(Array.isArray(body.details)).toBe(true);
  expect(body.details.length).toBeGreaterThan(0);
  for (const d of body.details) expect(typeof d).toBe('string');
  if (detail) expect(body.details.some((d: string) => detail.test(d)), body.details.join('\n')).toBe(true);
  return body as { error: string; message?: string; details: string[] };
}

describe('400 Invalid request: bodies that are not JSON objects', () => {
  it('malformed JSON, on every write endpoint', async () => {
    for (const payload of ['{"name":', '{name: "x"}', "{'name':'x'}", '{"a":1,}', 'nul', '{"a":1}}', '\u00ff\u00fe']) {
      for (const [method, url] of writes()) {
        expectInvalidRequest(await raw(method, url, payload, json), /^body: malformed JSON/);
      }
    }
  });

  it('a Content-Type other than JSON, text/plain included', async () => {
    for (const type of ['application/xml', 'application/x-www-form-urlencoded', 'application/octet-stream', 'multipart/form-data; boundary=x', 'nonsense', 'text/plain', 'text/plain; charset=utf-8']) {
      for (const [method, url] of writes()) {
        const body = expectInvalidRequest(await raw(method, url, '{"name":"x"}', { 'content-type': type }));
        expect(body.details, type).toEqual(['body: Content-Type must be application/json']);
      }
    }
  });

  it('an empty body with a JSON Content-Type, and no body at all', async () => {
    for (const [method, url] of writes()) {
      expectInvalidRequest(await raw(method, url, '', json), /^body: empty, but Content-Type is application\/json/);
      expectInvalidRequest(await raw(method, url, undefined), /must be an object/);
    }
  });

  it('JSON that is not an object', async () => {
    for (const payload of ['null', '[]', '[{"name":"x"}]', '"x"', '42', 'true']) {
      for (const [method, url] of writes()) {
        expectInvalidRequest(await raw(method, url, payload, json), /^\(root\): must be an object/);
      }
    }
  });

  it('a Content-Length that does not match the body', async () => {
    const res = await raw('PATCH', '/account', '{}', { ...json, 'content-length': '10' });
    expectInvalidRequest(res, /Content-Length/);
  });

  it('unknown fields are named, on every write endpoint', async () => {
    for (const [method, url] of writes()) {
      const body = expectInvalidRequest(await raw(method, url, JSON.stringify({ colour: 'teal' }), json));
      expect(body.details).toContain('colour: unknown field');
    }
  });
});

describe('400, never 500: prototype keys', () => {
  const poisoned = [
    '{"__proto__":{"polluted":true}}',
    '{"name":"x","__proto__":{"polluted":true}}',
    '{"constructor":{"prototype":{"polluted":true}}}',
    '{"name":"x","definition":{"__proto__":{"polluted":true}}}',
    '{"webhook":{"url":"https://example.com/h","__proto__":{"polluted":true}}}',
    '{"analysis_plan":{"structured_data_plan":{"schema":{"constructor":{"prototype":{"polluted":true}}}}}}',
    '{"llm_config":{"provider":"sandbox","tools":[{"name":"t","parameters":{"type":"object","properties":{"__proto__":{"x":1}}}}]}}',
  ];

  it('__proto__ and constructor.prototype anywhere in a body are refused, and pollute nothing', async () => {
    for (const payload of poisoned) {
      for (const [method, url] of writes()) {
        expectInvalidRequest(await raw(method, url, payload, json));
      }
    }
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(Object.prototype).not.toHaveProperty('polluted');
  });

  it('keys named like Object.prototype members are just unknown fields', async () => {
    for (const key of ['constructor', 'toString', 'hasOwnProperty', 'valueOf', 'prototype']) {
      for (const [method, url] of writes()) {
        const body = expectInvalidRequest(await raw(method, url, JSON.stringify({ [key]: 'x' }), json));
        expect(body.details).toContain(`${key}: unknown field`);
      }
    }
  });
});

describe('400, never 500: text and nesting the database cannot store', () => {
  it('a NUL character in any string is refused with its path', async () => {
    const def = sampleDefinition() as Record<string, unknown>;
    def.global_prompt = 'Be kind.\u0000';
    const inNode = sampleDefinition() as { nodes: Record<string, unknown>[]; edges: Record<string, unknown>[] };
    inNode.nodes[1]!.instructions = 'Be \u0000 kind.';
    inNode.edges[0]!.description = '\u0000';
    const cases: [string, string, unknown, RegExp][] = [
      ['POST', '/workflows', { name: 'a\u0000b', definition: sampleDefinition() }, /^name: must not contain the NUL character/],
      ['POST', '/workflows', { name: 'x', definition: def }, /^definition\.global_prompt: must not contain the NUL/],
      ['PATCH', `/workflows/${ids.workflow}`, { definition: def }, /^definition\.global_prompt: /],
      // a node or an edge of a definition is named, as in every detail about a definition
      ['POST', '/workflows', { name: 'x', definition: inNode }, /^definition\.nodes\[1\] \(step_1\)\.instructions: must not contain the NUL/],
      ['POST', '/workflows', { name: 'x', definition: inNode }, /^definition\.edges\[0\] \(step_0 → step_1\)\.description: must not contain the NUL/],
      ['POST', '/assistants', { ...pipelineAssistant, first_message: 'Hi\u0000' }, /^first_message: must not contain/],
      ['PATCH', `/assistants/${ids.assistant}`, { business_name: '\u0000' }, /^business_name: /],
      ['POST', '/numbers', { number: '+14155550198', name: '\u0000' }, /^name: /],
      ['PATCH', `/numbers/${ids.number}`, { name: 'x\u0000' }, /^name: /],
      ['PATCH', '/account', { webhook: { url: 'https://example.com/h', secret: 'secret-\u0000-value' } }, /^webhook\.secret: /],
      [
        'POST',
        '/assistants',
        { ...pipelineAssistant, analysis_plan: { structured_data_plan: { schema: { 'k\u0000': 1 } } } },
        /^analysis_plan\.structured_data_plan\.schema\[.*\]: field name must not contain the NUL/,
      ],
    ];
    for (const [method, url, body, detail] of cases) {
      expectInvalidRequest(await t.request(method as 'POST', url, body), detail);
    }
  });

  it('an unpaired UTF-16 surrogate is refused; a real astral character is fine', async () => {
    for (const lone of ['\ud800', '\udfff', 'a\ud83db', '\ude00x']) {
      expectInvalidRequest(
        await t.request('POST', '/workflows', { name: lone, definition: sampleDefinition() }),
        /^name: must not contain an unpaired UTF-16 surrogate/,
      );
      expectInvalidRequest(
        await t.request('PATCH', `/assistants/${ids.assistant}`, { first_message: lone }),
        /^first_message: /,
      );
    }
    const ok = await t.request('POST', '/workflows', { name: 'Emoji 😀 desk', definition: sampleDefinition() });
    expect(ok.statusCode).toBe(201);
    expect(ok.json().workflow.name).toBe('Emoji 😀 desk');
  });

  it('nesting deeper than 64 levels is refused, however deep (1 MiB of brackets included)', async () => {
    const schemaAt = (inner: string) =>
      JSON.stringify({ ...pipelineAssistant, analysis_plan: { structured_data_plan: { schema: { x: 0 } } } }).replace(
        '"x":0',
        `"x":${inner}`,
      );
    const shallow = await raw('POST', '/assistants', schemaAt('['.repeat(50) + ']'.repeat(50)), json);
    expect(shallow.statusCode).toBe(201);
    for (const depth of [70, 10_000, Math.floor(BODY_LIMIT / 2) - 200]) {
      const res = await raw('POST', '/assistants', schemaAt('['.repeat(depth) + ']'.repeat(depth)), json);
      const body = expectInvalidRequest(res, /nested deeper than 64 levels$/);
      expect(body.details).toHaveLength(1);
    }
    const tools = JSON.stringify({
      llm_config: { provider: 'sandbox', tools: [{ name: 't', parameters: { type: 'object', properties: { a: 0 } } }] },
    }).replace('"a":0', `"a":${'{"b":'.repeat(20_000)}1${'}'.repeat(20_000)}`);
    expectInvalidRequest(await raw('PATCH', `/assistants/${ids.assistant}`, tools, json), /nested deeper than 64 levels$/);
  });
});

describe('400, never null: numbers too large for a double (1e400)', () => {
  const send = (method: string, url: string, body: unknown, big: string) =>
    raw(method, url, JSON.stringify(body).replace('"BIG"', big), json);
  const toolNodeDefinition = () => ({
    version: 1,
    entry_node: 'lookup',
    nodes: [
      { id: 'lookup', type: 'tool', tool_name: 'lookup', url: 'https://tools.example.com/x', arguments: { limit: 'BIG' } },
      { id: 'bye', type: 'end', first_line: 'Bye.' },
    ],
    edges: [{ from: 'lookup', to: 'bye' }],
  });

  it('is refused with its path wherever it is, and nothing is stored', async () => {
    const detail = (path: string) => `${path}: must be a finite number (at most about ±1.8e308 in size)`;
    const assistantsBefore = (await t.request('GET', '/assistants')).body;
    const workflowsBefore = (await t.request('GET', '/workflows')).body;
    const cases: [string, string, unknown, string, string][] = [
      ['POST', '/assistants', { ...pipelineAssistant, llm_config: { provider: 'sandbox', temperature: 'BIG' } }, '1e400', 'llm_config.temperature'],
      [
        'POST',
        '/assistants',
        { ...pipelineAssistant, llm_config: { provider: 'sandbox', tools: [{ name: 't', parameters: { type: 'object', properties: { n: { type: 'number', maximum: 'BIG' } } } }] } },
        '1e400',
        'llm_config.tools[0].parameters.properties.n.maximum',
      ],
      ['PATCH', `/assistants/${ids.assistant}`, { analysis_plan: { structured_data_plan: { enabled: true, schema: { type: 'object', minimum: 'BIG' } } } }, '-1E+999', 'analysis_plan.structured_data_plan.schema.minimum'],
      ['POST', '/workflows', { name: 'W', definition: toolNodeDefinition() }, '1e400', 'definition.nodes[0] (lookup).arguments.limit'],
      ['PATCH', `/workflows/${ids.workflow}`, { definition: toolNodeDefinition() }, '-1e309', 'definition.nodes[0] (lookup).arguments.limit'],
      ['PATCH', `/numbers/${ids.number}`, { name: 'BIG' }, '9'.repeat(400), 'name'],
    ];
    for (const [method, url, body, big, path] of cases) {
      const res = await send(method, url, body, big);
      expect(res.statusCode, `${method} ${url} ${path}`).toBe(400);
      expect(res.json()).toEqual({ error: 'Invalid request', message: 'The request is not valid.', details: [detail(path)] });
    }
    expect((await t.request('GET', '/assistants')).body).toBe(assistantsBefore);
    expect((await t.request('GET', '/workflows')).body).toBe(workflowsBefore);
  });

  it('large finite numbers are still numbers (1e308 is read, and refused only for its bounds)', async () => {
    const res = await send('POST', '/assistants', { ...pipelineAssistant, llm_config: { provider: 'sandbox', temperature: 'BIG' } }, '1e308');
    expectInvalidRequest(res, /^llm_config\.temperature: must be at most 2/);
  });
});

describe('404 Not found', () => {
  it('an unknown route, or a known path with an unknown method', async () => {
    for (const [method, url] of [
      ['GET', '/nope'],
      ['GET', '/workflows/x/y'],
      ['PUT', '/workflows'],
      ['POST', `/workflows/${ids.workflow}`],
      ['PUT', '/account'],
      ['DELETE', '/account'],
      ['POST', '/catalog'],
      ['GET', '/v1/workflows'],
    ] as const) {
      const res = await raw(method, url, undefined);
      expect(res.statusCode, `${method} ${url}`).toBe(404);
      expect(res.json()).toEqual({ error: 'Not found', message: expect.any(String) });
    }
  });

  it('non-UUID, over-long and badly encoded ids are 404 on every resource; a bad URL is a 400', async () => {
    for (const resource of ['workflows', 'assistants', 'numbers']) {
      for (const id of ['x', '123', `${ids.workflow}x`, '%00', 'a'.repeat(101), 'a'.repeat(5000)]) {
        for (const method of ['GET', 'PATCH', 'DELETE'] as const) {
          const res = await raw(method, `/${resource}/${id}`, method === 'PATCH' ? '{}' : undefined, method === 'PATCH' ? json : {});
          expect(res.statusCode, `${method} /${resource}/${id.slice(0, 20)}`).toBe(404);
          expect(res.json()).toEqual({ error: 'Not found', message: expect.any(String) });
        }
      }
      expectInvalidRequest(await raw('GET', `/${resource}/%E0%A4%A`, undefined), /^path: not a valid URL/);
    }
  });

  it('a trailing slash is the same route', async () => {
    expect((await raw('GET', '/workflows/', undefined)).statusCode).toBe(200);
    expect((await raw('GET', `/workflows/${ids.workflow}/`, undefined)).statusCode).toBe(200);
  });
});

describe('413 Payload too large', () => {
  it('a body over 1 MiB, on every write endpoint', async () => {
    const payload = JSON.stringify({ name: 'x'.repeat(BODY_LIMIT) });
    for (const [method, url] of writes()) {
      const res = await raw(method, url, payload, json);
      expect(res.statusCode).toBe(413);
      expect(res.json()).toEqual({ error: 'Payload too large', message: expect.stringContaining('1 MiB') });
    }
  });

  it('the Twilio voice webhook names its own limit, 64 KiB', async () => {
    const app = Fastify();
    registerErrorHandler(app);
    const twilio = { voice: async () => ({ status: 200, twiml: '<Response/>' }), attachMedia: () => undefined } as unknown as TwilioTelephony;
    await twilioRoutes(app, { twilio, publicUrl: 'http://localhost' });
    const limit = 64 * 1024;
    try {
      const form = { 'content-type': 'application/x-www-form-urlencoded' };
      const fits = await app.inject({ method: 'POST', url: VOICE_PATH, headers: form, payload: `To=%2B1&Pad=${'x'.repeat(limit - 20)}` });
      expect(fits.statusCode).toBe(200);
      for (const headers of [form, { 'content-type': 'application/json' }]) {
        const res = await app.inject({ method: 'POST', url: VOICE_PATH, headers, payload: 'x'.repeat(limit + 1) });
        expect(res.statusCode).toBe(413);
        expect(res.json()).toEqual({ error: 'Payload too large', message: 'The request body is over the 64 KiB limit.' });
      }
    } finally {
      await app.close();
    }
  });

  it('the limit is exactly 1 MiB: one byte under is read (and refused for what it says)', async () => {
    const skeleton = JSON.stringify({ name: '' });
    const at = '{"name":"' + 'x'.repeat(BODY_LIMIT - skeleton.length) + '"}';
    expect(Buffer.byteLength(at)).toBe(BODY_LIMIT);
    const under = await raw('POST', '/workflows', at, json);
    expectInvalidRequest(under, /^name: must be at most 200 characters/);
    const over = await raw('POST', '/workflows', at.replace('"x', '"xx'), json);
    expect(over.statusCode).toBe(413);
  });
});

describe('over a socket: what Node refuses before routing has the same bodies', () => {
  let port: number;
  beforeAll(async () => {
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    port = (t.app.server.address() as AddressInfo).port;
  });

  /** Writes raw bytes and reads the whole answer (the server closes the connection). */
  const rawHttp = (bytes: string) =>
    new Promise<{ head: string; body: string }>((resolve, reject) => {
      const socket = connect(port, '127.0.0.1', () => socket.write(bytes));
      let data = '';
      socket.setEncoding('utf8');
      socket.on('data', (chunk: string) => (data += chunk));
      socket.on('error', reject);
      socket.on('close', () => {
        const at = data.indexOf('\r\n\r\n');
        resolve({ head: data.slice(0, at), body: data.slice(at + 4) });
      });
    });

  it('431: request headers over the limit', async () => {
    const res = await httpRequest(`http://127.0.0.1:${port}/assistants`, {
      headers: { authorization: `Bearer ${t.key}`, 'x-padding': 'a'.repeat(20_000) },
    });
    expect(res.statusCode).toBe(431);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(await res.body.json()).toEqual({ error: 'Request headers too large', message: 'The request headers are over the 16 KiB limit.' });
  });

  it('400: bytes that are not HTTP', async () => {
    const { head, body } = await rawHttp('HELLO THERE\r\n\r\n');
    expect(head).toMatch(/^HTTP\/1\.1 400 /);
    expect(JSON.parse(body)).toEqual({ error: 'Invalid request', message: 'The request could not be read.', details: ['request: not valid HTTP/1.1'] });
  });

  it('a text/plain body, sent for real', async () => {
    const res = await httpRequest(`http://127.0.0.1:${port}/assistants`, {
      method: 'POST',
      headers: { authorization: `Bearer ${t.key}`, 'content-type': 'text/plain' },
      body: JSON.stringify(pipelineAssistant),
    });
    expect(res.statusCode).toBe(400);
    expect(await res.body.json()).toEqual({
      error: 'Invalid request',
      message: 'The request is not valid.',
      details: ['body: Content-Type must be application/json'],
    });
  });
});

describe('429 Too many requests', () => {
  let limited: TestApp;
  beforeAll(async () => {
    limited = await build({ env: { RATE_LIMIT_PER_MINUTE: '3' } });
  });
  afterAll(async () => {
    await limited.close();
  });

  it('past the per-minute limit, with Retry-After; per organization; health is not limited', async () => {
    for (let i = 0; i < 3; i++) expect((await limited.request('GET', '/workflows')).statusCode).toBe(200);
    for (const [method, url, body] of [
      ['GET', '/workflows', undefined],
      ['POST', '/workflows', { name: 'x', definition: sampleDefinition() }],
      ['GET', '/catalog', undefined],
    ] as const) {
      const res = await limited.request(method, url, body);
      expect(res.statusCode).toBe(429);
      expect(res.json()).toEqual({ error: 'Too many requests', message: expect.any(String) });
      const retryAfter = Number(res.headers['retry-after']);
      expect(Number.isInteger(retryAfter)).toBe(true);
      expect(retryAfter).toBeGreaterThan(0);
      expect(retryAfter).toBeLessThanOrEqual(60);
    }
    // another organization has its own budget
    expect((await limited.request('GET', '/workflows', undefined, limited.otherKey)).statusCode).toBe(200);
    // a missing key is still a 401, not a 429
    expect((await limited.request('GET', '/workflows', undefined, null)).statusCode).toBe(401);
    for (let i = 0; i < 5; i++) {
      expect((await limited.app.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);
    }
  });
});

describe('500 Internal error', () => {
  let broken: TestApp;
  beforeAll(async () => {
    broken = await build();
    // the database goes away under a running app
    const db = broken.testDb.db;
    await db.close();
    // already closed: the helper's cleanup must still drop the test database
    db.close = async () => undefined;
  });
  afterAll(async () => {
    await broken.close();
  });

  const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

  it('answers exactly {"error":"Internal error","message":"request <id>"}, leaking nothing', async () => {
    const seen = new Set<string>();
    for (const [method, url, body] of [
      ['GET', '/workflows', undefined],
      ['POST', '/workflows', { name: 'x', definition: sampleDefinition() }],
      ['GET', '/account', undefined],
      ['PATCH', `/numbers/${'0'.repeat(8)}-0000-4000-8000-${'0'.repeat(12)}`, { name: 'x' }],
    ] as const) {
      const res = await broken.request(method, url, body);
      expect(res.statusCode, `${method} ${url}`).toBe(500);
      expect(res.headers['content-type']).toMatch(/^application\/json/);
      const parsed = res.json();
      expect(Object.keys(parsed).sort()).toEqual(['error', 'message']);
      expect(parsed.error).toBe('Internal error');
      const [word, id] = parsed.message.split(' ');
      expect(word).toBe('request');
      expect(id).toMatch(UUID);
      expect(parsed.message).toBe(`request ${id}`);
      seen.add(id);
      expect(res.body).not.toMatch(/pglite|postgres|pool|stack|sql|at \w+ \(|node_modules|closed/i);
    }
    expect(seen.size).toBe(4);
  });

  it('readiness says 503, liveness stays up, and the process keeps serving', async () => {
    const ready = await broken.app.inject({ method: 'GET', url: '/readyz' });
    expect(ready.statusCode).toBe(503);
    expect(ready.json()).toEqual({ error: 'Not ready', message: expect.any(String) });
    expect(ready.body).not.toMatch(/pglite|pool|stack|closed/i);
    for (let i = 0; i < 3; i++) {
      expect((await broken.app.inject({ method: 'GET', url: '/healthz' })).json()).toEqual({ status: 'ok' });
      expect((await broken.request('GET', '/workflows')).statusCode).toBe(500);
    }
    // refusals that need no database are unchanged
    expect((await broken.app.inject({ method: 'GET', url: '/nope' })).statusCode).toBe(404);
    expect((await broken.request('GET', '/workflows', undefined, null)).statusCode).toBe(401);
  });

  it('a failure inside a route handler (past authentication) has the same body', async () => {
    const half = await build();
    try {
      await half.store.db.query('ALTER TABLE workflows RENAME TO workflows_gone');
      for (const [method, url, body] of [
        ['GET', '/workflows', undefined],
        ['POST', '/workflows', { name: 'x', definition: sampleDefinition() }],
      ] as const) {
        const res = await half.request(method, url, body);
        expect(res.statusCode).toBe(500);
        expect(res.json()).toEqual({ error: 'Internal error', message: expect.stringMatching(/^request [0-9a-f-]{36}$/) });
        expect(res.body).not.toMatch(/workflows_gone|relation|exist/i);
      }
      // the rest of the API is unaffected
      expect((await half.request('GET', '/assistants')).statusCode).toBe(200);
    } finally {
      await half.close();
    }
  });
});
