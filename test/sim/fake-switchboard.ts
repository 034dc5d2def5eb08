/**
 * A small stand-in for Switchboard's side of an outbound call, for the Twilio stand-in's tests:
 * one HTTP server that answers the TwiML request (and an inbound voice webhook) with
 * `<Connect><Stream>`, records every callback with whether its `X-Twilio-Signature` verifies
 * (with our verifier and with Twilio's SDK), and takes the Media Streams socket: it hears the
 * callee through the sandbox STT and can speak to it with sandbox TTS audio.
 */
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import twilio from 'twilio';
import WebSocket, { WebSocketServer } from 'ws';
import { parseForm, verifyTwilioSignature } from '../../src/telephony/twilio/signature.js';
import { synthesizeSandboxSpeech } from '../../src/providers/sandbox/tts.js';
import { createSandboxStt } from '../../src/providers/sandbox/stt.js';
import type { SttSession } from '../../src/providers/types.js';

export interface ReceivedCallback {
  method: string;
  /** The path with its query string. */
  path: string;
  /** The path without the query string. */
  route: string;
  params: Record<string, string>;
  signature: string | undefined;
  /** `verifyTwilioSignature` (src/telephony/twilio/signature.ts) accepts it. */
  valid: boolean;
  /** Twilio's own `validateRequest` accepts it. */
  validBySdk: boolean;
  at: number;
}

export interface FakeStream {
  /** Every message the stand-in sent on the socket, parsed. */
  messages: any[];
  start: any;
  /** What the server's sandbox STT heard from the callee. */
  heard: string[];
  /** The upgrade request's `X-Twilio-Signature`. */
  signature: string | undefined;
  closed: boolean;
  /** When the socket closed. */
  closedAt: number | null;
  /** Sends sandbox speech of `text`, then a mark. */
  say(text: string, mark?: string): void;
  clear(): void;
  /** The server closes the socket (Switchboard ends its side). */
  close(): void;
}

export interface FakeSwitchboard {
  url: string;
  wsUrl: string;
  callbacks: ReceivedCallback[];
  streams: FakeStream[];
  /** What `/twiml` (and `/telephony/twilio/voice`) answer; by default a `<Connect><Stream>` to `/media`. */
  twiml: string;
  /** More TwiML documents by route (e.g. a `<Connect action>`). */
  pages: Record<string, string>;
  /** HTTP status of every other route (the callbacks). */
  callbackStatus: number;
  on(route: string): ReceivedCallback[];
  waitFor(route: string, test?: (c: ReceivedCallback) => boolean, timeoutMs?: number): Promise<ReceivedCallback>;
  waitForStream(index?: number, timeoutMs?: number): Promise<FakeStream>;
  close(): Promise<void>;
}

export const streamTwiml = (wsUrl: string, after = '') =>
  `<?xml version="1.0" encoding="UTF-8"?><Response><Connect><Stream url="${wsUrl}?leg=callee&amp;x=1"><Parameter name="token" value="t-1"/><Parameter name="call_id" value="call-42"/></Stream></Connect>${after}</Response>`;

export async function until<T>(what: string, probe: () => T | undefined | null | false, timeoutMs = 5_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = probe();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

export async function startFakeSwitchboard(authToken: string): Promise<FakeSwitchboard> {
  const callbacks: ReceivedCallback[] = [];
  const streams: FakeStream[] = [];
  const sockets = new Set<WebSocket>();
  const ears: SttSession[] = [];

  const server = createServer((req: IncomingMessage, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const fullUrl = `${fake.url}${req.url}`;
      const form = req.method === 'POST' ? (parseForm(body) as Record<string, string>) : {};
      const params = req.method === 'POST' ? form : Object.fromEntries(new URL(fullUrl).searchParams);
      const signature = req.headers['x-twilio-signature'] as string | undefined;
      callbacks.push({
        method: req.method ?? '',
        path: req.url ?? '',
        route: (req.url ?? '').split('?')[0]!,
        params,
        signature,
        valid: verifyTwilioSignature(authToken, fullUrl, form, signature),
        validBySdk: twilio.validateRequest(authToken, signature ?? '', fullUrl, form),
        at: Date.now(),
      });
      const route = (req.url ?? '').split('?')[0];
      if (route === '/twiml' || route === '/telephony/twilio/voice') {
        res.writeHead(200, { 'content-type': 'text/xml' }).end(fake.twiml);
        return;
      }
      const page = fake.pages[route ?? ''];
      if (page !== undefined) {
        res.writeHead(200, { 'content-type': 'text/xml' }).end(page);
        return;
      }
      res.writeHead(fake.callbackStatus).end();
    });
  });

  const wss = new WebSocketServer({ server, path: '/media' });
  wss.on('connection', async (ws, req) => {
    sockets.add(ws);
    const stream: FakeStream = {
      messages: [],
      start: null,
      heard: [],
      signature: req.headers['x-twilio-signature'] as string | undefined,
      closed: false,
      closedAt: null,
      say(text, mark = 'm1') {
        const audio = synthesizeSandboxSpeech(text);
        const sid = this.start?.streamSid;
        for (let i = 0; i < audio.length; i += 160) {
          ws.send(JSON.stringify({ event: 'media', streamSid: sid, media: { payload: audio.subarray(i, i + 160).toString('base64') } }));
        }
        ws.send(JSON.stringify({ event: 'mark', streamSid: sid, mark: { name: mark } }));
      },
      clear() {
        ws.send(JSON.stringify({ event: 'clear', streamSid: this.start?.streamSid }));
      },
      close() {
        ws.close(1000);
      },
    };
    // listen at once (the first messages come right after the upgrade); the ear joins a moment later
    let ear: SttSession | null = null;
    ws.on('message', (data) => {
      const m = JSON.parse(data.toString());
      stream.messages.push(m);
      if (m.event === 'start') stream.start = m;
      if (m.event === 'media') ear?.sendAudio(Buffer.from(m.media.payload, 'base64'));
      if (m.event === 'stop') ear?.finalize();
    });
    ws.on('close', () => {
      stream.closed = true;
      stream.closedAt = Date.now();
      ear?.finalize();
    });
    streams.push(stream);
    ear = await createSandboxStt().connect(
      { provider: 'sandbox' },
      { onTranscript: (t) => void (t.isFinal && t.text.trim() && stream.heard.push(t.text.trim())), onError: () => undefined },
    );
    ears.push(ear);
  });

  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const { port } = server.address() as AddressInfo;

  const fake: FakeSwitchboard = {
    url: `http://127.0.0.1:${port}`,
    wsUrl: `ws://127.0.0.1:${port}/media`,
    callbacks,
    streams,
    twiml: '',
    pages: {},
    callbackStatus: 200,
    on: (route) => callbacks.filter((c) => c.route === route),
    waitFor: (route, test = () => true, timeoutMs = 5_000) =>
      until(`a request to ${route}`, () => callbacks.find((c) => c.route === route && test(c)), timeoutMs),
    waitForStream: (index = 0, timeoutMs = 5_000) =>
      until(`media stream #${index}`, () => (streams[index]?.start ? streams[index] : undefined), timeoutMs),
    async close() {
      for (const ws of sockets) ws.terminate();
      await Promise.all(ears.map((e) => e.close()));
      await new Promise<void>((r) => wss.close(() => r()));
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
  fake.twiml = streamTwiml(fake.wsUrl);
  return fake;
}
