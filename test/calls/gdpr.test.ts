/**
 * `gdpr_mode` end to end (DECISIONS 13): after the call nothing of the conversation is kept or
 * sent — not in the webhooks after its end (status-update `ended`, end-of-call-report), the call
 * session (in process or Redis), the call log (every SQL table, GET /calls/{id}, GET /calls), the
 * attempt logs, the notification e-mail, nor in the server's log at trace level — while the
 * structured data is still extracted from the transcript first, and kept.
 *
 * Each call says its own distinctive phrases: the caller's, the assistant's (a scripted model on
 * a fake OpenAI), an assistant tool's arguments (the caller's words) and result, and a tool node's
 * result. A control call without gdpr_mode runs alongside, with phrases of its own that must show
 * up where the gdpr call's must not, so that every grep here could fail. With REDIS_URL every key
 * of the sessions and queues in Redis is grepped too.
 */
import { Writable } from 'node:stream';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RuntimeOptions } from '../../src/runtime.js';
import { newCallRecord, type CallRecord } from '../../src/calls/store.js';
import { GDPR_CENSOR } from '../../src/logger.js';
import { callIdOf, eventually, realtimeSandboxAssistant, receivedMessages, sandboxAssistant, startCallingServer, type CallingServer } from '../helpers/calls.js';
import { startFakeOpenAiChat, type FakeOpenAiChat } from '../fakes/openai-chat.js';
import { dropEmailQueues, startSmtpInbox, type SmtpInbox } from '../emails/smtp-inbox.js';

/**
 * A call's phrases: what the caller says, what the model answers, the assistant tool's result (its
 * arguments are the caller's phrase), the tool node's result; `words`: the second word of each, to
 * grep for case-insensitively.
 */
interface Phrases {
  caller: string;
  assistant: string;
  tool: string;
  node: string;
  words: RegExp;
}

function phraseSet(caller: string, assistant: string, tool: string, node: string): Phrases {
  const words = [caller, assistant, tool, node].map((p) => p.split(' ')[1]!.toLowerCase());
  return { caller, assistant, tool, node, words: new RegExp(words.join('|'), 'i') };
}

const GDPR = phraseSet('PURPLE ELEPHANT 4417', 'CRIMSON GIRAFFE 9053', 'AMBER HARBOUR 3302', 'INDIGO LANTERN 2208');
const CONTROL = phraseSet('TEAL WALRUS 5521', 'OCHRE PELICAN 6630', 'SCARLET MEADOW 7781', 'SILVER QUARRY 8814');

const phrasesOf = (p: Phrases) => [p.caller, p.assistant, p.tool, p.node];

/** Where a text holds any of the phrases (or their words): the list is empty when it holds none. */
function found(text: string, p: Phrases): string[] {
  const hits = phrasesOf(p).filter((phrase) => text.includes(phrase));
  const word = p.words.exec(text);
  if (word) hits.push(`…${text.slice(Math.max(0, word.index - 120), word.index + 60)}…`);
  return hits;
}

const json = (value: unknown) => JSON.stringify(value);

/** The structured data the scripted model extracts: whether the transcript it was given held the caller's phrase. */
const STRUCTURED_SCHEMA = {
  type: 'object',
  properties: { topic: { type: 'string' }, code_word_given: { type: 'boolean' } },
  required: ['topic', 'code_word_given'],
};
const analysisPlan = { structured_data_plan: { enabled: true, schema: STRUCTURED_SCHEMA }, min_messages_threshold: 2 };

const NOTE_CODE = {
  name: 'note_code',
  description: 'Notes the code word the caller gives.',
  parameters: { type: 'object', properties: { code: { type: 'string' } }, required: ['code'] },
};

/** greeting (an assistant tool) → lookup (a tool node) → bye. */
function orderDesk(toolUrl: string) {
  const greeting = { id: 'greeting', type: 'conversation', first_line: 'Hello, this is Acme orders.', instructions: 'Note the code word.' };
  const lookup = { id: 'lookup', type: 'tool', first_line: 'One moment please.', tool_name: 'lookup_order', url: toolUrl, arguments: { order: 'A1' } };
  const bye = { id: 'bye', type: 'end', first_line: 'Thank you for calling, goodbye.' };
  const edges = [{ from: 'greeting', to: 'lookup', description: 'the caller asks where the order is' }, { from: 'lookup', to: 'bye' }];
  return { version: 1, entry_node: 'greeting', nodes: [greeting, lookup, bye], edges };
}

type ChatMessage = { role: string; content: string | null };

