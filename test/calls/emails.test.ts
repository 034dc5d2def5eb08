/**
 * Notification e-mails after real calls (DECISIONS 13): the app with its runtime on a real port,
 * a real SMTP server on 127.0.0.1 (`smtp-server`), the messages parsed (`mailparser`). Inbound
 * (pipeline and realtime), outbound and web calls that were answered send one e-mail per address;
 * an outbound call nobody answered sends none; a refusing or absent SMTP server is retried and the
 * call never notices; without SMTP_URL nothing is sent. GET /calls/{id}/emails shows each attempt.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RuntimeOptions } from '../../src/runtime.js';
import { WebCaller } from '../../src/sim/web-caller.js';
import {
  callIdOf,
  callKinds,
  eventually,
  frontDesk,
  receivedMessages,
  sandboxAssistant,
  startCallingServer,
  type CallingServer,
} from '../helpers/calls.js';
import { startFakeOpenAiChat, type FakeOpenAiChat } from '../fakes/openai-chat.js';
import { dropEmailQueues, startSmtpInbox, type SmtpInbox } from '../emails/smtp-inbox.js';
import { REFUSED_PORT } from '../helpers/faults.js';

const FROM = 'Acme calls <calls@acme.example>';
const RETRIES = [0, 300, 300];
const queueNames: string[] = [];

/** A calling server whose e-mails go to `smtpUrl`, retried quickly. */
async function startEmailingServer(env: Record<string, string>): Promise<CallingServer> {
  const queueName = `test-emails-${process.pid}-${Date.now()}-${queueNames.length}`;
  queueNames.push(queueName);
  // startCallingServer hands its runtime options on to createRuntime
  const runtime: Pick<RuntimeOptions, 'mediaLiveness' | 'emails'> = { emails: { queueName, retryScheduleMs: RETRIES, smtpTimeoutMs: 2_000 } };
  return startCallingServer(env, runtime);
}

let inbox: SmtpInbox;
let openai: FakeOpenAiChat;
let s: CallingServer;
beforeAll(async () => {
  inbox = await startSmtpInbox();
  openai = await startFakeOpenAiChat({
    apiKey: 'sk-test',
    // the analysis plan's extraction gets JSON; the conversation a line
    completionFor: ({ body }) => {
      const messages = body.messages as { role: string; content: string }[];
      return messages.some((m) => m.role === 'system' && m.content.includes('extract structured data'))
        ? { text: ['{"appointment": "Tuesday", "note": "<b>VIP</b> & co"}'] }
        : { text: ['Tuesday works, see you then.'] };
    },
  });
  s = await startEmailingServer({ SMTP_URL: inbox.url, SMTP_FROM: FROM, OPENAI_API_BASE: openai.url, OPENAI_API_KEY: 'sk-test' });
}, 120_000);
afterAll(async () => {
  await s?.close();
  await openai?.close();
  await inbox?.close();
  await dropEmailQueues(queueNames);
});

let addressSeq = 0;
const newAddress = (what: string) => `${what}-${++addressSeq}-${Date.now()}@acme-dental.example`;
const mailsTo = (address: string, n = 1, timeoutMs = 20_000) =>
  eventually(`${n} e-mail(s) to ${address}`, () => {
    const got = inbox.messages.filter((m) => m.to.includes(address));
    return got.length >= n ? got : null;
  }, timeoutMs);
const reportOf = (server: CallingServer, callId: string) =>
  eventually(`the report of ${callId}`, () => receivedMessages(server.receiver, 'end-of-call-report').find((m) => m.call.id === callId), 20_000);
const emailAttempts = async (server: CallingServer, callId: string) => {
  const res = await server.api('GET', `/calls/${callId}/emails`);
  expect(res.status).toBe(200);
  return res.json.emails as Record<string, any>[];
};
/** GET /calls/{id}/emails once its attempts are as `done` says. */
const emailAttemptsOnce = (server: CallingServer, callId: string, done: (attempts: Record<string, any>[]) => boolean) =>
  eventually(`the e-mail attempts of ${callId}`, async () => {
    const attempts = await emailAttempts(server, callId);
    return done(attempts) ? attempts : null;
  });

/** A phone call to `number`: hears `greeting`, says and hears each pair in turn, hangs up; the call's id once its report is in. */
async function phoneCall(server: CallingServer, number: string, greeting: string, exchanges: [say: string, hear: string][] = []) {
  const call = server.caller(number);
  const callId = callIdOf(await call.dial());
  await call.hear(greeting);
  for (const [say, hear] of exchanges) {
    await call.quiet();
    await call.say(say);
    await call.hear(hear);
  }
  await call.quiet();
  await call.hangUp();
  const report = await reportOf(server, callId);
  return { callId, report };
}

