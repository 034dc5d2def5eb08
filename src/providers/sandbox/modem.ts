/**
 * The sandbox modem: text carried by μ-law 8 kHz audio, so that the offline sandbox TTS and STT
 * really exchange audio (see docs/sandbox.md).
 *
 * Binary FSK at 1,000 baud, 8 samples per bit: mark (1) = 1,000 Hz, space (0) = 2,000 Hz. Both
 * tones are whole cycles per bit, so the phase is continuous and, over one aligned bit, the tones
 * are exactly orthogonal bins (1 and 2) of an 8-point DFT: the receiver compares their energies.
 *
 * Frame (bytes MSB first):
 *   preamble  32 bits 1010…   the receiver's detector settles, the level meter hears sound
 *   sync      32 bits 0x1ACFFC1D (the CCSDS attached sync marker; low autocorrelation sidelobes)
 *   header    length (u16, 1..1024 payload bytes) + CRC-16/CCITT-FALSE of those 2 bytes
 *   payload   UTF-8 in blocks of 16 bytes, each followed by the CRC-32 (IEEE) of the length
 *             bytes and all payload bytes so far: every block verifies the whole prefix, so
 *             interim text is verified too, and the last CRC is the frame's checksum
 *   postamble 8 bits of mark
 * then 160 ms of silence (μ-law 0xFF) between frames.
 */
import { MULAW_DECODE_TABLE, MULAW_SILENCE, linearToMulaw } from '../../audio/mulaw.js';

export const MODEM = {
  sampleRate: 8000,
  baud: 1000,
  samplesPerBit: 8,
  markHz: 1000,
  spaceHz: 2000,
  /** Peak amplitude of the tones (≈ −11.7 dBFS RMS). */
  amplitude: 12000,
  preambleBits: 32,
  sync: 0x1acffc1d,
  blockBytes: 16,
  maxFrameBytes: 1024,
  postambleBits: 8,
  /** Silence after each frame. */
  gapMs: 160,
} as const;

const SPB = MODEM.samplesPerBit;
const GAP_SAMPLES = (MODEM.gapMs * MODEM.sampleRate) / 1000;

// ---------------------------------------------------------------------------------------------
// Checksums

const CRC32_TABLE = new Int32Array(256);
for (let i = 0; i < 256; i++) {
  let c = i;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  CRC32_TABLE[i] = c;
}

/** Running CRC-32 (IEEE 802.3, as zlib): pass the previous return value to continue. */
export function crc32(bytes: Uint8Array, previous = 0): number {
  let c = ~previous;
  for (let i = 0; i < bytes.length; i++) c = CRC32_TABLE[(c ^ bytes[i]!) & 0xff]! ^ (c >>> 8);
  return ~c >>> 0;
}

/** CRC-16/CCITT-FALSE (poly 0x1021, init 0xFFFF). */
export function crc16(bytes: Uint8Array): number {
  let c = 0xffff;
  for (let i = 0; i < bytes.length; i++) {
    c ^= bytes[i]! << 8;
    for (let k = 0; k < 8; k++) c = c & 0x8000 ? ((c << 1) ^ 0x1021) & 0xffff : (c << 1) & 0xffff;
  }
  return c;
}

// ---------------------------------------------------------------------------------------------
// Transmitter

function toneBits(hz: number): Buffer {
  const out = Buffer.alloc(SPB);
  for (let i = 0; i < SPB; i++) {
    // π/4 phase offset: the 2 kHz tone then never samples its zero crossings.
    out[i] = linearToMulaw(MODEM.amplitude * Math.sin((2 * Math.PI * hz * i) / MODEM.sampleRate + Math.PI / 4));
  }
  return out;
}
const MARK = toneBits(MODEM.markHz);
const SPACE = toneBits(MODEM.spaceHz);

/** The bytes of one frame after the sync word: header, payload blocks with their CRCs. */
export function frameBody(payload: Uint8Array): Uint8Array {
  if (payload.length < 1 || payload.length > MODEM.maxFrameBytes) {
    throw new RangeError(`sandbox modem: a frame carries 1..${MODEM.maxFrameBytes} bytes, not ${payload.length}`);
  }
  const blocks = Math.ceil(payload.length / MODEM.blockBytes);
  const body = new Uint8Array(4 + payload.length + 4 * blocks);
  const len = new Uint8Array([payload.length >> 8, payload.length & 0xff]);
  const h = crc16(len);
  body.set(len, 0);
  body[2] = h >> 8;
  body[3] = h & 0xff;
  let at = 4;
  let crc = crc32(len);
  for (let off = 0; off < payload.length; off += MODEM.blockBytes) {
    const block = payload.subarray(off, Math.min(payload.length, off + MODEM.blockBytes));
    body.set(block, at);
    at += block.length;
    crc = crc32(block, crc);
    body[at++] = crc >>> 24;
    body[at++] = (crc >>> 16) & 0xff;
    body[at++] = (crc >>> 8) & 0xff;
    body[at++] = crc & 0xff;
  }
  return body;
}

