import { describe, expect, it } from 'vitest';
import { ProviderError, type TtsEvents } from '../../src/providers/types.js';
import { createSandboxTts, synthesizeSandboxSpeech, sandboxSpeechBytes } from '../../src/providers/sandbox/index.js';
import { FskReceiver } from '../../src/providers/sandbox/modem.js';
import { SANDBOX_TTS_MAX_CHUNK_BYTES } from '../../src/providers/sandbox/tts.js';

const tick = () => new Promise((r) => setImmediate(r));
const immediates = () => process.getActiveResourcesInfo().filter((r) => r === 'Immediate').length;

function decode(audio: Buffer): string[] {
  const frames: string[] = [];
  new FskReceiver({
    onSync() {},
    onVerified() {},
    onReject() {},
    onFrame: (p) => frames.push(new TextDecoder().decode(p)),
  }).push(audio);
  return frames;
}

async function open(signal?: AbortSignal) {
  const chunks: Buffer[] = [];
  const log: string[] = [];
  let done!: () => void;
  const finished = new Promise<void>((r) => (done = r));
  const events: TtsEvents = {
    onAudio: (c) => chunks.push(c),
    onDone: () => {
      log.push('done');
      done();
    },
    onError: (e) => log.push(`error ${e.code}`),
  };
  const tts = await createSandboxTts().open({ provider: 'sandbox', voice_id: 'sandbox' }, events, signal);
  return { tts, chunks, log, finished, audio: () => Buffer.concat(chunks) };
}

describe('sandbox TTS', () => {
  it('turns each flushed sentence into a frame, in chunks of whole 160-byte frames (at most 1 s, never across sentences), asynchronously, then onDone', async () => {
    const { tts, chunks, log, finished, audio } = await open();
    tts.sendText('Hello ');
    tts.sendText('there. ');
    tts.flush();
    tts.sendText(' How are');
    tts.sendText(' you?');
    expect(chunks).toHaveLength(0); // nothing synchronously
    tts.end(); // flushes the rest
    await finished;
    expect(log).toEqual(['done']);
    expect(chunks.every((c) => c.length > 0 && c.length % 160 === 0 && c.length <= SANDBOX_TTS_MAX_CHUNK_BYTES)).toBe(true);
    // each sentence's audio is its own chunks: the first sentence's bytes end on a chunk boundary
    const first = sandboxSpeechBytes('Hello there.');
    expect(chunks.map((c) => c.length).reduce<number[]>((ends, n) => [...ends, (ends.at(-1) ?? 0) + n], [])).toContain(first);
    expect(decode(audio())).toEqual(['Hello there.', 'How are you?']);
    expect(audio().length).toBe(sandboxSpeechBytes('Hello there.') + sandboxSpeechBytes('How are you?'));
    expect(audio().equals(Buffer.concat([synthesizeSandboxSpeech('Hello there.'), synthesizeSandboxSpeech('How are you?')]))).toBe(true);
    tts.sendText('after the end');
    tts.flush();
    await tick();
    expect(log).toEqual(['done']);
  });

  it('a sentence longer than a second comes in several chunks, one an event-loop turn, each at most a second', async () => {
    const { tts, chunks, finished, audio } = await open();
    const text = 'A long sentence that the sandbox voice takes more than two seconds to say, '.repeat(3).trim();
    tts.sendText(text);
    tts.end();
    await tick();
    expect(chunks).toHaveLength(1); // the first turn hands out one chunk, not the whole reply
    await finished;
    expect(sandboxSpeechBytes(text)).toBeGreaterThan(2 * SANDBOX_TTS_MAX_CHUNK_BYTES);
    expect(chunks.length).toBe(Math.ceil(sandboxSpeechBytes(text) / SANDBOX_TTS_MAX_CHUNK_BYTES));
    expect(chunks.slice(0, -1).every((c) => c.length === SANDBOX_TTS_MAX_CHUNK_BYTES)).toBe(true);
    expect(decode(audio())).toEqual([text]);
  });

  it('blank text is silence: no frame; end() with nothing sent still ends', async () => {
    const { tts, chunks, finished } = await open();
    tts.sendText('   \n ');
    tts.flush();
    tts.end();
    await finished;
    expect(chunks).toHaveLength(0);
  });

  it('cancel() stops at once: no more audio, no onDone, no immediates left', async () => {
    const before = immediates();
    const { tts, chunks, log } = await open();
    tts.sendText('A long reply. '.repeat(40)); // ≈ 8 s of audio, many event-loop turns
    tts.end();
    await tick();
    const heard = chunks.length;
    expect(heard).toBeGreaterThan(0);
    expect(heard).toBeLessThan(sandboxSpeechBytes('A long reply. '.repeat(40).trim()) / 160);
    tts.cancel();
    expect(immediates()).toBe(before);
    for (let i = 0; i < 20; i++) await tick();
    expect(chunks).toHaveLength(heard);
    expect(log).toEqual([]);
    tts.cancel(); // twice is fine
  });

  it('an abort signal cancels like cancel(); an already aborted one refuses to open', async () => {
    const ac = new AbortController();
    const before = immediates();
    const { tts, chunks, log } = await open(ac.signal);
    tts.sendText('Interrupted mid-sentence, as a caller would. '.repeat(10));
    tts.flush();
    await tick();
    ac.abort();
    const heard = chunks.length;
    for (let i = 0; i < 10; i++) await tick();
    expect(chunks).toHaveLength(heard);
    expect(log).toEqual([]);
    expect(immediates()).toBe(before);
    const err = await createSandboxTts()
      .open({ provider: 'sandbox' }, { onAudio() {}, onDone() {}, onError() {} }, AbortSignal.abort())
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ProviderError);
    expect(err).toMatchObject({ code: 'PROVIDER_ABORTED', provider: 'sandbox' });
  });
});
