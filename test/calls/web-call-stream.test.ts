/**
 * The web-call stream when the far end misbehaves (docs/web-calls.md): bad, unknown, reused and
 * expired tokens get a plain 4xx before any upgrade; malformed frames get an `error` message and
 * the call goes on; a frame over 64 KiB, a socket that drops, a browser that goes quiet or stops
 * answering pings, and a hang-up each end the call `customer-ended-call` with its report; a call
 * beside them and the server are not disturbed. Also `POST /calls/web`'s refusals, ending a web
 * call through the API, a transfer node, a realtime assistant, and a stream that never connects.
 *
 * One real server on 127.0.0.1 with the sandbox providers; real `ws` clients. The media liveness
 * limits are shortened (idle 2 s, pings every second) so that a vanished browser is found fast.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { request } from 'undici';
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebCaller } from '../../src/sim/web-caller.js';
import { callLogEntry } from '../../src/calls/call-log.js';
import { callRecord } from '../helpers/call-record.js';
import {
  eventually,
  frontDeskWorkflow,
  realtimeSandboxAssistant,
  receivedMessages,
  sandboxAssistant,
  startCallingServer,
  transferFlow,
  type CallingServer,
} from '../helpers/calls.js';

let s: CallingServer;
const IDLE_MS = 2_000;

beforeAll(async () => {
  s = await startCallingServer({}, { mediaLiveness: { idleMs: IDLE_MS, pingMs: 1_000, checkMs: 100 } });
});
afterAll(async () => {
  for (const c of callers) await c.close().catch(() => undefined);
  for (const b of browsers) b.ws.terminate();
  await s?.close();
});

// ------------------------------------------------------------------------------------------------
// helpers

const callers: WebCaller[] = [];
const browsers: RawBrowser[] = [];
const wsBase = () => s.baseUrl.replace(/^http/, 'ws');
const streamUrl = (token?: string) => `${wsBase()}/calls/web/stream${token === undefined ? '' : `?token=${encodeURIComponent(token)}`}`;

const newAssistant = (body?: Record<string, unknown>) => s.createAssistant(body);
const newWorkflow = (definition: unknown) => s.createWorkflow(definition, 'Web stream flow');

let frontDesk: { assistantId: string; workflowId: string } | null = null;
/** A sandbox assistant on the front desk (greeting → booking → bye), made once. */
const frontDeskIds = async () => {
  frontDesk ??= { assistantId: await newAssistant(), workflowId: await newWorkflow(frontDeskWorkflow({ goodbyeFromGreeting: true })) };
  return frontDesk;
};

/** `POST /calls/web`: the call and the token of its stream URL. */
async function makeWebCall(body?: Record<string, unknown>) {
  const res = await s.api('POST', '/calls/web', body ?? { assistant_id: (await frontDeskIds()).assistantId, workflow_id: (await frontDeskIds()).workflowId });
  expect(res.status, JSON.stringify(res.json)).toBe(201);
  const token = new URL(res.json.url as string).searchParams.get('token')!;
  return { callId: res.json.call.id as string, token, url: res.json.url as string };
}

/** A simulated browser (sandbox voice and ear) on a new front-desk call, once it has heard the greeting. */
async function frontDeskCaller(): Promise<{ caller: WebCaller; callId: string }> {
  const caller = new WebCaller({ baseUrl: s.baseUrl, apiKey: s.key });
  callers.push(caller);
  const callId = await caller.start({ assistant_id: (await frontDeskIds()).assistantId, workflow_id: (await frontDeskIds()).workflowId });
  await caller.hear('Acme Dental');
  await caller.quiet();
  // docs/web-calls.md: `started` comes first
  expect(caller.events[0]).toMatchObject({ type: 'started', call: { id: callId } });
  return { caller, callId };
}

/** The socket under a `WebCaller`, to send it what a well-behaved page never would. */
const socketOf = (caller: WebCaller): WebSocket => (caller as unknown as { leg: { ws: WebSocket } }).leg.ws;

type Refusal = { status: number; body: { error: string; message: string } };

