/**
 * Twilio's side of one Media Streams WebSocket with a simulated person (or machine) on the line:
 * it opens the socket as Twilio does (`connected`, `start` with the `<Parameter>`s, a `media`
 * frame every 20 ms, speech or silence), speaks with sandbox TTS audio, hears what the server
 * streams through the sandbox STT while playing it in real time (echoing marks once "played",
 * dropping unplayed audio on `clear`), presses keys and hangs up.
 *
 * The simulated inbound caller (./caller.ts) and the callee of the Twilio stand-in (./twilio.ts)
 * are both one of these on the line. A web call's browser (./web-caller.ts) is one on the web
 * wire, and a SIP phone (./sip-caller.ts) one on the RTP wire: there the call's signalling sets
 * up an `RtpLink` (no socket of the leg's own, no marks, no `clear`: RTP has none). The Telnyx
 * stand-in's calls (./telnyx-call.ts) are one on Telnyx's media streaming wire: the same socket
 * and messages in Telnyx's shape, and with both tracks, what the party hears sent back too.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import WebSocket from 'ws';
import { synthesizeSandboxSpeech } from '../providers/sandbox/tts.js';
import { createSandboxStt } from '../providers/sandbox/stt.js';
import type { SttSession } from '../providers/types.js';
import { AudioBridge } from '../audio/bridge.js';

export const FRAME = 160;
const SILENCE = 0xff;

export interface HeardLine {
  text: string;
  at: number;
}

/** One stretch of audio the leg sent (a `say`, a `mumble`, a tone): when its first and last sound left. */
export interface SpokenLine {
  text: string;
  /** When the first frame with sound was sent. */
  startedAt: number;
  /** When the last frame with sound was sent (the trailing silence of the audio not counted). */
  endedAt: number;
}

/**
 * Who ended the stream: `callee` (this leg hung up: `hangUp()`), `carrier` (Twilio ended it:
 * `stop()`), `server` (the far end closed the socket), `local` (`close()`, tearing down).
 */
export type LegEnd = 'callee' | 'carrier' | 'server' | 'local';

/**
 * The RTP wire of a SIP call (./sip-caller.ts): its media, set up by the call's signalling. The
 * leg sends every 20 ms frame (silence included, as a phone does) and key presses through it,
 * and asks it to hang up (a BYE).
 */
export interface RtpLink {
  /** The far end's audio, μ-law 8 kHz, in order (`audio`), and its hang-up (`ended`), go to the leg from now on. */
  start(input: { audio(frame: Buffer): void; ended(): void }): void;
  /** One 20 ms μ-law frame out. */
  send(frame: Buffer): void;
  /** A key press (RFC 4733). */
  sendDtmf(digit: string): void;
  /** This end hangs up (a BYE); resolves once the far end answered it, or gave up. */
  hangUp(): Promise<void>;
  /** The media stops (its sockets close); no word to the far end. */
  close(): void;
}

/** What a Telnyx stream's `start` says of its call (./telnyx-call.ts). */
export interface TelnyxStreamInfo {
  callControlId: string;
  callSessionId: string;
  from: string;
  to: string;
  clientState: string | null;
  /** `stream_track: both_tracks`: every frame the party hears goes back as the `outbound` track. */
  bothTracks: boolean;
}

export interface MediaLegOptions {
  /**
   * The wire: `twilio` (Media Streams JSON, base64 μ-law 8 kHz: the default), `web` (a web
   * call's stream, docs/web-calls.md: binary 16 kHz PCM and JSON control messages), `rtp` (a
   * SIP call's media, μ-law 8 kHz in RTP packets: `connectRtp`) or `telnyx` (Telnyx's media
   * streaming frames, base64 μ-law 8 kHz RTP payloads; `telnyx` says what its `start` carries).
   */
  wire?: 'twilio' | 'web' | 'rtp' | 'telnyx';
  telnyx?: TelnyxStreamInfo;
  accountSid: string;
  callSid: string;
  streamSid?: string;
  /** Records every frame both ways (for a WAV file). */
  recordAudio?: boolean;
  /** A broken far end, for the tests of a call whose stream misbehaves. */
  faults?: {
    /** Never echo marks (the server must not wait for them forever). */
    noMarkEcho?: boolean;
    /** Never answer WebSocket pings (a half-open connection). */
    noPong?: boolean;
  };
}

type Played = { kind: 'audio'; audio: Buffer } | { kind: 'mark'; name: string };

