/**
 * Notification e-mails through a real SMTP server on 127.0.0.1 (`smtp-server`, parsed with
 * `mailparser`): one per recipient, plain text and HTML, every attempt recorded, retried when the
 * server refuses for now or is down, final when it refuses for good, nothing of a gdpr_mode
 * conversation in the records or the logs. On the in-process queue, and on BullMQ too when
 * REDIS_URL is set; on PGlite, or PostgreSQL when DATABASE_URL is set.
 */
import { createServer, type Server, type Socket } from 'node:net';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { effectiveAssistant } from '../../engine/assistant.js';
import type { CallRecord } from '../../src/calls/store.js';
import { ConfigError, loadConfig } from '../../src/config.js';
import { freePort } from '../../src/net.js';
import { NotificationEmails } from '../../src/notifications/service.js';
import { createStore, type Store } from '../../src/store/index.js';
import type { EmailAttempt } from '../../src/store/email-attempts.js';
import { callRecord } from '../helpers/call-record.js';
import { createTestDb, defaultDbKind, type TestDb } from '../helpers/db.js';
import { dropEmailQueues, startSmtpInbox, type SmtpInbox } from './smtp-inbox.js';
import { REFUSED_PORT } from '../helpers/faults.js';

const FROM = 'Switchboard calls <calls@acme.example>';
const SECRET_WORDS = 'my card number is 4111 and my secret is bluebird';

/** Log lines, parsed, of a logger the test reads. */
function capturingLogger() {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString('utf8').split('\n')) if (line.trim()) lines.push(JSON.parse(line));
      done();
    },
  });
  return { logger: pino({ level: 'debug' }, stream), lines };
}

let testDb: TestDb;
let store: Store;
let orgId: string;
beforeAll(async () => {
  testDb = await createTestDb(defaultDbKind());
  store = createStore(testDb.db);
  orgId = (await store.keys.createKey('E-mail tests')).organization.id;
});
afterAll(async () => {
  await testDb?.drop();
});

const answeredCall = (assistant: Record<string, unknown> = {}, patch: Partial<CallRecord> = {}): CallRecord =>
  callRecord({
    organization_id: orgId,
    status: 'ended',
    ended_at: new Date(Date.now() + 65_000).toISOString(),
    ended_reason: 'customer-ended-call',
    nodes_visited: ['greeting'],
    messages: [
      { role: 'assistant', content: 'Hello, Acme Dental!', time: new Date().toISOString(), seconds_from_start: 0, node_id: 'greeting' },
      { role: 'user', content: SECRET_WORDS, time: new Date().toISOString(), seconds_from_start: 2, node_id: 'greeting' },
    ],
    assistant: effectiveAssistant({
      name: 'Front desk',
      business_name: 'Acme Dental',
      tts_config: { provider: 'sandbox', voice_id: 'sandbox' },
      notification_email: 'owner@acme-dental.example',
      ...assistant,
    }) as unknown as Record<string, unknown>,
    ...patch,
  });