/** Asks for an upgrade: the plain HTTP refusal (status and JSON body), or fails if the socket opened. */
function refusal(url: string): Promise<Refusal> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url);
    ws.on('unexpected-response', (req, res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => {
        req.destroy();
        try {
          expect(res.headers['content-type']).toMatch(/^application\/json/);
          resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) });
        } catch (err) {
          reject(err);
        }
      });
    });
    ws.on('open', () => {
      ws.terminate();
      reject(new Error(`the upgrade of ${url} was accepted`));
    });
    ws.on('error', (err) => reject(err));
  });
}

/** A plain HTTP request with upgrade headers (`headers` replace the usual ones): its status and JSON body. */
function rawUpgrade(path: string, headers: Record<string, string>, method = 'GET'): Promise<Refusal> {
  const url = new URL(s.baseUrl);
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: url.hostname, port: url.port, path, method, headers: { connection: 'Upgrade', ...headers } });
    req.on('upgrade', (_res, socket) => {
      socket.destroy();
      reject(new Error(`the upgrade of ${path} was accepted`));
    });
    req.on('response', (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => {
        try {
          resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) });
        } catch (err) {
          reject(err);
        }
      });
    });
    req.on('error', reject);
    req.end();
  });
}

/** A bare WebSocket client on a web call's stream that does only what it is told. */
class RawBrowser {
  readonly messages: Array<{ type: string; [key: string]: unknown }> = [];
  binaryFrames = 0;
  closeCode: number | null = null;
  private pump: NodeJS.Timeout | null = null;
  readonly opened: Promise<void>;
  readonly closed: Promise<number>;

  constructor(readonly ws: WebSocket) {
    browsers.push(this);
    ws.on('message', (data, isBinary) => {
      if (isBinary) this.binaryFrames++;
      else this.messages.push(JSON.parse(data.toString()));
    });
    ws.on('error', () => undefined);
    this.opened = new Promise((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('unexpected-response', (_req, res) => reject(new Error(`refused: ${res.statusCode}`)));
    });
    this.closed = new Promise((resolve) =>
      ws.on('close', (code) => {
        this.stopAudio();
        this.closeCode = code;
        resolve(code);
      }),
    );
  }

  static async open(token: string, options: WebSocket.ClientOptions = {}): Promise<RawBrowser> {
    const b = new RawBrowser(new WebSocket(streamUrl(token), options));
    await b.opened;
    return b;
  }

  /** Sends 20 ms of silence every 20 ms, as a page with a quiet microphone does. */
  sendSilence(): void {
    this.pump ??= setInterval(() => {
      if (this.ws.readyState === WebSocket.OPEN) this.ws.send(Buffer.alloc(640), { binary: true });
    }, 20);
  }
  stopAudio(): void {
    if (this.pump) clearInterval(this.pump);
    this.pump = null;
  }

  async message(type: string, timeoutMs = 10_000) {
    return eventually(`a "${type}" message`, () => this.messages.find((m) => m.type === type), timeoutMs, 20);
  }
}

const messagesOf = (callId: string, type: string) => receivedMessages(s.receiver, type).filter((m) => m.call?.id === callId);

/** The end-of-call-report of a call, checked against its status-update `ended` and its record. */
async function endedCall(callId: string, timeoutMs = 15_000) {
  const report = await eventually(`the end-of-call-report of ${callId}`, () => messagesOf(callId, 'end-of-call-report')[0], timeoutMs);
  const ended = await eventually('the status-update ended', () => messagesOf(callId, 'status-update').find((m) => m.status === 'ended'));
  expect(ended.ended_reason).toBe(report.ended_reason);
  expect(report.call.type).toBe('web_call');
  const got = await s.api('GET', `/calls/${callId}`);
  expect(got.status).toBe(200);
  expect(got.json.call).toMatchObject({ status: 'ended', ended_reason: report.ended_reason, type: 'web_call', transport: 'web' });
  expect(messagesOf(callId, 'end-of-call-report')).toHaveLength(1);
  return { report, call: got.json.call };
}

const callCount = async () => (await s.api('GET', '/calls?limit=100')).json.calls.length as number;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// ------------------------------------------------------------------------------------------------

