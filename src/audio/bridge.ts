/**
 * Between a transport's audio format and what the providers take (G.711 μ-law, 8 kHz): nothing
 * at all for μ-law 8 kHz (Twilio, SIP PCMU: DECISIONS 8, no transcoding on the hot path), and a
 * streaming decode / resample / encode for linear PCM at another rate (the browser's 16 kHz).
 */
import type { AudioFormat } from '../calls/transport.js';
import { mulawDecode, mulawEncode } from './mulaw.js';
import { Resampler } from './resample.js';

const PROVIDER_RATE = 8000;

export class AudioBridge {
  private readonly inbound: Resampler;
  private readonly outbound: Resampler;

  private constructor(readonly format: Extract<AudioFormat, { encoding: 'pcm16' }>) {
    this.inbound = new Resampler(format.sampleRate, PROVIDER_RATE);
    this.outbound = new Resampler(PROVIDER_RATE, format.sampleRate);
  }

  /** The bridge a transport's format needs, or null when its audio goes to the providers as it is. */
  static for(format: AudioFormat): AudioBridge | null {
    return format.encoding === 'mulaw' ? null : new AudioBridge(format);
  }

  /** Caller audio (16-bit little-endian PCM) → μ-law 8 kHz. A trailing odd byte is dropped. */
  toProviders(pcm: Buffer): Buffer {
    const samples = new Int16Array(pcm.length >> 1);
    for (let i = 0; i < samples.length; i++) samples[i] = pcm.readInt16LE(i * 2);
    return mulawEncode(this.inbound.process(samples));
  }

  /** Assistant audio (μ-law 8 kHz) → 16-bit little-endian PCM at the transport's rate. */
  fromProviders(mulaw: Buffer): Buffer {
    const pcm = this.outbound.process(mulawDecode(mulaw));
    const out = Buffer.alloc(pcm.length * 2);
    for (let i = 0; i < pcm.length; i++) out.writeInt16LE(pcm[i]!, i * 2);
    return out;
  }
}
