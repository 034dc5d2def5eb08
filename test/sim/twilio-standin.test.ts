/**
 * The Twilio stand-in (src/sim/twilio.ts), checked with Twilio's own Node SDK on its REST side
 * and, for each callee behaviour, against a small fake of Switchboard's side: the callbacks'
 * order, parameters and signatures, the TwiML request, the media stream both ways, AMD, and the
 * ways a call ends.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import twilio from 'twilio';
import { startTwilioStandIn, type TwilioStandIn } from '../../src/sim/twilio.js';
import { tone } from '../../src/sim/tone.js';
import { createSandboxStt } from '../../src/providers/sandbox/stt.js';
import { mulawLevelDb } from '../../src/audio/silence.js';
import { startFakeSwitchboard, streamTwiml, until, type FakeSwitchboard } from './fake-switchboard.js';

const ACCOUNT = `AC${'c'.repeat(32)}`;
const TOKEN = 'stand-in-test-token';
const FROM = '+14155550199';

let standIn: TwilioStandIn;
let app: FakeSwitchboard;
let client: ReturnType<typeof twilio>;
let numberSeq = 0;
/** A fresh callee number for each call, so tests never see each other's calls. */
const nextNumber = () => `+1415555${String(1000 + ++numberSeq)}`;

/** Twilio's SDK pointed at the stand-in: the `api` domain's base URL is public and read per request. */
function sdkClient(accountSid: string, token: string) {
  const c = twilio(accountSid, token);
  c.api.baseUrl = standIn.url;
  return c;
}

beforeAll(async () => {
  standIn = await startTwilioStandIn({ accounts: { [ACCOUNT]: TOKEN } });
  client = sdkClient(ACCOUNT, TOKEN);
});

afterAll(async () => {
  await standIn.close();
});

beforeEach(async () => {
  app = await startFakeSwitchboard(TOKEN);
});

afterEach(async () => {
  await app.close();
});

const everyEvent = ['initiated', 'ringing', 'answered', 'completed'];

/** Places a call to `to` through the SDK with the fake Switchboard's routes. */
async function place(to: string, extra: Record<string, unknown> = {}) {
  return client.calls.create({
    to,
    from: FROM,
    url: `${app.url}/twiml?campaign=7`,
    method: 'POST',
    statusCallback: `${app.url}/status?call=abc`,
    statusCallbackMethod: 'POST',
    statusCallbackEvent: everyEvent,
    ...extra,
  } as Parameters<typeof client.calls.create>[0]);
}

const statusesAt = (route = '/status') => app.on(route).map((c) => c.params.CallStatus);