export class MediaLeg {
  readonly callSid: string;
  readonly streamSid: string;
  readonly heard: HeardLine[] = [];
  /** Every `clear` received, with the time. */
  readonly clears: number[] = [];
  /** When each 20 ms frame of the server's audio arrived (a message of 40 ms counts twice). */
  readonly frameTimes: number[] = [];
  readonly marksEchoed: string[] = [];
  /** What this leg said (and mumbled), with when its sound started and ended on the wire. */
  readonly spoken: SpokenLine[] = [];
  /** With `recordAudio`: what this leg sent (one frame every 20 ms, silence included)… */
  readonly inboundAudio: Buffer[] = [];
  /** …every server frame as it arrived… */
  readonly outboundAudio: Buffer[] = [];
  /** …and what the ear heard, on the same 20 ms timeline as `inboundAudio`. */
  readonly heardAudio: Buffer[] = [];
  /** The socket closed and the ear has finished hearing. */
  closed = false;
  closeCode: number | null = null;
  /** Who ended the stream, once it ended. */
  endedBy: LegEnd | null = null;

  /** Web calls: every JSON message the server sent (`started`, `message`, `node`, `turn`, `latency`, `ended`, …). */
  readonly events: Array<{ type: string; [key: string]: unknown }> = [];
  private ws: WebSocket | null = null;
  /** The RTP wire, once connected (`connectRtp`). */
  private rtp: RtpLink | null = null;
  /** Web calls: 16 kHz PCM on the wire, μ-law 8 kHz for the sandbox voice and ear. */
  private readonly bridge: AudioBridge | null;
  /** The leg's ear first, then any other listener added by `addEar` (a voicemail's recorder). */
  private ears: SttSession[] = [];
  private sendQueue: Array<{ frame: Buffer; onSent?: () => void }> = [];
  private sendTimer: NodeJS.Timeout | null = null;
  /** Received audio not yet "played", and the marks interleaved with it. */
  private playQueue: Played[] = [];
  private playTimer: NodeJS.Timeout | null = null;
  /** When the audio being played ends (performance.now()). */
  private playClock = 0;
  private waiters: Array<{ test: () => boolean; resolve: () => void }> = [];
  private endListeners: Array<(by: LegEnd) => void> = [];
  private lastServerAudioAt = 0;
  /** When the ear last heard the voice (a modem frame coming in); 0 before it first did. */
  lastVoiceAt = 0;
  private sequence = 0;
  private chunk = 0;
  private ending: LegEnd | null = null;

  constructor(private readonly o: MediaLegOptions) {
    this.callSid = o.callSid;
    this.streamSid = o.streamSid ?? (o.wire === 'telnyx' ? randomUUID() : `MZ${randomBytes(16).toString('hex')}`);
    this.bridge = o.wire === 'web' ? AudioBridge.for({ encoding: 'pcm16', sampleRate: 16_000 }) : null;
  }

  /** Opens the stream: the socket, then `connected` and `start`, then a frame every 20 ms. */
  async connect(url: string, customParameters: Record<string, string>, headers: Record<string, string> = {}): Promise<void> {
    this.ears.push(await this.openEar((line) => this.heard.push(line)));
    const ws = new WebSocket(url, { autoPong: !this.o.faults?.noPong, headers });
    this.ws = ws;
    // before the open resolves: a web call's server speaks first, maybe in the upgrade's own packet
    ws.on('message', (data, isBinary) => {
      if (isBinary && this.bridge) this.received(this.bridge.toProviders(data as Buffer));
      else if (this.bridge) this.onWebMessage(data.toString());
      else this.onMessage(data.toString());
    });
    try {
      await new Promise<void>((resolve, reject) => {
        ws.once('open', () => resolve());
        ws.once('error', reject);
      });
    } catch (err) {
      this.ws = null;
      await this.closeEars();
      throw err;
    }
    ws.on('error', () => undefined);
    ws.on('close', (code) => this.onClose(code));
    if (this.o.wire === 'telnyx') this.telnyxStart();
    else if (!this.bridge) this.twilioStart(customParameters);
    // the line is never silent on the wire: 20 ms frames, speech or silence
    this.sendTimer = setInterval(() => this.sendFrame(), 20);
  }

  /**
   * Opens an RTP wire (a SIP call the signalling has answered): the ear first, then the far end's
   * audio, then a frame every 20 ms.
   */
  async connectRtp(link: RtpLink): Promise<void> {
    this.ears.push(await this.openEar((line) => this.heard.push(line)));
    this.rtp = link;
    link.start({ audio: (frame) => this.received(frame), ended: () => this.rtpEnded() });
    this.sendTimer = setInterval(() => this.sendFrame(), 20);
  }

  /** The RTP wire is over (a BYE either way): the media stops, and the leg ends as a closed socket does. */
  private rtpEnded() {
    if (this.endedBy) return;
    this.rtp?.close();
    this.onClose(null);
  }

