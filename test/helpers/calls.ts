/**
 * A calling server for end-to-end tests: the real app with its runtime on a real port, an
 * organization with Twilio credentials, a webhook receiver, and a fake Twilio REST API.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import type { DestinationStream } from 'pino';
import { buildApp } from '../../src/app.js';
import { loadConfig, type Config } from '../../src/config.js';
import { createLogger } from '../../src/logger.js';
import { createStore, type Store } from '../../src/store/index.js';
import { createRuntime, type Runtime, type RuntimeOptions } from '../../src/runtime.js';
import { SimulatedCall, type CallOutcome } from '../../src/sim/caller.js';
import type { LegCaller } from '../../src/sim/leg-caller.js';
import { startTwilioStandIn, type TwilioStandIn, type TwilioStandInOptions } from '../../src/sim/twilio.js';
import { createPgliteCopy, createTestDb, defaultDbKind, type TestDb } from './db.js';
import { startReceiver, type Receiver, type ReceiverScript } from './receiver.js';
import { freePort } from '../../src/net.js';

export const AUTH_TOKEN = 'test-auth-token-0123456789';
export const ACCOUNT_SID = `AC${'a'.repeat(32)}`;

/**
 * Twilio's REST API for the tests: the Twilio stand-in (src/sim/twilio.ts) with the test account.
 * `requests` keeps every request (`path`, `form`); updates for the inbound calls that tests place
 * straight at the voice webhook are taken as for calls in progress (200), as the fake did.
 */
export type FakeTwilioRest = TwilioStandIn;

export async function startFakeTwilioRest(options: TwilioStandInOptions = {}): Promise<FakeTwilioRest> {
  return startTwilioStandIn({ accounts: { [ACCOUNT_SID]: AUTH_TOKEN }, adoptUnknownCalls: true, ...options });
}

export interface CallingServer {
  app: FastifyInstance;
  store: Store;
  runtime: Runtime;
  config: Config;
  baseUrl: string;
  key: string;
  orgId: string;
  receiver: Receiver;
  twilio: FakeTwilioRest;
  api(method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, body?: unknown): Promise<{ status: number; json: any }>;
  /** A new assistant (a sandbox one by default): its id. */
  createAssistant(body?: Record<string, unknown>): Promise<string>;
  /** A new workflow with this definition: its id. */
  createWorkflow(definition: unknown, name?: string): Promise<string>;
  /** A number wired to a new sandbox assistant (and optionally a workflow). */
  setUpNumber(options?: { assistant?: Record<string, unknown>; definition?: unknown; number?: string; provider?: string }): Promise<{
    number: string;
    numberId: string;
    assistantId: string;
    workflowId: string | null;
  }>;
  caller(to: string, options?: { recordAudio?: boolean }): SimulatedCall;
  close(): Promise<void>;
}

let numberSeq = 0;

export const sandboxAssistant = (extra: Record<string, unknown> = {}) => ({
  name: 'Sandbox receptionist',
  llm_config: { provider: 'sandbox' },
  stt_config: { provider: 'sandbox' },
  tts_config: { provider: 'sandbox', voice_id: 'sandbox' },
  ...extra,
});

/** An assistant on the sandbox speech-to-speech provider (a realtime call). */
export const realtimeSandboxAssistant = (extra: Record<string, unknown> = {}) => ({
  name: 'Realtime receptionist',
  llm_config: { provider: 'sandbox-realtime' },
  ...extra,
});

/** `speech_config.silence` with up to three reminders: the first after 1 s of silence, the next ones every 3 s. */
export const silenceReminders = (maxAttempts: number) => ({
  messages: ['Are you still there?', 'Hello, can you hear me?', 'Is anybody there?'].slice(0, maxAttempts),
  final_message: 'I will hang up now, goodbye.',
  first_check_seconds: 1,
  interval_seconds: 3,
  max_attempts: maxAttempts,
});

/** Both kinds of call, for the tests that each must pass alike (`describe.each(callKinds)`). */
export const callKinds = [
  { kind: 'pipeline', assistant: sandboxAssistant },
  { kind: 'realtime', assistant: realtimeSandboxAssistant },
];

