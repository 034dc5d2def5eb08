/**
 * Sandbox text-to-speech (provider `sandbox`, voice `sandbox`): each flushed piece of text
 * becomes one modem frame (./modem.ts) of μ-law 8 kHz audio that carries the text, followed by
 * 160 ms of silence. Offline and deterministic; it sounds like a fax machine, not a voice.
 *
 * Audio goes out asynchronously, as fast as the event loop allows (the call layer paces playback),
 * in chunks of whole 20 ms (160-byte) frames: at most one second (50 frames) a chunk and one chunk
 * an event-loop turn, never across two sentences; `cancel()` stops it at once. A vendor's TTS
 * sends its audio in pieces of that order too; 20 ms chunks would make fifty small buffers a second
 * of reply that the call holds until they are played (docs/benchmarks.md, "Young survivors").
 */
import { MULAW_SILENCE } from '../../audio/mulaw.js';
import { ProviderError, type TtsEvents, type TtsProvider, type TtsSession } from '../types.js';
import { MODEM, frameSamples, modulateText, splitPayloads } from './modem.js';
import { declareProvider } from '../declare.js';

const PROVIDER = 'sandbox';

export const provider = declareProvider({
  catalog: {
    id: PROVIDER,
    kind: 'tts',
    description: 'Offline text-to-speech whose μ-law audio carries its text (demo and tests).',
    models: ['sandbox'],
    default_model: 'sandbox',
    voices: ['sandbox'],
    default_voice: 'sandbox',
  },
  account: null,
  needs: 'nothing',
  create: () => createSandboxTts(),
});
const CHUNK_BYTES = 160;
/** The most audio one chunk carries (1 s), one chunk an event-loop turn: a long reply does not hog the loop. */
export const SANDBOX_TTS_MAX_CHUNK_BYTES = 50 * CHUNK_BYTES;
const utf8 = new TextEncoder();

/** Text → the sandbox's μ-law audio, padded with silence to whole 160-byte chunks. */
export function synthesizeSandboxSpeech(text: string): Buffer {
  const audio = modulateText(text);
  const pad = (CHUNK_BYTES - (audio.length % CHUNK_BYTES)) % CHUNK_BYTES;
  return pad ? Buffer.concat([audio, Buffer.alloc(pad, MULAW_SILENCE)]) : audio;
}

/** Length in bytes (= samples; ÷ 8 for ms) of `synthesizeSandboxSpeech(text)`, without synthesizing. */
export function sandboxSpeechBytes(text: string): number {
  const gap = (MODEM.gapMs * MODEM.sampleRate) / 1000;
  let total = 0;
  for (const p of splitPayloads(utf8.encode(text))) total += frameSamples(p.length) + gap;
  return Math.ceil(total / CHUNK_BYTES) * CHUNK_BYTES;
}

class SandboxTtsSession implements TtsSession {
  private text = '';
  private readonly audio: Buffer[] = [];
  private offset = 0;
  private timer: NodeJS.Immediate | null = null;
  private ended = false;
  private finished = false;

  constructor(
    private readonly events: TtsEvents,
    private readonly signal: AbortSignal | undefined,
  ) {
    signal?.addEventListener('abort', this.onAbort, { once: true });
  }

  private readonly onAbort = () => this.cancel();

  sendText(text: string): void {
    if (this.ended || this.finished) return;
    this.text += text;
  }

  flush(): void {
    if (this.ended || this.finished) return;
    // What a voice would say: surrounding whitespace is not speech, and blank text is silence.
    const text = this.text.trim();
    this.text = '';
    if (text === '') return;
    this.audio.push(synthesizeSandboxSpeech(text));
    this.schedule();
  }

  end(): void {
    if (this.ended || this.finished) return;
    this.flush();
    this.ended = true;
    this.schedule();
  }

  cancel(): void {
    if (this.finished) return;
    this.finish();
  }

  private finish(): void {
    this.finished = true;
    this.audio.length = 0;
    this.text = '';
    if (this.timer) clearImmediate(this.timer);
    this.timer = null;
    this.signal?.removeEventListener('abort', this.onAbort);
  }

  private schedule(): void {
    if (this.timer || this.finished) return;
    this.timer = setImmediate(this.pump);
  }

  private readonly pump = () => {
    this.timer = null;
    const head = this.audio[0];
    if (head) {
      const chunk = head.subarray(this.offset, this.offset + SANDBOX_TTS_MAX_CHUNK_BYTES);
      this.offset += SANDBOX_TTS_MAX_CHUNK_BYTES;
      if (this.offset >= head.length) {
        this.audio.shift();
        this.offset = 0;
      }
      this.events.onAudio(chunk);
    }
    if (this.finished) return;
    if (this.audio.length > 0) {
      this.schedule();
    } else if (this.ended) {
      this.finish();
      this.events.onDone();
    }
  };
}

export function createSandboxTts(): TtsProvider {
  return {
    id: PROVIDER,
    async open(_config, events, signal) {
      if (signal?.aborted) throw new ProviderError('PROVIDER_ABORTED', PROVIDER, 'open aborted');
      return new SandboxTtsSession(events, signal);
    },
  };
}
