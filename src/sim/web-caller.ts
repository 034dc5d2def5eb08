/**
 * A simulated browser in a web call (docs/web-calls.md): `POST /calls/web`, then the stream with
 * 16 kHz PCM both ways. It speaks with the sandbox voice and hears through the sandbox STT, as the
 * simulated phone caller does (the same `MediaLeg`, on the web wire), and keeps every control
 * message the server sent (`events`: the transcript, nodes, turns, latency, the end).
 */
import { request } from 'undici';
import { LegCaller } from './leg-caller.js';
import { MediaLeg } from './media-leg.js';

export interface WebCallerOptions {
  baseUrl: string;
  apiKey: string;
}

export interface WebCallStart {
  assistant_id: string;
  workflow_id?: string | null;
  variables?: Record<string, string | number | boolean>;
}

export class WebCaller extends LegCaller {
  private opened: MediaLeg | null = null;
  /** The call as `POST /calls/web` answered, once started. */
  call: { id: string; [key: string]: unknown } | null = null;
  url = '';

  constructor(private readonly o: WebCallerOptions) {
    super();
  }

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
    this.opened = new MediaLeg({ wire: 'web', accountSid: '', callSid: call.id, ...(options.recordAudio ? { recordAudio: true } : {}) });
    await this.opened.connect(url, {});
    return call.id;
  }

  protected get leg(): MediaLeg | null {
    return this.opened;
  }

  get events() {
    return this.line.events;
  }

  /** With `recordAudio`: every frame the server sent, as the ear hears it (μ-law 8 kHz). */
  get outboundAudio(): Buffer[] {
    return this.line.outboundAudio;
  }

  /** Resolves once the server has sent a control message of this type (the first one after `after`). */
  async event(type: string, timeoutMs = 20_000, after = 0): Promise<{ type: string; [key: string]: unknown }> {
    await this.line.until(() => this.events.slice(after).some((e) => e.type === type), timeoutMs, `a "${type}" message`);
    return this.events.slice(after).find((e) => e.type === type)!;
  }
}