describe.each(callKinds)('an answered inbound call ($kind)', ({ kind, assistant }) => {
  it('sends one e-mail to each address, plain text and HTML, with the summary and the transcript', async () => {
    const [owner, desk] = [newAddress('owner'), newAddress('desk')];
    const { number } = await s.setUpNumber({
      assistant: assistant({ business_name: 'Acme Dental', notification_email: owner, notification_emails: [desk, owner] }),
      definition: frontDesk,
    });
    const { callId } = await phoneCall(s, number, 'Acme Dental', [['I would like to book an appointment please.', 'book your appointment']]);

    const [toOwner] = await mailsTo(owner);
    const [toDesk] = await mailsTo(desk);
    for (const mail of [toOwner!, toDesk!]) {
      expect(mail.parsed.from?.value).toEqual([{ name: 'Acme calls', address: 'calls@acme.example' }]);
      expect(mail.parsed.subject).toMatch(/^Acme Dental: call from \+1\d+, \d+ s \(customer-ended-call\)$/);
      expect(mail.parsed.text).toContain(callId);
      expect(mail.parsed.text).toContain(number);
      expect(mail.parsed.text).toMatch(/Nodes visited:\s+greeting → booking/);
      expect(mail.parsed.text).toContain('Caller: I would like to book an appointment please.');
      expect(mail.parsed.html).toContain('I would like to book an appointment please.');
      expect(mail.parsed.html).toContain('customer-ended-call');
    }
    // one e-mail per address, however often it is listed
    await new Promise((r) => setTimeout(r, 300));
    expect(inbox.messages.filter((m) => m.to.includes(owner))).toHaveLength(1);

    const attempts = await emailAttemptsOnce(s, callId, (a) => a.length === 2);
    expect(attempts.map((a) => a.recipient).sort()).toEqual([desk, owner].sort());
    for (const a of attempts) {
      expect(a).toMatchObject({ attempt: 1, outcome: 'sent', smtp_code: 250, error: null, next_retry_at: null });
      expect(a.email_id).toMatch(/^eml_/);
    }
  }, 60_000);
});

describe('GET /calls/{id}/emails', () => {
  it('needs a key, and another organization\'s call (or an unknown one) is not found', async () => {
    const { number } = await s.setUpNumber({ assistant: sandboxAssistant({ first_message: 'Hello there.', notification_email: newAddress('x') }) });
    const { callId } = await phoneCall(s, number, 'Hello there');
    expect((await s.app.inject({ method: 'GET', url: `/calls/${callId}/emails` })).statusCode).toBe(401);
    const other = await s.store.keys.createKey('Another organization');
    const foreign = await s.app.inject({ method: 'GET', url: `/calls/${callId}/emails`, headers: { authorization: `Bearer ${other.key}` } });
    expect(foreign.statusCode).toBe(404);
    expect(foreign.json()).toMatchObject({ error: 'Not found' });
    expect((await s.api('GET', '/calls/00000000-0000-4000-8000-000000000000/emails')).status).toBe(404);
    expect((await s.api('GET', '/calls/not-a-uuid/emails')).status).toBe(404);
  }, 60_000);
});

