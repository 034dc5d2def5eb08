/**
 * The last guard of `npm start` (src/main.ts): an error that escapes every other one (a promise
 * rejected with nobody to handle it, an exception thrown from a callback) is a defect, but it must
 * not take every live call down with the process. It is logged at error level, with its call id
 * when the error carries one (`callId`), counted in `/metrics`, and the server goes on serving.
 */
import type { Logger } from 'pino';
import type { Metrics } from './metrics.js';

/** The call an error belongs to, when whoever threw it said so (`err.callId`). */
function callIdOf(err: unknown): string | undefined {
  const callId = typeof err === 'object' && err !== null ? (err as { callId?: unknown }).callId : undefined;
  return typeof callId === 'string' ? callId : undefined;
}

/** Installs the handlers on `process`; returns what removes them. */
export function installLastResort(logger: Logger, metrics: Pick<Metrics, 'unhandledRejection' | 'uncaughtException'>): () => void {
  const fields = (err: unknown) => {
    const callId = callIdOf(err);
    return callId === undefined ? { err } : { err, callId };
  };
  const onRejection = (reason: unknown) => {
    logger.error(fields(reason), 'unhandled promise rejection (a defect: please report it)');
    metrics.unhandledRejection();
  };
  const onException = (err: Error) => {
    logger.error(fields(err), 'uncaught exception (a defect: please report it); the server goes on');
    metrics.uncaughtException();
  };
  process.on('unhandledRejection', onRejection);
  process.on('uncaughtException', onException);
  return () => {
    process.off('unhandledRejection', onRejection);
    process.off('uncaughtException', onException);
  };
}
