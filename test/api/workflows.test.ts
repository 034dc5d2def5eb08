import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { build, sampleDefinition, type TestApp } from '../helpers/app.js';

let t: TestApp;
beforeAll(async () => {
  t = await build();
});
afterAll(async () => {
  await t.close();
});

describe('workflows API', () => {
  it('creates a workflow (201) with is_active defaulting to true, and gets it back', async () => {
    const res = await t.request('POST', '/workflows', { name: 'Front desk', definition: sampleDefinition() });
    expect(res.statusCode).toBe(201);
    const { workflow } = res.json();
    expect(workflow).toMatchObject({ name: 'Front desk', is_active: true, definition: sampleDefinition() });
    expect(workflow.id).toMatch(/^[0-9a-f-]{36}$/);
    expect(workflow.created_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(workflow.updated_at).toBe(workflow.created_at);

    const got = await t.request('GET', `/workflows/${workflow.id}`);
    expect(got.statusCode).toBe(200);
    expect(got.json()).toEqual({ workflow });
  });

  it('accepts is_active false on create', async () => {
    const res = await t.request('POST', '/workflows', {
      name: 'Off',
      definition: sampleDefinition(),
      is_active: false,
    });
    expect(res.statusCode).toBe(201);
    expect(res.json().workflow.is_active).toBe(false);
  });

  it('rejects an invalid definition with every problem in details (400)', async () => {
    const definition = sampleDefinition(3) as Record<string, any>;
    definition.entry_node = 'nowhere';
    definition.edges.push({ from: 'step_0', to: 'billing', description: 'x' });
    definition.nodes.push({ id: 'transfer', type: 'transfer', destination: '555-1234' });
    const res = await t.request('POST', '/workflows', { name: 'Broken', definition });
    expect(res.statusCode).toBe(400);
    const body = res.json();
    expect(body.error).toBe('Invalid workflow definition');
    expect(body.details.some((d: string) => d.startsWith('entry_node:'))).toBe(true);
    expect(body.details.some((d: string) => d.startsWith('edges[2] (step_0 → billing).to:'))).toBe(true);
    expect(body.details.some((d: string) => d.startsWith('nodes[3] (transfer).destination:'))).toBe(true);
    expect(Object.keys(body).sort()).toEqual(['details', 'error']);
  });

  it('rejects a definition that is not an object, and a missing definition', async () => {
    const a = await t.request('POST', '/workflows', { name: 'x', definition: 'nope' });
    expect(a.statusCode).toBe(400);
    expect(a.json().error).toBe('Invalid workflow definition');
    const b = await t.request('POST', '/workflows', { name: 'x' });
    expect(b.statusCode).toBe(400);
    expect(b.json().error).toBe('Invalid request');
    expect(b.json().details.join('\n')).toContain('definition');
  });

  it('names unknown fields (strict bodies)', async () => {
    const res = await t.request('POST', '/workflows', {
      name: 'x',
      definition: sampleDefinition(),
      colour: 'blue',
    });
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toBe('Invalid request');
    expect(res.json().details.join('\n')).toContain('colour');
  });

  it('checks the name: 1 to 200 characters', async () => {
    for (const name of ['', 'x'.repeat(201)]) {
      const res = await t.request('POST', '/workflows', { name, definition: sampleDefinition() });
      expect(res.statusCode).toBe(400);
      expect(res.json().details[0]).toMatch(/^name: /);
    }
  });

  it('lists summaries oldest first with entry node, node and edge counts', async () => {
    const first = (await t.request('POST', '/workflows', { name: 'L1', definition: sampleDefinition(4) })).json().workflow;
    const second = (await t.request('POST', '/workflows', { name: 'L2', definition: sampleDefinition(2) })).json().workflow;
    const res = await t.request('GET', '/workflows');
    expect(res.statusCode).toBe(200);
    const { workflows } = res.json();
    const ids = workflows.map((w: { id: string }) => w.id);
    expect(ids.indexOf(first.id)).toBeLessThan(ids.indexOf(second.id));
    const summary = workflows.find((w: { id: string }) => w.id === first.id);
    expect(summary).toEqual({
      id: first.id,
      name: 'L1',
      is_active: true,
      entry_node: 'step_0',
      node_count: 4,
      edge_count: 3,
      created_at: first.created_at,
      updated_at: first.updated_at,
    });
  });

  it('PATCH replaces the definition entirely and validates it like create', async () => {
    const created = (await t.request('POST', '/workflows', { name: 'P', definition: sampleDefinition(4) })).json().workflow;
    const replacement = sampleDefinition(2);
    const res = await t.request('PATCH', `/workflows/${created.id}`, { definition: replacement });
    expect(res.statusCode).toBe(200);
    expect(res.json().workflow.definition).toEqual(replacement);
    expect(res.json().workflow.name).toBe('P');
    expect(Date.parse(res.json().workflow.updated_at)).toBeGreaterThanOrEqual(Date.parse(created.updated_at));

    const bad = await t.request('PATCH', `/workflows/${created.id}`, { definition: { version: 2 } });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error).toBe('Invalid workflow definition');
    const still = (await t.request('GET', `/workflows/${created.id}`)).json().workflow;
    expect(still.definition).toEqual(replacement);
  });

  it('tool node URLs are shown as written, credentials included: a definition round-trips whole (docs/decisions.md)', async () => {
    const url = 'https://bot:t00l-pass@tools.example.com/orders';
    const definition = {
      version: 1,
      entry_node: 'greet',
      nodes: [
        { id: 'greet', type: 'conversation', first_line: 'Hi.', instructions: 'Ask for the order number.' },
        { id: 'lookup', type: 'tool', tool_name: 'lookup_order', url, arguments: { source: 'phone' } },
        { id: 'bye', type: 'end', first_line: 'Bye.' },
      ],
      edges: [
        { from: 'greet', to: 'lookup', description: 'the caller gave an order number' },
        { from: 'lookup', to: 'bye' },
      ],
    };
    const created = (await t.request('POST', '/workflows', { name: 'Orders', definition })).json().workflow;
    const got = (await t.request('GET', `/workflows/${created.id}`)).json().workflow;
    expect(got.definition.nodes[1].url).toBe(url);
    // the client edits one line and sends the definition back whole: the tool still reaches its endpoint
    got.definition.nodes[0].first_line = 'Hello.';
    const res = await t.request('PATCH', `/workflows/${created.id}`, { definition: got.definition });
    expect(res.statusCode).toBe(200);
    expect((await t.store.workflows.get(t.orgId, created.id))!.definition.nodes[1]).toMatchObject({ url });
    // a copy is a working workflow too
    const copy = await t.request('POST', '/workflows', { name: 'Orders (copy)', definition: got.definition });
    expect(copy.json().workflow.definition.nodes[1].url).toBe(url);
    // summaries carry no URL at all
    expect((await t.request('GET', '/workflows')).body).not.toContain('t00l-pass');
  });

  it('toggles is_active and renames', async () => {
    const created = (await t.request('POST', '/workflows', { name: 'T', definition: sampleDefinition() })).json().workflow;
    const off = await t.request('PATCH', `/workflows/${created.id}`, { is_active: false });
    expect(off.json().workflow.is_active).toBe(false);
    const on = await t.request('PATCH', `/workflows/${created.id}`, { is_active: true, name: 'T2' });
    expect(on.json().workflow).toMatchObject({ is_active: true, name: 'T2' });
    const bad = await t.request('PATCH', `/workflows/${created.id}`, { is_active: 'yes' });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().details[0]).toMatch(/^is_active: /);
  });

  it('deletes (204, no body), then 404', async () => {
    const created = (await t.request('POST', '/workflows', { name: 'D', definition: sampleDefinition() })).json().workflow;
    const res = await t.request('DELETE', `/workflows/${created.id}`);
    expect(res.statusCode).toBe(204);
    expect(res.body).toBe('');
    expect((await t.request('GET', `/workflows/${created.id}`)).statusCode).toBe(404);
    expect((await t.request('DELETE', `/workflows/${created.id}`)).statusCode).toBe(404);
  });

  it('404 for unknown and non-UUID ids', async () => {
    for (const id of ['00000000-0000-4000-8000-000000000000', 'not-a-uuid', '1']) {
      for (const method of ['GET', 'PATCH', 'DELETE'] as const) {
        const res = await t.request(method, `/workflows/${id}`, method === 'PATCH' ? { name: 'x' } : undefined);
        expect(res.statusCode).toBe(404);
        expect(res.json().error).toBe('Not found');
        expect(typeof res.json().message).toBe('string');
      }
    }
  });

  it("another organization's workflow does not exist for the caller", async () => {
    const created = (await t.request('POST', '/workflows', { name: 'Mine', definition: sampleDefinition() })).json().workflow;
    expect((await t.request('GET', `/workflows/${created.id}`, undefined, t.otherKey)).statusCode).toBe(404);
    expect((await t.request('PATCH', `/workflows/${created.id}`, { name: 'stolen' }, t.otherKey)).statusCode).toBe(404);
    expect((await t.request('DELETE', `/workflows/${created.id}`, undefined, t.otherKey)).statusCode).toBe(404);
    const list = (await t.request('GET', '/workflows', undefined, t.otherKey)).json().workflows;
    expect(list.find((w: { id: string }) => w.id === created.id)).toBeUndefined();
    expect((await t.request('GET', `/workflows/${created.id}`)).json().workflow.name).toBe('Mine');
  });
});
