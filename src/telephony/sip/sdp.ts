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
}

const STATIC: Record<number, G711> = { 0: 'PCMU', 8: 'PCMA' };

/** The peer's audio stream and what we take of it, or why we cannot (a 488). */
export function negotiate(body: string, ours: G711[] = ['PCMU', 'PCMA']): Negotiated | { problem: string } {
  let sdp: SessionDescription;
  try {
    sdp = parse(body);
  } catch {
    return { problem: 'the SDP does not parse' };
  }
  const audio = sdp.media?.find((m) => m.type === 'audio' && m.port > 0);
  if (!audio) return { problem: 'the SDP offers no audio stream' };
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
  return { ...chosen, dtmfPayload: dtmf, address, port: audio.port };
}

export interface LocalMedia {
  address: string;
  port: number;
  sessionId: number;
  version?: number;
}

/** Our answer to an offer we took (`negotiate`). */
export function answer(local: LocalMedia, chosen: Pick<Negotiated, 'codec' | 'payload' | 'dtmfPayload'>): string {
  const rtp: { payload: number; codec: string; rate: number }[] = [{ payload: chosen.payload, codec: chosen.codec, rate: 8000 }];
  const payloads = [chosen.payload];
  const fmtp: { payload: number; config: string }[] = [];
  if (chosen.dtmfPayload !== null) {
    rtp.push({ payload: chosen.dtmfPayload, codec: 'telephone-event', rate: 8000 });
    fmtp.push({ payload: chosen.dtmfPayload, config: '0-16' });
    payloads.push(chosen.dtmfPayload);
  }
  return description(local, rtp, payloads, fmtp);
}

/** Our offer for a call we place: PCMU, PCMA and telephone-event (101). */
export function offer(local: LocalMedia): string {
  return description(
    local,
    [
      { payload: 0, codec: 'PCMU', rate: 8000 },
      { payload: 8, codec: 'PCMA', rate: 8000 },
      { payload: 101, codec: 'telephone-event', rate: 8000 },
    ],
    [0, 8, 101],
    [{ payload: 101, config: '0-16' }],
  );
}

function description(local: LocalMedia, rtp: { payload: number; codec: string; rate: number }[], payloads: number[], fmtp: { payload: number; config: string }[]): string {
  const ipVer = local.address.includes(':') ? 6 : 4;
  return write({
    version: 0,
    origin: { username: 'switchboard', sessionId: local.sessionId, sessionVersion: local.version ?? 1, netType: 'IN', ipVer, address: local.address },
    name: 'switchboard',
    connection: { version: ipVer, ip: local.address },
    timing: { start: 0, stop: 0 },
    media: [
      {
        type: 'audio',
        port: local.port,
        protocol: 'RTP/AVP',
        payloads: payloads.join(' '),
        rtp,
        fmtp,
        ptime: 20,
        direction: 'sendrecv',
      },
    ],
  } as SessionDescription);
}
