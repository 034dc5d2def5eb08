/** The server's heap settings (src/heap.ts): what `npm start` and the image run with. */
import { readFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { collectStartupGarbage, SERVER_HEAP_FLAGS } from '../../src/heap.js';

const packageJson = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { scripts: Record<string, string> };

describe('the server heap flags', () => {
  it('are on the command of npm start (the image runs the same command: dockerfile.test.ts)', () => {
    const start = packageJson.scripts.start!.split(/\s+/);
    for (const flag of SERVER_HEAP_FLAGS) expect(start.slice(1, start.indexOf('dist/src/main.js'))).toContain(flag);
  });

  it('and on bench:calls, whose process hosts the measured server', () => {
    const bench = packageJson.scripts['bench:calls']!.split(/\s+/);
    for (const flag of SERVER_HEAP_FLAGS) expect(bench).toContain(flag);
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

describe('collectStartupGarbage', () => {
  it('runs a full collection that frees what nothing holds, and leaves no gc on the globals', () => {
    // a child process without --expose-gc, as the server runs: a weakly held object is gone after it
    const script = `
      import('${new URL('../../src/heap.ts', import.meta.url).href}').then(async ({ collectStartupGarbage }) => {
        let held = { big: new Array(1e5).fill(1) };
        const ref = new WeakRef(held);
        held = null;
        await new Promise((r) => setTimeout(r, 0));
        const ran = collectStartupGarbage();
        console.log(JSON.stringify({ ran, freed: ref.deref() === undefined, gcGlobal: typeof globalThis.gc }));
      });`;
    const r = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { encoding: 'utf8' });
    expect(r.stderr).toBe('');
    expect(JSON.parse(r.stdout.trim())).toEqual({ ran: true, freed: true, gcGlobal: 'undefined' });
  });

  it('says so in this process too', () => {
    const before = typeof (globalThis as { gc?: unknown }).gc;
    expect(collectStartupGarbage()).toBe(true);
    expect(typeof (globalThis as { gc?: unknown }).gc).toBe(before);
  });
});
