/**
 * Where a call session keeps the conversation the model is told. The engine decides what goes in
 * (a caller's turn, a line said and what was heard of it, a model's reply, a tool's outcome, a
 * control's message) and reads it back for each `run_model`; the list itself is the caller's:
 * a call or chat hands its conversation log (src/calls/conversation.ts), so that the record,
 * the report, the observers and the model all read one list. A session given none keeps its own
 * (`MemoryHistory`): the engine alone, as its tests run it.
 */
import type { HistoryMessage } from './types.js';

/** What the engine writes into the conversation, in the order it happens. */
export type HistoryOp =
  | { type: 'history.append'; message: HistoryMessage }
  /** A cut `say`: its entry keeps only what the caller heard of it (nothing heard: it goes). */
  | { type: 'history.heard'; say_id: string; heard: string };

export interface ConversationHistory {
  /** The conversation so far, oldest first, as the model is told it. */
  messages(): readonly HistoryMessage[];
  append(message: HistoryMessage): void;
  /** What the caller heard of the say `sayId` (trimmed; empty: the entry goes). No such say: nothing. */
  heard(sayId: string, heard: string): void;
  /** A restored session's conversation, as its snapshot saved it (replaces what is there). */
  restore(messages: readonly HistoryMessage[]): void;
}

/** The text a cut say keeps, or null when it keeps its whole line (nothing to change). */
export function heardContent(line: string, heard: string): string | null {
  const text = heard.trim();
  return text === line ? null : text;
}

/** The index of the newest entry of `sayId`, or -1. */
export function sayIndex(messages: readonly HistoryMessage[], sayId: string): number {
  let i = messages.length - 1;
  while (i >= 0 && messages[i]!.say_id !== sayId) i--;
  return i;
}

/** A session's own conversation, when its caller keeps none. */
export class MemoryHistory implements ConversationHistory {
  private list: HistoryMessage[];

  constructor(messages: readonly HistoryMessage[] = []) {
    this.list = [...messages];
  }

  messages(): readonly HistoryMessage[] {
    return this.list;
  }

  append(message: HistoryMessage): void {
    this.list = [...this.list, message];
  }

  heard(sayId: string, heard: string): void {
    const i = sayIndex(this.list, sayId);
    if (i < 0) return;
    const text = heardContent(this.list[i]!.content, heard);
    if (text === null) return;
    this.list =
      text === ''
        ? [...this.list.slice(0, i), ...this.list.slice(i + 1)]
        : [...this.list.slice(0, i), { ...this.list[i]!, content: text }, ...this.list.slice(i + 1)];
  }

  restore(messages: readonly HistoryMessage[]): void {
    this.list = [...messages];
  }
}