describe('the stream refuses a bad token before the upgrade: a plain 4xx, nothing else', () => {
  it('no token, or one not of the form the API gives: 400', async () => {
    const { callId } = await makeWebCall();
    await eventually('the status-update ringing', () => messagesOf(callId, 'status-update').find((m) => m.status === 'ringing'));
    const malformed = [
      undefined,
      '',
      'abc',
      callId,
      `${callId}.`,
      `${callId}.short`,
      `${callId}.${'x'.repeat(65)}`,
      `${callId.toUpperCase()}.${randomBytes(24).toString('base64url')}`,
      `not-a-uuid.${randomBytes(24).toString('base64url')}`,
      `${callId}.${randomBytes(24).toString('base64')}/+=`,
    ];
    for (const token of malformed) {
      const r = await refusal(streamUrl(token));
      expect(r.status, `token ${String(token)}`).toBe(400);
      expect(r.body).toEqual({ error: 'Invalid request', message: expect.stringMatching(/token/) });
    }
    // the call was not touched: still ringing, no status-update beyond `ringing`
    expect((await s.api('GET', `/calls/${callId}`)).json.call.status).toBe('ringing');
    expect(messagesOf(callId, 'status-update').map((m) => m.status)).toEqual(['ringing']);
    expect((await s.api('POST', `/calls/${callId}/end`)).status).toBe(202);
    await endedCall(callId);
  });

  it('a well-formed token nobody gave, or a wrong secret for a real call: 403, and the real token still works', async () => {
    const callsBefore = await callCount();
    const unknownId = randomUUID();
    const unknown = await refusal(streamUrl(`${unknownId}.${randomBytes(24).toString('base64url')}`));
    expect(unknown).toEqual({ status: 403, body: { error: 'Forbidden', message: expect.stringMatching(/unknown, expired .* or already used/) } });
    // it made no call and sent nothing
    await sleep(300);
    expect(s.receiver.requests.filter((r) => r.body.includes(unknownId))).toEqual([]);
    expect(await callCount()).toBe(callsBefore);
    expect((await s.api('GET', `/calls/${unknownId}`)).status).toBe(404);

    const { callId, token } = await makeWebCall();
    const wrong = await refusal(streamUrl(`${callId}.${randomBytes(24).toString('base64url')}`));
    expect(wrong.status).toBe(403);
    expect(wrong.body.error).toBe('Forbidden');
    // a guess does not burn the real token
    const b = await RawBrowser.open(token);
    expect(await b.message('started')).toMatchObject({ call: { id: callId, type: 'web_call' } });
    b.ws.send('{"type":"hangup"}');
    await b.closed;
    expect((await endedCall(callId)).report.ended_reason).toBe('customer-ended-call');
  });

  it('a used token: 403 for the second socket while the first call goes on', async () => {
    const { caller, callId } = await frontDeskCaller();
    for (let i = 0; i < 3; i++) {
      const again = await refusal(caller.url);
      expect(again.status).toBe(403);
      expect(again.body.error).toBe('Forbidden');
    }
    // the first call was not disturbed: the assistant still answers it
    await caller.say('I would like to book an appointment.');
    await caller.hear('book your appointment');
    expect((await s.api('GET', `/calls/${callId}`)).json.call).toMatchObject({ status: 'in-progress', current_node: 'booking' });
    await caller.hangUp();
    const { report } = await endedCall(callId);
    expect(report.ended_reason).toBe('customer-ended-call');
  });

  it('an expired token: 403 (the token made with a 1 s life through the call store)', async () => {
    const { callId } = await makeWebCall();
    const secret = randomBytes(24).toString('base64url');
    // the same call, its token replaced by one that lives 1 s (the API's live 60 s)
    await s.runtime.callStore.putStreamToken(callId, secret, 1);
    await sleep(1_300);
    const expired = await refusal(streamUrl(`${callId}.${secret}`));
    expect(expired.status).toBe(403);
    expect(expired.body.error).toBe('Forbidden');
    expect((await s.api('GET', `/calls/${callId}`)).json.call.status).toBe('ringing');
    expect((await s.api('POST', `/calls/${callId}/end`)).status).toBe(202);
    await endedCall(callId);
  });

  it('a good token on a request that is not a WebSocket handshake: 400, and the token is not used up', async () => {
    const { callId, token } = await makeWebCall();
    const path = `/calls/web/stream?token=${encodeURIComponent(token)}`;
    const good = { upgrade: 'websocket', 'sec-websocket-key': randomBytes(16).toString('base64'), 'sec-websocket-version': '13' };
    const cases: Array<[Record<string, string>, string, RegExp]> = [
      [{ upgrade: 'websocket', 'sec-websocket-version': '13' }, 'GET', /Sec-WebSocket-Key/],
      [{ ...good, 'sec-websocket-key': 'short' }, 'GET', /Sec-WebSocket-Key/],
      [{ ...good, 'sec-websocket-version': '7' }, 'GET', /Sec-WebSocket-Version/],
      [{ ...good, upgrade: 'h2c' }, 'GET', /Upgrade header/],
      [good, 'POST', /method/],
    ];
    for (const [headers, method, why] of cases) {
      const r = await rawUpgrade(path, headers, method);
      expect(r.status, JSON.stringify(headers)).toBe(400);
      expect(r.body).toEqual({ error: 'Invalid request', message: expect.stringMatching(why) });
    }
    expect((await s.api('GET', `/calls/${callId}`)).json.call.status).toBe('ringing');
    // the browser gets it right at last: the token still works
    const b = await RawBrowser.open(token);
    expect(await b.message('started')).toMatchObject({ call: { id: callId } });
    b.ws.send('{"type":"hangup"}');
    expect(await b.closed).toBe(1000);
    await endedCall(callId);
  });

  it('another path under /calls/web: 404 with a JSON body', async () => {
    for (const path of ['/calls/web/other', '/calls/web', '/calls/web/stream/', '/calls/web/stream/x']) {
      const r = await refusal(`${wsBase()}${path}?token=x`);
      expect(r.status, path).toBe(404);
      expect(r.body).toEqual({ error: 'Not found', message: expect.any(String) });
    }
  });
});