describe('the REST API, through Twilio\'s SDK', () => {
  it('creates a call with every parameter, fetches it, and cancels it while it rings', async () => {
    const to = nextNumber();
    standIn.setCallee(to, { kind: 'no-answer', ringMs: 10_000 });
    const created = await place(to, {
      timeout: 20,
      machineDetection: 'DetectMessageEnd',
      asyncAmd: 'true',
      asyncAmdStatusCallback: `${app.url}/amd`,
      asyncAmdStatusCallbackMethod: 'POST',
    });
    expect(created.sid).toMatch(/^CA[0-9a-f]{32}$/);
    expect(created).toMatchObject({ status: 'queued', to, from: FROM, direction: 'outbound-api', accountSid: ACCOUNT, apiVersion: '2010-04-01' });
    expect(created.toFormatted).toBe(`(415) 555-${to.slice(-4)}`);
    expect(created.dateCreated).toBeInstanceOf(Date);
    expect(created.uri).toBe(`/2010-04-01/Accounts/${ACCOUNT}/Calls/${created.sid}.json`);

    const create = standIn.requests.find((r) => r.form.get('To') === to)!;
    expect(create).toMatchObject({ method: 'POST', path: `/2010-04-01/Accounts/${ACCOUNT}/Calls.json`, status: 201, accountSid: ACCOUNT });
    expect(create.form.getAll('StatusCallbackEvent')).toEqual(everyEvent);
    expect(Object.fromEntries(create.form)).toMatchObject({ Timeout: '20', MachineDetection: 'DetectMessageEnd', AsyncAmd: 'true', Method: 'POST' });

    const call = await standIn.waitForCall(to);
    await call.waitForStatus('ringing');
    expect((await client.calls(created.sid).fetch()).status).toBe('ringing');

    const updated = await client.calls(created.sid).update({ status: 'completed' });
    expect(updated.status).toBe('canceled');
    await call.ended();
    expect(statusesAt()).toEqual(['initiated', 'ringing', 'canceled']);
    expect((await client.calls(created.sid).fetch()).status).toBe('canceled');
    // the list finds it too
    expect((await client.calls.list({ to })).map((c) => c.sid)).toEqual([created.sid]);
  });

  it('answers errors as Twilio does, which the SDK raises as RestException', async () => {
    const invalidTo = await place('555-0100').catch((e) => e);
    expect(invalidTo).toBeInstanceOf(twilio.RestException);
    expect(invalidTo).toMatchObject({ status: 400, code: 21211, moreInfo: 'https://www.twilio.com/docs/errors/21211' });
    expect(invalidTo.message).toBe("The 'To' number 555-0100 is not a valid phone number.");

    const badFrom = await client.calls.create({ to: nextNumber(), from: 'nobody', url: `${app.url}/twiml` }).catch((e) => e);
    expect(badFrom).toMatchObject({ status: 400, code: 21212 });

    const badAuth = await sdkClient(ACCOUNT, 'not-the-token').calls.create({ to: nextNumber(), from: FROM, url: `${app.url}/twiml` }).catch((e) => e);
    expect(badAuth).toBeInstanceOf(twilio.RestException);
    expect(badAuth).toMatchObject({ status: 401, code: 20003, message: 'Authenticate' });
    const otherAccount = await sdkClient(`AC${'d'.repeat(32)}`, TOKEN).calls.list().catch((e) => e);
    expect(otherAccount).toMatchObject({ status: 401, code: 20003 });

    const unknown = await client.calls(`CA${'0'.repeat(32)}`).fetch().catch((e) => e);
    expect(unknown).toMatchObject({ status: 404, code: 20404 });
    const unknownUpdate = await client.calls(`CA${'0'.repeat(32)}`).update({ status: 'completed' }).catch((e) => e);
    expect(unknownUpdate).toMatchObject({ status: 404, code: 20404 });

    const rejected = nextNumber();
    standIn.setCallee(rejected, { kind: 'reject' });
    const refused = await place(rejected).catch((e) => e);
    expect(refused).toMatchObject({ status: 400, code: 21215 });
    expect(refused.message).toContain(`Account not authorized to call ${rejected}`);
    expect(standIn.calls.some((c) => c.to === rejected)).toBe(false);
    await new Promise((r) => setTimeout(r, 50));
    expect(app.callbacks.some((c) => c.params.To === rejected)).toBe(false);
  });
});

