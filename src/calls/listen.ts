/**
 * Listen-in (DECISIONS 16, docs/listen.md): any number of listeners hear a live call as 20 ms
 * stereo frames (the customer left, the assistant right; ./listen-mixer.ts) with the JSON events a
 * web call's browser gets, on whichever process their socket reaches.
 *
 * - `ListenTap`: the call's side, made when its first listener comes and dropped with the last.
 *   The call's audio path (`CallAudio.listen`) hands it both sides' audio: while nobody listens
 *   that is one null check per frame. It takes the mixed frames on the pacer's shared tick and
 *   gives them to its outputs; an output never holds the call up (a socket drops a slow listener,
 *   the relay publishes without waiting), and one that throws is dropped.
 * - `ListenHub`: one per process. Every call of the process registers with it (`register`); it
 *   hands out the one-time tokens, attaches a listener to a call that runs here, or, with Redis,
 *   follows a call that runs in another process through the relay (./listen-relay.ts), and
 *   publishes its own calls for the other processes' listeners while they listen.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { observationMessage } from '../telephony/web/protocol.js';
import { StereoMixer } from './listen-mixer.js';
import { RedisListenRelay, RELAY_AUDIO, RELAY_END, RELAY_EVENT } from './listen-relay.js';
import type { RedisConnections } from '../redis.js';
import { sharedTick, type PacerClock } from './outbound.js';
import type { CallRecord, CallStore } from './store.js';
import type { CallObservation } from './transport.js';

/** How long a listen token is good for. */
export const LISTEN_TOKEN_SECONDS = 60;

/** Where a listener's audio and events go (a socket, or the relay to another process). */
export interface ListenOutput {
  /** Whole 640-byte stereo frames, in order; one buffer holds several (`LISTEN_BATCH_FRAMES`, more after a stall). */
  audio(frames: Buffer): void;
  /** One JSON event, as text (`observationMessage`). */
  event(json: string): void;
  /** Nothing more comes: the call ended (its `ended` event went first), or it was lost. */
  end(): void;
}

/** What a listener is told of the call as it joins. */
export interface ListenedCallInfo {
  id: string;
  type: string;
  assistant_id: string | null;
  workflow_id: string | null;
}

const infoOf = (r: Pick<CallRecord, 'id' | 'type' | 'assistant_id' | 'workflow_id'>): ListenedCallInfo => ({
  id: r.id,
  type: r.type,
  assistant_id: r.assistant_id,
  workflow_id: r.workflow_id,
});

/**
 * Frames go to the listeners three at a time (60 ms): a socket then writes them in one go, a third
 * of the writes (and system calls) of one frame at a time, for 60 ms more of delay.
 */
export const LISTEN_BATCH_FRAMES = 3;

/** Statuses a listener may join (a call being transferred is still heard). */
const LIVE = new Set(['in-progress', 'forwarding']);

/** The call's side of listen-in: both channels mixed on the clock, to every output. */
export class ListenTap {
  private readonly mixer: StereoMixer;
  private readonly outputs = new Set<ListenOutput>();
  private unsubscribe: (() => void) | null;
  private finished = false;

  constructor(
    private readonly clock: PacerClock,
    private readonly log: Logger,
    /** The last output went: the call takes the tap off its audio path. */
    private readonly onIdle: () => void,
  ) {
    this.mixer = new StereoMixer({ now: () => clock.now() });
    this.unsubscribe = clock.subscribe(() => this.tick());
  }

  /** The customer's audio, μ-law 8 kHz, as it arrives. */
  caller(mulaw: Buffer): void {
    this.mixer.caller(mulaw);
  }

  /**
   * A frame the customer hears, μ-law 8 kHz, scheduled to play at `playAt` (the pacer's clock): the
   * assistant's (the pacer's every frame), or an operator's once a transfer joined them (whatever
   * relays it to the customer hands it here too).
   */
  heard(mulaw: Buffer, playAt: number): void {
    this.mixer.heard(mulaw, playAt);
  }

  /** The far end dropped what it had buffered (barge-in). */
  cleared(): void {
    this.mixer.cleared();
  }

  /** What happens in the call; `ended` ends every listener after the last frames. */
  event(event: CallObservation): void {
    if (this.finished) return;
    let json: string;
    try {
      json = observationMessage(event);
    } catch (err) {
      this.log.warn({ err, event: event.type }, 'listen-in: an event could not be written');
      return;
    }
    for (const o of this.outputs) this.give(o, () => o.event(json));
    if (event.type === 'ended') this.finish();
  }