describe('malformed frames on an open stream', () => {
  it('each gets {"type":"error"} and the call goes on; a frame over 64 KiB closes 1009 and ends the call', async () => {
    const { caller, callId } = await frontDeskCaller();
    const ws = socketOf(caller);
    const deep = '['.repeat(5_000) + ']'.repeat(5_000);
    const bad: Array<[string | Buffer, RegExp]> = [
      ['not json at all', /^not JSON$/],
      ['[{"type":"hangup"}]', /^not a JSON object$/],
      ['null', /^not a JSON object$/],
      ['{"type":"media","payload":"AAAA"}', /^unknown message type "media"/],
      ['{"name":"m1"}', /^unknown message type null/],
      ['{"type":"mark"}', /^mark: "name"/],
      ['{"type":"dtmf","digit":"55"}', /^dtmf: "digit" must be one of/],
      ['{"type":"dtmf","digit":"E"}', /^dtmf: "digit" must be one of/],
      [`{"type":${deep}}`, /^unknown message type/],
      [`{"type":"mark","name":${deep}}`, /^mark: "name"/],
      [Buffer.alloc(641), /641 bytes: 16-bit samples need an even length/],
      [Buffer.alloc(1), /1 bytes: 16-bit samples need an even length/],
      [Buffer.alloc(0), /^an empty audio frame$/],
      [Buffer.alloc(32_002), /32002 bytes: at most 32000/],
      [Buffer.alloc(60_000), /60000 bytes: at most 32000/],
    ];
    const errorsBefore = caller.events.filter((e) => e.type === 'error').length;
    for (const [frame] of bad) ws.send(frame, { binary: Buffer.isBuffer(frame) });
    const errors = await eventually(
      'an error message for each bad frame',
      () => {
        const got = caller.events.filter((e) => e.type === 'error').slice(errorsBefore);
        return got.length >= bad.length && got;
      },
      10_000,
    );
    expect(errors).toHaveLength(bad.length);
    errors.forEach((e, i) => {
      expect(Object.keys(e).sort()).toEqual(['message', 'type']);
      expect(e.message).toMatch(bad[i]![1]);
    });
    // what is well-formed but unknown is no error: a mark never sent, a key press nobody waits for
    ws.send('{"type":"mark","name":"never-sent"}');
    ws.send('{"type":"dtmf","digit":"#"}');

    // the call goes on: still in progress, and the assistant still answers
    expect((await s.api('GET', `/calls/${callId}`)).json.call.status).toBe('in-progress');
    await caller.say('I would like to book an appointment.');
    await caller.hear('book your appointment');
    expect(caller.events.filter((e) => e.type === 'error').length).toBe(errorsBefore + bad.length);
    expect(caller.closed).toBe(false);

    // over 64 KiB: the socket is closed 1009 and the call ends as the caller's doing, with its report
    ws.send(Buffer.alloc(64 * 1024 + 2), { binary: true });
    await caller.ended(10_000);
    expect(caller.closeCode).toBe(1009);
    const { report, call } = await endedCall(callId);
    expect(report.ended_reason).toBe('customer-ended-call');
    expect(call.messages.some((m: { role: string; content: string }) => m.role === 'user' && /appointment/.test(m.content))).toBe(true);
  });

  it('an over-long text frame is refused the same way', async () => {
    const { token, callId } = await makeWebCall();
    const b = await RawBrowser.open(token);
    await b.message('started');
    b.sendSilence();
    b.ws.send(JSON.stringify({ type: 'mark', name: 'x'.repeat(70_000) }));
    expect(await b.closed).toBe(1009);
    expect((await endedCall(callId)).report.ended_reason).toBe('customer-ended-call');
  });
});