/** Samples (= μ-law bytes) one frame of `payloadBytes` bytes takes, without the gap. */
export function frameSamples(payloadBytes: number): number {
  const blocks = Math.ceil(payloadBytes / MODEM.blockBytes);
  const bits = MODEM.preambleBits + 32 + 8 * (4 + payloadBytes + 4 * blocks) + MODEM.postambleBits;
  return bits * SPB;
}

/** One frame as μ-law audio followed by the inter-frame silence. */
export function modulateFrame(payload: Uint8Array): Buffer {
  const body = frameBody(payload);
  const out = Buffer.alloc(frameSamples(payload.length) + GAP_SAMPLES, MULAW_SILENCE);
  let at = 0;
  const bit = (b: number) => {
    (b ? MARK : SPACE).copy(out, at);
    at += SPB;
  };
  for (let i = 0; i < MODEM.preambleBits; i++) bit((i & 1) === 0 ? 1 : 0);
  for (let i = 31; i >= 0; i--) bit((MODEM.sync >>> i) & 1);
  for (let i = 0; i < body.length; i++) {
    const byte = body[i]!;
    for (let k = 7; k >= 0; k--) bit((byte >> k) & 1);
  }
  for (let i = 0; i < MODEM.postambleBits; i++) bit(1);
  return out;
}

/** Splits UTF-8 into frame payloads of at most `maxFrameBytes`, never inside a character. */
export function splitPayloads(bytes: Uint8Array): Uint8Array[] {
  const out: Uint8Array[] = [];
  let off = 0;
  while (off < bytes.length) {
    let end = Math.min(bytes.length, off + MODEM.maxFrameBytes);
    if (end < bytes.length) {
      while (end > off + 1 && (bytes[end]! & 0xc0) === 0x80) end--;
    }
    out.push(bytes.subarray(off, end));
    off = end;
  }
  return out;
}

const utf8 = new TextEncoder();

/** Text → μ-law audio: one frame (or more, past 1,024 UTF-8 bytes) each followed by silence. */
export function modulateText(text: string): Buffer {
  const frames = splitPayloads(utf8.encode(text)).map(modulateFrame);
  return Buffer.concat(frames);
}

// ---------------------------------------------------------------------------------------------
// Receiver

/** How many bytes at the start of `bytes` form whole UTF-8 characters (an incomplete tail is cut). */
export function completeUtf8Length(bytes: Uint8Array): number {
  const n = bytes.length;
  for (let back = 1; back <= Math.min(4, n); back++) {
    const b = bytes[n - back]!;
    if ((b & 0xc0) === 0x80) continue; // continuation byte: look further back
    const need = b < 0x80 ? 1 : (b & 0xe0) === 0xc0 ? 2 : (b & 0xf0) === 0xe0 ? 3 : (b & 0xf8) === 0xf0 ? 4 : 1;
    return back >= need ? n : n - back;
  }
  return n;
}

export interface ReceiverEvents {
  /** A sync word was found: a frame starts (sample index of its preamble's first sample). */
  onSync(startSample: number): void;
  /** The bytes received so far passed their block checksum. */
  onVerified(payloadSoFar: Uint8Array, complete: boolean): void;
  /** A whole frame passed its checksum. */
  onFrame(payload: Uint8Array, startSample: number, endSample: number): void;
  /** A frame in progress was dropped; nothing of it is reported. */
  onReject(reason: 'header' | 'checksum' | 'carrier'): void;
}

/** Window energy below this (RMS ≈ −40 dBFS over one bit) is no carrier. */
const MIN_ENERGY = SPB * 328 * 328;

/** Whether every byte is a μ-law zero (0xFF or 0x7F: digital silence). */
function isSilence(mulaw: Uint8Array): boolean {
  for (let i = 0; i < mulaw.length; i++) if ((mulaw[i]! & 0x7f) !== 0x7f) return false;
  return true;
}
const S = Math.SQRT1_2;

const enum Mode {
  Search,
  Align,
  Header,
  Payload,
}

/**
 * Streaming FSK demodulator: push μ-law bytes in any chunking; frame events come back
 * synchronously. Bit timing is recovered from the sync word itself: every one of the 8 sample
 * phases keeps its own shift register, and of the phases that see the sync word the receiver
 * locks to the one whose 32 decisions were cleanest (one tone's energy most dominant).
 */