describe('what goes in', () => {
  it('the structured data the analysis plan extracted (escaped in the HTML part)', async () => {
    const to = newAddress('data');
    const { number } = await s.setUpNumber({
      assistant: sandboxAssistant({
        llm_config: { provider: 'openai', model: 'gpt-4o-mini' },
        first_message: 'Hello, Acme Dental here.',
        notification_email: to,
        analysis_plan: {
          structured_data_plan: { enabled: true, schema: { type: 'object', properties: { appointment: { type: 'string' } }, required: ['appointment'] } },
          min_messages_threshold: 2,
        },
      }),
    });
    const { report } = await phoneCall(s, number, 'Acme Dental here', [['Can I come on Tuesday?', 'Tuesday works']]);
    expect(report.analysis.structured_data).toEqual({ appointment: 'Tuesday', note: '<b>VIP</b> & co' });
    const [mail] = await mailsTo(to);
    expect(mail!.parsed.text).toContain('"appointment": "Tuesday"');
    expect(mail!.parsed.html).toContain('&quot;note&quot;: &quot;&lt;b&gt;VIP&lt;/b&gt; &amp; co&quot;');
    expect(mail!.parsed.html).not.toContain('<b>VIP</b>');
  }, 60_000);

  it('with gdpr_mode: no transcript in the e-mail nor in its attempt records', async () => {
    const to = newAddress('gdpr');
    const { number } = await s.setUpNumber({ assistant: sandboxAssistant({ gdpr_mode: true, notification_email: to }), definition: frontDesk });
    const { callId } = await phoneCall(s, number, 'Acme Dental', [['My secret word is marmalade and I want an appointment.', 'book your appointment']]);
    const [mail] = await mailsTo(to);
    for (const part of [mail!.raw, mail!.parsed.text ?? '', String(mail!.parsed.html)]) {
      expect(part).not.toMatch(/marmalade/i);
      expect(part).not.toContain('This is Acme Dental');
      expect(part).not.toContain('Let us book');
    }
    expect(mail!.parsed.text).toContain('gdpr_mode');
    expect(mail!.parsed.text).toMatch(/Nodes visited:\s+greeting → booking/);
    const attempts = await emailAttemptsOnce(s, callId, (a) => a.length === 1);
    expect(JSON.stringify(attempts)).not.toMatch(/marmalade/i);
    expect(attempts[0]).toMatchObject({ recipient: to, outcome: 'sent' });
  }, 60_000);
});

describe('every kind of answered call, and only those', () => {
  it('a web call: no number, no customer', async () => {
    const to = newAddress('web');
    const assistant = await s.api('POST', '/assistants', sandboxAssistant({ business_name: 'Acme Dental', notification_email: to }));
    const workflow = await s.api('POST', '/workflows', { name: 'Web', definition: frontDesk });
    const caller = new WebCaller({ baseUrl: s.baseUrl, apiKey: s.key });
    try {
      const callId = await caller.start({ assistant_id: assistant.json.assistant.id, workflow_id: workflow.json.workflow.id });
      await caller.hear(/Acme Dental/);
      await caller.quiet();
      await caller.say('I would like to book an appointment');
      await caller.hear('book your appointment');
      await caller.close();
      const [mail] = await mailsTo(to);
      expect(mail!.parsed.subject).toMatch(/^Acme Dental: web call, \d+ s \(customer-ended-call\)$/);
      expect(mail!.parsed.text).toMatch(/Customer:\s+— \(web call\)/);
      expect(mail!.parsed.text).toContain('Caller: I would like to book an appointment');
      expect((await emailAttempts(s, callId))[0]).toMatchObject({ recipient: to, outcome: 'sent' });
    } finally {
      await caller.close();
    }
  }, 60_000);

  it('an outbound call a person answered sends one; one nobody answered (customer-busy) sends none', async () => {
    const answered = newAddress('outbound');
    const { numberId } = await s.setUpNumber({ assistant: sandboxAssistant({ business_name: 'Acme Dental', notification_email: answered, first_message: 'Hi, Acme Dental calling.' }) });
    const person = '+14156009001';
    const placed = await s.api('POST', '/calls', { number_id: numberId, customer: { number: person, name: 'Ada' } });
    expect(placed.status).toBe(201);
    const standIn = await s.twilio.waitForCall(person, 15_000);
    const leg = await eventually('the media leg', () => standIn.leg);
    await leg.hear('Acme Dental calling');
    await leg.hangUp();
    const [mail] = await mailsTo(answered);
    expect(mail!.parsed.subject).toMatch(/^Acme Dental: call to \+14156009001 \(Ada\), \d+ s \(customer-ended-call\)$/);
    expect(mail!.parsed.text).toMatch(/Answered by:\s+/);

    const unanswered = newAddress('busy');
    const busy = await s.setUpNumber({ assistant: sandboxAssistant({ notification_email: unanswered }) });
    s.twilio.setCallee('+14156009002', { kind: 'busy' });
    const call = await s.api('POST', '/calls', { number_id: busy.numberId, customer: { number: '+14156009002' } });
    const report = await reportOf(s, call.json.call.id);
    expect(report).toMatchObject({ ended_reason: 'customer-busy', started_at: null });
    await new Promise((r) => setTimeout(r, 1_000));
    expect(inbox.recipientsTried).not.toContain(unanswered);
    expect(await emailAttempts(s, call.json.call.id)).toEqual([]);
  }, 60_000);
});