  add(output: ListenOutput): void {
    if (this.finished) return output.end();
    this.outputs.add(output);
  }

  remove(output: ListenOutput): void {
    if (!this.outputs.delete(output) || this.outputs.size > 0) return;
    this.stop();
    this.onIdle();
  }

  get listeners(): number {
    return this.outputs.size;
  }

  /** The call is over: the held frames go out, then every output ends. */
  finish(): void {
    if (this.finished) return;
    this.finished = true;
    const last = this.mixer.drain();
    const outputs = [...this.outputs];
    this.outputs.clear();
    this.stop();
    for (const o of outputs) {
      if (last) this.give(o, () => o.audio(last));
      this.give(o, () => o.end(), false);
    }
    this.onIdle();
  }

  private stop(): void {
    this.unsubscribe?.();
    this.unsubscribe = null;
  }

  /** The shared tick runs every pacer of the process: nothing here may throw into it. */
  private tick(): void {
    try {
      const frames = this.mixer.take(LISTEN_BATCH_FRAMES);
      if (frames) for (const o of this.outputs) this.give(o, () => o.audio(frames));
    } catch (err) {
      this.log.error({ err }, 'listen-in: the mixer failed; its listeners are dropped');
      this.finish();
    }
  }

  /** Runs `fn` for an output; one that throws is dropped (ended), never the call. */
  private give(o: ListenOutput, fn: () => void, drop = true): void {
    try {
      fn();
    } catch (err) {
      this.log.warn({ err }, 'listen-in: a listener failed and was dropped');
      if (!drop) return;
      try {
        o.end();
      } catch {
        // gone either way
      }
      this.remove(o);
    }
  }
}

/** One call of this process as the hub has it: the tap on its audio path while someone listens. */
export class ListenedCall {
  private tap: ListenTap | null = null;
  /** A publisher to the relay is among the outputs (the call is heard in another process). */
  relayed = false;
  private ended = false;

  constructor(
    readonly info: ListenedCallInfo,
    private readonly install: (tap: ListenTap | null) => void,
    private readonly hub: ListenHub,
  ) {}

  /** A listener of the call from now on; the returned function detaches it. Null once the call has ended. */
  add(output: ListenOutput): (() => void) | null {
    if (this.ended) return null;
    if (!this.tap) {
      const tap = new ListenTap(this.hub.clock, this.hub.log, () => {
        if (this.tap !== tap) return;
        this.tap = null;
        this.install(null);
      });
      this.tap = tap;
      this.install(tap);
    }
    const tap = this.tap;
    tap.add(output);
    return () => tap.remove(output);
  }

  /** What the call tells its observers; the end ends its listeners and its registration. */
  observed(event: CallObservation): void {
    if (this.ended) return;
    this.tap?.event(event);
    if (event.type === 'ended') {
      this.ended = true;
      this.tap?.finish();
      this.hub.unregister(this);
    }
  }
}

/**
 * A listener in another process, through the relay: frames are published as the tap takes them
 * (60 ms at a time), without waiting; a publish that reached nobody (or failed) detaches it.
 */
class RelayOutput implements ListenOutput {
  private pending: Buffer[] = [RELAY_KIND_AUDIO];
  private bytes = 0;
  detach: () => void = () => undefined;

  constructor(
    private readonly relay: RedisListenRelay,
    private readonly callId: string,
  ) {}

  audio(frames: Buffer): void {
    this.pending.push(frames);
    this.bytes += frames.length;
    if (this.bytes >= RELAY_BATCH_BYTES) this.flush();
  }

  event(json: string): void {
    this.flush();
    this.publish(Buffer.concat([RELAY_KIND_EVENT, Buffer.from(json, 'utf8')]));
  }

  end(): void {
    this.flush();
    this.publish(RELAY_KIND_END);
  }

  private flush(): void {
    if (this.bytes === 0) return;
    const message = Buffer.concat(this.pending);
    this.pending = [RELAY_KIND_AUDIO];
    this.bytes = 0;
    this.publish(message);
  }

  private publish(message: Buffer): void {
    this.relay.publish(this.callId, message).then(
      (receivers) => {
        if (receivers === 0) this.detach();
      },
      () => this.detach(),
    );
  }
}

