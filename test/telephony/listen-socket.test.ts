/**
 * A listener's WebSocket (src/telephony/listen-socket.ts) over a real socket on 127.0.0.1, with a
 * call registered in a real hub on a hand-turned clock: `started` with the format, then one
 * 640-byte binary message per 20 ms frame and the JSON events, `ended` and a close (1000); the
 * one-time token (a second use, a malformed or unknown token, a call that is over: refused before
 * the upgrade); a listener that speaks is closed (1003); one that does not read is dropped while
 * the clock (the call) goes on.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import WebSocket from 'ws';
import { LISTEN_FORMAT, LISTEN_FRAME_BYTES } from '../../src/calls/listen-mixer.js';
import { ListenHub, ListenTap, type ListenedCall } from '../../src/calls/listen.js';
import type { PacerClock } from '../../src/calls/outbound.js';
import { ListenSockets, LISTEN_PATH } from '../../src/telephony/listen-socket.js';

const silent = pino({ level: 'silent' });
const callId = '6f1c2a3b-4d5e-4f60-8a7b-9c0d1e2f3a4b';
const record = { id: callId, type: 'web_call', assistant_id: 'asst', workflow_id: null } as const;

let now = 0;
let ticks = new Set<() => void>();
const clock: PacerClock = {
  now: () => now,
  subscribe: (fn) => {
    ticks.add(fn);
    return () => ticks.delete(fn);
  },
};
function pass(ms: number): void {
  for (let t = 0; t < ms; t += 10) {
    now += 10;
    for (const tick of [...ticks]) tick();
  }
}

let server: Server;
let hub: ListenHub;
let sockets: ListenSockets;
let call: ListenedCall;
let tap: ListenTap | null;
let base: string;

beforeEach(async () => {
  now = 0;
  ticks = new Set();
  tap = null;
  hub = new ListenHub({ log: silent, clock });
  call = hub.register(record, (t) => (tap = t));
  sockets = new ListenSockets({ hub, logger: silent });
  server = createServer();
  server.on('upgrade', (request, socket, head) => {
    if (request.url?.startsWith(LISTEN_PATH)) sockets.upgrade(request, socket, head);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  base = `ws://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterEach(async () => {
  sockets.close();
  await hub.close();
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

/** A listener's socket, with everything it got. */
async function listen(token: string) {
  const ws = new WebSocket(`${base}${LISTEN_PATH}?token=${encodeURIComponent(token)}`);
  const got = { frames: [] as Buffer[], events: [] as any[], close: null as null | { code: number; reason: string } };
  ws.on('message', (data, isBinary) => {
    if (isBinary) got.frames.push(data as Buffer);
    else got.events.push(JSON.parse(String(data)));
  });
  const closed = new Promise<void>((resolve) =>
    ws.on('close', (code, reason) => {
      got.close = { code, reason: String(reason) };
      resolve();
    }),
  );
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  await until(() => got.events.length > 0);
  return { ws, got, closed };
}

/** The status a refused upgrade answered. */
function refusal(token: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`${base}${LISTEN_PATH}?token=${encodeURIComponent(token)}`);
    ws.on('unexpected-response', (_req, res) => {
      resolve(res.statusCode ?? 0);
      res.resume();
      ws.terminate();
    });
    ws.on('open', () => reject(new Error('the socket opened')));
    ws.on('error', () => undefined);
  });
}

async function until(probe: () => boolean, ms = 5_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!probe()) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 5));
  }
}

describe('a listener\'s socket', () => {
  it('gets `started`, one 640-byte binary message per 20 ms frame and the events, then `ended` and a close 1000', async () => {
    const a = await listen(await hub.issue(callId));
    expect(a.got.events[0]).toEqual({ type: 'started', call: { id: callId, type: 'web_call', assistant_id: 'asst', workflow_id: null }, audio: LISTEN_FORMAT });
    await until(() => tap !== null);
    pass(1_000);
    await until(() => a.got.frames.length >= 42);
    expect(a.got.frames.every((f) => f.length === LISTEN_FRAME_BYTES)).toBe(true);
    call.observed({ type: 'node', node_id: 'booking', nodes_visited: ['greeting', 'booking'] });
    call.observed({ type: 'ended', ended_reason: 'customer-ended-call' });
    await a.closed;
    expect(a.got.close).toEqual({ code: 1000, reason: 'call ended' });
    expect(a.got.frames).toHaveLength(50);
    expect(a.got.events.slice(1)).toEqual([
      { type: 'node', node_id: 'booking', nodes_visited: ['greeting', 'booking'] },
      { type: 'ended', ended_reason: 'customer-ended-call' },
    ]);
    expect(tap).toBeNull();
  });

  it('takes a token once; a malformed token is 400, an unknown or used one 403, a call that is over 403', async () => {
    const token = await hub.issue(callId);
    const a = await listen(token);
    expect(await refusal(token)).toBe(403);
    expect(await refusal('not-a-token')).toBe(400);
    expect(await refusal(`${callId}.${'x'.repeat(32)}`)).toBe(403);
    const late = await hub.issue(callId);
    call.observed({ type: 'ended', ended_reason: 'customer-ended-call' });
    await a.closed;
    expect(await refusal(late)).toBe(403);
  });

  it('has several listeners at once, each with every frame', async () => {
    const a = await listen(await hub.issue(callId));
    const b = await listen(await hub.issue(callId));
    pass(2_000);
    call.observed({ type: 'ended', ended_reason: 'assistant-ended-call' });
    await Promise.all([a.closed, b.closed]);
    expect(a.got.frames).toHaveLength(100);
    expect(b.got.frames).toHaveLength(100);
  });

  it('closes a listener that speaks (1003); text from it is ignored', async () => {
    const a = await listen(await hub.issue(callId));
    const b = await listen(await hub.issue(callId));
    b.ws.send('{"type":"hello"}');
    a.ws.send(Buffer.alloc(640));
    await a.closed;
    expect(a.got.close).toEqual({ code: 1003, reason: 'a listener cannot speak' });
    pass(400);
    await until(() => b.got.frames.length >= 5);
    expect(b.got.close).toBeNull();
  });

  it('drops a listener that does not read; the clock goes on for the others', async () => {
    const slow = await listen(await hub.issue(callId));
    const fine = await listen(await hub.issue(callId));
    const socket = (slow.ws as unknown as { _socket: { pause(): void; resume(): void } })._socket;
    socket.pause();
    let seconds = 0;
    // a second of frames at a time, until its socket holds more than the bound (the kernel's buffers fill first)
    while (seconds < 600) {
      const before = performance.now();
      pass(1_000);
      seconds++;
      // sending never waits for the listener: a second of frames costs well under a second
      expect(performance.now() - before).toBeLessThan(500);
      await new Promise((r) => setImmediate(r));
      if (tapListeners() === 1) break;
    }
    expect(tapListeners()).toBe(1);
    await until(() => fine.got.frames.length >= seconds * 50 - 10, 10_000);
    // the dropped socket is closed (1008) behind what it had not read, and cut a second later
    socket.resume();
    await slow.closed;
    expect([1006, 1008]).toContain(slow.got.close?.code);
    expect(slow.got.frames.length).toBeLessThan(seconds * 50);
    expect(fine.got.close).toBeNull();
  });
});

/** Listeners on the call's tap (0 without a tap). */
function tapListeners(): number {
  return (tap as ListenTap | null)?.listeners ?? 0;
}
