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

export type ParsedMessage = { ok: true; message: TwilioInbound } | { ok: false; reason: string };

/**
 * A media message in the shape Twilio sends it (its keys in Twilio's order, or `streamSid` before
 * `media` as some senders write it), with a base64 payload: such a message is valid JSON that the
 * schema accepts, so its payload is read without `JSON.parse` and the schema. Fifty of these come
 * each second on every call; anything else takes the general path below.
 */
const MEDIA_MESSAGE =
  /^\{"event":"media","sequenceNumber":"\d{1,15}",(?:"streamSid":"[A-Za-z0-9]{1,64}",)?"media":\{"track":"(?:inbound|outbound)","chunk":"\d{1,15}","timestamp":"\d{1,15}","payload":"([A-Za-z0-9+/]*={0,2})"\}(?:,"streamSid":"[A-Za-z0-9]{1,64}")?\}$/;

export function parseTwilioMessage(data: string | Buffer): ParsedMessage {
  const text = typeof data === 'string' ? data : data.toString('utf8');
  const media = MEDIA_MESSAGE.exec(text);
  if (media) return { ok: true, message: { event: 'media', media: { payload: media[1]! } } };
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
  return { ok: true, message: parsed.data };
}

/** `{"event":"media","streamSid":…,"media":{"payload":…}}`: base64 needs no escaping. */
export const mediaMessage = (streamSid: string, mulaw: Buffer) =>
  `{"event":"media","streamSid":${JSON.stringify(streamSid)},"media":{"payload":"${mulaw.toString('base64')}"}}`;
export const markMessage = (streamSid: string, name: string) =>
  JSON.stringify({ event: 'mark', streamSid, mark: { name } });
export const clearMessage = (streamSid: string) => JSON.stringify({ event: 'clear', streamSid });
