/**
 * `npm run demo`: whole calls on this machine with nothing installed and no keys. It starts
 * Switchboard on an in-memory embedded database with a local webhook receiver (which also plays
 * the tool server) and the Twilio stand-in (src/sim/twilio.ts) as Twilio's REST API, creates a
 * sandbox assistant, a workflow with a tool node, a global node and a transfer, and a number,
 * then places a simulated inbound call over the Twilio protocol. Then it places two outbound
 * calls (`POST /calls`) through the stand-in: one a person answers, one a voicemail answers. It
 * prints each conversation as it happens, every webhook with its verified signature, and the
 * end-of-call-reports; it writes both directions of the inbound call's audio to `demo-call.wav`.
 * Exits 0 when every call went as expected.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { writeFileSync } from 'node:fs';
import { buildApp } from '../app.js';
import { loadConfig } from '../config.js';
import { createLogger } from '../logger.js';
import { openDb } from '../store/db.js';
import { createStore } from '../store/index.js';
import { wavHeader } from '../audio/wav.js';
import { createRuntime } from '../runtime.js';
import type { SimulatedCall } from '../sim/caller.js';
import { startTwilioStandIn, type StandInCall, type TwilioStandIn } from '../sim/twilio.js';
import { verifyWebhook } from '../webhooks/verify.js';
import { mulawDecode } from '../audio/mulaw.js';
import { freePort } from '../net.js';

const WEBHOOK_SECRET = 'whsec_ZGVtby1zZWNyZXQtZm9yLXRoZS1zd2l0Y2hib2FyZC1kZW1v';
const AUTH_TOKEN = 'demo-twilio-auth-token';
const ACCOUNT_SID = `AC${'d'.repeat(32)}`;
const NUMBER = '+14155550100';
const HUMAN = '+14155550123';
/** Outbound callees on the Twilio stand-in: a person, and a voicemail. */
const ADA = '+14155550142';
const SAM = '+14155550177';

const started = Date.now();
const stamp = () => `${((Date.now() - started) / 1000).toFixed(1).padStart(5)} s`;
const say = (line: string) => process.stdout.write(`[${stamp()}] ${line}\n`);

const readBody = (req: IncomingMessage) =>
  new Promise<Buffer>((resolve) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c)).on('end', () => resolve(Buffer.concat(chunks)));
  });