describe('a person answers', () => {
  it('rings, answers, streams both ways with async AMD, and completes when the person hangs up', async () => {
    const to = nextNumber();
    standIn.setCallee(to, { kind: 'person', ringMs: 30, amdMs: 150 });
    const created = await place(to, {
      machineDetection: 'DetectMessageEnd',
      asyncAmd: 'true',
      asyncAmdStatusCallback: `${app.url}/amd?c=1`,
    });
    const call = await standIn.waitForCall(to);
    const stream = await app.waitForStream();
    const leg = await call.waitForLeg();

    // the TwiML request: signed, in-progress, outbound-api, no AnsweredBy (the detection is async)
    const [twimlRequest] = app.on('/twiml');
    expect(twimlRequest).toMatchObject({ method: 'POST', path: '/twiml?campaign=7', valid: true, validBySdk: true });
    expect(twimlRequest!.params).toMatchObject({ AccountSid: ACCOUNT, CallSid: created.sid, CallStatus: 'in-progress', Direction: 'outbound-api', From: FROM, To: to, Called: to, Caller: FROM, ApiVersion: '2010-04-01' });
    expect(twimlRequest!.params.AnsweredBy).toBeUndefined();

    // the stream opens as Twilio opens it
    expect(stream.signature).toBeTruthy();
    expect(stream.messages[0]).toEqual({ event: 'connected', protocol: 'Call', version: '1.0.0' });
    expect(stream.start).toMatchObject({
      event: 'start',
      sequenceNumber: '1',
      start: { callSid: created.sid, accountSid: ACCOUNT, tracks: ['inbound'], mediaFormat: { encoding: 'audio/x-mulaw', sampleRate: 8000, channels: 1 }, customParameters: { token: 't-1', call_id: 'call-42' } },
    });
    expect(stream.start.streamSid).toMatch(/^MZ[0-9a-f]{32}$/);

    // the conversation goes on while the detection runs
    stream.say('Hello from the assistant', 'greeting-done');
    await leg.hear('hello from the assistant', 5_000);
    await until('the mark echoed after playback', () => stream.messages.find((m) => m.event === 'mark' && m.mark.name === 'greeting-done'));
    const amd = await app.waitFor('/amd');
    expect(amd.params).toEqual({ AccountSid: ACCOUNT, AnsweredBy: 'human', CallSid: created.sid, MachineDetectionDuration: expect.stringMatching(/^\d+$/) });
    expect(amd.path).toBe('/amd?c=1');
    expect(amd.valid && amd.validBySdk).toBe(true);

    await leg.say('I am the person you called');
    await until('the server to hear the person', () => stream.heard.includes('I am the person you called'));
    const media = stream.messages.filter((m) => m.event === 'media');
    expect(media.length).toBeGreaterThan(10);
    expect(media[1]).toMatchObject({ streamSid: stream.start.streamSid, media: { track: 'inbound', chunk: '2', timestamp: '20' } });

    await leg.hangUp();
    await call.ended();
    expect(stream.messages.at(-1)).toMatchObject({ event: 'stop', stop: { callSid: created.sid, accountSid: ACCOUNT } });

    const status = app.on('/status');
    expect(status.map((c) => c.params.CallStatus)).toEqual(['initiated', 'ringing', 'in-progress', 'completed']);
    expect(status.map((c) => c.params.SequenceNumber)).toEqual(['0', '1', '2', '3']);
    for (const c of status) {
      expect(c.valid && c.validBySdk).toBe(true);
      expect(c.path).toBe('/status?call=abc');
      expect(c.params).toMatchObject({ CallbackSource: 'call-progress-events', Direction: 'outbound-api', CallSid: created.sid, AccountSid: ACCOUNT, To: to, From: FROM, Called: to, Caller: FROM });
      expect(c.params.Timestamp).toMatch(/^\w{3}, \d{2} \w{3} \d{4} \d{2}:\d{2}:\d{2} \+0000$/);
    }
    expect(status[3]!.params).toMatchObject({ CallDuration: expect.stringMatching(/^[1-9]\d*$/), AnsweredBy: 'human' });
    expect(status[0]!.params.CallDuration).toBeUndefined();
    expect(call.statuses).toEqual(['initiated', 'ringing', 'in-progress', 'completed']);
    expect(call.callbacks.every((c) => c.status === 200)).toBe(true);
    expect(call.callbacks.map((c) => c.kind).sort()).toEqual(['amd', 'status', 'status', 'status', 'status', 'twiml']);
    expect((await client.calls(created.sid).fetch())).toMatchObject({ status: 'completed', answeredBy: 'human' });
  });

  it('with synchronous AMD, asks for the TwiML only once the detection decided, with AnsweredBy', async () => {
    const to = nextNumber();
    standIn.setCallee(to, { kind: 'person', ringMs: 20, amdMs: 200 });
    await place(to, { machineDetection: 'Enable' });
    const call = await standIn.waitForCall(to);
    const twimlRequest = await app.waitFor('/twiml', (c) => c.params.To === to);
    expect(twimlRequest.params).toMatchObject({ AnsweredBy: 'human', MachineDetectionDuration: '200', CallStatus: 'in-progress' });
    expect(twimlRequest.at - call.startedAt!).toBeGreaterThanOrEqual(190);
    const answered = app.on('/status').find((c) => c.params.To === to && c.params.CallStatus === 'in-progress')!;
    expect(answered.at).toBeLessThan(twimlRequest.at);
    await call.waitForLeg();
    await call.hangUp();
    await call.ended();
  });

  it('sends only the final callback when no events are asked for, and GET callbacks carry their parameters in the query', async () => {
    const to = nextNumber();
    standIn.setCallee(to, { kind: 'person', ringMs: 10, onAnswer: (leg) => leg.hangUp() });
    await client.calls.create({ to, from: FROM, url: `${app.url}/twiml`, method: 'GET', statusCallback: `${app.url}/status?call=get`, statusCallbackMethod: 'GET' });
    const call = await standIn.waitForCall(to);
    await call.ended();
    const twimlRequest = app.on('/twiml').find((c) => c.params.To === to)!;
    expect(twimlRequest).toMatchObject({ method: 'GET', valid: true, validBySdk: true });
    const [final, ...more] = app.on('/status').filter((c) => c.params.To === to);
    expect(more).toEqual([]);
    expect(final).toMatchObject({ method: 'GET', valid: true, validBySdk: true, params: { call: 'get', CallStatus: 'completed', SequenceNumber: '0' } });
  });

  it('ends when Switchboard closes the stream and the TwiML has nothing after <Connect>', async () => {
    const to = nextNumber();
    standIn.setCallee(to, { kind: 'person', ringMs: 10 });
    await place(to);
    const call = await standIn.waitForCall(to);
    const stream = await app.waitForStream();
    stream.close();
    await call.ended();
    expect(call.status).toBe('completed');
    expect(statusesAt().at(-1)).toBe('completed');
    expect(stream.messages.some((m) => m.event === 'stop')).toBe(false);
  });

  it('follows <Hangup/> after the stream, and a TwiML of <Hangup/> alone opens no stream', async () => {
    app.twiml = streamTwiml(app.wsUrl, '<Pause length="0"/><Hangup/>');
    const first = nextNumber();
    standIn.setCallee(first, { kind: 'person', ringMs: 10 });
    await place(first);
    const call = await standIn.waitForCall(first);
    (await app.waitForStream()).close();
    await call.ended();
    expect(call.history).toEqual(['queued', 'initiated', 'ringing', 'in-progress', 'completed']);

    app.twiml = '<?xml version="1.0" encoding="UTF-8"?><Response><Hangup/></Response>';
    const second = nextNumber();
    standIn.setCallee(second, { kind: 'person', ringMs: 10 });
    await place(second);
    const other = await standIn.waitForCall(second);
    await other.ended();
    expect(other.legs).toEqual([]);
    expect(other.status).toBe('completed');
  });

  it('asks the <Connect action> URL what to do once the stream ends', async () => {
    app.twiml = app.twiml.replace('<Connect>', '<Connect action="/after-stream?step=2">');
    app.pages['/after-stream'] = '<Response><Say>Goodbye</Say><Hangup/></Response>';
    const to = nextNumber();
    standIn.setCallee(to, { kind: 'person', ringMs: 10 });
    await place(to);
    const call = await standIn.waitForCall(to);
    (await app.waitForStream()).close();
    await call.ended();
    const action = app.on('/after-stream')[0]!;
    expect(action).toMatchObject({ method: 'POST', path: '/after-stream?step=2', valid: true, params: { CallSid: call.sid, CallStatus: 'in-progress' } });
    expect(call.twiml).toHaveLength(2);
    expect(call.status).toBe('completed');
    expect(call.errors).toEqual([]);
  });

  it('stops the stream on a REST hang-up, and on a transfer (new TwiML) records the <Dial>', async () => {
    const to = nextNumber();
    standIn.setCallee(to, { kind: 'person', ringMs: 10 });
    const created = await place(to);
    const call = await standIn.waitForCall(to);
    const stream = await app.waitForStream();

    const dial = '<?xml version="1.0" encoding="UTF-8"?><Response><Dial callerId="+14155550199">+14155550123</Dial></Response>';
    await client.calls(created.sid).update({ twiml: dial });
    await until('the stream to stop', () => stream.closed);
    expect(stream.messages.at(-1)).toMatchObject({ event: 'stop' });
    await until('the dial', () => call.dialed.length > 0);
    expect(call.dialed).toEqual(['+14155550123']);
    expect(call.status).toBe('in-progress');
    expect(standIn.requests.at(-1)!.form.get('Twiml')).toBe(dial);

    const ended = await client.calls(created.sid).update({ status: 'completed' });
    expect(ended.status).toBe('completed');
    await call.ended();
    expect(statusesAt().at(-1)).toBe('completed');
    // a call that is over cannot be redirected
    const late = await client.calls(created.sid).update({ twiml: dial }).catch((e) => e);
    expect(late).toMatchObject({ status: 400, code: 21220 });
  });

  it('moves two calls into a <Conference> by new TwiML (with Twiml given at create for one); the first to leave with endConferenceOnExit ends it for both', async () => {
    const [a, b] = [nextNumber(), nextNumber()];
    standIn.setCallee(a, { kind: 'person', ringMs: 10 });
    standIn.setCallee(b, { kind: 'person', ringMs: 10 });
    const first = await place(a);
    const firstCall = await standIn.waitForCall(a);
    const stream = await app.waitForStream();
    // the other is placed with its TwiML inline (a warm transfer's operator leg), streaming to us
    const second = await client.calls.create({ to: b, from: FROM, twiml: app.twiml, statusCallback: `${app.url}/status?call=op` });
    const secondCall = await standIn.waitForCall(b);
    await secondCall.waitForLeg();
    const room = '<?xml version="1.0" encoding="UTF-8"?><Response><Dial><Conference startConferenceOnEnter="true" endConferenceOnExit="true" beep="false">call-42</Conference></Dial></Response>';
    await client.calls(first.sid).update({ twiml: room });
    await client.calls(second.sid).update({ twiml: room });
    await until('both in the conference', () => standIn.conference('call-42')?.participants.length === 2);
    await until('the first stream to stop', () => stream.closed);
    expect(standIn.conference('call-42')!.participants.map((p) => p.callSid)).toEqual([first.sid, second.sid]);
    expect([firstCall.conferences, secondCall.conferences]).toEqual([['call-42'], ['call-42']]);
    expect([firstCall.status, secondCall.status]).toEqual(['in-progress', 'in-progress']);
    // the second leaves: the conference ends, and the first call with it (nothing after its <Dial>)
    await secondCall.hangUp();
    await firstCall.ended();
    expect(firstCall.status).toBe('completed');
    const conference = standIn.conference('call-42')!;
    expect(conference.endedAt).not.toBeNull();
    expect(conference.participants.every((p) => p.leftAt !== null)).toBe(true);
  });

  it('REST hang-up of a live stream: stop on the socket, then the completed callback', async () => {
    const to = nextNumber();
    standIn.setCallee(to, { kind: 'person', ringMs: 10 });
    const created = await place(to);
    const call = await standIn.waitForCall(to);
    const stream = await app.waitForStream();
    const leg = await call.waitForLeg();
    await client.calls(created.sid).update({ status: 'completed' });
    await call.ended();
    expect(stream.messages.at(-1)).toMatchObject({ event: 'stop', stop: { callSid: created.sid } });
    await until('the socket to close', () => stream.closed);
    expect(leg.endedBy).toBe('carrier');
    const completed = app.on('/status').at(-1)!;
    expect(completed.params).toMatchObject({ CallStatus: 'completed', CallDuration: expect.stringMatching(/^\d+$/) });
    // the stream is over before Switchboard hears that the call is
    expect(completed.at).toBeGreaterThanOrEqual(stream.closedAt!);
  });
});