  private twilioStart(customParameters: Record<string, string>) {
    this.ws?.send(JSON.stringify({ event: 'connected', protocol: 'Call', version: '1.0.0' }));
    this.send({
      event: 'start',
      streamSid: this.streamSid,
      start: {
        streamSid: this.streamSid,
        accountSid: this.o.accountSid,
        callSid: this.callSid,
        tracks: ['inbound'],
        mediaFormat: { encoding: 'audio/x-mulaw', sampleRate: 8000, channels: 1 },
        customParameters,
      },
    });
  }

  private telnyxStart() {
    const t = this.o.telnyx;
    this.ws?.send(JSON.stringify({ event: 'connected', version: '1.0.0' }));
    this.send({
      event: 'start',
      start: {
        user_id: randomUUID(),
        call_control_id: t?.callControlId ?? this.callSid,
        call_session_id: t?.callSessionId ?? randomUUID(),
        from: t?.from ?? '',
        to: t?.to ?? '',
        tags: [],
        client_state: t?.clientState ?? null,
        custom_parameters: {},
        media_format: { encoding: 'PCMU', sample_rate: 8000, channels: 1 },
      },
    });
  }

  /** The stream is open. */
  get open(): boolean {
    if (this.rtp) return !this.endedBy;
    return this.ws?.readyState === WebSocket.OPEN;
  }

  /** Called once when the stream ends, with who ended it (at once if it already has). */
  onEnded(listener: (by: LegEnd) => void): void {
    if (this.endedBy) listener(this.endedBy);
    else this.endListeners.push(listener);
  }

  /**
   * Another ear on what this leg hears from now on (its own sandbox STT), e.g. a voicemail
   * recording that starts at the beep. Finalized and closed with the leg.
   */
  async addEar(onLine: (line: HeardLine) => void): Promise<void> {
    const ear = await this.openEar(onLine);
    if (this.endedBy) await ear.close();
    else this.ears.push(ear);
  }

  private openEar(onLine: (line: HeardLine) => void): Promise<SttSession> {
    return createSandboxStt().connect(
      { provider: 'sandbox' },
      {
        onTranscript: (t) => {
          if (t.isFinal && t.text.trim() !== '') {
            onLine({ text: t.text.trim(), at: Date.now() });
            this.wake();
          }
        },
        onError: () => undefined,
      },
    );
  }

  private onClose(code: number | null) {
    this.closeCode = code;
    this.endedBy = this.ending ?? 'server';
    this.stopTimers();
    // the line goes quiet: let the ears finish what they were hearing, then the call is over
    for (const item of this.playQueue) if (item.kind === 'audio') this.feedEars(item.audio);
    this.playQueue = [];
    for (let i = 0; i < 25; i++) this.feedEars(Buffer.alloc(FRAME, SILENCE));
    for (const ear of this.ears) ear.finalize();
    setTimeout(() => {
      this.closed = true;
      this.wake();
      const listeners = this.endListeners;
      this.endListeners = [];
      for (const l of listeners) l(this.endedBy!);
    }, 100);
  }

  private onMessage(raw: string) {
    let m: { event?: string; media?: { payload?: string }; mark?: { name?: string } };
    try {
      m = JSON.parse(raw) as typeof m;
    } catch {
      return;
    }
    if (m.event === 'media' && m.media?.payload) this.received(Buffer.from(m.media.payload, 'base64'));
    else if (m.event === 'mark' && m.mark?.name) this.markReceived(m.mark.name);
    else if (m.event === 'clear') this.cleared();
  }

  /** A web call's control message. */
  private onWebMessage(raw: string) {
    let m: { type?: unknown; name?: unknown };
    try {
      m = JSON.parse(raw) as typeof m;
    } catch {
      return;
    }
    if (typeof m.type !== 'string') return;
    this.events.push(m as { type: string });
    if (m.type === 'mark' && typeof m.name === 'string') this.markReceived(m.name);
    else if (m.type === 'clear') this.cleared();
    this.wake();
  }

  /** Server audio (μ-law 8 kHz): played in real time. */
  private received(audio: Buffer) {
    const now = Date.now();
    // a 20 ms frame at a time, whatever a message carries (Twilio's: 40 ms)
    for (let i = 0; i < Math.max(1, Math.round(audio.length / FRAME)); i++) this.frameTimes.push(now);
    this.lastServerAudioAt = now;
    if (this.o.recordAudio) this.outboundAudio.push(audio);
    this.playQueue.push({ kind: 'audio', audio });
    this.schedulePlay();
  }

