/**
 * RIFF WAV, both ways: `parseWav` reads what customers give us as a background clip (any common
 * PCM layout: 8/16/24/32-bit integers, 32-bit float, G.711 μ-law or A-law, any channel count and
 * rate) and mixes it down to mono 16-bit; `wavHeader` writes the 44-byte header of a plain PCM
 * file (recordings, the demo), whose sizes can be patched once the length is known (`sealWav`:
 * the file of a writer that stopped before it did).
 */
import { open } from 'node:fs/promises';
import { ErrorCodes, SwitchboardError } from '../../engine/errors.js';
import { mulawToLinear } from './mulaw.js';

export class WavError extends SwitchboardError {
  static override readonly codes = [ErrorCodes.WAV_INVALID] as const;
  override name = 'WavError';
  constructor(message: string) {
    super(ErrorCodes.WAV_INVALID, message);
  }
}

export interface DecodedWav {
  sampleRate: number;
  /** The channels of the file, before the mix down. */
  channels: number;
  /** Mono, 16-bit: the channels averaged. */
  pcm: Int16Array;
}

const FORMAT_PCM = 1;
const FORMAT_FLOAT = 3;
const FORMAT_ALAW = 6;
const FORMAT_MULAW = 7;
const FORMAT_EXTENSIBLE = 0xfffe;

function alawToLinear(byte: number): number {
  let a = byte ^ 0x55;
  const sign = a & 0x80;
  const exponent = (a & 0x70) >> 4;
  let t = (a & 0x0f) << 4;
  t += exponent === 0 ? 8 : 0x108;
  if (exponent > 1) t <<= exponent - 1;
  a = sign ? t : -t;
  return a;
}

/**
 * A WAV file's audio as mono 16-bit samples. Throws a `WavError` saying what is wrong (not RIFF,
 * no `fmt ` or `data` chunk, an encoding it does not read) in words a customer can act on.
 */
export function parseWav(file: Uint8Array): DecodedWav {
  const buf = Buffer.from(file.buffer, file.byteOffset, file.byteLength);
  if (buf.length < 12 || buf.toString('latin1', 0, 4) !== 'RIFF' || buf.toString('latin1', 8, 12) !== 'WAVE') {
    throw new WavError('not a WAV file (no RIFF/WAVE header)');
  }
  let format: { tag: number; channels: number; rate: number; bits: number; blockAlign: number } | null = null;
  let data: Buffer | null = null;
  let at = 12;
  while (at + 8 <= buf.length) {
    const id = buf.toString('latin1', at, at + 4);
    const size = buf.readUInt32LE(at + 4);
    const body = buf.subarray(at + 8, Math.min(buf.length, at + 8 + size));
    if (id === 'fmt ') {
      if (body.length < 16) throw new WavError('the fmt chunk is too short');
      let tag = body.readUInt16LE(0);
      // WAVE_FORMAT_EXTENSIBLE: the real format is the first two bytes of the sub-format GUID
      if (tag === FORMAT_EXTENSIBLE && body.length >= 26) tag = body.readUInt16LE(24);
      format = { tag, channels: body.readUInt16LE(2), rate: body.readUInt32LE(4), blockAlign: body.readUInt16LE(12), bits: body.readUInt16LE(14) };
    } else if (id === 'data') {
      data = body;
      break;
    }
    at += 8 + size + (size & 1);
  }
  if (!format) throw new WavError('no fmt chunk before the audio');
  if (!data) throw new WavError('no data chunk');
  const { tag, channels, rate, bits } = format;
  if (channels < 1 || channels > 16) throw new WavError(`${channels} channels: 1 to 16 are read`);
  if (rate < 4000 || rate > 192_000) throw new WavError(`a sample rate of ${rate} Hz: 4000 to 192000 Hz are read`);
  const bytes = bits / 8;
  const readable =
    (tag === FORMAT_PCM && [8, 16, 24, 32].includes(bits)) ||
    (tag === FORMAT_FLOAT && bits === 32) ||
    ((tag === FORMAT_MULAW || tag === FORMAT_ALAW) && bits === 8);
  if (!readable) {
    throw new WavError(
      `encoding ${tag} at ${bits} bits is not read: use PCM (8, 16, 24 or 32-bit), 32-bit float, μ-law or A-law`,
    );
  }
  const frameBytes = bytes * channels;
  const frames = Math.floor(data.length / frameBytes);
  if (frames === 0) throw new WavError('the data chunk holds no audio');
  const sample = (offset: number): number => {
    switch (tag) {
      case FORMAT_MULAW:
        return mulawToLinear(data![offset]!);
      case FORMAT_ALAW:
        return alawToLinear(data![offset]!);
      case FORMAT_FLOAT:
        return Math.max(-1, Math.min(1, data!.readFloatLE(offset) || 0)) * 32767;
      default:
        if (bits === 8) return (data![offset]! - 128) << 8;
        if (bits === 16) return data!.readInt16LE(offset);
        if (bits === 24) return data!.readIntLE(offset, 3) >> 8;
        return data!.readInt32LE(offset) / 65536;
    }
  };
  const pcm = new Int16Array(frames);
  for (let f = 0; f < frames; f++) {
    let sum = 0;
    for (let c = 0; c < channels; c++) sum += sample(f * frameBytes + c * bytes);
    pcm[f] = Math.max(-32768, Math.min(32767, Math.round(sum / channels)));
  }
  return { sampleRate: rate, channels, pcm };
}