export class FskReceiver {
  private readonly ring = new Float64Array(SPB);
  /** The ring holds zeros only (skipped silence need not clear it again). */
  private ringZero = true;
  private energy = 0;
  /** Samples pushed so far; the sample being processed is `n - 1`. */
  private n = 0;
  private readonly regs = new Uint32Array(SPB);
  private readonly runs = new Uint8Array(SPB);
  private mode = Mode.Search;
  /** Per phase: the decision quality of its last 32 bits (ring) and their sum. */
  private readonly qring = new Float64Array(SPB * 32);
  private readonly qpos = new Uint8Array(SPB);
  private readonly qsum = new Float64Array(SPB);
  private quality = 0;
  private alignFirst = 0;
  private alignBest = 0;
  private alignScore = 0;
  private nextBit = 0;
  private quiet = 0;
  private byte = 0;
  private bitCount = 0;
  private header = new Uint8Array(4);
  private headerLen = 0;
  private payload = new Uint8Array(0);
  private length = 0;
  private got = 0;
  private crc = 0;
  private crcBuf = new Uint8Array(4);
  private crcLen = 0;
  private blockStart = 0;
  private blockEnd = 0;
  private frameStart = 0;

  constructor(private readonly events: ReceiverEvents) {}

  /** Samples consumed so far. */
  get samples(): number {
    return this.n;
  }

  /** True while a frame is being received (sync found, not yet complete or rejected). */
  get receiving(): boolean {
    return this.mode !== Mode.Search;
  }

  /**
   * Demodulates `mulaw`; returns the sum of the squares of its samples (linear, 16-bit scale: 0 for
   * digital silence), which a level meter can use instead of decoding the chunk again.
   */
  push(mulaw: Uint8Array): number {
    if (this.mode === Mode.Search && this.energy < MIN_ENERGY && mulaw.length >= SPB && isSilence(mulaw)) {
      this.skipSilence(mulaw.length);
      return 0;
    }
    const ring = this.ring;
    this.ringZero = false;
    let sumSquares = 0;
    // the sample counter and the window's energy stay in locals, written back before any call that reads them
    let n = this.n;
    let energy = this.energy;
    for (let i = 0; i < mulaw.length; i++) {
      const x = MULAW_DECODE_TABLE[mulaw[i]!]!;
      const slot = n & (SPB - 1);
      const old = ring[slot]!;
      ring[slot] = x;
      const xx = x * x;
      sumSquares += xx;
      energy += xx - old * old;
      const t = n;
      n++;
      const mode = this.mode;
      if (mode === Mode.Search || mode === Mode.Align) {
        this.n = n;
        this.energy = energy;
        this.search(t);
      } else if (t === this.nextBit) {
        this.n = n;
        this.energy = energy;
        this.nextBit += SPB;
        this.receiveBit(t);
      }
    }
    this.n = n;
    this.energy = energy;
    return sumSquares;
  }

  /**
   * What `push` does with `samples` (at least 8) of digital silence while hunting and already quiet:
   * every window has no carrier, so every phase's register is cleared and the ring holds zeros. The
   * callers' pauses and the time they listen are this silence: most of a call's audio.
   */
  private skipSilence(samples: number): void {
    if (!this.ringZero) {
      this.ring.fill(0);
      this.ringZero = true;
    }
    this.energy = 0;
    this.n += samples;
    for (let p = 0; p < SPB; p++) {
      if (this.runs[p] === 0) continue;
      this.regs[p] = 0;
      this.runs[p] = 0;
      this.qsum[p] = 0;
      this.qring.fill(0, p * 32, p * 32 + 32);
    }
  }

  /** Back to hunting for a sync word (drops a frame in progress without an event). */
  reset(): void {
    this.toSearch();
  }

  /** +1 mark, 0 space, −1 no carrier, for the bit window ending at sample t. */
  private decide(t: number): number {
    if (this.energy < MIN_ENERGY) return -1;
    const r = this.ring;
    const b = t + 1; // oldest sample of the window is at slot (t + 1) & 7
    const x0 = r[b & 7]!, x1 = r[(b + 1) & 7]!, x2 = r[(b + 2) & 7]!, x3 = r[(b + 3) & 7]!;
    const x4 = r[(b + 4) & 7]!, x5 = r[(b + 5) & 7]!, x6 = r[(b + 6) & 7]!, x7 = r[(b + 7) & 7]!;
    // DFT bins 1 (1 kHz) and 2 (2 kHz) of the 8-sample window.
    const re1 = x0 - x4 + S * (x1 - x3 - x5 + x7);
    const im1 = x2 - x6 + S * (x1 + x3 - x5 - x7);
    const re2 = x0 - x2 + x4 - x6;
    const im2 = x1 - x3 + x5 - x7;
    const e1 = re1 * re1 + im1 * im1;
    const e2 = re2 * re2 + im2 * im2;
    // How cleanly one tone wins (1 when the window is aligned with a bit and noise-free).
    this.quality = Math.abs(e1 - e2) / (e1 + e2 + 1);
    return e1 >= e2 ? 1 : 0;
  }