describe('an SMTP server that refuses', () => {
  it('is retried, each attempt visible at GET /calls/{id}/emails, and the call itself does not notice', async () => {
    const to = newAddress('refused');
    let refusals = 2;
    inbox.refuseRecipient = (address) => (address === to && refusals-- > 0 ? { code: 451, message: 'Greylisted, try again later' } : null);
    try {
      const { number } = await s.setUpNumber({ assistant: sandboxAssistant({ notification_email: to }), definition: frontDesk });
      const { callId, report } = await phoneCall(s, number, 'Acme Dental');
      expect(report.ended_reason).toBe('customer-ended-call');
      await mailsTo(to);
      const attempts = await emailAttemptsOnce(s, callId, (a) => a.length === 3);
      expect(attempts.map((a) => [a.attempt, a.outcome, a.smtp_code])).toEqual([
        [1, 'retrying', 451],
        [2, 'retrying', 451],
        [3, 'sent', 250],
      ]);
      expect(attempts[0]).toMatchObject({ smtp_response: '451 Greylisted, try again later', error: 'the SMTP server refused for now at RCPT (451)' });
      expect(attempts[0]!.next_retry_at).not.toBeNull();
      expect(new Set(attempts.map((a) => a.email_id)).size).toBe(1);
      const logged = await s.api('GET', `/calls/${callId}`);
      expect(logged.json.call).toMatchObject({ status: 'ended', ended_reason: 'customer-ended-call', errors: [] });
    } finally {
      inbox.refuseRecipient = null;
    }
  }, 60_000);

  it('at the data too (onData refuses), retried the same way', async () => {
    const to = newAddress('data-refused');
    let refusals = 1;
    inbox.refuseData = (recipients) => (recipients.includes(to) && refusals-- > 0 ? { code: 452, message: 'Insufficient storage' } : null);
    try {
      const { number } = await s.setUpNumber({ assistant: sandboxAssistant({ first_message: 'Hello there.', notification_email: to }) });
      const { callId } = await phoneCall(s, number, 'Hello there');
      await mailsTo(to);
      const attempts = await emailAttemptsOnce(s, callId, (a) => a.length === 2);
      expect(attempts.map((a) => [a.outcome, a.smtp_code])).toEqual([
        ['retrying', 452],
        ['sent', 250],
      ]);
    } finally {
      inbox.refuseData = null;
    }
  }, 60_000);
});

describe('an SMTP server that is down', () => {
  let down: CallingServer;
  beforeAll(async () => {
    down = await startEmailingServer({ SMTP_URL: `smtp://127.0.0.1:${REFUSED_PORT}`, SMTP_FROM: FROM });
  }, 120_000);
  afterAll(async () => {
    await down?.close();
  });

  it('is retried until the schedule is used up; the calls go on', async () => {
    const to = newAddress('down');
    const { number } = await down.setUpNumber({ assistant: sandboxAssistant({ notification_email: to }), definition: frontDesk });
    for (let i = 0; i < 2; i++) {
      const { callId, report } = await phoneCall(down, number, 'Acme Dental', [['I would like to book an appointment please.', 'book your appointment']]);
      expect(report.ended_reason).toBe('customer-ended-call');
      const attempts = await emailAttemptsOnce(down, callId, (a) => a.some((x) => x.outcome === 'gave-up'));
      expect(attempts.map((a) => [a.attempt, a.outcome, a.smtp_code])).toEqual([
        [1, 'retrying', null],
        [2, 'retrying', null],
        [3, 'gave-up', null],
      ]);
      expect(attempts[0]!.error).toBe('could not connect to the SMTP server');
    }
    expect(inbox.recipientsTried).not.toContain(to);
  }, 90_000);
});

describe('without SMTP_URL', () => {
  let plain: CallingServer;
  beforeAll(async () => {
    plain = await startCallingServer();
  }, 120_000);
  afterAll(async () => {
    await plain?.close();
  });

  it('sends nothing, and the call is as any other', async () => {
    expect(plain.runtime.emails.enabled).toBe(false);
    const to = newAddress('off');
    const { number } = await plain.setUpNumber({ assistant: sandboxAssistant({ first_message: 'Hello there.', notification_email: to }) });
    const { callId, report } = await phoneCall(plain, number, 'Hello there');
    expect(report.ended_reason).toBe('customer-ended-call');
    await new Promise((r) => setTimeout(r, 500));
    expect(inbox.recipientsTried).not.toContain(to);
    expect(await emailAttempts(plain, callId)).toEqual([]);
  }, 60_000);
});