describe('a voicemail answers', () => {
  it('plays its greeting and a beep into the stream, reports machine_end_beep, and records what follows', async () => {
    const to = nextNumber();
    standIn.setCallee(to, { kind: 'voicemail', greeting: 'Leave a message', ringMs: 20 });
    const created = await place(to, {
      machineDetection: 'DetectMessageEnd',
      asyncAmd: 'true',
      asyncAmdStatusCallback: `${app.url}/amd`,
    });
    const call = await standIn.waitForCall(to);
    const stream = await app.waitForStream();
    // spoken over the greeting: heard, not recorded
    stream.say('Too early');
    const amd = await app.waitFor('/amd');
    expect(amd.params).toMatchObject({ AnsweredBy: 'machine_end_beep', CallSid: created.sid });
    expect(amd.valid && amd.validBySdk).toBe(true);
    const vm = call.voicemail!;
    expect(vm.greetingEndedAt).not.toBeNull();
    expect(vm.beepEndedAt! - vm.greetingEndedAt!).toBeGreaterThanOrEqual(450);
    expect(amd.at).toBeGreaterThanOrEqual(vm.beepEndedAt!);

    stream.say('Please call us back');
    await until('the recording', () => vm.recorded.some((l) => l.text === 'Please call us back'), 5_000);
    expect(vm.recorded.every((l) => l.at >= vm.beepEndedAt!)).toBe(true);
    expect(vm.recorded.map((l) => l.text)).not.toContain('Too early');
    expect(call.leg!.heard.map((l) => l.text)).toContain('Too early');

    // the server heard the greeting, and the beep as no words
    await until('the greeting heard', () => stream.heard.includes('Leave a message'));
    expect(stream.heard).toEqual(['Leave a message']);

    await client.calls(created.sid).update({ status: 'completed' });
    await call.ended();
    expect(stream.messages.at(-1)).toMatchObject({ event: 'stop' });
    const final = app.on('/status').at(-1)!;
    expect(final.params).toMatchObject({ CallStatus: 'completed', AnsweredBy: 'machine_end_beep' });
  });

  it('with MachineDetection=Enable reports machine_start', async () => {
    const to = nextNumber();
    standIn.setCallee(to, { kind: 'voicemail', greeting: 'Leave a message', ringMs: 10, amdMs: 100 });
    await place(to, { machineDetection: 'Enable', asyncAmd: 'true', asyncAmdStatusCallback: `${app.url}/amd` });
    const call = await standIn.waitForCall(to);
    const amd = await app.waitFor('/amd', (c) => c.params.CallSid === call.sid);
    expect(amd.params.AnsweredBy).toBe('machine_start');
    await call.hangUp();
    await call.ended();
  });

  it('with synchronous DetectMessageEnd, the TwiML is asked for after the beep, and the stream is recorded from its start', async () => {
    const to = nextNumber();
    standIn.setCallee(to, { kind: 'voicemail', greeting: 'Leave a message', ringMs: 10 });
    await place(to, { machineDetection: 'DetectMessageEnd' });
    const call = await standIn.waitForCall(to);
    const twimlRequest = await app.waitFor('/twiml', (c) => c.params.To === to);
    expect(twimlRequest.params).toMatchObject({ AnsweredBy: 'machine_end_beep', MachineDetectionDuration: expect.stringMatching(/^\d+$/) });
    expect(twimlRequest.at).toBeGreaterThanOrEqual(call.voicemail!.beepEndedAt!);
    const stream = await app.waitForStream();
    stream.say('Your appointment is tomorrow');
    await until('the recording', () => call.voicemail!.recorded.some((l) => l.text === 'Your appointment is tomorrow'), 5_000);
    // the greeting played to the detector, not into the stream
    await new Promise((r) => setTimeout(r, 300));
    expect(stream.heard).toEqual([]);
    await call.hangUp();
    await call.ended();
  });

  it('with AMD off is a line that plays its greeting and listens', async () => {
    const to = nextNumber();
    standIn.setCallee(to, { kind: 'voicemail', greeting: 'Leave a message', beep: { ms: 200 }, ringMs: 10 });
    await place(to);
    const call = await standIn.waitForCall(to);
    const stream = await app.waitForStream();
    await until('the beep', () => call.voicemail!.beepEndedAt !== null);
    stream.say('Call me');
    await until('the recording', () => call.voicemail!.recorded.some((l) => l.text === 'Call me'), 5_000);
    expect(call.answeredBy).toBeNull();
    expect(call.callbacks.some((c) => c.kind === 'amd')).toBe(false);
    await call.hangUp();
    await call.ended();
  });
});

