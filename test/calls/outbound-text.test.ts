/**
 * Outbound calls and text that is not well-formed Unicode, on Redis (where the probe found it):
 * `POST /calls` refuses unpaired surrogates naming the field, `POST /calls/{id}/end` never answers
 * 500, a call that holds one anyway is stored with U+FFFD and dialled, and a queued call whose
 * record cannot be moved (written before the store took such text: its JSON holds `\udXXX`, which
 * Redis's cjson cannot read back) is ended `dial-failed` with its reason, never left queued nor dialled.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TwilioStandIn } from '../../src/sim/twilio.js';
import { UNPAIRED_SURROGATE_PROBLEM } from '../../engine/text.js';
import { eventually, receivedMessages, sandboxAssistant, startCallingServer, type CallingServer } from '../helpers/calls.js';

let s: CallingServer;
let twilio: TwilioStandIn;
let numberId: string;

beforeAll(async () => {
  s = await startCallingServer({ REDIS_URL: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379' });
  twilio = s.twilio as unknown as TwilioStandIn;
  ({ numberId } = await s.setUpNumber({ assistant: sandboxAssistant() }));
}, 120_000);
afterAll(async () => {
  await s?.close();
});

let seq = 0;
const customerNumber = () => `+1415700${String(++seq).padStart(4, '0')}`;
const statusesOf = (callId: string) =>
  receivedMessages(s.receiver, 'status-update')
    .filter((m) => m.call?.id === callId)
    .map((m) => m.status);

describe('POST /calls', () => {
  it('refuses a lone surrogate in customer.name, customers[i].name or a variable, naming it; nothing is queued', async () => {
    const before = twilio.requests.length;
    const listed = (await s.api('GET', '/calls')).json.calls.length;
    const cases: Array<[unknown, string]> = [
      [{ number_id: numberId, customer: { number: customerNumber(), name: '\ud800' } }, 'customer.name'],
      [{ number_id: numberId, customers: [{ number: customerNumber() }, { number: customerNumber(), name: 'Ann\udfff' }] }, 'customers[1].name'],
      [{ number_id: numberId, customer: { number: customerNumber() }, variables: { day: 'Mon\udc00' } }, 'variables.day'],
    ];
    for (const [body, field] of cases) {
      const res = await s.api('POST', '/calls', body);
      expect(res.status).toBe(400);
      expect(res.json).toMatchObject({ error: 'Invalid request' });
      expect(res.json.details).toContain(`${field}: ${UNPAIRED_SURROGATE_PROBLEM}`);
    }
    expect((await s.api('GET', '/calls')).json.calls.length).toBe(listed);
    expect(twilio.requests.length).toBe(before);
  });

  it('takes astral characters and emoji, and POST /calls/{id}/end ends the call (202, not 500)', async () => {
    const to = customerNumber();
    twilio.setCallee(to, { kind: 'no-answer', ringMs: 20_000 });
    const placed = await s.api('POST', '/calls', { number_id: numberId, customer: { number: to, name: 'Zoë 🎉 𝄞' }, variables: { day: 'Mon 👋' } });
    expect(placed.status, JSON.stringify(placed.json)).toBe(201);
    expect(placed.json.call.customer).toEqual({ number: to, name: 'Zoë 🎉 𝄞' });
    const ended = await s.api('POST', `/calls/${placed.json.call.id}/end`);
    expect(ended.status, JSON.stringify(ended.json)).toBe(202);
    expect(ended.json.call).toMatchObject({ status: 'ended', ended_reason: 'canceled', customer: { name: 'Zoë 🎉 𝄞' } });
    expect((await s.api('POST', `/calls/${placed.json.call.id}/end`)).status).toBe(409);
  });
});

describe('a queued call whose record holds an unpaired surrogate (placed past the API\'s check)', () => {
  it('is dialled, its text kept with U+FFFD in place of the surrogate', async () => {
    const to = customerNumber();
    twilio.setCallee(to, { kind: 'no-answer', ringMs: 20_000 });
    const outcome = await s.runtime.outbound.place(s.orgId, { number_id: numberId, customers: [{ number: to, name: 'Lone \ud800' }] });
    expect(outcome.kind).toBe('queued');
    const id = outcome.kind === 'queued' ? outcome.calls[0]!.id : '';
    await twilio.waitForCall(to, 15_000);
    const call = (await s.api('GET', `/calls/${id}`)).json.call;
    expect(call.customer.name).toBe('Lone \ufffd');
    expect((await s.api('POST', `/calls/${id}/end`)).status).toBe(202);
  });

  it('one whose stored record cannot be read back (written by a version before the store took such text) is ended dial-failed with its reason, announced, never dialled', async () => {
    // one call at a time, the first ringing on: the second waits in the queue while its record is planted
    await s.api('PATCH', '/account', { outbound: { max_concurrent_calls: 1, calls_per_second: 10 } });
    const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
    try {
      const first = customerNumber();
      twilio.setCallee(first, { kind: 'no-answer', ringMs: 20_000 });
      const ringing = await s.api('POST', '/calls', { number_id: numberId, customer: { number: first } });
      await twilio.waitForCall(first, 15_000);
      const to = customerNumber();
      const before = twilio.requests.filter((r) => r.form?.get('To') === to).length;
      const outcome = await s.runtime.outbound.place(s.orgId, { number_id: numberId, customers: [{ number: to, name: 'Lone' }] });
      const id = outcome.kind === 'queued' ? outcome.calls[0]!.id : '';
      // the escape an earlier version wrote, which Redis's cjson cannot read back
      const stored = (await redis.get(`sb:call:${id}`))!;
      await redis.set(`sb:call:${id}`, stored.replace('"name":"Lone"', '"name":"Lone \\ud800"'), 'KEEPTTL');
      await s.api('POST', `/calls/${ringing.json.call.id}/end`);

      const call = await eventually(
        'the call to end',
        async () => {
          const r = await s.api('GET', `/calls/${id}`);
          return r.json.call?.status === 'ended' ? r.json.call : null;
        },
        20_000,
      );
      expect(call.ended_reason).toBe('dial-failed');
      expect(call.errors.map((e: { message: string }) => e.message).join('\n')).toMatch(/the call could not be dialled \(its record could not be written: .*kept changing/);
      // its text made well-formed on the way out, so that the record and the log can hold it
      expect(call.customer.name).toBe('Lone \ufffd');
      expect(twilio.requests.filter((r) => r.form?.get('To') === to).length).toBe(before);
      await eventually('the ended status-update', () => statusesOf(id).includes('ended'), 10_000);
      await eventually('the report', () => receivedMessages(s.receiver, 'end-of-call-report').find((m) => m.call?.id === id), 10_000);
      expect((await s.api('POST', `/calls/${id}/end`)).status).toBe(409);
      await eventually('the log to have it ended', async () => (await s.store.calls.get(s.orgId, id))?.status === 'ended', 10_000);
    } finally {
      redis.disconnect();
      await s.api('PATCH', '/account', { outbound: null });
    }
  });

  it('POST /calls/{id}/end on such a call while it waits is a 202 canceled, not a 500', async () => {
    // one call at a time, the first ringing on: the second waits in the queue
    await s.api('PATCH', '/account', { outbound: { max_concurrent_calls: 1, calls_per_second: 10 } });
    try {
      const first = customerNumber();
      twilio.setCallee(first, { kind: 'no-answer', ringMs: 20_000 });
      const ringing = await s.api('POST', '/calls', { number_id: numberId, customer: { number: first } });
      await twilio.waitForCall(first, 15_000);
      const waiting = await s.runtime.outbound.place(s.orgId, { number_id: numberId, customers: [{ number: customerNumber(), name: '\udc00x' }] });
      const id = waiting.kind === 'queued' ? waiting.calls[0]!.id : '';
      const end = await s.api('POST', `/calls/${id}/end`);
      expect(end.status, JSON.stringify(end.json)).toBe(202);
      expect(end.json.call).toMatchObject({ status: 'ended', ended_reason: 'canceled' });
      await s.api('POST', `/calls/${ringing.json.call.id}/end`);
    } finally {
      await s.api('PATCH', '/account', { outbound: null });
    }
  });
});
