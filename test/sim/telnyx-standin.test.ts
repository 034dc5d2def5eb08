/**
 * The Telnyx stand-in (src/sim/telnyx.ts) checked with Telnyx's official SDK (`telnyx`): its Call
 * Control API as the SDK calls it (dial, the commands, the call's status, the refusals), its
 * webhooks as the SDK verifies them (`webhooks.unwrap`: Ed25519 over `timestamp|body`, with the
 * stand-in's public key), and its media streams as a server of ours receives them.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import Telnyx from 'telnyx';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocketServer, type WebSocket } from 'ws';
import { startTelnyxStandIn, type TelnyxStandIn } from '../../src/sim/telnyx.js';
import { synthesizeSandboxSpeech } from '../../src/providers/sandbox/tts.js';

const API_KEY = 'KEY0123456789ABCDEF_test';
const CONNECTION = '2811212257810187875';

interface Received {
  eventType: string;
  payload: Record<string, any>;
  body: string;
}

/** Our side: the webhook endpoint (each request verified with the SDK) and a media WebSocket. */
let standIn: TelnyxStandIn;
let client: Telnyx;
let hooks: Server;
let hookUrl: string;
const received: Received[] = [];
const unverified: string[] = [];
let media: WebSocketServer;
let mediaUrl: string;
const sockets: Array<{ ws: WebSocket; frames: any[]; url: string }> = [];

const until = async (test: () => boolean, what: string, ms = 5_000) => {
  const deadline = Date.now() + ms;
  while (!test()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
};
const eventsOf = (ccid: string) => received.filter((r) => r.payload.call_control_id === ccid).map((r) => r.eventType);

beforeAll(async () => {
  hooks = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const headers = Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, String(v)]));
      client.webhooks
        .unwrap(body, { headers, key: standIn.publicKey })
        .then((event: any) => {
          received.push({ eventType: event.data.event_type, payload: event.data.payload, body });
          res.writeHead(200).end();
        })
        .catch((err: Error) => {
          unverified.push(err.message);
          res.writeHead(403).end();
        });
    });
  });
  await new Promise<void>((r) => hooks.listen(0, '127.0.0.1', () => r()));
  hookUrl = `http://127.0.0.1:${(hooks.address() as AddressInfo).port}/telnyx`;
  media = new WebSocketServer({ port: 0, host: '127.0.0.1' });
  await new Promise<void>((r) => media.once('listening', () => r()));
  mediaUrl = `ws://127.0.0.1:${(media.address() as AddressInfo).port}/media`;
  media.on('connection', (ws, req) => {
    const socket = { ws, frames: [] as any[], url: req.url ?? '' };
    sockets.push(socket);
    ws.on('message', (data) => socket.frames.push(JSON.parse(data.toString())));
  });
  standIn = await startTelnyxStandIn({ apiKeys: [API_KEY], connections: { [CONNECTION]: hookUrl } });
  client = new Telnyx({ apiKey: API_KEY, baseURL: `${standIn.url}/v2`, maxRetries: 0 });
});

afterAll(async () => {
  await standIn.close();
  for (const s of sockets) s.ws.terminate();
  await new Promise<void>((r) => media.close(() => r()));
  await new Promise<void>((r) => hooks.close(() => r()));
});

