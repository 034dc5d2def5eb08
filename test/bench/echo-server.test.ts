import { afterEach, describe, expect, it } from 'vitest';
import { performance } from 'node:perf_hooks';
import { WebSocket } from 'ws';
import { startEchoServer, type EchoServer } from './echo-server.js';

describe('the bare baseline echo server', () => {
  let echo: EchoServer | null = null;
  afterEach(async () => {
    await echo?.close();
    echo = null;
  });

  it('returns every inbound frame as an outbound media message on the stream, and ignores what is not JSON', async () => {
    echo = await startEchoServer();
    const ws = new WebSocket(echo.url);
    await new Promise((r, j) => ws.once('open', r).once('error', j));
    const got: Array<{ event: string; streamSid: string; media: { payload: string } }> = [];
    ws.on('message', (d) => got.push(JSON.parse(d.toString())));
    ws.send(JSON.stringify({ event: 'connected', protocol: 'Call', version: '1.0.0' }));
    ws.send(JSON.stringify({ event: 'start', streamSid: 'MZ1', start: { streamSid: 'MZ1' } }));
    ws.send('not json');
    const frames = [Buffer.alloc(160, 0xff), Buffer.alloc(160, 0x7f), Buffer.from([1, 2, 3])];
    for (const f of frames) ws.send(JSON.stringify({ event: 'media', streamSid: 'MZ1', media: { payload: f.toString('base64') } }));
    const deadline = Date.now() + 5_000;
    while (got.length < frames.length && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    expect(got.map((m) => m.event)).toEqual(['media', 'media', 'media']);
    expect(got.map((m) => m.streamSid)).toEqual(['MZ1', 'MZ1', 'MZ1']);
    expect(got.map((m) => Buffer.from(m.media.payload, 'base64'))).toEqual(frames);
    expect(echo.framesEchoed()).toBe(3);
    expect(echo.live()).toBe(1);
    ws.send(JSON.stringify({ event: 'stop', streamSid: 'MZ1' }));
    await new Promise((r) => ws.once('close', r));
    while (echo.live() > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    expect(echo.live()).toBe(0);
  });

  it('counts a frame as handled late when it arrives more than 20 ms behind the stream\'s promptest frame', async () => {
    echo = await startEchoServer();
    const ws = new WebSocket(echo.url);
    await new Promise((r, j) => ws.once('open', r).once('error', j));
    let back = 0;
    ws.on('message', () => back++);
    const media = (timestamp: number) =>
      ws.send(JSON.stringify({ event: 'media', streamSid: 'MZ2', media: { timestamp: String(timestamp), payload: Buffer.alloc(160, 0xff).toString('base64') } }));
    const t0 = performance.now();
    media(0); // on time: sets the stream's offset
    media(Math.round(performance.now() - t0) - 5); // 5 ms behind: in time
    media(Math.round(performance.now() - t0) - 60); // stamped 60 ms before it was sent: late
    const deadline = Date.now() + 5_000;
    while (back < 3 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    const l = echo.lateness();
    expect(l.frames).toBe(3);
    expect(l.late).toBe(1);
    expect(l.maxLateMs).toBeGreaterThan(40);
    echo.resetLateness();
    expect(echo.lateness()).toEqual({ frames: 0, late: 0, maxLateMs: 0 });
    ws.close();
  });
});