describe('a browser that vanishes', () => {
  it('a socket dropped without a close frame: customer-ended-call, with its report', async () => {
    const { caller, callId } = await frontDeskCaller();
    socketOf(caller).terminate();
    const { report } = await endedCall(callId);
    expect(report.ended_reason).toBe('customer-ended-call');
    await caller.ended(5_000);
    expect(caller.closeCode).toBe(1006);
  });

  it('a socket closed without a hang-up: customer-ended-call', async () => {
    const { token, callId } = await makeWebCall();
    const b = await RawBrowser.open(token);
    await b.message('started');
    b.ws.close(1001, 'tab closed');
    expect(await b.closed).toBe(1001);
    expect((await endedCall(callId)).report.ended_reason).toBe('customer-ended-call');
  });

  it('connected but no audio: ended after the idle limit, customer-ended-call with "no media" in errors, socket terminated', async () => {
    const { token, callId } = await makeWebCall();
    const b = await RawBrowser.open(token);
    const startedAt = Date.now();
    await b.message('started');
    const code = await b.closed;
    const after = Date.now() - startedAt;
    expect(after).toBeGreaterThanOrEqual(IDLE_MS - 100);
    expect(after).toBeLessThan(IDLE_MS + 3_000);
    // terminated, not closed: the far end is not there to take a close frame
    expect(code).toBe(1006);
    const { report, call } = await endedCall(callId);
    expect(report.ended_reason).toBe('customer-ended-call');
    expect(report.errors.map((e: { message: string }) => e.message).join(' ')).toMatch(/no media from the far end/);
    expect(call.errors.map((e: { message: string }) => e.message).join(' ')).toMatch(/no media from the far end/);
  });

  it('audio but no answer to pings: customer-ended-call, "stopped answering WebSocket pings"', async () => {
    const { token, callId } = await makeWebCall();
    const b = await RawBrowser.open(token, { autoPong: false });
    b.sendSilence();
    await b.message('started');
    expect(await b.closed).toBe(1006);
    const { report } = await endedCall(callId);
    expect(report.ended_reason).toBe('customer-ended-call');
    expect(report.errors.map((e: { message: string }) => e.message).join(' ')).toMatch(/stopped answering WebSocket pings/);
  });

  it('{"type":"hangup"}: customer-ended-call, the socket closed 1000 by the server', async () => {
    const { token, callId } = await makeWebCall();
    const b = await RawBrowser.open(token);
    b.sendSilence();
    await b.message('started');
    b.ws.send('{"type":"hangup"}');
    expect(await b.closed).toBe(1000);
    expect(b.messages.at(-1)).toEqual({ type: 'ended', ended_reason: 'customer-ended-call' });
    const { report } = await endedCall(callId);
    expect(report.ended_reason).toBe('customer-ended-call');
  });
});

