/**
 * A simulated browser in a web call (docs/web-calls.md): `POST /calls/web`, then the stream with
 * 16 kHz PCM both ways. It speaks with the sandbox voice and hears through the sandbox STT, as the
 * simulated phone caller does (the same `MediaLeg`, on the web wire), and keeps every control
 * message the server sent (`events`: the transcript, nodes, turns, latency, the end).
 */
import { request } from 'undici';
import { MediaLeg, type HeardLine } from './media-leg.js';

export interface WebCallerOptions {
  baseUrl: string;
  apiKey: string;
}

export interface WebCallStart {
  assistant_id: string;
  workflow_id?: string | null;
  variables?: Record<string, string | number | boolean>;
}

export class WebCaller {
  private leg: MediaLeg | null = null;
  /** The call as `POST /calls/web` answered, once started. */
  call: { id: string; [key: string]: unknown } | null = null;
  url = '';

  constructor(private readonly o: WebCallerOptions) {}

  /** Makes the call (`POST /calls/web`); throws with the API's answer when it is refused. */
  async create(body: WebCallStart): Promise<{ call: { id: string }; url: string }> {
    const res = await request(`${this.o.baseUrl.replace(/\/$/, '')}/calls/web`, {
      method: 'POST',
      headers: { authorization: `Bearer ${this.o.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    const json = (await res.body.json()) as { call: { id: string }; url: string };
    if (res.statusCode !== 201) throw new Error(`POST /calls/web: ${res.statusCode} ${JSON.stringify(json)}`);
    this.call = json.call;
    this.url = json.url;
    return json;
  }

  /** Makes the call and opens its stream: the assistant starts speaking. */
  async start(body: WebCallStart, options: { recordAudio?: boolean } = {}): Promise<string> {
    const { call, url } = await this.create(body);
    this.leg = new MediaLeg({ wire: 'web', accountSid: '', callSid: call.id, ...(options.recordAudio ? { recordAudio: true } : {}) });
    await this.leg.connect(url, {});
    return call.id;
  }

  private get line(): MediaLeg {
    if (!this.leg) throw new Error('the web call has not started');
    return this.leg;
  }

  get events() {
    return this.line.events;
  }
  /** What was heard so far (nothing before the stream opened). */
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
  get marksEchoed(): string[] {
    return this.line.marksEchoed;
  }
  /** When each audio frame from the server arrived. */
  get frameTimes(): number[] {
    return this.line.frameTimes;
  }
  get clears(): number[] {
    return this.line.clears;
  }

  say(text: string): Promise<void> {
    return this.line.say(text);
  }
  pressKey(digit: string): void {
    this.line.pressKey(digit);
  }
  hear(fragment: string | RegExp, timeoutMs = 20_000): Promise<HeardLine> {
    return this.line.hear(fragment, timeoutMs);
  }
  quiet(quietMs = 600, timeoutMs = 30_000): Promise<void> {
    return this.line.quiet(quietMs, timeoutMs);
  }
  ended(timeoutMs = 30_000): Promise<void> {
    return this.line.ended(timeoutMs);
  }
  /** Resolves once the server has sent a control message of this type (the first one after `after`). */
  async event(type: string, timeoutMs = 20_000, after = 0): Promise<{ type: string; [key: string]: unknown }> {
    await this.line.until(() => this.events.slice(after).some((e) => e.type === type), timeoutMs, `a "${type}" message`);
    return this.events.slice(after).find((e) => e.type === type)!;
  }
  heardText(): string {
    return this.line.heardText();
  }
  /** Hangs up from the page (`{"type": "hangup"}`), then waits for the socket to close. */
  hangUp(): Promise<void> {
    return this.line.hangUp();
  }
  /** Tears down without a word to the server (as a browser tab that is closed). */
  close(): Promise<void> {
    return this.leg?.close() ?? Promise.resolve();
  }
}
