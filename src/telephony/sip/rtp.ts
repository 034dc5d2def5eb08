/**
 * RTP (RFC 3550) for one call: G.711 audio both ways in 20 ms packets, key presses as
 * `telephone-event` (RFC 4733), a small jitter buffer, symmetric RTP for NAT, and an RTCP sender
 * report every 5 s. The call hears μ-law 8 kHz whatever the codec: PCMA is mapped byte by byte.
 */
import dgram from 'node:dgram';
import net from 'node:net';
import type { Logger } from 'pino';
import { linearToMulaw, mulawToLinear } from '../../audio/mulaw.js';
import type { KeyFrame } from '../../calls/keypad.js';
import type { G711 } from './sdp.js';

// ---------------------------------------------------------------------------------------------
// G.711 A-law ↔ μ-law, by table

function alawToLinear(a: number): number {
  a ^= 0x55;
  const sign = a & 0x80;
  const exponent = (a >> 4) & 0x07;
  const mantissa = a & 0x0f;
  let sample = exponent === 0 ? (mantissa << 4) + 8 : ((mantissa << 4) + 0x108) << (exponent - 1);
  return sign ? sample : -sample;
}

function linearToAlaw(sample: number): number {
  let sign = 0x80;
  if (sample < 0) {
    sign = 0;
    sample = -sample - 1;
  }
  sample = Math.min(sample, 32_767);
  let exponent = 7;
  for (let mask = 0x4000; (sample & mask) === 0 && exponent > 0; mask >>= 1) exponent--;
  const mantissa = exponent === 0 ? (sample >> 4) & 0x0f : (sample >> (exponent + 3)) & 0x0f;
  return ((sign | (exponent << 4) | mantissa) ^ 0x55) & 0xff;
}

export const ALAW_TO_MULAW = new Uint8Array(256);
export const MULAW_TO_ALAW = new Uint8Array(256);
for (let i = 0; i < 256; i++) {
  ALAW_TO_MULAW[i] = linearToMulaw(alawToLinear(i));
  MULAW_TO_ALAW[i] = linearToAlaw(mulawToLinear(i));
}

// ---------------------------------------------------------------------------------------------
// ports

/** An RTP socket and its RTCP one on the next port (the SDP's port, and where RTCP is sent). */
export interface RtpPair {
  rtp: dgram.Socket;
  rtcp: dgram.Socket;
  port: number;
}

export interface RtpPortsOptions {
  /** The sockets do not keep the process alive (a simulated phone's, in a process that must exit). */
  unref?: boolean;
}

/**
 * Binds RTP on `port` of `host` (0: a free port the system picks) and RTCP on the port after it;
 * null, with nothing left bound, when either port is taken.
 */
export async function bindRtpPair(host: string, port: number, o: RtpPortsOptions = {}): Promise<RtpPair | null> {
  const type = net.isIPv6(host) ? 'udp6' : 'udp4';
  const rtp = dgram.createSocket(type);
  const rtcp = dgram.createSocket(type);
  const bind = (s: dgram.Socket, p: number) =>
    new Promise<boolean>((resolve) => {
      s.once('error', () => resolve(false));
      s.bind(p, host, () => resolve(true));
    });
  if (await bind(rtp, port)) {
    const bound = rtp.address().port;
    if (bound < 65_535 && (await bind(rtcp, bound + 1))) {
      if (o.unref) {
        rtp.unref();
        rtcp.unref();
      }
      return { rtp, rtcp, port: bound };
    }
  }
  rtp.close();
  rtcp.close();
  return null;
}

/** How many pairs of ports the system picks are tried (a range of 0–0) before giving up. */
const EPHEMERAL_TRIES = 50;

/**
 * The RTP ports of this process: even ports in [min, max), RTCP on the next odd one; with a range
 * of 0–0, any free port the system gives (and RTCP on the next one).
 */
export class RtpPorts {
  private next: number;
  private readonly used = new Set<number>();

