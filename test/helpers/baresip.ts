/**
 * A real SIP phone for end-to-end tests: Debian's `baresip` (1.0.0, `apt-get install baresip`),
 * one process per instance, on 127.0.0.1 only, with no sound card. It is driven through its
 * `ctrl_tcp` module (netstring-framed JSON: commands in, responses and call events out), speaks
 * a WAV file as its microphone (`aufile`) and records what it hears and what it sent (`sndfile`,
 * one pair of WAVs per call). docs/baresip.md has the configuration and the gotchas.
 *
 *   const bob = await Baresip.start({ name: 'bob', autoAnswer: true });
 *   const alice = await Baresip.start({ name: 'alice', playWav: 'hello.wav' });
 *   await alice.dial(bob.uri);
 *   await bob.waitFor('CALL_ESTABLISHED');
 *   ...
 *   afterEach(() => stopAllBaresip());
 *
 * Every instance is also stopped when the test process exits, and baresip quits by itself after
 * `lifetimeSeconds` (`-t`), so a killed test worker leaves nothing running for long.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createSocket } from 'node:dgram';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { endianness, tmpdir } from 'node:os';
import { wavHeader } from '../../src/audio/wav.js';
import { basename, join } from 'node:path';

export const BARESIP = process.env.BARESIP_PATH ?? '/usr/bin/baresip';
export const BARESIP_MODULES = process.env.BARESIP_MODULES ?? '/usr/lib/baresip/modules';
const MODULES = ['g711', 'aufile', 'sndfile', 'account', 'menu', 'ctrl_tcp'];

/**
 * Whether the SIP tests can run: baresip and the modules the harness loads are installed
 * (`apt-get install -y baresip`). Without them they are skipped with a warning; with
 * REQUIRE_BARESIP=1 a missing baresip is a failure instead.
 */
export function baresipAvailable(): boolean {
  const missing = [BARESIP, ...MODULES.map((m) => join(BARESIP_MODULES, `${m}.so`))].filter((p) => !existsSync(p));
  if (missing.length === 0) return true;
  const why = `missing ${missing.join(', ')} (apt-get install -y baresip, or set BARESIP_PATH / BARESIP_MODULES)`;
  if (process.env.REQUIRE_BARESIP === '1') throw new Error(`REQUIRE_BARESIP=1 but baresip is not usable: ${why}`);
  process.stderr.write(`\n[baresip tests skipped] ${why}\n`);
  return false;
}

export type BaresipCodec = 'PCMU' | 'PCMA';

/**
 * `once`: the file, then silence (until `maxCallSeconds`); `loop`: the file over and over;
 * `hangup`: the file, then baresip hangs up by itself (CALL_CLOSED "end of file", within ~1 s).
 */
export type PlayMode = 'once' | 'loop' | 'hangup';

export interface BaresipOptions {
  /** Label in errors; also the default SIP user. */
  name?: string;
  /**
   * The account's user (`sip:<user>@127.0.0.1`). baresip takes an incoming INVITE only when the
   * request-URI's user is this one (else 404 Not Found): dial `instance.uri`.
   */
  user?: string;
  displayName?: string;
  /** UDP and TCP; baresip also takes TCP sipPort+1 for TLS. 0 or absent: a free one is picked. */
  sipPort?: number;
  /** RTP port range (RTCP goes on RTP+1). Default: baresip's 1024-49152. */
  rtpPortMin?: number;
  rtpPortMax?: number;
  /** The microphone. Any WAV sox reads (converted to 8 kHz mono 16-bit). Default: silence. */
  playWav?: string;
  playMode?: PlayMode;
  /** After each call, what it heard is written here (8 kHz mono 16-bit WAV). */
  recordWav?: string;
  /** Digest credentials for outgoing requests (`auth_user` / `auth_pass`). */
  username?: string;
  password?: string;
  /**
   * true: baresip answers at once (200 OK, no 180 and no CALL_INCOMING event);
   * { afterMs }: it rings (180, CALL_INCOMING) and the harness answers after that long.
   * Default: no, call answer() (or hangup() to refuse: 486 Rejected).
   */
  autoAnswer?: boolean | { afterMs: number };
  /** Offered / accepted codecs, in order. Default PCMU, PCMA. */
  codecs?: BaresipCodec[];
  /** Packet time in ms. Default 20. */
  ptime?: number;
  /**
   * An incoming REFER: true (default) answers 202, emits CALL_TRANSFER (param: the Refer-To URI)
   * and dials that URI, NOTIFYing the progress; false refuses it (501 Not Implemented).
   */
  acceptTransfer?: boolean;
  /** Print every SIP message into `log` (`baresip -s`). */
  sipTrace?: boolean;
  /** Length of the generated microphone audio for `once` and `loop`. Default 300. */
  maxCallSeconds?: number;
  /** baresip quits by itself after this long. Default 900. */
  lifetimeSeconds?: number;
  /** Waiting for baresip to be ready. Default 10 000. */
  startTimeoutMs?: number;
}

