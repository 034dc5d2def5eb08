/** Whole calls over the Twilio protocol, against the real server with the sandbox providers. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { receivedMessages, sandboxAssistant, startCallingServer, type CallingServer, frontDesk } from '../helpers/calls.js';

let s: CallingServer;
beforeAll(async () => {
  s = await startCallingServer();
});
afterAll(async () => {
  await s?.close();
});


describe('a sandbox call through a workflow', () => {
  it('answers, follows the workflow on what the caller says, and hangs up at the end node', async () => {
    const { number, workflowId, assistantId } = await s.setUpNumber({ definition: frontDesk });
    const call = s.caller(number);
    const outcome = await call.dial();
    expect(outcome.kind).toBe('connected');
    await call.hear('Acme Dental');
    await call.quiet();
    await call.say('I would like to book an appointment please.');
    await call.hear('Sure thing');
    await call.hear('book your appointment');
    await call.quiet();
    await call.say('That is all, I am finished, goodbye.');
    await call.hear('goodbye');
    await call.ended();

    const callId = outcome.kind === 'connected' ? outcome.callId : '';
    await s.receiver.waitForRequests(4, 10_000);
    const statuses = receivedMessages(s.receiver, 'status-update').filter((m) => m.call.id === callId).map((m) => m.status);
    expect(statuses).toEqual(['ringing', 'in-progress', 'ended']);
    const ended = receivedMessages(s.receiver, 'status-update').find((m) => m.call.id === callId && m.status === 'ended');
    expect(ended.ended_reason).toBe('assistant-ended-call');
    const report = receivedMessages(s.receiver, 'end-of-call-report').find((m) => m.call.id === callId);
    expect(report).toMatchObject({
      ended_reason: 'assistant-ended-call',
      assistant_id: assistantId,
      workflow_id: workflowId,
      nodes_visited: ['greeting', 'booking', 'bye'],
    });
    expect(report.transcript).toContain('book an appointment');
    expect(report.messages.some((m: { node_id: string }) => m.node_id === 'booking')).toBe(true);

    const got = await s.api('GET', `/calls/${callId}`);
    expect(got.status).toBe(200);
    expect(got.json.call).toMatchObject({ status: 'ended', ended_reason: 'assistant-ended-call', current_node: 'bye' });
    // every delivery attempt of the call, for debugging an endpoint
    let attempts = await s.api('GET', `/calls/${callId}/webhooks`);
    for (let i = 0; i < 50 && attempts.json.webhooks.length < 4; i++) {
      await new Promise((r) => setTimeout(r, 100)); // an attempt is recorded once its answer is in
      attempts = await s.api('GET', `/calls/${callId}/webhooks`);
    }
    expect(attempts.status).toBe(200);
    const events = attempts.json.webhooks.map((a: { event: string }) => a.event);
    expect(events).toEqual(expect.arrayContaining(['status-update', 'end-of-call-report']));
    for (const a of attempts.json.webhooks) {
      expect(a).toMatchObject({ url: s.receiver.url, attempt: 1, outcome: 'delivered', status_code: 200 });
    }
    expect((await s.api('GET', '/calls/00000000-0000-4000-8000-000000000000/webhooks')).status).toBe(404);
    // Prometheus metrics: the call is counted by its ended_reason, its turns and its webhooks too
    const metrics = await s.app.inject({ method: 'GET', url: '/metrics' });
    expect(metrics.statusCode).toBe(200);
    expect(metrics.headers['content-type']).toContain('text/plain');
    expect(metrics.body).toMatch(/switchboard_calls_ended_total\{ended_reason="assistant-ended-call"\} [1-9]/);
    expect(metrics.body).toMatch(/switchboard_webhook_deliveries_total\{event="end-of-call-report",outcome="delivered"\} [1-9]/);
    expect(metrics.body).toMatch(/switchboard_turn_latency_seconds_count [1-9]/);
    expect(metrics.body).toContain('switchboard_live_calls');
    // the assistant hung up through the telephony REST API
    expect(s.twilio.requests.some((r) => r.form.get('Status') === 'completed')).toBe(true);
  }, 60_000);

  it('sends the assistant\'s audio 40 ms to a Twilio media message (a reply\'s last one may be shorter), all of it heard', async () => {
    const { number } = await s.setUpNumber({ assistant: sandboxAssistant({ first_message: 'Hi there, how can I help?' }) });
    const call = s.caller(number, { recordAudio: true });
    await call.dial();
    await call.hear('how can I help');
    await call.quiet();
    await call.hangUp();
    const sizes = call.outboundAudio.map((a) => a.length);
    expect(sizes.length).toBeGreaterThan(10);
    // whole frames, one or two to a message
    expect(sizes.filter((n) => n !== 320)).toEqual(sizes.filter((n) => n === 160));
    // single frames only while a reply's first audio trickles in (each goes at once: the lead is
    // not yet full) and at its end, on an odd frame; two in between. The sandbox TTS hands out a
    // sentence's audio in chunks of up to a second, so the first pacing step has frames enough
    // for pairs; a TTS whose first bytes are one frame sends that frame alone at once, never held
    // for the next (the call flushes what the transport holds at the end of each pacing step:
    // test/calls-unit/pacer.test.ts)
    expect([160, 320]).toContain(sizes[0]);
    const paired = sizes.slice(sizes.indexOf(320));
    expect(paired.slice(0, -1).every((n) => n === 320)).toBe(true);
    expect(sizes.indexOf(320)).toBeLessThanOrEqual(4);
    expect(call.frameTimes.length).toBe(sizes.reduce((a, n) => a + n, 0) / 160);
  }, 30_000);

  // (no workflow: first_message, an answer in the model's words, the report: test/fast-calls/conversation.test.ts;
  // the sandbox model's own words: test/providers/sandbox-llm.test.ts)
});