/**
 * The scripted model: the caller's code word → `note_code` with it; its result → a line with the
 * call's assistant phrase; anything else → the first transition; the analysis plan → JSON.
 */
function modelAnswer(body: Record<string, unknown>) {
  const messages = body.messages as ChatMessage[];
  const tools = ((body.tools ?? []) as { function: { name: string } }[]).map((t) => t.function.name);
  const all = messages.map((m) => m.content ?? '').join('\n');
  const phrases = [GDPR, CONTROL].find((p) => all.includes(p.caller));
  if (messages.some((m) => m.role === 'system' && m.content?.includes('extract structured data'))) {
    return { text: [json({ topic: 'order status', code_word_given: all.includes('My code word is') })] };
  }
  const last = messages[messages.length - 1]!;
  const transitions = tools.filter((t) => t.startsWith('go_to_'));
  if (last.role === 'user' && phrases && last.content?.includes(phrases.caller)) {
    return { toolCalls: [{ name: 'note_code', arguments: json({ code: phrases.caller }) }] };
  }
  if (last.role === 'tool' && tools.includes('note_code') && phrases) {
    return { text: [`Thank you, your code word is noted as ${phrases.assistant}.`] };
  }
  if (transitions.length > 0) return { toolCalls: [{ name: transitions[0]!, arguments: '{}' }] };
  return { text: ['How can I help?'] };
}

/** Every line the server logged, at trace level. */
let logged = '';
const logSink = new Writable({
  write(chunk, _encoding, done) {
    logged += String(chunk);
    done();
  },
});

const FROM = 'Acme calls <calls@acme.example>';
const emailQueue = `test-gdpr-emails-${process.pid}-${Date.now()}`;
/** The phrases of each order-desk call, by the number it calls; and its id once dialled. */
const numberPhrases = new Map<string, Phrases>();
const callIds = new Map<Phrases, string>();

let s: CallingServer;
let openai: FakeOpenAiChat;
let inbox: SmtpInbox;

beforeAll(async () => {
  inbox = await startSmtpInbox();
  openai = await startFakeOpenAiChat({ apiKey: 'sk-test', completionFor: ({ body }) => modelAnswer(body) });
  const runtime: Pick<RuntimeOptions, 'mediaLiveness' | 'emails'> = { emails: { queueName: emailQueue, retryScheduleMs: [0, 300], smtpTimeoutMs: 2_000 } };
  s = await startCallingServer(
    { OPENAI_API_BASE: openai.url, OPENAI_API_KEY: 'sk-test', SMTP_URL: inbox.url, SMTP_FROM: FROM },
    runtime,
    { logTo: logSink, logLevel: 'trace' },
  );
  // the account webhook answers both tools: each result carries the call's own phrase
  s.receiver.setDefault((req) => {
    const message = JSON.parse(req.body).message;
    if (message?.type !== 'tool-calls') return { status: 200, body: '' };
    const call = message.tool_calls[0];
    const phrases = call.name === 'note_code' ? [GDPR, CONTROL].find((p) => p.caller === call.arguments.code) : numberPhrases.get(message.phone_number.number);
    const result = call.name === 'note_code' ? `ticket ${phrases?.tool}` : `the parcel is at ${phrases?.node}`;
    return { status: 200, body: { results: [{ tool_call_id: call.id, result }] } };
  });
}, 120_000);

afterAll(async () => {
  await s?.close();
  await openai?.close();
  await inbox?.close();
  await dropEmailQueues([emailQueue]);
});

const messagesOf = (callId: string) => receivedMessages(s.receiver).filter((m) => m.call?.id === callId);
const reportOf = (callId: string) =>
  eventually(`the report of ${callId}`, () => messagesOf(callId).find((m) => m.type === 'end-of-call-report'), 30_000);
const mailTo = (address: string) => eventually(`the e-mail to ${address}`, () => inbox.messages.find((m) => m.to.includes(address)), 20_000);

/** Dials `number` and goes through `steps`: a line to hear, or (after a pause) `{say}`; the call and its id. */
async function converse(number: string, steps: (string | { say: string })[]) {
  const call = s.caller(number);
  const callId = callIdOf(await call.dial());
  for (const step of steps) {
    if (typeof step === 'string') {
      await call.hear(step);
    } else {
      await call.quiet();
      await call.say(step.say);
    }
  }
  return { call, callId };
}