  private search(t: number): void {
    const p = t & (SPB - 1);
    const bit = this.decide(t);
    if (bit < 0) {
      if (this.runs[p] !== 0) {
        this.regs[p] = 0;
        this.runs[p] = 0;
        this.qsum[p] = 0;
        this.qring.fill(0, p * 32, p * 32 + 32);
      }
    } else {
      this.regs[p] = ((this.regs[p]! << 1) | bit) >>> 0;
      const pos = (this.qpos[p]! + 1) & 31;
      this.qpos[p] = pos;
      const slot = p * 32 + pos;
      this.qsum[p] = this.qsum[p]! + this.quality - this.qring[slot]!;
      this.qring[slot] = this.quality;
      if (this.runs[p]! < 32) this.runs[p]!++;
    }
    const match = this.runs[p] === 32 && this.regs[p] === MODEM.sync;
    if (this.mode === Mode.Search) {
      if (match) {
        this.mode = Mode.Align;
        this.alignFirst = t;
        this.alignBest = t;
        this.alignScore = this.qsum[p]!;
      }
      return;
    }
    if (match && this.qsum[p]! > this.alignScore) {
      this.alignBest = t;
      this.alignScore = this.qsum[p]!;
    }
    if (t === this.alignFirst + SPB - 1) {
      // Lock to the phase that decoded the sync word most cleanly: its windows are the bits.
      const end = this.alignBest;
      this.frameStart = end + 1 - (MODEM.preambleBits + 32) * SPB;
      this.startFrame(end + SPB);
    }
  }

  private startFrame(firstBit: number): void {
    this.mode = Mode.Header;
    this.nextBit = firstBit;
    this.quiet = 0;
    this.byte = 0;
    this.bitCount = 0;
    this.headerLen = 0;
    this.events.onSync(Math.max(0, this.frameStart));
  }

  private toSearch(): void {
    this.mode = Mode.Search;
    this.regs.fill(0);
    this.runs.fill(0);
    this.qsum.fill(0);
    this.qring.fill(0);
  }

  private reject(reason: 'header' | 'checksum' | 'carrier'): void {
    this.toSearch();
    this.events.onReject(reason);
  }

  private receiveBit(t: number): void {
    let bit = this.decide(t);
    if (bit < 0) {
      // Two bits without carrier: the frame was cut off (or never was one).
      if (++this.quiet >= 2) return this.reject('carrier');
      bit = 0;
    } else {
      this.quiet = 0;
    }
    this.byte = (this.byte << 1) | bit;
    if (++this.bitCount < 8) return;
    const byte = this.byte & 0xff;
    this.byte = 0;
    this.bitCount = 0;
    if (this.mode === Mode.Header) this.headerByte(byte);
    else this.payloadByte(byte, t);
  }

  private headerByte(byte: number): void {
    this.header[this.headerLen++] = byte;
    if (this.headerLen < 4) return;
    const h = this.header;
    const length = (h[0]! << 8) | h[1]!;
    if (crc16(h.subarray(0, 2)) !== ((h[2]! << 8) | h[3]!) || length < 1 || length > MODEM.maxFrameBytes) {
      return this.reject('header');
    }
    this.mode = Mode.Payload;
    this.length = length;
    this.payload = new Uint8Array(length);
    this.got = 0;
    this.crc = crc32(h.subarray(0, 2));
    this.crcLen = 0;
    this.blockStart = 0;
    this.blockEnd = Math.min(length, MODEM.blockBytes);
  }

  private payloadByte(byte: number, t: number): void {
    if (this.got < this.blockEnd) {
      this.payload[this.got++] = byte;
      return;
    }
    this.crcBuf[this.crcLen++] = byte;
    if (this.crcLen < 4) return;
    this.crcLen = 0;
    this.crc = crc32(this.payload.subarray(this.blockStart, this.blockEnd), this.crc);
    const b = this.crcBuf;
    const sent = ((b[0]! << 24) | (b[1]! << 16) | (b[2]! << 8) | b[3]!) >>> 0;
    if (sent !== this.crc) return this.reject('checksum');
    const complete = this.blockEnd === this.length;
    const soFar = this.payload.subarray(0, this.blockEnd);
    this.events.onVerified(soFar, complete);
    if (complete) {
      const payload = this.payload;
      this.toSearch();
      this.events.onFrame(payload, Math.max(0, this.frameStart), t + 1);
      return;
    }
    this.blockStart = this.blockEnd;
    this.blockEnd = Math.min(this.length, this.blockEnd + MODEM.blockBytes);
  }
}
