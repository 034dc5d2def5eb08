/**
 * What a simulated far end does on its media leg, whatever opened it: the phone caller over
 * Twilio Media Streams (./caller.ts), the browser of a web call (./web-caller.ts) and the SIP
 * phone (./sip-caller.ts) each open their `MediaLeg` their own way, then speak, listen and hang up
 * through these.
 */
import type { HeardLine, MediaLeg } from './media-leg.js';

export abstract class LegCaller {
  /** The leg, once it exists (a web call's opens with its stream). */
  protected abstract get leg(): MediaLeg | null;

  protected get line(): MediaLeg {
    const leg = this.leg;
    if (!leg) throw new Error('the call has not started');
    return leg;
  }

  /** What was heard so far (nothing before the leg opened). */
  get heard(): HeardLine[] {
    return this.leg?.heard ?? [];
  }
  /** The stream closed, or never opened. */
  get closed(): boolean {
    return this.leg?.closed ?? true;
  }
  get closeCode(): number | null {
    return this.line.closeCode;
  }
  /** Every `clear` received, with the time. */
  get clears(): number[] {
    return this.line.clears;
  }
  /** When each assistant audio frame arrived. */
  get frameTimes(): number[] {
    return this.line.frameTimes;
  }
  get marksEchoed(): string[] {
    return this.line.marksEchoed;
  }
  /** When the ear last heard the assistant's voice (not a background under it); 0 before it did. */
  get lastVoiceAt(): number {
    return this.leg?.lastVoiceAt ?? 0;
  }

  /** Speaks a line (sandbox TTS audio, sent in real time); resolves when it has been sent. */
  say(text: string): Promise<void> {
    return this.line.say(text);
  }
  /** Sends μ-law 8 kHz audio (a recording, a noise) in real time; resolves when it has been sent. */
  play(mulaw: Buffer, text = ''): Promise<void> {
    return this.line.play(mulaw, text);
  }
  pressKey(digit: string): void {
    this.line.pressKey(digit);
  }
  /** Waits until the assistant has said something containing `fragment` (case-insensitive). */
  hear(fragment: string | RegExp, timeoutMs = 20_000): Promise<HeardLine> {
    return this.line.hear(fragment, timeoutMs);
  }
  /**
   * Waits until the assistant has been quiet for `quietMs` (its audio finished playing); under
   * background audio, `by: 'voice'`: no voice for `quietMs` (MediaLeg.quiet).
   */
  quiet(quietMs = 600, timeoutMs = 30_000, by: 'audio' | 'voice' = 'audio'): Promise<void> {
    return this.line.quiet(quietMs, timeoutMs, by);
  }
  ended(timeoutMs = 30_000): Promise<void> {
    return this.line.ended(timeoutMs);
  }
  heardText(): string {
    return this.line.heardText();
  }
  /** Hangs up (Twilio's `stop`, a page's `hangup`, a SIP BYE), then waits for the line to close. */
  hangUp(): Promise<void> {
    return this.line.hangUp();
  }
  /** Tears down without a word to the far end. */
  close(): Promise<void> {
    return this.leg?.close() ?? Promise.resolve();
  }
}