/** One call through the order desk, its phrases said and heard; its id and report. */
async function orderDeskCall(phrases: Phrases, gdpr: boolean) {
  const email = `${gdpr ? 'gdpr' : 'control'}-${Date.now()}@acme-parts.example`;
  const { number } = await s.setUpNumber({
    assistant: sandboxAssistant({
      name: gdpr ? 'GDPR desk' : 'Control desk',
      gdpr_mode: gdpr,
      notification_email: email,
      llm_config: { provider: 'openai', model: 'gpt-4o-mini', tools: [NOTE_CODE] },
      analysis_plan: analysisPlan,
    }),
    definition: orderDesk(s.receiver.url),
  });
  numberPhrases.set(number, phrases);
  const steps = ['Acme orders', { say: `My code word is ${phrases.caller}.` }, phrases.assistant, { say: 'Where is my order please?' }, 'goodbye'];
  const { call, callId } = await converse(number, steps);
  callIds.set(phrases, callId);
  await call.ended();
  const report = await reportOf(callId);
  const mail = await mailTo(email);
  await s.runtime.callStore.settled();
  return { callId, report, mail };
}

/** Every row of every table of the database, as JSON text. */
async function wholeDatabase(): Promise<string> {
  const { rows: tables } = await s.store.db.query<{ tablename: string }>(`SELECT tablename FROM pg_tables WHERE schemaname = 'public'`);
  const out: string[] = [];
  for (const { tablename } of tables) {
    const { rows } = await s.store.db.query<{ row: string }>(`SELECT row_to_json(t)::text AS row FROM "${tablename}" t`);
    out.push(...rows.map((r) => `${tablename}: ${r.row}`));
  }
  return out.join('\n');
}

/** Every value under Switchboard's keys in Redis (the call sessions, the webhook and e-mail queues). */
async function wholeRedis(url: string): Promise<string> {
  const redis = new Redis(url);
  try {
    const out: string[] = [];
    for (const pattern of ['sb:*', 'bull:*']) {
      let cursor = '0';
      do {
        const [next, keys] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 500);
        cursor = next;
        for (const key of keys) {
          const type = await redis.type(key);
          const value =
            type === 'string' ? await redis.get(key)
            : type === 'hash' ? await redis.hgetall(key)
            : type === 'list' ? await redis.lrange(key, 0, -1)
            : type === 'set' ? await redis.smembers(key)
            : type === 'zset' ? await redis.zrange(key, '0', '-1')
            : type === 'stream' ? await redis.xrange(key, '-', '+')
            : null;
          out.push(`${key}: ${json(value)}`);
        }
      } while (cursor !== '0');
    }
    return out.join('\n');
  } finally {
    redis.disconnect();
  }
}

