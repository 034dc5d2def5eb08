/** Environment → typed configuration, read once at start-up. */
import net from 'node:net';
import { z } from 'zod';
import { parseRecordingsS3Url } from './recordings/storage.js';
import { ErrorCodes, SwitchboardError } from '../engine/errors.js';
import { apiBaseVariable, apiKeyVariable } from './providers/declare.js';
import { vendorAccounts } from './providers/registry.js';
import { carrierVariables } from './telephony/registry.js';

const Port = z.coerce.number().int().min(0).max(65_535);
/** Whole days to keep something, 0 for ever, at most 100 years; `what` names it in the messages. */
const retentionDays = (what: string, days: number) => {
  const forever = `0 keeps ${what} forever`;
  return z.coerce
    .number({ error: `must be a whole number of days; ${forever}` })
    .int({ error: `must be a whole number of days; ${forever}` })
    .min(0, { error: `must not be negative; ${forever}` })
    .max(36_500, { error: `must be at most 36500 days (100 years); ${forever}` })
    .default(days);
};

/** `smtp://` (STARTTLS when the server offers it) or `smtps://` (TLS from the start); never echoed: it may hold a password. */
const SmtpUrl = z.string().refine(
  (value) => {
    try {
      const url = new URL(value);
      return (url.protocol === 'smtp:' || url.protocol === 'smtps:') && url.hostname !== '';
    } catch {
      return false;
    }
  },
  { error: 'must be an smtp:// or smtps:// URL with a host, e.g. smtps://user:password@smtp.example.com:465' },
);
/**
 * `s3://[KEY_ID:SECRET@]bucket[/prefix][?region=…&endpoint=…&force_path_style=…]`
 * (`parseRecordingsS3Url`, docs/recordings.md); the message says what is wrong, never echoing the
 * URL: it may hold a secret.
 */
const RecordingsS3Url = z.string().superRefine((value, ctx) => {
  try {
    parseRecordingsS3Url(value);
  } catch (err) {
    ctx.addIssue({ code: 'custom', message: (err as Error).message });
  }
});
/** An address, alone or after a display name in angle brackets. */
const MailFrom = z.string().refine(
  (value) => z.email().safeParse(/<([^<>]*)>\s*$/.exec(value)?.[1] ?? value.trim()).success,
  { error: 'must be an e-mail address, alone or as "Name <address>", e.g. "Switchboard <calls@example.com>"' },
);

const ConfigSchema = z.object({
  PORT: Port.default(3000),
  HOST: z.string().min(1).default('127.0.0.1'),
  DATA_DIR: z.string().min(1).default('./data'),
  DATABASE_URL: z.string().min(1).optional(),
  REDIS_URL: z.string().min(1).optional(),
  PUBLIC_URL: z.url().optional(),
  WEBHOOK_ALLOW_PRIVATE: z.stringbool().default(false),
  LOG_LEVEL: z
    .enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'])
    .default('info'),
  /** Requests per minute per API key; 0 turns the limit off. */
  RATE_LIMIT_PER_MINUTE: z.coerce.number().int().min(0).default(6000),
  /** Seconds a stopping process waits for requests (and later, live calls) to finish. */
  SHUTDOWN_GRACE_SECONDS: z.coerce.number().min(0).default(30),
  /** Days webhook delivery attempts are kept (GET /calls/{id}/webhooks); 0 keeps them forever. */
  WEBHOOK_DELIVERY_RETENTION_DAYS: retentionDays('delivery attempts', 30),
  /** Days calls are kept in the call log (GET /calls, GET /calls/{id}); 0 keeps them forever. */
  CALL_RETENTION_DAYS: retentionDays('calls', 90),
  /** Notification e-mails (DECISIONS 13): the SMTP server, credentials in the URL; unset, none are sent. */
  SMTP_URL: SmtpUrl.optional(),
  /** The sender of notification e-mails: `calls@example.com` or `Acme calls <calls@example.com>`. */
  SMTP_FROM: MailFrom.optional(),
  /** Days notification e-mail attempts are kept (GET /calls/{id}/emails); 0 keeps them forever. */
  EMAIL_ATTEMPT_RETENTION_DAYS: retentionDays('e-mail attempts', 30),
  /** Days call recordings are kept (GET /calls/{id}/recording); 0 keeps them forever. */
  RECORDING_RETENTION_DAYS: retentionDays('recordings', 30),
  /** Call recordings in S3-compatible storage instead of DATA_DIR/recordings (docs/recordings.md). */
  RECORDINGS_S3_URL: RecordingsS3Url.optional(),
  /** Direct SIP (DECISIONS 15): UDP and TCP on this port, on HOST; 0 turns SIP off. */
  SIP_PORT: Port.default(5060),
  /** The address trunks reach us at, in our Contact and SDP (default: HOST, or this machine's first address when HOST is 0.0.0.0). */
  SIP_PUBLIC_ADDRESS: z.string().min(1).refine((v) => net.isIP(v) !== 0 || /^[A-Za-z0-9.-]+$/.test(v), { error: 'must be an IP address or a host name' }).optional(),
  /** The UDP ports calls' RTP (even) and RTCP (odd) take. */
  RTP_PORT_MIN: Port.default(10_000),
  RTP_PORT_MAX: Port.default(20_000),
}).superRefine((c, ctx) => {
  if (c.RTP_PORT_MAX - c.RTP_PORT_MIN < 2 || c.RTP_PORT_MIN < 1024) {
    ctx.addIssue({
      code: 'custom',
      path: ['RTP_PORT_MAX'],
      message: 'RTP_PORT_MIN–RTP_PORT_MAX must hold at least one even/odd pair, above 1023 (default 10000–20000)',
    });
  }
  if (c.SMTP_URL && !c.SMTP_FROM) {
    ctx.addIssue({
      code: 'custom',
      path: ['SMTP_FROM'],
      message: 'required with SMTP_URL: the sender of notification e-mails, e.g. "Switchboard <calls@example.com>"',
    });
  }
});

