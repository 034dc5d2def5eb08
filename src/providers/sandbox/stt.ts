/**
 * Sandbox speech-to-text (provider `sandbox`): reads back the text that sandbox TTS audio carries
 * (see ./modem.ts). Offline and deterministic; it understands nothing but its own modem.
 *
 * Deepgram-like results: interim transcripts (isFinal false) as each 16-byte block of a frame
 * passes its checksum; the frame's text as a final transcript when the caller then pauses
 * (`speechFinal` true, after `endpointing` ms of real silence, default 300) or when the next
 * frame starts first (`speechFinal` false). A frame that fails a checksum yields nothing.
 * `onSpeechStarted` when sound starts after silence, `onUtteranceEnd` after `utterance_end_ms`
 * (default 1,000) of silence following a transcribed utterance. Under steady noise that never
 * falls below the level threshold (background audio), a transcript is final once no modem frame
 * has come in for `endpointing` ms.
 */
import type { SttConfig } from '../../../engine/schema.js';
import { SilenceDetector, type SilenceState } from '../../audio/silence.js';
import { ProviderError, type SttEvents, type SttProvider, type SttSession, type Transcript } from '../types.js';
import { FskReceiver, MODEM, completeUtf8Length } from './modem.js';
import { declareProvider } from '../declare.js';

const PROVIDER = 'sandbox';

export const provider = declareProvider({
  catalog: {
    id: PROVIDER,
    kind: 'stt',
    description: 'Offline speech-to-text that reads back the text carried by sandbox TTS audio.',
    models: ['sandbox'],
    default_model: 'sandbox',
    languages: null,
    default_language: 'en',
  },
  account: null,
  needs: 'nothing',
  create: () => createSandboxStt(),
});
const FRAME_BYTES = 160; // the level meter works on 20 ms frames, whatever the chunking
const DEFAULT_ENDPOINTING_MS = 300;
const DEFAULT_UTTERANCE_END_MS = 1000;

const utf8 = new TextDecoder();

export interface SandboxSttStats {
  /** Frames whose checksum verified. */
  frames: number;
  /** Frames dropped (bad header, checksum mismatch, carrier lost). */
  rejected: number;
}

export class SandboxSttSession implements SttSession {
  readonly stats: SandboxSttStats = { frames: 0, rejected: 0 };
  private readonly receiver: FskReceiver;
  private readonly detector: SilenceDetector;
  private readonly utteranceEndMs: number;
  private readonly meterFrame = Buffer.alloc(FRAME_BYTES);
  private meterFill = 0;
  private pending: Transcript | null = null;
  private lastInterim = '';
  private readonly endpointingMs: number;
  /** How long no modem frame has been coming in. */
  private noCarrierMs = 0;
  /** Something was transcribed since the last utterance end. */
  private heardText = false;
  private closed = false;
  private queue: (() => void)[] = [];
  private scheduled = false;

  constructor(
    config: SttConfig,
    private readonly events: SttEvents,
  ) {
    const endpointing = config.endpointing ?? DEFAULT_ENDPOINTING_MS;
    this.endpointingMs = endpointing;
    this.utteranceEndMs = Math.max(endpointing, config.utterance_end_ms ?? DEFAULT_UTTERANCE_END_MS);
    this.detector = new SilenceDetector({ thresholdDb: -45, minSilenceMs: endpointing });
    this.receiver = new FskReceiver({
      onSync: () => {
        // The caller went on speaking: what was heard so far is final, but no endpoint.
        this.emitPending(false);
        this.lastInterim = '';
      },
      onVerified: (bytes) => {
        const text = utf8.decode(bytes.subarray(0, completeUtf8Length(bytes)));
        if (text === '' || text === this.lastInterim) return;
        this.lastInterim = text;
        this.emit({ text, isFinal: false, speechFinal: false, confidence: 1 });
      },
      onFrame: (payload, startSample, endSample) => {
        this.stats.frames++;
        this.lastInterim = '';
        this.pending = {
          text: utf8.decode(payload),
          isFinal: true,
          speechFinal: false,
          confidence: 1,
          start: startSample / MODEM.sampleRate,
          duration: (endSample - startSample) / MODEM.sampleRate,
        };
        this.heardText = true;
      },
      onReject: () => {
        this.stats.rejected++;
        this.lastInterim = '';
      },
    });
  }