  private markReceived(name: string) {
    this.playQueue.push({ kind: 'mark', name });
    this.schedulePlay();
  }

  private cleared() {
    this.clears.push(Date.now());
    // Twilio (and a web-call page) drop unplayed audio and send back the marks still pending
    const pending = this.playQueue.filter((x) => x.kind === 'mark') as { name: string }[];
    this.playQueue = [];
    this.playClock = performance.now();
    // the ear hears the audio stop: a break, so that a cut sentence is not read into the next one
    this.feedEars(Buffer.alloc(FRAME, SILENCE));
    for (const p of pending) this.echoMark(p.name);
    this.wake();
  }

  /**
   * Plays received audio in real time; a mark is echoed once the audio before it played. The
   * play clock runs on the wall clock, not on timer delays (which run late by a little each): a
   * stream that never stops (background audio) is played at its own rate, with no growing lag.
   */
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
      const now = performance.now();
      this.playClock = Math.max(this.playClock, now) + audio.length / 8;
      this.playTimer = setTimeout(step, Math.max(0, this.playClock - now));
    };
    step();
  }

  /** What the ear hears, as it plays (recorded on the same 20 ms timeline as what is said). */
  private earHears(audio: Buffer) {
    this.feedEars(audio);
    // Telnyx's outbound track: what the party hears, back to the server
    if (this.o.telnyx?.bothTracks) this.sendTelnyxMedia('outbound', audio);
    if ((this.ears[0] as { hearing?: boolean } | undefined)?.hearing) this.lastVoiceAt = Date.now();
    if (this.o.recordAudio) this.heardAudio.push(audio);
  }

  private feedEars(audio: Buffer) {
    for (const ear of this.ears) ear.sendAudio(audio);
  }

  private echoMark(name: string) {
    if (this.o.faults?.noMarkEcho) return;
    this.marksEchoed.push(name);
    if (this.bridge) this.ws?.send(JSON.stringify({ type: 'mark', name }));
    else if (this.o.wire === 'telnyx') this.send({ event: 'mark', mark: { name } });
    else this.send({ event: 'mark', streamSid: this.streamSid, mark: { name } });
  }

  private sendFrame() {
    // the earpiece plays silence whenever no server audio is playing
    if (!this.playTimer && this.playQueue.length === 0) this.earHears(Buffer.alloc(FRAME, SILENCE));
    const next = this.sendQueue.shift();
    const frame = next?.frame ?? Buffer.alloc(FRAME, SILENCE);
    if (this.o.recordAudio) this.inboundAudio.push(frame);
    if (this.rtp) {
      if (!this.endedBy) this.rtp.send(frame);
    } else if (this.bridge) {
      if (this.ws?.readyState === WebSocket.OPEN) this.ws.send(this.bridge.fromProviders(frame), { binary: true });
    } else if (this.o.wire === 'telnyx') this.sendTelnyxMedia('inbound', frame);
    else this.sendTwilioFrame(frame);
    next?.onSent?.();
    if (this.sendQueue.length === 0) this.wake();
  }

  private sendTwilioFrame(frame: Buffer) {
    const chunk = ++this.chunk;
    this.send({
      event: 'media',
      streamSid: this.streamSid,
      media: { track: 'inbound', chunk: String(chunk), timestamp: String((chunk - 1) * 20), payload: frame.toString('base64') },
    });
  }

  /** One Telnyx media frame of a track, in the key order Telnyx documents (`stream_id` last). */
  private sendTelnyxMedia(track: 'inbound' | 'outbound', audio: Buffer) {
    const chunk = track === 'inbound' ? ++this.chunk : this.chunk;
    this.send({ event: 'media', media: { track, chunk: String(chunk), timestamp: String(Math.max(0, chunk - 1) * 20), payload: audio.toString('base64') } });
  }

  /**
   * Sends one message; every message after `connected` carries the next sequence number (Twilio's
   * `sequenceNumber`; Telnyx's `sequence_number`, with `stream_id`).
   */
  private send(message: Record<string, unknown>) {
    if (this.ws?.readyState !== WebSocket.OPEN) return;
    const sequence = String(++this.sequence);
    if (this.o.wire === 'telnyx') this.ws.send(JSON.stringify({ event: message.event, sequence_number: sequence, ...message, stream_id: this.streamSid }));
    else this.ws.send(JSON.stringify({ event: message.event, sequenceNumber: sequence, ...message }));
  }

  /** Speaks a line (sandbox TTS audio, sent in real time); resolves when it has been sent. */
  async say(text: string): Promise<void> {
    await this.play(synthesizeSandboxSpeech(text), text);
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

  /** Sends μ-law audio (a greeting, a beep) in real time, noted in `spoken` as `text`. */
  async play(audio: Buffer, text = ''): Promise<void> {
    const frames: Buffer[] = [];
    for (let i = 0; i < audio.length; i += FRAME) {
      const frame = Buffer.alloc(FRAME, SILENCE);
      audio.copy(frame, 0, i, Math.min(i + FRAME, audio.length));
      frames.push(frame);
    }
    await this.speak(text, frames);
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
    if (this.rtp) return void (this.endedBy || this.rtp.sendDtmf(digit));
    if (this.bridge) return void this.ws?.send(JSON.stringify({ type: 'dtmf', digit }));
    if (this.o.wire === 'telnyx') return this.send({ event: 'dtmf', occurred_at: new Date().toISOString(), dtmf: { digit } });
    this.send({ event: 'dtmf', streamSid: this.streamSid, dtmf: { track: 'inbound_track', digit } });
  }

  /** Waits until the server has said something containing `fragment` (case-insensitive). */
  async hear(fragment: string | RegExp, timeoutMs = 20_000): Promise<HeardLine> {
    const test = (h: HeardLine) => (typeof fragment === 'string' ? h.text.toLowerCase().includes(fragment.toLowerCase()) : fragment.test(h.text));
    await this.until(() => this.heard.some(test) || this.closed, timeoutMs, `hear ${String(fragment)}`);
    const line = this.heard.find(test);
    if (!line) throw new Error(`the call ended before the assistant said ${String(fragment)}; heard: ${this.heardText()}`);
    return line;
  }

  /**
   * Waits until the server has been quiet for `quietMs` (its audio finished playing). `by: 'voice'`
   * is for a call with background audio, whose line is never silent: quiet is then no voice (no
   * modem frame in the ear) for `quietMs`, with every mark of what was said played. Wait for the
   * voice to start first: before it does, the last voice heard may be long past.
   */
  async quiet(quietMs = 600, timeoutMs = 30_000, by: 'audio' | 'voice' = 'audio'): Promise<void> {
    const quiet =
      by === 'audio'
        ? () => this.playQueue.length === 0 && Date.now() - this.lastServerAudioAt > quietMs
        : () => this.lastVoiceAt > 0 && !this.playQueue.some((p) => p.kind === 'mark') && Date.now() - this.lastVoiceAt > quietMs;
    await this.until(() => this.closed || quiet(), timeoutMs, 'quiet');
  }

  async ended(timeoutMs = 30_000): Promise<void> {
    await this.until(() => this.closed, timeoutMs, 'the call to end');
  }

  heardText(): string {
    return this.heard.map((h) => h.text).join(' | ');
  }

  /** This end hangs up: `stop`, then the socket closes. */
  async hangUp(): Promise<void> {
    await this.end('callee');
  }

  /** The carrier ends the stream (a REST hang-up or a new TwiML): `stop`, then the socket closes. */
  async stop(): Promise<void> {
    await this.end('carrier');
  }

  private async end(by: LegEnd): Promise<void> {
    if (this.rtp) {
      if (!this.endedBy && !this.ending) {
        this.ending = by;
        await this.rtp.hangUp();
        this.rtpEnded();
      }
    } else if (!this.endedBy && this.ws?.readyState === WebSocket.OPEN) {
      this.ending ??= by;
      if (this.bridge) this.ws.send(JSON.stringify({ type: 'hangup' }));
      else if (this.o.wire === 'telnyx') this.send({ event: 'stop', stop: { user_id: randomUUID(), call_control_id: this.o.telnyx?.callControlId ?? this.callSid } });
      else this.send({ event: 'stop', streamSid: this.streamSid, stop: { accountSid: this.o.accountSid, callSid: this.callSid } });
      this.ws.close(1000);
    }
    await this.until(() => this.closed, 5_000, 'close');
  }

  /** Tears the leg down (timers, socket, ears) without waiting for the far end. */
  async close(): Promise<void> {
    this.stopTimers();
    if (this.rtp && !this.endedBy) {
      this.ending ??= 'local';
      this.rtpEnded();
    }
    if (this.ws && this.ws.readyState === WebSocket.OPEN) {
      this.ending ??= 'local';
      this.ws.close(1000);
    }
    await this.closeEars();
  }

  private async closeEars() {
    const ears = this.ears;
    this.ears = [];
    await Promise.all(ears.map((e) => e.close()));
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

  /** Resolves once `test()` holds (checked on every event and every 50 ms); rejects after `timeoutMs`. */
  until(test: () => boolean, timeoutMs: number, what = 'condition'): Promise<void> {
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
