/**
 * The sweep (DECISIONS 22): calls the call log has as not over that no process looks after any
 * more. At start and every minute each process takes the log's `ringing`, `in-progress` and
 * `forwarding` calls older than a call can ring (150 s) that have no session anywhere (Redis, or
 * the embedded default's memory, lost them) and no heartbeat in a stale period, and ends them
 * with their status-update and report: `worker-lost` once started, `customer-ended-call` when
 * their media never connected; one process wins each (a conditional update of the log). With
 * sessions shared in Redis another process may still run such a call (it beats within 5 s of a
 * Redis restart): a call is ended only when a later run, a stale period on, finds it so still;
 * there, too, `queued` outbound calls whose session and dial job were lost are queued again
 * (`onLostQueued`). A session that cannot be read (Redis down) stops the run.
 */
import type { Logger } from 'pino';
import { effectiveAssistant } from '../../engine/assistant.js';
import type { LoggedCall } from '../store/calls.js';
import type { Store } from '../store/index.js';
import { isOutage } from '../store/outage.js';
import { callError, ErrorCodes } from '../errors.js';
import { recordFromLog } from './call-log.js';
import type { CallMedia } from './call-audio.js';
import { keepLostRecording } from '../recordings/lost.js';
import type { CallNotifier } from './notifier.js';
import type { CallRecord, CallStore } from './store.js';

/** The sweep leaves younger calls alone: a call can ring this long before its media connects. */
const SWEEP_MIN_AGE_MS = 150_000;

export interface CallSweeperOptions {
  store: Store;
  calls: CallStore;
  notifier: CallNotifier;
  log: Logger;
  /** Whether this process runs the call (its sessions may lag its own record). */
  runsHere(callId: string): boolean;
  staleSeconds?: number;
  sharedSessions?: boolean;
  sweepEveryMs?: number;
  sweepMinAgeMs?: number;
  onSwept?(record: CallRecord): void;
  onCallEnded?(record: CallRecord): void;
  onLostQueued?(logged: LoggedCall): Promise<void>;
  /** Recordings: a worker-lost call keeps what its recorder wrote, when the file is here. */
  media?: CallMedia;
}

export class CallSweeper {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<number> | null = null;
  /** Calls found without a session or a heartbeat, and when first (shared sessions). */
  private readonly suspects = new Map<string, number>();

  constructor(private readonly o: CallSweeperOptions) {}

  private get staleMs(): number {
    return (this.o.staleSeconds ?? 20) * 1000;
  }

  /** One run now, then one every `sweepEveryMs` (default 60 s). */
  async start(): Promise<void> {
    await this.runOnce();
    this.timer = setInterval(() => void this.runOnce(), this.o.sweepEveryMs ?? 60_000);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.running;
  }

  /** How many calls it ended or queued again; never throws. */
  runOnce(): Promise<number> {
    this.running ??= this.sweep()
      .catch((err: unknown) => {
        if (isOutage(err)) this.o.log.info({ err }, 'call sweep: the database or Redis does not answer; trying again later');
        else this.o.log.error({ err }, 'call sweep failed');
        return 0;
      })
      .finally(() => (this.running = null));
    return this.running;
  }

  /** Whether a process said the call is alive less than a stale period ago. */
  async beatsFor(callId: string): Promise<boolean> {
    const beat = await this.o.calls.lastHeartbeat(callId);
    return !!beat && Date.now() - Date.parse(beat) < this.staleMs;
  }

  private async sweep(): Promise<number> {
    let n = 0;
    const before = new Date(Date.now() - (this.o.sweepMinAgeMs ?? SWEEP_MIN_AGE_MS));
    // queued calls without a session are lost only where sessions and dial jobs share Redis (the
    // embedded default's dial queue is in the database and brings its calls back itself)
    const queued = !!this.o.sharedSessions && !!this.o.onLostQueued;
    for (const logged of await this.o.store.calls.unfinished(before, 1000, { queued })) {
      if (this.o.runsHere(logged.id)) continue;
      if (await this.o.calls.get(logged.id)) continue; // a session: the stale check looks after it
      if (await this.beatsFor(logged.id)) continue; // its process still runs it (Redis restarted)
      if (this.o.sharedSessions) {
        const first = this.suspects.get(logged.id);
        if (first === undefined) {
          this.suspects.set(logged.id, Date.now());
          continue;
        }
        if (Date.now() - first < this.staleMs) continue;
      }
      this.suspects.delete(logged.id);
      if (logged.status === 'queued') {
        await this.o.onLostQueued!(logged);
        n++;
      } else if (await this.finish(logged)) n++;
    }
    // forget suspects that turned out alive or ended elsewhere
    for (const [id, at] of this.suspects) if (Date.now() - at > 10 * this.staleMs) this.suspects.delete(id);
    return n;
  }

  /**
   * Ends one call the log has as not over and no process has (a ringing one with `ringingReason`):
   * null when another process did first.
   */
  async finish(logged: LoggedCall, ringingReason = 'customer-ended-call'): Promise<CallRecord | null> {
    const record = recordFromLog(logged);
    const neverConnected = logged.status === 'ringing';
    // a web call rings until its browser opens the stream: one that never did was not joined
    const reason = neverConnected ? (logged.type === 'web_call' && ringingReason === 'customer-ended-call' ? 'customer-did-not-join' : ringingReason) : 'worker-lost';
    const end = {
      ended_reason: reason,
      ended_at: new Date().toISOString(),
      errors: [
        ...record.errors,
        neverConnected
          ? callError(ErrorCodes.CALL_STREAM_LOST, 'the media stream never connected (the call session was lost)')
          : callError(ErrorCodes.CALL_WORKER_LOST, 'the process running the call stopped and its call session was lost'),
      ],
    };
    if (!(await this.o.store.calls.endIf(logged.id, logged.status, end))) return null;
    Object.assign(record, end, { status: 'ended' as const });
    // the webhook target: the assistant as it is now (the call's snapshot went with its session)
    if (record.assistant_id) {
      const assistant = await this.o.store.assistants.get(record.organization_id, record.assistant_id).catch(() => null);
      if (assistant) record.assistant = effectiveAssistant(assistant.fields) as unknown as Record<string, unknown>;
    }
    if (!neverConnected) {
      await keepLostRecording(this.o.media, record, this.o.log);
      if (record.recording_url) await this.o.store.calls.noteRecording(record.id, record.recording_url).catch((err: unknown) => this.o.log.warn({ err, callId: record.id }, 'could not note the kept recording in the call log'));
    }
    this.o.log.warn({ callId: record.id, endedReason: reason, status: logged.status }, 'ended a call left unfinished with no live session anywhere');
    this.o.onSwept?.(record);
    await this.o.notifier.statusUpdate(record, 'ended', { ended_reason: reason });
    await this.o.notifier.endOfCallReport(record);
    this.o.onCallEnded?.(record);
    return record;
  }
}
