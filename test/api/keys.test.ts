/** GET/POST/DELETE /keys (DECISIONS 19): the caller's organization's keys, a new key shown once, revocation. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashApiKey } from '../../src/store/keys.js';
import { build, type TestApp } from '../helpers/app.js';

let t: TestApp;
beforeAll(async () => {
  t = await build();
});
afterAll(async () => {
  await t.close();
});

const KEY = /^sk_live_[A-Za-z0-9_-]{43}$/;

describe('/keys', () => {
  it("lists the organization's keys, marks the one in use, and never shows a key or its hash", async () => {
    const res = await t.request('GET', '/keys');
    expect(res.statusCode).toBe(200);
    const { keys } = res.json();
    expect(keys).toEqual([
      { id: expect.any(String), name: null, prefix: t.key.slice(0, 16), created_at: expect.any(String), revoked_at: null, current: true },
    ]);
    expect(res.body).not.toContain(t.key);
    expect(res.body).not.toContain(hashApiKey(t.key));
    // the other organization sees only its own
    const other = await t.request('GET', '/keys', undefined, t.otherKey);
    expect(other.json().keys.map((k: { prefix: string }) => k.prefix)).toEqual([t.otherKey.slice(0, 16)]);
  });

  it('makes a key that works at once, shown in the answer only', async () => {
    const res = await t.request('POST', '/keys', { name: 'CRM integration' });
    expect(res.statusCode).toBe(201);
    const { key } = res.json();
    expect(key).toEqual({
      id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      name: 'CRM integration',
      prefix: key.secret.slice(0, 16),
      created_at: expect.any(String),
      revoked_at: null,
      current: false,
      secret: expect.stringMatching(KEY),
    });
    const withNew = await t.request('GET', '/keys', undefined, key.secret);
    expect(withNew.statusCode).toBe(200);
    const listed = withNew.json().keys;
    expect(listed).toHaveLength(2);
    expect(listed.find((k: { id: string }) => k.id === key.id)).toEqual({ ...key, secret: undefined, current: true });
    expect(JSON.stringify(listed)).not.toContain(key.secret);
    // stored as its hash alone
    const { rows } = await t.store.db.query<{ key_hash: string }>('SELECT key_hash FROM api_keys WHERE id = $1', [key.id]);
    expect(rows[0]!.key_hash).toBe(hashApiKey(key.secret));
  });

  it('takes no body, an empty one or a name; refuses anything else with the field named', async () => {
    const bare = await t.app.inject({ method: 'POST', url: '/keys', headers: { authorization: `Bearer ${t.key}` } });
    expect(bare.statusCode).toBe(201);
    expect(bare.json().key.name).toBeNull();
    expect((await t.request('POST', '/keys', {})).statusCode).toBe(201);
    const bad = await t.request('POST', '/keys', { name: '', scope: 'all' });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error).toBe('Invalid request');
    expect(bad.json().details.join('\n')).toMatch(/name: /);
    expect(bad.json().details.join('\n')).toMatch(/scope/);
  });

  it('revokes a key: 204, then 401 with it, revoked_at in the list; twice or unknown is 404', async () => {
    const made = (await t.request('POST', '/keys', { name: 'short-lived' })).json().key;
    expect((await t.request('GET', '/workflows', undefined, made.secret)).statusCode).toBe(200);
    const del = await t.request('DELETE', `/keys/${made.id}`);
    expect(del.statusCode).toBe(204);
    expect(del.body).toBe('');
    const refused = await t.request('GET', '/workflows', undefined, made.secret);
    expect(refused.statusCode).toBe(401);
    const listed = (await t.request('GET', '/keys')).json().keys.find((k: { id: string }) => k.id === made.id);
    expect(listed.revoked_at).toEqual(expect.any(String));
    expect((await t.request('DELETE', `/keys/${made.id}`)).statusCode).toBe(404);
    expect((await t.request('DELETE', '/keys/00000000-0000-4000-8000-000000000000')).statusCode).toBe(404);
    expect((await t.request('DELETE', '/keys/not-a-uuid')).statusCode).toBe(404);
  });

  it("another organization's key does not exist for the caller", async () => {
    const theirs = (await t.request('POST', '/keys', { name: 'theirs' }, t.otherKey)).json().key;
    const res = await t.request('DELETE', `/keys/${theirs.id}`);
    expect(res.statusCode).toBe(404);
    expect((await t.request('GET', '/workflows', undefined, theirs.secret)).statusCode).toBe(200);
  });

  it("refuses to revoke the organization's last active key (409), and revokes the caller's own key otherwise", async () => {
    const solo = await t.store.keys.createKey('Solo Org');
    const me = (await t.request('GET', '/keys', undefined, solo.key)).json().keys[0];
    const last = await t.request('DELETE', `/keys/${me.id}`, undefined, solo.key);
    expect(last.statusCode).toBe(409);
    expect(last.json()).toMatchObject({ error: 'Conflict', details: [expect.stringMatching(/^id: /)] });
    expect((await t.request('GET', '/keys', undefined, solo.key)).statusCode).toBe(200);

    const second = (await t.request('POST', '/keys', { name: 'second' }, solo.key)).json().key;
    expect((await t.request('DELETE', `/keys/${me.id}`, undefined, solo.key)).statusCode).toBe(204);
    expect((await t.request('GET', '/keys', undefined, solo.key)).statusCode).toBe(401);
    const left = (await t.request('GET', '/keys', undefined, second.secret)).json().keys;
    expect(left.map((k: { id: string; revoked_at: string | null }) => [k.id, k.revoked_at === null])).toEqual([
      [me.id, false],
      [second.id, true],
    ]);
  });

  it('two revocations at once never leave the organization without a key', async () => {
    const org = await t.store.keys.createKey('Race Org');
    const other = (await t.request('POST', '/keys', {}, org.key)).json().key;
    const mine = (await t.request('GET', '/keys', undefined, org.key)).json().keys.find((k: { current: boolean }) => k.current);
    const codes = await Promise.all([
      t.request('DELETE', `/keys/${mine.id}`, undefined, other.secret),
      t.request('DELETE', `/keys/${other.id}`, undefined, org.key),
    ]);
    // One revocation wins (204). The other is refused: 409 when it reaches the last-key check, or 401 when
    // its own key was revoked before it was authenticated. Either way exactly one key still works.
    const sorted = codes.map((r) => r.statusCode).sort();
    expect(sorted[0]).toBe(204);
    expect([401, 409]).toContain(sorted[1]);
    const working = await Promise.all(
      [other.secret, org.key].map(async (key) => (await t.request('GET', '/keys', undefined, key)).statusCode),
    );
    expect(working.sort()).toEqual([200, 401]);
  });

  it('needs a key', async () => {
    expect((await t.request('GET', '/keys', undefined, null)).statusCode).toBe(401);
    expect((await t.request('POST', '/keys', {}, null)).statusCode).toBe(401);
  });
});
