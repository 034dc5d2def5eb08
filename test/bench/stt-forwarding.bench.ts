/**
 * What forwarding a call's audio to Deepgram costs, in real time:
 * `node --import tsx test/bench/stt-forwarding.bench.ts [--streams N] [--seconds S] [--chunks 0,50,100]`.
 *
 * N Deepgram streams of our adapter (src/providers/stt/deepgram.ts), each fed a 20 ms μ-law frame
 * every 20 ms as a phone call feeds it, against the Deepgram fake in another process
 * (test/bench/vendor-fakes.ts, which decodes what it gets with the sandbox STT). For each
 * `audioChunkMs` in `--chunks` (0: every frame its own message), this process's CPU over S
 * seconds, less the same loop with no stream ("none"), per stream. `bench:calls --providers
 * vendors` measures whole calls; this isolates the one cost that comes with every frame.
 */
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { createDeepgramStt } from '../../src/providers/stt/deepgram.js';
import type { SttSession } from '../../src/providers/types.js';
import { DEEPGRAM_KEY, type FromVendorFakes, type ToVendorFakes } from './vendor-fakes.js';

const FRAME_MS = 20;
let streams = 100;
let seconds = 10;
let chunks = [0, 50, 100];
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
  const value = () => argv[++i] ?? '';
  switch (argv[i]) {
    case '--streams': streams = Math.max(1, Number(value())); break;
    case '--seconds': seconds = Math.max(1, Number(value())); break;
    case '--chunks': chunks = value().split(',').map(Number); break;
    default: throw new Error(`unknown option ${argv[i]} (see the comment at the top of ${fileURLToPath(import.meta.url)})`);
  }
}

const child = fork(fileURLToPath(new URL('./vendor-fakes.ts', import.meta.url)), [], {
  execArgv: ['--import', 'tsx'],
  stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
});
const ready = await new Promise<Extract<FromVendorFakes, { type: 'ready' }>>((resolve, reject) => {
  child.on('message', (m: FromVendorFakes) => m.type === 'ready' && resolve(m));
  child.once('exit', () => reject(new Error("the vendor fakes' process exited")));
});
const settings = {
  deepgram: { baseUrl: ready.deepgram, apiKey: DEEPGRAM_KEY },
  openai: { baseUrl: 'http://127.0.0.1:9' },
  elevenlabs: { baseUrl: 'http://127.0.0.1:9' },
};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** This process's CPU (% of one core) over `seconds` while `sessions` each get a frame every 20 ms. */
async function run(sessions: SttSession[]): Promise<number> {
  const frame = Buffer.alloc(160, 0xff);
  const timer = setInterval(() => {
    for (const s of sessions) s.sendAudio(frame);
  }, FRAME_MS);
  await sleep(1_000);
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await sleep(seconds * 1000);
  const cpu = process.cpuUsage(cpu0);
  const elapsed = performance.now() - t0;
  clearInterval(timer);
  return ((cpu.user + cpu.system) / 1000 / elapsed) * 100;
}

const none = await run([]);
process.stdout.write(
  `Deepgram forwarding in real time: ${streams} streams, a 20 ms frame each every 20 ms, ${seconds} s, Node ${process.version}\n` +
    `  the loop alone (no stream): ${none.toFixed(1)}% of one core\n`,
);
for (const audioChunkMs of chunks) {
  const sessions = await Promise.all(
    Array.from({ length: streams }, () =>
      createDeepgramStt(settings, { audioChunkMs }).connect({ provider: 'deepgram' }, { onTranscript() {}, onError: (e) => console.error(e) }),
    ),
  );
  const pct = await run(sessions);
  await Promise.all(sessions.map((s) => s.close()));
  const net = Math.max(0, pct - none);
  process.stdout.write(
    `  audioChunkMs ${String(audioChunkMs).padStart(3)} (${audioChunkMs ? `${Math.ceil((audioChunkMs * 8) / 160)} frames a message` : 'a message a frame'}): ` +
      `${pct.toFixed(1)}% of one core, ${net.toFixed(1)}% for forwarding: ${(net / streams).toFixed(4)}% per stream, ` +
      `${((net / 100) * 1e6 / (streams * (1000 / FRAME_MS))).toFixed(1)} µs per frame\n`,
  );
}
child.send({ type: 'stop' } satisfies ToVendorFakes);
