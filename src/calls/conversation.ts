/**
 * The conversation's log: the one list of what was said, and the record as the controller writes
 * it. `Conversation` holds the list: the engine writes into it (the caller's turns, its lines and
 * what was heard of them, the model's replies, tool outcomes, a control's messages: the session
 * is handed it as its `ConversationHistory`, engine/history.ts) and reads the model's history back
 * from it; every entry is written to the record once it counts there (a line once it has been
 * heard), through the log's `write`. The lines the model is never told (the opening lines, a
 * chat's words before a tool round) go to the record alone. A phone or web call keeps its record
 * in its call record (`CallLedger`, ledger.ts: saved as it goes, webhooks at the end, the web
 * call's browser told each line); a chat in its chat record (`ChatLedger`, src/chats/chat.ts).
 * Besides the lines: the node, the errors, the owned timers and the end. Nothing else keeps a
 * list of the conversation.
 */
import { heardContent, sayIndex, type ConversationHistory } from '../../engine/history.js';
import type { CallSession } from '../../engine/session.js';
import type { HistoryMessage } from '../../engine/types.js';
import type { CallError } from '../errors.js';
import type { AnsweredBy } from './store.js';
import type { CallTransfer } from './warm-transfer.js';

/** A line as the record keeps it (a call's transcript keeps its `user`, `assistant` and `system` lines). */
export interface RecordLine {
  role: HistoryMessage['role'];
  content: string;
  nodeId: string | null;
  /** `control`: a live control said or added it. */
  source?: 'control';
  toolName?: string;
}

export interface ConversationLog {
  /** The conversation's one list (below). */
  readonly conversation: Conversation;
  /** A failure the record names in its `errors` (`{code, message, provider?}`). */
  error(entry: CallError): void;
  /** Saves the session soon (coalesced): other readers see the conversation as it is. */
  persistSoon(session: () => CallSession | null): void;
  /** The record's current node and nodes visited, as the engine has them. */
  noteNode(session: CallSession): void;
  /** A timer owned by the conversation: all of them are cleared at its end. */
  timer(ms: number, fn: () => void): void;
  clearTimers(): void;
  /** Outbound calls: who answered. */
  answeredBy(who: AnsweredBy): void;
  /** The conversation is being moved to `destination` (`forwarding`). */
  forwarding(destination: string): void;
  /** The call's transfer as it goes (`transfer` on a call's record; a chat keeps none). */
  transfer?(state: CallTransfer): void;
  /** Where the recording is served, or null when it could not be kept. */
  recording(url: string | null): void;
  /** The end: status, reason, the engine's last state, what is sent and saved. Never rejects. */
  close(reason: string, session: CallSession | null): Promise<void>;
}

/** One entry of the conversation: what the model is told of it (null: nothing), and whether the record has it. */
interface Entry {
  model: HistoryMessage | null;
  recorded: boolean;
}

const lineOf = (m: HistoryMessage): RecordLine => ({
  role: m.role,
  content: m.content,
  nodeId: m.node_id,
  ...(m.source ? { source: m.source } : {}),
  ...(m.tool_name !== undefined ? { toolName: m.tool_name } : {}),
});

/**
 * The conversation's one list. The engine appends to it; an entry goes to the record as it comes,
 * except a line said (`say_id`), which goes there once it is over with what the caller heard
 * (`spoken`). The model's history is the list's entries as the model is told them, kept as one
 * array that changes only by replacement (a `run_model` holds the history of its moment).
 */
export class Conversation implements ConversationHistory {
  private readonly entries: Entry[] = [];
  private history: readonly HistoryMessage[] = [];
  /** Within `through`: the record's line for what the engine writes now (null: the record has it already). */
  private sending: { line: RecordLine | null; taken: boolean } | null = null;

  constructor(private readonly write: (line: RecordLine) => void) {}

  // --- the engine's side (ConversationHistory)

  messages(): readonly HistoryMessage[] {
    return this.history;
  }

  append(message: HistoryMessage): void {
    const entry: Entry = { model: message, recorded: false };
    this.entries.push(entry);
    this.history = [...this.history, message];
    if (message.say_id !== undefined) return;
    // the line `through` sends is the first the engine writes (what the commands then do is not)
    if (this.sending && !this.sending.taken) {
      this.sending.taken = true;
      if (this.sending.line === null) {
        entry.recorded = true;
        return;
      }
    }
    this.toRecord(entry, lineOf(message));
  }

  heard(sayId: string, heard: string): void {
    const i = sayIndex(this.history, sayId);
    if (i < 0) return;
    const said = this.history[i]!;
    const text = heardContent(said.content, heard);
    if (text === null) return;
    const entry = this.entries.find((e) => e.model === said)!;
    entry.model = text === '' ? null : { ...said, content: text };
    this.history = this.entries.flatMap((e) => (e.model ? [e.model] : []));
  }

  restore(messages: readonly HistoryMessage[]): void {
    // a resumed conversation: what was said before is in the record already
    this.entries.length = 0;
    for (const m of messages) this.entries.push({ model: m, recorded: true });
    this.history = [...messages];
  }

  // --- the controller's side

  /**
   * A line of the engine's (`sayId`) is over: the record gets what the caller heard of it (nothing
   * heard: nothing), and a cut line keeps only that for the model too.
   */
  spoken(sayId: string, heard: string, complete: boolean): void {
    const i = sayIndex(this.history, sayId);
    const said = i < 0 ? undefined : this.history[i];
    const entry = said && this.entries.find((e) => e.model === said);
    if (!complete) this.heard(sayId, heard);
    if (!entry || entry.recorded || !heard) return;
    this.toRecord(entry, { ...lineOf(said!), content: heard });
  }

  /** A line the model is never told: the opening lines, a chat's words before a tool round, a tool's answer within a model turn. */
  line(line: RecordLine): void {
    const entry: Entry = { model: null, recorded: false };
    this.entries.push(entry);
    this.toRecord(entry, line);
  }

  /**
   * `send` hands the engine an event that writes a line (a caller's turn, a key, a reply): the
   * record takes it as the engine writes it, or `line` when the engine took none (the call has
   * ended, or the engine refused the event: the record still keeps what was said). `line` null:
   * the record has it already (a chat's reply, written as its pieces); the model alone gets it.
   */
  through(line: RecordLine | null, send: () => void): void {
    const outer = this.sending;
    const sending = { line, taken: false };
    this.sending = sending;
    try {
      send();
    } finally {
      this.sending = outer;
    }
    if (!sending.taken && line !== null) this.line(line);
  }

  private toRecord(entry: Entry, line: RecordLine): void {
    if (entry.recorded) return;
    entry.recorded = true;
    this.write(line);
  }
}
