/**
 * Provider hot paths: `npm run bench:providers`.
 *
 * Frames per second that one core sustains, a frame being 20 ms of call audio (160 μ-law bytes
 * at 8 kHz; 480 samples at 24 kHz; 160 samples at 8 kHz into 16 kHz). One direction of one call
 * needs 50 frames/s, so "calls" = frames/s ÷ 50 is how many calls' worth of that path one core
 * could carry if it did nothing else.
 *
 * Deepgram forwarding runs our adapter against the local fake (test/fakes/deepgram.ts) in this
 * same process, so its figure also pays for the fake's WebSocket server: a lower bound.
 *
 * "µs per frame" is wall time; "CPU µs per frame" the process's CPU time for the same frames,
 * which a machine loaded by other work does not inflate (the run prints the load average).
 */
import { existsSync } from 'node:fs';
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { mulawDecode, mulawEncode } from '../../src/audio/mulaw.js';
import { Resampler } from '../../src/audio/resample.js';
import { createSandboxStt, createSandboxTts, synthesizeSandboxSpeech } from '../../src/providers/sandbox/index.js';
import { mediaAudio, mediaMessages } from '../../src/telephony/twilio/media-protocol.js';
import type { ProviderSettings, SttProvider } from '../../src/providers/types.js';
import { createSpeechDetector } from '../../src/calls/vad/index.js';
import { sileroModel } from '../../src/calls/vad/silero.js';
import { VAD_FIXTURES } from '../helpers/vad-fixtures.js';

const MIN_MS = Number(process.env.BENCH_MIN_MS ?? 1500);
const tick = () => new Promise((r) => setImmediate(r));

interface Row {
  path: string;
  framesPerSecond: number | null;
  /** CPU time (the process's, user + system) per frame, µs: what a loaded machine's wall clock does not show. */
  cpuUsPerFrame?: number;
  note?: string;
}
const rows: Row[] = [];
let modelNote = '';

/** Runs `batch` (which handles `frames` frames) until MIN_MS have passed, after a warm-up. */
async function measure(path: string, batch: () => number | Promise<number>, note?: string): Promise<void> {
  const warmUntil = performance.now() + MIN_MS / 4;
  while (performance.now() < warmUntil) await batch();
  let frames = 0;
  const start = performance.now();
  const cpuStart = process.cpuUsage();
  let elapsed = 0;
  while ((elapsed = performance.now() - start) < MIN_MS) frames += await batch();
  const cpu = process.cpuUsage(cpuStart);
  rows.push({ path, framesPerSecond: (frames * 1000) / elapsed, cpuUsPerFrame: (cpu.user + cpu.system) / frames, ...(note ? { note } : {}) });
}

function tone(hz: number, rate: number, n: number): Int16Array {
  return Int16Array.from({ length: n }, (_, i) => Math.round(12000 * Math.sin((2 * Math.PI * hz * i) / rate)));
}

const SENTENCES = [
  'Thanks for calling Acme Internet, this is the front desk.',
  'I can help with bills, technical problems and new contracts.',
  'Could you tell me your customer number, please?',
  'One moment while I look that up for you.',
];

// ---- μ-law -----------------------------------------------------------------------------------
{
  const pcm = tone(440, 8000, 160 * 100);
  const frames = Array.from({ length: 100 }, (_, i) => pcm.subarray(i * 160, (i + 1) * 160));
  const bytes = frames.map((f) => mulawEncode(f));
  let sink = 0;
  await measure('μ-law encode (160 samples → 160 bytes)', () => {
    for (const f of frames) sink += mulawEncode(f)[7]!;
    return frames.length;
  });
  await measure('μ-law decode (160 bytes → 160 samples)', () => {
    for (const b of bytes) sink += mulawDecode(b)[7]!;
    return bytes.length;
  });
  if (sink === 0.5) console.log(sink);
}

