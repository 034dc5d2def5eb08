/**
 * Warm transfers to an operator behind the account's SIP trunk (`sip.outbound`; DECISIONS 16),
 * with real user agents: over SIP, baresip calls in as the caller and a second baresip is the
 * operator. What each side heard is read back through the sandbox STT: the caller the hold
 * message and then the operator, the operator the message with the model's summary and then the
 * caller (relayed by Switchboard). Completed, busy, unanswered (the ring timeout), and no edge.
 * From a web call, the operator (baresip) and a browser-like client hear each other through
 * Switchboard (the browser's 16 kHz PCM ↔ the operator's RTP); without a trunk the transfer fails,
 * saying why, and the call takes the node's edge.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { linearToMulaw, mulawDecode, mulawEncode } from '../../src/audio/mulaw.js';
import { SANDBOX_SUMMARY } from '../../src/providers/sandbox/llm.js';
import { synthesizeSandboxSpeech } from '../../src/providers/sandbox/tts.js';
import { TRANSFER_FAILED_LINE } from '../../engine/machine.js';
import { WebCaller } from '../../src/sim/web-caller.js';
import { transcribe } from '../helpers/sandbox-ear.js';
import { Baresip, baresipAvailable, concatSamples, readWav, silence, stopAllBaresip, writeWav } from '../helpers/baresip.js';
import { eventually, receivedMessages, sandboxAssistant, startCallingServer, type CallingServer } from '../helpers/calls.js';

const available = baresipAvailable();
const RTP_MIN = 33_000;
const OPERATOR = '+14155550123';

let s: CallingServer;
let dir: string;
let sipPort: number;

beforeAll(async () => {
  s = await startCallingServer({ RTP_PORT_MIN: String(RTP_MIN), RTP_PORT_MAX: String(RTP_MIN + 400) }, { sip: { port: 0 } });
  sipPort = s.runtime.sip!.port;
  dir = await mkdtemp(join(tmpdir(), 'sb-warm-'));
}, 120_000);
afterEach(async () => {
  await stopAllBaresip();
});
afterAll(async () => {
  await s?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

function flow(desk: Record<string, unknown> = {}, withEdge = true) {
  return {
    version: 1,
    entry_node: 'greeting',
    nodes: [
      { id: 'greeting', type: 'conversation', first_line: 'Hello, this is Acme Dental.', instructions: 'Help the caller.' },
      {
        id: 'desk',
        type: 'transfer',
        mode: 'warm',
        destination: OPERATOR,
        first_line: 'Let me get someone.',
        hold_message: 'Please hold.',
        ...desk,
      },
      { id: 'back', type: 'conversation', first_line: 'Anything else?', instructions: 'Help the caller.' },
      { id: 'bye', type: 'end', first_line: 'Goodbye.' },
    ],
    edges: [
      { from: 'greeting', to: 'desk', description: 'the caller wants to speak to a person at the front desk' },
      { from: 'greeting', to: 'back', description: 'the caller has a question about opening hours' },
      { from: 'back', to: 'bye', description: 'the caller is done' },
      ...(withEdge ? [{ from: 'desk', to: 'back', description: 'nobody took the call', message: 'Nobody is free.' }] : []),
    ],
  };
}

/** A WAV of the sandbox voice saying `text`, after `leadSeconds` of silence. */
async function speech(name: string, text: string, leadSeconds = 0.3): Promise<string> {
  const path = join(dir, `${name}.wav`);
  await writeWav(path, concatSamples(silence(leadSeconds), mulawDecode(synthesizeSandboxSpeech(text)), silence(0.5)));
  return path;
}

/** The two channels of a stereo 16-bit WAV (a call's recording), as μ-law. */
function channelsOf(wav: Buffer): { left: Buffer; right: Buffer } {
  const n = (wav.length - 44) / 4;
  const left = Buffer.alloc(n);
  const right = Buffer.alloc(n);
  for (let i = 0; i < n; i++) {
    left[i] = linearToMulaw(wav.readInt16LE(44 + i * 4));
    right[i] = linearToMulaw(wav.readInt16LE(46 + i * 4));
  }
  return { left, right };
}

