/** Repository errors that the API maps to its bodies. */
import { ErrorCodes, SwitchboardError } from '../../engine/errors.js';

/** A workflow or assistant cannot be deleted because numbers use it. */
export class InUseError extends SwitchboardError {
  static override readonly codes = [ErrorCodes.STORE_IN_USE] as const;
  constructor(
    readonly resource: 'workflow' | 'assistant',
    readonly numbers: { id: string; number: string }[],
  ) {
    super(ErrorCodes.STORE_IN_USE, `${resource} in use`);
  }
}

/** A reference in a write (number → workflow or assistant) names nothing in the organization. */
export class UnknownReferenceError extends SwitchboardError {
  static override readonly codes = [ErrorCodes.STORE_UNKNOWN_REFERENCE] as const;
  constructor(readonly details: string[]) {
    super(ErrorCodes.STORE_UNKNOWN_REFERENCE, 'unknown reference');
  }
}

/** A unique value (a phone number) is taken. */
export class ConflictError extends SwitchboardError {
  static override readonly codes = [ErrorCodes.STORE_CONFLICT] as const;
  constructor(readonly details: string[]) {
    super(ErrorCodes.STORE_CONFLICT, 'conflict');
  }
}
