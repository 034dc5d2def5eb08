/** Reading recorded audio back: what the sandbox STT hears in μ-law 8 kHz, line by line. */
import { createSandboxStt } from '../../src/providers/sandbox/stt.js';

/** The lines the sandbox STT reads in `mulaw` (8 kHz), in order; a second of silence ends the last. */
export async function transcribe(mulaw: Buffer): Promise<string[]> {
  const lines: string[] = [];
  const stt = await createSandboxStt().connect(
    { provider: 'sandbox' },
    { onTranscript: (t) => t.isFinal && t.text.trim() && lines.push(t.text.trim()), onError: () => undefined },
  );
  for (let i = 0; i < mulaw.length; i += 160) stt.sendAudio(mulaw.subarray(i, i + 160));
  stt.sendAudio(Buffer.alloc(8000, 0xff));
  stt.finalize();
  await new Promise((r) => setTimeout(r, 50));
  await stt.close();
  return lines;
}
