/** The repositories, run the same on PGlite and (when DATABASE_URL is set) on PostgreSQL. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrate } from '../../src/store/db.js';
import { createStore, type Store } from '../../src/store/index.js';
import { InUseError, UnknownReferenceError, ConflictError } from '../../src/store/errors.js';
import { API_KEY_PATTERN, hashApiKey } from '../../src/store/keys.js';
import { availableDbKinds, createTestDb, type TestDb } from '../helpers/db.js';
import { sampleDefinition } from '../helpers/app.js';
import type { WorkflowDefinition } from '../../engine/schema.js';

const definition = sampleDefinition() as WorkflowDefinition;

describe.each(availableDbKinds())('repositories on %s', (kind) => {
  let testDb: TestDb;
  let store: Store;
  let orgA: string;
  let orgB: string;

  beforeAll(async () => {
    testDb = await createTestDb(kind);
    store = createStore(testDb.db);
    orgA = (await store.keys.createKey('A')).organization.id;
    orgB = (await store.keys.createKey('B')).organization.id;
  });
  afterAll(async () => {
    await testDb.drop();
  });

  it('migrations are recorded and applying them again changes nothing', async () => {
    expect(await migrate(testDb.db)).toEqual([]);
    const { rows } = await testDb.db.query<{ name: string }>('SELECT name FROM schema_migrations');
    expect(rows.map((r) => r.name)).toContain('001_init.sql');
  });

  it('keys: stored only as hashes, authenticate, revoke by prefix, refuse an ambiguous prefix', async () => {
    const { key, prefix, organization } = await store.keys.createKey('Keys Org');
    expect(key).toMatch(API_KEY_PATTERN);
    expect(prefix).toBe(key.slice(0, 16));
    const { rows } = await testDb.db.query<{ key_hash: string }>(
      'SELECT key_hash FROM api_keys WHERE prefix = $1',
      [prefix],
    );
    expect(rows[0]?.key_hash).toBe(hashApiKey(key));
    const dump = JSON.stringify((await testDb.db.query('SELECT * FROM api_keys')).rows);
    expect(dump).not.toContain(key.slice(8));

    expect(await store.keys.authenticate(key)).toEqual({ id: organization.id, name: 'Keys Org' });
    expect(await store.keys.authenticate(`${key.slice(0, -1)}x`)).toBeNull();
    expect(await store.keys.authenticate('sk_live_short')).toBeNull();

    const second = await store.keys.createKey('Keys Org');
    expect(second.organization.id).toBe(organization.id);
    expect((await store.keys.revoke('sk_live_')).ambiguous.length).toBeGreaterThan(1);
    expect(await store.keys.revoke(prefix)).toEqual({ revoked: [prefix], ambiguous: [] });
    expect(await store.keys.authenticate(key)).toBeNull();
    expect(await store.keys.authenticate(second.key)).not.toBeNull();
    expect((await store.keys.revoke(prefix)).revoked).toEqual([]);
  });

  it('workflows: create, summary columns, update replaces the definition, org-scoped reads', async () => {
    const w = await store.workflows.create(orgA, { name: 'W', definition, is_active: true });
    expect((await store.workflows.list(orgA)).find((s) => s.id === w.id)).toMatchObject({
      entry_node: definition.entry_node,
      node_count: definition.nodes.length,
      edge_count: definition.edges.length,
    });
    expect(await store.workflows.get(orgB, w.id)).toBeNull();
    expect(await store.workflows.update(orgB, w.id, { name: 'x' })).toBeNull();
    expect(await store.workflows.delete(orgB, w.id)).toBe(false);
    const small = sampleDefinition(2) as WorkflowDefinition;
    const updated = await store.workflows.update(orgA, w.id, { definition: small });
    expect(updated?.definition).toEqual(small);
    expect((await store.workflows.list(orgA)).find((s) => s.id === w.id)?.node_count).toBe(2);
  });

  it('the database itself refuses to delete a workflow or assistant that a number uses', async () => {
    const w = await store.workflows.create(orgA, { name: 'Used', definition, is_active: true });
    const a = await store.assistants.create(orgA, { name: 'Used' });
    const n = await store.numbers.create(orgA, { number: '+15550001001', workflow_id: w.id, assistant_id: a.id });
    await expect(testDb.db.query('DELETE FROM workflows WHERE id = $1', [w.id])).rejects.toMatchObject({
      code: expect.stringMatching(/^23(001|503)$/),
    });
    await expect(store.workflows.delete(orgA, w.id)).rejects.toBeInstanceOf(InUseError);
    await expect(store.assistants.delete(orgA, a.id)).rejects.toMatchObject({
      resource: 'assistant',
      numbers: [{ id: n.id, number: '+15550001001' }],
    });
    await store.numbers.update(orgA, n.id, { workflow_id: null, assistant_id: null });
    expect(await store.workflows.delete(orgA, w.id)).toBe(true);
    expect(await store.assistants.delete(orgA, a.id)).toBe(true);
  });

  it("a number cannot reference another organization's workflow, even in raw SQL", async () => {
    const theirs = await store.workflows.create(orgB, { name: 'Theirs', definition, is_active: true });
    await expect(store.numbers.create(orgA, { number: '+15550001002', workflow_id: theirs.id })).rejects.toBeInstanceOf(
      UnknownReferenceError,
    );
    const n = await store.numbers.create(orgA, { number: '+15550001003' });
    await expect(
      testDb.db.query('UPDATE numbers SET workflow_id = $1 WHERE id = $2', [theirs.id, n.id]),
    ).rejects.toMatchObject({ code: '23503' });
  });

  it('numbers: unique E.164, lookup by number across organizations, partial update', async () => {
    const n = await store.numbers.create(orgB, { number: '+15550001004', name: 'Line' });
    await expect(store.numbers.create(orgA, { number: '+15550001004' })).rejects.toBeInstanceOf(ConflictError);
    expect(await store.numbers.findByNumber('+15550001004')).toMatchObject({ id: n.id, organization_id: orgB });
    const updated = await store.numbers.update(orgB, n.id, {
      webhook: { url: 'https://example.com', secret: 'whsec_x', events: ['status-update'] },
    });
    expect(updated).toMatchObject({ name: 'Line', webhook: { url: 'https://example.com' } });
    expect((await store.numbers.update(orgB, n.id, { webhook: null }))?.webhook).toBeNull();
  });

  it('assistants: concurrent patches of different fields both land', async () => {
    const a = await store.assistants.create(orgA, { name: 'Concurrent' });
    await Promise.all([
      store.assistants.update(orgA, a.id, (f) => ({ ...f, first_message: 'Hi' })),
      store.assistants.update(orgA, a.id, (f) => ({ ...f, gdpr_mode: true })),
    ]);
    expect((await store.assistants.get(orgA, a.id))?.fields).toMatchObject({
      name: 'Concurrent',
      first_message: 'Hi',
      gdpr_mode: true,
    });
    await expect(
      store.assistants.update(orgA, a.id, () => {
        throw new Error('refused');
      }),
    ).rejects.toThrow('refused');
    expect((await store.assistants.get(orgA, a.id))?.fields.first_message).toBe('Hi');
  });

  it('account settings: upsert, partial update, clear', async () => {
    expect(await store.account.get(orgA)).toEqual({ webhook: null, twilio: null, outbound: null, sip: null });
    const hook = { url: 'https://example.com/a', secret: 'whsec_y', events: ['status-update'] };
    expect(await store.account.update(orgA, { webhook: hook })).toEqual({ webhook: hook, twilio: null, outbound: null, sip: null });
    const twilio = { account_sid: `AC${'0'.repeat(32)}`, auth_token: 'token-123456' };
    expect(await store.account.update(orgA, { twilio })).toEqual({ webhook: hook, twilio, outbound: null, sip: null });
    expect(await store.account.update(orgA, { webhook: null })).toEqual({ webhook: null, twilio, outbound: null, sip: null });
    expect(await store.account.get(orgB)).toEqual({ webhook: null, twilio: null, outbound: null, sip: null });
    // the outbound limits: set, kept by other updates, cleared
    const outbound = { max_concurrent_calls: 3, calls_per_second: 0.5 };
    expect(await store.account.update(orgA, { outbound })).toEqual({ webhook: null, twilio, outbound, sip: null });
    expect(await store.account.update(orgA, { webhook: hook })).toEqual({ webhook: hook, twilio, outbound, sip: null });
    expect(await store.account.update(orgA, { outbound: null })).toEqual({ webhook: hook, twilio, outbound: null, sip: null });
  });
});
