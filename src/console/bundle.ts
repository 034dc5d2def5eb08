/**
 * The dashboard's bundle (DECISIONS 19, docs/dashboard.md): `src/dashboard/` (Preact and htm
 * pages, Cytoscape and dagre for the graph) made into one script and one stylesheet by esbuild.
 * `scripts/build.mjs` writes it beside the page in dist/ (`npm install`, `npm start` and the image
 * build run it); a server started from the sources (the tests, through tsx) bundles it in memory
 * at its first request instead. esbuild is a development dependency: a production install never
 * loads it, since its dist/ has the files.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { PACKAGE_ROOT } from '../package-root.js';

/** The files of the bundle, by the name they are served under in /console/. */
export const BUNDLE_FILES = ['dashboard.js', 'dashboard.css', 'dashboard.js.LEGAL.txt'] as const;
export type BundleFile = (typeof BUNDLE_FILES)[number];

export const DASHBOARD_SOURCES = join(PACKAGE_ROOT, 'src', 'dashboard');

/** Bundles the dashboard: its files' bytes by name (and written into `outdir` when given). */
export async function bundleDashboard(options: { outdir?: string } = {}): Promise<Map<BundleFile, Buffer>> {
  if (!existsSync(join(DASHBOARD_SOURCES, 'dashboard.js'))) {
    throw new Error(`the dashboard's sources are not at ${DASHBOARD_SOURCES} (a production install has the bundle in dist/ instead)`);
  }
  const esbuild = await import('esbuild');
  const outdir = options.outdir ?? join(PACKAGE_ROOT, 'dist', 'src', 'console');
  const result = await esbuild.build({
    entryPoints: [join(DASHBOARD_SOURCES, 'dashboard.js'), join(DASHBOARD_SOURCES, 'dashboard.css')],
    bundle: true,
    minify: true,
    format: 'iife',
    target: ['es2020', 'chrome100', 'firefox100', 'safari15'],
    outdir,
    entryNames: '[name]',
    legalComments: 'linked',
    define: { 'process.env.NODE_ENV': '"production"' },
    write: false,
    logLevel: 'silent',
    absWorkingDir: PACKAGE_ROOT,
  });
  const files = new Map<BundleFile, Buffer>();
  for (const file of result.outputFiles) {
    const name = file.path.slice(file.path.lastIndexOf('/') + 1).replace(/^.*[\\/]/, '') as BundleFile;
    if (BUNDLE_FILES.includes(name)) files.set(name, Buffer.from(file.contents));
  }
  for (const name of BUNDLE_FILES.slice(0, 2)) if (!files.has(name)) throw new Error(`esbuild made no ${name}`);
  if (options.outdir) {
    const { mkdirSync, writeFileSync } = await import('node:fs');
    mkdirSync(options.outdir, { recursive: true });
    for (const [name, bytes] of files) writeFileSync(join(options.outdir, name), bytes);
  }
  return files;
}
