/**
 * A simulated caller that speaks the Twilio protocol to a Switchboard server: the signed voice
 * webhook, then the Media Streams WebSocket. It speaks with sandbox TTS audio, hears the
 * assistant through the sandbox STT, plays received audio in real time (echoing marks once
 * "played", and on `clear` dropping what it had not played yet), presses keys and hangs up.
 * Used by the tests, the demo and `npm run call`.
 */
import { randomBytes } from 'node:crypto';
import { request } from 'undici';
import WebSocket from 'ws';
import { twilioSignature } from '../telephony/twilio/signature.js';
import { synthesizeSandboxSpeech } from '../providers/sandbox/tts.js';
import { createSandboxStt } from '../providers/sandbox/stt.js';
import type { SttSession } from '../providers/types.js';

const FRAME = 160;
const SILENCE = 0xff;

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

export interface HeardLine {
  text: string;
  at: number;
}

/** One stretch of caller audio (a `say` or a `mumble`): when its first and last sound left. */
export interface SpokenLine {
  text: string;
  /** When the first frame with sound was sent. */
  startedAt: number;
  /** When the last frame with sound was sent (the trailing silence of the audio not counted). */
  endedAt: number;
}

export type CallOutcome = { kind: 'rejected'; twiml: string } | { kind: 'connected'; callId: string };

export class SimulatedCall {
  readonly callSid = `CA${randomBytes(16).toString('hex')}`;
  readonly streamSid = `MZ${randomBytes(16).toString('hex')}`;
  readonly heard: HeardLine[] = [];
  /** Every `clear` received, with the time. */
  readonly clears: number[] = [];
  /** When each assistant media frame arrived. */
  readonly frameTimes: number[] = [];
  readonly marksEchoed: string[] = [];
  /** What the caller said (and mumbled), with when its sound started and ended on the wire. */
  readonly spoken: SpokenLine[] = [];
  /** With `recordAudio`: what the caller said (one frame every 20 ms, silence included)… */
  readonly inboundAudio: Buffer[] = [];
  /** …every assistant frame as it arrived… */
  readonly outboundAudio: Buffer[] = [];
  /** …and what the caller's ear heard, on the same 20 ms timeline as `inboundAudio`. */
  readonly heardAudio: Buffer[] = [];
  callId: string | null = null;
  twiml = '';
  closed = false;
  closeCode: number | null = null;

  private ws: WebSocket | null = null;
  private stt: SttSession | null = null;
  private sendQueue: Array<{ frame: Buffer; onSent?: () => void }> = [];
  private sendTimer: NodeJS.Timeout | null = null;
  /** Received audio not yet "played", and the marks interleaved with it. */
  private playQueue: Array<{ kind: 'audio'; audio: Buffer } | { kind: 'mark'; name: string }> = [];
  private playTimer: NodeJS.Timeout | null = null;
  private waiters: Array<{ test: () => boolean; resolve: () => void }> = [];
  private readonly accountSid: string;
  private lastAssistantAudioAt = 0;

  constructor(private readonly o: SimulatedCallOptions) {
    this.accountSid = o.accountSid ?? `AC${'0'.repeat(32)}`;
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
    await this.connect(url.replace(/&amp;/g, '&'), parameters);
    return { kind: 'connected', callId: this.callId ?? '' };
  }

