/**
 * `npm run demo`: a whole call on this machine with nothing installed and no keys. It starts
 * Switchboard on an in-memory embedded database with a local webhook receiver (which also plays
 * the tool server and Twilio's REST API), creates a sandbox assistant, a workflow with a tool
 * node, a global node and a transfer, and a number, then places a simulated inbound call over the
 * Twilio protocol. It prints the conversation as it happens, every webhook with its verified
 * signature, and the end-of-call-report; it writes both directions of the call's audio to
 * `demo-call.wav`. Exits 0 when the call went as expected.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { writeFileSync } from 'node:fs';
import { buildApp } from '../app.js';
import { loadConfig } from '../config.js';
import { createLogger } from '../logger.js';
import { openDb } from '../store/db.js';
import { createStore } from '../store/index.js';
import { createRuntime } from '../runtime.js';
import { SimulatedCall } from '../sim/caller.js';
import { verifyWebhook } from '../webhooks/verify.js';
import { mulawDecode } from '../audio/mulaw.js';
import { freePort } from '../net.js';

const WEBHOOK_SECRET = 'whsec_ZGVtby1zZWNyZXQtZm9yLXRoZS1zd2l0Y2hib2FyZC1kZW1v';
const AUTH_TOKEN = 'demo-twilio-auth-token';
const ACCOUNT_SID = `AC${'d'.repeat(32)}`;
const NUMBER = '+14155550100';
const HUMAN = '+14155550123';

const started = Date.now();
const stamp = () => `${((Date.now() - started) / 1000).toFixed(1).padStart(5)} s`;
const say = (line: string) => process.stdout.write(`[${stamp()}] ${line}\n`);

const readBody = (req: IncomingMessage) =>
  new Promise<Buffer>((resolve) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c)).on('end', () => resolve(Buffer.concat(chunks)));
  });

/** The customer's side: webhooks (verified), the tool server, and Twilio's REST API. */
async function startCustomerSide() {
  const received: { event: string; message: Record<string, any>; verified: boolean }[] = [];
  const twilioRequests: string[] = [];
  const server = createServer(async (req: IncomingMessage, res: ServerResponse) => {
    const body = await readBody(req);
    if (req.url?.startsWith('/2010-04-01/')) {
      twilioRequests.push(new URLSearchParams(body.toString()).get('Twiml') ?? body.toString());
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"in-progress"}');
      return;
    }
    let verified = false;
    let message: Record<string, any> = {};
    try {
      message = (verifyWebhook(body, req.headers, WEBHOOK_SECRET).payload as { message: Record<string, any> }).message;
      verified = true;
    } catch (err) {
      message = JSON.parse(body.toString()).message ?? {};
      say(`webhook signature NOT verified: ${(err as Error).message}`);
    }
    received.push({ event: String(message.type), message, verified });
    const detail =
      message.type === 'status-update'
        ? `${message.status}${message.ended_reason ? ` (${message.ended_reason})` : ''}`
        : message.type === 'tool-calls'
          ? message.tool_calls.map((c: { name: string; arguments: unknown }) => `${c.name}(${JSON.stringify(c.arguments)})`).join(', ')
          : '';
    say(`  webhook ${message.type} ${detail} — signature ${verified ? 'verified ✓' : 'INVALID ✗'}`);
    if (message.type === 'tool-calls') {
      const results = message.tool_calls.map((c: { id: string }) => ({
        tool_call_id: c.id,
        result: { slot: 'Tuesday at 10:00', dentist: 'Dr. Rivera' },
      }));
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ results }));
      return;
    }
    res.writeHead(204).end();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { url, received, twilioRequests, close: () => new Promise<void>((r) => server.close(() => r())) };
}

