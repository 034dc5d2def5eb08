/** Liveness and readiness: no key, and readiness means the database answers. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { build, type TestApp } from '../helpers/app.js';

let t: TestApp;
beforeAll(async () => {
  t = await build();
});
afterAll(async () => {
  await t.close();
});

describe('health', () => {
  it('GET /healthz is 200 {"status":"ok"} with or without a key', async () => {
    for (const headers of [{}, { authorization: 'Bearer nonsense' }, { authorization: `Bearer ${t.key}` }]) {
      const res = await t.app.inject({ method: 'GET', url: '/healthz', headers });
      expect(res.statusCode).toBe(200);
      expect(res.headers['content-type']).toMatch(/^application\/json/);
      expect(res.json()).toEqual({ status: 'ok' });
    }
  });

  it('GET /readyz is 200 once the database answers, naming which one', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/readyz' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ status: 'ready', database: t.store.db.kind });
    expect(['pglite', 'postgres']).toContain(res.json().database);
    expect(res.json().database).toBe(process.env.DATABASE_URL ? 'postgres' : 'pglite');
  });

  it('HEAD works for both, and neither is rate limited', async () => {
    for (const url of ['/healthz', '/readyz']) {
      const res = await t.app.inject({ method: 'HEAD', url });
      expect(res.statusCode).toBe(200);
      expect(res.body).toBe('');
      expect(res.headers['x-ratelimit-limit']).toBeUndefined();
    }
  });

  it('answers many probes in a row', async () => {
    const all = await Promise.all(
      Array.from({ length: 50 }, (_, i) => t.app.inject({ method: 'GET', url: i % 2 ? '/healthz' : '/readyz' })),
    );
    expect(all.every((r) => r.statusCode === 200)).toBe(true);
  });
});