describe('gdpr_mode', () => {
  let gdpr: Awaited<ReturnType<typeof orderDeskCall>>;
  let control: Awaited<ReturnType<typeof orderDeskCall>>;

  beforeAll(async () => {
    control = await orderDeskCall(CONTROL, false);
    gdpr = await orderDeskCall(GDPR, true);
  }, 120_000);

  it('the control call: its phrases are in the report, the e-mail, its session and the log', async () => {
    expect(control.report.ended_reason).toBe('assistant-ended-call');
    expect(control.report.nodes_visited).toEqual(['greeting', 'lookup', 'bye']);
    expect(control.report.transcript).toContain(CONTROL.caller);
    expect(control.report.transcript).toContain(CONTROL.assistant);
    expect(control.report.analysis.structured_data).toEqual({ topic: 'order status', code_word_given: true });
    expect(control.mail.parsed.text).toContain(CONTROL.caller);
    // the engine's history holds the conversation and the tool node's result
    const session = json(await s.runtime.callStore.get(control.callId));
    expect(found(session, CONTROL)).toEqual(expect.arrayContaining([CONTROL.caller, CONTROL.assistant, CONTROL.node]));
    expect((await s.store.calls.get(s.orgId, control.callId))!.messages.length).toBeGreaterThan(0);
    expect(logged).toContain(CONTROL.caller);
  });

  it('during the call the conversation flowed: tool-calls carried the caller\'s words', () => {
    const toolCalls = messagesOf(gdpr.callId).filter((m) => m.type === 'tool-calls');
    expect(toolCalls.map((m) => m.tool_calls[0].name)).toEqual(['note_code', 'lookup_order']);
    expect(toolCalls[0].tool_calls[0].arguments).toEqual({ code: GDPR.caller });
  });

  it('the end-of-call-report has no transcript nor messages, and the structured data extracted from the transcript', () => {
    const { report } = gdpr;
    expect(report).toMatchObject({ ended_reason: 'assistant-ended-call', nodes_visited: ['greeting', 'lookup', 'bye'] });
    expect(report).not.toHaveProperty('transcript');
    expect(report).not.toHaveProperty('messages');
    // the model read the transcript (the caller's code word was in it) before it was dropped
    expect(report.analysis).toEqual({ structured_data: { topic: 'order status', code_word_given: true } });
    expect(found(json(report), GDPR)).toEqual([]);
  });

  it('no webhook after the call holds anything of it (status-update ended, the report)', () => {
    const afterwards = messagesOf(gdpr.callId).filter((m) => m.type !== 'tool-calls');
    expect(afterwards.map((m) => m.type)).toEqual(expect.arrayContaining(['status-update', 'end-of-call-report']));
    expect(afterwards.find((m) => m.type === 'status-update' && m.status === 'ended')).toBeDefined();
    for (const m of afterwards) expect(found(json(m), GDPR)).toEqual([]);
  });

  it('the call session after the end: no messages, no engine state; the structured data stays', async () => {
    const session = await s.runtime.callStore.get(gdpr.callId);
    expect(session).toMatchObject({ status: 'ended', ended_reason: 'assistant-ended-call', messages: [], engine: null });
    expect(session!.structured_data).toEqual({ topic: 'order status', code_word_given: true });
    expect(found(json(session), GDPR)).toEqual([]);
  });

  it('the call log: its row, every table of the database, GET /calls/{id} and GET /calls', async () => {
    const row = await s.store.calls.get(s.orgId, gdpr.callId);
    expect(row).toMatchObject({ status: 'ended', messages: [], nodes_visited: ['greeting', 'lookup', 'bye'] });
    expect(row!.structured_data).toEqual({ topic: 'order status', code_word_given: true });
    const database = await wholeDatabase();
    expect(database).toContain(gdpr.callId);
    expect(found(database, GDPR)).toEqual([]);

    const one = await s.api('GET', `/calls/${gdpr.callId}`);
    expect(one.status).toBe(200);
    expect(one.json.call).toMatchObject({ status: 'ended', transcript: '', messages: [], structured_data: { code_word_given: true } });
    expect(found(json(one.json), GDPR)).toEqual([]);
    const list = await s.api('GET', '/calls?limit=100');
    expect(list.json.calls.map((c: { id: string }) => c.id)).toContain(gdpr.callId);
    expect(found(json(list.json), GDPR)).toEqual([]);
    expect(found(json(list.json), CONTROL)).not.toEqual([]);
    for (const path of ['webhooks', 'emails']) {
      const attempts = await s.api('GET', `/calls/${gdpr.callId}/${path}`);
      expect(attempts.status).toBe(200);
      expect(found(json(attempts.json), GDPR)).toEqual([]);
    }
  });

  it('the e-mail: nothing of the conversation, the structured data in it', () => {
    const { mail } = gdpr;
    for (const part of [mail.raw, mail.parsed.text ?? '', String(mail.parsed.html)]) expect(found(part, GDPR)).toEqual([]);
    expect(mail.parsed.text).toContain('code_word_given');
  });

  it('the log at trace level: nothing of the conversation; its fields are censored', () => {
    expect(logged).toContain(gdpr.callId);
    expect(found(logged, GDPR)).toEqual([]);
    const callLines = logged.split('\n').filter((l) => l.includes(gdpr.callId));
    const turns = callLines.filter((l) => l.includes('"msg":"caller turn"'));
    expect(turns.length).toBe(2);
    for (const line of turns) expect(JSON.parse(line)).toMatchObject({ gdpr: true, text: GDPR_CENSOR });
  });

  it.runIf(process.env.REDIS_URL)('Redis: no session nor queued job holds anything of it', async () => {
    const redis = await wholeRedis(process.env.REDIS_URL!);
    expect(redis).toContain(gdpr.callId);
    expect(found(redis, GDPR)).toEqual([]);
    expect(found(redis, CONTROL)).not.toEqual([]);
  });
});

/** Every place a call could be kept or sent after its end, grepped for `words`; the e-mail too when given. */
async function expectNothingKept(callId: string, words: RegExp, mail?: { raw: string; parsed: { text?: string | false } }) {
  await s.runtime.callStore.settled();
  const places: Record<string, string> = {
    webhooks: json(messagesOf(callId).filter((m) => m.type !== 'tool-calls')),
    session: json(await s.runtime.callStore.get(callId)),
    database: await wholeDatabase(),
    api: json((await s.api('GET', `/calls/${callId}`)).json),
    log: logged,
    ...(mail ? { email: `${mail.raw}\n${mail.parsed.text}` } : {}),
    ...(process.env.REDIS_URL ? { redis: await wholeRedis(process.env.REDIS_URL) } : {}),
  };
  for (const [where, text] of Object.entries(places)) {
    const hit = words.exec(text);
    expect({ where, leaked: hit ? text.slice(Math.max(0, hit.index - 120), hit.index + 60) : null }).toEqual({ where, leaked: null });
  }
  expect(places.log).toContain(callId);
  expect(places.database).toContain(callId);
}

