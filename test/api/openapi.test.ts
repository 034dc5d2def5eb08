/** /openapi.json (generated from the zod schemas) and the /docs page. */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/logger.js';
import { createRuntime } from '../../src/runtime.js';
import { createStore } from '../../src/store/index.js';
import { validateDefinition } from '../../engine/validate.js';
import {
  Account,
  AccountPatchBody,
  Assistant,
  AssistantCreateBody,
  NumberCreateBody,
  PhoneNumber,
  Workflow,
  WorkflowCreateBody,
  WorkflowSummary,
} from '../../src/api/schemas.js';
import { Call, CallStats, PlaceCallBody } from '../../src/api/calls.js';
import { ApiKey, ApiKeyCreateBody } from '../../src/api/keys.js';
import { apiServers } from '../../src/api/openapi.js';
import { Chat, ChatCreateBody, ChatMessageBody } from '../../src/api/chats.js';
import { build, type TestApp } from '../helpers/app.js';
import { createTestDb, defaultDbKind } from '../helpers/db.js';

type Json = Record<string, any>;

let t: TestApp;
let doc: Json;
beforeAll(async () => {
  t = await build();
  const res = await t.app.inject({ method: 'GET', url: '/openapi.json' });
  expect(res.statusCode).toBe(200);
  expect(res.headers['content-type']).toMatch(/^application\/json/);
  doc = res.json();
});
afterAll(async () => {
  await t.close();
});

const ROUTES: Record<string, string[]> = {
  '/workflows': ['get', 'post'],
  '/workflows/{id}': ['delete', 'get', 'patch'],
  '/assistants': ['get', 'post'],
  '/assistants/{id}': ['delete', 'get', 'patch'],
  '/numbers': ['get', 'post'],
  '/numbers/{id}': ['delete', 'get', 'patch'],
  '/account': ['get', 'patch'],
  '/catalog': ['get'],
  '/keys': ['get', 'post'],
  '/keys/{id}': ['delete'],
  '/healthz': ['get'],
  '/readyz': ['get'],
};
const HTTP_METHODS = new Set(['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace']);