  constructor(
    private readonly min: number,
    private readonly max: number,
    private readonly options: RtpPortsOptions = {},
  ) {
    this.next = min + (min % 2);
  }

  /** Two bound sockets on a free even/odd pair, or an error when the range is exhausted. */
  async allocate(host: string): Promise<RtpPair> {
    const ephemeral = this.min === 0 && this.max === 0;
    const pairs = ephemeral ? EPHEMERAL_TRIES : Math.max(1, Math.floor((this.max - this.min) / 2));
    for (let tries = 0; tries < pairs; tries++) {
      const port = this.next;
      if (!ephemeral) {
        this.next += 2;
        if (this.next + 1 > this.max) this.next = this.min + (this.min % 2);
        if (this.used.has(port)) continue;
      }
      const pair = await bindRtpPair(host, port, this.options);
      if (pair) {
        this.used.add(pair.port);
        return pair;
      }
    }
    throw new Error(ephemeral ? 'no free RTP/RTCP port pair' : `no free RTP port pair in ${this.min}–${this.max}`);
  }

  release(port: number): void {
    this.used.delete(port);
  }

  get inUse(): number {
    return this.used.size;
  }
}

// ---------------------------------------------------------------------------------------------
// packets

export interface RtpPacket {
  marker: boolean;
  payloadType: number;
  seq: number;
  timestamp: number;
  ssrc: number;
  payload: Buffer;
}

export function parseRtp(b: Buffer): RtpPacket | null {
  if (b.length < 12 || b[0]! >> 6 !== 2) return null;
  const cc = b[0]! & 0x0f;
  let offset = 12 + cc * 4;
  if (b[0]! & 0x10) {
    if (b.length < offset + 4) return null;
    offset += 4 + b.readUInt16BE(offset + 2) * 4;
  }
  let end = b.length;
  if (b[0]! & 0x20) end -= b[b.length - 1]!;
  if (offset > end) return null;
  return { marker: (b[1]! & 0x80) !== 0, payloadType: b[1]! & 0x7f, seq: b.readUInt16BE(2), timestamp: b.readUInt32BE(4), ssrc: b.readUInt32BE(8), payload: b.subarray(offset, end) };
}

function rtpPacket(payloadType: number, marker: boolean, seq: number, timestamp: number, ssrc: number, payload: Buffer): Buffer {
  const b = Buffer.allocUnsafe(12 + payload.length);
  b[0] = 0x80;
  b[1] = (marker ? 0x80 : 0) | payloadType;
  b.writeUInt16BE(seq & 0xffff, 2);
  b.writeUInt32BE(timestamp >>> 0, 4);
  b.writeUInt32BE(ssrc >>> 0, 8);
  payload.copy(b, 12);
  return b;
}

const DTMF_DIGITS = '0123456789*#ABCD';
/** 8 kHz samples in a 20 ms frame. */
const FRAME_SAMPLES = 160;
/** The power level a telephone-event gives for its tone, in −dBm0 (RFC 4733 §2.3.4). */
const DTMF_VOLUME = 10;

// ---------------------------------------------------------------------------------------------
// a call's session

export interface RtpStats {
  received: number;
  /** Packets missing in the sequence (never arrived, or arrived too late to play). */
  lost: number;
  /** Packets that arrived after their turn, or twice. */
  late: number;
  /** Packets from an address that is not the call's peer: dropped. */
  wrongSource: number;
  sent: number;
  /** RFC 3550 interarrival jitter, in ms. */
  jitterMs: number;
}

export interface RtpSessionOptions {
  rtp: dgram.Socket;
  rtcp: dgram.Socket;
  port: number;
  codec: G711;
  payload: number;
  dtmfPayload: number | null;
  /** Where the SDP says to send, and the signalling's source address (both are the peer's). */
  remote: { address: string; port: number };
  signallingAddress: string;
  logger: Logger;
  /** Caller audio, μ-law 8 kHz, in order. */
  onAudio(frame: Buffer): void;
  onDtmf(digit: string): void;
}

