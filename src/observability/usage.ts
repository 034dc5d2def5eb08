/**
 * What a call used, by provider and model (DECISIONS 21): speech-to-text seconds (caller audio
 * sent), language-model tokens (as the vendor's usage fields count them), text-to-speech
 * characters, a realtime model's audio seconds both ways, and the carrier's minutes. A call's
 * `UsageMeter` is fed by its providers (src/calls/metered-providers.ts) and by the call's end (the
 * carrier); `snapshot()` is what the report, the call log and the API show.
 */

export interface SttUsage {
  provider: string;
  model: string | null;
  seconds: number;
}
export interface LlmUsage {
  provider: string;
  model: string | null;
  input_tokens: number;
  output_tokens: number;
}
export interface TtsUsage {
  provider: string;
  model: string | null;
  characters: number;
}
export interface RealtimeUsage {
  provider: string;
  model: string | null;
  input_audio_seconds: number;
  output_audio_seconds: number;
}
export interface CarrierUsage {
  /** The call's transport: twilio, sip or web. */
  provider: string;
  /** inbound or outbound (web calls are inbound). */
  direction: 'inbound' | 'outbound';
  minutes: number;
}

export interface CallUsage {
  stt: SttUsage[];
  llm: LlmUsage[];
  tts: TtsUsage[];
  realtime: RealtimeUsage[];
  carrier: CarrierUsage[];
}

export const emptyUsage = (): CallUsage => ({ stt: [], llm: [], tts: [], realtime: [], carrier: [] });

/** Rounds to what a person reads and a sum keeps (ms of audio, whole tokens and characters). */
const seconds = (s: number) => Math.round(s * 1000) / 1000;

export class UsageMeter {
  private readonly usage = emptyUsage();

  /** Caller audio sent to a speech-to-text model. */
  stt(provider: string, model: string | null, audioSeconds: number): void {
    const row = this.row(this.usage.stt, provider, model, () => ({ provider, model, seconds: 0 }));
    row.seconds += audioSeconds;
  }

  /** One model request's tokens, as the vendor counted them. */
  llm(provider: string, model: string | null, inputTokens: number, outputTokens: number): void {
    const row = this.row(this.usage.llm, provider, model, () => ({ provider, model, input_tokens: 0, output_tokens: 0 }));
    row.input_tokens += inputTokens;
    row.output_tokens += outputTokens;
  }

  /** Text sent to a text-to-speech model. */
  tts(provider: string, model: string | null, characters: number): void {
    const row = this.row(this.usage.tts, provider, model, () => ({ provider, model, characters: 0 }));
    row.characters += characters;
  }

  /** Audio to (input) and from (output) a realtime model. */
  realtime(provider: string, model: string | null, inputSeconds: number, outputSeconds: number): void {
    const row = this.row(this.usage.realtime, provider, model, () => ({ provider, model, input_audio_seconds: 0, output_audio_seconds: 0 }));
    row.input_audio_seconds += inputSeconds;
    row.output_audio_seconds += outputSeconds;
  }

  /** The carrier's leg: the call's answered time. */
  carrier(provider: string, direction: 'inbound' | 'outbound', minutes: number): void {
    const row = this.usage.carrier.find((r) => r.provider === provider && r.direction === direction);
    if (row) row.minutes += minutes;
    else this.usage.carrier.push({ provider, direction, minutes });
  }

  snapshot(): CallUsage {
    return {
      stt: this.usage.stt.map((r) => ({ ...r, seconds: seconds(r.seconds) })),
      llm: this.usage.llm.map((r) => ({ ...r })),
      tts: this.usage.tts.map((r) => ({ ...r })),
      realtime: this.usage.realtime.map((r) => ({ ...r, input_audio_seconds: seconds(r.input_audio_seconds), output_audio_seconds: seconds(r.output_audio_seconds) })),
      carrier: this.usage.carrier.map((r) => ({ ...r, minutes: Math.round(r.minutes * 10_000) / 10_000 })),
    };
  }

  private row<T extends { provider: string; model: string | null }>(rows: T[], provider: string, model: string | null, make: () => T): T {
    let row = rows.find((r) => r.provider === provider && r.model === model);
    if (!row) {
      row = make();
      rows.push(row);
    }
    return row;
  }
}