async function attemptsOf(callId: string, done: (attempts: EmailAttempt[]) => boolean, timeoutMs = 10_000): Promise<EmailAttempt[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const attempts = await store.emailAttempts.listForCall(orgId, callId);
    if (done(attempts)) return attempts;
    if (Date.now() > deadline) throw new Error(`timed out waiting for the e-mail attempts of ${callId}: ${JSON.stringify(attempts)}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

const queueKinds = process.env.REDIS_URL ? ['in process', 'redis'] : ['in process'];

describe.each(queueKinds)('notification e-mails (%s queue)', (kind) => {
  const open: NotificationEmails[] = [];
  const queueNames: string[] = [];
  let inbox: SmtpInbox;
  beforeAll(async () => {
    inbox = await startSmtpInbox({ auth: { user: 'switchboard', pass: 'p@ss word' } });
  });
  afterEach(async () => {
    inbox.refuseRecipient = null;
    inbox.refuseData = null;
    for (const emails of open.splice(0)) await emails.close();
  });
  afterAll(async () => {
    await inbox?.close();
    await dropEmailQueues(queueNames);
  });

  async function emailsTo(
    smtpUrl: string,
    options: { retryScheduleMs?: number[]; smtpTimeoutMs?: number; logger?: pino.Logger; queueName?: string } = {},
  ) {
    const queueName = options.queueName ?? `test-emails-${process.pid}-${Date.now()}-${queueNames.length}`;
    if (kind === 'redis' && !queueNames.includes(queueName)) queueNames.push(queueName);
    const emails = new NotificationEmails({
      config: { SMTP_URL: smtpUrl, SMTP_FROM: FROM, REDIS_URL: kind === 'redis' ? process.env.REDIS_URL : undefined },
      logger: options.logger ?? pino({ level: 'silent' }),
      recorder: store.emailAttempts,
      queueName,
      retryScheduleMs: options.retryScheduleMs ?? [0, 100, 100],
      ...(options.smtpTimeoutMs ? { smtpTimeoutMs: options.smtpTimeoutMs } : {}),
    });
    open.push(emails);
    await emails.start();
    return emails;
  }

  it('sends one e-mail to each address, plain text and HTML, from SMTP_FROM, logged in with the credentials of SMTP_URL', async () => {
    const emails = await emailsTo(inbox.url);
    const before = inbox.messages.length;
    const call = answeredCall({ notification_emails: ['desk@acme-dental.example', 'owner@acme-dental.example'] });
    emails.callEnded(call);
    const received = (await inbox.waitForMessages(before + 2)).slice(before);
    expect(received.map((m) => m.to).sort()).toEqual([['desk@acme-dental.example'], ['owner@acme-dental.example']]);
    for (const m of received) {
      expect(m.from).toBe('calls@acme.example');
      expect(m.parsed.from?.value).toEqual([{ name: 'Switchboard calls', address: 'calls@acme.example' }]);
      expect(m.parsed.subject).toBe('Acme Dental: call from +15005550006, 1 min 5 s (customer-ended-call)');
      expect(m.parsed.text).toContain('Caller: my card number is 4111');
      expect(m.parsed.html).toContain('<h2 style="font-size:18px">Call summary</h2>');
      expect(m.parsed.html).toContain(SECRET_WORDS);
      expect(m.parsed.messageId).toMatch(/^<eml_[\w-]+@acme\.example>$/);
      expect(m.raw).toMatch(/Content-Type: multipart\/alternative/i);
    }
    const attempts = await attemptsOf(call.id, (a) => a.length === 2);
    for (const a of attempts) {
      expect(a).toMatchObject({ call_id: call.id, attempt: 1, outcome: 'sent', smtp_code: 250, error: null, next_retry_at: null });
      expect(a.smtp_response).toMatch(/^250 /);
    }
    expect(new Set(attempts.map((a) => a.email_id)).size).toBe(2);
  });

  it('sends nothing for a call nobody answered, or whose assistant has no address', async () => {
    const emails = await emailsTo(inbox.url);
    const unanswered = answeredCall({}, { started_at: null, ended_reason: 'customer-busy', messages: [] });
    const noAddress = answeredCall({ notification_email: null });
    emails.callEnded(unanswered);
    emails.callEnded(noAddress);
    await emails.whenIdle();
    await new Promise((r) => setTimeout(r, 200));
    expect(await store.emailAttempts.listForCall(orgId, unanswered.id)).toEqual([]);
    expect(await store.emailAttempts.listForCall(orgId, noAddress.id)).toEqual([]);
    expect(inbox.recipientsTried.filter((r) => r === 'owner@acme-dental.example').length).toBe(
      inbox.messages.filter((m) => m.to.includes('owner@acme-dental.example')).length,
    );
  });

  it('retries a recipient the server refuses for now (450 at RCPT), with the same e-mail, until it takes it', async () => {
    const emails = await emailsTo(inbox.url);
    let refusals = 2;
    inbox.refuseRecipient = (address) => (address === 'busy@acme-dental.example' && refusals-- > 0 ? { code: 450, message: 'Mailbox busy, try later' } : null);
    const call = answeredCall({ notification_email: 'busy@acme-dental.example' });
    emails.callEnded(call);
    const attempts = await attemptsOf(call.id, (a) => a.some((x) => x.outcome === 'sent'));
    expect(attempts.map((a) => [a.attempt, a.outcome, a.smtp_code])).toEqual([
      [1, 'retrying', 450],
      [2, 'retrying', 450],
      [3, 'sent', 250],
    ]);
    expect(attempts[0]!.smtp_response).toBe('450 Mailbox busy, try later');
    expect(attempts[0]!.error).toBe('the SMTP server refused for now at RCPT (450)');
    expect(attempts[0]!.next_retry_at).not.toBeNull();
    expect(new Set(attempts.map((a) => a.email_id)).size).toBe(1);
    const got = inbox.messages.filter((m) => m.to.includes('busy@acme-dental.example'));
    expect(got).toHaveLength(1);
  });

  it('retries a message the server refuses after its data (451), and gives up when the schedule is used up', async () => {
    const emails = await emailsTo(inbox.url);
    inbox.refuseData = (to) => (to.includes('full@acme-dental.example') ? { code: 451, message: 'Local error in processing' } : null);
    const call = answeredCall({ notification_email: 'full@acme-dental.example' });
    emails.callEnded(call);
    const attempts = await attemptsOf(call.id, (a) => a.length === 3);
    expect(attempts.map((a) => [a.attempt, a.outcome, a.smtp_code])).toEqual([
      [1, 'retrying', 451],
      [2, 'retrying', 451],
      [3, 'gave-up', 451],
    ]);
    expect(attempts[2]!.next_retry_at).toBeNull();
    expect(attempts[0]!.error).toBe('the SMTP server refused for now at DATA (451)');
  });

  it('does not retry a recipient the server refuses for good (550)', async () => {
    const emails = await emailsTo(inbox.url);
    inbox.refuseRecipient = (address) => (address === 'nobody@acme-dental.example' ? { code: 550, message: 'No such user' } : null);
    const call = answeredCall({ notification_email: 'nobody@acme-dental.example', notification_emails: ['owner@acme-dental.example'] });
    emails.callEnded(call);
    const attempts = await attemptsOf(call.id, (a) => a.length === 2);
    await new Promise((r) => setTimeout(r, 300));
    const after = await store.emailAttempts.listForCall(orgId, call.id);
    expect(after.map((a) => [a.recipient, a.outcome, a.smtp_code]).sort()).toEqual([
      ['nobody@acme-dental.example', 'failed', 550],
      ['owner@acme-dental.example', 'sent', 250],
    ]);
    expect(attempts.find((a) => a.outcome === 'failed')!.error).toBe('the SMTP server refused at RCPT (550)');
  });

  it('retries while the SMTP server is down (connection refused), and never throws', async () => {
    const port = await freePort();
    const { logger, lines } = capturingLogger();
    const emails = await emailsTo(`smtp://127.0.0.1:${port}`, { logger });
    const call = answeredCall();
    expect(() => emails.callEnded(call)).not.toThrow();
    const attempts = await attemptsOf(call.id, (a) => a.length === 3);
    expect(attempts.map((a) => [a.attempt, a.outcome, a.smtp_code])).toEqual([
      [1, 'retrying', null],
      [2, 'retrying', null],
      [3, 'gave-up', null],
    ]);
    expect(attempts[0]!.error).toBe('could not connect to the SMTP server');
    // the tenant's record names nothing of the network; the server log does
    expect(JSON.stringify(attempts)).not.toContain(String(port));
    expect(lines.some((l) => l.msg === 'notification e-mail not sent; will retry' && String(l.detail).includes('ECONNREFUSED'))).toBe(true);
  });

  it.runIf(kind === 'redis')('is durable: an e-mail waiting for its retry is sent by the next process, on its next attempt', async () => {
    const queueName = `test-emails-durable-${process.pid}-${Date.now()}`;
    const down = `smtp://127.0.0.1:${REFUSED_PORT}`;
    const first = await emailsTo(down, { queueName, retryScheduleMs: [0, 1_000, 100] });
    const call = answeredCall({ notification_email: 'later@acme-dental.example' });
    first.callEnded(call);
    await attemptsOf(call.id, (a) => a.length === 1);
    // the process stops while the e-mail waits for its retry; another one starts with the server back
    await first.close();
    await emailsTo(inbox.url, { queueName, retryScheduleMs: [0, 1_000, 100] });
    const attempts = await attemptsOf(call.id, (a) => a.some((x) => x.outcome === 'sent'));
    expect(attempts.map((a) => [a.attempt, a.outcome])).toEqual([
      [1, 'retrying'],
      [2, 'sent'],
    ]);
    expect(inbox.messages.filter((m) => m.to.includes('later@acme-dental.example'))).toHaveLength(1);
  });

  it('gives up on a server that never answers, within its timeout', async () => {
    const sockets = new Set<Socket>();
    const silent: Server = createServer((socket) => sockets.add(socket));
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', () => r()));
    try {
      const port = (silent.address() as { port: number }).port;
      const emails = await emailsTo(`smtp://127.0.0.1:${port}`, { retryScheduleMs: [0], smtpTimeoutMs: 300 });
      const call = answeredCall();
      emails.callEnded(call);
      const [attempt] = await attemptsOf(call.id, (a) => a.length === 1);
      expect(attempt).toMatchObject({ outcome: 'gave-up', smtp_code: null, error: 'timed out: the SMTP server did not answer in time' });
      expect(attempt!.duration_ms).toBeLessThan(5_000);
    } finally {
      for (const s of sockets) s.destroy();
      await new Promise((r) => silent.close(r));
    }
  });

  it('refused credentials are a final failure named as such', async () => {
    const emails = await emailsTo(inbox.url.replace('p%40ss%20word', 'wrong'));
    const call = answeredCall();
    emails.callEnded(call);
    const [attempt] = await attemptsOf(call.id, (a) => a.length === 1);
    expect(attempt).toMatchObject({ outcome: 'failed', smtp_code: 535, error: 'the SMTP server refused the credentials (535)' });
  });

  it('with gdpr_mode, nothing of the conversation is in the e-mail, its attempt records or the logs', async () => {
    const { logger, lines } = capturingLogger();
    const emails = await emailsTo(inbox.url, { logger });
    let refusals = 1;
    inbox.refuseRecipient = (address) => (address === 'gdpr@acme-dental.example' && refusals-- > 0 ? { code: 421, message: 'Try again' } : null);
    const call = answeredCall({ gdpr_mode: true, notification_email: 'gdpr@acme-dental.example' }, { structured_data: { booked: true } });
    emails.callEnded(call);
    const attempts = await attemptsOf(call.id, (a) => a.some((x) => x.outcome === 'sent'));
    const mail = inbox.messages.find((m) => m.to.includes('gdpr@acme-dental.example'))!;
    for (const part of [mail.raw, mail.parsed.text ?? '', String(mail.parsed.html)]) {
      expect(part).not.toContain('bluebird');
      expect(part).not.toContain('Hello, Acme Dental!');
    }
    expect(mail.parsed.text).toContain('gdpr_mode');
    expect(mail.parsed.text).toContain('"booked": true');
    expect(JSON.stringify(attempts)).not.toContain('bluebird');
    expect(lines.length).toBeGreaterThan(0);
    expect(JSON.stringify(lines)).not.toContain('bluebird');
    expect(JSON.stringify(lines)).not.toContain('Hello, Acme Dental!');
  });

  it('speaks smtps:// (TLS from the start), with nodemailer options in the URL query', async () => {
    const tlsInbox = await startSmtpInbox({ server: { secure: true } });
    try {
      const emails = await emailsTo(`${tlsInbox.url.replace('smtp://', 'smtps://')}?tls.rejectUnauthorized=false`);
      const call = answeredCall({ notification_email: 'tls@acme-dental.example' });
      emails.callEnded(call);
      await tlsInbox.waitForMessages(1);
      expect(tlsInbox.messages[0]!.to).toEqual(['tls@acme-dental.example']);
      expect((await attemptsOf(call.id, (a) => a.length === 1))[0]!.outcome).toBe('sent');
    } finally {
      await tlsInbox.close();
    }
  });
});