const RELAY_KIND_AUDIO = Buffer.from([RELAY_AUDIO]);
const RELAY_KIND_EVENT = Buffer.from([RELAY_EVENT]);
const RELAY_KIND_END = Buffer.from([RELAY_END]);
/** At least a tap's batch of frames to a relayed message. */
const RELAY_BATCH_BYTES = LISTEN_BATCH_FRAMES * 640;
/** A followed call whose messages stop for this long is asked for again… */
const WAKE_AFTER_MS = 1_000;
/** …and one silent for this long is lost: its listeners are told and closed. */
const LOST_AFTER_MS = 5_000;

/** A call of another process, followed through the relay for this process's listeners. */
class Follow {
  readonly outputs = new Set<ListenOutput>();
  private lastHeard = performance.now();
  private lastWake = 0;
  private unfollow: (() => void) | null = null;
  private timer: NodeJS.Timeout | null = null;
  private done = false;
  private losing = false;

  constructor(
    private readonly callId: string,
    private readonly hub: ListenHub,
    private readonly relay: RedisListenRelay,
  ) {}

  async start(): Promise<void> {
    this.unfollow = await this.relay.follow(this.callId, (m) => this.received(m));
    if (this.done) return this.unfollow();
    this.timer = setInterval(() => this.check(), 250);
    this.timer.unref();
    this.wake();
  }

  remove(output: ListenOutput): void {
    if (this.outputs.delete(output) && this.outputs.size === 0) this.stop();
  }

  /** Ends every listener (after `lastWords`, if any) and stops following. */
  end(lastWords?: string): void {
    if (this.done) return;
    const outputs = [...this.outputs];
    this.stop();
    for (const o of outputs) {
      try {
        if (lastWords) o.event(lastWords);
        o.end();
      } catch (err) {
        this.hub.log.warn({ err, callId: this.callId }, 'listen-in: a listener could not be closed');
      }
    }
  }

  private stop(): void {
    if (this.done) return;
    this.done = true;
    this.outputs.clear();
    if (this.timer) clearInterval(this.timer);
    this.unfollow?.();
    this.hub.unfollow(this.callId, this);
  }

  private wake(): void {
    this.lastWake = performance.now();
    this.relay.wake(this.callId).catch((err: unknown) => this.hub.log.warn({ err, callId: this.callId }, 'listen-in: could not ask for the call'));
  }

  private check(): void {
    const now = performance.now();
    const silent = now - this.lastHeard;
    if (silent > LOST_AFTER_MS) {
      if (!this.losing) void this.lost();
      this.losing = true;
      return;
    }
    if (silent > WAKE_AFTER_MS && now - this.lastWake > WAKE_AFTER_MS) this.wake();
  }

  /** Nothing came for a while: the call ended unheard (its process stopped, or Redis lost the end), or its process is gone. */
  private async lost(): Promise<void> {
    if (this.done) return;
    const record = await this.hub.sessions?.get(this.callId).catch(() => null);
    const words =
      record?.status === 'ended'
        ? JSON.stringify({ type: 'ended', ended_reason: record.ended_reason ?? 'unknown' })
        : JSON.stringify({ type: 'error', message: 'the call\'s audio stopped arriving from the process that runs it' });
    this.end(words);
  }

  private received(message: Buffer): void {
    if (this.done || message.length === 0) return;
    this.lastHeard = performance.now();
    const kind = message[0];
    if (kind === RELAY_END) return this.end();
    for (const o of this.outputs) {
      try {
        if (kind === RELAY_AUDIO) o.audio(message.subarray(1));
        else if (kind === RELAY_EVENT) o.event(message.toString('utf8', 1));
      } catch (err) {
        this.hub.log.warn({ err, callId: this.callId }, 'listen-in: a listener failed and was dropped');
        this.remove(o);
      }
    }
  }
}

export interface ListenHubOptions {
  log: Logger;
  /** With it, listeners reach calls of every process of the deployment (through Redis). */
  redisUrl?: string;
  /** The same through the process's Redis owner (the runtime's); wins over `redisUrl`. */
  redis?: RedisConnections | null;
  /** The call sessions: whether a call of another process is live, and what it is. */
  sessions?: Pick<CallStore, 'get'>;
  /** The pacer's clock (the shared 20 ms tick) unless a test gives its own. */
  clock?: PacerClock;
  /** Redis keys' and channels' prefix (tests give their own). */
  prefix?: string;
}

