import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { build, pipelineAssistant, sampleDefinition, type TestApp } from '../helpers/app.js';

let t: TestApp;
let seq = 0;
const nextNumber = () => `+1415555${String(1000 + seq++).padStart(4, '0')}`;

beforeAll(async () => {
  t = await build();
});
afterAll(async () => {
  await t.close();
});

async function workflow() {
  return (await t.request('POST', '/workflows', { name: 'W', definition: sampleDefinition() })).json().workflow;
}
async function assistant() {
  return (await t.request('POST', '/assistants', pipelineAssistant)).json().assistant;
}

describe('numbers API', () => {
  it('creates with defaults (provider twilio, nothing attached) and rejects bad E.164', async () => {
    const number = nextNumber();
    const res = await t.request('POST', '/numbers', { number });
    expect(res.statusCode).toBe(201);
    expect(res.json().number).toMatchObject({
      number,
      name: null,
      provider: 'twilio',
      assistant_id: null,
      workflow_id: null,
      webhook: null,
    });
    const bad = await t.request('POST', '/numbers', { number: '555-1234' });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().details[0]).toBe('number: must be an E.164 number such as +14155550123');
    const provider = await t.request('POST', '/numbers', { number: nextNumber(), provider: 'vonage' });
    expect(provider.statusCode).toBe(400);
    expect(provider.json().details[0]).toMatch(/^provider: /);
  });

  it('a number takes every carrier with numbers as its provider (twilio, sip, telnyx), and changes carrier', async () => {
    for (const provider of ['twilio', 'sip', 'telnyx']) {
      const res = await t.request('POST', '/numbers', { number: nextNumber(), provider });
      expect(res.statusCode, provider).toBe(201);
      expect(res.json().number.provider).toBe(provider);
    }
    const created = (await t.request('POST', '/numbers', { number: nextNumber() })).json().number;
    const moved = await t.request('PATCH', `/numbers/${created.id}`, { provider: 'telnyx' });
    expect(moved.json().number.provider).toBe('telnyx');
    // web calls have no numbers
    expect((await t.request('POST', '/numbers', { number: nextNumber(), provider: 'web' })).statusCode).toBe(400);
  });

  it('a number already registered is a 409 Conflict, on create and on update, in any organization', async () => {
    const number = nextNumber();
    expect((await t.request('POST', '/numbers', { number })).statusCode).toBe(201);
    const conflict = {
      error: 'Conflict',
      message: `number ${number} is already registered`,
      details: [`number: ${number} is already registered`],
    };
    const dup = await t.request('POST', '/numbers', { number });
    expect(dup.statusCode).toBe(409);
    expect(dup.json()).toEqual(conflict);
    const theirs = await t.request('POST', '/numbers', { number }, t.otherKey);
    expect(theirs.statusCode).toBe(409);
    expect(theirs.json()).toEqual(conflict);
    const other = (await t.request('POST', '/numbers', { number: nextNumber() })).json().number;
    const moved = await t.request('PATCH', `/numbers/${other.id}`, { number });
    expect(moved.statusCode).toBe(409);
    expect(moved.json()).toEqual(conflict);
    expect((await t.request('GET', `/numbers/${other.id}`)).json().number.number).toBe(other.number);
  });

  it('attaches a workflow with PATCH workflow_id and detaches it with null', async () => {
    const w = await workflow();
    const n = (await t.request('POST', '/numbers', { number: nextNumber() })).json().number;
    const attached = await t.request('PATCH', `/numbers/${n.id}`, { workflow_id: w.id });
    expect(attached.statusCode).toBe(200);
    expect(attached.json().number.workflow_id).toBe(w.id);
    const detached = await t.request('PATCH', `/numbers/${n.id}`, { workflow_id: null });
    expect(detached.json().number.workflow_id).toBeNull();
  });

  it('400 when attaching an unknown workflow or assistant, or one of another organization', async () => {
    const n = (await t.request('POST', '/numbers', { number: nextNumber() })).json().number;
    const unknown = '00000000-0000-4000-8000-000000000000';
    const a = await t.request('PATCH', `/numbers/${n.id}`, { workflow_id: unknown });
    expect(a.statusCode).toBe(400);
    expect(a.json().details).toEqual([`workflow_id: no workflow with id "${unknown}"`]);
    const b = await t.request('POST', '/numbers', { number: nextNumber(), assistant_id: unknown });
    expect(b.statusCode).toBe(400);
    expect(b.json().details).toEqual([`assistant_id: no assistant with id "${unknown}"`]);
    const theirs = (
      await t.request('POST', '/workflows', { name: 'Theirs', definition: sampleDefinition() }, t.otherKey)
    ).json().workflow;
    const c = await t.request('PATCH', `/numbers/${n.id}`, { workflow_id: theirs.id });
    expect(c.statusCode).toBe(400);
    const d = await t.request('PATCH', `/numbers/${n.id}`, { workflow_id: 'not-a-uuid' });
    expect(d.statusCode).toBe(400);
    expect(d.json().details[0]).toMatch(/^workflow_id: /);
  });

  it('409 on deleting a workflow that a number runs, listing the numbers; fine once detached', async () => {
    const w = await workflow();
    const number = nextNumber();
    const n = (await t.request('POST', '/numbers', { number, workflow_id: w.id })).json().number;
    const res = await t.request('DELETE', `/workflows/${w.id}`);
    expect(res.statusCode).toBe(409);
    expect(res.json()).toEqual({
      error: 'In use',
      message: expect.stringContaining('PATCH /numbers/{id}'),
      details: [`number ${n.id} (${number})`],
    });
    expect((await t.request('GET', `/workflows/${w.id}`)).statusCode).toBe(200);
    await t.request('PATCH', `/numbers/${n.id}`, { workflow_id: null });
    expect((await t.request('DELETE', `/workflows/${w.id}`)).statusCode).toBe(204);
  });

  it('409 on deleting an assistant that a number uses', async () => {
    const a = await assistant();
    const n = (await t.request('POST', '/numbers', { number: nextNumber(), assistant_id: a.id })).json().number;
    const res = await t.request('DELETE', `/assistants/${a.id}`);
    expect(res.statusCode).toBe(409);
    expect(res.json().error).toBe('In use');
    expect(res.json().details[0]).toContain(n.id);
    await t.request('DELETE', `/numbers/${n.id}`);
    expect((await t.request('DELETE', `/assistants/${a.id}`)).statusCode).toBe(204);
  });

  it('a concurrent attach and delete never leaves a number pointing at a deleted workflow', async () => {
    for (let round = 0; round < 15; round++) {
      const w = await workflow();
      const n = (await t.request('POST', '/numbers', { number: nextNumber() })).json().number;
      const [attach, del] = await Promise.all([
        t.request('PATCH', `/numbers/${n.id}`, { workflow_id: w.id }),
        t.request('DELETE', `/workflows/${w.id}`),
      ]);
      const outcome = `${attach.statusCode}/${del.statusCode}`;
      // either the attach won (delete refused) or the delete won (attach refused)
      expect(['200/409', '400/204']).toContain(outcome);
      const number = (await t.request('GET', `/numbers/${n.id}`)).json().number;
      const exists = (await t.request('GET', `/workflows/${w.id}`)).statusCode === 200;
      expect(number.workflow_id === w.id).toBe(exists);
    }
  });

  it('webhook settings: generated secret shown once, then masked; all events by default', async () => {
    const res = await t.request('POST', '/numbers', {
      number: nextNumber(),
      webhook: { url: 'https://example.com/hook' },
    });
    expect(res.statusCode).toBe(201);
    const { webhook, id } = res.json().number;
    expect(webhook.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(webhook.events).toEqual(['assistant-request', 'tool-calls', 'status-update', 'end-of-call-report']);
    const got = (await t.request('GET', `/numbers/${id}`)).json().number;
    expect(got.webhook.secret).toBe(`whsec_…${webhook.secret.slice(-4)}`);
    const own = await t.request('PATCH', `/numbers/${id}`, {
      webhook: { url: 'https://example.com/h2', secret: 'my-own-secret', events: ['status-update'] },
    });
    expect(own.json().number.webhook).toEqual({ url: 'https://example.com/h2', secret: '…cret', events: ['status-update'] });
    const bad = await t.request('PATCH', `/numbers/${id}`, { webhook: { url: 'ftp://x', events: ['nope'] } });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().details.length).toBe(2);
    const cleared = await t.request('PATCH', `/numbers/${id}`, { webhook: null });
    expect(cleared.json().number.webhook).toBeNull();
  });

  it('a masked webhook secret sent back as shown keeps the stored one; one matching nothing is refused', async () => {
    const res = await t.request('POST', '/numbers', { number: nextNumber(), webhook: { url: 'https://example.com/hook' } });
    const { id, webhook } = res.json().number;
    const shown = (await t.request('GET', `/numbers/${id}`)).json().number.webhook;
    const back = await t.request('PATCH', `/numbers/${id}`, { webhook: { ...shown, events: ['status-update'] } });
    expect(back.statusCode, back.body).toBe(200);
    expect((await t.store.numbers.get(t.orgId, id))!.webhook).toMatchObject({ secret: webhook.secret, events: ['status-update'] });
    const wrong = await t.request('PATCH', `/numbers/${id}`, { webhook: { url: 'https://example.com/hook', secret: 'whsec_…zzzz' } });
    expect(wrong.statusCode).toBe(400);
    expect(wrong.json().details).toEqual([expect.stringMatching(/^webhook.secret: is a masked secret/)]);
    expect((await t.store.numbers.get(t.orgId, id))!.webhook!.secret).toBe(webhook.secret);
  });

  it('credentials in the webhook url are shown masked, stored as written, and kept when sent back as shown', async () => {
    const url = 'https://ops:n0-peeking@example.com/hook';
    const res = await t.request('POST', '/numbers', { number: nextNumber(), webhook: { url, secret: 'number-secret' } });
    expect(res.statusCode).toBe(201);
    const { id } = res.json().number;
    const masked = 'https://ops:****@example.com/hook';
    expect(res.json().number.webhook.url).toBe(masked);
    expect((await t.request('GET', `/numbers/${id}`)).json().number.webhook.url).toBe(masked);
    const listed = (await t.request('GET', '/numbers')).json().numbers.find((n: { id: string }) => n.id === id);
    expect(listed.webhook.url).toBe(masked);
    expect((await t.store.numbers.get(t.orgId, id))!.webhook!.url).toBe(url);

    const again = await t.request('PATCH', `/numbers/${id}`, { webhook: { url: masked, secret: 'number-secret', events: ['status-update'] } });
    expect(again.statusCode, again.body).toBe(200);
    expect((await t.store.numbers.get(t.orgId, id))!.webhook).toMatchObject({ url, events: ['status-update'] });

    const elsewhere = await t.request('PATCH', `/numbers/${id}`, { webhook: { url: 'https://ops:****@example.org/hook' } });
    expect(elsewhere.statusCode).toBe(400);
    expect(elsewhere.json().details).toEqual(['webhook.url: has masked credentials (****) that match no stored URL; send the real user name and password']);
    expect((await t.request('PATCH', `/numbers/${id}`, { webhook: { url: masked } }, t.otherKey)).statusCode).toBe(404);
    expect((await t.store.numbers.get(t.orgId, id))!.webhook!.url).toBe(url);
  });

  it('lists, gets and deletes; isolation across organizations', async () => {
    const n = (await t.request('POST', '/numbers', { number: nextNumber(), name: 'Main line' })).json().number;
    const list = (await t.request('GET', '/numbers')).json().numbers;
    expect(list.map((x: { id: string }) => x.id)).toContain(n.id);
    expect((await t.request('GET', `/numbers/${n.id}`, undefined, t.otherKey)).statusCode).toBe(404);
    expect((await t.request('PATCH', `/numbers/${n.id}`, { name: 'x' }, t.otherKey)).statusCode).toBe(404);
    expect((await t.request('DELETE', `/numbers/${n.id}`, undefined, t.otherKey)).statusCode).toBe(404);
    expect((await t.request('DELETE', `/numbers/${n.id}`)).statusCode).toBe(204);
    expect((await t.request('GET', `/numbers/${n.id}`)).statusCode).toBe(404);
  });
});
