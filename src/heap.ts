/**
 * The heap settings `npm start` and the image run with (docs/operations.md, "Heap"), and the one
 * full collection after start-up that they call for.
 *
 * `--initial-old-space-size=256` gives the old generation a budget of about 200 MB above which a
 * full collection runs (V8's own budget stays a little above the live size, about 75 MB at 400
 * calls, and such a server then ran a full collection every 1.5 s, each pausing every call's
 * audio for up to 20 ms; docs/benchmarks.md). With the larger budget, full collections come about
 * every 35 s at 400 calls. The cost is memory: garbage up to the budget is kept, so the process collects what
 * start-up left behind (migrations, the embedded database's set-up) once it is serving, or an idle
 * server would hold it.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/** V8 flags for the server process (they cannot go in NODE_OPTIONS: V8 refuses them there). */
export const SERVER_HEAP_FLAGS = ['--initial-old-space-size=256'] as const;

/** One full collection, now (for the end of start-up); false when the runtime refused. */
export function collectStartupGarbage(): boolean {
  try {
    // `gc` is given to contexts made after the flag is set; this process's own globals are untouched
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as (() => void) | undefined;
    if (typeof gc !== 'function') return false;
    gc();
    return true;
  } catch {
    return false;
  }
}