describe('without SMTP_URL', () => {
  it('sends nothing and says so once at start-up', async () => {
    const { logger, lines } = capturingLogger();
    const emails = new NotificationEmails({ config: { SMTP_URL: undefined, SMTP_FROM: undefined, REDIS_URL: undefined }, logger, recorder: store.emailAttempts });
    await emails.start();
    expect(emails.enabled).toBe(false);
    const call = answeredCall();
    emails.callEnded(call);
    emails.callEnded(answeredCall());
    await emails.whenIdle();
    await emails.close();
    expect(lines.filter((l) => String(l.msg).includes('notification e-mails are off'))).toHaveLength(1);
    expect(lines.find((l) => String(l.msg).includes('notification e-mails are off'))!.msg).toBe('notification e-mails are off: SMTP_URL is not set');
    expect(await store.emailAttempts.listForCall(orgId, call.id)).toEqual([]);
  });
});

describe('SMTP_URL and SMTP_FROM', () => {
  it('takes smtp:// and smtps:// URLs with credentials, and a sender with or without a name', () => {
    const config = loadConfig({ SMTP_URL: 'smtps://user:pa%40ss@smtp.example.com:465', SMTP_FROM: 'Acme <calls@acme.example>' });
    expect(config).toMatchObject({ SMTP_URL: 'smtps://user:pa%40ss@smtp.example.com:465', SMTP_FROM: 'Acme <calls@acme.example>' });
    expect(loadConfig({ SMTP_URL: 'smtp://127.0.0.1:2525', SMTP_FROM: 'calls@acme.example' }).SMTP_URL).toBe('smtp://127.0.0.1:2525');
    expect(loadConfig({}).SMTP_URL).toBeUndefined();
  });

  it.each([
    [{ SMTP_URL: 'https://user:hunter2@smtp.example.com', SMTP_FROM: 'calls@acme.example' }, 'SMTP_URL: must be an smtp:// or smtps:// URL with a host'],
    [{ SMTP_URL: 'smtp.example.com:587', SMTP_FROM: 'calls@acme.example' }, 'SMTP_URL: must be an smtp:// or smtps:// URL with a host'],
    [{ SMTP_URL: 'smtp://user:hunter2@smtp.example.com' }, 'SMTP_FROM: required with SMTP_URL'],
    [{ SMTP_URL: 'smtp://smtp.example.com', SMTP_FROM: 'Acme calls' }, 'SMTP_FROM: must be an e-mail address'],
  ])('refuses %j at start-up with a clear message that shows no password', (env, message) => {
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(message);
    try {
      loadConfig(env);
    } catch (err) {
      expect(String(err)).not.toContain('hunter2');
    }
  });
});