const heardText = async (path: string) => (await transcribe(mulawEncode((await readWav(path)).samples))).join(' ');
const callRecord = async (id: string) => (await s.api('GET', `/calls/${id}`)).json.call;
const callsOf = async () => (await s.api('GET', '/calls')).json.calls as { id: string }[];
const reportOf = (callId: string) =>
  eventually(`the report of ${callId}`, () => receivedMessages(s.receiver, 'end-of-call-report').find((m) => m.call.id === callId), 30_000);
const statusesOf = (callId: string) =>
  receivedMessages(s.receiver, 'status-update')
    .filter((m) => m.call.id === callId)
    .map((m) => m.status);

async function trunkTo(operator: Baresip): Promise<void> {
  const res = await s.api('PATCH', '/account', {
    sip: { inbound: { allowed_addresses: ['127.0.0.1'] }, outbound: { proxy: `sip:127.0.0.1:${operator.sipPort}` } },
  });
  expect(res.status).toBe(200);
}

/** The caller dials in and asks for a person; resolves to the call's id. */
async function askForAPerson(caller: Baresip, definition: unknown, assistant: Record<string, unknown> = {}): Promise<string> {
  const { number } = await s.setUpNumber({ provider: 'sip', definition, assistant: sandboxAssistant({ speech_config: { end_call_message: 'Thank you for calling.' }, ...assistant }) });
  const before = new Set((await callsOf()).map((c) => c.id));
  await caller.dial(`sip:${number}@127.0.0.1:${sipPort}`);
  await caller.waitFor('CALL_ESTABLISHED');
  const callId = await eventually('the call', async () => (await callsOf()).find((c) => !before.has(c.id))?.id);
  await eventually('the greeting', async () => (await callRecord(callId)).messages.length >= 1);
  await caller.play(await speech(`ask-${callId}`, 'I would like to speak to a person at the front desk.'));
  return callId;
}

/** A web call (a browser-like client, 16 kHz PCM) asks for a person; resolves to the caller and the call's id. */
async function aWebCallAsksForAPerson(): Promise<{ caller: WebCaller; callId: string }> {
  const assistantId = await s.createAssistant(sandboxAssistant());
  const workflowId = await s.createWorkflow(flow(), 'Warm web flow');
  const caller = new WebCaller({ baseUrl: s.baseUrl, apiKey: s.key });
  const callId = await caller.start({ assistant_id: assistantId, workflow_id: workflowId });
  await caller.hear(/Acme Dental/);
  await caller.quiet(300);
  await caller.say('I would like to speak to a person at the front desk.');
  return { caller, callId };
}

