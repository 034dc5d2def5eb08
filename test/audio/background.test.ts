/**
 * Background clips (DECISIONS 13): the WAV reader, the mix of speech over the bed, the shipped
 * clips, and clip URLs fetched from a real HTTP server on 127.0.0.1 (once per process, at most
 * 10 MB, under the webhook address rules).
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { BackgroundAudio, BackgroundBed, MAX_CLIP_BYTES } from '../../src/audio/background.js';
import { BACKGROUND_CLIPS } from '../../engine/catalog.js';
import { linearToMulaw, mulawDecode, mulawToLinear } from '../../src/audio/mulaw.js';
import { parseWav, wavHeader, WavError } from '../../src/audio/wav.js';
import { WebhookHttpClient } from '../../src/webhooks/http.js';

/** A WAV of a tone: 16-bit PCM unless told otherwise. */
function toneWav(o: { rate?: number; channels?: number; seconds?: number; hz?: number; amplitude?: number } = {}): Buffer {
  const { rate = 16_000, channels = 1, seconds = 2, hz = 440, amplitude = 8_000 } = o;
  const n = Math.round(rate * seconds);
  const data = Buffer.alloc(n * channels * 2);
  for (let i = 0; i < n; i++) {
    const v = Math.round(amplitude * Math.sin((2 * Math.PI * hz * i) / rate));
    for (let c = 0; c < channels; c++) data.writeInt16LE(v, (i * channels + c) * 2);
  }
  const header = wavHeader({ sampleRate: rate, channels, dataBytes: data.length });
  return Buffer.concat([header, data]);
}

const rms = (pcm: Int16Array) => Math.sqrt(pcm.reduce((s, v) => s + v * v, 0) / Math.max(1, pcm.length));

describe('parseWav', () => {
  it('reads 16-bit stereo at 16 kHz as mono', () => {
    const wav = parseWav(toneWav({ channels: 2, seconds: 1 }));
    expect(wav).toMatchObject({ sampleRate: 16_000, channels: 2 });
    expect(wav.pcm.length).toBe(16_000);
    expect(rms(wav.pcm)).toBeGreaterThan(5_000);
  });

  it('reads μ-law and 8-bit PCM', () => {
    const mu = Buffer.from([0, 0x7f, 0x80, 0xff].map((b) => b));
    const header = wavHeader({ sampleRate: 8000, channels: 1, dataBytes: mu.length });
    header.writeUInt16LE(7, 20); // μ-law
    header.writeUInt16LE(8, 34);
    header.writeUInt16LE(1, 32);
    const wav = parseWav(Buffer.concat([header, mu]));
    expect(Array.from(wav.pcm)).toEqual([...mu].map(mulawToLinear));

    const u8 = Buffer.from([128, 255, 0]);
    const h8 = wavHeader({ sampleRate: 8000, channels: 1, dataBytes: u8.length });
    h8.writeUInt16LE(8, 34);
    h8.writeUInt16LE(1, 32);
    expect(Array.from(parseWav(Buffer.concat([h8, u8])).pcm)).toEqual([0, 127 << 8, -32768]);
  });

  it('says what is wrong with files it cannot read', () => {
    expect(() => parseWav(Buffer.from('hello world, not a wav file'))).toThrow(/not a WAV file/);
    const h = wavHeader({ sampleRate: 8000, channels: 1, dataBytes: 0 });
    expect(() => parseWav(h)).toThrow(/no audio/);
    const adpcm = wavHeader({ sampleRate: 8000, channels: 1, dataBytes: 4 });
    adpcm.writeUInt16LE(2, 20);
    expect(() => parseWav(Buffer.concat([adpcm, Buffer.alloc(4)]))).toThrow(/encoding 2 .* is not read/);
  });

  it('never throws anything but a WavError, whatever the bytes (fuzz)', () => {
    const base = toneWav({ seconds: 0.01 });
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 200 }), fc.integer({ min: 0, max: base.length }), (noise, at) => {
        const bytes = Buffer.concat([base.subarray(0, at), Buffer.from(noise)]);
        try {
          parseWav(bytes);
        } catch (err) {
          expect(err).toBeInstanceOf(WavError);
        }
      }),
      { numRuns: 500 },
    );
  });
});

describe('BackgroundBed', () => {
  const loopPcm = new Int16Array(1600).map((_, i) => Math.round(3000 * Math.sin(i / 5)));
  const loop = { pcm: loopPcm, mulaw: Buffer.from(loopPcm.map((v) => linearToMulaw(v))) };

  it('mixes speech over the bed sample by sample (μ-law decode, add, clamp, encode)', () => {
    const bed = new BackgroundBed(loop, 3);
    const speech = Buffer.from(Array.from({ length: 160 }, (_, i) => linearToMulaw(20_000 * Math.sin(i / 3))));
    const out = bed.mix(speech);
    for (let i = 0; i < 160; i++) {
      const expected = Math.max(-32768, Math.min(32767, mulawToLinear(speech[i]!) + loopPcm[480 + i]!));
      expect(out[i]).toBe(linearToMulaw(expected));
    }
  });

  it('loops: frames alone walk the loop and wrap to its start', () => {
    const bed = new BackgroundBed(loop);
    const seen = Array.from({ length: 12 }, () => Buffer.from(bed.next()));
    expect(seen[10]!.equals(seen[0]!)).toBe(true);
    expect(seen[11]!.equals(loop.mulaw.subarray(160, 320))).toBe(true);
  });
});