export interface BaresipEvent {
  /**
   * CALL_INCOMING, CALL_RINGING, CALL_PROGRESS, CALL_ESTABLISHED, CALL_CLOSED, CALL_DTMF_START,
   * CALL_DTMF_END, CALL_TRANSFER, CALL_TRANSFER_FAILED, CALL_RTPESTAB, CALL_RTCP,
   * CALL_LOCAL_SDP, CALL_REMOTE_SDP, AUDIO_ERROR… (baresip 1.0.0 names the transfer events
   * TRANSFER and TRANSFER_FAILED: they are given the CALL_ prefix here).
   */
  type: string;
  /** The event's text: the SIP reason on CALL_CLOSED ("486 Rejected"), the key on CALL_DTMF_START, the Refer-To on CALL_TRANSFER. '' if none. */
  param: string;
  /** The SIP Call-ID. */
  callId?: string;
  direction?: 'incoming' | 'outgoing';
  peerUri?: string;
  /** Date.now() when the harness got it. */
  at: number;
  /** The JSON as baresip sent it. */
  raw: Record<string, unknown>;
}

interface Waiter {
  type: string;
  match?: (e: BaresipEvent) => boolean;
  resolve: (e: BaresipEvent) => void;
  reject: (err: Error) => void;
  timer: NodeJS.Timeout;
}

const live = new Set<Baresip>();
let exitHook = false;

/** Stops every instance still running (for afterEach / afterAll). */
export async function stopAllBaresip(): Promise<void> {
  await Promise.all([...live].map((b) => b.stop()));
}

export class Baresip {
  readonly name: string;
  readonly user: string;
  /** What baresip reported, oldest first. */
  readonly events: BaresipEvent[] = [];
  /** baresip's output, one line each (ANSI colours removed). */
  readonly log: string[] = [];
  /** Per call, in order: the WAVs of what it heard and of what it sent. Deleted by stop(). */
  readonly heardFiles: string[] = [];
  readonly sentFiles: string[] = [];

  private ctrl: Socket | undefined;
  private ctrlBuffer = Buffer.alloc(0);
  private nextToken = 1;
  private readonly pending = new Map<string, { resolve: (data: string) => void; reject: (err: Error) => void }>();
  private readonly waiters = new Set<Waiter>();
  private readonly consumed = new Set<BaresipEvent>();
  private readonly timers = new Set<NodeJS.Timeout>();
  /** Events are handled one after the other: a CALL_CLOSED waits until recordWav is written. */
  private chain: Promise<void> = Promise.resolve();
  private files: Promise<void> = Promise.resolve();
  private micCount = 0;
  private exitInfo: string | undefined;
  private stopping: Promise<void> | undefined;

  private constructor(
    private readonly options: BaresipOptions,
    readonly dir: string,
    readonly sipPort: number,
    readonly ctrlPort: number,
    private readonly child: ChildProcess,
    private readonly exited: Promise<void>,
  ) {
    this.name = options.name ?? 'baresip';
    this.user = options.user ?? sipUser(this.name);
  }