/** Packets held to put them back in order: at most this many (60 ms) before playing on. */
const JITTER_DEPTH = 3;
/** A sequence jump larger than this is a new stream, not loss. */
const MAX_JUMP = 100;
/** A sequence number used by something that plays nothing (a key press, comfort noise). */
const NOTHING = Buffer.alloc(0);
/**
 * After a re-INVITE moved the peer's media, its old stream is ignored; should nothing else come
 * within this long, the old source is the peer's stream after all (it moved only where it listens).
 */
const OLD_STREAM_MS = 1_000;

/** RFC 1918, CGNAT (100.64/10), link-local and IPv6 unique-local addresses. */
export function isPrivateAddress(address: string): boolean {
  return /^(10\.|192\.168\.|172\.(1[6-9]|2\d|3[01])\.|100\.(6[4-9]|[7-9]\d|1[01]\d|12[0-7])\.|169\.254\.|f[cd][0-9a-f]{2}:)/i.test(address);
}

export class RtpSession {
  readonly stats: RtpStats = { received: 0, lost: 0, late: 0, wrongSource: 0, sent: 0, jitterMs: 0 };
  /** When the last packet of the peer's arrived (performance.now()). */
  lastPacketAt = performance.now();
  private target: { address: string; port: number };
  /** Symmetric RTP: once the peer's first packet arrives, we send to where it came from. */
  private latched = false;
  private readonly ssrc = (Math.random() * 2 ** 32) >>> 0;
  private seq = Math.floor(Math.random() * 0xffff);
  private timestamp = (Math.random() * 2 ** 32) >>> 0;
  private marker = true;
  /** The next sequence number to play, once the first packet set it. */
  private expected: number | null = null;
  private readonly held = new Map<number, Buffer>();
  private transit: number | null = null;
  private jitter = 0;
  private lastDtmf: { timestamp: number; ended: boolean } | null = null;
  private readonly rtcpTimer: NodeJS.Timeout;
  private closed = false;
  private octetsSent = 0;

  /** The SDP's address is private and not the signalling's: the first source is latched. */
  private readonly natPeer: boolean;
  /** The SSRC of the stream being played. */
  private ssrcIn: number | null = null;
  /** Where the peer's stream came from before a re-INVITE moved it: not heard, never latched (until `until`). */
  private oldSource: { address: string; port: number; until: number } | null = null;

  constructor(private readonly o: RtpSessionOptions) {
    this.target = { ...o.remote };
    this.natPeer = isPrivateAddress(o.remote.address) && o.remote.address !== o.signallingAddress;
    o.rtp.on('message', (data, rinfo) => this.receive(data, rinfo));
    o.rtp.on('error', () => undefined);
    o.rtcp.on('message', () => undefined);
    o.rtcp.on('error', () => undefined);
    this.rtcpTimer = setInterval(() => this.senderReport(), 5_000);
    this.rtcpTimer.unref();
  }

  get port(): number {
    return this.o.port;
  }

  /**
   * The peer moved its media (a re-INVITE): we send to the new address at once, and latch once
   * on the new stream. The old stream, which may go on a while (packets in flight, a phone that
   * stops it late), is ignored: were it to latch again, the rest of the call would go to the old port.
   */
  retarget(remote: { address: string; port: number }): void {
    const old = this.latched ? { address: this.target.address.replace(/^::ffff:/, ''), port: this.target.port } : null;
    // a hold (0.0.0.0) moves nothing to listen to, and a return to the same address is no move
    const moved = !!old && remote.address !== '0.0.0.0' && (old.address !== remote.address || old.port !== remote.port);
    this.oldSource = moved ? { ...old, until: performance.now() + OLD_STREAM_MS } : null;
    this.target = { ...remote };
    this.latched = false;
  }

  /** A packet of the stream a re-INVITE moved away from: dropped (see `retarget`). */
  private fromOldStream(address: string, port: number): boolean {
    const old = this.oldSource;
    if (!old || old.address !== address || old.port !== port) return false;
    if (this.latched || performance.now() < old.until) return true;
    this.oldSource = null;
    return false;
  }