  sendAudio(mulaw: Buffer): void {
    if (this.closed || mulaw.length === 0) return;
    if (this.meterFill === 0 && mulaw.length === FRAME_BYTES) {
      // the usual case, one whole frame: metered as it is, by the squares the receiver summed
      this.metered(this.detector.pushSumOfSquares(FRAME_BYTES, this.receiver.push(mulaw)));
      return;
    }
    let off = 0;
    while (off < mulaw.length) {
      const take = Math.min(FRAME_BYTES - this.meterFill, mulaw.length - off);
      const piece = mulaw.subarray(off, off + take);
      this.receiver.push(piece);
      piece.copy(this.meterFrame, this.meterFill);
      this.meterFill += take;
      off += take;
      if (this.meterFill === FRAME_BYTES) {
        this.meterFill = 0;
        this.meter(this.meterFrame);
      }
    }
  }

  finalize(): void {
    if (this.closed) return;
    this.emitPending(true);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.queue = [];
    this.pending = null;
    this.receiver.reset();
    this.events.onClose?.();
  }

  /** A frame of the modem is coming in (the voice is speaking, whatever else is on the line). */
  get hearing(): boolean {
    return this.receiver.receiving;
  }

  private meter(frame: Buffer): void {
    this.metered(this.detector.push(frame));
  }

  private metered(state: SilenceState): void {
    this.noCarrierMs = this.receiver.receiving ? 0 : this.noCarrierMs + (FRAME_BYTES * 1000) / MODEM.sampleRate;
    if (state.started) this.deliver(() => this.events.onSpeechStarted?.());
    if (state.ended) this.emitPending(true);
    // under steady noise (a background bed) the level never falls: the voice stopping is the endpoint
    else if (state.speaking && this.pending && this.noCarrierMs >= this.endpointingMs) this.emitPending(true);
    if (!state.speaking && this.heardText && state.silenceMs >= this.utteranceEndMs && !this.receiver.receiving) {
      this.heardText = false;
      this.deliver(() => this.events.onUtteranceEnd?.());
    }
  }

  private emitPending(speechFinal: boolean): void {
    const t = this.pending;
    if (!t) return;
    this.pending = null;
    this.emit({ ...t, speechFinal });
  }

  private emit(t: Transcript): void {
    this.deliver(() => this.events.onTranscript(t));
  }

  /** Events go out asynchronously (as from a socket), in order, and never after close. */
  private deliver(event: () => void): void {
    this.queue.push(event);
    if (this.scheduled) return;
    this.scheduled = true;
    queueMicrotask(() => this.drain());
  }

  private drain(): void {
    this.scheduled = false;
    const queue = this.queue;
    this.queue = [];
    for (let i = 0; i < queue.length && !this.closed; i++) {
      try {
        queue[i]!();
      } catch (err) {
        // A throwing handler must not swallow the events behind it.
        this.queue = [...queue.slice(i + 1), ...this.queue];
        if (this.queue.length > 0 && !this.scheduled) {
          this.scheduled = true;
          queueMicrotask(() => this.drain());
        }
        throw err;
      }
    }
  }
}

export function createSandboxStt(): SttProvider {
  return {
    id: PROVIDER,
    async connect(config, events, signal) {
      if (signal?.aborted) throw new ProviderError('PROVIDER_ABORTED', PROVIDER, 'connect aborted');
      return new SandboxSttSession(config, events);
    },
  };
}