  /** `sip:<user>@127.0.0.1:<sipPort>`: what to dial to reach this instance. */
  get uri(): string {
    return `sip:${this.user}@127.0.0.1:${this.sipPort}`;
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  get running(): boolean {
    return this.exitInfo === undefined;
  }

  static async start(options: BaresipOptions = {}): Promise<Baresip> {
    const name = options.name ?? 'baresip';
    // sndfile builds its file names in a 128-byte buffer: the directory must stay short
    const dir = await mkdtemp(join(tmpdir(), 'sb-baresip-'));
    if (join(dir, 'dump-2000-01-01-00-00-00-dec.wav').length >= 127) {
      await rm(dir, { recursive: true, force: true });
      throw new Error(`baresip ${name}: temp dir ${dir} is too long for sndfile's 128-byte file names (set TMPDIR shorter)`);
    }
    try {
      const mic = await prepareMic(dir, 'mic-0.wav', options.playWav, options.playMode ?? 'once', options.maxCallSeconds ?? 300);
      // an auto-picked port may be taken between our check and baresip's bind: then try again
      for (let attempt = 1; ; attempt++) {
        const sipPort = options.sipPort || (await freeSipPort());
        const ctrlPort = await freeTcpPort();
        await writeFile(join(dir, 'config'), config(options, sipPort, ctrlPort, mic, dir));
        await writeFile(join(dir, 'accounts'), account(options, options.user ?? sipUser(name)));
        try {
          return await Baresip.launch(options, dir, sipPort, ctrlPort);
        } catch (err) {
          // a given sipPort is not changed; the ctrl_tcp port is always ours to pick again
          const retry = err instanceof PortInUse && attempt < 5 && (!options.sipPort || !err.sip);
          if (!retry) throw err;
        }
      }
    } catch (err) {
      await rm(dir, { recursive: true, force: true });
      throw err;
    }
  }

  private static async launch(options: BaresipOptions, dir: string, sipPort: number, ctrlPort: number): Promise<Baresip> {
    const name = options.name ?? 'baresip';
    const args = ['-f', dir, '-t', String(options.lifetimeSeconds ?? 900), ...(options.sipTrace ? ['-s'] : [])];
    const child = spawn(BARESIP, args, { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
    // 'close': exited and its output all read ('error' instead when the binary cannot be run at all)
    const exited = new Promise<void>((resolve) => {
      child.once('close', () => resolve());
      child.once('error', () => resolve());
    });
    const b = new Baresip(options, dir, sipPort, ctrlPort, child, exited);
    live.add(b);
    if (!exitHook) {
      exitHook = true;
      // last resort (the test process is going away): no async work is possible here
      process.once('exit', () => {
        for (const x of live) x.child.kill('SIGKILL');
      });
    }

    let ready: () => void = () => undefined;
    const readyLine = new Promise<void>((resolve) => (ready = resolve));
    let portInUse: 'sip' | 'ctrl' | undefined;
    const onLine = (line: string) => {
      b.onLog(line);
      if (line.includes('baresip is ready.')) ready();
      // the SIP transport failing makes baresip exit (code 98); ctrl_tcp failing does not
      if (line.includes('ctrl_tcp: failed to listen')) portInUse ??= 'ctrl';
      else if (/SIP(\/TLS)? [Tt]ransport failed: Address already in use/.test(line)) portInUse ??= 'sip';
    };
    lines(child.stdout!, onLine);
    lines(child.stderr!, onLine);
    child.once('exit', (code, signal) => b.onExit(code, signal));
    child.once('error', (err) => {
      b.onLog(`spawn error: ${err.message}`);
      b.onExit(null, null, err.message);
    });

    const timeoutMs = options.startTimeoutMs ?? 10_000;
    let timer: NodeJS.Timeout | undefined;
    const outcome = await Promise.race([
      readyLine.then(() => 'ready' as const),
      exited.then(() => 'exited' as const),
      new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), timeoutMs))),
    ]);
    clearTimeout(timer);
    if (outcome === 'exited' && child.exitCode === 98) portInUse ??= 'sip'; // EADDRINUSE
    if (outcome !== 'ready' || portInUse) {
      await b.stop({ keepDir: true });
      if (portInUse) throw new PortInUse(portInUse === 'sip', `baresip ${name}: a port is taken (SIP ${sipPort}: UDP and TCP, TCP ${sipPort + 1} for TLS; ctrl_tcp TCP ${ctrlPort}):\n${b.tail()}`);
      throw new Error(`baresip ${name} did not start (${outcome === 'timeout' ? `not ready within ${timeoutMs} ms` : b.exitInfo}):\n${b.tail()}`);
    }
    try {
      await b.connectCtrl();
      // answers only if the module on that port is ours
      await b.command('listcalls');
    } catch (err) {
      await b.stop({ keepDir: true });
      throw new Error(`baresip ${name}: no ctrl_tcp on 127.0.0.1:${ctrlPort}: ${(err as Error).message}\n${b.tail()}`);
    }
    return b;
  }

  /** Sends a ctrl_tcp command (any long command of baresip's menu) and resolves with its output. */
  command(command: string, params?: string): Promise<string> {
    const ctrl = this.ctrl;
    if (!ctrl || ctrl.destroyed || !this.running) {
      return Promise.reject(new Error(`baresip ${this.name}: not running (${this.exitInfo ?? 'no control connection'}), cannot ${command}`));
    }
    const token = String(this.nextToken++);
    const json = JSON.stringify(params === undefined ? { command, token } : { command, params, token });
    return new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(token);
        reject(new Error(`baresip ${this.name}: no answer to ${command} within 10 s\n${this.tail(15)}`));
      }, 10_000);
      const done = (f: () => void) => {
        clearTimeout(timer);
        f();
      };
      this.pending.set(token, { resolve: (d) => done(() => resolve(d)), reject: (e) => done(() => reject(e)) });
      ctrl.write(`${Buffer.byteLength(json)}:${json},`);
    });
  }

  /** Calls `uri` (e.g. `sip:+15550001111@127.0.0.1:5070`). The call's progress comes as events. */
  async dial(uri: string): Promise<void> {
    await this.command('dial', uri);
  }

  /** Answers the ringing incoming call. */
  async answer(): Promise<void> {
    await this.command('accept');
  }

  /** Ends the current call: BYE, or CANCEL while dialling, or 486 Rejected while ringing. */
  async hangup(): Promise<void> {
    await this.command('hangup');
  }

  /**
   * Sends DTMF as RFC 4733 telephone-events (payload type 101), one digit after the other: each
   * lasts 180 ms on the wire (9 packets, then 3 with the end bit), with `gapMs` between digits.
   * Only when the peer's SDP offered telephone-event; baresip sends nothing otherwise.
   */
  async sendDtmf(digits: string, gapMs = 100): Promise<void> {
    if (!/^[0-9*#A-D]+$/i.test(digits)) throw new Error(`baresip ${this.name}: not DTMF digits: ${JSON.stringify(digits)}`);
    for (const [i, d] of [...digits].entries()) {
      // baresip queues digits back to back; waiting out the 240 ms a digit takes leaves a real gap
      if (i > 0) await this.sleep(240 + gapMs);
      await this.command('sndcode', d);
    }
  }

  /** Blind transfer: sends REFER (Refer-To: uri) in the current call. */
  async transfer(uri: string): Promise<void> {
    await this.command('transfer', uri);
  }

  /** Switches the microphone to another WAV, now (mid-call) and for the next calls. */
  async play(wav: string, mode: PlayMode = 'once'): Promise<void> {
    const mic = await prepareMic(this.dir, `mic-${++this.micCount}.wav`, wav, mode, this.options.maxCallSeconds ?? 300);
    await this.command('ausrc', `aufile,${mic}`);
  }

  /**
   * The next event of that type not yet returned by a waitFor (so an event that came before the
   * call is found too; waiting twice for CALL_DTMF_START gives the first digit, then the second).
   */
  waitFor(type: string, timeoutMs = 10_000, match?: (e: BaresipEvent) => boolean): Promise<BaresipEvent> {
    const found = this.events.find((e) => e.type === type && !this.consumed.has(e) && (!match || match(e)));
    if (found) {
      this.consumed.add(found);
      return Promise.resolve(found);
    }
    if (!this.running) return Promise.reject(this.waitError(type, `baresip exited (${this.exitInfo})`));
    return new Promise<BaresipEvent>((resolve, reject) => {
      const waiter: Waiter = {
        type,
        ...(match ? { match } : {}),
        resolve,
        reject,
        timer: setTimeout(() => {
          this.waiters.delete(waiter);
          reject(this.waitError(type, `none within ${timeoutMs} ms`));
        }, timeoutMs),
      };
      this.waiters.add(waiter);
    });
  }

  /** The DTMF digits received so far (CALL_DTMF_START), in order. */
  dtmf(): string {
    return this.events
      .filter((e) => e.type === 'CALL_DTMF_START')
      .map((e) => e.param)
      .join('');
  }

  /** Resolves once the digits received so far end with `digits`. */
  async waitForDtmf(digits: string, timeoutMs = 10_000): Promise<string> {
    const deadline = Date.now() + timeoutMs;
    while (!this.dtmf().endsWith(digits)) {
      if (Date.now() > deadline) throw this.waitError('CALL_DTMF_START', `digits ${JSON.stringify(this.dtmf())} do not end with ${JSON.stringify(digits)} after ${timeoutMs} ms`);
      if (!this.running) throw this.waitError('CALL_DTMF_START', `baresip exited (${this.exitInfo})`);
      await this.sleep(20);
    }
    return this.dtmf();
  }

  /**
   * What it heard in the latest call (so far, mid-call too), 8 kHz samples. Only the audio that
   * arrived is there: a peer that stops sending RTP leaves no gap in it.
   */
  async heard(): Promise<Int16Array> {
    await this.files;
    const file = this.heardFiles.at(-1);
    if (!file) throw new Error(`baresip ${this.name}: no call has had audio yet`);
    return (await readWav(file)).samples;
  }

  /** Stops baresip (SIGTERM: BYE to a live call; SIGKILL after 2 s) and removes its temp dir. */
  stop(opts: { keepDir?: boolean } = {}): Promise<void> {
    this.stopping ??= (async () => {
      for (const t of this.timers) clearTimeout(t);
      if (this.running) {
        this.child.kill('SIGTERM');
        const t = setTimeout(() => this.child.kill('SIGKILL'), 2000);
        await this.exited;
        clearTimeout(t);
      }
      this.ctrl?.destroy();
      live.delete(this);
      await this.chain;
      await this.files;
      if (!opts.keepDir) await rm(this.dir, { recursive: true, force: true });
    })();
    return this.stopping;
  }

  /** The last lines of baresip's output, for failure messages. */
  tail(lines = 40): string {
    return `--- baresip ${this.name} (sip ${this.sipPort}, ctrl ${this.ctrlPort}) log tail:\n${this.log.slice(-lines).join('\n')}`;
  }

  private waitError(type: string, why: string): Error {
    const seen = this.events.map((e) => (e.param ? `${e.type}(${e.param})` : e.type)).join(', ') || 'none';
    return new Error(`baresip ${this.name}: waiting for ${type}: ${why}; events seen: ${seen}\n${this.tail(15)}`);
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const t = setTimeout(() => {
        this.timers.delete(t);
        resolve();
      }, ms);
      this.timers.add(t);
    });
  }

  private connectCtrl(): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const socket = connect(this.ctrlPort, '127.0.0.1');
      socket.once('connect', () => {
        this.ctrl = socket;
        resolve();
      });
      socket.once('error', reject);
      socket.on('data', (d) => this.onCtrlData(d));
      socket.on('close', () => {
        for (const p of this.pending.values()) p.reject(new Error(`baresip ${this.name}: control connection closed (${this.exitInfo ?? 'baresip still running'})`));
        this.pending.clear();
      });
    });
  }

  /** Netstrings: `<length>:<json>,`. */
  private onCtrlData(data: Buffer): void {
    this.ctrlBuffer = Buffer.concat([this.ctrlBuffer, data]);
    for (;;) {
      const colon = this.ctrlBuffer.indexOf(0x3a);
      if (colon < 0) return;
      const length = Number(this.ctrlBuffer.subarray(0, colon).toString());
      if (this.ctrlBuffer.length < colon + length + 2) return;
      const text = this.ctrlBuffer.subarray(colon + 1, colon + 1 + length).toString();
      this.ctrlBuffer = this.ctrlBuffer.subarray(colon + length + 2);
      let msg: Record<string, unknown>;
      try {
        msg = JSON.parse(text) as Record<string, unknown>;
      } catch {
        this.log.push(`[harness] unparsable ctrl_tcp message: ${text}`);
        continue;
      }
      if (msg.response) this.onResponse(msg);
      else if (msg.event) {
        this.chain = this.chain.then(() => this.onEvent(msg)).catch((err: Error) => void this.log.push(`[harness] event ${text}: ${err.message}`));
      }
    }
  }

  private onResponse(msg: Record<string, unknown>): void {
    const token = String(msg.token);
    const p = this.pending.get(token);
    if (!p) return;
    this.pending.delete(token);
    const data = typeof msg.data === 'string' ? msg.data : '';
    if (msg.ok) p.resolve(data);
    else p.reject(new Error(`baresip ${this.name}: command failed: ${data}`));
  }

  private async onEvent(raw: Record<string, unknown>): Promise<void> {
    const rawType = String(raw.type);
    const e: BaresipEvent = {
      type: rawType === 'TRANSFER' || rawType === 'TRANSFER_FAILED' ? `CALL_${rawType}` : rawType,
      param: typeof raw.param === 'string' ? raw.param : '',
      ...(typeof raw.id === 'string' ? { callId: raw.id } : {}),
      ...(raw.direction === 'incoming' || raw.direction === 'outgoing' ? { direction: raw.direction } : {}),
      ...(typeof raw.peeruri === 'string' ? { peerUri: raw.peeruri } : {}),
      at: Date.now(),
      raw,
    };
    if (e.type === 'CALL_CLOSED' && this.options.recordWav) {
      await this.saveRecording(this.options.recordWav).catch((err: Error) => void this.log.push(`[harness] recordWav: ${err.message}`));
    }
    const answer = this.options.autoAnswer;
    if (e.type === 'CALL_INCOMING' && typeof answer === 'object') {
      void this.sleep(answer.afterMs).then(() => this.answer().catch(() => undefined));
    }
    this.events.push(e);
    for (const w of this.waiters) {
      if (w.type !== e.type || (w.match && !w.match(e))) continue;
      clearTimeout(w.timer);
      this.waiters.delete(w);
      this.consumed.add(e);
      w.resolve(e);
      break;
    }
  }

  /** Writes the latest call's heard audio as a proper WAV (sndfile finalises its header only at close). */
  private async saveRecording(path: string): Promise<void> {
    await this.files;
    const file = this.heardFiles.at(-1);
    if (file) await writeWav(path, (await readWav(file)).samples);
  }

  private onLog(line: string): void {
    this.log.push(line);
    if (this.log.length > 5000) this.log.splice(0, 1000);
    // sndfile names its files by the second: rename them at once, so two calls in one second do not share one
    const m = /^sndfile: dumping (encode|decode) audio to (.+\.wav)$/.exec(line);
    if (m) {
      const heard = m[1] === 'decode';
      const list = heard ? this.heardFiles : this.sentFiles;
      const target = join(this.dir, `${heard ? 'heard' : 'sent'}-${list.length + 1}.wav`);
      list.push(target);
      this.files = this.files.then(() => rename(m[2]!, target).catch((err: Error) => void this.log.push(`[harness] ${err.message}`)));
    }
  }

  private onExit(code: number | null, signal: NodeJS.Signals | null, error?: string): void {
    if (this.exitInfo !== undefined) return;
    this.exitInfo = error ?? (signal ? `killed by ${signal}` : `exit code ${code}`);
    for (const w of this.waiters) {
      clearTimeout(w.timer);
      w.reject(this.waitError(w.type, `baresip exited (${this.exitInfo})`));
    }
    this.waiters.clear();
  }
}