  private fromPeer(address: string): boolean {
    const plain = address.replace(/^::ffff:/, '');
    if (plain === this.o.remote.address || plain === this.o.signallingAddress || plain === this.target.address) return true;
    // a peer behind NAT whose SDP gives its private address (and whose signalling comes through a
    // proxy): its media comes from the NAT's public address, which we cannot know in advance.
    // The first source is taken (symmetric RTP), and only that one after it.
    return this.natPeer && !this.latched;
  }

  private receive(data: Buffer, rinfo: dgram.RemoteInfo): void {
    if (this.closed) return;
    if (!this.fromPeer(rinfo.address) || this.fromOldStream(rinfo.address.replace(/^::ffff:/, ''), rinfo.port)) {
      this.stats.wrongSource++;
      return;
    }
    const p = parseRtp(data);
    if (!p) return;
    if (!this.latched) {
      this.latched = true;
      this.target = { address: rinfo.address, port: rinfo.port };
    }
    this.lastPacketAt = performance.now();
    this.stats.received++;
    // a new stream (another SSRC, or a jump in sequence: a re-INVITE, a media server switch)
    // starts the buffer again (RFC 3550 A.1), rather than counting all its packets late
    if (this.ssrcIn !== p.ssrc || (this.expected !== null && Math.min((p.seq - this.expected) & 0xffff, (this.expected - p.seq) & 0xffff) > MAX_JUMP)) {
      this.ssrcIn = p.ssrc;
      this.expected = null;
      this.held.clear();
      this.transit = null;
    }
    if (this.expected === null) this.expected = p.seq;
    const behind = (this.expected - p.seq) & 0xffff;
    if ((behind !== 0 && behind < 0x8000) || this.held.has(p.seq)) {
      this.stats.late++;
      return;
    }
    if (p.payloadType === this.o.dtmfPayload) this.dtmf(p);
    const audio = p.payloadType === this.o.payload;
    if (audio) this.measureJitter(p.timestamp);
    // key presses and comfort noise use up sequence numbers too: their turn plays nothing
    this.held.set(p.seq, audio ? p.payload : NOTHING);
    this.drain();
  }

  /** Plays what is in order; skips a missing packet once the buffer is deeper than it may be. */
  private drain(): void {
    for (;;) {
      const next = this.held.get(this.expected!);
      if (next) {
        this.held.delete(this.expected!);
        this.expected = (this.expected! + 1) & 0xffff;
        if (next !== NOTHING) this.play(next);
        continue;
      }
      if (this.held.size < JITTER_DEPTH) return;
      // the gap will not be filled in time: counted lost, and on to the oldest held packet
      let nearest = 0x10000;
      for (const seq of this.held.keys()) nearest = Math.min(nearest, (seq - this.expected!) & 0xffff);
      this.stats.lost += nearest;
      this.expected = (this.expected! + nearest) & 0xffff;
    }
  }

  private play(payload: Buffer): void {
    // a relayed leg (a warm transfer's join): the payload goes on as it came
    if (this.relay) return this.relay(payload, this.o.codec);
    if (this.o.codec === 'PCMA') {
      const out = Buffer.allocUnsafe(payload.length);
      for (let i = 0; i < payload.length; i++) out[i] = ALAW_TO_MULAW[payload[i]!]!;
      payload = out;
    }
    this.o.onAudio(payload);
  }

  private measureJitter(timestamp: number): void {
    const arrival = (performance.now() * 8) >>> 0; // in 8 kHz units
    const transit = (arrival - timestamp) | 0;
    if (this.transit !== null) {
      const d = Math.abs((transit - this.transit) | 0);
      this.jitter += (d - this.jitter) / 16;
      this.stats.jitterMs = this.jitter / 8;
    }
    this.transit = transit;
  }

