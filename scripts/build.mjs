/**
 * The compiled build: `npm run build` (also run by `npm install`, as `prepare`). TypeScript from
 * engine/ and src/ to dist/ with source maps (tsconfig.build.json, incremental); skipped when the
 * last compile started after every file and folder of engine/ and src/, the tsconfigs and the
 * lock file were last changed (tsc's own finding that nothing changed reads every declaration
 * first: some 7 s on a 2-core machine). Then the files the code reads beside itself: the database
 * migrations and the console's page, and the dashboard bundled by esbuild (src/dashboard/ into
 * dist/src/console/dashboard.js and .css). `npm start`, the image and the command-line tools run
 * dist/ with plain node.
 *
 * Plain JavaScript, so that it runs before anything is built. In an install without the
 * development dependencies (`npm install --omit=dev`, the image's runtime stage) there is no
 * TypeScript: it says so and does nothing, and the image copies dist/ from its build stage.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, readdirSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

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
/** The newest modification time in `path`: a file's, or a folder's and everything in it (a folder's changes when an entry is added, removed or renamed). */
const newestIn = (path) => {
  const st = statSync(path);
  if (!st.isDirectory()) return st.mtimeMs;
  return readdirSync(path).reduce((m, name) => Math.max(m, newestIn(join(path, name))), st.mtimeMs);
};
// written after each compile that succeeded, dated when that compile started (a file saved while
// it ran is newer, and compiled next time)
const compiled = join(root, 'dist', '.compiled');
const inputs = ['engine', 'src', 'tsconfig.json', 'tsconfig.build.json', 'package-lock.json'].map((p) => join(root, p)).filter((p) => existsSync(p));
if (!existsSync(compiled) || Math.max(...inputs.map(newestIn)) >= statSync(compiled).mtimeMs) {
  const compileStarted = new Date();
  const result = spawnSync(process.execPath, [tsc, '-p', join(root, 'tsconfig.build.json')], { stdio: 'inherit', cwd: root });
  if (result.status !== 0) process.exit(result.status ?? 1);
  writeFileSync(compiled, `${compileStarted.toISOString()}\n`);
  utimesSync(compiled, compileStarted, compileStarted);
}

// what the code reads from beside itself
for (const dir of ['src/store/migrations', 'src/console']) {
  const from = join(root, dir);
  if (existsSync(from)) cpSync(from, join(root, 'dist', dir), { recursive: true, filter: (p) => !p.endsWith('.ts') });
}

// the dashboard: src/dashboard/ bundled by esbuild beside its page (dist/src/console/), by the
// compiled src/console/bundle.ts, the same code a server run from its sources bundles it with
// (skipped when the bundle is newer than its sources and the lock file: the CLI commands build first)
const bundled = Date.now();
const outdir = join(root, 'dist', 'src', 'console');
const newest = (dir) =>
  readdirSync(dir, { withFileTypes: true }).reduce(
    (m, e) => Math.max(m, e.isDirectory() ? newest(join(dir, e.name)) : statSync(join(dir, e.name)).mtimeMs),
    0,
  );
const sourcesAt = Math.max(newest(join(root, 'src', 'dashboard')), statSync(join(root, 'package-lock.json')).mtimeMs, statSync(join(root, 'src', 'console', 'bundle.ts')).mtimeMs);
const built = join(outdir, 'dashboard.js');
if (!existsSync(built) || !existsSync(join(outdir, 'dashboard.css')) || statSync(built).mtimeMs < sourcesAt) {
  const { bundleDashboard } = await import(pathToFileURL(join(root, 'dist', 'src', 'console', 'bundle.js')).href);
  const files = await bundleDashboard({ outdir });
  if (!quiet) {
    const sizes = [...files].filter(([name]) => !name.endsWith('.txt')).map(([name, bytes]) => `${name} ${(bytes.length / 1024).toFixed(0)} KiB`);
    process.stdout.write(`build: dashboard bundled in ${((Date.now() - bundled) / 1000).toFixed(1)} s (${sizes.join(', ')})\n`);
  }
}
if (!quiet) process.stdout.write(`build: dist/ in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