class PortInUse extends Error {
  constructor(
    readonly sip: boolean,
    message: string,
  ) {
    super(message);
  }
}

function sipUser(name: string): string {
  return name.replace(/[^A-Za-z0-9+._-]/g, '-') || 'baresip';
}

/**
 * The whole configuration. No audio player module is loaded at all: baresip then runs without
 * one, and the received audio still goes through the decode filters (sndfile).
 */
function config(o: BaresipOptions, sipPort: number, ctrlPort: number, mic: string, dir: string): string {
  const rtp = o.rtpPortMin || o.rtpPortMax ? `rtp_ports\t\t${o.rtpPortMin ?? 1024}-${o.rtpPortMax ?? 49152}\n` : '';
  return `# written by test/helpers/baresip.ts
poll_method\t\tepoll
sip_listen\t\t127.0.0.1:${sipPort}
# SDP and Contact addresses: this address, not the default route's interface
net_interface\t\t127.0.0.1
# no DNS query ever leaves the machine (nothing listens there: lookups just fail)
dns_server\t\t127.0.0.1:9
call_local_timeout\t120
call_max_calls\t\t4
audio_path\t\t/usr/share/baresip
audio_source\t\taufile,${mic}
ausrc_format\t\ts16
auplay_format\t\ts16
auenc_format\t\ts16
audec_format\t\ts16
audio_buffer\t\t20-160
${rtp}rtcp_mux\t\tno
jitter_buffer_delay\t5-10
rtp_stats\t\tno
statmode_default\toff
snd_path\t\t${dir}
ctrl_tcp_listen\t\t127.0.0.1:${ctrlPort}
module_path\t\t${BARESIP_MODULES}
module\t\t\tg711.so
module\t\t\taufile.so
module\t\t\tsndfile.so
module_tmp\t\taccount.so
module_app\t\tmenu.so
module_app\t\tctrl_tcp.so
`;
}