describe.skipIf(!available)('warm transfers over SIP (two real phones)', () => {
  it('completed: the operator hears the summary, then the two hear each other through Switchboard until the operator hangs up', async () => {
    const operator = await Baresip.start({ name: 'operator', user: OPERATOR, autoAnswer: true });
    const caller = await Baresip.start({ name: 'caller' });
    await trunkTo(operator);
    const callId = await askForAPerson(caller, flow(), { recording_consent: { enabled: true, message: 'This call is recorded.' } });
    const incoming = await operator.waitFor('CALL_ESTABLISHED', 20_000);
    expect(incoming.direction).toBe('incoming');
    const joined = await eventually('the join', async () => ((await callRecord(callId)).transfer?.joined_at ? await callRecord(callId) : null), 30_000);
    expect(joined.status).toBe('forwarding');
    expect(joined.transfer).toMatchObject({ mode: 'warm', destination: OPERATOR, result: 'completed', summary: SANDBOX_SUMMARY });
    // each speaks: the other hears it, relayed
    await operator.play(await speech('operator-says', 'Front desk, how can I help you?'));
    await caller.play(await speech('caller-says', 'I need to move my appointment.'));
    await new Promise((r) => setTimeout(r, 4_500));
    await operator.hangup();
    await caller.waitFor('CALL_CLOSED', 10_000);
    const report = await reportOf(callId);
    expect(report.ended_reason).toBe('call-transferred');
    expect(report.transfer).toEqual({
      mode: 'warm',
      destination: OPERATOR,
      result: 'completed',
      summary: SANDBOX_SUMMARY,
      operator_answered_at: expect.any(String),
      joined_at: expect.any(String),
    });
    expect(statusesOf(callId)).toEqual(['ringing', 'in-progress', 'forwarding', 'ended']);
    // the operator was dialled from the call's number
    expect(incoming.peerUri).toMatch(/^sip:\+1555/);
    await operator.waitFor('CALL_CLOSED', 10_000);
    const operatorHeard = await heardText(operator.heardFiles[0]!);
    expect(operatorHeard).toContain(`Incoming transfer: ${SANDBOX_SUMMARY}`);
    expect(operatorHeard).toContain('I need to move my appointment.');
    const callerHeard = await heardText(caller.heardFiles[0]!);
    expect(callerHeard).toMatch(/This call is recorded\..*Hello, this is Acme Dental\..*Let me get someone\..*Please hold\..*Front desk, how can I help you\?/);
    // the summary is not the caller's to hear, nor the caller's words after the join the transcript's
    expect(callerHeard).not.toContain('Incoming transfer');
    expect(report.messages.map((m: { content: string }) => m.content)).not.toContain('I need to move my appointment.');
    // the recording went on while Switchboard relayed: left the caller, right what the caller heard (the operator)
    const recording = await fetch(`${s.baseUrl}/calls/${callId}/recording`, { headers: { authorization: `Bearer ${s.key}` } });
    expect(recording.status).toBe(200);
    const { left, right } = channelsOf(Buffer.from(await recording.arrayBuffer()));
    expect((await transcribe(right)).join(' ')).toMatch(/Please hold\..*Front desk, how can I help you\?/);
    expect((await transcribe(left)).join(' ')).toMatch(/front desk\..*I need to move my appointment\./);
  }, 90_000);

  it('busy: the operator refuses; the caller is told and the call takes the edge', async () => {
    const operator = await Baresip.start({ name: 'busy-operator', user: OPERATOR });
    const caller = await Baresip.start({ name: 'caller-busy' });
    await trunkTo(operator);
    const callId = await askForAPerson(caller, flow());
    await operator.waitFor('CALL_INCOMING', 20_000);
    await operator.hangup(); // 486
    await eventually('the way back', async () => (await callRecord(callId)).messages.some((m: { content: string }) => m.content === 'Anything else?'), 20_000);
    const record = await callRecord(callId);
    expect(record.status).toBe('in-progress');
    expect(record.transfer).toEqual({ mode: 'warm', destination: OPERATOR, result: 'busy', summary: null, operator_answered_at: null, joined_at: null });
    await new Promise((r) => setTimeout(r, 1_500));
    await caller.hangup();
    const report = await reportOf(callId);
    expect(report.ended_reason).toBe('customer-ended-call');
    expect(report.transfer.result).toBe('busy');
    expect(await heardText(caller.heardFiles[0]!)).toMatch(/Please hold\..*Nobody is free\..*Anything else\?/);
  }, 90_000);

  it('unanswered: the operator\'s phone rings ring_timeout_seconds, is canceled, and the caller hears so within a second more', async () => {
    const operator = await Baresip.start({ name: 'away-operator', user: OPERATOR });
    const caller = await Baresip.start({ name: 'caller-away' });
    await trunkTo(operator);
    const callId = await askForAPerson(caller, flow({ ring_timeout_seconds: 5 }));
    const ringing = await operator.waitFor('CALL_INCOMING', 20_000);
    const closed = await operator.waitFor('CALL_CLOSED', 15_000);
    expect(operator.events.some((e) => e.type === 'CALL_ESTABLISHED')).toBe(false);
    // the dial began just before the phone rang: at most the ring timeout passed between the two
    expect(closed.at - ringing.at).toBeLessThanOrEqual(5_000 + 300);
    const told = await eventually('the no-answer', async () => ((await callRecord(callId)).transfer?.result === 'no-answer' ? Date.now() : null), 10_000);
    expect(told - ringing.at).toBeLessThanOrEqual(6_000);
    await eventually('the way back', async () => (await callRecord(callId)).messages.some((m: { content: string }) => m.content === 'Anything else?'), 15_000);
    await caller.hangup();
    const report = await reportOf(callId);
    expect(report.transfer).toMatchObject({ mode: 'warm', result: 'no-answer', operator_answered_at: null });
  }, 90_000);

  it('no edge: busy, the fixed line and end_call_message, then the end transfer-failed with a BYE', async () => {
    const operator = await Baresip.start({ name: 'busy-operator-2', user: OPERATOR });
    const caller = await Baresip.start({ name: 'caller-noedge' });
    await trunkTo(operator);
    const callId = await askForAPerson(caller, flow({}, false));
    await operator.waitFor('CALL_INCOMING', 20_000);
    await operator.hangup();
    await caller.waitFor('CALL_CLOSED', 30_000);
    const report = await reportOf(callId);
    expect(report.ended_reason).toBe('transfer-failed');
    expect(report.transfer).toMatchObject({ mode: 'warm', result: 'busy' });
    const said = report.messages.map((m: { content: string }) => m.content);
    expect(said.slice(-2)).toEqual([TRANSFER_FAILED_LINE, 'Thank you for calling.']);
    expect(await heardText(caller.heardFiles[0]!)).toMatch(/Please hold\..*Thank you for calling\./);
  }, 90_000);
});

