/**
 * The caller's voice activity, for turn-taking (docs/turn-taking.md): `speech_config.turn_taking.vad`
 * picks the classifier, ./detector.ts makes stretches of speech of its answers.
 */
import type { VadKind } from '../../../engine/schema.js';
import { SpeechDetector, type DetectorClock, type SpeechEvents } from './detector.js';
import { SILERO_SETTINGS, SileroClassifier } from './silero.js';
import { WEBRTC_SETTINGS, WebRtcClassifier } from './webrtc.js';

export { SpeechDetector } from './detector.js';
export type { SpeechEvents } from './detector.js';

export function createSpeechDetector(kind: VadKind, events: SpeechEvents, clock: DetectorClock): SpeechDetector {
  return kind === 'silero'
    ? new SpeechDetector(new SileroClassifier(), SILERO_SETTINGS, events, clock)
    : new SpeechDetector(new WebRtcClassifier(), WEBRTC_SETTINGS, events, clock);
}
