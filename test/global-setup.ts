/**
 * vitest's global set-up (every project): a folder for what the test files of one run make once
 * and share (test/helpers/run-cache.ts), removed when the run ends. Its path goes to the workers
 * and to the processes the tests start in SWITCHBOARD_TEST_RUN_DIR.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

export default function setup(): (() => void) | undefined {
  // each project runs this; the first one makes the folder, and removes it at the end of the run
  if (process.env.SWITCHBOARD_TEST_RUN_DIR) return undefined;
  const dir = mkdtempSync(path.join(tmpdir(), 'sb-test-run-'));
  process.env.SWITCHBOARD_TEST_RUN_DIR = dir;
  return () => {
    rmSync(dir, { recursive: true, force: true });
    delete process.env.SWITCHBOARD_TEST_RUN_DIR;
  };
}
