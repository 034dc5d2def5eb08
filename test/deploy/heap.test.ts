/** The server's heap settings (src/heap.ts): what `npm start` and the image run with. */
import { readFileSync, rmSync } from 'node:fs';
import { spawn, spawnSync } from 'node:child_process';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { collectStartupGarbage, SERVER_HEAP_FLAGS } from '../../src/heap.js';
import { buildDist, madeDataDir, ROOT, scriptCommand } from '../helpers/built.js';

// the children below run the compiled build, as the server does
beforeAll(() => buildDist(), 300_000);
const packageJson = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };

/** The Node options of a script's command: what comes between `node` and the first non-option. */
const nodeOptions = (script: string): string[] => {
  const words = script.split(/\s+/);
  expect(words[0]).toBe('node');
  const out: string[] = [];
  for (let i = 1; i < words.length && words[i]!.startsWith('--'); i++) {
    out.push(words[i]!);
    if (words[i] === '--import') out.push(words[++i]!);
  }
  return out;
};

describe('the server heap flags', () => {
  it('are Node options of npm start (the image runs the same command: dockerfile.test.ts)', () => {
    for (const flag of SERVER_HEAP_FLAGS) expect(nodeOptions(packageJson.scripts.start!)).toContain(flag);
  });

  it('and of bench:calls, whose process hosts the measured server', () => {
    for (const flag of SERVER_HEAP_FLAGS) expect(nodeOptions(packageJson.scripts['bench:calls']!)).toContain(flag);
  });

  it('and of the server CI starts (.ci/run)', () => {
    const line = readFileSync(path.join(ROOT, '.ci/run'), 'utf8').split('\n').find((l) => l.includes('dist/src/main.js'))!;
    for (const flag of SERVER_HEAP_FLAGS) expect(line).toContain(` ${flag} `);
  });

  it('are flags this Node takes on its command line', () => {
    const r = spawnSync(process.execPath, [...SERVER_HEAP_FLAGS, '-e', 'process.exit(0)'], { encoding: 'utf8' });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
  });

  it('would be refused in NODE_OPTIONS (why they are on the command)', () => {
    const r = spawnSync(process.execPath, ['-e', 'process.exit(0)'], { encoding: 'utf8', env: { ...process.env, NODE_OPTIONS: SERVER_HEAP_FLAGS.join(' ') } });
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(/not allowed in NODE_OPTIONS/);
  });
});

/** Runs `body` (module code with `collectStartupGarbage` in scope) in a fresh Node; its JSON line. */
function inChild(body: string, nodeArgs: string[] = []): unknown {
  const script = `
    import('${pathToFileURL(path.join(ROOT, 'dist/src/heap.js')).href}').then(async ({ collectStartupGarbage }) => {
      const { runInNewContext } = await import('node:vm');
      ${body}
    });`;
  const r = spawnSync(process.execPath, [...nodeArgs, '--input-type=module', '-e', script], { encoding: 'utf8' });
  expect(r.stderr).toBe('');
  expect(r.status).toBe(0);
  return JSON.parse(r.stdout.trim());
}

describe('collectStartupGarbage', () => {
  it('runs a full collection that frees what nothing holds, and leaves no gc anywhere', () => {
    // a process without --expose-gc, as the server runs: a weakly held object is gone after it
    const out = inChild(`
      let held = { big: new Array(1e5).fill(1) };
      const ref = new WeakRef(held);
      held = null;
      await new Promise((r) => setTimeout(r, 0));
      const ran = collectStartupGarbage();
      console.log(JSON.stringify({ ran, freed: ref.deref() === undefined, here: typeof globalThis.gc, later: runInNewContext('typeof gc') }));`);
    expect(out).toEqual({ ran: true, freed: true, here: 'undefined', later: 'undefined' });
  });

  it('does nothing where V8 flags are frozen (changing one would abort the process)', () => {
    const out = inChild(`console.log(JSON.stringify({ ran: collectStartupGarbage() }));`, ['--freeze-flags-after-init']);
    expect(out).toEqual({ ran: false });
  });

  it('says so in this process too', () => {
    const before = typeof (globalThis as { gc?: unknown }).gc;
    expect(collectStartupGarbage()).toBe(true);
    expect(typeof (globalThis as { gc?: unknown }).gc).toBe(before);
  });

  it('is what the server runs before it serves (it warns when it cannot)', async () => {
    const dataDir = await madeDataDir('sb-heap-');
    const env: NodeJS.ProcessEnv = { ...process.env, DATA_DIR: dataDir, PORT: '0', SIP_PORT: '0', LOG_LEVEL: 'warn' };
    delete env.DATABASE_URL;
    delete env.REDIS_URL;
    // frozen flags: the collection cannot run, and the server says so before its banner (npm start's command otherwise)
    const start = scriptCommand('start', ['--freeze-flags-after-init']);
    const child = spawn(start.cmd, start.args, { cwd: ROOT, env });
    try {
      const stdout = await new Promise<string>((resolve, reject) => {
        let out = '';
        child.stdout.on('data', (d) => {
          out += d;
          if (out.includes('API docs')) resolve(out);
        });
        child.on('exit', (code) => reject(new Error(`server exited ${code}: ${out}`)));
      });
      const warned = stdout.indexOf('could not collect start-up garbage');
      expect(warned).toBeGreaterThanOrEqual(0);
      expect(warned).toBeLessThan(stdout.indexOf('serving on'));
    } finally {
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
      rmSync(dataDir, { recursive: true, force: true });
    }
  }, 60_000);
});
