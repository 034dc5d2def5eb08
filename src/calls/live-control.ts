/**
 * Live control of a call (`POST /calls/{id}/control`, DECISIONS 16): what each control does to
 * the call, applied in the process that runs it (the word reaches it through src/calls/control.ts).
 * The controller (src/calls/controller.ts) lends its parts through `ControlHost`; the engine takes
 * each control as an event (`control.say`, `control.add_message`, `control.goto`,
 * `control.transfer`, `control.end`), so the record, the model's history and a call resumed
 * elsewhere all keep it, and whatever a control says is marked `source: "control"`. A warm
 * transfer by control runs as a warm transfer node's does (src/calls/warm-transfer.ts).
 */
import { transferFieldProblems } from '../../engine/control-transfer.js';
import type { TRANSFER_MODES } from '../../engine/schema.js';
import type { CallEvent, EventRejectedCommand } from '../../engine/types.js';
import type { CallLogEntry } from '../store/calls.js';

/** A control, as the API takes it. */
export type LiveControl =
  /** Said after the current line, or at once, cutting what plays (`interrupt`). */
  | { type: 'say'; text: string; interrupt?: boolean }
  /** In the model's context from its next turn; not said. */
  | { type: 'add-message'; role: 'system' | 'user'; content: string }
  /** The workflow moves to the node and says its `first_line`. */
  | { type: 'goto'; node_id: string }
  /** `cold` (default): at once; `warm`: the operator is dialled, told and joined, with a warm node's settings. */
  | {
      type: 'transfer';
      destination: string;
      mode?: (typeof TRANSFER_MODES)[number];
      operator_message?: string;
      hold_message?: string;
      ring_timeout_seconds?: number;
      require_acceptance?: boolean;
    }
  /** `message` is said (what plays is cut), then the call ends `api-ended-call`. */
  | { type: 'end'; message?: string };

/** What applying a control came to; the API answers 202, 409 `Call not live` or 400. */
export type ControlOutcome =
  /** `call`: the call as its process has it once the control was applied (what the API answers). */
  | { kind: 'applied'; call?: CallLogEntry }
  | { kind: 'not-live'; message: string }
  | { kind: 'invalid'; details: string[] };

/** The controller's parts a control uses. */
export interface ControlHost {
  /** `live`: the conversation runs; `opening`: its opening lines play; `ending`: it is ending or over. */
  state(): 'live' | 'opening' | 'ending';
  /** Cuts what plays as a barge-in would (a tool node's choice runs on). */
  cut(): void;
  /** Stops everything but lines that cannot be cut (the call is ending). */
  interrupt(): void;
  /**
   * Gives the engine the event and carries out its commands; the refusal when it took none.
   * `stopFirst`: once the engine took it, what plays and the model's turn stop before its commands
   * run (so a warm transfer's hold line is not cut with them).
   */
  send(event: CallEvent, stopFirst?: boolean): EventRejectedCommand | null;
  /** A message the engine's history took, for a backend whose model keeps its own context. */
  contextAdded(role: 'system' | 'user', content: string): void;
  /** Ends the call at once, `api-ended-call`. */
  endNow(): void;
}

/** Applies `control` to the call now; never throws for a control the call cannot take (it says why). */
export function applyControl(control: LiveControl, host: ControlHost): ControlOutcome {
  const state = host.state();
  if (control.type === 'end' && state !== 'live') {
    // the API asked to end: during the opening lines or a closing line, the call ends now
    host.endNow();
    return { kind: 'applied' };
  }
  if (state === 'opening') return notLive('the conversation has not begun yet (its opening lines are playing); try again in a moment');
  if (state === 'ending') return notLive('the call is ending');
  switch (control.type) {
    case 'say':
      if (control.interrupt) host.cut();
      return outcome(host.send({ type: 'control.say', text: control.text }));
    case 'add-message': {
      const refused = host.send({ type: 'control.add_message', role: control.role, content: control.content });
      if (!refused) host.contextAdded(control.role, control.content);
      return outcome(refused);
    }
    case 'goto':
      return outcome(host.send({ type: 'control.goto', node_id: control.node_id }), 'node_id');
    case 'transfer': {
      const { type: _type, ...fields } = control;
      // checked as a transfer node's fields are, with the same messages (the API checked them too)
      const problems = transferFieldProblems(fields);
      if (problems.length > 0) return { kind: 'invalid', details: problems };
      // warm: the model's turn and what plays stop; the caller hears the hold line while the operator is dialled
      return outcome(host.send({ type: 'control.transfer', ...fields }, control.mode === 'warm'));
    }
    case 'end': {
      // the message is said at once: what plays is cut (lines that cannot be cut play out first)
      if (control.message) host.interrupt();
      const refused = host.send({ type: 'control.end', ...(control.message ? { message: control.message } : {}) });
      if (refused) host.endNow();
      return { kind: 'applied' };
    }
  }
}

const notLive = (message: string): ControlOutcome => ({ kind: 'not-live', message });

/** The engine took the event (applied), or why not: a bad value is a 400, the call's state a 409 (a warm transfer under way, a tool node running). */
function outcome(refused: EventRejectedCommand | null, field = '(root)'): ControlOutcome {
  if (!refused) return { kind: 'applied' };
  switch (refused.code) {
    case 'UNKNOWN_NODE':
    case 'MALFORMED_EVENT':
      return { kind: 'invalid', details: [`${field}: ${refused.message}`] };
    case 'EVENT_NOT_EXPECTED':
    case 'CALL_ENDED':
      return notLive('the call is ending');
    default:
      return notLive(refused.message);
  }
}
