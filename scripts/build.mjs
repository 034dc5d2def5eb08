/**
 * The compiled build: `npm run build` (also run by `npm install`, as `prepare`). TypeScript from
 * engine/ and src/ to dist/ with source maps (tsconfig.build.json, incremental: a second build with
 * nothing changed takes a moment), then the files the code reads beside itself: the database
 * migrations and the console's page. `npm start`, the image and the command-line tools run dist/
 * with plain node.
 *
 * Plain JavaScript, so that it runs before anything is built. In an install without the
 * development dependencies (`npm install --omit=dev`, the image's runtime stage) there is no
 * TypeScript: it says so and does nothing, and the image copies dist/ from its build stage.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
// --quiet: nothing on stdout unless it fails (the command-line tools print their own output there)
const quiet = process.argv.includes('--quiet');
const require = createRequire(import.meta.url);

let tsc;
try {
  tsc = require.resolve('typescript/bin/tsc');
} catch {
  if (!quiet) process.stdout.write('build: TypeScript is not installed (a production install); dist/ is not built here\n');
  process.exit(0);
}

const started = Date.now();
const result = spawnSync(process.execPath, [tsc, '-p', join(root, 'tsconfig.build.json')], { stdio: 'inherit', cwd: root });
if (result.status !== 0) process.exit(result.status ?? 1);

// what the code reads from beside itself
for (const dir of ['src/store/migrations', 'src/console']) {
  const from = join(root, dir);
  if (existsSync(from)) cpSync(from, join(root, 'dist', dir), { recursive: true, filter: (p) => !p.endsWith('.ts') });
}
if (!quiet) process.stdout.write(`build: dist/ in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
