/** pino, one JSON line per event; secrets and credentials never reach a log line. */
import { pino, type Logger } from 'pino';

export const REDACT_PATHS = [
  'req.headers.authorization',
  'req.headers["x-twilio-signature"]',
  'headers.authorization',
  '*.authorization',
  '*.webhook_secret',
  '*.auth_token',
  '*.secret',
  '*.api_key',
  'key',
];

export function createLogger(level: string): Logger {
  return pino({
    level,
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    base: { service: 'switchboard' },
    timestamp: pino.stdTimeFunctions.isoTime,
  });
}