/**
 * Each vendor account's `<VENDOR>_API_BASE` (a URL, the vendor's own by default) and
 * `<VENDOR>_API_KEY` (unset by default), for every account a provider declares
 * (`src/providers/registry.ts`).
 */
const VendorSchema = z.object(
  Object.fromEntries(
    vendorAccounts().flatMap((account) => [
      [apiBaseVariable(account), z.url().default(account.baseUrl)],
      [apiKeyVariable(account), z.string().min(1).optional()],
    ]),
  ),
);

/**
 * Each carrier's `<CARRIER>_API_BASE` (a URL, the carrier's own by default), for every carrier
 * that declares an API (`src/telephony/registry.ts`): `TWILIO_API_BASE`, … A test points one at
 * a stand-in.
 */
const CarrierSchema = z.object(Object.fromEntries(carrierVariables().map((v) => [v.name, z.url().default(v.default)])));

/** The vendors' (and carriers') variables, by name (`OPENAI_API_BASE`, `OPENAI_API_KEY`, `TWILIO_API_BASE`, ...). */
export type VendorVariables = { readonly [name: `${string}_API_BASE` | `${string}_API_KEY`]: string | undefined };

export type Config = z.infer<typeof ConfigSchema> & VendorVariables & { PUBLIC_URL: string };

export class ConfigError extends SwitchboardError {
  static override readonly codes = [ErrorCodes.CONFIG_INVALID] as const;
  override name = 'ConfigError';
  constructor(message: string) {
    super(ErrorCodes.CONFIG_INVALID, message);
  }
}

/** Reads the configuration from `env`; empty strings count as unset. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const cleaned = Object.fromEntries(
    Object.entries(env).filter(([, v]) => v !== undefined && v !== ''),
  );
  const parsed = ConfigSchema.safeParse(cleaned);
  const vendors = VendorSchema.safeParse(cleaned);
  const carriers = CarrierSchema.safeParse(cleaned);
  if (!parsed.success || !vendors.success || !carriers.success) {
    const issues = [...(parsed.error?.issues ?? []), ...(vendors.error?.issues ?? []), ...(carriers.error?.issues ?? [])];
    const lines = issues.map((i) => `  ${i.path.join('.')}: ${i.message}`);
    throw new ConfigError(`Invalid configuration:\n${lines.join('\n')}`);
  }
  const c = parsed.data;
  return { ...c, ...(vendors.data as VendorVariables), ...(carriers.data as VendorVariables), PUBLIC_URL: c.PUBLIC_URL ?? `http://${c.HOST}:${c.PORT}` };
}