  private async connect(url: string, customParameters: Record<string, string>) {
    this.stt = await createSandboxStt().connect(
      { provider: 'sandbox' },
      {
        onTranscript: (t) => {
          if (t.isFinal && t.text.trim() !== '') {
            this.heard.push({ text: t.text.trim(), at: Date.now() });
            this.wake();
          }
        },
        onError: () => undefined,
      },
    );
    const ws = new WebSocket(url, { autoPong: !this.o.faults?.noPong });
    this.ws = ws;
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', reject);
    });
    ws.on('message', (data) => this.onMessage(data.toString()));
    ws.on('close', (code) => {
      this.closeCode = code;
      this.stopTimers();
      // the line goes quiet: let the ear finish what it was hearing, then the call is over
      for (const item of this.playQueue) if (item.kind === 'audio') this.stt?.sendAudio(item.audio);
      this.playQueue = [];
      for (let i = 0; i < 25; i++) this.stt?.sendAudio(Buffer.alloc(FRAME, SILENCE));
      this.stt?.finalize();
      setTimeout(() => {
        this.closed = true;
        this.wake();
      }, 100);
    });
    ws.send(JSON.stringify({ event: 'connected', protocol: 'Call', version: '1.0.0' }));
    ws.send(
      JSON.stringify({
        event: 'start',
        sequenceNumber: '1',
        streamSid: this.streamSid,
        start: {
          streamSid: this.streamSid,
          accountSid: this.accountSid,
          callSid: this.callSid,
          tracks: ['inbound'],
          mediaFormat: { encoding: 'audio/x-mulaw', sampleRate: 8000, channels: 1 },
          customParameters,
        },
      }),
    );
    // the caller's line is never silent on the wire: 20 ms frames, speech or silence
    this.sendTimer = setInterval(() => this.sendFrame(), 20);
  }

  private onMessage(raw: string) {
    let m: { event?: string; media?: { payload?: string }; mark?: { name?: string } };
    try {
      m = JSON.parse(raw) as typeof m;
    } catch {
      return;
    }
    if (m.event === 'media' && m.media?.payload) {
      const audio = Buffer.from(m.media.payload, 'base64');
      this.frameTimes.push(Date.now());
      this.lastAssistantAudioAt = Date.now();
      if (this.o.recordAudio) this.outboundAudio.push(audio);
      this.playQueue.push({ kind: 'audio', audio });
      this.schedulePlay();
    } else if (m.event === 'mark' && m.mark?.name) {
      this.playQueue.push({ kind: 'mark', name: m.mark.name });
      this.schedulePlay();
    } else if (m.event === 'clear') {
      this.clears.push(Date.now());
      // Twilio drops unplayed audio and sends back the marks still pending
      const pending = this.playQueue.filter((x) => x.kind === 'mark') as { name: string }[];
      this.playQueue = [];
      // the ear hears the audio stop: a break, so that a cut sentence is not read into the next one
      this.stt?.sendAudio(Buffer.alloc(FRAME, SILENCE));
      for (const p of pending) this.echoMark(p.name);
      this.wake();
    }
  }

  /** Plays received audio in real time; a mark is echoed once the audio before it played. */
  private schedulePlay() {
    if (this.playTimer) return;
    const step = () => {
      this.playTimer = null;
      while (this.playQueue[0]?.kind === 'mark') this.echoMark((this.playQueue.shift() as { name: string }).name);
      const next = this.playQueue[0];
      if (!next) return;
      this.playQueue.shift();
      const audio = (next as { audio: Buffer }).audio;
      this.earHears(audio);
      this.playTimer = setTimeout(step, audio.length / 8);
    };
    step();
  }

  /** What the caller hears, as it plays (recorded on the same 20 ms timeline as what it says). */
  private earHears(audio: Buffer) {
    this.stt?.sendAudio(audio);
    if (this.o.recordAudio) this.heardAudio.push(audio);
  }

  private echoMark(name: string) {
    if (this.o.faults?.noMarkEcho) return;
    this.marksEchoed.push(name);
    this.send({ event: 'mark', sequenceNumber: '0', streamSid: this.streamSid, mark: { name } });
  }

  private sendFrame() {
    // the earpiece plays silence whenever no assistant audio is playing
    if (!this.playTimer && this.playQueue.length === 0) this.earHears(Buffer.alloc(FRAME, SILENCE));
    const next = this.sendQueue.shift();
    const frame = next?.frame ?? Buffer.alloc(FRAME, SILENCE);
    if (this.o.recordAudio) this.inboundAudio.push(frame);
    this.send({ event: 'media', streamSid: this.streamSid, media: { track: 'inbound', payload: frame.toString('base64') } });
    next?.onSent?.();
    if (this.sendQueue.length === 0) this.wake();
  }

  private send(message: unknown) {
    if (this.ws?.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify(message));
  }

  /** Speaks a line (sandbox TTS audio, sent in real time); resolves when it has been sent. */
  async say(text: string): Promise<void> {
    const audio = synthesizeSandboxSpeech(text);
    const frames: Buffer[] = [];
    for (let i = 0; i < audio.length; i += FRAME) {
      const frame = Buffer.alloc(FRAME, SILENCE);
      audio.copy(frame, 0, i, Math.min(i + FRAME, audio.length));
      frames.push(frame);
    }
    await this.speak(text, frames);
  }

  /** Sends noise-like speech energy with no decodable words (a cough, "uh"). */
  async mumble(ms: number): Promise<void> {
    const frames: Buffer[] = [];
    for (let f = 0; f < Math.ceil(ms / 20); f++) {
      const frame = Buffer.alloc(FRAME);
      for (let i = 0; i < FRAME; i++) frame[i] = (i * 37 + f * 11) % 2 === 0 ? 0x10 : 0x90;
      frames.push(frame);
    }
    await this.speak('', frames);
  }

  /** Queues frames behind whatever is being said and notes when their sound starts and ends. */
  private async speak(text: string, frames: Buffer[]): Promise<void> {
    const line: SpokenLine = { text, startedAt: 0, endedAt: 0 };
    const sound = (f: Buffer) => f.some((b) => b !== SILENCE);
    const first = frames.findIndex(sound);
    let last = -1;
    for (let i = frames.length - 1; i >= 0; i--) if (sound(frames[i]!)) { last = i; break; }
    frames.forEach((frame, i) => {
      const onSent =
        i === first || i === last
          ? () => {
              if (i === first) line.startedAt = Date.now();
              if (i === last) line.endedAt = Date.now();
            }
          : undefined;
      this.sendQueue.push(onSent ? { frame, onSent } : { frame });
    });
    this.spoken.push(line);
    await this.until(() => this.sendQueue.length === 0 || this.closed, 60_000);
  }

  /**
   * The line goes dead without a hang-up (a half-open connection): no more media, no `stop`,
   * the socket left open.
   */
  goSilent(): void {
    if (this.sendTimer) clearInterval(this.sendTimer);
    this.sendTimer = null;
  }

  pressKey(digit: string): void {
    this.send({ event: 'dtmf', streamSid: this.streamSid, sequenceNumber: '0', dtmf: { track: 'inbound_track', digit } });
  }

  /** Waits until the assistant has said something containing `fragment` (case-insensitive). */
  async hear(fragment: string | RegExp, timeoutMs = 20_000): Promise<HeardLine> {
    const test = (h: HeardLine) => (typeof fragment === 'string' ? h.text.toLowerCase().includes(fragment.toLowerCase()) : fragment.test(h.text));
    await this.until(() => this.heard.some(test) || this.closed, timeoutMs, `hear ${String(fragment)}`);
    const line = this.heard.find(test);
    if (!line) throw new Error(`the call ended before the assistant said ${String(fragment)}; heard: ${this.heardText()}`);
    return line;
  }

  /** Waits until the assistant has been quiet for `quietMs` (its audio finished playing). */
  async quiet(quietMs = 600, timeoutMs = 30_000): Promise<void> {
    await this.until(() => this.closed || (this.playQueue.length === 0 && Date.now() - this.lastAssistantAudioAt > quietMs), timeoutMs, 'quiet');
  }

  async ended(timeoutMs = 30_000): Promise<void> {
    await this.until(() => this.closed, timeoutMs, 'the call to end');
  }

  heardText(): string {
    return this.heard.map((h) => h.text).join(' | ');
  }

  async hangUp(): Promise<void> {
    this.send({ event: 'stop', sequenceNumber: '0', streamSid: this.streamSid, stop: { accountSid: this.accountSid, callSid: this.callSid } });
    this.ws?.close(1000);
    await this.until(() => this.closed, 5_000, 'close');
  }

  async close(): Promise<void> {
    this.stopTimers();
    if (this.ws && this.ws.readyState === WebSocket.OPEN) this.ws.close(1000);
    await this.stt?.close();
    this.stt = null;
  }

  private stopTimers() {
    if (this.sendTimer) clearInterval(this.sendTimer);
    if (this.playTimer) clearTimeout(this.playTimer);
    this.sendTimer = null;
    this.playTimer = null;
  }

  private wake() {
    for (const w of [...this.waiters]) {
      if (w.test()) {
        this.waiters.splice(this.waiters.indexOf(w), 1);
        w.resolve();
      }
    }
  }

  private until(test: () => boolean, timeoutMs: number, what = 'condition'): Promise<void> {
    if (test()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const waiter = { test, resolve: () => { clearTimeout(timer); clearInterval(poll); resolve(); } };
      const poll = setInterval(() => this.wake(), 50);
      const timer = setTimeout(() => {
        clearInterval(poll);
        this.waiters.splice(this.waiters.indexOf(waiter), 1);
        reject(new Error(`timed out waiting for ${what}; heard so far: ${this.heardText()}`));
      }, timeoutMs);
      this.waiters.push(waiter);
    });
  }
}