// a web call's operator is dialled through the same trunk: the server relays the browser's 16 kHz PCM and the operator's RTP
describe('warm transfers from web calls', () => {
  it('without a SIP trunk: failed, saying why; the caller hears the edge\'s message', async () => {
    await s.api('PATCH', '/account', { sip: { outbound: null } });
    const { caller, callId } = await aWebCallAsksForAPerson();
    await caller.hear(/Nobody is free/, 20_000);
    const record = await callRecord(callId);
    expect(record.transfer).toMatchObject({ mode: 'warm', result: 'failed', joined_at: null });
    expect(record.errors).toEqual([
      { code: 'TRANSFER_FAILED', message: 'warm transfer: web call: the account has no SIP trunk to dial the operator through (PATCH /account with sip.outbound)', provider: 'web' },
    ]);
    await caller.hangUp();
    expect((await reportOf(callId)).transfer.result).toBe('failed');
  }, 60_000);

  it.skipIf(!available)('through the account\'s trunk: the operator hears the summary, then the browser and the phone hear each other', async () => {
    const operator = await Baresip.start({ name: 'web-operator', user: OPERATOR, autoAnswer: true });
    await s.api('PATCH', '/account', { sip: { outbound: { proxy: `sip:127.0.0.1:${operator.sipPort}` } } });
    const { caller, callId } = await aWebCallAsksForAPerson();
    await operator.waitFor('CALL_ESTABLISHED', 20_000);
    await eventually('the join', async () => (await callRecord(callId)).transfer?.joined_at, 30_000);
    const said = join(dir, 'operator.wav');
    await writeWav(said, concatSamples(silence(0.3), mulawDecode(synthesizeSandboxSpeech('Front desk, how can I help you?')), silence(0.5)));
    await operator.play(said);
    await caller.hear(/Front desk, how can I help you/, 15_000);
    await caller.say('I need to move my appointment.');
    await new Promise((r) => setTimeout(r, 1_500));
    await operator.hangup();
    await caller.ended(15_000);
    const report = await reportOf(callId);
    expect(report.ended_reason).toBe('call-transferred');
    expect(report.transfer).toMatchObject({ mode: 'warm', result: 'completed', summary: SANDBOX_SUMMARY });
    await operator.waitFor('CALL_CLOSED', 10_000);
    const heard = (await transcribe(mulawEncode((await readWav(operator.heardFiles[0]!)).samples))).join(' ');
    expect(heard).toContain(`Incoming transfer: ${SANDBOX_SUMMARY}`);
    expect(heard).toContain('I need to move my appointment.');
  }, 90_000);
});