describe('calls nobody takes', () => {
  const finalOf = async (to: string) => {
    const call = await standIn.waitForCall(to);
    await call.ended();
    return { call, callbacks: app.on('/status').filter((c) => c.params.To === to) };
  };

  it('busy', async () => {
    const to = nextNumber();
    standIn.setCallee(to, { kind: 'busy', ringMs: 20 });
    const created = await place(to);
    const { call, callbacks } = await finalOf(to);
    expect(callbacks.map((c) => c.params.CallStatus)).toEqual(['initiated', 'ringing', 'busy']);
    expect(callbacks.at(-1)!.params).toMatchObject({ CallDuration: '0', SipResponseCode: '486' });
    expect(callbacks.every((c) => c.valid && c.validBySdk)).toBe(true);
    expect(call.legs).toEqual([]);
    expect((await client.calls(created.sid).fetch()).status).toBe('busy');
    expect(app.on('/twiml').some((c) => c.params.To === to)).toBe(false);
  });

  it('no answer: after its own ring time, or the call\'s Timeout if shorter', async () => {
    const quick = nextNumber();
    standIn.setCallee(quick, { kind: 'no-answer', ringMs: 30 });
    await place(quick);
    expect((await finalOf(quick)).callbacks.map((c) => c.params.CallStatus)).toEqual(['initiated', 'ringing', 'no-answer']);

    const slow = nextNumber();
    standIn.setCallee(slow, { kind: 'person', ringMs: 30_000 });
    const started = Date.now();
    await place(slow, { timeout: 1 });
    const { call } = await finalOf(slow);
    expect(call.status).toBe('no-answer');
    expect(Date.now() - started).toBeLessThan(3_000);
  });

  it('failed', async () => {
    const to = nextNumber();
    standIn.setCallee(to, { kind: 'failed' });
    await place(to);
    const { callbacks } = await finalOf(to);
    expect(callbacks.map((c) => c.params.CallStatus)).toEqual(['initiated', 'failed']);
  });

  it('canceled through the REST API while ringing', async () => {
    const to = nextNumber();
    standIn.setCallee(to, { kind: 'no-answer', ringMs: 10_000 });
    const created = await place(to);
    const call = await standIn.waitForCall(to);
    await call.waitForStatus('ringing');
    expect((await client.calls(created.sid).update({ status: 'canceled' })).status).toBe('canceled');
    const { callbacks } = await finalOf(to);
    expect(callbacks.map((c) => c.params.CallStatus)).toEqual(['initiated', 'ringing', 'canceled']);
    expect(callbacks.at(-1)!.params.CallDuration).toBe('0');
  });

  it('records the HTTP status each callback got', async () => {
    app.callbackStatus = 500;
    const to = nextNumber();
    standIn.setCallee(to, { kind: 'busy', ringMs: 10 });
    await place(to);
    const { call } = await finalOf(to);
    expect(call.callbacks.map((c) => c.status)).toEqual([500, 500, 500]);
    app.callbackStatus = 200;
  });
});