  /** RFC 4733: an event's packets share a timestamp; the digit counts once. */
  private dtmf(p: RtpPacket): void {
    if (p.payload.length < 4) return;
    const event = p.payload[0]!;
    const ended = (p.payload[1]! & 0x80) !== 0;
    if (this.lastDtmf && this.lastDtmf.timestamp === p.timestamp) {
      this.lastDtmf.ended ||= ended;
      return;
    }
    this.lastDtmf = { timestamp: p.timestamp, ended };
    const digit = DTMF_DIGITS[event];
    if (digit) this.o.onDtmf(digit);
  }

  /**
   * When set, each audio payload received goes here as it came (in the negotiated codec), instead
   * of to `onAudio`: the leg is relayed to another (src/telephony/sip/bridge.ts).
   */
  relay: ((payload: Buffer, codec: G711) => void) | null = null;

  /** The codec this leg's audio goes in. */
  get codec(): G711 {
    return this.o.codec;
  }

  /**
   * A payload relayed from another leg: sent as it is when both legs have the same codec (no
   * transcoding), else mapped by table between A-law and μ-law.
   */
  sendPayload(payload: Buffer, codec: G711): void {
    if (codec === this.o.codec) return this.emit(payload, payload.length);
    const table = codec === 'PCMA' ? ALAW_TO_MULAW : MULAW_TO_ALAW;
    const out = Buffer.allocUnsafe(payload.length);
    for (let i = 0; i < payload.length; i++) out[i] = table[payload[i]!]!;
    this.emit(out, out.length);
  }

  /** One 20 ms frame of μ-law, sent as the negotiated codec. */
  send(frame: Buffer): void {
    if (this.closed) return;
    let payload = frame;
    if (this.o.codec === 'PCMA') {
      payload = Buffer.allocUnsafe(frame.length);
      for (let i = 0; i < frame.length; i++) payload[i] = MULAW_TO_ALAW[frame[i]!]!;
    }
    this.emit(payload, frame.length);
  }

  /** A payload of `samples` samples in the negotiated codec, in the next packet. */
  private emit(payload: Buffer, samples: number): void {
    if (this.closed) return;
    const timestamp = this.nextTimestamp(samples);
    const packet = rtpPacket(this.o.payload, this.marker, this.seq, timestamp, this.ssrc, payload);
    this.marker = false;
    this.sendPacket(packet, payload.length);
  }

  /**
   * One 20 ms frame of a key press of ours, in that frame's slot (src/calls/keypad.ts), as an
   * RFC 4733 telephone-event: every packet of an event carries the timestamp of its first frame
   * and the duration so far; the first has the marker bit, the last the end bit, and the end is
   * sent three times (the frame that ends the tone, then the two slots after it). A peer that
   * negotiated no telephone-event gets the key's tone (`tone`) as audio instead.
   */
  sendKey(key: KeyFrame, tone: Buffer): void {
    if (this.closed) return;
    const payloadType = this.o.dtmfPayload;
    if (payloadType === null) return this.send(tone);
    const timestamp = this.nextTimestamp(FRAME_SAMPLES);
    const first = key.duration === FRAME_SAMPLES && key.repeat === 0;
    if (first || this.eventTimestamp === null) this.eventTimestamp = timestamp;
    const payload = Buffer.from([key.event, (key.end ? 0x80 : 0) | DTMF_VOLUME, (key.duration >> 8) & 0xff, key.duration & 0xff]);
    const packet = rtpPacket(payloadType, first, this.seq, this.eventTimestamp, this.ssrc, payload);
    // the audio after the event goes on in the clock's timestamps, a talkspurt of its own
    this.marker = key.end && key.repeat === 2;
    if (key.end && key.repeat === 2) this.eventTimestamp = null;
    this.sendPacket(packet, payload.length);
  }