export async function startCallingServer(
  env: Record<string, string> = {},
  runtimeOptions: Pick<RuntimeOptions, 'mediaLiveness' | 'emails' | 'sip' | 'outbox' | 'reconciler' | 'sweep'> = {},
  /** `logTo`: the server's log lines go there (at `logLevel`, default LOG_LEVEL) instead of stdout. */
  logging: { logTo?: DestinationStream; logLevel?: string } = {},
  /** The database to run on (the outage tests' own, behind a proxy they cut); default a fresh one. */
  database?: TestDb,
): Promise<CallingServer> {
  // on the embedded default, a copy of a migrated database folder: as a server's DATA_DIR, and quick
  const testDb: TestDb = database ?? (defaultDbKind() === 'pglite' ? await createPgliteCopy() : await createTestDb('postgres'));
  // recordings (and anything else kept on disk) go to a folder of this server's own
  const dataDir = await mkdtemp(join(tmpdir(), 'sb-calls-'));
  const store = createStore(testDb.db);
  const twilio = await startFakeTwilioRest();
  const receiver = await startReceiver();
  const port = await freePort();
  // `REDIS_URL: ''` runs the server on the embedded default even where the suite has Redis
  const settings: Record<string, string> = {
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
    WEBHOOK_ALLOW_PRIVATE: 'true',
    PORT: String(port),
    TWILIO_API_BASE: twilio.url,
    RATE_LIMIT_PER_MINUTE: '0',
    DATA_DIR: dataDir,
    ...(process.env.REDIS_URL ? { REDIS_URL: process.env.REDIS_URL } : {}),
    ...env,
  };
  if (settings.REDIS_URL === '') delete settings.REDIS_URL;
  const config = loadConfig(settings);
  const logger = createLogger(logging.logLevel ?? config.LOG_LEVEL, logging.logTo);
  const runtime = await createRuntime({ config, store, logger, webhookQueueName: `test-${port}-${Date.now()}`, dialQueueName: `test-dial-${port}-${Date.now()}`, ...runtimeOptions });
  const app = await buildApp({ config, store, logger, runtime });
  await app.listen({ port, host: '127.0.0.1' });
  const baseUrl = `http://127.0.0.1:${port}`;
  const { key, organization } = await store.keys.createKey(`Calls ${port}`);

  const api: CallingServer['api'] = async (method, url, body) => {
    const res = await app.inject({
      method,
      url,
      headers: { authorization: `Bearer ${key}` },
      ...(body === undefined ? {} : { payload: body as Record<string, unknown> }),
    });
    return { status: res.statusCode, json: res.body ? res.json() : null };
  };
  const account = await api('PATCH', '/account', {
    webhook: { url: receiver.url, secret: 'whsec_dGVzdC1zZWNyZXQtdGVzdC1zZWNyZXQtdGVzdA==' },
    telephony: { twilio: { account_sid: ACCOUNT_SID, auth_token: AUTH_TOKEN } },
  });
  if (account.status !== 200) throw new Error(`account set-up failed: ${JSON.stringify(account.json)}`);

  const callers: SimulatedCall[] = [];
  const createAssistant: CallingServer['createAssistant'] = async (body = sandboxAssistant()) => {
    const assistant = await api('POST', '/assistants', body);
    if (assistant.status !== 201) throw new Error(`assistant: ${JSON.stringify(assistant.json)}`);
    return assistant.json.assistant.id as string;
  };
  const createWorkflow: CallingServer['createWorkflow'] = async (definition, name = 'Test flow') => {
    const wf = await api('POST', '/workflows', { name, definition });
    if (wf.status !== 201) throw new Error(`workflow: ${JSON.stringify(wf.json)}`);
    return wf.json.workflow.id as string;
  };
  return {
    app,
    store,
    runtime,
    config,
    baseUrl,
    key,
    orgId: organization.id,
    receiver,
    twilio,
    api,
    createAssistant,
    createWorkflow,
    async setUpNumber(options = {}) {
      const assistantId = await createAssistant(options.assistant);
      const workflowId = options.definition ? await createWorkflow(options.definition) : null;
      const number = options.number ?? `+1555${String(port % 1000).padStart(3, '0')}${String(++numberSeq).padStart(4, '0')}`;
      const n = await api('POST', '/numbers', {
        number,
        ...(options.provider ? { provider: options.provider } : {}),
        assistant_id: assistantId,
        ...(workflowId ? { workflow_id: workflowId } : {}),
      });
      if (n.status !== 201) throw new Error(`number: ${JSON.stringify(n.json)}`);
      return { number, numberId: n.json.number.id, assistantId, workflowId };
    },
    caller(to: string, options: { recordAudio?: boolean } = {}) {
      const c = new SimulatedCall({ baseUrl, to, authToken: AUTH_TOKEN, accountSid: ACCOUNT_SID, ...options });
      callers.push(c);
      return c;
    },
    async close() {
      for (const c of callers) await c.close().catch(() => undefined);
      await runtime.close(0);
      await app.close();
      await receiver.close();
      await twilio.close();
      await testDb.drop();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

/** Webhook bodies the receiver got, parsed, optionally of one event type. */
/** The id of a call that was put through; a rejected call fails the test, with its TwiML. */
export const callIdOf = (outcome: CallOutcome): string => {
  if (outcome.kind !== 'connected') throw new Error(`the call was rejected: ${outcome.twiml}`);
  return outcome.callId;
};

/**
 * Polls `probe` (every `pollMs`) until it gives something truthy, and returns that; fails after
 * `timeoutMs` naming `what` it waited for.
 */
export async function eventually<T>(
  what: string,
  probe: () => T | undefined | null | false | Promise<T | undefined | null | false>,
  timeoutMs = 15_000,
  pollMs = 50,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, pollMs));
  }
}

