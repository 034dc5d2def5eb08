/**
 * The embedded database is single-process: a lock file in DATA_DIR says which process holds it,
 * so a second server or the keys command can say so plainly instead of corrupting the files.
 */
import { closeSync, openSync, readFileSync, rmSync, writeSync } from 'node:fs';
import path from 'node:path';
import { ErrorCodes, SwitchboardError } from '../../engine/errors.js';

export interface DataDirLock {
  release(): void;
}

export class DataDirInUseError extends SwitchboardError {
  static override readonly codes = [ErrorCodes.DATA_DIR_IN_USE] as const;
  override name = 'DataDirInUseError';
  constructor(
    readonly dataDir: string,
    readonly pid: number,
  ) {
    super(
      ErrorCodes.DATA_DIR_IN_USE,
      `The embedded database in ${dataDir} is in use by another Switchboard process (pid ${pid}). ` +
        'It can be opened by one process at a time: stop that process and run this again, ' +
        'or run every process against PostgreSQL by setting DATABASE_URL.',
    );
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

export function acquireDataDirLock(dataDir: string): DataDirLock {
  const file = path.join(dataDir, 'switchboard.lock');
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fd = openSync(file, 'wx');
      writeSync(fd, String(process.pid));
      closeSync(fd);
      let released = false;
      return {
        release() {
          if (released) return;
          released = true;
          rmSync(file, { force: true });
        },
      };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const pid = Number.parseInt(readFileSync(file, 'utf8').trim(), 10);
      // our own pid in the file is a lock left by an earlier run that had the same pid (a
      // container's server starts as the same low pid every time): stale, not a holder
      if (Number.isInteger(pid) && pid > 0 && pid !== process.pid && isAlive(pid)) {
        throw new DataDirInUseError(dataDir, pid);
      }
      // the holder is gone (crash, kill -9): the lock is stale
      rmSync(file, { force: true });
    }
  }
  throw new Error(`could not lock ${file}`);
}
