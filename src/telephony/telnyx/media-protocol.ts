/**
 * Telnyx's media streaming protocol (the WebSocket Telnyx opens to the `stream_url` of a call's
 * `answer` or `streaming_start`): the frames Telnyx sends (`connected`, `start`, `media` with a
 * base64 RTP payload and its `track`, `mark`, `dtmf`, `stop`, `error`) parsed without ever
 * throwing, and the ones we send back in bidirectional RTP mode (`media`, `mark`, `clear`).
 */
import { z } from 'zod';
import { batchedMediaSender, type MediaSender } from '../media-sender.js';

const Connected = z.object({ event: z.literal('connected'), version: z.string().optional() });
const Start = z.object({
  event: z.literal('start'),
  sequence_number: z.string().optional(),
  stream_id: z.string().optional(),
  start: z
    .object({
      user_id: z.string(),
      call_control_id: z.string(),
      call_session_id: z.string(),
      from: z.string(),
      to: z.string(),
      client_state: z.string().nullable(),
      custom_parameters: z.record(z.string(), z.unknown()),
      media_format: z.object({ encoding: z.string(), sample_rate: z.number(), channels: z.number() }).partial(),
    })
    .partial(),
});
const Media = z.object({
  event: z.literal('media'),
  stream_id: z.string().optional(),
  sequence_number: z.string().optional(),
  media: z.object({
    track: z.string().optional(),
    chunk: z.string().optional(),
    timestamp: z.string().optional(),
    payload: z.string(),
  }),
});
const Mark = z.object({ event: z.literal('mark'), stream_id: z.string().optional(), mark: z.object({ name: z.string() }) });
const Dtmf = z.object({ event: z.literal('dtmf'), stream_id: z.string().optional(), dtmf: z.object({ digit: z.string().min(1).max(1) }) });
const Stop = z.object({ event: z.literal('stop'), stream_id: z.string().optional() });
const ErrorFrame = z.object({
  event: z.literal('error'),
  stream_id: z.string().optional(),
  payload: z.object({ code: z.union([z.number(), z.string()]), title: z.string(), detail: z.string() }).partial().optional(),
});

export const TelnyxInbound = z.discriminatedUnion('event', [Connected, Start, Media, Mark, Dtmf, Stop, ErrorFrame]);
export type TelnyxInbound = z.infer<typeof TelnyxInbound>;

/** A frame as the transport uses it: a media frame carries its audio, decoded, and whose it is. */
export type TelnyxEvent = Exclude<TelnyxInbound, { event: 'media' }> | { event: 'media'; inbound: boolean; audio: Buffer };

export type ParsedFrame = { ok: true; message: TelnyxEvent } | { ok: false; reason: string };

/**
 * With `stream_track: both_tracks` Telnyx sends both sides: `inbound` is the far party (the caller,
 * or the callee of an outbound call), `outbound` what they hear (our own audio, which must never
 * reach the model). A frame without a track is the far party's (`inbound_track` streams).
 */
const isInbound = (track: string | undefined) => track === undefined || track === 'inbound' || track === 'inbound_track';

/** Any frame, by `JSON.parse` and the schema; the transport tries `mediaFrame` first. */
export function parseTelnyxFrame(data: string | Buffer): ParsedFrame {
  let json: unknown;
  try {
    json = JSON.parse(typeof data === 'string' ? data : data.toString('utf8'));
  } catch {
    return { ok: false, reason: 'not JSON' };
  }
  const parsed = TelnyxInbound.safeParse(json);
  if (!parsed.success) {
    const event = (json as { event?: unknown } | null)?.event;
    return { ok: false, reason: `unreadable ${typeof event === 'string' ? `"${event.slice(0, 32)}"` : ''} frame` };
  }
  const m = parsed.data;
  return {
    ok: true,
    message: m.event === 'media' ? { event: 'media', inbound: isInbound(m.media.track), audio: Buffer.from(m.media.payload, 'base64') } : m,
  };
}

/** The stream's audio is μ-law 8 kHz mono (what the answer asked for), or says nothing of it. */
export function isMulaw8k(format: { encoding?: string | undefined; sample_rate?: number | undefined; channels?: number | undefined } | undefined): boolean {
  if (!format) return true;
  const encoding = format.encoding?.toUpperCase();
  return (
    (encoding === undefined || encoding === 'PCMU' || encoding === 'AUDIO/X-MULAW') &&
    (format.sample_rate === undefined || format.sample_rate === 8000) &&
    (format.channels === undefined || format.channels === 1)
  );
}

// ---------------------------------------------------------------------------------------------
// media frames: fifty a second per track on every call

/**
 * A media frame in the shape Telnyx documents it (its keys in that order, `stream_id` last or
 * absent, digits for the numbers, a base64 payload): read without `JSON.parse` or the schema.
 */
const MEDIA_FRAME =
  /^\{"event":"media","sequence_number":"\d{1,15}","media":\{"track":"(inbound|outbound)","chunk":"\d{1,15}","timestamp":"\d{1,15}","payload":"([A-Za-z0-9+/]*={0,2})"\}(?:,"stream_id":"[A-Za-z0-9_.:-]{1,128}")?\}$/;

/** A media frame in Telnyx's shape: whose audio it is and the audio; null for anything else (the general path). */
export function mediaFrame(b: Buffer): { inbound: boolean; audio: Buffer } | null {
  const m = MEDIA_FRAME.exec(b.toString('latin1'));
  return m ? { inbound: m[1] === 'inbound', audio: Buffer.from(m[2]!, 'base64') } : null;
}

const MEDIA_HEAD = Buffer.from('{"event":"media","media":{"payload":"');
const MEDIA_TAIL = Buffer.from('"}}');

/** `{"event":"media","media":{"payload":…}}`: RTP payload (μ-law) for Telnyx to play, as bytes for a text frame. */
export function mediaMessage(mulaw: Buffer): Buffer {
  const out = Buffer.allocUnsafe(MEDIA_HEAD.length + Math.ceil(mulaw.length / 3) * 4 + MEDIA_TAIL.length);
  MEDIA_HEAD.copy(out, 0);
  const end = MEDIA_HEAD.length + out.write(mulaw.toString('base64'), MEDIA_HEAD.length, 'latin1');
  MEDIA_TAIL.copy(out, end);
  return out;
}

/** Outbound audio, held until a message of `framesPerMessage` frames is whole (docs/transports.md, "Frames to a message"). */
export function mediaSender(framesPerMessage: number, send: (message: Buffer) => void): MediaSender {
  return batchedMediaSender(framesPerMessage, mediaMessage, send);
}

export const markMessage = (name: string) => JSON.stringify({ event: 'mark', mark: { name } });
export const CLEAR_MESSAGE = JSON.stringify({ event: 'clear' });