describe('nothing else disturbed', () => {
  it('a call abused beside it (malformed frames, then gone) leaves another web call and the server as they were', async () => {
    const { caller: good, callId: goodId } = await frontDeskCaller();
    const { token, callId: badId } = await makeWebCall();
    const bad = await RawBrowser.open(token);
    await bad.message('started');
    // the good caller speaks while the other call is abused
    const speaking = good.say('I would like to book an appointment.');
    for (let i = 0; i < 50; i++) {
      bad.ws.send(i % 2 ? 'garbage' : Buffer.alloc(i + 1), { binary: i % 2 === 0 });
      bad.ws.send(`{"type":${'['.repeat(5_000)}${']'.repeat(5_000)}}`);
      bad.ws.send(Buffer.alloc(40_000), { binary: true });
    }
    await eventually('the bad call\'s error messages', () => bad.messages.filter((m) => m.type === 'error').length >= 150, 10_000);
    bad.ws.terminate();
    await speaking;

    await good.hear('Sure thing');
    await good.hear('book your appointment');
    await good.quiet();
    await good.say('That is all, goodbye.');
    await good.hear('goodbye');
    await good.ended(20_000);
    expect(good.events.filter((e) => e.type === 'error')).toEqual([]);
    expect(good.events.at(-1)).toEqual({ type: 'ended', ended_reason: 'assistant-ended-call' });
    expect(good.closeCode).toBe(1000);
    const goodEnd = await endedCall(goodId);
    expect(goodEnd.report.ended_reason).toBe('assistant-ended-call');
    expect(goodEnd.call.nodes_visited).toEqual(['greeting', 'booking', 'bye']);
    expect((await endedCall(badId)).report.ended_reason).toBe('customer-ended-call');

    expect((await request(`${s.baseUrl}/healthz`)).statusCode).toBe(200);
    const ready = await request(`${s.baseUrl}/readyz`);
    expect(ready.statusCode).toBe(200);
    await ready.body.dump();
    expect(s.runtime.calls.liveCount()).toBe(0);
  });
});

describe('POST /calls/web refusals', () => {
  it('an unknown assistant or workflow: 400 Invalid request with details, nothing made', async () => {
    const before = await callCount();
    const id = randomUUID();
    const res = await s.api('POST', '/calls/web', { assistant_id: id });
    expect(res.status).toBe(400);
    expect(res.json).toMatchObject({ error: 'Invalid request', details: [`assistant_id: no assistant with id "${id}"`] });
    const wf = randomUUID();
    const res2 = await s.api('POST', '/calls/web', { assistant_id: (await frontDeskIds()).assistantId, workflow_id: wf });
    expect(res2.status).toBe(400);
    expect(res2.json).toMatchObject({ error: 'Invalid request', details: [`workflow_id: no workflow with id "${wf}"`] });
    expect(await callCount()).toBe(before);
  });

  it("another organization's assistant or workflow: 400, as if unknown", async () => {
    const other = await s.store.keys.createKey('Another organization');
    const asOther = async (url: string, payload: Record<string, unknown>) => {
      const res = await s.app.inject({ method: 'POST', url, headers: { authorization: `Bearer ${other.key}` }, payload });
      expect(res.statusCode).toBe(201);
      return res.json();
    };
    const theirAssistant = (await asOther('/assistants', sandboxAssistant())).assistant.id as string;
    const theirWorkflow = (await asOther('/workflows', { name: 'Theirs', definition: frontDeskWorkflow() })).workflow.id as string;
    const before = await callCount();
    const res = await s.api('POST', '/calls/web', { assistant_id: theirAssistant });
    expect(res.status).toBe(400);
    expect(res.json).toMatchObject({ error: 'Invalid request', details: [expect.stringMatching(/^assistant_id: no assistant/)] });
    const res2 = await s.api('POST', '/calls/web', { assistant_id: (await frontDeskIds()).assistantId, workflow_id: theirWorkflow });
    expect(res2.status).toBe(400);
    expect(res2.json.details).toEqual([expect.stringMatching(/^workflow_id: no workflow/)]);
    expect(await callCount()).toBe(before);
    // and they see no call of ours
    const theirs = await s.app.inject({ method: 'GET', url: '/calls', headers: { authorization: `Bearer ${other.key}` } });
    expect(theirs.json().calls).toEqual([]);
  });

  it('an invalid body: 400 Invalid request naming the field', async () => {
    const { assistantId } = await frontDeskIds();
    const cases: Array<[unknown, RegExp]> = [
      [{ assistant_id: assistantId, extra: 1 }, /extra/],
      [{ assistant_id: 'not-a-uuid' }, /assistant_id/],
      [{ assistant_id: assistantId, workflow_id: 'nope' }, /workflow_id/],
      [{}, /assistant_id/],
      [{ assistant_id: assistantId, variables: 'x' }, /variables/],
    ];
    for (const [body, detail] of cases) {
      const res = await s.api('POST', '/calls/web', body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.json.error).toBe('Invalid request');
      expect(res.json.details.join(' ')).toMatch(detail);
    }
  });

  it('failed call-start checks: 400 Call rejected with why, and no call is made', async () => {
    // a realtime assistant may not run a workflow whose nodes override the model or voice
    const definition = frontDeskWorkflow();
    definition.nodes = definition.nodes.map((n) => (n.id === 'booking' ? { ...n, tts_config: { provider: 'sandbox', voice_id: 'sandbox' } } : n));
    const assistantId = await newAssistant(realtimeSandboxAssistant());
    const workflowId = await newWorkflow(definition);
    const before = await callCount();
    const res = await s.api('POST', '/calls/web', { assistant_id: assistantId, workflow_id: workflowId });
    expect(res.status).toBe(400);
    expect(res.json.error).toBe('Call rejected');
    expect(res.json.details.length).toBeGreaterThan(0);
    expect(res.json.details.join(' ')).toMatch(/tts_config/);
    // nothing made, so nothing sent (a phone call refused at start gets its report; this is no call)
    await sleep(300);
    expect(await callCount()).toBe(before);
    expect(s.receiver.requests.filter((r) => r.body.includes(assistantId))).toEqual([]);
  });
});

