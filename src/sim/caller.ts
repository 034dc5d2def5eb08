/**
 * A simulated caller that speaks the Twilio protocol to a Switchboard server: the signed voice
 * webhook, then the Media Streams WebSocket. It speaks with sandbox TTS audio, hears the
 * assistant through the sandbox STT, plays received audio in real time (echoing marks once
 * "played", and on `clear` dropping what it had not played yet), presses keys and hangs up.
 * The media side is a `MediaLeg` (./media-leg.ts), the same as the callee of the Twilio
 * stand-in's outbound calls (./twilio.ts). Used by the tests, the demo and `npm run call`.
 */
import { randomBytes } from 'node:crypto';
import { request } from 'undici';
import { twilioSignature } from '../telephony/twilio/signature.js';
import { LegCaller } from './leg-caller.js';
import { MediaLeg, type HeardLine, type SpokenLine } from './media-leg.js';

export type { HeardLine, SpokenLine } from './media-leg.js';

export interface SimulatedCallOptions {
  /** Base URL of the server, e.g. http://127.0.0.1:3000 */
  baseUrl: string;
  /** The URL Twilio would sign (the server's PUBLIC_URL); defaults to baseUrl. */
  publicUrl?: string;
  to: string;
  from?: string;
  authToken: string;
  accountSid?: string;
  /** Records every frame both ways, for the demo's WAV file. */
  recordAudio?: boolean;
  /** A broken far end, for the tests of a call whose stream misbehaves. */
  faults?: {
    /** Never echo marks (the server must not wait for them forever). */
    noMarkEcho?: boolean;
    /** Never answer WebSocket pings (a half-open connection). */
    noPong?: boolean;
  };
}

export type CallOutcome = { kind: 'rejected'; twiml: string } | { kind: 'connected'; callId: string };

/** The media leg of each simulated call, for the Twilio stand-in (it ends the stream on a REST hang-up). */
const legs = new WeakMap<SimulatedCall, MediaLeg>();

/** The media leg under a simulated call (what the Twilio stand-in stops on a REST hang-up). */
export function mediaLegOf(call: SimulatedCall): MediaLeg {
  return legs.get(call)!;
}

export class SimulatedCall extends LegCaller {
  readonly callSid = `CA${randomBytes(16).toString('hex')}`;
  callId: string | null = null;
  twiml = '';

  private readonly own: MediaLeg;
  private readonly accountSid: string;

  constructor(private readonly o: SimulatedCallOptions) {
    super();
    this.accountSid = o.accountSid ?? `AC${'0'.repeat(32)}`;
    this.own = new MediaLeg({
      accountSid: this.accountSid,
      callSid: this.callSid,
      ...(o.recordAudio ? { recordAudio: true } : {}),
      ...(o.faults ? { faults: o.faults } : {}),
    });
    legs.set(this, this.own);
  }

  protected get leg(): MediaLeg {
    return this.own;
  }

  get streamSid(): string {
    return this.leg.streamSid;
  }
  /** What the caller said (and mumbled), with when its sound started and ended on the wire. */
  get spoken(): SpokenLine[] {
    return this.leg.spoken;
  }
  /** With `recordAudio`: what the caller said (one frame every 20 ms, silence included)… */
  get inboundAudio(): Buffer[] {
    return this.leg.inboundAudio;
  }
  /** …every assistant frame as it arrived… */
  get outboundAudio(): Buffer[] {
    return this.leg.outboundAudio;
  }
  /** …and what the caller's ear heard, on the same 20 ms timeline as `inboundAudio`. */
  get heardAudio(): Buffer[] {
    return this.leg.heardAudio;
  }

  /** Places the call: the signed voice webhook, then (unless rejected) the media stream. */
  async dial(): Promise<CallOutcome> {
    const params = {
      AccountSid: this.accountSid,
      ApiVersion: '2010-04-01',
      CallSid: this.callSid,
      CallStatus: 'ringing',
      Direction: 'inbound',
      From: this.o.from ?? '+15005550006',
      To: this.o.to,
    };
    const path = '/telephony/twilio/voice';
    const signedUrl = `${(this.o.publicUrl ?? this.o.baseUrl).replace(/\/$/, '')}${path}`;
    const res = await request(`${this.o.baseUrl.replace(/\/$/, '')}${path}`, {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        'x-twilio-signature': twilioSignature(this.o.authToken, signedUrl, params),
      },
      body: new URLSearchParams(params).toString(),
    });
    this.twiml = await res.body.text();
    if (res.statusCode !== 200) throw new Error(`voice webhook answered ${res.statusCode}: ${this.twiml}`);
    if (this.twiml.includes('<Reject')) return { kind: 'rejected', twiml: this.twiml };
    const url = /<Stream url="([^"]+)"/.exec(this.twiml)?.[1];
    if (!url) throw new Error(`no <Stream> in TwiML: ${this.twiml}`);
    const parameters: Record<string, string> = {};
    for (const m of this.twiml.matchAll(/<Parameter name="([^"]+)" value="([^"]*)"\/>/g)) parameters[m[1]!] = m[2]!;
    this.callId = parameters.call_id ?? null;
    await this.leg.connect(url.replace(/&amp;/g, '&'), parameters);
    return { kind: 'connected', callId: this.callId ?? '' };
  }

  /** Sends noise-like speech energy with no decodable words (a cough, "uh"). */
  mumble(ms: number): Promise<void> {
    return this.leg.mumble(ms);
  }

  /**
   * The line goes dead without a hang-up (a half-open connection): no more media, no `stop`,
   * the socket left open.
   */
  goSilent(): void {
    this.leg.goSilent();
  }
}
