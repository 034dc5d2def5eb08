/**
 * Dates that enter `GET /calls` (since, until, the cursor) and that the database cannot read
 * (PostgreSQL has no year 0) are a 400 with details, never a 500; every other ISO 8601 timestamp
 * is taken. On PGlite, and PostgreSQL with DATABASE_URL.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EARLIEST_TIME } from '../../src/api/calls.js';
import { startCallingServer, type CallingServer } from '../helpers/calls.js';

let s: CallingServer;
beforeAll(async () => {
  s = await startCallingServer();
}, 120_000);
afterAll(async () => {
  await s?.close();
});

const list = (query: string) => s.api('GET', `/calls?${query}`);
const OUT_OF_RANGE = `must be at or after ${EARLIEST_TIME}`;
const cursorAt = (at: string) => Buffer.from(JSON.stringify([at, '00000000-0000-4000-8000-000000000000'])).toString('base64url');

describe('GET /calls and out-of-range dates', () => {
  it('year 0 (or an instant before year 1) in since, until or the cursor is a 400 naming it', async () => {
    for (const at of ['0000-01-01T00:00:00Z', '0000-12-31T23:59:59.999Z', '0001-01-01T00:00:00+01:00', '0000-06-01T00:00:00-05:00']) {
      for (const field of ['since', 'until']) {
        const res = await list(`${field}=${encodeURIComponent(at)}`);
        expect(res.status, `${field}=${at}: ${JSON.stringify(res.json)}`).toBe(400);
        expect(res.json).toMatchObject({ error: 'Invalid request' });
        expect(res.json.details).toContain(`query.${field}: ${OUT_OF_RANGE}`);
      }
    }
    const cursor = await list(`cursor=${cursorAt('0000-01-01T00:00:00Z')}`);
    expect(cursor.status).toBe(400);
    expect(cursor.json.details.join('\n')).toMatch(/^query\.cursor: not a cursor/);
  });

  it('the edges of the range are taken', async () => {
    for (const query of [
      `since=${encodeURIComponent(EARLIEST_TIME)}`,
      `until=${encodeURIComponent('9999-12-31T23:59:59-14:00')}`,
      `since=${encodeURIComponent(EARLIEST_TIME)}&until=${encodeURIComponent('9999-12-31T23:59:59.999Z')}`,
      `cursor=${cursorAt('0001-01-01T00:00:00Z')}`,
    ]) {
      const res = await list(query);
      expect(res.status, `${query}: ${JSON.stringify(res.json)}`).toBe(200);
    }
  });

  it('any ISO 8601 timestamp (years 0000 to 9999, any offset) is a 200 or a 400 by the rule, never a 500', async () => {
    const two = (n: number) => String(n).padStart(2, '0');
    const timestamp = fc
      .record({
        year: fc.integer({ min: 0, max: 9999 }),
        month: fc.integer({ min: 1, max: 12 }),
        day: fc.integer({ min: 1, max: 28 }),
        hour: fc.integer({ min: 0, max: 23 }),
        minute: fc.integer({ min: 0, max: 59 }),
        offset: fc.oneof(fc.constant('Z'), fc.integer({ min: -14 * 60, max: 14 * 60 }).map((m) => `${m < 0 ? '-' : '+'}${two(Math.floor(Math.abs(m) / 60))}:${two(Math.abs(m) % 60)}`)),
      })
      .map((t) => `${String(t.year).padStart(4, '0')}-${two(t.month)}-${two(t.day)}T${two(t.hour)}:${two(t.minute)}:00${t.offset}`);
    // the years near the edge, often
    const edgy = fc.oneof(timestamp, fc.tuple(timestamp, fc.constantFrom('0000', '0001')).map(([t, year]) => year + t.slice(4)));
    await fc.assert(
      fc.asyncProperty(edgy, fc.constantFrom('since', 'until'), async (at, field) => {
        const res = await list(`${field}=${encodeURIComponent(at)}`);
        const inRange = Date.parse(at) >= Date.parse(EARLIEST_TIME);
        expect(res.status, `${field}=${at}: ${JSON.stringify(res.json)}`).toBe(inRange ? 200 : 400);
        if (!inRange) expect(res.json.details).toContain(`query.${field}: ${OUT_OF_RANGE}`);
      }),
      { numRuns: 60 },
    );
  });
});