// ---- Twilio media messages ----------------------------------------------------------------------
{
  // as Twilio sends them (its key order, a 160-byte frame's base64), and as we send ours
  const sid = 'MZ18ad3ab5a668481ce02b83e7395059f0';
  const audio = Array.from({ length: 100 }, (_, j) => Buffer.from(Array.from({ length: 160 }, (_, i) => (i * 37 + j) & 255)));
  const inbound = audio.map((a, i) =>
    Buffer.from(`{"event":"media","sequenceNumber":"${i + 3}","media":{"track":"inbound","chunk":"${i + 1}","timestamp":"${i * 20}","payload":"${a.toString('base64')}"},"streamSid":"${sid}"}`),
  );
  const write = mediaMessages(sid);
  let sink = 0;
  await measure('Twilio media message read (its bytes → 160 bytes of audio)', () => {
    for (const m of inbound) sink += mediaAudio(m)![7]!;
    return inbound.length;
  });
  await measure('Twilio media message written (160 bytes → the message\'s bytes)', () => {
    for (const a of audio) sink += write(a)[7]!;
    return audio.length;
  });
  if (sink === 0.5) console.log(sink);
}

// ---- resampling ------------------------------------------------------------------------------
{
  const at24 = tone(440, 24000, 480 * 100);
  const frames24 = Array.from({ length: 100 }, (_, i) => at24.subarray(i * 480, (i + 1) * 480));
  const down = new Resampler(24000, 8000);
  await measure('resample 24 kHz → 8 kHz (480 → 160 samples)', () => {
    for (const f of frames24) down.process(f);
    return frames24.length;
  });
  const at8 = tone(440, 8000, 160 * 100);
  const frames8 = Array.from({ length: 100 }, (_, i) => at8.subarray(i * 160, (i + 1) * 160));
  const up = new Resampler(8000, 16000);
  await measure('resample 8 kHz → 16 kHz (160 → 320 samples)', () => {
    for (const f of frames8) up.process(f);
    return frames8.length;
  });
}

// ---- sandbox STT -----------------------------------------------------------------------------
{
  // The four sentences, each followed by a pause long enough to end the turn: ≈ 50% tone.
  const audio = Buffer.concat(SENTENCES.flatMap((s) => [synthesizeSandboxSpeech(s), Buffer.alloc(4000, 0xff)]));
  const frames = Array.from({ length: Math.floor(audio.length / 160) }, (_, i) => audio.subarray(i * 160, (i + 1) * 160));
  let finals = 0;
  const stt = await createSandboxStt().connect(
    { provider: 'sandbox' },
    { onTranscript: (t) => void (t.speechFinal && finals++), onError: (e) => console.error(e) },
  );
  await measure('sandbox STT decoding (160 bytes in, transcripts out)', async () => {
    for (const f of frames) stt.sendAudio(f);
    await tick(); // deliver the transcripts, as a socket's events would be
    return frames.length;
  });
  await stt.close();
  if (finals === 0) throw new Error('sandbox STT heard nothing');
}

// ---- sandbox TTS -----------------------------------------------------------------------------
{
  const tts = createSandboxTts();
  // counted in 20 ms frames of audio out (the sandbox hands them out in chunks of up to 50)
  await measure('sandbox TTS synthesis (text in, audio out, per 160-byte frame)', async () => {
    let frames = 0;
    let done!: () => void;
    const finished = new Promise<void>((r) => (done = r));
    const session = await tts.open({ provider: 'sandbox', voice_id: 'sandbox' }, { onAudio: (a) => void (frames += a.length / 160), onDone: () => done(), onError: (e) => console.error(e) });
    for (const s of SENTENCES) {
      session.sendText(s);
      session.flush();
    }
    session.end();
    await finished;
    return frames;
  });
}

// ---- voice activity (the caller's audio of every pipeline call) -------------------------------
{
  // the fixtures of test/fixtures/vad/ back to back (speech, babble, noises), then as long again of
  // line silence: about what a caller's line carries in a call
  const sounds = VAD_FIXTURES.map((f) => f.mulaw);
  const heard = Buffer.concat(sounds);
  const audio = Buffer.concat([heard, Buffer.alloc(heard.length, 0xff)]);
  const frames = Array.from({ length: Math.floor(audio.length / 160) }, (_, i) => audio.subarray(i * 160, (i + 1) * 160));
  const loadStarted = performance.now();
  const { loadMs } = sileroModel();
  const loadWallMs = performance.now() - loadStarted;
  for (const vad of ['webrtc', 'silero'] as const) {
    let clock = 0;
    let stretches = 0;
    const detector = createSpeechDetector(vad, { onSpeechStart: () => void stretches++, onSpeechEnd: () => {} }, { now: () => clock });
    const label =
      vad === 'webrtc'
        ? 'voice activity `webrtc` (libfvad in WASM + the loudness checks, 160 bytes in)'
        : 'voice activity `silero` (Silero v4 on ONNX Runtime, a 512-sample window every 3.2 frames, 160 bytes in)';
    await measure(label, () => {
      for (const f of frames) {
        detector.push(f);
        clock += 20;
      }
      return frames.length;
    });
    detector.close();
    if (stretches === 0) throw new Error(`the ${vad} detector heard nothing`);
  }
  modelNote = `Silero model load (once per process): ${loadMs.toFixed(0)} ms (${loadWallMs.toFixed(0)} ms with the import of onnxruntime-node)`;
}

