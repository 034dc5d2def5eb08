/** The workflow engine's public API: pure TypeScript, no I/O. */
export * from './schema.js';
export * from './text.js';
export * from './catalog.js';
export * from './errors.js';
export * from './assistant.js';
export * from './types.js';
export * from './compile.js';
export { stateId, TRANSFER_FAILED_LINE, type CallActor, type CallMachine, type CallMachineSnapshot } from './machine.js';
export * from './prompt.js';
export * from './session.js';
export * from './history.js';
export * from './validate.js';
export * from './checks.js';
export { formatPath, type Path } from './paths.js';
