/**
 * Start-up time and idle memory of the server: `npm run bench:startup -- [--runs 3] [--idle 10]
 * [--command "node --enable-source-maps --initial-old-space-size=256 dist/src/main.js"]`.
 *
 * Each run starts the command in a fresh DATA_DIR (embedded PGlite, or the PostgreSQL and Redis of
 * DATABASE_URL / REDIS_URL when set: a fresh database each run), on a free port, and measures:
 * the time until `/readyz` answers 200 (start-up), the peak RSS during start-up (VmHWM, Linux), and
 * the RSS after `--idle` seconds of idling (VmRSS). The first run is a first start (the embedded
 * database is created and migrated); later runs start on the existing DATA_DIR (a restart), which
 * is what a deployment does most.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { freePort } from '../../src/net.js';
import { SERVER_HEAP_FLAGS } from '../../src/heap.js';

interface Options {
  runs: number;
  idleS: number;
  command: string;
}

function parse(argv: string[]): Options {
  // npm start's command (package.json; its heap flags: src/heap.ts)
  const o: Options = { runs: 3, idleS: 10, command: ['node', '--enable-source-maps', ...SERVER_HEAP_FLAGS, 'dist/src/main.js'].join(' ') };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i]!;
    const value = () => argv[++i] ?? '';
    if (flag === '--runs') o.runs = Math.max(1, Number(value()));
    else if (flag === '--idle') o.idleS = Math.max(1, Number(value()));
    else if (flag === '--command') o.command = value();
    else throw new Error(`unknown option ${flag}`);
  }
  return o;
}

const status = (pid: number, field: string): number => {
  const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : NaN;
};

async function main() {
  const o = parse(process.argv.slice(2));
  const dbUrl = process.env.DATABASE_URL;
  const dataDir = mkdtempSync(join(tmpdir(), 'sb-startup-'));
  let dbName: string | null = null;
  let env: NodeJS.ProcessEnv = { ...process.env, DATA_DIR: dataDir, LOG_LEVEL: 'warn' };
  if (dbUrl) {
    dbName = `sb_startup_${Date.now().toString(36)}`;
    const admin = new pg.Client({ connectionString: dbUrl });
    await admin.connect();
    await admin.query(`CREATE DATABASE ${dbName}`);
    await admin.end();
    const u = new URL(dbUrl);
    u.pathname = `/${dbName}`;
    env = { ...env, DATABASE_URL: u.toString() };
  }
  process.stdout.write(
    `bench:startup: ${o.command}\n  storage ${dbUrl ? 'PostgreSQL' : 'PGlite (embedded)'}, sessions ${process.env.REDIS_URL ? 'Redis' : 'in process'}; Node ${process.version}; idle ${o.idleS} s\n`,
  );
  process.stdout.write('  run          ready after   peak RSS (start)   RSS idle\n');
  try {
    for (let run = 1; run <= o.runs; run++) {
      const port = await freePort();
      const [cmd, ...args] = o.command.split(/\s+/);
      const started = performance.now();
      const child = spawn(cmd!, args, { env: { ...env, PORT: String(port) }, stdio: ['ignore', 'ignore', 'pipe'] });
      let stderr = '';
      child.stderr.on('data', (d) => (stderr += d));
      let readyMs = NaN;
      for (let i = 0; i < 600; i++) {
        try {
          const res = await fetch(`http://127.0.0.1:${port}/readyz`);
          if (res.ok) {
            readyMs = performance.now() - started;
            break;
          }
        } catch {
          // not listening yet
        }
        if (child.exitCode !== null) throw new Error(`the server exited (${child.exitCode}): ${stderr}`);
        await new Promise((r) => setTimeout(r, 50));
      }
      await new Promise((r) => setTimeout(r, o.idleS * 1000));
      const peak = status(child.pid!, 'VmHWM');
      const idle = status(child.pid!, 'VmRSS');
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
      const label = run === 1 ? 'first start' : `restart ${run - 1}`;
      process.stdout.write(`  ${label.padEnd(12)} ${`${(readyMs / 1000).toFixed(2)} s`.padStart(11)}   ${`${peak.toFixed(0)} MB`.padStart(16)}   ${`${idle.toFixed(0)} MB`.padStart(8)}\n`);
    }
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
    if (dbName && dbUrl) {
      const admin = new pg.Client({ connectionString: dbUrl });
      await admin.connect();
      await admin.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
      await admin.end();
    }
  }
}

await main();