// ---- Deepgram forwarding (optional: only when the adapter exists) ----------------------------
{
  const here = fileURLToPath(new URL('.', import.meta.url));
  const adapter = `${here}../../src/providers/stt/deepgram.ts`;
  const fakePath = `${here}../fakes/deepgram.ts`;
  // each 20 ms frame as its own message (the adapter before `audioChunkMs`), and its default chunks
  // of about 50 ms (3 frames; batches of 201 frames leave none waiting for the chunk timer)
  const variants = [
    { path: 'Deepgram forwarding (160-byte frames to a local fake, one message each)', options: { audioChunkMs: 0 }, batch: 200 },
    { path: 'Deepgram forwarding (160-byte frames to a local fake, 50 ms chunks: the default)', options: {}, batch: 201 },
  ];
  if (!existsSync(adapter) || !existsSync(fakePath)) {
    for (const v of variants) rows.push({ path: v.path, framesPerSecond: null, note: 'n/a (adapter not present)' });
  } else {
    for (const { path, options, batch } of variants) {
      try {
        const { createDeepgramStt } = (await import(adapter)) as {
          createDeepgramStt: (s: ProviderSettings, options?: { audioChunkMs?: number }) => SttProvider;
        };
        const { startFakeDeepgram } = (await import(fakePath)) as {
          startFakeDeepgram: (script?: { idleTimeoutMs?: number }) => Promise<{
            url: string;
            apiKey: string;
            connections: { audioBytes: number }[];
            close(): Promise<void>;
          }>;
        };
        const fake = await startFakeDeepgram({ idleTimeoutMs: 60_000 });
        const settings: ProviderSettings = {
          deepgram: { baseUrl: fake.url, apiKey: fake.apiKey },
          openai: { baseUrl: 'http://127.0.0.1:9', apiKey: undefined },
          elevenlabs: { baseUrl: 'http://127.0.0.1:9', apiKey: undefined },
        };
        const session = await createDeepgramStt(settings, options).connect(
          { provider: 'deepgram' },
          { onTranscript() {}, onError: (e) => console.error(e) },
        );
        const frame = Buffer.alloc(160, 0xd5);
        let sent = 0;
        await measure(path, async () => {
          for (let i = 0; i < batch; i++) session.sendAudio(frame);
          sent += batch * 160;
          // Count a frame only once the fake has it: the socket, not a buffer, is the limit.
          while (fake.connections[0]!.audioBytes < sent) await tick();
          return batch;
        }, 'includes the fake server in the same process');
        await session.close();
        await fake.close();
      } catch (err) {
        rows.push({ path, framesPerSecond: null, note: `n/a (${(err as Error).message.split('\n')[0]})` });
      }
    }
  }
}

// ---- report ----------------------------------------------------------------------------------
const fmt = (n: number) => Math.round(n).toLocaleString('en-US');
console.log(`\nProvider hot paths — ${new Date().toISOString().slice(0, 10)}, Node ${process.version}, ` +
  `${os.cpus()[0]?.model.trim() ?? 'unknown CPU'} (${os.cpus().length} cores), ${MIN_MS} ms per row\n`);
console.log(`machine load average: ${os.loadavg().map((l) => l.toFixed(2)).join(', ')}\n`);
console.log('| path | frames/s (one core) | µs per frame | CPU µs per frame | calls per core |');
console.log('|---|---:|---:|---:|---:|');
for (const r of rows) {
  if (r.framesPerSecond === null) {
    console.log(`| ${r.path} | ${r.note} | | | |`);
    continue;
  }
  const note = r.note ? ` (${r.note})` : '';
  console.log(`| ${r.path}${note} | ${fmt(r.framesPerSecond)} | ${(1e6 / r.framesPerSecond).toFixed(2)} | ${r.cpuUsPerFrame!.toFixed(2)} | ${fmt(r.framesPerSecond / 50)} |`);
}
if (modelNote) console.log(`\n${modelNote}`);
process.exit(0);
