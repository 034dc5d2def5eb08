/**
 * A live control's transfer (`control.transfer`, DECISIONS 16): its fields are checked as a
 * transfer node's are, with the same messages (`ring_timeout_seconds: must be at least 5`,
 * `hold_message: only allowed on a warm transfer ("mode": "warm")`), and a warm one becomes the
 * same `warm_transfer` command a warm node gives.
 */
import { z } from 'zod';
import {
  DEFAULT_OPERATOR_MESSAGE,
  DEFAULT_RING_TIMEOUT_SECONDS,
  TRANSFER_MODES,
  WARM_ONLY_MESSAGE,
  WARM_TRANSFER_FIELDS,
  WarmTransferFields,
} from './schema.js';
import type { CallEvent, WarmTransferCommand } from './types.js';
import { formatZodIssues } from './validate.js';

type ControlTransfer = Extract<CallEvent, { type: 'control.transfer' }>;

// not strict: `type` and `destination` are checked with the event's shape
const Fields = z.object({ mode: z.enum(TRANSFER_MODES).optional(), ...WarmTransferFields });

/** What is wrong with a transfer's mode and warm fields (`field: problem`), as a node's would be told; empty when nothing. */
export function transferFieldProblems(fields: Record<string, unknown>): string[] {
  const parsed = Fields.safeParse(fields, { reportInput: true });
  const problems = parsed.success ? [] : formatZodIssues(parsed.error.issues);
  if (fields.mode !== 'warm') {
    for (const key of WARM_TRANSFER_FIELDS) if (fields[key] !== undefined) problems.push(`${key}: ${WARM_ONLY_MESSAGE}`);
  }
  return problems;
}

/** The `warm_transfer` a warm `control.transfer` gives, the node's defaults filled in. */
export function warmTransferOf(event: ControlTransfer, nodeId: string): WarmTransferCommand {
  return {
    type: 'warm_transfer',
    destination: event.destination,
    node_id: nodeId,
    operator_message: event.operator_message ?? DEFAULT_OPERATOR_MESSAGE,
    ring_timeout_seconds: event.ring_timeout_seconds ?? DEFAULT_RING_TIMEOUT_SECONDS,
    require_acceptance: event.require_acceptance ?? false,
  };
}