/** The customer's side: webhooks (verified) and the tool server. */
async function startCustomerSide() {
  const received: { event: string; message: Record<string, any>; verified: boolean }[] = [];
  const server = createServer(async (req: IncomingMessage, res: ServerResponse) => {
    const body = await readBody(req);
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
  return { url, received, close: () => new Promise<void>((r) => server.close(() => r())) };
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
  // left: the caller, right: the assistant
  const header = wavHeader({ sampleRate: 8000, channels: 2, dataBytes: data.length });
  writeFileSync(path, Buffer.concat([header, data]));
  return frames / 8000;
}

/** The outbound calls' assistant: a reminder that speaks first, and leaves a message on a machine. */
const reminderAssistant = {
  name: 'Acme Dental reminders',
  llm_config: { provider: 'sandbox' },
  stt_config: { provider: 'sandbox' },
  tts_config: { provider: 'sandbox', voice_id: 'sandbox' },
  speech_config: { first_message_outbound: 'Hi {{customer.name}}, this is Acme Dental with a reminder of your cleaning on {{appointment}}.' },
  voicemail_detection: true,
  voicemail_message: 'Hi {{customer.name}}, this is Acme Dental: your cleaning is on {{appointment}}. Please call us back if you need to change it.',
};

const reminderDefinition = {
  version: 1,
  entry_node: 'confirm',
  nodes: [
    { id: 'confirm', type: 'conversation', first_line: 'Can you make it?', instructions: 'Find out whether the customer can come.' },
    { id: 'confirmed', type: 'end', first_line: 'Great, see you on {{appointment}}. Goodbye!' },
  ],
  edges: [{ from: 'confirm', to: 'confirmed', description: 'the customer says yes, they can come' }],
};

type Api = (method: 'POST' | 'PATCH' | 'GET', url: string, body?: unknown) => Promise<any>;
type CustomerSide = Awaited<ReturnType<typeof startCustomerSide>>;

/** The end-of-call-report of one call, once the delivery queue has brought it. */
async function reportOf(customer: CustomerSide, callId: string): Promise<Record<string, any>> {
  const find = () => customer.received.find((r) => r.event === 'end-of-call-report' && r.message.call?.id === callId)?.message;
  const deadline = Date.now() + 10_000;
  while (!find() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  const report = find();
  if (!report) throw new Error(`no end-of-call-report arrived for call ${callId}`);
  return report;
}

function printReport(report: Record<string, any>, fields: string[]): void {
  say('end-of-call-report:');
  process.stdout.write(`${JSON.stringify(Object.fromEntries(fields.map((f) => [f, report[f]])), null, 2)}\n`);
}

/**
 * Prints a stand-in call's conversation as it happens: what the callee hears (the assistant's
 * lines) and what it says or plays. Returns a function that prints what is left and stops.
 */
function narrate(call: StandInCall, callee: string): () => void {
  const printed = new Map<object, number>();
  const flush = () => {
    for (const leg of call.legs) {
      const spoken = leg.spoken.filter((l) => l.text && l.startedAt > 0);
      const events = [
        ...leg.heard.map((h) => ({ at: h.at, line: `assistant: ${h.text}` })),
        ...spoken.map((l) => ({ at: l.startedAt, line: `${`${callee}:`.padEnd(10)} ${l.text}` })),
      ].sort((a, b) => a.at - b.at);
      for (let i = printed.get(leg) ?? 0; i < events.length; i++) say(events[i]!.line);
      printed.set(leg, events.length);
    }
  };
  const timer = setInterval(flush, 100);
  return () => {
    clearInterval(timer);
    flush();
  };
}

/** The inbound call: booking, then the global "speak to a human" node and the transfer. */
async function inboundCall(o: { api: Api; customer: CustomerSide; twilio: TwilioStandIn; baseUrl: string }, problems: string[]): Promise<SimulatedCall> {
  const { api, customer } = o;
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

  const call = o.twilio.inbound({ baseUrl: o.baseUrl, to: NUMBER, recordAudio: true });
  const outcome = await call.dial();
  if (outcome.kind !== 'connected') throw new Error('the call was rejected');
  const callId = outcome.callId;

  let printed = 0;
  let node: string | null = null;
  const watch = setInterval(() => {
    for (; printed < call.heard.length; printed++) say(`assistant: ${call.heard[printed]!.text}`);
    void api('GET', `/calls/${callId}`).then(({ call: c }) => {
      if (c.current_node && c.current_node !== node) {
        node = c.current_node;
        say(`  (current node: ${node})`);
      }
    }, () => undefined);
  }, 100);
  const caller = async (line: string) => {
    await call.quiet();
    say(`caller:    ${line}`);
    await call.say(line);
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

  const report = await reportOf(customer, callId);
  printReport(report, ['ended_reason', 'duration_seconds', 'nodes_visited', 'assistant_id', 'workflow_id', 'transcript']);
  const seconds = writeWav('demo-call.wav', call.inboundAudio, call.heardAudio);
  say(`wrote demo-call.wav (${seconds.toFixed(1)} s, stereo: left the caller, right the assistant)`);

  const before = problems.length;
  if (report.ended_reason !== 'call-transferred') problems.push(`ended_reason is ${report.ended_reason}, expected call-transferred`);
  const visited = (report.nodes_visited as string[]).join(' → ');
  if (visited !== 'greeting → find_slot → offer → human → front_desk') problems.push(`nodes visited: ${visited}`);
  if (!customer.received.some((r) => r.event === 'tool-calls')) problems.push('the tool was not called');
  if (!o.twilio.call(call.callSid)?.dialed.includes(HUMAN)) problems.push('no transfer reached Twilio');
  if (problems.length === before) say(`the inbound call went as expected: ${visited}, transferred to ${HUMAN}`);
  return call;
}

/** Two outbound calls through the Twilio stand-in: a person confirms, a voicemail takes a message. */
async function outboundCalls(o: { api: Api; customer: CustomerSide; twilio: TwilioStandIn }, problems: string[]): Promise<void> {
  const { api, customer, twilio } = o;
  const { assistant } = await api('POST', '/assistants', reminderAssistant);
  const { workflow } = await api('POST', '/workflows', { name: 'Reminder', definition: reminderDefinition });
  const { numbers } = await api('GET', '/numbers');
  const numberId = (numbers as Array<{ id: string; number: string }>).find((n) => n.number === NUMBER)!.id;
  say(`created assistant ${assistant.id} (voicemail detection on) and workflow ${workflow.id} for reminders`);
  const place = async (customerNumber: string, name: string) => {
    const { call } = await api('POST', '/calls', {
      number_id: numberId,
      assistant_id: assistant.id,
      workflow_id: workflow.id,
      customer: { number: customerNumber, name },
      variables: { appointment: 'Tuesday at 10' },
    });
    const placed = await twilio.waitForCall(customerNumber, 15_000);
    say(`POST /calls: call ${call.id} ${call.status}; Twilio stand-in dials ${customerNumber} (${placed.sid}) from ${NUMBER}`);
    return { callId: call.id as string, placed };
  };

  // a person answers, hears the reminder, and confirms
  say(`placing an outbound call to ${ADA} (Ada, a person)…`);
  twilio.setCallee(ADA, { kind: 'person' });
  const ada = await place(ADA, 'Ada');
  const adaLeg = await ada.placed.waitForLeg(20_000);
  const stopAda = narrate(ada.placed, 'callee');
  try {
    await adaLeg.hear('Can you make it');
    await adaLeg.quiet();
    await adaLeg.say('Yes, I can come.');
    await adaLeg.hear('Goodbye');
    await ada.placed.ended(20_000);
  } finally {
    await new Promise((r) => setTimeout(r, 300));
    stopAda();
  }
  const adaReport = await reportOf(customer, ada.callId);
  printReport(adaReport, ['ended_reason', 'answered_by', 'duration_seconds', 'nodes_visited', 'transcript']);
  const before = problems.length;
  if (adaReport.ended_reason !== 'assistant-ended-call') problems.push(`outbound call to Ada: ended_reason is ${adaReport.ended_reason}, expected assistant-ended-call`);
  if ((adaReport.nodes_visited as string[]).join(' → ') !== 'confirm → confirmed') problems.push(`outbound call to Ada: nodes visited ${adaReport.nodes_visited}`);
  if (!adaLeg.heard.some((h) => h.text.includes('Hi Ada') && h.text.includes('Tuesday at 10'))) problems.push('Ada did not hear the reminder');

  // a voicemail answers: its greeting, the beep, then the assistant's message on the recording
  say(`placing an outbound call to ${SAM} (Sam, a voicemail)…`);
  twilio.setCallee(SAM, { kind: 'voicemail' });
  const sam = await place(SAM, 'Sam');
  await sam.placed.waitForLeg(20_000);
  const stopSam = narrate(sam.placed, 'voicemail');
  try {
    await sam.placed.ended(30_000);
  } finally {
    await new Promise((r) => setTimeout(r, 300));
    stopSam();
  }
  const recorded = sam.placed.voicemail?.recorded.map((l) => l.text).join(' ') ?? '';
  say(`the voicemail recorded after the beep: "${recorded}"`);
  const samReport = await reportOf(customer, sam.callId);
  printReport(samReport, ['ended_reason', 'answered_by', 'duration_seconds', 'transcript']);
  if (samReport.ended_reason !== 'voicemail') problems.push(`outbound call to Sam: ended_reason is ${samReport.ended_reason}, expected voicemail`);
  if (samReport.answered_by !== 'machine') problems.push(`outbound call to Sam: answered_by is ${samReport.answered_by}, expected machine`);
  if (!/call us back/i.test(recorded)) problems.push('the voicemail did not record the message');
  if (problems.length === before) say(`the outbound calls went as expected: Ada confirmed (answered_by ${adaReport.answered_by}), Sam's voicemail has the message`);
}

async function main(): Promise<number> {
  const customer = await startCustomerSide();
  // Twilio's part: its REST API (transfers, outbound calls) and the callees of outbound calls
  const twilio = await startTwilioStandIn({ accounts: { [ACCOUNT_SID]: AUTH_TOKEN } });
  const port = await freePort();
  const config = loadConfig({
    ...process.env,
    PORT: String(port),
    HOST: '127.0.0.1',
    PUBLIC_URL: `http://127.0.0.1:${port}`,
    DATABASE_URL: '',
    REDIS_URL: '',
    LOG_LEVEL: process.env.LOG_LEVEL ?? 'silent',
    WEBHOOK_ALLOW_PRIVATE: 'true',
    TWILIO_API_BASE: twilio.url,
  });
  const logger = createLogger(config.LOG_LEVEL);
  const db = await openDb({ dataDir: null });
  const store = createStore(db);
  const runtime = await createRuntime({ config, store, logger });
  const app = await buildApp({ config, store, logger, runtime });
  await app.listen({ port, host: '127.0.0.1' });
  const { key } = await store.keys.createKey('Demo');
  say(`Switchboard is serving on http://127.0.0.1:${port} (embedded database, sandbox providers, Twilio stand-in at ${twilio.url})`);

  const api: Api = async (method, url, body) => {
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
    const problems: string[] = [];
    call = await inboundCall({ api, customer, twilio, baseUrl: `http://127.0.0.1:${port}` }, problems);
    await outboundCalls({ api, customer, twilio }, problems);
    if (!customer.received.every((r) => r.verified)) problems.push('a webhook signature did not verify');
    if (problems.length > 0) {
      say(`the calls did not go as expected:\n  - ${problems.join('\n  - ')}`);
      return 1;
    }
    say(`every call went as expected: ${customer.received.length} webhooks, all verified`);
    return 0;
  } catch (err) {
    say(`demo failed: ${(err as Error).message}`);
    return 1;
  } finally {
    await call?.close();
    await runtime.close(0);
    await app.close();
    await twilio.close();
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