export function receivedMessages(receiver: Receiver, type?: string): any[] {
  return receiver.requests
    .map((r) => {
      try {
        return JSON.parse(r.body).message;
      } catch {
        return null;
      }
    })
    .filter((m) => m && (!type || m.type === type));
}

/**
 * A small front-desk workflow: greeting → booking (with an edge message) → goodbye. With
 * `goodbyeFromGreeting`, a caller who is finished can also go from the greeting straight to the end.
 */
export function frontDeskWorkflow(options: { goodbyeFromGreeting?: boolean } = {}) {
  const goodbye = { to: 'bye', description: 'the caller says goodbye or is finished' };
  return {
    version: 1,
    entry_node: 'greeting',
    global_prompt: 'You are the front desk of Acme Dental.',
    nodes: [
      { id: 'greeting', type: 'conversation', first_line: 'Hello, this is Acme Dental.', instructions: 'Find out what the caller needs.' },
      { id: 'booking', type: 'conversation', first_line: 'Let us book your appointment.', instructions: 'Book it.' },
      { id: 'bye', type: 'end', first_line: 'Thank you for calling, goodbye.' },
    ],
    edges: [
      { from: 'greeting', to: 'booking', description: 'the caller wants to book an appointment', message: 'Sure thing.' },
      ...(options.goodbyeFromGreeting ? [{ from: 'greeting', ...goodbye }] : []),
      { from: 'booking', ...goodbye },
    ],
  };
}

/** A receiver answer: every `tool-calls` request gets `result`, every other webhook a bare 200. */
export const toolResultAnswer = (result: unknown): ReceiverScript => (req) => {
  const message = JSON.parse(req.body).message;
  if (message?.type !== 'tool-calls') return { status: 200, body: '' };
  return { status: 200, body: { results: [{ tool_call_id: message.tool_calls[0].id, result }] } };
};

/** An order desk's first two nodes: the greeting, then a tool node looking order A1 up at `toolUrl`. */
export const orderLookupNodes = (toolUrl: string) => [
  { id: 'greeting', type: 'conversation', first_line: 'Hello, this is Acme orders.' },
  { id: 'lookup', type: 'tool', first_line: 'One moment please.', tool_name: 'lookup_order', url: toolUrl, arguments: { order: 'A1' } },
];

/**
 * A greeting of five sentences (about eight seconds of the sandbox voice), for a caller to cut
 * in: the sentences after the cut are never heard. An end node for the goodbye.
 */
export const longGreeting = {
  version: 1,
  entry_node: 'greeting',
  nodes: [
    {
      id: 'greeting',
      type: 'conversation',
      first_line:
        'Let me tell you everything about our practice. We have three dentists on staff. We are open every weekday. We take most insurance plans. Parking is free for patients.',
      instructions: 'Help the caller.',
    },
    { id: 'bye', type: 'end', first_line: 'Goodbye.' },
  ],
  edges: [{ from: 'greeting', to: 'bye', description: 'the caller says goodbye' }],
};

/** The front-desk workflow as most call tests use it (no goodbye from the greeting). */
export const frontDesk = frontDeskWorkflow();

/** On a front-desk call (`frontDeskWorkflow`): the greeting heard, a booking asked for, the booking node's first line heard. */
export async function intoBooking(call: LegCaller): Promise<void> {
  await call.hear('Acme Dental');
  await call.quiet();
  await call.say('I would like to book an appointment please.');
  await call.hear('book your appointment');
}

/**
 * A front-desk call walked to its end: the greeting, a booking (the edge's "Sure thing", the
 * booking node's line), the goodbye, and the assistant's hang-up.
 */
export async function throughFrontDesk(call: LegCaller, endedTimeoutMs?: number): Promise<void> {
  await call.hear('Acme Dental');
  await call.quiet();
  await call.say('I would like to book an appointment please.');
  await call.hear('Sure thing');
  await call.hear('book your appointment');
  await call.quiet();
  await call.say('That is all, I am finished, goodbye.');
  await call.hear('goodbye');
  await call.ended(endedTimeoutMs);
}

/** A greeting that hands the caller to a human agent on request (a transfer node). */
export const transferFlow = {
  version: 1,
  entry_node: 'greeting',
  nodes: [
    { id: 'greeting', type: 'conversation', first_line: 'Hello, this is Acme support.', instructions: 'Help the caller.' },
    { id: 'agent', type: 'transfer', first_line: 'Connecting you to an agent now.', destination: '+14155550123' },
  ],
  edges: [{ from: 'greeting', to: 'agent', description: 'the caller wants to speak to a human agent', message: 'Of course.' }],
};