function account(o: BaresipOptions, user: string): string {
  const params = [
    'regint=0',
    `answermode=${o.autoAnswer === true ? 'auto' : 'manual'}`,
    `audio_codecs=${(o.codecs ?? ['PCMU', 'PCMA']).join(',')}`,
    `ptime=${o.ptime ?? 20}`,
    `call_transfer=${o.acceptTransfer === false ? 'no' : 'yes'}`,
    ...(o.username ? [`auth_user=${o.username}`] : []),
    ...(o.password ? [`auth_pass=${o.password}`] : []),
  ];
  const display = o.displayName ? `"${o.displayName}" ` : '';
  return `${display}<sip:${user}@127.0.0.1>;${params.join(';')}\n`;
}

/** aufile needs 8 kHz mono 16-bit and ends the call when its file ends: pad or loop it. */
async function prepareMic(dir: string, name: string, wav: string | undefined, mode: PlayMode, maxSeconds: number): Promise<string> {
  const input = wav ? await readWav8k(wav) : new Int16Array(0);
  const total = Math.max(input.length, maxSeconds * 8000);
  let out = input;
  if (mode === 'once' || !wav) {
    out = new Int16Array(total);
    out.set(input);
  } else if (mode === 'loop') {
    if (input.length === 0) throw new Error(`${wav}: no audio to loop`);
    out = new Int16Array(total);
    for (let i = 0; i < total; i += input.length) out.set(input.subarray(0, Math.min(input.length, total - i)), i);
  }
  const path = join(dir, name);
  await writeWav(path, out);
  return path;
}