/**
 * The 44-byte header of a 16-bit PCM WAV holding `dataBytes` of audio. Writers that stream the
 * audio write it first with 0 and again at offset 0 once the length is known.
 */
export function wavHeader(options: { sampleRate: number; channels: number; dataBytes: number }): Buffer {
  const { sampleRate, channels, dataBytes } = options;
  const header = Buffer.alloc(44);
  header.write('RIFF', 0, 'latin1');
  header.writeUInt32LE(Math.min(0xffffffff, 36 + dataBytes), 4);
  header.write('WAVEfmt ', 8, 'latin1');
  header.writeUInt32LE(16, 16);
  header.writeUInt16LE(FORMAT_PCM, 20);
  header.writeUInt16LE(channels, 22);
  header.writeUInt32LE(sampleRate, 24);
  header.writeUInt32LE(sampleRate * channels * 2, 28);
  header.writeUInt16LE(channels * 2, 32);
  header.writeUInt16LE(16, 34);
  header.write('data', 36, 'latin1');
  header.writeUInt32LE(Math.min(0xffffffff, dataBytes), 40);
  return header;
}

/**
 * A streamed 16-bit PCM WAV whose writer stopped before it wrote its sizes (its process died):
 * the header gets the sizes of the whole frames written, and a torn last frame is cut off.
 * Returns the audio's bytes, or null when the file is not such a WAV (nothing is changed then).
 */
export async function sealWav(path: string): Promise<number | null> {
  const fh = await open(path, 'r+');
  try {
    const size = (await fh.stat()).size;
    const header = Buffer.alloc(44);
    if (size < 44 || (await fh.read(header, 0, 44, 0)).bytesRead < 44) return null;
    const riff = header.toString('latin1', 0, 4) === 'RIFF' && header.toString('latin1', 8, 16) === 'WAVEfmt ' && header.toString('latin1', 36, 40) === 'data';
    const blockAlign = header.readUInt16LE(32);
    if (!riff || header.readUInt16LE(20) !== FORMAT_PCM || blockAlign === 0) return null;
    const dataBytes = Math.floor((size - 44) / blockAlign) * blockAlign;
    const sealed = wavHeader({ sampleRate: header.readUInt32LE(24), channels: header.readUInt16LE(22), dataBytes });
    await fh.write(sealed, 0, 44, 0);
    await fh.truncate(44 + dataBytes);
    return dataBytes;
  } finally {
    await fh.close();
  }
}