describe('the Call Control API, through the official SDK', () => {
  it('dial: the ids of the call, then call.initiated and call.answered, signed as the SDK verifies them', async () => {
    const clientState = Buffer.from('call-1').toString('base64');
    const dialled = await client.calls.dial({ connection_id: CONNECTION, to: '+14155550101', from: '+14155550100', client_state: clientState, timeout_secs: 30 });
    const ccid = dialled.data!.call_control_id;
    expect(dialled.data).toMatchObject({ call_control_id: expect.stringMatching(/^v3:/), is_alive: false, record_type: 'call' });
    expect(standIn.call(ccid)?.to).toBe('+14155550101');
    await until(() => eventsOf(ccid).includes('call.answered'), 'call.answered');
    expect(eventsOf(ccid)).toEqual(['call.initiated', 'call.answered']);
    const initiated = received.find((r) => r.payload.call_control_id === ccid)!;
    expect(initiated.payload).toMatchObject({ direction: 'outgoing', client_state: clientState, connection_id: CONNECTION, to: '+14155550101', from: '+14155550100' });
    expect(unverified).toEqual([]);

    const status = await client.calls.retrieveStatus(ccid);
    expect(status.data).toMatchObject({ call_control_id: ccid, is_alive: true });
  });

  it('streaming_start: the stream opens with connected and start, then media of both tracks, marks and clear answered', async () => {
    const dialled = await client.calls.dial({ connection_id: CONNECTION, to: '+14155550102', from: '+14155550100' });
    const ccid = dialled.data!.call_control_id;
    await until(() => eventsOf(ccid).includes('call.answered'), 'call.answered');
    await client.calls.actions.startStreaming(ccid, {
      stream_url: `${mediaUrl}?call=2`,
      stream_track: 'both_tracks',
      stream_bidirectional_mode: 'rtp',
      stream_bidirectional_codec: 'PCMU',
    });
    await until(() => sockets.some((s) => s.url.endsWith('call=2')), 'the stream');
    const socket = sockets.find((s) => s.url.endsWith('call=2'))!;
    await until(() => socket.frames.filter((f) => f.event === 'media').length > 5, 'media');
    const [connected, start] = socket.frames;
    expect(connected).toEqual({ event: 'connected', version: '1.0.0' });
    expect(start).toMatchObject({
      event: 'start',
      sequence_number: expect.any(String),
      stream_id: expect.any(String),
      start: { call_control_id: ccid, from: '+14155550100', to: '+14155550102', media_format: { encoding: 'PCMU', sample_rate: 8000, channels: 1 } },
    });
    const tracks = new Set(socket.frames.filter((f) => f.event === 'media').map((f) => f.media.track));
    expect(tracks).toEqual(new Set(['inbound', 'outbound']));
    expect(Buffer.from(socket.frames.find((f) => f.event === 'media').media.payload, 'base64')).toHaveLength(160);

    // what we send is played to the party (and comes back on the outbound track); a mark after it is echoed once played
    const speech = synthesizeSandboxSpeech('Hello from our side');
    socket.ws.send(JSON.stringify({ event: 'media', media: { payload: speech.toString('base64') } }));
    socket.ws.send(JSON.stringify({ event: 'mark', mark: { name: 'm1' } }));
    await until(() => socket.frames.some((f) => f.event === 'mark' && f.mark.name === 'm1'), 'the mark', 10_000);
    const leg = standIn.call(ccid)!.leg!;
    await leg.hear('hello from our side');
    // clear: unplayed audio dropped, the pending mark answered at once
    socket.ws.send(JSON.stringify({ event: 'media', media: { payload: synthesizeSandboxSpeech('a long sentence that will be cut off').toString('base64') } }));
    socket.ws.send(JSON.stringify({ event: 'mark', mark: { name: 'm2' } }));
    socket.ws.send(JSON.stringify({ event: 'clear' }));
    await until(() => socket.frames.some((f) => f.event === 'mark' && f.mark.name === 'm2'), 'the cleared mark', 1_000);
    expect(leg.clears).toHaveLength(1);

    // the party presses a key, then transfer: the stream ends with stop
    leg.pressKey('5');
    await until(() => socket.frames.some((f) => f.event === 'dtmf'), 'dtmf');
    expect(socket.frames.find((f) => f.event === 'dtmf')).toMatchObject({ dtmf: { digit: '5' }, stream_id: start.stream_id });
    await client.calls.actions.transfer(ccid, { to: '+14155550199', from: '+14155550100' });
    await until(() => socket.frames.some((f) => f.event === 'stop'), 'stop');
    expect(standIn.call(ccid)).toMatchObject({ transferredTo: ['+14155550199'], state: 'bridged' });
  });

  it('hangup: stop on the stream and call.hangup normal_clearing; a second one is 422 90018', async () => {
    const dialled = await client.calls.dial({ connection_id: CONNECTION, to: '+14155550103', from: '+14155550100', stream_url: `${mediaUrl}?call=3`, stream_track: 'inbound_track' });
    const ccid = dialled.data!.call_control_id;
    await until(() => sockets.some((s) => s.url.endsWith('call=3') && s.frames.filter((f) => f.event === 'media').length > 3), 'the stream of a dial with stream_url');
    await client.calls.actions.hangup(ccid, {});
    await until(() => eventsOf(ccid).includes('call.hangup'), 'call.hangup');
    expect(received.find((r) => r.payload.call_control_id === ccid && r.eventType === 'call.hangup')!.payload).toMatchObject({ hangup_cause: 'normal_clearing', state: 'hangup' });
    const socket = sockets.find((s) => s.url.endsWith('call=3'))!;
    expect(socket.frames.some((f) => f.event === 'stop')).toBe(true);
    // only the inbound track when that is all that was asked for
    expect(new Set(socket.frames.filter((f) => f.event === 'media').map((f) => f.media.track))).toEqual(new Set(['inbound']));
    const again = await client.calls.actions.hangup(ccid, {}).catch((err: unknown) => err);
    expect(again).toBeInstanceOf(Telnyx.UnprocessableEntityError);
    expect((again as { status: number; error: any }).error.errors[0]).toMatchObject({ code: '90018', title: 'Call has already ended' });
  });

  it('callees that do not answer: busy, no answer, failed, and a destination Telnyx refuses', async () => {
    standIn.setCallee('+14155550111', { kind: 'busy' });
    standIn.setCallee('+14155550112', { kind: 'no-answer', ringMs: 100 });
    standIn.setCallee('+14155550113', { kind: 'failed' });
    standIn.setCallee('+14155550114', { kind: 'reject' });
    const causes: Record<string, string> = {};
    for (const to of ['+14155550111', '+14155550112', '+14155550113']) {
      const ccid = (await client.calls.dial({ connection_id: CONNECTION, to, from: '+14155550100' })).data!.call_control_id;
      await until(() => eventsOf(ccid).includes('call.hangup'), `the end of ${to}`);
      causes[to] = received.find((r) => r.payload.call_control_id === ccid && r.eventType === 'call.hangup')!.payload.hangup_cause;
    }
    expect(causes).toEqual({ '+14155550111': 'user_busy', '+14155550112': 'timeout', '+14155550113': 'unspecified' });
    const refused = await client.calls.dial({ connection_id: CONNECTION, to: '+14155550114', from: '+14155550100' }).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(Telnyx.UnprocessableEntityError);
    expect((refused as { error: any }).error.errors[0]).toMatchObject({ code: '10010' });
  });

  it('refusals in Telnyx shape: a wrong API key (401), a bad number and an unknown connection (422), an unknown call (404)', async () => {
    const stranger = new Telnyx({ apiKey: 'KEY_not_ours', baseURL: `${standIn.url}/v2`, maxRetries: 0 });
    await expect(stranger.calls.dial({ connection_id: CONNECTION, to: '+14155550101', from: '+14155550100' })).rejects.toBeInstanceOf(Telnyx.AuthenticationError);
    const bad = await client.calls.dial({ connection_id: CONNECTION, to: '555-0101', from: '+14155550100' }).catch((e: unknown) => e);
    expect((bad as { error: any }).error.errors[0]).toMatchObject({ code: '10015', source: { pointer: '/to' } });
    await expect(client.calls.dial({ connection_id: 'nope', to: '+14155550101', from: '+14155550100' })).rejects.toBeInstanceOf(Telnyx.UnprocessableEntityError);
    await expect(client.calls.actions.hangup('v3:unknown', {})).rejects.toBeInstanceOf(Telnyx.NotFoundError);
  });

  it('a command_id sent again is the same dial, and the same command is taken once', async () => {
    const first = await client.calls.dial({ connection_id: CONNECTION, to: '+14155550104', from: '+14155550100', command_id: 'dial-once' });
    const second = await client.calls.dial({ connection_id: CONNECTION, to: '+14155550104', from: '+14155550100', command_id: 'dial-once' });
    expect(second.data!.call_control_id).toBe(first.data!.call_control_id);
    expect(standIn.calls.filter((c) => c.to === '+14155550104')).toHaveLength(1);
  });
});

