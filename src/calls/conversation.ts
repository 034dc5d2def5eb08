/**
 * The conversation's record as the controller writes it: one place for the transcript (caller
 * turns, what was heard of each utterance, keys, tool results), the node, the errors, the owned
 * timers and the end. A phone or web call keeps it in its call record (`CallLedger`, ledger.ts:
 * saved as it goes, webhooks at the end, the web call's browser told each line); a chat in its
 * chat record (`ChatLedger`, src/chats/chat.ts). The controller never writes a record by hand.
 */
import type { CallSession } from '../../engine/session.js';
import type { CallError } from '../errors.js';
import type { AnsweredBy } from './store.js';

export type ConversationRole = 'user' | 'assistant' | 'tool';

export interface ConversationLog {
  /** A line of the conversation (a call's transcript keeps `user` and `assistant` lines). */
  message(role: ConversationRole, content: string, nodeId: string | null, toolName?: string): void;
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
  /** Where the recording is served, or null when it could not be kept. */
  recording(url: string | null): void;
  /** The end: status, reason, the engine's last state, what is sent and saved. Never rejects. */
  close(reason: string, session: CallSession | null): Promise<void>;
}
