import { describe, expect, it } from 'vitest';
import type { SttConfig } from '../../engine/schema.js';
import { ProviderError, type SttEvents } from '../../src/providers/types.js';
import { createSandboxStt, synthesizeSandboxSpeech } from '../../src/providers/sandbox/index.js';
import { frameSamples } from '../../src/providers/sandbox/modem.js';

const silence = (ms: number) => Buffer.alloc(ms * 8, 0xff);
const tick = () => new Promise((r) => setImmediate(r));

async function session(config: Partial<SttConfig> = {}) {
  const log: string[] = [];
  const events: SttEvents = {
    onTranscript: (t) =>
      log.push(`${t.isFinal ? (t.speechFinal ? 'FINAL' : 'final') : 'interim'} ${JSON.stringify(t.text)}`),
    onSpeechStarted: () => log.push('speech-started'),
    onUtteranceEnd: () => log.push('utterance-end'),
    onError: (err) => log.push(`error ${err.code}`),
    onClose: () => log.push('close'),
  };
  const stt = await createSandboxStt().connect({ provider: 'sandbox', ...config }, events);
  const send = (audio: Buffer, chunk = 160) => {
    for (let i = 0; i < audio.length; i += chunk) stt.sendAudio(audio.subarray(i, i + chunk));
  };
  return { stt, log, send };
}

describe('sandbox STT', () => {
  it('speech start, verified interims, a final with endpoint after 300 ms of silence, then utterance end', async () => {
    const { stt, log, send } = await session();
    send(silence(100));
    send(synthesizeSandboxSpeech('Hello there, how are you today?'));
    await tick();
    expect(log).toEqual(['speech-started', 'interim "Hello there, how"', 'interim "Hello there, how are you today?"']);
    send(silence(200)); // 160 ms gap inside the TTS audio + 200 ms > 300 ms endpointing
    await tick();
    expect(log.at(-1)).toBe('FINAL "Hello there, how are you today?"');
    send(silence(1000));
    await tick();
    expect(log.slice(3)).toEqual(['FINAL "Hello there, how are you today?"', 'utterance-end']);
    await stt.close();
    expect(log.at(-1)).toBe('close');
  });

  it('gives times and confidence on finals', async () => {
    const finals: unknown[] = [];
    const stt = await createSandboxStt().connect(
      { provider: 'sandbox' },
      { onTranscript: (t) => t.isFinal && finals.push(t), onError: () => {} },
    );
    stt.sendAudio(Buffer.concat([silence(500), synthesizeSandboxSpeech('Hi'), silence(500)]));
    await tick();
    expect(finals).toEqual([
      { text: 'Hi', isFinal: true, speechFinal: true, confidence: 1, start: 0.5, duration: expect.closeTo(0.144, 3) },
    ]);
    await stt.close();
  });

  it('sentences closer than the endpointing are finals without an endpoint until the pause', async () => {
    const { log, send } = await session();
    send(Buffer.concat([synthesizeSandboxSpeech('One.'), synthesizeSandboxSpeech('Two.'), silence(400)]));
    await tick();
    expect(log.filter((l) => !l.startsWith('interim'))).toEqual(['speech-started', 'final "One."', 'FINAL "Two."']);
  });

  it('follows stt_config.endpointing and utterance_end_ms', async () => {
    const { log, send } = await session({ endpointing: 100, utterance_end_ms: 140 });
    send(Buffer.concat([synthesizeSandboxSpeech('One.'), synthesizeSandboxSpeech('Two.'), silence(400)]));
    await tick();
    expect(log.filter((l) => !l.startsWith('interim'))).toEqual([
      'speech-started', 'FINAL "One."', 'utterance-end', 'speech-started', 'FINAL "Two."', 'utterance-end',
    ]);
  });

  it('finalize() flushes the verified text at once', async () => {
    const { stt, log, send } = await session();
    send(synthesizeSandboxSpeech('Flush me.').subarray(0, -1280)); // no trailing silence
    await tick();
    expect(log.some((l) => l.startsWith('FINAL') || l.startsWith('final'))).toBe(false);
    stt.finalize();
    await tick();
    expect(log.at(-1)).toBe('FINAL "Flush me."');
    stt.finalize(); // nothing pending: nothing more
    send(silence(2000));
    await tick();
    expect(log.filter((l) => l.includes('Flush me.') && !l.startsWith('interim'))).toHaveLength(1);
  });

  it('events do not depend on how the audio is chunked', async () => {
    const audio = Buffer.concat([silence(30), synthesizeSandboxSpeech('Chunk me any way you like, please.'), silence(1200)]);
    const logs: string[][] = [];
    for (const chunk of [1, 33, 160, 999, audio.length]) {
      const { log, send } = await session();
      send(audio, chunk);
      await tick();
      logs.push(log);
    }
    for (const log of logs.slice(1)) expect(log).toEqual(logs[0]);
    expect(logs[0]).toContain('FINAL "Chunk me any way you like, please."');
  });

  it('a frame that fails its checksum yields no transcript at all', async () => {
    const { log, send } = await session();
    const text = 'This frame will be damaged in its last block.';
    const bad = Buffer.from(synthesizeSandboxSpeech(text));
    // Invert one bit of the frame's last CRC (the postamble's 8 bits come after it).
    const at = (frameSamples(Buffer.byteLength(text)) / 8 - 8 - 10) * 8;
    const mark = bad.subarray(0, 8);
    const space = Buffer.from(bad.subarray(8, 16));
    (bad.subarray(at, at + 8).equals(mark) ? space : Buffer.from(mark)).copy(bad, at);
    send(Buffer.concat([bad, silence(1500)]));
    await tick();
    expect(log.filter((l) => !l.startsWith('interim'))).toEqual(['speech-started']);
    expect(log.filter((x) => x.startsWith('interim'))).toHaveLength(2); // the blocks before the bad one
    for (const l of log.filter((x) => x.startsWith('interim'))) {
      expect(text.startsWith(JSON.parse(l.slice(8)))).toBe(true);
    }
  });

  it('plain silence and empty buffers produce nothing', async () => {
    const { stt, log, send } = await session();
    stt.sendAudio(Buffer.alloc(0));
    send(silence(3000));
    await tick();
    expect(log).toEqual([]);
  });

  it('close() drops queued events, ignores later audio, and leaves nothing running', async () => {
    const before = process.getActiveResourcesInfo().length;
    const { stt, log, send } = await session();
    send(Buffer.concat([synthesizeSandboxSpeech('Never heard.'), silence(600)]));
    await stt.close(); // before the queued events were delivered
    send(Buffer.concat([synthesizeSandboxSpeech('Too late.'), silence(600)]));
    stt.finalize();
    await tick();
    expect(log).toEqual(['close']);
    await stt.close();
    expect(log).toEqual(['close']);
    expect(process.getActiveResourcesInfo().length).toBe(before);
  });

  it('connect with an aborted signal fails with PROVIDER_ABORTED', async () => {
    const err = await createSandboxStt()
      .connect({ provider: 'sandbox' }, { onTranscript() {}, onError() {} }, AbortSignal.abort())
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ProviderError);
    expect(err).toMatchObject({ code: 'PROVIDER_ABORTED', provider: 'sandbox' });
    expect(createSandboxStt().id).toBe('sandbox');
  });
});