describe('ending a web call through the API', () => {
  it('a live call: 202, the browser gets {"type":"ended"} and a close 1000, api-ended-call with its report', async () => {
    const { caller, callId } = await frontDeskCaller();
    const res = await s.api('POST', `/calls/${callId}/end`);
    expect(res.status).toBe(202);
    expect(res.json.call.id).toBe(callId);
    await caller.ended(10_000);
    expect(caller.events.at(-1)).toEqual({ type: 'ended', ended_reason: 'api-ended-call' });
    expect(caller.closeCode).toBe(1000);
    expect((await endedCall(callId)).report.ended_reason).toBe('api-ended-call');
    // ended once: a second end is a conflict
    expect((await s.api('POST', `/calls/${callId}/end`)).status).toBe(409);
  });

  it('a ringing call (its stream never opened): ended api-ended-call with its report; its token is refused afterwards', async () => {
    const { callId, token } = await makeWebCall();
    const res = await s.api('POST', `/calls/${callId}/end`);
    expect(res.status).toBe(202);
    expect(res.json.call).toMatchObject({ id: callId, status: 'ended', ended_reason: 'api-ended-call' });
    expect((await endedCall(callId)).report.ended_reason).toBe('api-ended-call');
    // docs/web-calls.md: 403 when "its call is no longer waiting"
    const late = await refusal(streamUrl(token));
    expect(late.status).toBe(403);
    expect((await s.api('GET', `/calls/${callId}`)).json.call).toMatchObject({ status: 'ended', ended_reason: 'api-ended-call', started_at: null });
  });
});

describe('a transfer node in a web call', () => {
  it('the browser gets {"type":"transfer"}, nothing is dialled, the call ends call-transferred', async () => {
    const assistantId = await newAssistant();
    const workflowId = await newWorkflow(transferFlow);
    const twilioBefore = s.twilio.requests.length;
    const caller = new WebCaller({ baseUrl: s.baseUrl, apiKey: s.key });
    callers.push(caller);
    const callId = await caller.start({ assistant_id: assistantId, workflow_id: workflowId });
    await caller.hear('Acme support');
    await caller.quiet();
    await caller.say('I want to speak to a human agent please.');
    await caller.hear('Connecting you to an agent');
    await caller.ended(20_000);
    const transfer = caller.events.find((e) => e.type === 'transfer');
    expect(transfer).toEqual({ type: 'transfer', destination: '+14155550123' });
    const types = caller.events.map((e) => e.type);
    expect(types.indexOf('transfer')).toBeLessThan(types.lastIndexOf('ended'));
    expect(caller.events.at(-1)).toEqual({ type: 'ended', ended_reason: 'call-transferred' });
    expect(caller.closeCode).toBe(1000);
    const { report, call } = await endedCall(callId);
    expect(report.ended_reason).toBe('call-transferred');
    expect(call.nodes_visited).toEqual(['greeting', 'agent']);
    expect(s.twilio.requests.length).toBe(twilioBefore);
  });
});

