/**
 * The README's shell examples, from "Using the API" to "Webhooks", pasted in order into one shell
 * against a fresh organization on a real server (the first-hour promise, DECISIONS 19): each block
 * sets what the later ones use, a refusal stops the run (`set -e`, and `idOf` fails on an answer
 * without the id), and no answer is an error. The blocks that need another terminal (the Twilio
 * stand-in, `npm start` with its variables) are left out; `npm run call`, `npm run chat` and
 * `npm run test-suite` run their commands on the compiled build (built once a run), as npm would
 * after its build.
 */
import { spawn } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCallingServer, type CallingServer } from '../helpers/calls.js';
import { buildDist, ROOT, scriptCommand } from '../helpers/built.js';

/** A script's node command for the shell (its file absolute: the shell runs in a folder of its own). */
const command = (name: string) => {
  const { cmd, args } = scriptCommand(name);
  return [cmd, ...args].join(' ');
};
let s: CallingServer;
let dir: string;
beforeAll(async () => {
  [s] = await Promise.all([startCallingServer(), buildDist()]);
  dir = mkdtempSync(path.join(tmpdir(), 'sb-readme-'));
  cpSync(path.join(ROOT, 'examples'), path.join(dir, 'examples'), { recursive: true });
}, 300_000);
afterAll(async () => {
  await s?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** The ```sh blocks of the README between two headings, in order (indented ones too). */
function shellBlocks(from: string, to: string): string[] {
  const readme = readFileSync(path.join(ROOT, 'README.md'), 'utf8');
  const part = readme.slice(readme.indexOf(from), readme.indexOf(to));
  return [...part.matchAll(/^( *)```sh\n([\s\S]*?)^\1```$/gm)].map(([, indent, body]) =>
    body!.split('\n').map((l) => l.slice(indent!.length)).join('\n'),
  );
}

describe("the README's examples", () => {
  it('run in order, pasted into one shell, on a fresh start', { timeout: 240_000 }, async () => {
    const blocks = shellBlocks('## Using the API', '## Webhooks');
    expect(blocks.length).toBeGreaterThanOrEqual(8);
    const pasted = blocks.filter((b) => !b.includes('--standin') && !b.includes('npm start'));
    expect(blocks.length - pasted.length).toBe(1); // the stand-in's two terminals
    const { key } = await s.store.keys.createKey('README reader');
    const script = [
      'set -e -o pipefail',
      ...pasted.map((b) =>
        b
          .replace(/^KEY=sk_live_\.\.\..*$/gm, `KEY=${key}`)
          .replace(/^API=http:\/\/127\.0\.0\.1:3000$/gm, `API=${s.baseUrl}`)
          .replace(/npm run call --/g, command('call'))
          .replace(/npm run chat --/g, command('chat'))
          .replace(/npm run test-suite --/g, command('test-suite')),
      ),
    ].join('\n');
    expect(script).toContain(`KEY=${key}`);
    const run = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
      // the reader's folder holds the repository's examples; their server is where the commands look by default
      const child = spawn('bash', ['-c', script], { cwd: dir, env: { ...process.env, NODE_OPTIONS: '', SWITCHBOARD_URL: s.baseUrl, SWITCHBOARD_API_KEY: '' } });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d) => (stdout += d));
      child.stderr.on('data', (d) => (stderr += d));
      child.on('close', (code) => resolve({ code, stdout, stderr }));
    });
    const why = `stdout:\n${run.stdout}\nstderr:\n${run.stderr}`;
    expect(run.code, why).toBe(0);
    expect(run.stdout, why).not.toMatch(/"error":/);
    // what the examples made is there: the simulated call, the chat, the web call
    expect(run.stdout).toMatch(/call over: ended/);
    expect(run.stdout).toMatch(/call over: ended api-ended-call/); // the live-control example's call
    expect(run.stdout).toMatch(/5 tests: 5 passed, 0 failed/); // the test suite's
    expect(run.stdout).toContain('"node_id":"booking"');
    const calls = await s.app.inject({ method: 'GET', url: '/calls', headers: { authorization: `Bearer ${key}` } });
    expect(calls.json().calls.map((c: { type: string }) => c.type)).toEqual(expect.arrayContaining(['inbound_phone_call', 'web_call', 'outbound_phone_call']));
    const numbers = (await s.app.inject({ method: 'GET', url: '/numbers', headers: { authorization: `Bearer ${key}` } })).json().numbers;
    expect(numbers.map((n: { number: string }) => n.number).sort()).toEqual(['+14155550100', '+14155550101', '+14155550111']);
  });
});
