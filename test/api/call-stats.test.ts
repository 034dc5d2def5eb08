/**
 * What the dashboard reads of the call log beyond the listing (DECISIONS 19): `GET /calls?customer=`
 * (a search by customer number) and `GET /calls/stats` (the overview), on the calls of the log,
 * against a real server on PGlite (PostgreSQL with DATABASE_URL).
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callLogEntry } from '../../src/calls/call-log.js';
import type { CallLogEntry } from '../../src/store/calls.js';
import { callRecord } from '../helpers/call-record.js';
import { startCallingServer, type CallingServer } from '../helpers/calls.js';

let s: CallingServer;
const HOUR = 3600_000;
const NOW = Date.now();
const at = (hoursAgo: number) => new Date(NOW - hoursAgo * HOUR).toISOString();

function entry(orgId: string, createdAt: string, patch: Partial<CallLogEntry> = {}): CallLogEntry {
  return { ...callLogEntry(callRecord({ organization_id: orgId, created_at: createdAt, started_at: createdAt })), ...patch };
}

/** What a call's observation keeps of its turns (DECISIONS 21): only the totals count here. */
const observedTurns = (totals: number[]) => ({
  trace_id: null,
  turns: totals.map((total) => ({
    node_id: 'greeting',
    at: new Date().toISOString(),
    latency: { stt: null, endpointing: null, llm_first_token: null, tts_first_audio: null, service: 5, total },
  })),
  turn_latency: null,
  usage: { stt: [], llm: [], tts: [], realtime: [], carrier: [] },
  cost: null,
});

const ended = (orgId: string, hoursAgo: number, seconds: number, reason: string, customer: string | null, turns: number[] = []) =>
  entry(orgId, at(hoursAgo), {
    status: 'ended',
    ended_reason: reason,
    ended_at: new Date(Date.parse(at(hoursAgo)) + seconds * 1000).toISOString(),
    customer: customer === null ? null : { number: customer, name: null },
    ...(turns.length ? { observed: observedTurns(turns) as never } : {}),
  });

beforeAll(async () => {
  s = await startCallingServer();
  const other = (await s.store.keys.createKey('Other stats org')).organization.id;
  const rows = [
    ended(s.orgId, 1, 30, 'customer-ended-call', '+14155550101', [400, 500, 600]),
    ended(s.orgId, 2, 90, 'customer-ended-call', '+14155550102', [700, 800]),
    ended(s.orgId, 30, 60, 'assistant-ended-call', '+442071230000', [300, 900, 1000, 200, 100]),
    ended(s.orgId, 24 * 6, 120, 'call-transferred', '+14155550103'),
    ended(s.orgId, 24 * 9, 600, 'customer-ended-call', '+14155550104'), // before the default 7 days
    entry(s.orgId, at(0.1), { status: 'in-progress', customer: { number: '+33142685300', name: null } }),
    entry(s.orgId, at(24 * 20), { status: 'ringing' }), // live, whenever it began
    ended(s.orgId, 3, 10, 'customer-did-not-join', null), // a web call: no customer
    ended(other, 1, 999, 'customer-ended-call', '+14155550101'),
  ];
  for (const row of rows) await s.store.calls.upsert(row);
}, 120_000);
afterAll(async () => {
  await s?.close();
});

