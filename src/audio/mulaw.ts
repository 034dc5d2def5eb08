/**
 * G.711 μ-law (the telephone network's 8-bit companding, what Twilio sends and takes), with
 * lookup tables for both directions. Bit-exact with the classic Sun Microsystems `g711.c`
 * (`linear2ulaw` / `ulaw2linear`), which is also what Python's `audioop` and SoX use:
 * 16-bit linear in, the 2 low bits dropped (14-bit G.711 domain), bias 0x84, clip at 32635.
 */

/** The μ-law byte for digital silence (linear 0); Twilio fills quiet with it. */
export const MULAW_SILENCE = 0xff;

const BIAS = 0x84;
/** Largest magnitude in the 14-bit domain before the bias pushes it past the last segment. */
const CLIP = 8159;

function encodeSlow(sample: number): number {
  let pcm = sample >> 2; // 14-bit domain, arithmetic shift like the C code
  let mask: number;
  if (pcm < 0) {
    pcm = -pcm;
    mask = 0x7f;
  } else {
    mask = 0xff;
  }
  if (pcm > CLIP) pcm = CLIP;
  pcm += BIAS >> 2;
  // Segment: the position of the highest set bit above bit 5 (segment ends 0x3F, 0x7F, … 0x1FFF).
  let seg = 0;
  for (let end = 0x3f; seg < 8 && pcm > end; end = (end << 1) | 1) seg++;
  if (seg >= 8) return 0x7f ^ mask;
  return (((seg << 4) | ((pcm >> (seg + 1)) & 0x0f)) ^ mask) & 0xff;
}

function decodeSlow(byte: number): number {
  const u = ~byte & 0xff;
  let t = ((u & 0x0f) << 3) + BIAS;
  t <<= (u & 0x70) >> 4;
  return u & 0x80 ? BIAS - t : t - BIAS;
}

/** 256 entries: μ-law byte → 16-bit linear. */
const DECODE_TABLE = new Int16Array(256);
for (let i = 0; i < 256; i++) DECODE_TABLE[i] = decodeSlow(i);

/** 16,384 entries indexed by the 14-bit sample (`sample >> 2`, two's complement) → μ-law byte. */
const ENCODE_TABLE = new Uint8Array(1 << 14);
for (let i = 0; i < 1 << 14; i++) {
  const sample14 = i >= 1 << 13 ? i - (1 << 14) : i;
  ENCODE_TABLE[i] = encodeSlow(sample14 << 2);
}

/** The decode table itself (read-only by convention), for hot loops that decode byte by byte. */
export const MULAW_DECODE_TABLE: Readonly<Int16Array> = DECODE_TABLE;

/** The encode table itself, indexed by `(sample >> 2) & 0x3fff` (read-only by convention), for hot loops. */
export const MULAW_ENCODE_TABLE: Readonly<Uint8Array> = ENCODE_TABLE;

/** One 16-bit linear sample (clamped to −32768..32767, truncated to an integer) → μ-law byte. */
export function linearToMulaw(sample: number): number {
  let s = Math.trunc(sample);
  if (s > 32767) s = 32767;
  else if (s < -32768) s = -32768;
  else if (s !== s) s = 0; // NaN
  return ENCODE_TABLE[(s >> 2) & 0x3fff]!;
}

/** One μ-law byte (its low 8 bits) → 16-bit linear sample. */
export function mulawToLinear(byte: number): number {
  return DECODE_TABLE[byte & 0xff]!;
}

/** μ-law bytes → 16-bit linear samples (one per byte). */
export function mulawDecode(mulaw: Uint8Array): Int16Array {
  const out = new Int16Array(mulaw.length);
  for (let i = 0; i < mulaw.length; i++) out[i] = DECODE_TABLE[mulaw[i]!]!;
  return out;
}

/** 16-bit linear samples → μ-law bytes (one per sample). */
export function mulawEncode(pcm: Int16Array): Buffer {
  const out = Buffer.allocUnsafe(pcm.length);
  for (let i = 0; i < pcm.length; i++) out[i] = ENCODE_TABLE[(pcm[i]! >> 2) & 0x3fff]!;
  return out;
}