/** Follows local `$ref`s (`#/components/schemas/X`), however the generator chose to lay them out. */
function deref(schema: Json | undefined): Json | undefined {
  let s = schema;
  for (let i = 0; s && typeof s.$ref === 'string' && i < 20; i++) {
    s = s.$ref
      .replace(/^#\//, '')
      .split('/')
      .reduce((node: Json | undefined, part: string) => node?.[part.replace(/~1/g, '/').replace(/~0/g, '~')], doc);
  }
  return s;
}

const bodySchema = (path: string, method: string) =>
  deref(doc.paths[path][method].requestBody?.content?.['application/json']?.schema);

describe('GET /openapi.json', () => {
  it('is an OpenAPI 3 document about this service', () => {
    expect(doc.openapi).toMatch(/^3\.\d+\.\d+$/);
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8'));
    expect(doc.info).toMatchObject({ title: expect.stringContaining('Switchboard'), version: pkg.version });
    expect(typeof doc.paths).toBe('object');
  });

  it('says where the API is: `servers`, relative to the document when PUBLIC_URL is not set', () => {
    expect(doc.servers).toEqual([expect.objectContaining({ url: '/' })]);
    expect(apiServers(loadConfig({ PUBLIC_URL: 'https://voice.acme.example/' }))).toEqual([
      expect.objectContaining({ url: 'https://voice.acme.example' }),
    ]);
    expect(apiServers(loadConfig({ HOST: '0.0.0.0', PORT: '8080' }))).toEqual([expect.objectContaining({ url: '/' })]);
  });

  it('lists every route with exactly its methods, and nothing internal', () => {
    const listed = Object.fromEntries(
      Object.entries(doc.paths as Json).map(([path, ops]) => [
        path,
        Object.keys(ops).filter((m) => HTTP_METHODS.has(m)).sort(),
      ]),
    );
    expect(listed).toEqual(ROUTES);
    expect(Object.keys(doc.paths)).not.toContain('/openapi.json');
    expect(Object.keys(doc.paths).some((p) => p.startsWith('/docs'))).toBe(false);
  });

  it('every operation has a summary, a tag, a success response and its documented errors', () => {
    for (const [path, methods] of Object.entries(ROUTES)) {
      for (const method of methods) {
        const op = doc.paths[path][method];
        const where = `${method.toUpperCase()} ${path}`;
        expect(op.summary, where).toEqual(expect.any(String));
        expect(op.tags?.length, where).toBeGreaterThan(0);
        const codes = Object.keys(op.responses);
        const success = method === 'post' ? '201' : method === 'delete' ? '204' : '200';
        expect(codes, where).toContain(success);
        if (!path.endsWith('z')) {
          expect(codes, where).toEqual(expect.arrayContaining(['400', '401', '404', '429']));
          const error = deref(op.responses['401'].content?.['application/json']?.schema);
          expect(error?.properties, where).toHaveProperty('error');
          expect(error?.required, where).toContain('error');
        }
      }
    }
    expect(Object.keys(doc.paths['/workflows/{id}'].delete.responses)).toContain('409');
    expect(Object.keys(doc.paths['/assistants/{id}'].delete.responses)).toContain('409');
  });

  it('documents {id} as a required UUID path parameter', () => {
    for (const [path, methods] of Object.entries(ROUTES)) {
      if (!path.includes('{id}')) continue;
      for (const method of methods) {
        const params = doc.paths[path][method].parameters as Json[];
        const id = params.find((p) => p.name === 'id');
        expect(id, `${method} ${path}`).toMatchObject({ in: 'path', required: true });
        expect(deref(id!.schema)).toMatchObject({ type: 'string', format: 'uuid' });
      }
    }
  });

  it('documents a JSON request body for every write, strict (no unknown fields)', () => {
    for (const [path, methods] of Object.entries(ROUTES)) {
      for (const method of methods.filter((m) => m === 'post' || m === 'patch')) {
        const schema = bodySchema(path, method);
        expect(schema, `${method} ${path}`).toMatchObject({ type: 'object', additionalProperties: false });
        expect(Object.keys(schema!.properties).length).toBeGreaterThan(0);
      }
    }
    expect(bodySchema('/assistants', 'post')!.required).toEqual(['name']);
    expect(bodySchema('/numbers', 'post')!.required).toEqual(['number']);
    expect(Object.keys(bodySchema('/numbers/{id}', 'patch')!.properties)).toEqual(
      expect.arrayContaining(['workflow_id', 'assistant_id']),
    );
  });

  it('the workflow create body documents the definition: version, entry_node, nodes, edges', () => {
    const body = bodySchema('/workflows', 'post')!;
    expect(Object.keys(body.properties).sort()).toEqual(['definition', 'is_active', 'layout', 'name']);
    expect(body.required).toEqual(expect.arrayContaining(['name', 'definition']));
    const definition = deref(body.properties.definition)!;
    expect(definition.type).toBe('object');
    expect(Object.keys(definition.properties)).toEqual(
      expect.arrayContaining(['version', 'entry_node', 'global_prompt', 'nodes', 'edges']),
    );
    expect(definition.required).toEqual(expect.arrayContaining(['version', 'entry_node', 'nodes', 'edges']));
    const nodes = deref(definition.properties.nodes)!;
    expect(nodes.type).toBe('array');
    const variants = (deref(nodes.items)!.oneOf ?? deref(nodes.items)!.anyOf) as Json[];
    const types = variants.map((v) => deref(v)!.properties.type.enum?.[0] ?? deref(v)!.properties.type.const).sort();
    expect(types).toEqual(['conversation', 'end', 'tool', 'transfer']);
    const edge = deref(deref(definition.properties.edges)!.items)!;
    expect(Object.keys(edge.properties)).toEqual(expect.arrayContaining(['from', 'to', 'description', 'message']));
    // PATCH documents the same definition
    const patchDefinition = deref(bodySchema('/workflows/{id}', 'patch')!.properties.definition)!;
    expect(Object.keys(patchDefinition.properties)).toEqual(Object.keys(definition.properties));
    // the layout beside it: positions by node id
    const layout = deref(bodySchema('/workflows/{id}', 'patch')!.properties.layout)!;
    expect(layout.type).toBe('object');
    expect(deref(layout.additionalProperties)).toMatchObject({ type: 'object', required: ['x', 'y'] });
  });

  it('declares the bearer scheme, required everywhere but on health', () => {
    const schemes = doc.components.securitySchemes as Json;
    const bearer = Object.entries(schemes).find(([, s]) => s.type === 'http' && s.scheme === 'bearer');
    expect(bearer).toBeDefined();
    const [name] = bearer!;
    expect(doc.security).toEqual([{ [name]: [] }]);
    for (const [path, methods] of Object.entries(ROUTES)) {
      for (const method of methods) {
        const op = doc.paths[path][method];
        if (path === '/healthz' || path === '/readyz') expect(op.security).toEqual([]);
        else expect(op.security === undefined || JSON.stringify(op.security).includes(name)).toBe(true);
      }
    }
  });

  it('describes what the API really answers: a created workflow matches the documented 201 shape', async () => {
    const created = await t.request('POST', '/workflows', {
      name: 'Doc',
      definition: {
        version: 1,
        entry_node: 'a',
        nodes: [
          { id: 'a', type: 'conversation', instructions: 'Greet.' },
          { id: 'b', type: 'end' },
        ],
        edges: [{ from: 'a', to: 'b', description: 'done' }],
      },
    });
    expect(created.statusCode).toBe(201);
    const documented = deref(doc.paths['/workflows'].post.responses['201'].content['application/json'].schema)!;
    const workflow = deref(documented.properties.workflow)!;
    expect(Object.keys(created.json().workflow).sort()).toEqual(Object.keys(workflow.properties).sort());
  });
});

/** Every operation of a document, with where it is. */
const operationsOf = (d: Json) =>
  Object.entries(d.paths as Json).flatMap(([path, ops]) =>
    Object.entries(ops as Json)
      .filter(([method]) => HTTP_METHODS.has(method))
      .map(([method, op]) => ({ where: `${method.toUpperCase()} ${path}`, op: op as Json })),
  );

/** Every schema object in a document that has `nullable` without a `type` (OpenAPI 3.0 reads it only beside one). */
function untypedNullables(value: unknown, at = '#', found: string[] = []): string[] {
  if (Array.isArray(value)) value.forEach((v, i) => untypedNullables(v, `${at}/${i}`, found));
  else if (value && typeof value === 'object') {
    const o = value as Json;
    if (o.nullable === true && !('type' in o)) found.push(at);
    if (o.nullable === true && Array.isArray(o.enum) && !o.enum.includes(null)) found.push(`${at} (enum without null)`);
    for (const [k, v] of Object.entries(o)) if (k !== 'example' && k !== 'default' && k !== 'enum') untypedNullables(v, `${at}/${k}`, found);
  }
  return found;
}

describe('GET /openapi.json for client generators and linters', () => {
  it('every operation has an operationId: camelCase and unique', () => {
    const ids = operationsOf(doc).map(({ where, op }) => {
      expect(op.operationId, where).toMatch(/^[a-z][a-zA-Z]+$/);
      return op.operationId as string;
    });
    expect(new Set(ids).size).toBe(ids.length);
    expect(doc.paths['/workflows'].post.operationId).toBe('createWorkflow');
    expect(doc.paths['/workflows/{id}'].get.operationId).toBe('getWorkflow');
  });

  it('has no `nullable` without a `type`, and a nullable enum lists null', () => {
    expect(untypedNullables(doc)).toEqual([]);
  });

  it('names the main schemas as components, each with an example the API itself accepts', () => {
    const schemas = doc.components.schemas as Json;
    const examples: [string, { safeParse(v: unknown): { success: boolean; error?: unknown } }][] = [
      ['Workflow', Workflow],
      ['WorkflowSummary', WorkflowSummary],
      ['Assistant', Assistant],
      ['PhoneNumber', PhoneNumber],
      ['Account', Account],
      ['ApiKey', ApiKey],
    ];
    for (const [name, schema] of examples) {
      expect(schemas[name]?.example, name).toBeDefined();
      const parsed = schema.safeParse(schemas[name].example);
      expect(parsed.success, `${name}: ${JSON.stringify(parsed.error)}`).toBe(true);
    }
    expect(validateDefinition(schemas.Workflow.example.definition).ok).toBe(true);
    // named schemas that no operation uses are left out (Call and Chat need a runtime)
    expect(Object.keys(schemas).sort()).toEqual(['Account', 'ApiKey', 'Assistant', 'PhoneNumber', 'Workflow', 'WorkflowSummary']);
  });

  it('the create bodies have examples the API accepts', () => {
    const bodies: [string, string, { safeParse(v: unknown): { success: boolean; error?: unknown } }][] = [
      ['/workflows', 'post', WorkflowCreateBody],
      ['/assistants', 'post', AssistantCreateBody],
      ['/numbers', 'post', NumberCreateBody],
      ['/keys', 'post', ApiKeyCreateBody],
    ];
    for (const [path, method, schema] of bodies) {
      const example = bodySchema(path, method)!.example;
      expect(example, `${method} ${path}`).toBeDefined();
      const parsed = schema.safeParse(example);
      expect(parsed.success, `${method} ${path}: ${JSON.stringify(parsed.error)}`).toBe(true);
    }
    expect(validateDefinition(bodySchema('/workflows', 'post')!.example.definition).ok).toBe(true);
    expect(AccountPatchBody.safeParse({}).success).toBe(true);
  });

  it('error responses carry an example of their body', () => {
    const responses = doc.paths['/workflows'].post.responses as Json;
    for (const code of ['400', '401', '404', '429']) {
      const schema = deref(responses[code].content['application/json'].schema)!;
      expect(schema.example?.error, code).toEqual(expect.any(String));
    }
    expect(deref(responses['400'].content['application/json'].schema)!.example.details).toEqual(expect.any(Array));
  });
});

describe('/docs', () => {
  it('serves an HTML page that loads the OpenAPI document', async () => {
    let url = '/docs';
    let res = await t.app.inject({ method: 'GET', url });
    for (let hops = 0; res.statusCode >= 300 && res.statusCode < 400 && hops < 5; hops++) {
      url = new URL(String(res.headers.location), `http://localhost${url}`).pathname;
      res = await t.app.inject({ method: 'GET', url });
    }
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/html/);
    expect(res.body).toMatch(/<html/i);
    expect(res.body).toMatch(/swagger/i);
    // Switchboard's own page: its title, and a document that names every resource and what needs no key
    expect(res.body).toContain('<title>Switchboard API</title>');
    for (const tag of ['workflows', 'assistants', 'numbers', 'account', 'keys', 'calls', 'chats', 'catalog', 'health']) {
      expect(doc.info.description, tag).toContain(`**${tag}**`);
      expect(doc.tags.map((x: { name: string }) => x.name), tag).toContain(tag);
    }
    expect(doc.info.description).toMatch(/except `\/healthz`, `\/readyz` and `\/metrics`/);
    const init = await t.app.inject({ method: 'GET', url: '/docs/static/swagger-initializer.js' });
    expect(init.statusCode).toBe(200);
    // the page reads the same document as /openapi.json
    const served = await t.app.inject({ method: 'GET', url: '/docs/json' });
    expect(served.statusCode).toBe(200);
    expect(served.json().paths).toEqual(doc.paths);
  });

  it('needs no key', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/docs', headers: { authorization: 'Bearer nope' } });
    expect(res.statusCode).toBeLessThan(400);
  });
});

