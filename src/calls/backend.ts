/**
 * The seam between the call controller (src/calls/controller.ts: the engine, its commands, the
 * timers, the end) and what talks with the caller: a conversation backend. Three implement it: the
 * pipeline (STT, turn-taking, the model's turn, the speaker: src/calls/pipeline/backend.ts), a
 * realtime speech-to-speech model (src/calls/realtime/backend.ts) and text for chats
 * (src/chats/text-backend.ts). The controller asks (say a line, reply to a model turn, interrupt,
 * the node's offer, close); the backend tells (`BackendEvents`): the caller's input, what was heard
 * of each utterance, the model's reply and transition, a provider's failure. A backend with audio
 * plays it through the call's `Playout` (src/calls/playout.ts), which tells it how far the caller
 * played each utterance. See docs/controller.md.
 */
import type { Logger } from 'pino';
import type { EffectiveAssistant } from '../../engine/assistant.js';
import type { RunModelCommand } from '../../engine/session.js';
import type { ModelContext } from '../../engine/prompt.js';
import type { ProviderOverrides } from '../../engine/compile.js';
import type { ToolCallOutcome, ToolCallRequest } from './notifier.js';
import type { TurnEndDetail } from './turn-clock.js';

/** A line the controller asks to be said: an engine `say`, or one of its own (consent, voicemail). */
export interface LineRequest {
  text: string;
  interruptible: boolean;
  /** The engine's `say_id`; null for the controller's own lines. */
  sayId: string | null;
  nodeId: string | null;
  /** `control`: a live control asked for it (the record marks its line so). */
  source?: 'control';
}

/** What the caller heard of one utterance, once it is over: played whole, cut, or never said. */
export interface Heard {
  /** The words heard (empty: nothing). */
  text: string;
  /** Heard whole: not cut, nothing dropped. */
  complete: boolean;
}

/** What the event behind a model turn tells about it (the key pressed). */
export interface CommandHint {
  dtmf?: string;
}

/** Sends `tool-calls` (to `url`, or the webhook the levels choose); `async` tools are not waited for. */
export type ToolCaller = (
  calls: ToolCallRequest[],
  options: { url?: string | undefined; nodeId?: string; async?: boolean },
) => Promise<ToolCallOutcome[]>;

/**
 * What a backend tells its controller. Every callback is synchronous and runs at the moment the
 * thing happens: a line cut by the caller is over before the caller's turn that cut it reaches the
 * engine, so the next model request sees what was heard of it and only that.
 */
export interface BackendEvents {
  /** The caller speaks, or something of ours is under way: silence stops counting. */
  silenceBroken(): void;
  /** The caller gave input (a turn ended, a key): the silence checks start over. */
  callerInput(): void;
  /**
   * The caller's turn is over and a reply will be asked for (turn-taking decided, or a realtime
   * model's VAD): the turn's clock starts. Its words follow as `callerTurn` (a realtime model's
   * transcript may come after its reply).
   */
  turnEnded(detail?: TurnEndDetail): void;
  /** A caller's turn reaches the engine (in order after the reply it answered). */
  callerTurn(text: string): void;
  /**
   * What the caller heard of a model reply: the engine's history takes it, and the record too
   * unless `recorded` (a chat writes its reply's lines as they come, around its tool results).
   */
  replied(text: string, nodeId: string | null, recorded?: boolean): void;
  /** A line of a model reply that the backend keeps itself (chats: the words before a tool round). */
  wrote(text: string, nodeId: string | null): void;
  /**
   * The model chose a transition function. `answer` (realtime: the function call's result) gets
   * the engine's refusal, if any, before the commands it gives are carried out.
   */
  choseTransition(name: string, nodeId: string, answer?: (rejected: string | null, active: boolean) => void): void;
  /** An assistant tool answered in a model turn (the chat's transcript keeps it). */
  toolResult(name: string, content: string, nodeId: string | null): void;
  /** The `tool-calls` exchange of this conversation. */
  callTools: ToolCaller;
  /** Nothing of ours is pending: silence may count from now (the controller checks `busy`). */
  settled(): void;
  /**
   * A silence check-in failed (`err`) or said nothing (`err` null): returns the line to say
   * instead, and notes the failure in the record's `errors` (`provider` when the error names none).
   */
  checkInFallback(fallback: string, err: Error | null, provider: string): string;
  /** A provider failed: the call ends `pipeline-error-<provider>` (`provider` when the error names none). */
  failed(err: Error, provider: string): void;
  /** Our own code threw: the call ends `pipeline-error-switchboard`. */
  defect(err: unknown, where: string): void;
}

