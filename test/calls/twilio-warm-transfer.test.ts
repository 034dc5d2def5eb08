/**
 * Warm transfers over Twilio (DECISIONS 16), against the Twilio stand-in (src/sim/): the operator's
 * call placed through the REST API from the call's number, streaming to us on a leg of its own (the
 * stand-in's person hears the message with the summary, presses 1), then both calls moved into a
 * `<Conference>` named after the call id (REST, new TwiML), our streams closed; busy through the
 * operator call's status callback takes the edge.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SANDBOX_SUMMARY } from '../../src/providers/sandbox/llm.js';
import { callIdOf, eventually, receivedMessages, sandboxAssistant, startCallingServer, type CallingServer } from '../helpers/calls.js';

const OPERATOR = '+14155550188';

let s: CallingServer;
beforeAll(async () => {
  s = await startCallingServer();
}, 120_000);
afterAll(async () => {
  await s?.close();
});

function flow(desk: Record<string, unknown> = {}) {
  return {
    version: 1,
    entry_node: 'greeting',
    nodes: [
      { id: 'greeting', type: 'conversation', first_line: 'Hello, this is Acme Dental.', instructions: 'Help the caller.' },
      { id: 'desk', type: 'transfer', mode: 'warm', destination: OPERATOR, first_line: 'Let me get someone.', hold_message: 'Please hold.', ...desk },
      { id: 'back', type: 'conversation', first_line: 'Anything else?', instructions: 'Help the caller.' },
      { id: 'bye', type: 'end', first_line: 'Goodbye.' },
    ],
    edges: [
      { from: 'greeting', to: 'desk', description: 'the caller wants to speak to a person at the front desk' },
      { from: 'greeting', to: 'back', description: 'the caller has a question about opening hours' },
      { from: 'back', to: 'bye', description: 'the caller is done' },
      { from: 'desk', to: 'back', description: 'nobody took the call', message: 'Nobody is free.' },
    ],
  };
}

const callRecord = async (id: string) => (await s.api('GET', `/calls/${id}`)).json.call;
const reportOf = (callId: string) =>
  eventually(`the report of ${callId}`, () => receivedMessages(s.receiver, 'end-of-call-report').find((m) => m.call.id === callId), 30_000);

async function askForAPerson(definition: unknown) {
  const { number } = await s.setUpNumber({ definition, assistant: sandboxAssistant() });
  const caller = s.caller(number);
  const callId = callIdOf(await caller.dial());
  await caller.hear(/Acme Dental/);
  await caller.quiet(300);
  await caller.say('I would like to speak to a person at the front desk.');
  return { number, caller, callId };
}

describe('warm transfers over Twilio (the stand-in)', () => {
  it('the operator\'s own leg hears the summary and presses 1; both calls move into the call\'s conference', async () => {
    s.twilio.setCallee(OPERATOR, { kind: 'person', ringMs: 300 });
    const { number, caller, callId } = await askForAPerson(flow({ require_acceptance: true }));
    await caller.hear(/Please hold/);
    const operatorCall = await s.twilio.waitForCall(OPERATOR, 15_000);
    // placed from the call's number, its TwiML a stream of its own; progress to our status callback
    expect(operatorCall.from).toBe(number);
    expect(operatorCall.params.get('Twiml')).toMatch(/<Connect><Stream url="ws:\/\/[^"]+\/telephony\/twilio\/operator\/media"><Parameter name="leg" value="[0-9a-f-]{36}"\/>/);
    expect(operatorCall.params.get('StatusCallback')).toMatch(/\/telephony\/twilio\/operator\/status\?leg=/);
    const leg = await operatorCall.waitForLeg(15_000);
    await leg.hear(new RegExp(`Incoming transfer: ${SANDBOX_SUMMARY.replace('.', '\\.')} Press 1 to take the call\\.`), 20_000);
    leg.pressKey('1');
    // the join: both calls run the conference's TwiML, named after the call id
    const conference = await eventually('the conference', () => (s.twilio.conference(callId)?.participants.length === 2 ? s.twilio.conference(callId) : null), 15_000);
    expect(conference!.participants.map((p) => p.direction).sort()).toEqual(['inbound', 'outbound-api']);
    expect(conference!.participants.every((p) => p.endConferenceOnExit)).toBe(true);
    expect(operatorCall.twiml.at(-1)).toContain(`<Conference startConferenceOnEnter="true" endConferenceOnExit="true" beep="false">${callId}</Conference>`);
    const redirects = s.twilio.requests.filter((r) => r.form.get('Twiml')?.includes('<Conference'));
    expect(redirects).toHaveLength(2);
    // our side of both streams is over; the call ended transferred
    await caller.ended(15_000);
    const report = await reportOf(callId);
    expect(report.ended_reason).toBe('call-transferred');
    expect(report.transfer).toMatchObject({ mode: 'warm', destination: OPERATOR, result: 'completed', summary: SANDBOX_SUMMARY });
    expect((await callRecord(callId)).transfer.joined_at).toEqual(expect.any(String));
    // the operator leaves: the conference ends for both
    await operatorCall.hangUp();
    await eventually('the conference\'s end', () => s.twilio.conference(callId)?.endedAt ?? null, 10_000);
  }, 90_000);

  it('busy: the status callback says so; the caller hears the edge\'s message and the call goes on', async () => {
    s.twilio.setCallee(OPERATOR, { kind: 'busy', ringMs: 200 });
    const { caller, callId } = await askForAPerson(flow());
    await caller.hear(/Nobody is free/, 20_000);
    await caller.hear(/Anything else/);
    const record = await callRecord(callId);
    expect(record.status).toBe('in-progress');
    expect(record.transfer).toMatchObject({ mode: 'warm', result: 'busy', joined_at: null });
    await caller.hangUp();
    expect((await reportOf(callId)).transfer.result).toBe('busy');
  }, 90_000);
});
