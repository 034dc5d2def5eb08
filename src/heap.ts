/**
 * The heap settings `npm start` and the image run with (README's "Running in production"), and
 * the one full collection at the end of start-up that they call for.
 *
 * `--initial-old-space-size=256` gives the old generation a budget of about 200 MB above which a
 * full collection runs (V8's own budget stays a little above the live size, about 75 MB at 400
 * calls, and such a server then ran a full collection every 1.5 s, each pausing every call's
 * audio for up to 20 ms; docs/benchmarks.md). With the larger budget, full collections come about
 * every 35 s at 400 calls. The cost is memory: garbage up to the budget is kept, so the process
 * collects what start-up left behind (migrations, the embedded database's set-up) before it
 * serves, or an idle server would hold it.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/** V8 flags for the server process (they cannot go in NODE_OPTIONS: V8 refuses them there). */
export const SERVER_HEAP_FLAGS = ['--initial-old-space-size=256'] as const;

/**
 * Changing a V8 flag after start-up aborts the process (not an exception) when flags are frozen.
 * Only the command line can freeze them: Node refuses the flag in NODE_OPTIONS.
 */
const flagsFrozen = (): boolean => process.execArgv.some((a) => /^--freeze[-_]flags[-_]after[-_]init$/.test(a));

/**
 * One full collection, now (at the end of start-up, before the server takes calls: it pauses
 * the thread for 25–45 ms on the embedded default, by `node --trace-gc` of a start). False when it could not run.
 */
export function collectStartupGarbage(): boolean {
  if (flagsFrozen()) return false;
  try {
    // `gc` is given to contexts made while the flag is set; this process's own globals never get
    // it, and the flag is unset again so that no later context or worker thread gets it either
    setFlagsFromString('--expose-gc');
    let gc: unknown;
    try {
      gc = runInNewContext('gc');
    } finally {
      setFlagsFromString('--no-expose-gc');
    }
    if (typeof gc !== 'function') return false;
    (gc as () => void)();
    return true;
  } catch {
    return false;
  }
}
