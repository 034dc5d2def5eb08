/**
 * pino, one JSON line per event; secrets and credentials never reach a log line, and nothing of
 * the conversation of a `gdpr_mode` call or chat does (`conversationLogger`).
 */
import { pino, type DestinationStream, type Logger } from 'pino';

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

/** `destination`: where the lines go (default stdout); tests give a stream they can read. */
export function createLogger(level: string, destination?: DestinationStream): Logger {
  const options = {
    level,
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    base: { service: 'switchboard' },
    timestamp: pino.stdTimeFunctions.isoTime,
  };
  return destination ? pino(options, destination) : pino(options);
}

/**
 * The only fields a log line may carry the conversation in (the caller's words, the assistant's
 * lines, model text, tool arguments and results), at the top of the line or one level down
 * (`{text}`, `{command: {text}}`). Never in the message string, nor in an error's message.
 */
export const CONVERSATION_KEYS = ['text', 'transcript', 'messages', 'content', 'arguments', 'result', 'heard', 'reply'] as const;

export const GDPR_CENSOR = '[gdpr_mode]';

const conversationPaths = CONVERSATION_KEYS.flatMap((k) => [k, `*.${k}`]);
const conversationKeys = new Set<string>(CONVERSATION_KEYS);

/**
 * The logger of one call or chat. With `gdpr_mode` (DECISIONS 13: nothing of the conversation is
 * kept, the logs included) every `CONVERSATION_KEYS` field is censored, at every level and in every
 * child, and each line says `gdpr: true`; the secrets stay redacted as by `createLogger`.
 */
export function conversationLogger(log: Logger, gdprMode: boolean): Logger {
  if (!gdprMode) return log;
  return log.child(
    { gdpr: true },
    {
      redact: {
        paths: [...REDACT_PATHS, ...conversationPaths],
        // no secret path ends in a conversation key
        censor: (_value: unknown, path: string[]) => (conversationKeys.has(path[path.length - 1] ?? '') ? GDPR_CENSOR : '[redacted]'),
      },
    },
  );
}