const definition = (toolUrl: string) => ({
  version: 1,
  entry_node: 'greeting',
  global_prompt: 'You are the receptionist of Acme Dental. Be brief and friendly.',
  nodes: [
    {
      id: 'greeting',
      type: 'conversation',
      first_line: 'Hello, you have reached Acme Dental. How can I help you today?',
      instructions: 'Find out what the caller needs.',
    },
    { id: 'find_slot', type: 'tool', tool_name: 'find_slot', url: toolUrl, arguments: { service: 'cleaning' } },
    {
      id: 'offer',
      type: 'conversation',
      first_line: 'I found a free slot on Tuesday at ten with Doctor Rivera. Shall I book it?',
      instructions: 'Offer the slot the tool found.',
    },
    { id: 'booked', type: 'end', first_line: 'You are booked. See you on Tuesday, goodbye!' },
    {
      id: 'human',
      type: 'conversation',
      global: true,
      global_description: 'the caller asks to speak to a human person or the front desk',
      first_line: 'Of course, I can put you through to the front desk. Shall I do that?',
    },
    { id: 'front_desk', type: 'transfer', destination: HUMAN, first_line: 'Transferring you now.' },
  ],
  edges: [
    { from: 'greeting', to: 'find_slot', description: 'the caller wants to book an appointment', message: 'Let me check our calendar.' },
    { from: 'find_slot', to: 'offer' },
    { from: 'offer', to: 'booked', description: 'the caller accepts the slot and says yes' },
    { from: 'human', to: 'front_desk', description: 'the caller agrees, says yes or please' },
  ],
});

function writeWav(path: string, callerSide: Buffer[], assistantSide: Buffer[]): number {
  const left = mulawDecode(Buffer.concat(callerSide));
  const right = mulawDecode(Buffer.concat(assistantSide));
  const frames = Math.max(left.length, right.length);
  const data = Buffer.alloc(frames * 4);
  for (let i = 0; i < frames; i++) {
    data.writeInt16LE(left[i] ?? 0, i * 4);
    data.writeInt16LE(right[i] ?? 0, i * 4 + 2);
  }
  const header = Buffer.alloc(44);
  header.write('RIFF', 0);
  header.writeUInt32LE(36 + data.length, 4);
  header.write('WAVEfmt ', 8);
  header.writeUInt32LE(16, 16);
  header.writeUInt16LE(1, 20); // PCM
  header.writeUInt16LE(2, 22); // left: caller, right: assistant
  header.writeUInt32LE(8000, 24);
  header.writeUInt32LE(8000 * 4, 28);
  header.writeUInt16LE(4, 32);
  header.writeUInt16LE(16, 34);
  header.write('data', 36);
  header.writeUInt32LE(data.length, 40);
  writeFileSync(path, Buffer.concat([header, data]));
  return frames / 8000;
}

