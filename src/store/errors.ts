/** Repository errors that the API maps to its bodies. */

/** A workflow or assistant cannot be deleted because numbers use it. */
export class InUseError extends Error {
  constructor(
    readonly resource: 'workflow' | 'assistant',
    readonly numbers: { id: string; number: string }[],
  ) {
    super(`${resource} in use`);
  }
}

/** A reference in a write (number → workflow or assistant) names nothing in the organization. */
export class UnknownReferenceError extends Error {
  constructor(readonly details: string[]) {
    super('unknown reference');
  }
}

/** A unique value (a phone number) is taken. */
export class ConflictError extends Error {
  constructor(readonly details: string[]) {
    super('conflict');
  }
}