describe('an inbound call placed through the stand-in', () => {
  it('is a SimulatedCall whose stream the REST API hangs up', async () => {
    const caller = standIn.inbound({ baseUrl: app.url, to: '+14155550100' });
    const outcome = await caller.dial();
    expect(outcome).toEqual({ kind: 'connected', callId: 'call-42' });
    const voice = app.on('/telephony/twilio/voice')[0]!;
    expect(voice.valid).toBe(true);
    expect(voice.params).toMatchObject({ Direction: 'inbound', CallSid: caller.callSid, AccountSid: ACCOUNT });
    const stream = await app.waitForStream();
    const call = standIn.call(caller.callSid)!;
    expect(call.direction).toBe('inbound');
    await client.calls(caller.callSid).update({ status: 'completed' });
    await caller.ended(5_000);
    expect(stream.messages.at(-1)).toMatchObject({ event: 'stop' });
    expect(call.status).toBe('completed');
  });
});

describe('the voicemail beep', () => {
  it('is sound to a level meter but no words to the sandbox STT', async () => {
    const beep = tone();
    expect(beep.length).toBe(4000);
    expect(mulawLevelDb(beep.subarray(800, 960))).toBeGreaterThan(-20);
    const heard: string[] = [];
    const ear = await createSandboxStt().connect(
      { provider: 'sandbox' },
      { onTranscript: (t) => void (t.text.trim() && heard.push(t.text)), onError: () => undefined },
    );
    ear.sendAudio(beep);
    ear.sendAudio(Buffer.alloc(8000, 0xff));
    ear.finalize();
    await new Promise((r) => setTimeout(r, 20));
    expect(heard).toEqual([]);
    await ear.close();
  });
});