async function main(): Promise<number> {
  const customer = await startCustomerSide();
  const port = await freePort();
  const config = loadConfig({
    ...process.env,
    PORT: String(port),
    HOST: '127.0.0.1',
    DATABASE_URL: '',
    REDIS_URL: '',
    LOG_LEVEL: process.env.LOG_LEVEL ?? 'silent',
    WEBHOOK_ALLOW_PRIVATE: 'true',
    TWILIO_API_BASE: customer.url,
  });
  const logger = createLogger(config.LOG_LEVEL);
  const db = await openDb({ dataDir: null });
  const store = createStore(db);
  const runtime = await createRuntime({ config, store, logger });
  const app = await buildApp({ config, store, logger, runtime });
  await app.listen({ port, host: '127.0.0.1' });
  const { key } = await store.keys.createKey('Demo');
  say(`Switchboard is serving on http://127.0.0.1:${port} (embedded database, sandbox providers)`);

  const api = async (method: 'POST' | 'PATCH' | 'GET', url: string, body?: unknown) => {
    const res = await app.inject({ method, url, headers: { authorization: `Bearer ${key}` }, ...(body ? { payload: body as object } : {}) });
    if (res.statusCode >= 300) throw new Error(`${method} ${url} answered ${res.statusCode}: ${res.body}`);
    return res.json();
  };
  let call: SimulatedCall | null = null;
  try {
    await api('PATCH', '/account', {
      webhook: { url: `${customer.url}/webhooks`, secret: WEBHOOK_SECRET },
      telephony: { twilio: { account_sid: ACCOUNT_SID, auth_token: AUTH_TOKEN } },
    });
    const { assistant } = await api('POST', '/assistants', {
      name: 'Acme Dental receptionist',
      llm_config: { provider: 'sandbox' },
      stt_config: { provider: 'sandbox' },
      tts_config: { provider: 'sandbox', voice_id: 'sandbox' },
    });
    const { workflow } = await api('POST', '/workflows', { name: 'Front desk', definition: definition(`${customer.url}/tools`) });
    await api('POST', '/numbers', { number: NUMBER, name: 'Acme Dental', assistant_id: assistant.id, workflow_id: workflow.id });
    say(`created assistant ${assistant.id}, workflow ${workflow.id} (6 nodes), number ${NUMBER}`);
    say('placing a simulated call over the Twilio protocol…');

    call = new SimulatedCall({ baseUrl: `http://127.0.0.1:${port}`, to: NUMBER, authToken: AUTH_TOKEN, accountSid: ACCOUNT_SID, recordAudio: true });
    const outcome = await call.dial();
    if (outcome.kind !== 'connected') throw new Error('the call was rejected');
    const callId = outcome.callId;

    let printed = 0;
    let node: string | null = null;
    const watch = setInterval(() => {
      for (; call && printed < call.heard.length; printed++) say(`assistant: ${call.heard[printed]!.text}`);
      void api('GET', `/calls/${callId}`).then(({ call: c }) => {
        if (c.current_node && c.current_node !== node) {
          node = c.current_node;
          say(`  (current node: ${node})`);
        }
      }, () => undefined);
    }, 100);
    const caller = async (line: string) => {
      await call!.quiet();
      say(`caller:    ${line}`);
      await call!.say(line);
    };
    try {
      await call.hear('How can I help');
      await caller('Hi, I would like to book an appointment please.');
      await call.hear('Shall I book it');
      await caller('Actually, can I speak to a human person at the front desk?');
      await call.hear('Shall I do that');
      await caller('Yes please.');
      await call.hear('Transferring you now');
      await call.ended(30_000);
    } finally {
      await new Promise((r) => setTimeout(r, 300));
      clearInterval(watch);
      for (; printed < call.heard.length; printed++) say(`assistant: ${call.heard[printed]!.text}`);
    }

    // the report and the last status come through the delivery queue
    const deadline = Date.now() + 10_000;
    while (!customer.received.some((r) => r.event === 'end-of-call-report') && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
    }
    const report = customer.received.find((r) => r.event === 'end-of-call-report')?.message;
    if (!report) throw new Error('no end-of-call-report arrived');
    say('end-of-call-report:');
    process.stdout.write(
      `${JSON.stringify(
        {
          ended_reason: report.ended_reason,
          duration_seconds: report.duration_seconds,
          nodes_visited: report.nodes_visited,
          assistant_id: report.assistant_id,
          workflow_id: report.workflow_id,
          transcript: report.transcript,
        },
        null,
        2,
      )}\n`,
    );
    const seconds = writeWav('demo-call.wav', call.inboundAudio, call.heardAudio);
    say(`wrote demo-call.wav (${seconds.toFixed(1)} s, stereo: left the caller, right the assistant)`);

    const problems: string[] = [];
    if (report.ended_reason !== 'call-transferred') problems.push(`ended_reason is ${report.ended_reason}, expected call-transferred`);
    const visited = (report.nodes_visited as string[]).join(' → ');
    if (visited !== 'greeting → find_slot → offer → human → front_desk') problems.push(`nodes visited: ${visited}`);
    if (!customer.received.every((r) => r.verified)) problems.push('a webhook signature did not verify');
    if (!customer.received.some((r) => r.event === 'tool-calls')) problems.push('the tool was not called');
    if (!customer.twilioRequests.some((t) => t.includes(`<Dial`) && t.includes(HUMAN))) problems.push('no transfer reached Twilio');
    if (problems.length > 0) {
      say(`the call did not go as expected:\n  - ${problems.join('\n  - ')}`);
      return 1;
    }
    say(`the call went as expected: ${visited}, transferred to ${HUMAN}, ${customer.received.length} webhooks, all verified`);
    return 0;
  } catch (err) {
    say(`demo failed: ${(err as Error).message}`);
    return 1;
  } finally {
    await call?.close();
    await runtime.close(0);
    await app.close();
    await db.close();
    await customer.close();
  }
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`demo: ${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  },
);