describe('gdpr_mode, other ways a call goes', () => {
  it('a realtime call', async () => {
    const email = `realtime-gdpr-${Date.now()}@acme-parts.example`;
    const { number } = await s.setUpNumber({
      assistant: realtimeSandboxAssistant({ gdpr_mode: true, first_message: 'Hello, realtime desk.', notification_email: email }),
    });
    // the sandbox model echoes the caller's words
    const { call, callId } = await converse(number, ['realtime desk', { say: 'My code word is VIOLET OTTER 3391.' }, 'VIOLET OTTER 3391']);
    await call.quiet();
    await call.hangUp();
    const report = await reportOf(callId);
    expect(report).not.toHaveProperty('transcript');
    await expectNothingKept(callId, /violet otter/i, await mailTo(email));
  }, 60_000);

  it('a model whose structured-data answer is not JSON (it echoed the call) is not quoted in the report', async () => {
    const { number } = await s.setUpNumber({
      assistant: sandboxAssistant({
        gdpr_mode: true,
        analysis_plan: {
          structured_data_plan: { enabled: true, schema: STRUCTURED_SCHEMA, messages: [{ role: 'user', content: '{{transcript}}' }] },
          min_messages_threshold: 2,
        },
      }),
    });
    // the sandbox model echoes the caller, and would echo the transcript as its "structured data"
    const { call, callId } = await converse(number, [{ say: 'COBALT FALCON 7264 is my code word.' }, 'COBALT FALCON 7264']);
    await call.quiet();
    await call.hangUp();
    const report = await reportOf(callId);
    expect(report.analysis).toEqual({ structured_data_error: "the model's answer is not JSON" });
    await expectNothingKept(callId, /cobalt falcon/i);
  }, 60_000);

  it('a call whose process died, finalized by another (worker-lost): the structured data stays, nothing else', async () => {
    // the assistant of the gdpr order desk (its model and analysis plan), on a call nobody looks after any more
    const { assistant } = (await s.runtime.callStore.get(callIds.get(GDPR)!))!;
    const started = new Date(Date.now() - 60_000).toISOString();
    const said = 'My code word is GOLDEN BADGER 1172.';
    const lost: CallRecord = {
      ...newCallRecord({
        organization_id: s.orgId,
        number_id: null,
        phone_number: { number: '+15550001111', name: null },
        customer: { number: '+15550002222' },
        transport: 'twilio',
        transport_ids: { call_sid: `CA${Date.now()}`, account_sid: 'AC0' },
      }),
      status: 'in-progress',
      assistant,
      current_node: 'greeting',
      nodes_visited: ['greeting'],
      messages: [
        { role: 'assistant', content: 'Hello, this is Acme orders.', time: started, seconds_from_start: 0, node_id: 'greeting' },
        { role: 'user', content: said, time: started, seconds_from_start: 3, node_id: 'greeting' },
      ],
      engine: { history: [{ role: 'user', content: said }] },
      created_at: started,
      started_at: started,
      worker_id: 'w-dead',
      heartbeat_at: new Date(Date.now() - 30_000).toISOString(),
    };
    await s.runtime.callStore.create(lost);
    await s.runtime.callStore.save(lost);
    // this process's own heartbeat may take it first
    await s.runtime.calls.finalizeStale(20);
    const report = await reportOf(lost.id);
    expect(report).toMatchObject({ ended_reason: 'worker-lost', analysis: { structured_data: { topic: 'order status', code_word_given: true } } });
    expect(report).not.toHaveProperty('messages');
    const session = await eventually('the finalized session', async () => {
      const r = await s.runtime.callStore.get(lost.id);
      return r?.structured_data ? r : null;
    });
    expect(session).toMatchObject({ status: 'ended', messages: [], engine: null });
    await expectNothingKept(lost.id, /golden badger/i);
    expect((await s.store.calls.get(s.orgId, lost.id))!.structured_data).toEqual({ topic: 'order status', code_word_given: true });
  }, 60_000);
});