describe('BackgroundAudio', () => {
  let server: Server;
  let base: string;
  const hits = new Map<string, number>();
  const http = new WebhookHttpClient({ allowPrivate: true });
  beforeAll(async () => {
    server = createServer((req, res) => {
      hits.set(req.url!, (hits.get(req.url!) ?? 0) + 1);
      if (req.url === '/tone.wav') return res.end(toneWav({ rate: 44_100, channels: 2, seconds: 3 }));
      if (req.url === '/short.wav') return res.end(toneWav({ rate: 8000, seconds: 0.05 }));
      if (req.url === '/text.wav') return res.end('<html>not audio</html>');
      if (req.url === '/huge.wav') {
        res.setHeader('content-length', String(MAX_CLIP_BYTES + 1));
        return res.end(Buffer.alloc(MAX_CLIP_BYTES + 1));
      }
      if (req.url === '/huge-chunked.wav') {
        // no length given: the limit is found while reading
        for (let i = 0; i < 11; i++) res.write(Buffer.alloc(1024 * 1024));
        return res.end();
      }
      res.statusCode = 404;
      res.end('no such clip');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await http.close();
    await new Promise((r) => server.close(r));
  });

  it('plays the shipped clips: office and cafe are audible, at the volume asked', async () => {
    const clips = new BackgroundAudio({ fetcher: null, allowPrivate: false });
    for (const id of ['office', 'cafe']) {
      expect(await clips.problem(id)).toBeNull();
      const loud = await clips.bed(id, 1);
      const quiet = await clips.bed(id, 0.25);
      const a = mulawDecode(Buffer.concat(Array.from({ length: 250 }, () => Buffer.from(loud.next()))));
      const b = mulawDecode(Buffer.concat(Array.from({ length: 250 }, () => Buffer.from(quiet.next()))));
      const db = 20 * Math.log10(rms(a) / 32768);
      expect(db).toBeGreaterThan(-35);
      expect(db).toBeLessThan(-10);
      expect(rms(b) / rms(a)).toBeGreaterThan(0.2);
      expect(rms(b) / rms(a)).toBeLessThan(0.3);
    }
    expect(BACKGROUND_CLIPS.map((c) => c.id)).toEqual(['office', 'cafe']);
  });

  it('refuses unknown names and non-https URLs', async () => {
    const clips = new BackgroundAudio({ fetcher: http, allowPrivate: false });
    expect(await clips.problem('jungle')).toMatch(/unknown clip "jungle": one of "office", "cafe"/);
    expect(await clips.problem('ftp://example.com/a.wav')).toMatch(/must use https/);
    expect(await clips.problem(`${base}/tone.wav`)).toMatch(/must use https/);
    await expect(clips.bed('jungle', 0.5)).rejects.toThrow(/unknown clip/);
  });

  it('fetches a URL clip once per process, resampled to 8 kHz mono, and keeps it', async () => {
    const clips = new BackgroundAudio({ fetcher: http, allowPrivate: true });
    expect(await clips.problem(`${base}/tone.wav`)).toBeNull();
    const beds = await Promise.all([clips.bed(`${base}/tone.wav`, 0.5), clips.bed(`${base}/tone.wav`, 0.7), clips.bed(`${base}/tone.wav`, 0.5)]);
    expect(hits.get('/tone.wav')).toBe(1);
    const pcm = mulawDecode(Buffer.concat(Array.from({ length: 50 }, () => Buffer.from(beds[0]!.next()))));
    // 8000 × 0.5 after resampling: about 4000 peak, 2830 RMS
    expect(rms(pcm)).toBeGreaterThan(2_300);
    expect(rms(pcm)).toBeLessThan(3_300);
    // a very short clip is repeated up to a second
    expect(await clips.problem(`${base}/short.wav`)).toBeNull();
  });

  it('says why a URL cannot be used, and does not ask again for a while', async () => {
    const clips = new BackgroundAudio({ fetcher: http, allowPrivate: true });
    expect(await clips.problem(`${base}/text.wav`)).toMatch(/not a usable WAV file: not a WAV file/);
    expect(await clips.problem(`${base}/missing.wav`)).toMatch(/answered HTTP 404/);
    expect(await clips.problem(`${base}/huge.wav`)).toMatch(/larger than 10 MB/);
    expect(await clips.problem(`${base}/huge-chunked.wav`)).toMatch(/larger than 10 MB/);
    expect(await clips.problem(`${base}/missing.wav`)).toMatch(/answered HTTP 404/);
    expect(hits.get('/missing.wav')).toBe(1);
  });

  it('applies the webhook address rules: a private address is refused unless allowed', async () => {
    const strict = new WebhookHttpClient({ allowPrivate: false });
    try {
      const clips = new BackgroundAudio({ fetcher: strict, allowPrivate: false });
      expect(await clips.problem('https://127.0.0.1:1/a.wav')).toMatch(/blocked address/);
      expect(await clips.problem('https://localhost:1/a.wav')).toMatch(/blocked address|could not resolve/);
    } finally {
      await strict.close();
    }
  });
});
