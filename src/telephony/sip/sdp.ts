/**
 * SDP offer/answer (RFC 3264) for one audio stream: G.711 (PCMU or PCMA) at 8 kHz with
 * `telephone-event` (RFC 4733) for key presses, 20 ms packets. Parsing and writing by
 * `sdp-transform`; the choice is ours.
 */
import { parse, write, type SessionDescription } from 'sdp-transform';

export type G711 = 'PCMU' | 'PCMA';

/** The media both ends agreed on. */
export interface Negotiated {
  codec: G711;
  /** The codec's RTP payload type (0 or 8 unless the offer mapped another). */
  payload: number;
  /** telephone-event's payload type, or null when the peer offered none (key presses not heard). */
  dtmfPayload: number | null;
  /** Where the peer wants our RTP. */
  address: string;
  port: number;
  /** The peer's direction (RFC 3264 §6.1): `sendonly` or `inactive` (or a 0.0.0.0 address) is a hold. */
  direction: Direction;
  /** The offer's other streams (video…), answered with port 0 so that the answer has as many. */
  declined: { type: string; protocol: string; payloads: string }[];
  /** Where the audio stream is among the offer's streams. */
  audioIndex: number;
}

export type Direction = 'sendrecv' | 'sendonly' | 'recvonly' | 'inactive';

/** Our direction for the peer's (RFC 3264 §6.1). */
export function answerDirection(theirs: Direction): Direction {
  return theirs === 'sendonly' ? 'recvonly' : theirs === 'recvonly' ? 'sendonly' : theirs;
}

/** The peer is not listening: it put us on hold, or gave no address. */
export const isHold = (n: Pick<Negotiated, 'direction' | 'address'>) =>
  n.direction === 'sendonly' || n.direction === 'inactive' || n.address === '0.0.0.0';

const STATIC: Record<number, G711> = { 0: 'PCMU', 8: 'PCMA' };

/** The peer's audio stream and what we take of it, or why we cannot (a 488). */
export function negotiate(body: string, ours: G711[] = ['PCMU', 'PCMA']): Negotiated | { problem: string } {
  let sdp: SessionDescription;
  try {
    sdp = parse(body);
  } catch {
    return { problem: 'the SDP does not parse' };
  }
  const media = sdp.media ?? [];
  const audioIndex = media.findIndex((m) => m.type === 'audio' && m.port > 0);
  const audio = media[audioIndex];
  if (!audio) return { problem: 'the SDP offers no audio stream' };
  if (!Number.isInteger(audio.port) || audio.port < 1 || audio.port > 65_534) return { problem: `the audio port ${audio.port} is not one RTP can use (1–65534)` };
  if (!/^RTP\/AVP$/i.test(audio.protocol)) return { problem: `the audio stream's protocol ${audio.protocol} is not RTP/AVP` };
  const address = audio.connection?.ip ?? sdp.connection?.ip;
  if (!address || !/^[0-9.]+$|^[0-9a-fA-F:]+$/.test(address)) return { problem: 'the SDP has no usable connection address' };
  const payloads = String(audio.payloads ?? '')
    .split(/\s+/)
    .filter((p) => /^\d{1,3}$/.test(p))
    .map(Number);
  const names = new Map<number, string>();
  for (const r of audio.rtp ?? []) names.set(r.payload, `${r.codec.toUpperCase()}/${r.rate ?? ''}`);
  let chosen: { codec: G711; payload: number } | null = null;
  for (const p of payloads) {
    const name = names.get(p);
    const codec = name ? (name === 'PCMU/8000' ? 'PCMU' : name === 'PCMA/8000' ? 'PCMA' : null) : (STATIC[p] ?? null);
    if (codec && ours.includes(codec)) {
      chosen = { codec, payload: p };
      break;
    }
  }
  if (!chosen) return { problem: `no common codec: the offer has ${payloads.join(' ') || 'none'}; we take ${ours.join(', ')} at 8 kHz` };
  const dtmf = payloads.find((p) => names.get(p) === 'TELEPHONE-EVENT/8000') ?? null;
  const direction = (audio.direction ?? sdp.direction ?? 'sendrecv') as Direction;
  const declined = media
    .filter((_m, i) => i !== audioIndex)
    .map((m) => ({ type: m.type, protocol: m.protocol, payloads: String(m.payloads ?? '0') }));
  return { ...chosen, dtmfPayload: dtmf, address, port: audio.port, direction, declined, audioIndex };
}

export interface LocalMedia {
  address: string;
  port: number;
  sessionId: number;
  version?: number;
}

/** Our answer to an offer we took (`negotiate`): its direction mirrored, its other streams declined. */
export function answer(local: LocalMedia, chosen: Pick<Negotiated, 'codec' | 'payload' | 'dtmfPayload' | 'direction' | 'declined' | 'audioIndex'>): string {
  const rtp: { payload: number; codec: string; rate: number }[] = [{ payload: chosen.payload, codec: chosen.codec, rate: 8000 }];
  const payloads = [chosen.payload];
  const fmtp: { payload: number; config: string }[] = [];
  if (chosen.dtmfPayload !== null) {
    rtp.push({ payload: chosen.dtmfPayload, codec: 'telephone-event', rate: 8000 });
    fmtp.push({ payload: chosen.dtmfPayload, config: '0-16' });
    payloads.push(chosen.dtmfPayload);
  }
  return description(local, rtp, payloads, fmtp, answerDirection(chosen.direction), chosen.declined, chosen.audioIndex);
}

/**
 * Our offer for a call we place: PCMU, PCMA and telephone-event (101); `first` puts one codec
 * first (an operator's leg offers the caller's, so that the two legs can be relayed as they are).
 */
export function offer(local: LocalMedia, first: G711 = 'PCMU'): string {
  const codecs = [
    { payload: 0, codec: 'PCMU', rate: 8000 },
    { payload: 8, codec: 'PCMA', rate: 8000 },
  ];
  if (first === 'PCMA') codecs.reverse();
  return description(
    local,
    [...codecs, { payload: 101, codec: 'telephone-event', rate: 8000 }],
    [...codecs.map((c) => c.payload), 101],
    [{ payload: 101, config: '0-16' }],
  );
}

function description(
  local: LocalMedia,
  rtp: { payload: number; codec: string; rate: number }[],
  payloads: number[],
  fmtp: { payload: number; config: string }[],
  direction: Direction = 'sendrecv',
  declined: Negotiated['declined'] = [],
  audioIndex = 0,
): string {
  const ipVer = local.address.includes(':') ? 6 : 4;
  const audio = { type: 'audio', port: local.port, protocol: 'RTP/AVP', payloads: payloads.join(' '), rtp, fmtp, ptime: 20, direction };
  const others = declined.map((d) => ({ type: d.type, port: 0, protocol: d.protocol, payloads: d.payloads, rtp: [], fmtp: [] }));
  const media = [...others.slice(0, audioIndex), audio, ...others.slice(audioIndex)];
  return write({
    version: 0,
    origin: { username: 'switchboard', sessionId: local.sessionId, sessionVersion: local.version ?? 1, netType: 'IN', ipVer, address: local.address },
    name: 'switchboard',
    connection: { version: ipVer, ip: local.address },
    timing: { start: 0, stop: 0 },
    media,
  } as SessionDescription);
}
