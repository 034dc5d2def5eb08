/**
 * The Twilio Media Streams protocol: messages Twilio sends (`connected`, `start`, `media`, `mark`,
 * `dtmf`, `stop`) parsed without ever throwing, and the ones we send (`media`, `mark`, `clear`).
 */
import { z } from 'zod';

const Connected = z.object({ event: z.literal('connected'), protocol: z.string().optional(), version: z.string().optional() });
const Start = z.object({
  event: z.literal('start'),
  streamSid: z.string().min(1),
  sequenceNumber: z.string().optional(),
  start: z.object({
    streamSid: z.string().min(1).optional(),
    accountSid: z.string().optional(),
    callSid: z.string().optional(),
    tracks: z.array(z.string()).optional(),
    mediaFormat: z
      .object({ encoding: z.string(), sampleRate: z.number(), channels: z.number() })
      .partial()
      .optional(),
    customParameters: z.record(z.string(), z.string()).optional(),
  }),
});
const Media = z.object({
  event: z.literal('media'),
  streamSid: z.string().optional(),
  sequenceNumber: z.string().optional(),
  media: z.object({
    track: z.string().optional(),
    chunk: z.string().optional(),
    timestamp: z.string().optional(),
    payload: z.string(),
  }),
});
const Mark = z.object({ event: z.literal('mark'), streamSid: z.string().optional(), mark: z.object({ name: z.string() }) });
const Dtmf = z.object({
  event: z.literal('dtmf'),
  streamSid: z.string().optional(),
  dtmf: z.object({ digit: z.string().min(1).max(1), track: z.string().optional() }),
});
const Stop = z.object({ event: z.literal('stop'), streamSid: z.string().optional() });

export const TwilioInbound = z.discriminatedUnion('event', [Connected, Start, Media, Mark, Dtmf, Stop]);
export type TwilioInbound = z.infer<typeof TwilioInbound>;

/** A message as the transport uses it: a media message carries its audio, decoded. */
export type TwilioEvent = Exclude<TwilioInbound, { event: 'media' }> | { event: 'media'; audio: Buffer };

export type ParsedMessage = { ok: true; message: TwilioEvent } | { ok: false; reason: string };

export function parseTwilioMessage(data: string | Buffer): ParsedMessage {
  if (typeof data !== 'string') {
    const audio = mediaAudio(data);
    if (audio) return { ok: true, message: { event: 'media', audio } };
  }
  const text = typeof data === 'string' ? data : data.toString('utf8');
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return { ok: false, reason: 'not JSON' };
  }
  const parsed = TwilioInbound.safeParse(json);
  if (!parsed.success) {
    const event = (json as { event?: unknown } | null)?.event;
    return { ok: false, reason: `unreadable ${typeof event === 'string' ? `"${event.slice(0, 32)}"` : ''} message` };
  }
  const m = parsed.data;
  return { ok: true, message: m.event === 'media' ? { event: 'media', audio: Buffer.from(m.media.payload, 'base64') } : m };
}

// ---------------------------------------------------------------------------------------------
// media messages, byte by byte

/**
 * The audio of a media message in the shape Twilio sends it, read from its bytes: its keys in
 * Twilio's order (`streamSid` last, or before `media` as some senders write it), digits for the
 * numbers, a base64 payload. Such a message is valid JSON that the schema accepts, so it needs
 * neither `JSON.parse`, the schema, nor a string: fifty come each second on every call. Anything
 * else (other key orders, spaces, escapes) answers null and takes the general path.
 *
 * The audio is what `Buffer.from(payload, 'base64')` gives: every four characters three bytes, a
 * last two or three characters one or two, a last lone character none.
 */
export function mediaAudio(b: Buffer): Buffer | null {
  let i = literal(b, 0, MEDIA_HEAD);
  i = digits(b, i);
  if (i > 0 && b[i + 2] === 0x22 && b[i + 3] === 0x73 /* ","s */) i = streamSid(b, i, QUOTE_COMMA);
  else i = literal(b, i, QUOTE_COMMA);
  i = literal(b, i, MEDIA_TRACK);
  const inbound = literal(b, i, INBOUND);
  i = inbound > 0 ? inbound : literal(b, i, OUTBOUND);
  i = literal(b, i, CHUNK);
  i = digits(b, i);
  i = literal(b, i, TIMESTAMP);
  i = digits(b, i);
  i = literal(b, i, PAYLOAD);
  if (i < 0) return null;
  const from = i;
  while (i < b.length && B64_VALUE[b[i]!]! < 64) i++;
  const to = i;
  if (b[i] === 0x3d /* = */) i++;
  if (b[i] === 0x3d) i++;
  i = literal(b, i, PAYLOAD_END);
  if (i > 0 && i < b.length - 1) i = streamSid(b, i, QUOTE);
  if (i < 0 || i !== b.length - 1 || b[i] !== 0x7d /* } */) return null;
  return base64Decode(b, from, to);
}

const MEDIA_HEAD = Buffer.from('{"event":"media","sequenceNumber":"');
const QUOTE_COMMA = Buffer.from('",');
const QUOTE = Buffer.from('"');
/** After the sequence number's closing quote: `,"streamSid":"`; after the media object: the same. */
const SID_KEY = Buffer.from('","streamSid":"');
const SID_KEY_AFTER = Buffer.from(',"streamSid":"');
const MEDIA_TRACK = Buffer.from('"media":{"track":"');
const INBOUND = Buffer.from('inbound');
const OUTBOUND = Buffer.from('outbound');
const CHUNK = Buffer.from('","chunk":"');
const TIMESTAMP = Buffer.from('","timestamp":"');
const PAYLOAD = Buffer.from('","payload":"');
const PAYLOAD_END = Buffer.from('"}');