describe('a realtime assistant over a web call', () => {
  it('its first line is heard and a caller line gets an answer', async () => {
    const assistantId = await newAssistant(realtimeSandboxAssistant());
    const workflowId = await newWorkflow(frontDeskWorkflow());
    const caller = new WebCaller({ baseUrl: s.baseUrl, apiKey: s.key });
    callers.push(caller);
    const callId = await caller.start({ assistant_id: assistantId, workflow_id: workflowId });
    await caller.hear('Acme Dental');
    await caller.quiet();
    await caller.say('I would like to book an appointment please.');
    await caller.hear('book your appointment');
    expect(caller.events.some((e) => e.type === 'node' && e.node_id === 'booking')).toBe(true);
    const lines = caller.events.filter((e) => e.type === 'message').map((e) => e.message as { role: string; content: string });
    expect(lines.some((m) => m.role === 'user' && /appointment/i.test(m.content))).toBe(true);
    expect(lines.some((m) => m.role === 'assistant' && /Acme Dental/.test(m.content))).toBe(true);
    await caller.hangUp();
    expect((await endedCall(callId)).report.ended_reason).toBe('customer-ended-call');
  });
});

describe('a web call whose stream never connects', () => {
  it('is finalized customer-did-not-join (nobody joined within its token\'s 60 s), with its report', async () => {
    const { callId, token } = await makeWebCall();
    // 80 s ago: past WEB_RINGING_LIMIT_MS (75 s) without waiting for it
    const record = await s.runtime.callStore.get(callId);
    expect(record?.status).toBe('ringing');
    record!.created_at = new Date(Date.now() - 80_000).toISOString();
    await s.runtime.callStore.save(record!);
    // (the heartbeat may get there first: either way the call is finalized once)
    await s.runtime.calls.finalizeStale();
    const { report, call } = await endedCall(callId);
    const unjoined = { code: 'CALL_STREAM_LOST', message: "nobody joined the web call: its stream was not opened within its token's 60 s" };
    expect(report.ended_reason).toBe('customer-did-not-join');
    expect(call.ended_reason).toBe('customer-did-not-join');
    expect(report.errors).toContainEqual(unjoined);
    expect(call.errors).toContainEqual(unjoined);
    expect(messagesOf(callId, 'status-update').at(-1)).toMatchObject({ status: 'ended', ended_reason: 'customer-did-not-join' });
    expect(call.started_at).toBeNull();
    await s.runtime.calls.finalizeStale();
    expect(messagesOf(callId, 'end-of-call-report')).toHaveLength(1);
    // a browser that comes now is too late
    expect((await refusal(streamUrl(token))).status).toBe(403);
  });

  it('the sweep ends one whose session was lost the same way: customer-did-not-join', async () => {
    // as the log has it after its session went (Redis restarted): ringing, no live session anywhere
    const createdAt = new Date(Date.now() - 200_000).toISOString();
    const record = { ...callRecord({ organization_id: s.orgId, type: 'web_call', status: 'ringing', created_at: createdAt, started_at: null, transport: 'web', transport_ids: {} }), customer: null, phone_number: null, number_id: null };
    await s.store.calls.upsert(callLogEntry(record as never));
    const logged = (await s.store.calls.get(s.orgId, record.id))!;
    const ended = await s.runtime.calls.finishOrphan(logged);
    expect(ended).toMatchObject({ status: 'ended', ended_reason: 'customer-did-not-join' });
    expect((await s.store.calls.get(s.orgId, record.id))?.ended_reason).toBe('customer-did-not-join');
  });
});