  /**
   * The timestamp of a frame sent now. It follows the clock (RFC 3550 §5.1): frames sent ahead of
   * time (the pacer's lead) follow each other `samples` apart, and the first after a pause jumps
   * over it and starts a talkspurt (the marker bit, RFC 3551 §4.1).
   */
  private nextTimestamp(samples: number): number {
    const now = performance.now();
    if (this.clockStart === null) this.clockStart = { at: now, timestamp: this.timestamp };
    else {
      const next = (this.timestamp + this.lastFrameSamples) >>> 0;
      const byClock = (this.clockStart.timestamp + Math.floor(((now - this.clockStart.at) * 8) / 160) * 160) >>> 0;
      const ahead = (byClock - next) | 0;
      if (ahead > 3 * 160) {
        this.timestamp = byClock;
        this.marker = true;
      } else this.timestamp = next;
    }
    this.lastFrameSamples = samples;
    this.lastSentAt = now;
    return this.timestamp;
  }

  private sendPacket(packet: Buffer, payloadBytes: number): void {
    this.seq = (this.seq + 1) & 0xffff;
    this.stats.sent++;
    this.octetsSent += payloadBytes;
    if (this.holding) return;
    this.transmit(this.o.rtp, packet, this.target.port);
  }

  /** The peer put us on hold (or has no address): nothing is sent until it takes us back. */
  holding = false;
  /** When the last audio packet went (performance.now()), for keep-alives; 0 before the first. */
  lastSentAt = 0;
  /** The clock the timestamps follow: the first packet's time and timestamp. */
  private clockStart: { at: number; timestamp: number } | null = null;
  private lastFrameSamples = 0;
  /** The timestamp of the key event being sent (its first frame's), until its last end packet. */
  private eventTimestamp: number | null = null;

  /** One datagram; a bad address or port (the peer's to choose) is never thrown out of here. */
  private transmit(socket: dgram.Socket, packet: Buffer, port: number): void {
    if (port < 1 || port > 65_535 || this.target.address === '0.0.0.0') return;
    try {
      socket.send(packet, port, this.target.address, () => undefined);
    } catch (err) {
      this.o.logger.debug({ err }, 'an RTP packet could not be sent');
    }
  }

  /** A key press of ours (outbound calls' IVRs): start, then three end packets. */
  sendDtmf(digit: string): void {
    const event = DTMF_DIGITS.indexOf(digit.toUpperCase());
    if (event < 0 || this.o.dtmfPayload === null || this.closed) return;
    const ts = (this.timestamp + this.lastFrameSamples) >>> 0;
    const at = (duration: number, end: boolean) => {
      const payload = Buffer.from([event, (end ? 0x80 : 0) | 10, duration >> 8, duration & 0xff]);
      this.transmit(this.o.rtp, rtpPacket(this.o.dtmfPayload!, duration === 160, this.seq, ts, this.ssrc, payload), this.target.port);
      this.seq = (this.seq + 1) & 0xffff;
    };
    at(160, false);
    for (let i = 0; i < 3; i++) at(800, true);
  }

  /** The peer got nothing for a while: the next packet starts a talkspurt (marker bit). */
  silence(): void {
    this.marker = true;
  }

  private senderReport(): void {
    if (this.closed || !this.latched || this.holding) return;
    const b = Buffer.alloc(28);
    b[0] = 0x80;
    b[1] = 200;
    b.writeUInt16BE(6, 2);
    b.writeUInt32BE(this.ssrc, 4);
    const ms = Date.now() + 2_208_988_800_000; // NTP epoch
    b.writeUInt32BE(Math.floor(ms / 1000) >>> 0, 8);
    b.writeUInt32BE(Math.floor(((ms % 1000) / 1000) * 2 ** 32) >>> 0, 12);
    b.writeUInt32BE(this.timestamp, 16);
    b.writeUInt32BE(this.stats.sent >>> 0, 20);
    b.writeUInt32BE(this.octetsSent >>> 0, 24);
    // RTCP goes to the port after the peer's RTP (RFC 3550); none when that is past the last port
    this.transmit(this.o.rtcp, b, this.target.port + 1);
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.rtcpTimer);
    this.o.rtp.close();
    this.o.rtcp.close();
  }
}
