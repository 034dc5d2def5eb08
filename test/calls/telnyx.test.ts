/**
 * Calls over Telnyx end to end (DECISIONS 18): the real server with `TELNYX_API_BASE` at the
 * Telnyx stand-in (src/sim/telnyx.ts: Call Control API, Ed25519-signed webhooks, the media stream
 * with a simulated party on it, both tracks) and the sandbox providers. An inbound call through a
 * workflow (greeting heard, caller understood, hang-up, report), a transfer, a refused call,
 * outbound calls and a campaign, and forged webhooks that change nothing.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { startTelnyxStandIn, type TelnyxStandIn } from '../../src/sim/telnyx.js';
import { telnyxKeyPair, telnyxSignature } from '../../src/telephony/telnyx/signature.js';
import {
  eventually,
  frontDesk,
  receivedMessages,
  sandboxAssistant,
  startCallingServer,
  transferFlow,
  type CallingServer,
  throughFrontDesk,
} from '../helpers/calls.js';

const API_KEY = 'KEY01890ABCDEF_switchboard_test';
const CONNECTION = '2811212257810187875';

let s: CallingServer;
let telnyx: TelnyxStandIn;
let webhookUrl: string;

beforeAll(async () => {
  telnyx = await startTelnyxStandIn({ apiKeys: [API_KEY], connections: { [CONNECTION]: null } });
  s = await startCallingServer({ TELNYX_API_BASE: telnyx.url });
  webhookUrl = `${s.baseUrl}/telephony/telnyx/webhook`;
  telnyx.setConnection(CONNECTION, webhookUrl);
  const account = await s.api('PATCH', '/account', { telnyx: { api_key: API_KEY, public_key: telnyx.publicKey, connection_id: CONNECTION } });
  expect(account.status, JSON.stringify(account.json)).toBe(200);
  expect(account.json.account.telnyx).toEqual({ public_key: telnyx.publicKey, connection_id: CONNECTION, api_key_set: true });
}, 120_000);
afterAll(async () => {
  await s?.close();
  await telnyx?.close();
});

const messagesFor = (callId: string, type: string) => receivedMessages(s.receiver, type).filter((m) => m.call?.id === callId);
const reportOf = (callId: string, timeoutMs = 20_000) => eventually(`the report of ${callId}`, () => messagesFor(callId, 'end-of-call-report')[0], timeoutMs);
const statusesOf = (callId: string) => messagesFor(callId, 'status-update').map((m) => m.status);
const commandsOf = (ccid: string) => telnyx.call(ccid)!.commands.map((c) => c.action);

let customerSeq = 0;
const customerNumber = () => `+1415700${String(++customerSeq).padStart(4, '0')}`;

describe('an inbound call', () => {
  it('answered with a stream of both tracks; the greeting heard, the caller understood, the goodbye, the hang-up and the report', async () => {
    const { number, workflowId } = await s.setUpNumber({ definition: frontDesk, provider: 'telnyx' });
    const call = telnyx.inbound({ to: number, from: '+14155550142' });
    const outcome = await call.dial();
    expect(outcome.kind).toBe('answered');
    const callId = outcome.kind === 'answered' ? outcome.callId : '';

    const answer = call.commands.find((c) => c.action === 'answer')!;
    expect(answer.body).toMatchObject({
      stream_url: expect.stringMatching(new RegExp(`^ws://127\\.0\\.0\\.1:\\d+/telephony/telnyx/media\\?call_id=${callId}&token=`)),
      stream_track: 'both_tracks',
      stream_bidirectional_mode: 'rtp',
      stream_bidirectional_codec: 'PCMU',
      client_state: Buffer.from(callId).toString('base64'),
    });

    await throughFrontDesk(call, 20_000);

    // the assistant hung up through Call Control; Telnyx said so
    expect(call.commands.map((c) => c.action)).toEqual(['answer', 'hangup']);
    expect(call.hangupCause).toBe('normal_clearing');
    const report = await reportOf(callId);
    expect(report).toMatchObject({ ended_reason: 'assistant-ended-call', workflow_id: workflowId, nodes_visited: ['greeting', 'booking', 'bye'] });
    expect(report.transcript).toContain('book an appointment');
    // what the caller heard (the outbound track) never reached the model as the caller's words
    expect(report.messages.filter((m: { role: string }) => m.role === 'user').map((m: { content: string }) => m.content)).toEqual([
      'I would like to book an appointment please.',
      'That is all, I am finished, goodbye.',
    ]);
    expect(statusesOf(callId)).toEqual(['ringing', 'in-progress', 'ended']);
    const got = await s.api('GET', `/calls/${callId}`);
    expect(got.json.call).toMatchObject({
      status: 'ended',
      type: 'inbound_phone_call',
      transport: 'telnyx',
      customer: { number: '+14155550142' },
    });
    // every webhook of the call was taken (`call.hangup` goes after the hang-up: its answer may still be on its way)
    await eventually('every webhook of the call answered', () => call.webhooks.every((w) => w.status !== null || w.error !== undefined), 15_000);
    expect(call.webhooks.filter((w) => w.status !== 204).map((w) => `${w.eventType} ${w.status}${w.error ? ` (${w.error})` : ''}`)).toEqual([]);
  }, 60_000);

  it('the caller hangs up: stop on the stream, the call ends customer-ended-call; a key press reaches the call', async () => {
    const { number } = await s.setUpNumber({ definition: frontDesk, provider: 'telnyx' });
    const call = telnyx.inbound({ to: number });
    const outcome = await call.dial();
    const callId = outcome.kind === 'answered' ? outcome.callId : '';
    await call.hear('Acme Dental');
    await call.quiet();
    call.pressKey('7');
    // a key press is caller input: the sandbox model answers it
    await call.hear('DTMF: 7');
    await call.quiet();
    await call.hangUp();
    const report = await reportOf(callId);
    expect(report.ended_reason).toBe('customer-ended-call');
    expect(report.messages.filter((m: { role: string }) => m.role === 'user').map((m: { content: string }) => m.content)).toEqual(['DTMF: 7']);
  }, 45_000);

  it('a transfer node: Call Control transfer to the destination, from our number; the call ends call-transferred', async () => {
    const { number } = await s.setUpNumber({ definition: transferFlow, provider: 'telnyx' });
    const call = telnyx.inbound({ to: number });
    const outcome = await call.dial();
    const callId = outcome.kind === 'answered' ? outcome.callId : '';
    await call.hear('Acme support');
    await call.quiet();
    await call.say('Can I speak to a human agent please?');
    await call.hear('Connecting you to an agent');
    await eventually('the transfer', () => call.transferredTo.length > 0, 20_000);
    expect(call.commands.find((c) => c.action === 'transfer')!.body).toEqual({ to: '+14155550123', from: number });
    const report = await reportOf(callId);
    expect(report.ended_reason).toBe('call-transferred');
    // the caller stays with the agent: Switchboard did not hang up
    expect(call.commands.map((c) => c.action)).not.toContain('hangup');
    expect(call.state).toBe('bridged');
  }, 45_000);

  it('a transfer Telnyx refuses ends that call pipeline-error-telnyx, naming Telnyx and what it said', async () => {
    const { number } = await s.setUpNumber({ definition: transferFlow, provider: 'telnyx' });
    telnyx.setCallee('+14155550123', { kind: 'reject', detail: 'Transfers to this destination are not allowed.' });
    try {
      const call = telnyx.inbound({ to: number });
      const outcome = await call.dial();
      const callId = outcome.kind === 'answered' ? outcome.callId : '';
      await call.hear('Acme support');
      await call.quiet();
      await call.say('Can I speak to a human agent please?');
      const report = await reportOf(callId, 30_000);
      expect(report.ended_reason).toBe('pipeline-error-telnyx');
      expect(report.errors).toContainEqual(expect.objectContaining({ code: 'CARRIER_API_ERROR', provider: 'telnyx', message: expect.stringContaining('Transfers to this destination are not allowed. (10010)') }));
      // the caller is not left on the line: Switchboard hung up
      await eventually('the hang-up', () => call.final, 10_000);
      expect(call.commands.map((c) => c.action)).toEqual(['answer', 'transfer', 'hangup']);
    } finally {
      telnyx.setCallee('+14155550123', null);
    }
  }, 45_000);

  it('a call the checks refuse is rejected (CALL_REJECTED), with its status-update and report', async () => {
    const { number } = await s.setUpNumber({ provider: 'telnyx', assistant: sandboxAssistant({ tts_config: { provider: 'elevenlabs', voice_id: 'x' } }) });
    const call = telnyx.inbound({ to: number });
    expect(await call.dial()).toEqual({ kind: 'rejected', cause: 'call_rejected' });
    expect(call.commands.find((c) => c.action === 'reject')!.body).toEqual({ cause: 'CALL_REJECTED' });
    const ended = await eventually('the ended status-update', () =>
      receivedMessages(s.receiver, 'status-update').find((m) => m.status === 'ended' && m.customer?.number === call.from && m.phone_number?.number === number),
    );
    expect(ended.ended_reason).toBe('rejected-at-start');
  });
});

const b64 = (text: string) => Buffer.from(text).toString('base64');
const placeCall = async (numberId: string, customer: { number: string; name?: string }) => {
  const res = await s.api('POST', '/calls', { number_id: numberId, customer });
  expect(res.status, JSON.stringify(res.json)).toBe(201);
  return res.json.call as { id: string; transport: string; status: string };
};
const dialOf = (to: string) => telnyx.requests.find((r) => r.method === 'POST' && r.path === '/v2/calls' && r.body?.to === to);

describe('outbound calls', () => {
  const OUTBOUND = { speech_config: { first_message_outbound: 'Hi {{customer.name}}, this is Acme calling.' } };

  it('dialled through the connection; the stream starts on the answer; the callee hears the assistant first, hangs up, and it is reported', async () => {
    const { numberId, number } = await s.setUpNumber({ provider: 'telnyx', assistant: sandboxAssistant(OUTBOUND) });
    const to = customerNumber();
    const call = await placeCall(numberId, { number: to, name: 'Ada' });
    expect(call).toMatchObject({ transport: 'telnyx', status: 'queued' });
    const placed = await telnyx.waitForCall(to, 15_000);
    const dial = dialOf(to)!;
    expect(dial.apiKey).toBe(API_KEY);
    expect(dial.body).toEqual({
      connection_id: CONNECTION,
      to,
      from: number,
      timeout_secs: 30,
      client_state: b64(call.id),
      webhook_url: webhookUrl,
      webhook_url_method: 'POST',
      command_id: call.id,
    });
    const leg = await placed.waitForLeg(15_000);
    expect(placed.commands[0]).toMatchObject({
      action: 'streaming_start',
      body: { stream_track: 'both_tracks', stream_bidirectional_mode: 'rtp', stream_bidirectional_codec: 'PCMU', client_state: b64(call.id) },
    });
    await leg.hear('Hi Ada, this is Acme calling');
    await leg.quiet();
    await leg.hangUp();
    const report = await reportOf(call.id);
    expect(report.ended_reason).toBe('customer-ended-call');
    expect(statusesOf(call.id)).toEqual(['queued', 'ringing', 'in-progress', 'ended']);
    const got = (await s.api('GET', `/calls/${call.id}`)).json.call;
    expect(got).toMatchObject({ status: 'ended', transport: 'telnyx', type: 'outbound_phone_call' });
  }, 45_000);

  it('a campaign through Telnyx: one call per customer, each ending its own way', async () => {
    const { numberId } = await s.setUpNumber({ provider: 'telnyx', assistant: sandboxAssistant(OUTBOUND) });
    await s.api('PATCH', '/account', { outbound: { max_concurrent_calls: 10, calls_per_second: 20 } });
    try {
      const [answers, busy, away, broken, refused] = [customerNumber(), customerNumber(), customerNumber(), customerNumber(), customerNumber()];
      telnyx.setCallee(answers, { kind: 'person', onAnswer: async (leg) => (await leg.hear('this is Acme calling'), await leg.hangUp()) });
      telnyx.setCallee(busy, { kind: 'busy' });
      telnyx.setCallee(away, { kind: 'no-answer', ringMs: 300 });
      telnyx.setCallee(broken, { kind: 'failed' });
      telnyx.setCallee(refused, { kind: 'reject', detail: 'Calls to this destination are not allowed.' });
      const numbers = [answers, busy, away, broken, refused];
      const res = await s.api('POST', '/calls', { number_id: numberId, customers: numbers.map((number) => ({ number })) });
      expect(res.status, JSON.stringify(res.json)).toBe(201);
      const ids = (res.json.calls as Array<{ id: string; customer: { number: string } }>).map((c) => [c.customer.number, c.id] as const);
      const reasons: Record<string, string> = {};
      for (const [number, id] of ids) reasons[number] = (await reportOf(id, 30_000)).ended_reason;
      expect(reasons).toEqual({
        [answers]: 'customer-ended-call',
        [busy]: 'customer-busy',
        [away]: 'customer-did-not-answer',
        [broken]: 'dial-failed',
        [refused]: 'dial-failed',
      });
      const refusedCall = (await s.api('GET', `/calls/${ids.find(([n]) => n === refused)![1]}`)).json.call;
      expect(refusedCall.errors[0]).toMatchObject({ code: 'CARRIER_API_ERROR', provider: 'telnyx', message: expect.stringContaining('Calls to this destination are not allowed.') });
      const brokenCall = (await s.api('GET', `/calls/${ids.find(([n]) => n === broken)![1]}`)).json.call;
      expect(brokenCall.errors[0]).toMatchObject({ code: 'DIAL_FAILED', provider: 'telnyx', message: 'telnyx: the call failed (unspecified, SIP 503)' });
    } finally {
      await s.api('PATCH', '/account', { outbound: null });
    }
  }, 60_000);

  it('POST /calls/{id}/end while it rings: hung up at Telnyx, canceled', async () => {
    const { numberId } = await s.setUpNumber({ provider: 'telnyx', assistant: sandboxAssistant(OUTBOUND) });
    const to = customerNumber();
    telnyx.setCallee(to, { kind: 'no-answer', ringMs: 20_000 });
    const call = await placeCall(numberId, { number: to });
    const placed = await telnyx.waitForCall(to, 15_000);
    await eventually('the call id kept', async () => (await s.api('GET', `/calls/${call.id}`)).json.call.status === 'ringing');
    await eventually('the dial answered', () => placed.events.includes('call.initiated'));
    const end = await s.api('POST', `/calls/${call.id}/end`);
    expect(end.status).toBe(202);
    expect(end.json.call).toMatchObject({ status: 'ended', ended_reason: 'canceled' });
    await eventually('the hang-up at Telnyx', () => placed.final);
    expect(placed.commands.map((c) => c.action)).toEqual(['hangup']);
    expect(placed.hangupCause).toBe('originator_cancel');
    expect((await reportOf(call.id)).ended_reason).toBe('canceled');
  }, 30_000);

  it('voicemail detection: answering_machine_detection greeting_end; a machine gets voicemail_message after its greeting', async () => {
    const { numberId } = await s.setUpNumber({
      provider: 'telnyx',
      assistant: sandboxAssistant({ ...OUTBOUND, voicemail_detection: true, voicemail_message: 'Acme here, please call us back.' }),
    });
    const to = customerNumber();
    telnyx.setCallee(to, { kind: 'voicemail', greeting: 'You have reached Cy. Leave a message after the tone.' });
    const call = await placeCall(numberId, { number: to, name: 'Cy' });
    const placed = await telnyx.waitForCall(to, 15_000);
    expect(dialOf(to)!.body).toMatchObject({ answering_machine_detection: 'greeting_end' });
    const report = await reportOf(call.id, 40_000);
    expect(report).toMatchObject({ ended_reason: 'voicemail', answered_by: 'machine' });
    const recorded = placed.voicemail!.recorded.map((l) => l.text).join(' ');
    expect(recorded).toContain('Acme here, please call us back.');
  }, 60_000);
});

describe('webhooks that do not hold', () => {
  const initiated = (to: string, from = '+14155550999') =>
    JSON.stringify({
      data: {
        event_type: 'call.initiated',
        id: '5f3f1d2c-0b4e-4c57-8a5b-3d2a1c0e9f8b',
        occurred_at: new Date().toISOString(),
        // a leg of its own each run: the carrier-call claim outlives a run in a shared Redis (24 h)
        payload: { call_control_id: 'v3:forged', call_leg_id: randomUUID(), call_session_id: 's', direction: 'incoming', state: 'parked', from, to, client_state: null },
        record_type: 'event',
      },
      meta: { attempt: 1, delivered_to: webhookUrl },
    });
  const post = (body: string, headers: Record<string, string>) =>
    s.app.inject({ method: 'POST', url: '/telephony/telnyx/webhook', headers: { 'content-type': 'application/json', ...headers }, payload: body });
  const callCount = async () => (await s.api('GET', '/calls?limit=100')).json.calls.length as number;
  const state = async () => ({ calls: await callCount(), api: telnyx.requests.length });

  it('a missing, foreign, malformed, tampered or old signature is refused 403, and nothing happens', async () => {
    const { number } = await s.setUpNumber({ provider: 'telnyx' });
    const before = await state();
    const body = initiated(number);
    const now = Math.floor(Date.now() / 1000);
    const stranger = telnyxKeyPair();
    const cases: Array<[string, Record<string, string>, string]> = [
      ['no signature', {}, body],
      ['a timestamp without its signature', { 'telnyx-timestamp': String(now) }, body],
      ['signed by another key', { 'telnyx-signature-ed25519': telnyxSignature(stranger.privateKey, String(now), body), 'telnyx-timestamp': String(now) }, body],
      ['not a signature', { 'telnyx-signature-ed25519': 'not-a-signature', 'telnyx-timestamp': String(now) }, body],
      ['a tampered body', telnyx.signedHeaders(body), body.replace('+14155550999', '+14155550998')],
      ['signed ten minutes ago', telnyx.signedHeaders(body, now - 600), body],
      ['another timestamp than the one signed', { ...telnyx.signedHeaders(body, now), 'telnyx-timestamp': String(now - 1) }, body],
    ];
    for (const [what, headers, payload] of cases) {
      const res = await post(payload, headers);
      expect(res.statusCode, what).toBe(403);
      expect(res.json(), what).toEqual({ error: 'Forbidden', message: 'invalid signature' });
    }
    // the same request, signed as Telnyx signs it, is taken (the checks above were the signature's)
    expect((await post(body, telnyx.signedHeaders(body))).statusCode).toBe(204);
    // …and it alone made a call (answered at the stand-in, which has no such call: the call ends there)
    await eventually('the one call in the log', async () => (await callCount()) === before.calls + 1);
    expect(telnyx.requests.slice(before.api).map((r) => `${r.method} ${r.path.replace(/v3%3A\w+/, 'ID')}`)).toEqual(['POST /v2/calls/ID/actions/answer']);
    // Telnyx refused the answer (it has no such call): the call ends there, naming Telnyx
    const ended = await eventually('the ended status-update', () =>
      receivedMessages(s.receiver, 'status-update').find((m) => m.status === 'ended' && m.customer?.number === '+14155550999' && m.phone_number?.number === number),
    );
    expect(ended.ended_reason).toBe('call-start-error-telnyx');
    expect(ended.errors[0]).toMatchObject({ code: 'CALL_START_FAILED', provider: 'telnyx', message: expect.stringContaining('telnyx answered 404') });
  });

  it('a webhook Telnyx sends again (a retry, or a replay) makes no second call', async () => {
    const { number } = await s.setUpNumber({ definition: frontDesk, provider: 'telnyx' });
    const call = telnyx.inbound({ to: number });
    const outcome = await call.dial();
    const callId = outcome.kind === 'answered' ? outcome.callId : '';
    const first = call.webhooks[0]!;
    const again = await post(first.body, { 'telnyx-signature-ed25519': first.signature, 'telnyx-timestamp': first.timestamp });
    expect(again.statusCode).toBe(204);
    expect(call.commands.filter((c) => c.action === 'answer')).toHaveLength(1);
    await call.hear('Acme Dental');
    await call.hangUp();
    await reportOf(callId);
    expect(receivedMessages(s.receiver, 'status-update').filter((m) => m.customer?.number === call.from && m.phone_number?.number === number && m.status === 'ringing')).toHaveLength(1);
  }, 30_000);

  it('the media socket refuses a frame that is not text, a stream that is not PCMU, and a wrong token', async () => {
    const open = (query: string) =>
      new Promise<WebSocket>((resolve, reject) => {
        const ws = new WebSocket(`${s.baseUrl.replace('http', 'ws')}/telephony/telnyx/media?${query}`);
        ws.once('open', () => resolve(ws));
        ws.once('error', reject);
      });
    const closed = (ws: WebSocket) => new Promise<number>((resolve) => ws.once('close', (code) => resolve(code)));
    const start = (encoding: string) =>
      JSON.stringify({ event: 'start', sequence_number: '1', stream_id: 's', start: { call_control_id: 'v3:x', media_format: { encoding, sample_rate: 8000, channels: 1 } } });
    const query = 'call_id=00000000-0000-4000-8000-000000000000&token=wrong';
    const binary = await open(query);
    binary.send(Buffer.from([1, 2, 3]));
    expect(await closed(binary)).toBe(1008);
    const pcma = await open(query);
    pcma.send(JSON.stringify({ event: 'connected', version: '1.0.0' }));
    pcma.send(start('PCMA'));
    expect(await closed(pcma)).toBe(1008);
    const wrong = await open(query);
    wrong.send(start('PCMU'));
    expect(await closed(wrong)).toBe(1008);
    const garbage = await open(query);
    garbage.send('not json');
    expect(await closed(garbage)).toBe(1008);
  });

  it('bad input is a clear 4xx: not JSON, not a webhook, a number not ours or not Telnyx', async () => {
    const notJson = await post('{"data": ', telnyx.signedHeaders('{"data": '));
    expect(notJson.statusCode).toBe(400);
    const notWebhook = await post('{"event": "call.initiated"}', telnyx.signedHeaders('{"event": "call.initiated"}'));
    expect(notWebhook.statusCode).toBe(400);
    const unknown = initiated('+19995550100');
    expect((await post(unknown, telnyx.signedHeaders(unknown))).statusCode).toBe(404);
    const { number: twilioNumber } = await s.setUpNumber();
    const notTelnyx = initiated(twilioNumber);
    const res = await post(notTelnyx, telnyx.signedHeaders(notTelnyx));
    expect(res.statusCode).toBe(404);
    expect(res.json().message).toMatch(/not a Telnyx number/);
    const huge = await post(`{"x": "${'a'.repeat(70_000)}"}`, {});
    expect(huge.statusCode).toBe(413);
  });
});
