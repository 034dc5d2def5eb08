import { describe, expect, it } from 'vitest';
import { AudioBridge } from '../../src/audio/bridge.js';
import { mulawDecode } from '../../src/audio/mulaw.js';
import { MULAW_8K } from '../../src/calls/transport.js';

/** 16 kHz 16-bit PCM of a 440 Hz tone, `ms` long. */
function tone(ms: number, rate = 16_000): Buffer {
  const n = (rate * ms) / 1000;
  const out = Buffer.alloc(n * 2);
  for (let i = 0; i < n; i++) out.writeInt16LE(Math.round(8000 * Math.sin((2 * Math.PI * 440 * i) / rate)), i * 2);
  return out;
}

const rms = (samples: ArrayLike<number>) => Math.sqrt(Array.from(samples).reduce((a, x) => a + x * x, 0) / samples.length);

describe('AudioBridge', () => {
  it('is not needed for μ-law 8 kHz: that audio reaches the providers as it is', () => {
    expect(AudioBridge.for(MULAW_8K)).toBeNull();
  });

  it('turns 16 kHz PCM into μ-law 8 kHz and back, 20 ms frames streaming, the tone kept', () => {
    const bridge = AudioBridge.for({ encoding: 'pcm16', sampleRate: 16_000 })!;
    const pcm = tone(1000);
    const mulaw: Buffer[] = [];
    for (let i = 0; i < pcm.length; i += 640) mulaw.push(bridge.toProviders(pcm.subarray(i, i + 640)));
    const toProviders = Buffer.concat(mulaw);
    // 8,000 samples a second, give or take the resampler's filter delay
    expect(Math.abs(toProviders.length - 8000)).toBeLessThan(64);
    const decoded = mulawDecode(toProviders.subarray(400));
    expect(rms(decoded)).toBeGreaterThan(8000 * 0.6);

    const back: Buffer[] = [];
    for (let i = 0; i < toProviders.length; i += 160) back.push(bridge.fromProviders(toProviders.subarray(i, i + 160)));
    const out = Buffer.concat(back);
    expect(Math.abs(out.length / 2 - 2 * toProviders.length)).toBeLessThan(128);
    const samples = new Int16Array(out.length / 2).map((_, i) => out.readInt16LE(i * 2));
    expect(rms(samples.subarray(800))).toBeGreaterThan(8000 * 0.6);
  });

  it('drops a trailing odd byte instead of misreading the stream', () => {
    const bridge = AudioBridge.for({ encoding: 'pcm16', sampleRate: 8000 })!;
    expect(bridge.toProviders(Buffer.alloc(321)).length).toBe(160);
  });
});
