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
  return { ok: true, message: parsed.data };
}

export const mediaMessage = (streamSid: string, mulaw: Buffer) =>
  JSON.stringify({ event: 'media', streamSid, media: { payload: mulaw.toString('base64') } });
export const markMessage = (streamSid: string, name: string) =>
  JSON.stringify({ event: 'mark', streamSid, mark: { name } });
export const clearMessage = (streamSid: string) => JSON.stringify({ event: 'clear', streamSid });
