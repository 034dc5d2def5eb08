/**
 * The sandbox round trip (issue 4): text → sandbox TTS → μ-law → sandbox STT → the same text, for
 * 1,000 generated strings (ASCII, graphemes, any code point), and again with 1% of the μ-law
 * bytes corrupted, where the checksums must reject frames instead of yielding garbage.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Transcript, TtsEvents } from '../../src/providers/types.js';
import { createSandboxStt, createSandboxTts, type SandboxSttSession } from '../../src/providers/sandbox/index.js';

const STRINGS_PER_RUN = 10;
const RUNS = 100; // × 10 = 1,000 strings per property

/** 1..200 units: printable ASCII, graphemes, any code point; half of them as long as fast-check goes. */
const text = fc.oneof(
  ...(['grapheme-ascii', 'grapheme', 'binary'] as const).flatMap((unit) => [
    fc.string({ unit, minLength: 1, maxLength: 200 }),
    fc.string({ unit, minLength: 1, maxLength: 200, size: 'max' }),
  ]),
);

/** Speaks each string as its own flushed sentence in one TTS session; resolves with all audio. */
async function speak(strings: readonly string[]): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let done!: () => void;
  const finished = new Promise<void>((resolve) => (done = resolve));
  const events: TtsEvents = {
    onAudio: (c) => chunks.push(c),
    onDone: () => done(),
    onError: (err) => {
      throw err;
    },
  };
  const tts = await createSandboxTts().open({ provider: 'sandbox', voice_id: 'sandbox' }, events);
  for (const s of strings) {
    tts.sendText(s);
    tts.flush();
  }
  tts.end();
  await finished;
  for (const c of chunks) expect(c.length % 160).toBe(0);
  return Buffer.concat(chunks);
}

/** Feeds audio in 20 ms frames (then 0.5 s of silence) and returns every transcript. */
async function listen(audio: Buffer): Promise<{ transcripts: Transcript[]; stats: SandboxSttSession['stats'] }> {
  const transcripts: Transcript[] = [];
  const stt = (await createSandboxStt().connect(
    { provider: 'sandbox' },
    { onTranscript: (t) => transcripts.push(t), onError: (err) => expect.fail(err.message) },
  )) as SandboxSttSession;
  for (let i = 0; i < audio.length; i += 160) stt.sendAudio(audio.subarray(i, i + 160));
  stt.sendAudio(Buffer.alloc(4000, 0xff));
  await new Promise((r) => setImmediate(r));
  const stats = { ...stt.stats };
  await stt.close();
  return { transcripts, stats };
}

/** xorshift32: the corruption pattern comes from a fast-check seed, so failures replay. */
function corrupt(audio: Buffer, seed: number, rate: number): Buffer {
  const out = Buffer.from(audio);
  let s = seed | 1;
  const next = () => {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return (s >>> 0) / 2 ** 32;
  };
  for (let i = 0; i < out.length; i++) {
    if (next() < rate) out[i] = (out[i]! + 1 + Math.floor(next() * 255)) & 0xff; // always a different byte
  }
  return out;
}

describe('sandbox TTS → μ-law → sandbox STT', () => {
  it('round-trips 1,000 generated strings exactly (interims are verified prefixes)', { timeout: 120_000 }, async () => {
    let frames = 0;
    let bytes = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(text, { minLength: STRINGS_PER_RUN, maxLength: STRINGS_PER_RUN }), async (strings) => {
        // What a voice says of a string: surrounding whitespace is not speech, blank is silence.
        const expected = strings.map((s) => s.trim()).filter((s) => s !== '');
        const { transcripts, stats } = await listen(await speak(strings));
        const finals = transcripts.filter((t) => t.isFinal);
        expect(finals.map((t) => t.text)).toEqual(expected);
        // 160 ms between sentences is shorter than the 300 ms endpointing: one end of turn, at the end.
        expect(finals.map((t) => t.speechFinal)).toEqual(expected.map((_, i) => i === expected.length - 1));
        let k = 0;
        for (const t of transcripts) {
          if (t.isFinal) k++;
          else expect(expected[k]!.startsWith(t.text), `interim ${JSON.stringify(t.text)}`).toBe(true);
        }
        expect(stats.rejected).toBe(0);
        frames += stats.frames;
        bytes += expected.reduce((n, s) => n + Buffer.byteLength(s), 0);
      }),
      { numRuns: RUNS },
    );
    expect(frames).toBeGreaterThan(900);
    console.info(`round trip: ${frames} frames, ${bytes} UTF-8 bytes, all exact`);
  });

  it('with 1% of the bytes corrupted, checksums reject bad frames: no transcript ever differs from its source', { timeout: 120_000 }, async () => {
    let sent = 0;
    let accepted = 0;
    let rejected = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(text, { minLength: STRINGS_PER_RUN, maxLength: STRINGS_PER_RUN }),
        fc.integer(),
        async (strings, seed) => {
          const expected = strings.map((s) => s.trim()).filter((s) => s !== '');
          const { transcripts, stats } = await listen(corrupt(await speak(strings), seed, 0.01));
          // Finals are an in-order subsequence of the sources; interims are prefixes of the next one.
          let j = 0;
          for (const t of transcripts.filter((x) => x.isFinal)) {
            while (j < expected.length && expected[j] !== t.text) j++;
            expect(j, `final ${JSON.stringify(t.text)} is not one of the sources`).toBeLessThan(expected.length);
            j++;
          }
          for (const t of transcripts.filter((x) => !x.isFinal)) {
            expect(expected.some((e) => e.startsWith(t.text)), `interim ${JSON.stringify(t.text)}`).toBe(true);
          }
          sent += expected.length;
          accepted += transcripts.filter((t) => t.isFinal).length;
          rejected += stats.rejected;
        },
      ),
      { numRuns: RUNS },
    );
    expect(sent).toBeGreaterThan(900);
    expect(rejected).toBeGreaterThan(0);
    expect(accepted).toBeLessThan(sent);
    console.info(`1% corruption: ${accepted}/${sent} frames verified, ${rejected} rejected by a checksum, the rest never synced`);
  });
});
