/** A workflow's `layout` (DECISIONS 19): where the dashboard draws each node, stored beside the definition. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { build, sampleDefinition, type TestApp } from '../helpers/app.js';

let t: TestApp;
beforeAll(async () => {
  t = await build();
});
afterAll(async () => {
  await t.close();
});

const create = async (extra: Record<string, unknown> = {}) => {
  const res = await t.request('POST', '/workflows', { name: 'Laid out', definition: sampleDefinition(3), ...extra });
  expect(res.statusCode, res.body).toBe(201);
  return res.json().workflow;
};

describe('workflow layout', () => {
  it('is {} until one is saved, then PATCH {layout} keeps it beside the definition and GET returns it', async () => {
    const wf = await create();
    expect(wf.layout).toEqual({});
    const layout = { step_0: { x: 100, y: 40 }, step_1: { x: 100.5, y: 160 }, goodbye: { x: -20, y: 280 } };
    const res = await t.request('PATCH', `/workflows/${wf.id}`, { layout });
    expect(res.statusCode).toBe(200);
    expect(res.json().workflow).toMatchObject({ layout, definition: sampleDefinition(3) });
    expect(res.json().workflow.definition).not.toHaveProperty('layout');
    const got = (await t.request('GET', `/workflows/${wf.id}`)).json().workflow;
    expect(got.layout).toEqual(layout);
    expect(got.updated_at > wf.updated_at).toBe(true);
    // the list stays the summaries
    const listed = (await t.request('GET', '/workflows')).json().workflows.find((w: { id: string }) => w.id === wf.id);
    expect(listed).not.toHaveProperty('layout');
    // a partial layout replaces the whole
    const partial = await t.request('PATCH', `/workflows/${wf.id}`, { layout: { goodbye: { x: 1, y: 2 } } });
    expect(partial.json().workflow.layout).toEqual({ goodbye: { x: 1, y: 2 } });
  });

  it('is accepted on create, and a name change leaves it alone', async () => {
    const wf = await create({ layout: { step_0: { x: 0, y: 0 } } });
    expect(wf.layout).toEqual({ step_0: { x: 0, y: 0 } });
    const renamed = await t.request('PATCH', `/workflows/${wf.id}`, { name: 'Renamed' });
    expect(renamed.json().workflow.layout).toEqual({ step_0: { x: 0, y: 0 } });
  });

  it('refuses a node the definition does not have, and bad coordinates, naming each; nothing is written', async () => {
    const wf = await create({ layout: { step_0: { x: 5, y: 5 } } });
    const unknown = await t.request('PATCH', `/workflows/${wf.id}`, { name: 'Not this', layout: { step_0: { x: 1, y: 1 }, nowhere: { x: 1, y: 1 } } });
    expect(unknown.statusCode).toBe(400);
    expect(unknown.json()).toEqual({ error: 'Invalid request', message: 'The request is not valid.', details: ['layout.nowhere: the definition has no node "nowhere"'] });
    const bad = await t.request('PATCH', `/workflows/${wf.id}`, { layout: { step_0: { x: 'left', y: 1 }, goodbye: { x: 1 }, 'has space': { x: 1, y: 1 } } });
    expect(bad.statusCode).toBe(400);
    const details = bad.json().details.join('\n');
    expect(details).toMatch(/layout\.step_0\.x: /);
    expect(details).toMatch(/layout\.goodbye\.y: /);
    expect(details).toMatch(/layout.*has space/);
    const huge = await t.request('PATCH', `/workflows/${wf.id}`, { layout: { step_0: { x: 1e9, y: 0 } } });
    expect(huge.statusCode).toBe(400);
    const extra = await t.request('PATCH', `/workflows/${wf.id}`, { layout: { step_0: { x: 1, y: 1, z: 1 } } });
    expect(extra.statusCode).toBe(400);
    const got = (await t.request('GET', `/workflows/${wf.id}`)).json().workflow;
    expect(got).toMatchObject({ name: 'Laid out', layout: { step_0: { x: 5, y: 5 } } });
  });

  it('with a new definition: checked against it, and a removed node loses its position', async () => {
    const wf = await create({ layout: { step_0: { x: 1, y: 1 }, step_1: { x: 2, y: 2 }, goodbye: { x: 3, y: 3 } } });
    const smaller = sampleDefinition(2); // step_0 → goodbye
    const res = await t.request('PATCH', `/workflows/${wf.id}`, { definition: smaller });
    expect(res.statusCode).toBe(200);
    expect(res.json().workflow.layout).toEqual({ step_0: { x: 1, y: 1 }, goodbye: { x: 3, y: 3 } });
    // both at once: the layout may name the new definition's nodes
    const bigger = sampleDefinition(4);
    const both = await t.request('PATCH', `/workflows/${wf.id}`, { definition: bigger, layout: { step_2: { x: 9, y: 9 } } });
    expect(both.statusCode).toBe(200);
    expect(both.json().workflow.layout).toEqual({ step_2: { x: 9, y: 9 } });
    // an invalid definition: a 400 for it, and neither part is written
    const broken = { ...bigger, entry_node: 'nowhere' };
    const refused = await t.request('PATCH', `/workflows/${wf.id}`, { definition: broken, layout: { step_0: { x: 0, y: 0 } } });
    expect(refused.statusCode).toBe(400);
    expect(refused.json().error).toBe('Invalid workflow definition');
    expect((await t.request('GET', `/workflows/${wf.id}`)).json().workflow.layout).toEqual({ step_2: { x: 9, y: 9 } });
  });

  it("another organization's workflow is 404, layout or not; a node id like constructor is an ordinary key", async () => {
    const wf = await create();
    expect((await t.request('PATCH', `/workflows/${wf.id}`, { layout: {} }, t.otherKey)).statusCode).toBe(404);
    const def = { version: 1, entry_node: 'constructor', nodes: [{ id: 'constructor', type: 'end' }], edges: [] };
    const res = await t.request('POST', '/workflows', { name: 'proto', definition: def, layout: { constructor: { x: 7, y: 8 } } });
    expect(res.statusCode, res.body).toBe(201);
    const got = await t.request('GET', `/workflows/${res.json().workflow.id}`);
    expect(got.json().workflow.layout).toEqual({ constructor: { x: 7, y: 8 } });
    expect((await t.request('PATCH', `/workflows/${res.json().workflow.id}`, { layout: { toString: { x: 1, y: 1 } } })).statusCode).toBe(400);
  });
});