/** The offset after `lit` if `b` has it at `at`; -1 if not (or if `at` is already -1). */
function literal(b: Buffer, at: number, lit: Buffer): number {
  if (at < 0 || at + lit.length > b.length) return -1;
  for (let k = 0; k < lit.length; k++) if (b[at + k] !== lit[k]) return -1;
  return at + lit.length;
}

/** One to fifteen ASCII digits. */
function digits(b: Buffer, at: number): number {
  if (at < 0) return -1;
  let i = at;
  while (i < b.length && i - at < 16 && b[i]! >= 0x30 && b[i]! <= 0x39) i++;
  return i === at || i - at > 15 ? -1 : i;
}

/**
 * A stream id key and value, one to 64 ASCII letters or digits, then `end`: after the sequence
 * number (`","streamSid":"…",`) or after the media object (`,"streamSid":"…"`).
 */
function streamSid(b: Buffer, at: number, end: Buffer): number {
  let i = literal(b, at, end === QUOTE ? SID_KEY_AFTER : SID_KEY);
  if (i < 0) return -1;
  const from = i;
  while (i < b.length && i - from < 65 && ALNUM[b[i]!] === 1) i++;
  if (i === from || i - from > 64) return -1;
  return literal(b, i, end);
}

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
/** A byte's value as a base64 digit, or 64 for a byte that is not one. */
const B64_VALUE = new Uint8Array(256).fill(64);
for (let k = 0; k < 64; k++) B64_VALUE[ALPHABET.charCodeAt(k)] = k;
const ALNUM = new Uint8Array(256);
for (let k = 0; k < 62; k++) ALNUM[ALPHABET.charCodeAt(k)] = 1;
const B64_CHAR = Buffer.from(ALPHABET);

function base64Decode(b: Buffer, from: number, to: number): Buffer {
  const n = to - from;
  const rest = n % 4;
  const out = Buffer.allocUnsafe(((n - rest) / 4) * 3 + (rest === 3 ? 2 : rest === 2 ? 1 : 0));
  let o = 0;
  let i = from;
  for (const whole = to - rest; i < whole; i += 4) {
    const v = (B64_VALUE[b[i]!]! << 18) | (B64_VALUE[b[i + 1]!]! << 12) | (B64_VALUE[b[i + 2]!]! << 6) | B64_VALUE[b[i + 3]!]!;
    out[o++] = v >> 16;
    out[o++] = (v >> 8) & 0xff;
    out[o++] = v & 0xff;
  }
  if (rest >= 2) {
    const v = (B64_VALUE[b[i]!]! << 18) | (B64_VALUE[b[i + 1]!]! << 12) | (rest === 3 ? B64_VALUE[b[i + 2]!]! << 6 : 0);
    out[o++] = v >> 16;
    if (rest === 3) out[o++] = (v >> 8) & 0xff;
  }
  return out;
}

/** `src` as base64 (with padding) into `out` from `at`; the offset after it. */
function base64Encode(src: Buffer, out: Buffer, at: number): number {
  let o = at;
  let i = 0;
  const whole = src.length - (src.length % 3);
  for (; i < whole; i += 3) {
    const v = (src[i]! << 16) | (src[i + 1]! << 8) | src[i + 2]!;
    out[o++] = B64_CHAR[v >> 18]!;
    out[o++] = B64_CHAR[(v >> 12) & 63]!;
    out[o++] = B64_CHAR[(v >> 6) & 63]!;
    out[o++] = B64_CHAR[v & 63]!;
  }
  if (i < src.length) {
    const two = i + 1 < src.length;
    const v = (src[i]! << 16) | (two ? src[i + 1]! << 8 : 0);
    out[o++] = B64_CHAR[v >> 18]!;
    out[o++] = B64_CHAR[(v >> 12) & 63]!;
    out[o++] = two ? B64_CHAR[(v >> 6) & 63]! : 0x3d;
    out[o++] = 0x3d;
  }
  return o;
}

const MEDIA_TAIL = Buffer.from('"}}');

/**
 * The writer of a stream's outbound `media` messages,
 * `{"event":"media","streamSid":…,"media":{"payload":…}}`, as bytes (to send as a text frame):
 * the head is made once per stream, and each frame base64-encoded straight into its message.
 */
export function mediaMessages(streamSid: string): (mulaw: Buffer) => Buffer {
  const head = Buffer.from(`{"event":"media","streamSid":${JSON.stringify(streamSid)},"media":{"payload":"`);
  return (mulaw) => {
    const out = Buffer.allocUnsafe(head.length + Math.ceil(mulaw.length / 3) * 4 + MEDIA_TAIL.length);
    head.copy(out, 0);
    const end = base64Encode(mulaw, out, head.length);
    MEDIA_TAIL.copy(out, end);
    return out;
  };
}

export const markMessage = (streamSid: string, name: string) =>
  JSON.stringify({ event: 'mark', streamSid, mark: { name } });
export const clearMessage = (streamSid: string) => JSON.stringify({ event: 'clear', streamSid });