describe('GET /calls?customer=', () => {
  it('finds the calls whose customer number contains the digits, newest first, with the other filters', async () => {
    const numbers = async (query: string) => {
      const res = await s.api('GET', `/calls?${query}`);
      expect(res.status, JSON.stringify(res.json)).toBe(200);
      return res.json.calls.map((c: { customer: { number: string } | null }) => c.customer?.number);
    };
    expect(await numbers('customer=41555501')).toEqual(['+14155550101', '+14155550102', '+14155550103', '+14155550104']);
    expect(await numbers(`customer=${encodeURIComponent('+44')}`)).toEqual(['+442071230000']);
    expect(await numbers('customer=0101')).toEqual(['+14155550101']); // the other organization's is not found
    expect(await numbers('customer=4155550&status=ended&limit=2')).toEqual(['+14155550101', '+14155550102']);
    expect(await numbers('customer=999999')).toEqual([]);
  });

  it('refuses anything but digits (after an optional +), naming the parameter', async () => {
    for (const bad of ['415-555', '%25', '_', 'abc', '+', '1234567890123456']) {
      const res = await s.api('GET', `/calls?customer=${encodeURIComponent(bad)}`);
      expect(res.status, bad).toBe(400);
      expect(res.json.details.join('\n'), bad).toMatch(/^query\.customer: /);
    }
  });
});

describe('GET /calls/stats', () => {
  it('the last 7 days by default: counts by status and ended reason, mean duration, live calls now', async () => {
    const res = await s.api('GET', '/calls/stats');
    expect(res.status, JSON.stringify(res.json)).toBe(200);
    const { stats } = res.json;
    expect(Date.parse(stats.until) - Date.parse(stats.since)).toBe(7 * 24 * HOUR);
    expect(stats).toMatchObject({
      calls: 6,
      by_status: { ended: 5, 'in-progress': 1 },
      by_ended_reason: { 'customer-ended-call': 2, 'assistant-ended-call': 1, 'call-transferred': 1, 'customer-did-not-join': 1 },
      live: 2,
    });
    // (30 + 90 + 60 + 120 + 10) / 5 ended calls; the live one has no end yet
    expect(stats.mean_duration_seconds).toBeCloseTo(62, 5);
    // the ten turns of three calls: 100 … 1000 ms, nearest rank
    expect(stats.turn_latency_ms).toEqual({ p50: 500, p95: 1000, turns: 10 });
  });

  it('a period of its own: since inclusive, until exclusive', async () => {
    const since = encodeURIComponent(at(24));
    const res = await s.api('GET', `/calls/stats?since=${since}`);
    expect(res.json.stats).toMatchObject({ calls: 4, by_ended_reason: { 'customer-ended-call': 2, 'customer-did-not-join': 1 }, live: 2 });
    expect(res.json.stats.turn_latency_ms).toEqual({ p50: 600, p95: 800, turns: 5 });
    const empty = await s.api('GET', `/calls/stats?since=${encodeURIComponent('2001-01-01T00:00:00Z')}&until=${encodeURIComponent('2001-01-02T00:00:00Z')}`);
    expect(empty.json.stats).toMatchObject({ calls: 0, by_status: {}, by_ended_reason: {}, mean_duration_seconds: null, live: 2, turn_latency_ms: null });
  });

  it('refuses a period that ends before it starts, and unknown parameters', async () => {
    const backwards = await s.api('GET', `/calls/stats?since=${encodeURIComponent(at(1))}&until=${encodeURIComponent(at(2))}`);
    expect(backwards.status).toBe(400);
    expect(backwards.json.details).toContain('query.until: must be later than since');
    const future = await s.api('GET', `/calls/stats?since=${encodeURIComponent(new Date(NOW + 48 * HOUR).toISOString())}`);
    expect(future.status).toBe(400);
    expect(future.json.details.join('\n')).toMatch(/^query\.since: /);
    expect((await s.api('GET', '/calls/stats?status=ended')).status).toBe(400);
  });

  it("another organization's calls are not counted, and a key is needed", async () => {
    const res = await s.app.inject({ method: 'GET', url: '/calls/stats' });
    expect(res.statusCode).toBe(401);
    const { key } = await s.store.keys.createKey(`Stats ${randomUUID()}`);
    const theirs = await s.app.inject({ method: 'GET', url: '/calls/stats', headers: { authorization: `Bearer ${key}` } });
    expect(theirs.json().stats).toMatchObject({ calls: 0, live: 0 });
  });
});