describe('GET /openapi.json of a server that takes calls', () => {
  /** The call routes exist only with a runtime (live calls); built here without listening. */
  let callsDoc: Json;
  beforeAll(async () => {
    const testDb = await createTestDb(defaultDbKind());
    const config = loadConfig({ LOG_LEVEL: 'silent', RATE_LIMIT_PER_MINUTE: '0' });
    const logger = createLogger('silent');
    const store = createStore(testDb.db);
    const runtime = await createRuntime({ config, store, logger, webhookQueueName: `openapi-${Date.now()}` });
    const app = await buildApp({ config, store, logger, runtime });
    try {
      callsDoc = (await app.inject({ method: 'GET', url: '/openapi.json' })).json();
    } finally {
      await runtime.close(0);
      await app.close();
      await testDb.drop();
    }
  });

  const derefIn = (schema: Json | undefined) => {
    let s = schema;
    for (let i = 0; s && typeof s.$ref === 'string' && i < 20; i++) {
      s = s.$ref.replace(/^#\//, '').split('/').reduce((node: Json | undefined, part: string) => node?.[part], callsDoc);
    }
    return s;
  };

  it('lists the call routes with their methods, summaries and errors', () => {
    const paths = callsDoc.paths as Json;
    expect(Object.keys(paths['/calls']).filter((m) => HTTP_METHODS.has(m)).sort()).toEqual(['get', 'post']);
    expect(Object.keys(paths['/calls/{id}']).filter((m) => HTTP_METHODS.has(m))).toEqual(['get']);
    expect(Object.keys(paths['/calls/{id}/end']).filter((m) => HTTP_METHODS.has(m))).toEqual(['post']);
    expect(Object.keys(paths['/calls'].post.responses)).toEqual(expect.arrayContaining(['201', '400', '401', '429']));
    expect(Object.keys(paths['/calls/{id}/end'].post.responses)).toEqual(expect.arrayContaining(['202', '404', '409']));
    for (const path of ['/calls', '/calls/{id}']) {
      const op = paths[path].get;
      expect(op.summary).toEqual(expect.any(String));
      expect(op.tags).toEqual(['calls']);
      expect(Object.keys(op.responses)).toEqual(expect.arrayContaining(['200', '400', '401', '404', '429']));
    }
    // the public routes of the app without a runtime are all there too
    for (const path of Object.keys(ROUTES)) expect(Object.keys(paths)).toContain(path);
  });

  it('every operation, calls and chats included, has a unique camelCase operationId', () => {
    const ops = operationsOf(callsDoc);
    const ids = ops.map(({ op }) => op.operationId as string);
    for (const { where, op } of ops) expect(op.operationId, where).toMatch(/^[a-z][a-zA-Z]+$/);
    expect(new Set(ids).size).toBe(ids.length);
    expect(Object.fromEntries(ops.map(({ where, op }) => [where, op.operationId]))).toMatchObject({
      'GET /calls': 'listCalls',
      'GET /calls/{id}': 'getCall',
      'POST /calls': 'placeCall',
      'POST /calls/{id}/end': 'endCall',
      'POST /chats': 'createChat',
      'POST /chats/{id}/messages': 'sendChatMessage',
      'GET /chats/{id}': 'getChat',
      'GET /calls/stats': 'getCallStats',
    });
    expect(callsDoc.servers?.length).toBeGreaterThan(0);
    expect(untypedNullables(callsDoc)).toEqual([]);
  });

  it('the call and chat schemas and bodies have examples the API accepts', () => {
    const schemas = callsDoc.components.schemas as Json;
    for (const [name, schema] of [['Call', Call], ['Chat', Chat]] as const) {
      const parsed = schema.safeParse(schemas[name]?.example);
      expect(parsed.success, `${name}: ${JSON.stringify(parsed.error)}`).toBe(true);
    }
    const body = (path: string) => derefIn(callsDoc.paths[path].post.requestBody.content['application/json'].schema)!;
    expect(PlaceCallBody.safeParse(body('/calls').example).success).toBe(true);
    expect(ChatCreateBody.safeParse(body('/chats').example).success).toBe(true);
    expect(ChatMessageBody.safeParse(body('/chats/{id}/messages').example).success).toBe(true);
  });

  it('documents the listing\'s page size, cursor and filters, and its page of calls', () => {
    const op = callsDoc.paths['/calls'].get;
    const params = Object.fromEntries((op.parameters as Json[]).map((p) => [p.name, p]));
    expect(Object.keys(params).sort()).toEqual(['assistant_id', 'cursor', 'customer', 'limit', 'number_id', 'since', 'status', 'type', 'until']);
    for (const p of Object.values(params)) expect(p).toMatchObject({ in: 'query' });
    expect(derefIn(params.limit.schema)).toMatchObject({ minimum: 1, maximum: 100, default: 50 });
    expect(derefIn(params.status.schema)?.enum).toEqual(['queued', 'ringing', 'in-progress', 'forwarding', 'ended']);
    expect(derefIn(params.assistant_id.schema)).toMatchObject({ type: 'string', format: 'uuid' });
    expect(derefIn(params.since.schema)).toMatchObject({ type: 'string', format: 'date-time' });

    const page = derefIn(op.responses['200'].content['application/json'].schema)!;
    expect(Object.keys(page.properties).sort()).toEqual(['calls', 'next_cursor']);
    const call = derefIn(derefIn(page.properties.calls)!.items)!;
    expect(Object.keys(call.properties)).toEqual(
      expect.arrayContaining(['id', 'status', 'transport', 'definition_hash', 'transcript', 'messages', 'nodes_visited', 'ended_reason']),
    );
    const one = derefIn(callsDoc.paths['/calls/{id}'].get.responses['200'].content['application/json'].schema)!;
    expect(Object.keys(derefIn(one.properties.call)!.properties).sort()).toEqual(Object.keys(call.properties).sort());
    expect(call.properties).toHaveProperty('variables');
  });

  it('documents the overview\'s stats: the period, and what is counted', () => {
    const op = callsDoc.paths['/calls/stats'].get;
    expect((op.parameters as Json[]).map((p) => p.name).sort()).toEqual(['since', 'until']);
    const stats = derefIn(derefIn(op.responses['200'].content['application/json'].schema)!.properties.stats)!;
    expect(Object.keys(stats.properties).sort()).toEqual(['by_ended_reason', 'by_status', 'calls', 'live', 'mean_duration_seconds', 'since', 'turn_latency_ms', 'until']);
    expect(CallStats.safeParse((callsDoc.components.schemas as Json).CallStats.example).success).toBe(true);
  });
});
