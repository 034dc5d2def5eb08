/**
 * The Twilio Media Streams protocol: messages Twilio sends (`connected`, `start`, `media`, `mark`,
 * `dtmf`, `stop`) parsed without ever throwing, and the ones we send (`media`, `mark`, `clear`).
 */
import { z } from 'zod';
import { batchedMediaSender, type MediaSender } from '../media-sender.js';

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

/**
 * Any message, by `JSON.parse` and the schema. The transport tries `mediaAudio` first, for the
 * media messages in Twilio's own shape; everything else comes here.
 */
export function parseTwilioMessage(data: string | Buffer): ParsedMessage {
  let json: unknown;
  try {
    json = JSON.parse(typeof data === 'string' ? data : data.toString('utf8'));
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
// media messages, fifty a second on every call

/**
 * A media message in the shape Twilio sends it: its keys in Twilio's order (`streamSid` last, or
 * before `media` as some senders write it), digits for the numbers, a base64 payload. Such a
 * message is valid JSON that the schema accepts, so it needs neither `JSON.parse` nor the schema.
 */
const MEDIA_MESSAGE =
  /^\{"event":"media","sequenceNumber":"\d{1,15}",(?:"streamSid":"[A-Za-z0-9]{1,64}",)?"media":\{"track":"(?:inbound|outbound)","chunk":"\d{1,15}","timestamp":"\d{1,15}","payload":"([A-Za-z0-9+/]*={0,2})"\}(?:,"streamSid":"[A-Za-z0-9]{1,64}")?\}$/;

/**
 * The audio of a media message in Twilio's shape, or null for anything else (other key orders,
 * spaces, escapes), which takes the general path. Its bytes are read as Latin-1: the pattern
 * takes ASCII only, so a message it matches reads the same as UTF-8, without a decoder's work.
 * (`npm run bench:providers`, "Twilio media message read". Reading the bytes in JavaScript
 * instead allocated less but took about twice the time; docs/benchmarks.md.)
 */
export function mediaAudio(b: Buffer): Buffer | null {
  const m = MEDIA_MESSAGE.exec(b.toString('latin1'));
  return m ? Buffer.from(m[1]!, 'base64') : null;
}

const MEDIA_TAIL = Buffer.from('"}}');

/**
 * Outbound audio as `media` messages of up to `framesPerMessage` frames of 160 bytes each, handed
 * to `send` as bytes (a text frame's payload); see `docs/transports.md`, "Frames to a message".
 */
export function mediaSender(streamSid: string, framesPerMessage: number, send: (message: Buffer) => void): MediaSender {
  return batchedMediaSender(framesPerMessage, mediaMessages(streamSid), send);
}

/**
 * The writer of a stream's outbound `media` messages,
 * `{"event":"media","streamSid":…,"media":{"payload":…}}`, as bytes (to send as a text frame):
 * the head is made once per stream, each frame's base64 written straight after it
 * (`npm run bench:providers`, "Twilio media message written").
 */
export function mediaMessages(streamSid: string): (mulaw: Buffer) => Buffer {
  const head = Buffer.from(`{"event":"media","streamSid":${JSON.stringify(streamSid)},"media":{"payload":"`);
  return (mulaw) => {
    const out = Buffer.allocUnsafe(head.length + Math.ceil(mulaw.length / 3) * 4 + MEDIA_TAIL.length);
    head.copy(out, 0);
    const end = head.length + out.write(mulaw.toString('base64'), head.length, 'latin1');
    MEDIA_TAIL.copy(out, end);
    return out;
  };
}

export const markMessage = (streamSid: string, name: string) =>
  JSON.stringify({ event: 'mark', streamSid, mark: { name } });
export const clearMessage = (streamSid: string) => JSON.stringify({ event: 'clear', streamSid });
