/** Per-turn latency: caller end-of-speech → model request → first token → first audio out. */
export interface TurnLatency {
  /** The whole turn as the caller feels it (after our endpointing decided the turn ended). */
  endOfSpeechToFirstAudioMs: number;
  modelRequestedAt: number | null;
  firstTokenAt: number | null;
}
