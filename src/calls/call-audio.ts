/**
 * A call's audio path beside the conversation: caller audio from the transport's format to the
 * providers' μ-law 8 kHz (and into the recording), and the pacer that takes every frame to the
 * caller (into the recording too, with the background clip under it). The backends push speech to
 * the pacer; the controller owns this path and closes it.
 */
import type { Logger } from 'pino';
import type { EffectiveAssistant } from '../../engine/assistant.js';
import { AudioBridge } from '../audio/bridge.js';
import type { BackgroundAudio } from '../audio/background.js';
import { CallRecorder } from '../recordings/recorder.js';
import { recordingKey, recordingPath, type RecordingStore } from '../recordings/storage.js';
import { OutboundPacer, type OutboundSink } from './outbound.js';
import { Playout } from './playout.js';
import { callError, ErrorCodes, type CallError } from '../errors.js';
import type { CallTransport } from './transport.js';
import type { JoinTap } from './operator-leg.js';
import type { ListenTap } from './listen.js';

/** Background clips and recordings, shared by every call of the process. */
export interface CallMedia {
  background?: BackgroundAudio;
  recordings?: RecordingStore;
  /** PUBLIC_URL: `recording_url` is `GET /calls/{id}/recording` on it. */
  publicUrl?: string;
}

export interface CallAudioOptions {
  callId: string;
  organizationId: string;
  assistant: EffectiveAssistant;
  transport: CallTransport;
  media: CallMedia | undefined;
  log: Logger;
  /** A failure the call's record names in its `errors`. */
  error(entry: CallError): void;
  /** A frame of speech (not the background alone) left for the caller. */
  onSpeechFrame?(): void;
  /** Wraps the pacer's sink so that what it throws ends the call, never the process. */
  shield(sink: OutboundSink): OutboundSink;
}

export class CallAudio {
  /** Every frame to the caller, paced. */
  readonly pacer: OutboundPacer;
  /** Audio out by utterance, and what the far end has played of each, by its marks and by the clock. */
  readonly playout: Playout;
  /** Between the transport's audio format and the providers' μ-law 8 kHz; null when they are the same. */
  private readonly bridge: AudioBridge | null;
  /** The call's recording, when its assistant asks for consent (DECISIONS 13). */
  private readonly recorder: CallRecorder | null;
  /** Listen-in (src/calls/listen.ts): both sides' audio, only while someone listens. */
  listen: ListenTap | null = null;

  constructor(private readonly o: CallAudioOptions) {
    const { transport } = o;
    this.bridge = AudioBridge.for(transport.audioFormat);
    const bridge = this.bridge;
    const send = bridge ? (frame: Buffer) => transport.sendAudio(bridge.fromProviders(frame)) : (frame: Buffer) => transport.sendAudio(frame);
    // keys go the transport's own way where it has one (SIP's telephone-events), else as their tones
    const sendKey = transport.sendKeyFrame?.bind(transport);
    this.recorder = this.startRecording();
    const recorder = this.recorder;
    const onSpeechFrame = o.onSpeechFrame;
    this.pacer = new OutboundPacer(
      o.shield({
        sendFrame: (frame, speech, key) => {
          if (key && sendKey) sendKey(key, bridge ? bridge.fromProviders(frame) : frame);
          else send(frame);
          recorder?.heard(frame, this.pacer.slot);
          this.listen?.heard(frame, this.pacer.slot);
          // the background alone is not the reply: the first frame of speech closes the turn
          if (speech && onSpeechFrame) onSpeechFrame();
        },
        flush: () => transport.flushAudio?.(),
        sendMark: (name) => {
          this.playout.sent(name, this.pacer.slot);
          transport.mark(name);
        },
        sendClear: () => {
          transport.clear();
          recorder?.cleared();
          this.listen?.cleared();
        },
      }),
      undefined,
      undefined,
      transport.framesPerMessage,
    );
    this.playout = new Playout(this.pacer);
  }

  /** Caller audio in the transport's format, as the providers take it (and into the recording). */
  fromCaller(frame: Buffer): Buffer {
    const mulaw = this.bridge ? this.bridge.toProviders(frame) : frame;
    this.recorder?.caller(mulaw);
    this.listen?.caller(mulaw);
    return mulaw;
  }

  /**
   * After a warm transfer's join, the audio relayed between the caller and the operator goes on
   * into the recording (left the caller, right the operator); undefined when the call is not recorded.
   */
  relayTap(): JoinTap | undefined {
    const recorder = this.recorder;
    if (!recorder) return undefined;
    // the operator's frames arrive as the network brings them: laid end to end, as the caller's
    // are (realigned to the clock when they fall behind), so that jitter does not tear them apart
    let at = -1;
    return {
      caller: (mulaw) => recorder.caller(mulaw),
      operator: (mulaw) => {
        const now = performance.now();
        if (at < now - 1_000 || at > now + 200) at = now;
        recorder.heard(mulaw, at);
        at += mulaw.length / 8;
      },
    };
  }

  /**
   * `speech_config.background_audio`: the clip plays under the assistant from now (pickup) to
   * hang-up. A clip that cannot be used (a URL that stopped answering) leaves the call without it,
   * said in `errors`. A URL clip not yet loaded by this process starts a moment late.
   */
  startBackground(ended: () => boolean): void {
    const setting = this.o.assistant.speech_config.background_audio;
    const clips = this.o.media?.background;
    if (!setting.enabled || !setting.clip || !clips) return;
    const start = Math.floor(Math.random() * 1_000);
    clips.bed(setting.clip, setting.volume, start).then(
      (bed) => {
        if (!ended()) this.pacer.setBackground(bed);
      },
      (err: Error) => {
        this.o.log.warn({ err }, 'background audio could not be played');
        if (!ended()) this.o.error(callError(ErrorCodes.BACKGROUND_AUDIO_FAILED, `background_audio: ${err.message}; the call ran without it`));
      },
    );
  }

  /** The recording is complete: kept in the store; its URL, or null when it could not be kept (said in `errors`). */
  async keepRecording(): Promise<string | null | undefined> {
    if (!this.recorder) return undefined;
    const kept = await this.recorder.finish();
    const base = (this.o.media?.publicUrl ?? '').replace(/\/+$/, '');
    if (!kept) this.o.error(callError(ErrorCodes.RECORDING_NOT_KEPT, 'recording: the recording could not be kept; the server log has the details under this call id'));
    return kept ? `${base}${recordingPath(this.o.callId)}` : null;
  }

  /**
   * Records the call when its assistant tells the caller so (`recording_consent.enabled`), never
   * with `gdpr_mode`, and only where recordings can be kept.
   */
  private startRecording(): CallRecorder | null {
    const store = this.o.media?.recordings;
    const assistant = this.o.assistant;
    if (!store || !assistant.recording_consent.enabled || assistant.gdpr_mode) return null;
    try {
      const upload = store.begin(recordingKey(this.o.organizationId, this.o.callId));
      return new CallRecorder(upload, { log: this.o.log });
    } catch (err) {
      // a recording that cannot start never stops the call
      this.o.log.error({ err }, 'the call recording could not start');
      this.o.error(callError(ErrorCodes.RECORDING_START_FAILED, 'recording: the recording could not start; the server log has the details under this call id'));
      return null;
    }
  }
}
