/**
 * The bookkeeping every kind of live call shares: its messages, saving the session as it goes,
 * its timers, and closing the record at the end (status, reason, webhooks, `gdpr_mode`, save).
 */
import type { Logger } from 'pino';
import type { CallSession } from '../../engine/session.js';
import type { CallNotifier } from './notifier.js';
import { forgetConversation, type AnsweredBy, type CallMessage, type CallRecord, type CallStore } from './store.js';
import { Conversation, type ConversationLog, type RecordLine } from './conversation.js';
import type { CallError } from '../errors.js';
import type { CallTransfer } from './warm-transfer.js';

export interface CallLedgerDeps {
  store: CallStore;
  notifier: CallNotifier;
  log: Logger;
  onEnded?(call: CallRecord): void;
  /** A line was added to the transcript (a web call's browser is told). */
  onMessage?(message: CallMessage): void;
  /** The workflow moved to another node. */
  onNode?(nodeId: string, nodesVisited: string[]): void;
  /** A call's own code threw (a timer callback): the call ends, never the process. */
  onFailure(err: unknown, where: string): void;
  /** The call is over: what was observed of it goes on the record before the report (src/observability/). */
  onClosing?(record: CallRecord): Promise<void>;
}

export class CallLedger implements ConversationLog {
  private readonly startedAtMs: number;
  private readonly timers = new Set<NodeJS.Timeout>();
  private saveChain: Promise<void> = Promise.resolve();
  private persistPending = false;
  private closed = false;

  constructor(
    readonly record: CallRecord,
    private readonly deps: CallLedgerDeps,
  ) {
    this.startedAtMs = record.started_at ? Date.parse(record.started_at) : Date.now();
  }

  /** The conversation: its lines reach the record through `add`. */
  readonly conversation = new Conversation((line) => this.add(line));

  /** A line of the transcript; a call's transcript has no tool lines (its report and log never had them). */
  private add(line: RecordLine): void {
    if (line.role === 'tool') return;
    const now = Date.now();
    const message: CallMessage = {
      role: line.role,
      content: line.content,
      time: new Date(now).toISOString(),
      seconds_from_start: Math.max(0, (now - this.startedAtMs) / 1000),
      node_id: line.nodeId,
      ...(line.source ? { source: line.source } : {}),
    };
    this.record.messages.push(message);
    this.deps.onMessage?.(message);
  }

  error(entry: CallError): void {
    this.record.errors.push(entry);
  }

  answeredBy(who: AnsweredBy): void {
    this.record.answered_by = who;
  }

  forwarding(destination: string): void {
    this.record.status = 'forwarding';
    void this.deps.notifier.statusUpdate(this.record, 'forwarding', { destination });
  }

  /** The record's `transfer`; a warm transfer that did not complete puts the call back `in-progress`. */
  transfer(state: CallTransfer): void {
    this.record.transfer = state;
    if (state.result !== null && state.result !== 'completed' && this.record.status === 'forwarding' && !this.closed) {
      this.record.status = 'in-progress';
      void this.deps.notifier.statusUpdate(this.record, 'in-progress');
    }
  }

  recording(url: string | null): void {
    this.record.recording_url = url;
  }

  /** Saves the session soon (coalesced): GET /calls and another process can read it. */
  persistSoon(session: () => CallSession | null): void {
    if (this.persistPending || this.closed) return;
    this.persistPending = true;
    setImmediate(() => {
      this.persistPending = false;
      const s = session();
      if (this.closed || !s?.isStarted()) return;
      try {
        this.noteNode(s);
      } catch (err) {
        this.deps.onFailure(err, 'session save');
        return;
      }
      // the store keeps the order of saves; the engine's snapshot is made when the store needs it
      // (at once for Redis; for the in-process store, when the call is read)
      const engine = () => s.snapshot() as unknown as Record<string, unknown>;
      const saved = this.deps.store.saveRunning(this.record, engine).catch((err: Error) => this.deps.log.warn({ err }, 'could not save the call session'));
      this.saveChain = this.saveChain.then(() => saved);
    });
  }

  /** The record's current node and nodes visited, as the engine has them; `onNode` when it moved. */
  noteNode(session: CallSession): void {
    const before = this.record.current_node;
    this.record.current_node = session.state().node_id;
    this.record.nodes_visited = [...session.nodesVisited()];
    if (this.record.current_node !== before && this.record.current_node !== null) {
      this.deps.onNode?.(this.record.current_node, this.record.nodes_visited);
    }
  }

  /** A timer owned by the call: all of them are cleared when it ends. */
  timer(ms: number, fn: () => void): void {
    const t = setTimeout(() => {
      this.timers.delete(t);
      try {
        fn();
      } catch (err) {
        this.deps.onFailure(err, 'timer');
      }
    }, ms);
    this.timers.add(t);
  }

  clearTimers(): void {
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
  }

  /**
   * The call is over (its media and providers already closed): the record gets its end, the
   * `status-update` `ended` and the end-of-call-report are sent, and the session is saved.
   * `session` is the engine's, when it had started. Never throws: each step that fails is logged
   * and the next one still runs, so that every call gets its end, its report and `onEnded`.
   */
  async close(reason: string, session: CallSession | null): Promise<void> {
    this.closed = true;
    this.clearTimers();
    const r = this.record;
    const step = async (what: string, fn: () => unknown): Promise<void> => {
      try {
        await fn();
      } catch (err) {
        this.deps.log.error({ err, step: what }, 'a step of closing the call failed');
      }
    };
    try {
      r.status = 'ended';
      r.ended_reason = reason;
      r.ended_at = new Date().toISOString();
      await step('engine snapshot', () => {
        if (!session?.isStarted()) return;
        this.noteNode(session);
        r.engine = session.snapshot() as unknown as Record<string, unknown>;
      });
      await step('observed', () => this.deps.onClosing?.(r));
      this.deps.log.info({ endedReason: reason }, 'call ended');
      await step('status-update', () => this.deps.notifier.statusUpdate(r, 'ended', { ended_reason: reason }));
      await step('end-of-call-report', () => this.deps.notifier.endOfCallReport(r));
      forgetConversation(r);
      await step('earlier saves', () => this.saveChain);
      await step('save', () => this.deps.store.save(r));
    } finally {
      this.deps.onEnded?.(r);
    }
  }
}
