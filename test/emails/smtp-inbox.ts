/**
 * A real SMTP server on 127.0.0.1 for the e-mail tests (`smtp-server`), keeping every message it
 * took, parsed (`mailparser`). A test may make it refuse recipients or data, with the reply code
 * it chooses, and may require credentials. And the clean-up of the tests' Redis e-mail queues.
 */
import type { AddressInfo } from 'node:net';
import { pino } from 'pino';
import { BullMqEmailQueue } from '../../src/notifications/email-queue-bullmq.js';
import { SMTPServer, type SMTPServerOptions } from 'smtp-server';
import { simpleParser, type ParsedMail } from 'mailparser';

export interface ReceivedEmail {
  /** The envelope (RCPT TO), which is what the queue addresses. */
  to: string[];
  from: string;
  parsed: ParsedMail;
  raw: string;
}

/** A reply that refuses: `{code: 450, message: 'mailbox busy'}`. */
export interface SmtpRefusal {
  code: number;
  message: string;
}

export interface SmtpInbox {
  /** `smtp://127.0.0.1:<port>` (with the credentials when the inbox needs some). */
  url: string;
  port: number;
  messages: ReceivedEmail[];
  /** Every RCPT TO the server was given, refused ones too. */
  recipientsTried: string[];
  /** Refuses a recipient at RCPT TO while it answers a refusal (`null` takes it). */
  refuseRecipient: ((address: string) => SmtpRefusal | null) | null;
  /** Refuses a message after its data while it answers a refusal (`null` takes it). */
  refuseData: ((to: string[]) => SmtpRefusal | null) | null;
  waitForMessages(n: number, timeoutMs?: number): Promise<ReceivedEmail[]>;
  close(): Promise<void>;
}

const refusal = (r: SmtpRefusal): Error => Object.assign(new Error(r.message), { responseCode: r.code });

export async function startSmtpInbox(options: { auth?: { user: string; pass: string }; server?: Partial<SMTPServerOptions> } = {}): Promise<SmtpInbox> {
  const inbox: SmtpInbox = {
    url: '',
    port: 0,
    messages: [],
    recipientsTried: [],
    refuseRecipient: null,
    refuseData: null,
    async waitForMessages(n, timeoutMs = 10_000) {
      const deadline = Date.now() + timeoutMs;
      while (inbox.messages.length < n) {
        if (Date.now() > deadline) throw new Error(`timed out waiting for ${n} e-mails (got ${inbox.messages.length})`);
        await new Promise((r) => setTimeout(r, 25));
      }
      return inbox.messages;
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
  const server = new SMTPServer({
    // plain SMTP on loopback: no STARTTLS offered (the server's certificate is self-signed)
    disabledCommands: options.auth ? ['STARTTLS'] : ['STARTTLS', 'AUTH'],
    authOptional: !options.auth,
    allowInsecureAuth: true,
    logger: false,
    onAuth(auth, _session, callback) {
      if (auth.username === options.auth?.user && auth.password === options.auth?.pass) return callback(null, { user: auth.username });
      callback(Object.assign(new Error('Invalid username or password'), { responseCode: 535 }));
    },
    onRcptTo(address, _session, callback) {
      inbox.recipientsTried.push(address.address);
      const refused = inbox.refuseRecipient?.(address.address);
      callback(refused ? refusal(refused) : null);
    },
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        const to = session.envelope.rcptTo.map((a) => a.address);
        const refused = inbox.refuseData?.(to);
        if (refused) return callback(refusal(refused));
        const raw = Buffer.concat(chunks).toString('utf8');
        simpleParser(raw).then(
          (parsed) => {
            const from = session.envelope.mailFrom ? session.envelope.mailFrom.address : '';
            inbox.messages.push({ to, from, parsed, raw });
            callback(null, 'Ok: queued');
          },
          (err: Error) => callback(err),
        );
      });
    },
    ...options.server,
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  inbox.port = (server.server.address() as AddressInfo).port;
  const credentials = options.auth ? `${encodeURIComponent(options.auth.user)}:${encodeURIComponent(options.auth.pass)}@` : '';
  inbox.url = `smtp://${credentials}127.0.0.1:${inbox.port}`;
  return inbox;
}

/** Removes every key of the tests' BullMQ e-mail queues (nothing with REDIS_URL unset). */
export async function dropEmailQueues(queueNames: readonly string[]): Promise<void> {
  const redisUrl = process.env.REDIS_URL;
  if (!redisUrl) return;
  for (const queueName of queueNames) {
    const unused = () => Promise.reject(new Error('not for sending'));
    const queue = new BullMqEmailQueue({ redisUrl, queueName, logger: pino({ level: 'silent' }), mailer: { send: unused } });
    await queue.obliterate();
    await queue.close();
  }
}
