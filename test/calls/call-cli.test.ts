/** `npm run call`: the caller simulator as a command, against a running server. */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ACCOUNT_SID, AUTH_TOKEN, startCallingServer, type CallingServer } from '../helpers/calls.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
let s: CallingServer;
let dir: string;
beforeAll(async () => {
  s = await startCallingServer();
  dir = mkdtempSync(path.join(tmpdir(), 'sb-call-'));
});
afterAll(async () => {
  await s?.close();
  rmSync(dir, { recursive: true, force: true });
});

function runCall(args: string[]) {
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/call.ts', ...args], { cwd: ROOT });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

const frontDesk = {
  version: 1,
  entry_node: 'greeting',
  nodes: [
    { id: 'greeting', type: 'conversation', first_line: 'Hello, this is Acme Dental.' },
    { id: 'bye', type: 'end', first_line: 'Thank you for calling, goodbye.' },
  ],
  edges: [{ from: 'greeting', to: 'bye', description: 'the caller says goodbye or is finished' }],
};

describe('npm run call', () => {
  it('plays a script against a running deployment and prints the conversation', async () => {
    const { number } = await s.setUpNumber({ definition: frontDesk });
    const script = path.join(dir, 'script.txt');
    writeFileSync(script, '# a short call\nexpect: Acme Dental\nquiet\nsay: That is all, goodbye.\nexpect: goodbye\n');
    const r = await runCall(['--number', number, '--script', script, '--url', s.baseUrl, '--auth-token', AUTH_TOKEN, '--account-sid', ACCOUNT_SID]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/connected \(call [0-9a-f-]{36}\)/);
    expect(r.stdout).toContain('assistant: Hello, this is Acme Dental.');
    expect(r.stdout).toContain('caller:    That is all, goodbye.');
    expect(r.stdout).toContain('assistant: Thank you for calling, goodbye.');
    expect(r.stdout).toContain('call over');
  }, 60_000);

  it('fails plainly on a bad script, missing options and a refused signature', async () => {
    const { number } = await s.setUpNumber({ definition: frontDesk });
    const wrong = path.join(dir, 'wrong.txt');
    writeFileSync(wrong, 'expect: Welcome to the moon\n');
    const base = ['--url', s.baseUrl, '--auth-token', AUTH_TOKEN, '--account-sid', ACCOUNT_SID];
    const bad = path.join(dir, 'bad.txt');
    writeFileSync(bad, 'shout: hello\n');
    const badScript = await runCall(['--number', number, '--script', bad, ...base]);
    expect(badScript.code).toBe(1);
    expect(badScript.stderr).toContain('line 1: unknown step "shout"');
    const usage = await runCall(['--number', number]);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain('Usage');
    const refused = await runCall(['--number', number, '--script', wrong, ...base.slice(0, 2), '--auth-token', 'wrong-token']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('403');
  }, 60_000);
});
