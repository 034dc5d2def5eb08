/** The media WebSocket accepts a stream only with its call's one-time token; anything else is closed at once. */
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCallingServer, type CallingServer } from '../helpers/calls.js';

let s: CallingServer;
beforeAll(async () => {
  s = await startCallingServer();
});
afterAll(async () => {
  await s?.close();
});

const mediaUrl = () => `${s.baseUrl.replace(/^http/, 'ws')}/telephony/twilio/media`;

/** Opens a media socket, sends `messages`, and resolves with the close code (or 'open' after 3 s). */
function stream(messages: (string | Buffer)[], url = mediaUrl()): Promise<number | 'open' | 'refused'> {
  return new Promise((resolve) => {
    const ws = new WebSocket(url);
    const timer = setTimeout(() => {
      resolve('open');
      ws.close();
    }, 3_000);
    ws.on('open', () => {
      for (const m of messages) ws.send(m);
    });
    ws.on('close', (code) => {
      clearTimeout(timer);
      resolve(code);
    });
    ws.on('error', () => {
      clearTimeout(timer);
      resolve('refused');
    });
  });
}

const start = (params: Record<string, string>) =>
  JSON.stringify({
    event: 'start',
    streamSid: 'MZ00000000000000000000000000000000',
    start: { streamSid: 'MZ00000000000000000000000000000000', callSid: 'CA1', customParameters: params },
  });

describe('media stream admission', () => {
  it('the TwiML stream URL carries no query string: the token travels as a <Parameter>', async () => {
    const { number } = await s.setUpNumber({ assistant: { name: 'x', llm_config: { provider: 'sandbox' }, stt_config: { provider: 'sandbox' }, tts_config: { provider: 'sandbox', voice_id: 'sandbox' }, first_message: 'Hello.' } });
    const call = s.caller(number);
    await call.dial();
    const url = /<Stream url="([^"]+)"/.exec(call.twiml)![1]!;
    expect(url).not.toContain('?');
    expect(call.twiml).toMatch(/<Parameter name="token" value="[A-Za-z0-9_-]{32}"\/>/);
    await call.hear('Hello');
    const callId = /name="call_id" value="([^"]+)"/.exec(call.twiml)![1]!;
    const token = /name="token" value="([^"]+)"/.exec(call.twiml)![1]!;

    // a wrong token for this very call is refused, and does not use the real one up
    expect(await stream([start({ call_id: callId, token: 'x'.repeat(32) })])).toBe(1008);
    // the same call id and token a second time: the token was used up
    expect(await stream([start({ call_id: callId, token })])).toBe(1008);
    await call.hangUp();
  });

  it('closes a stream with a wrong token, no token, an unknown call, or unreadable messages', async () => {
    expect(await stream([start({ call_id: '00000000-0000-4000-8000-000000000000', token: 'guess' })])).toBe(1008);
    expect(await stream([start({})])).toBe(1008);
    expect(await stream(['not json'])).toBe(1008);
    expect(await stream([Buffer.from([1, 2, 3])])).toBe(1008);
    expect(await stream([JSON.stringify({ event: 'media', media: { payload: 'AAAA' } }), 'x'])).toBe(1008);
  });

  it('refuses upgrades on any other path', async () => {
    expect(await stream([], `${s.baseUrl.replace(/^http/, 'ws')}/somewhere/else`)).toBe('refused');
  });
});
