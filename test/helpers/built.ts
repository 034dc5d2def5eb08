/**
 * What the process tests start: the compiled build, as users run it (`npm start`, `npm run keys`,
 * `npm run chat`… run dist/ with plain node after `scripts/build.mjs`), built once a run; and
 * embedded data folders made once a run and copied, for the starts that are not a first start.
 */
import { spawn } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { initPgliteDir } from '../../src/store/db.js';
import { madeOnce, schemaKey, withRunLock } from './run-cache.js';

export const ROOT = path.resolve(import.meta.dirname, '../..');

function runBuild(): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['scripts/build.mjs', '--quiet'], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`scripts/build.mjs exited ${code}:\n${out}`))));
  });
}

let built: Promise<void> | undefined;

/**
 * dist/ up to date with the sources: `scripts/build.mjs`, one test file at a time (the first of a
 * run compiles what changed; for the others, nothing changed and it does not compile).
 */
export function buildDist(): Promise<void> {
  built ??= withRunLock('build', runBuild);
  return built;
}

const scripts = (JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts;

/**
 * The node command of a package.json script, after its build (`node scripts/build.mjs --quiet &&`):
 * its Node options and file (made absolute, to run from any folder), with this Node (the build is
 * `buildDist`'s). `extra` Node options go before the script's own.
 */
export function scriptCommand(name: string, extra: string[] = []): { cmd: string; args: string[] } {
  const script = scripts[name];
  if (!script) throw new Error(`no script ${name} in package.json`);
  const words = script.split('&&').at(-1)!.trim().split(/\s+/);
  if (words[0] !== 'node') throw new Error(`script ${name} does not end in a node command: ${script}`);
  return { cmd: process.execPath, args: [...extra, ...words.slice(1).map((w) => (w.startsWith('dist/') ? path.join(ROOT, w) : w))] };
}

/**
 * A new DATA_DIR whose embedded database folder is already made (the schema, no keys): what a
 * first start leaves, copied from one made once a run, so that a test that is not about the
 * first start does not pay `initdb` and the migrations again.
 */
export async function madeDataDir(prefix = 'sb-data-'): Promise<string> {
  const dir = mkdtempSync(path.join(tmpdir(), prefix));
  const folder = await madeOnce(`pglite-folder-${schemaKey()}`, (into) => initPgliteDir(into));
  if (folder) cpSync(folder, path.join(dir, 'pglite'), { recursive: true });
  else await initPgliteDir(path.join(dir, 'pglite'));
  return dir;
}