describe('a call to us', () => {
  it('call.initiated (incoming, parked) to the connection; answer opens the stream; the party talks and hangs up', async () => {
    const call = standIn.inbound({ to: '+14155550100', from: '+14155550177' });
    const dialling = call.dial();
    await until(() => eventsOf(call.callControlId).includes('call.initiated'), 'call.initiated');
    const initiated = received.find((r) => r.payload.call_control_id === call.callControlId)!;
    expect(initiated.payload).toMatchObject({ direction: 'incoming', state: 'parked', from: '+14155550177', to: '+14155550100', connection_id: CONNECTION });
    await client.calls.actions.answer(call.callControlId, {
      stream_url: `${mediaUrl}?call_id=00000000-0000-4000-8000-000000000001&token=t`,
      stream_track: 'both_tracks',
      stream_bidirectional_mode: 'rtp',
      stream_bidirectional_codec: 'PCMU',
      client_state: Buffer.from('ours').toString('base64'),
    });
    expect(await dialling).toEqual({ kind: 'answered', callId: '00000000-0000-4000-8000-000000000001' });
    await until(() => eventsOf(call.callControlId).includes('streaming.started'), 'streaming.started');
    expect(received.find((r) => r.payload.call_control_id === call.callControlId && r.eventType === 'call.answered')!.payload.client_state).toBe(Buffer.from('ours').toString('base64'));
    await call.hangUp();
    await until(() => eventsOf(call.callControlId).includes('call.hangup'), 'call.hangup');
    expect(call.hangupCause).toBe('normal_clearing');
  });

  it('reject: call.hangup with the cause, and the dial says so', async () => {
    const call = standIn.inbound({ to: '+14155550100' });
    const dialling = call.dial();
    await until(() => eventsOf(call.callControlId).includes('call.initiated'), 'call.initiated');
    await client.calls.actions.reject(call.callControlId, { cause: 'USER_BUSY' });
    expect(await dialling).toEqual({ kind: 'rejected', cause: 'user_busy' });
  });

  it('a webhook refused (an endpoint that answers 403) is a refused dial', async () => {
    const refusing = createServer((_req, res) => res.writeHead(403).end());
    await new Promise<void>((r) => refusing.listen(0, '127.0.0.1', () => r()));
    const refused = standIn.inbound({ to: '+14155550100', webhookUrl: `http://127.0.0.1:${(refusing.address() as AddressInfo).port}/` });
    expect(await refused.dial()).toEqual({ kind: 'refused', status: 403 });
    await new Promise<void>((r) => refusing.close(() => r()));
  });
});