/** What the controller gives a backend it makes. */
export interface BackendContext {
  events: BackendEvents;
  /** The assistant, `{{variables}}` substituted. */
  assistant: EffectiveAssistant;
  log: Logger;
  /** The engine's current node (null before it has one). */
  nodeId(): string | null;
  /** The engine has started (after the lines said before the workflow): caller turns count. */
  engineStarted(): boolean;
  /** Wraps callbacks the event loop runs for the call: a throw ends the call, never the process. */
  shield<T extends object>(callbacks: T, where: string): T;
  /** Work started and not waited for: a rejection ends the call. */
  guard(work: Promise<unknown>, where: string): void;
  /**
   * The model pressed `keys` (`press_keys`, checked by `keysFrom`): they go to the far end after
   * the audio pushed so far, then the record and the engine's history say so. Resolves once they
   * have played (`sent`) or were stopped (`signal`, a clear, the end), with what the model is
   * told. Absent where there is no keypad (a chat): the function is not offered.
   */
  pressKeys?(keys: string, nodeId: string | null, signal?: AbortSignal): Promise<{ sent: boolean; output: string }>;
}

/** The node the conversation is in, as a realtime model is offered it. */
export interface NodeView {
  nodeId: string;
  /** The node's prompt and functions (null: no model turn here); computed only when asked. */
  context(): ModelContext | null;
}

export interface ConversationBackend {
  /**
   * The controller's own lines (the consent, the outbound first line, the voicemail message) are
   * in the record whole, word for word, from when they are asked for (the pipeline, as it always
   * was); otherwise what was heard of them, once over (a realtime model's, as it always was).
   */
  readonly ownLinesRecordedWhenAsked: boolean;
  /**
   * Connects the providers (with the node's `overrides`: a resumed conversation keeps them); one
   * that cannot be had is reported through `failed`, and start then resolves.
   */
  start(node: NodeView, overrides: ProviderOverrides): Promise<void>;
  /** Says a line; `over` runs once, synchronously, when it is over (played, cut, or never said). */
  say(line: LineRequest, over: (heard: Heard) => void): void;
  /** A `run_model` command: the model's turn, spoken (or written) as it comes. */
  reply(command: RunModelCommand, hint: CommandHint): void;
  /** The node's provider overrides (pipeline: the STT, model and voice switch). */
  setOverrides(overrides: ProviderOverrides): void;
  /** The engine's commands were carried out: the node (and so the model's offer) may have moved. */
  setNode(node: NodeView): void;
  /** A key was pressed: cut what may be cut (`choosing`: a tool node's choice runs; a key does not cut it). */
  keyPressed(choosing: boolean): void;
  /**
   * Caller input (a key) goes to the engine after the model's reply before it is settled, so that
   * the history keeps the call's order: `apply` now, or once that reply is over.
   */
  afterReply(apply: () => void): void;
  /** Stops everything but lines that cannot be interrupted (a machine answered: voicemail next). */
  interrupt(): void;
  /**
   * Live control (`say` with `interrupt`): cuts what plays as the caller's barge-in would (a tool
   * node's choice, `choosing`, runs on). Absent: nothing is cut (a chat).
   */
  cut?(choosing: boolean): void;
  /**
   * Live control (`add-message`): a message is in the engine's history from now. A backend whose
   * model keeps its own context (realtime) adds it there. Absent: the history is the context.
   */
  contextAdded?(role: 'system' | 'user', content: string): void;
  /** Caller audio (μ-law 8 kHz). */
  callerAudio(mulaw: Buffer): void;
  /** Something of ours is pending, playing or running, or the caller is speaking: silence does not count. */
  busy(): boolean;
  /** Stops all; every utterance still open is over (with what was heard of it). */
  close(): Promise<void>;
}