async function readWav8k(path: string): Promise<Int16Array> {
  const wav = await readWav(path).catch(() => undefined);
  if (wav && wav.sampleRate === 8000 && wav.channels === 1) return wav.samples;
  const converted = join(tmpdir(), `sb-baresip-${process.pid}-${Date.now()}-${basename(path)}.wav`);
  const r = spawnSync('sox', [path, '-r', '8000', '-c', '1', '-b', '16', '-e', 'signed-integer', converted], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`${path} is not 8 kHz mono 16-bit and sox could not convert it: ${r.error?.message ?? r.stderr}`);
  try {
    return (await readWav(converted)).samples;
  } finally {
    await rm(converted, { force: true });
  }
}

function lines(stream: NodeJS.ReadableStream, onLine: (line: string) => void): void {
  let rest = '';
  stream.setEncoding('utf8');
  stream.on('data', (chunk: string) => {
    const parts = (rest + chunk).split(/\r?\n|\r/);
    rest = parts.pop() ?? '';
    for (const p of parts) onLine(p.replace(/\x1b\[[0-9;]*m/g, ''));
  });
  stream.on('end', () => rest && onLine(rest.replace(/\x1b\[[0-9;]*m/g, '')));
}

// --- ports -----------------------------------------------------------------------------------

function listenTcp(port: number): Promise<Server | undefined> {
  return new Promise((resolve) => {
    const s = createServer();
    s.once('error', () => resolve(undefined));
    s.listen(port, '127.0.0.1', () => resolve(s));
  });
}

function bindUdp(port: number): Promise<ReturnType<typeof createSocket> | undefined> {
  return new Promise((resolve) => {
    const s = createSocket('udp4');
    s.once('error', () => resolve(undefined));
    s.bind(port, '127.0.0.1', () => resolve(s));
  });
}

export async function freeTcpPort(): Promise<number> {
  const s = await listenTcp(0);
  if (!s) throw new Error('no free TCP port');
  const { port } = s.address() as { port: number };
  await new Promise((r) => s.close(r));
  return port;
}

/** A port free for UDP and TCP, with the next one free for TCP (baresip's TLS listener). */
export async function freeSipPort(): Promise<number> {
  for (let i = 0; i < 50; i++) {
    const tcp = await listenTcp(0);
    if (!tcp) continue;
    const { port } = tcp.address() as { port: number };
    const udp = port < 65535 ? await bindUdp(port) : undefined;
    const tls = udp ? await listenTcp(port + 1) : undefined;
    await new Promise((r) => tcp.close(r));
    udp?.close();
    if (tls) await new Promise((r) => tls.close(r));
    if (udp && tls) return port;
  }
  throw new Error('no free SIP port (UDP+TCP p, TCP p+1)');
}

// --- WAV and audio checks ----------------------------------------------------------------------

export interface Wav {
  sampleRate: number;
  channels: number;
  /** Interleaved 16-bit samples. */
  samples: Int16Array;
}

/**
 * 16-bit PCM WAV. Tolerant of a header whose sizes were never filled in (a file still being
 * written): the data chunk then runs to the end of the file.
 */
export function parseWav(buf: Buffer): Wav {
  if (buf.toString('ascii', 0, 4) !== 'RIFF' || buf.toString('ascii', 8, 12) !== 'WAVE') throw new Error('not a WAV file');
  let off = 12;
  let fmt: { format: number; channels: number; sampleRate: number; bits: number } | undefined;
  while (off + 8 <= buf.length) {
    const id = buf.toString('ascii', off, off + 4);
    const size = buf.readUInt32LE(off + 4);
    if (id === 'fmt ') {
      fmt = { format: buf.readUInt16LE(off + 8), channels: buf.readUInt16LE(off + 10), sampleRate: buf.readUInt32LE(off + 12), bits: buf.readUInt16LE(off + 22) };
    } else if (id === 'data') {
      if (!fmt || (fmt.format !== 1 && fmt.format !== 0xfffe) || fmt.bits !== 16) throw new Error('not a 16-bit PCM WAV');
      const end = size === 0 || off + 8 + size > buf.length ? buf.length : off + 8 + size;
      const bytes = buf.subarray(off + 8, end - ((end - off - 8) % 2));
      const samples = new Int16Array(bytes.length / 2);
      for (let i = 0; i < samples.length; i++) samples[i] = bytes.readInt16LE(i * 2);
      return { sampleRate: fmt.sampleRate, channels: fmt.channels, samples };
    }
    off += 8 + size + (size % 2);
  }
  throw new Error('WAV without a data chunk');
}

export async function readWav(path: string): Promise<Wav> {
  return parseWav(await readFile(path));
}

export function encodeWav(samples: Int16Array, sampleRate = 8000): Buffer {
  const buf = Buffer.concat([wavHeader({ sampleRate, channels: 1, dataBytes: samples.length * 2 }), Buffer.alloc(samples.length * 2)]);
  if (endianness() === 'LE') Buffer.from(samples.buffer, samples.byteOffset, samples.byteLength).copy(buf, 44);
  else for (let i = 0; i < samples.length; i++) buf.writeInt16LE(samples[i]!, 44 + i * 2);
  return buf;
}

export async function writeWav(path: string, samples: Int16Array, sampleRate = 8000): Promise<void> {
  await writeFile(path, encodeWav(samples, sampleRate));
}

/** A sine; `amplitude` relative to full scale. */
export function tone(freq: number, seconds: number, opts: { sampleRate?: number; amplitude?: number } = {}): Int16Array {
  const rate = opts.sampleRate ?? 8000;
  const a = (opts.amplitude ?? 0.5) * 32767;
  const out = new Int16Array(Math.round(seconds * rate));
  for (let i = 0; i < out.length; i++) out[i] = Math.round(a * Math.sin((2 * Math.PI * freq * i) / rate));
  return out;
}

export function silence(seconds: number, sampleRate = 8000): Int16Array {
  return new Int16Array(Math.round(seconds * sampleRate));
}

export function concatSamples(...parts: Int16Array[]): Int16Array {
  const out = new Int16Array(parts.reduce((n, p) => n + p.length, 0));
  let off = 0;
  for (const p of parts) {
    out.set(p, off);
    off += p.length;
  }
  return out;
}

/** Root mean square, relative to full scale (a full-scale sine: 0.707). */
export function rms(samples: Int16Array): number {
  if (samples.length === 0) return 0;
  let sum = 0;
  for (const s of samples) sum += s * s;
  return Math.sqrt(sum / samples.length) / 32768;
}

/**
 * The share of the samples' energy at `freq` (Goertzel), 0 to 1: ~1 for a pure tone at that
 * frequency, ~0 for silence or other frequencies. Use windows of many periods (e.g. 100 ms).
 */
export function toneRatio(samples: Int16Array, freq: number, sampleRate = 8000): number {
  const n = samples.length;
  if (n === 0) return 0;
  const coeff = 2 * Math.cos((2 * Math.PI * freq) / sampleRate);
  let s1 = 0;
  let s2 = 0;
  let energy = 0;
  for (const x of samples) {
    const s0 = x + coeff * s1 - s2;
    s2 = s1;
    s1 = s0;
    energy += x * x;
  }
  if (energy === 0) return 0;
  const power = s1 * s1 + s2 * s2 - coeff * s1 * s2;
  return Math.min(1, (2 * power) / n / energy);
}

/** Splits samples into windows of `ms` (8 kHz by default), the last partial one dropped. */
export function windows(samples: Int16Array, ms: number, sampleRate = 8000): Int16Array[] {
  const size = Math.round((ms * sampleRate) / 1000);
  const out: Int16Array[] = [];
  for (let i = 0; i + size <= samples.length; i += size) out.push(samples.subarray(i, i + size));
  return out;
}
