/**
 * A browser that sends web-call audio far faster than real time (docs/web-calls.md): 3,000× is
 * bounded. A burst beyond the slack is dropped (the browser is told, the call goes on and still
 * hears the caller); one that keeps flooding is closed 1008 "audio far faster than real time" and
 * the call ends customer-ended-call with its report. The server and a call beside it go on.
 */
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebCaller } from '../../src/sim/web-caller.js';
import { AUDIO_BYTES_PER_SECOND, AUDIO_SLACK_SECONDS, CLOSE_REASON, DROPPED_MESSAGE } from '../../src/telephony/web/audio-budget.js';
import { eventually, frontDeskWorkflow, receivedMessages, startCallingServer, type CallingServer } from '../helpers/calls.js';

let s: CallingServer;
const callers: WebCaller[] = [];
let ids: { assistant_id: string; workflow_id: string };

beforeAll(async () => {
  s = await startCallingServer();
  ids = { assistant_id: await s.createAssistant(), workflow_id: await s.createWorkflow(frontDeskWorkflow({ goodbyeFromGreeting: true })) };
}, 120_000);
afterAll(async () => {
  for (const c of callers) await c.close().catch(() => undefined);
  await s?.close();
});

/** A simulated browser on a new front-desk web call, once it has heard the greeting. */
async function startCall() {
  const caller = new WebCaller({ baseUrl: s.baseUrl, apiKey: s.key });
  callers.push(caller);
  const callId = await caller.start(ids);
  await caller.hear('Acme Dental');
  await caller.quiet();
  return { caller, callId, ws: (caller as unknown as { leg: { ws: WebSocket } }).leg.ws };
}

/** Sends `seconds` of audio in 1 s frames at once: thousands of times real time. */
function flood(ws: WebSocket, seconds: number): Promise<void> {
  for (let i = 0; i < seconds; i++) ws.send(Buffer.alloc(AUDIO_BYTES_PER_SECOND), { binary: true });
  return new Promise((resolve) => {
    const drained = () => (ws.bufferedAmount === 0 ? resolve() : setTimeout(drained, 5));
    drained();
  });
}

const errorsOf = (caller: WebCaller) => caller.events.filter((e) => e.type === 'error').map((e) => e.message);

describe('web-call audio faster than real time', () => {
  it('a burst beyond the slack is dropped, the browser told once; the call goes on and hears the caller', async () => {
    const { caller, callId, ws } = await startCall();
    // 15 s of audio sent at once
    await flood(ws, AUDIO_SLACK_SECONDS + 10);
    await eventually('the browser told of the drop', () => errorsOf(caller).includes(DROPPED_MESSAGE), 5_000);
    expect(errorsOf(caller).filter((m) => m === DROPPED_MESSAGE)).toHaveLength(1);
    expect(caller.closed).toBe(false);
    expect((await s.api('GET', `/calls/${callId}`)).json.call.status).toBe('in-progress');
    await caller.say('I would like to book an appointment.');
    await caller.hear('book your appointment');
  });

  it('3,000× real time, kept up: closed 1008 with the reason, the call ended with its report; a call beside it goes on', async () => {
    const beside = await startCall();
    const { caller, callId, ws } = await startCall();
    let closeReason = '';
    ws.on('close', (_code, reason) => (closeReason = reason.toString()));
    // an hour of audio, a minute at a time as fast as the socket takes it, until the server closes it
    let sent = 0;
    for (; sent < 3_600 && ws.readyState === WebSocket.OPEN; sent += 60) await flood(ws, 60);
    await caller.ended(10_000);
    expect(caller.closeCode).toBe(1008);
    expect(closeReason).toBe(CLOSE_REASON);
    // closed long before an hour's worth (after the slack and 30 s dropped, what the sockets' buffers held aside:
    // the exact bound is test/telephony/web-audio-budget.test.ts's)
    expect(sent).toBeLessThan(3_600);

    const report = await eventually(
      'the report',
      () => receivedMessages(s.receiver, 'end-of-call-report').find((m) => m.call?.id === callId),
      15_000,
    );
    expect(report.ended_reason).toBe('customer-ended-call');
    expect((await s.api('GET', `/calls/${callId}`)).json.call).toMatchObject({ status: 'ended', ended_reason: 'customer-ended-call' });

    // the call beside it and the server are as they were
    expect(beside.caller.closed).toBe(false);
    await beside.caller.say('I would like to book an appointment.');
    await beside.caller.hear('book your appointment');
    expect((await fetch(`${s.baseUrl}/healthz`)).status).toBe(200);
  });
});
