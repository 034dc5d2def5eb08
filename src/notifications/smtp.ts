/**
 * The SMTP side of notification e-mails: nodemailer over `SMTP_URL` (`smtp://` with STARTTLS when
 * the server offers it, `smtps://` with TLS from the start, credentials in the URL, nodemailer's
 * options in its query), one connection per e-mail, bounded waits. `send` never throws: it says
 * what the server answered, or why no answer came, and whether trying again later may help.
 */
import nodemailer, { type NodemailerError, type Transporter } from 'nodemailer';
import { maskUrlCredentials } from '../webhooks/url-credentials.js';

/** One e-mail to one recipient. */
export interface OutgoingEmail {
  /** Stable across attempts: the Message-ID is `<id@domain of SMTP_FROM>`, so a repeat can be told apart. */
  id: string;
  to: string;
  subject: string;
  text: string;
  html: string;
}

export type SmtpOutcome =
  | { ok: true; smtpCode: number | null; response: string; durationMs: number }
  | {
      ok: false;
      /** The server's reply code and text, when it gave one. */
      smtpCode: number | null;
      response: string | null;
      /** For the tenant: a short phrase that names nothing of the network. */
      reason: string;
      /** For the server log only: nodemailer's code and message. */
      detail: string;
      /** A 5xx reply (except 503) is final (RFC 5321); anything else may pass later. */
      permanent: boolean;
      durationMs: number;
    };

export interface SmtpMailerOptions {
  url: string;
  from: string;
  /** Waits in ms (the URL's query may still set nodemailer's own, which win). */
  connectionTimeoutMs?: number;
  greetingTimeoutMs?: number;
  socketTimeoutMs?: number;
}

/** The URL as a log line may show it: credentials masked. */
export const redactSmtpUrl = (url: string): string => maskUrlCredentials(url);

const replyCode = (response: string | undefined): number | null => {
  const m = /^([2-5]\d\d)[ -]/.exec(response ?? '');
  return m ? Number(m[1]) : null;
};

/** What the tenant is told of a failure with no SMTP reply, by nodemailer's code. */
const NO_REPLY_REASONS: Record<string, string> = {
  ETIMEDOUT: 'timed out: the SMTP server did not answer in time',
  EDNS: 'could not resolve the SMTP server name',
  ETLS: 'the TLS connection to the SMTP server failed',
  ENOAUTH: 'the SMTP server asks for credentials and SMTP_URL has none',
};

function failure(err: NodemailerError, durationMs: number): Extract<SmtpOutcome, { ok: false }> {
  const smtpCode = typeof err.responseCode === 'number' ? err.responseCode : null;
  const response = err.response ?? null;
  const code = smtpCode === null ? '' : ` (${smtpCode})`;
  const reason =
    err.code === 'EAUTH'
      ? `the SMTP server refused the credentials${code}`
      : smtpCode !== null
        ? `the SMTP server ${err.permanent ? 'refused' : 'refused for now'}${err.command ? ` at ${err.command.split(' ')[0]}` : ''}${code}`
        : (NO_REPLY_REASONS[err.code ?? ''] ?? 'could not connect to the SMTP server');
  return {
    ok: false,
    smtpCode,
    response,
    reason,
    detail: `${err.code ?? 'ERROR'}${err.originalCode ? `/${err.originalCode}` : ''}: ${err.message}`,
    permanent: err.permanent === true,
    durationMs,
  };
}

export class SmtpMailer {
  private readonly transport: Transporter;
  private readonly domain: string;

  constructor(private readonly options: SmtpMailerOptions) {
    this.transport = nodemailer.createTransport({
      url: options.url,
      connectionTimeout: options.connectionTimeoutMs ?? 15_000,
      greetingTimeout: options.greetingTimeoutMs ?? 15_000,
      socketTimeout: options.socketTimeoutMs ?? 30_000,
    });
    this.domain = /@([^@<>\s]+)>?\s*$/.exec(options.from)?.[1] ?? 'switchboard.invalid';
  }

  async send(email: OutgoingEmail): Promise<SmtpOutcome> {
    const started = performance.now();
    const elapsed = () => Math.round(performance.now() - started);
    try {
      const info = await this.transport.sendMail({
        from: this.options.from,
        to: email.to,
        subject: email.subject,
        text: email.text,
        html: email.html,
        messageId: `<${email.id}@${this.domain}>`,
      });
      const response = typeof info.response === 'string' ? info.response : '';
      return { ok: true, smtpCode: replyCode(response), response, durationMs: elapsed() };
    } catch (err) {
      return failure(err as NodemailerError, elapsed());
    }
  }

  close(): void {
    this.transport.close();
  }
}