const tokenHash = (token: string) => createHash('sha256').update(token).digest('hex');
/** `<call id>.<secret>`, as `issue` makes it. */
const TOKEN = /^([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\.([A-Za-z0-9_-]{16,64})$/;

export class ListenHub {
  readonly log: Logger;
  readonly clock: PacerClock;
  readonly sessions: Pick<CallStore, 'get'> | undefined;
  private readonly calls = new Map<string, ListenedCall>();
  private readonly follows = new Map<string, Follow>();
  private readonly tokens = new Map<string, { callId: string; expires: number }>();
  private readonly relay: RedisListenRelay | null;

  constructor(o: ListenHubOptions) {
    this.log = o.log.child({ component: 'listen' });
    this.clock = o.clock ?? sharedTick;
    this.sessions = o.sessions;
    const redis = o.redis ?? o.redisUrl;
    this.relay = redis ? new RedisListenRelay(redis, this.log, o.prefix) : null;
  }

  async start(): Promise<void> {
    await this.relay?.start((callId) => this.woken(callId));
  }

  /** A call of this process, from its start: `install` puts a tap on its audio path, or takes it off (null). */
  register(record: Pick<CallRecord, 'id' | 'type' | 'assistant_id' | 'workflow_id'>, install: (tap: ListenTap | null) => void): ListenedCall {
    const call = new ListenedCall(infoOf(record), install, this);
    this.calls.set(record.id, call);
    return call;
  }

  unregister(call: ListenedCall): void {
    if (this.calls.get(call.info.id) === call) this.calls.delete(call.info.id);
  }

  /** A one-time token for a listener of the call (`<call id>.<secret>`, `LISTEN_TOKEN_SECONDS`). */
  async issue(callId: string): Promise<string> {
    const token = `${callId}.${randomBytes(24).toString('base64url')}`;
    const hash = tokenHash(token);
    if (this.relay) {
      await this.relay.putToken(hash, callId, LISTEN_TOKEN_SECONDS);
    } else {
      const now = Date.now();
      for (const [k, t] of this.tokens) if (t.expires <= now) this.tokens.delete(k);
      this.tokens.set(hash, { callId, expires: now + LISTEN_TOKEN_SECONDS * 1000 });
    }
    return token;
  }

  /** Whether `token` looks like one `issue` makes (checked before anything is looked up). */
  static wellFormed(token: string): boolean {
    return TOKEN.test(token);
  }

  /** Uses the token up: its call's id, or null when it is unknown, expired or used. */
  async claim(token: string): Promise<string | null> {
    const match = TOKEN.exec(token);
    if (!match) return null;
    const hash = tokenHash(token);
    let callId: string | null;
    if (this.relay) {
      callId = await this.relay.takeToken(hash);
    } else {
      const t = this.tokens.get(hash);
      this.tokens.delete(hash);
      callId = t && t.expires > Date.now() ? t.callId : null;
    }
    return callId === match[1] ? callId : null;
  }

  /** The call as a listener is told of it, when it is live here or (with Redis) in another process; else null. */
  async find(callId: string): Promise<ListenedCallInfo | null> {
    const here = this.calls.get(callId);
    if (here) return here.info;
    if (!this.relay || !this.sessions) return null;
    const record = await this.sessions.get(callId);
    return record && LIVE.has(record.status) ? infoOf(record) : null;
  }

  /**
   * A listener of the call from now on: the returned function detaches it. Null when the call is
   * not live here, nor (with Redis) anywhere.
   */
  async attach(callId: string, output: ListenOutput): Promise<(() => void) | null> {
    const here = this.calls.get(callId);
    if (here) return here.add(output);
    if (!this.relay || !(await this.find(callId))) return null;
    let follow = this.follows.get(callId);
    if (!follow) {
      const made = new Follow(callId, this, this.relay);
      follow = made;
      this.follows.set(callId, made);
      try {
        await made.start();
      } catch (err) {
        made.end();
        throw err;
      }
    }
    const joined = follow;
    joined.outputs.add(output);
    return () => joined.remove(output);
  }

  unfollow(callId: string, follow: Follow): void {
    if (this.follows.get(callId) === follow) this.follows.delete(callId);
  }

  /** Listeners in this process (all calls), for tests and metrics. */
  get followedCalls(): number {
    return this.follows.size;
  }

  /** Another process asks for one of our calls: it is published from now until nobody gets it. */
  private woken(callId: string): void {
    const call = this.calls.get(callId);
    if (!call || call.relayed || !this.relay) return;
    const output = new RelayOutput(this.relay, callId);
    const detach = call.add(output);
    if (!detach) return;
    call.relayed = true;
    output.detach = () => {
      if (!call.relayed) return;
      call.relayed = false;
      detach();
    };
  }

  async close(): Promise<void> {
    for (const f of [...this.follows.values()]) f.end();
    this.follows.clear();
    this.tokens.clear();
    await this.relay?.close();
  }
}
