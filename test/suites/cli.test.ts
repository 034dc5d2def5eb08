/** `npm run test-suite`: a suite run as a command against a listening server, as CI runs it; its exit status and what it prints. */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { frontDeskWorkflow, sandboxAssistant, startCallingServer, type CallingServer } from '../helpers/calls.js';
import { buildDist, ROOT, scriptCommand } from '../helpers/built.js';

/** `npm run test-suite`'s command, on the compiled build (built once a run). */
const TEST_SUITE = scriptCommand('test-suite');
let s: CallingServer;
let dir: string;
beforeAll(async () => {
  [s] = await Promise.all([startCallingServer(), buildDist()]);
  dir = mkdtempSync(path.join(tmpdir(), 'sb-suite-cli-'));
}, 300_000);
afterAll(async () => {
  await s?.close();
  rmSync(dir, { recursive: true, force: true });
});

function runCommand(args: string[], env: Record<string, string> = {}) {
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    const child = spawn(TEST_SUITE.cmd, [...TEST_SUITE.args, ...args], {
      cwd: ROOT,
      env: { ...process.env, SWITCHBOARD_URL: '', SWITCHBOARD_API_KEY: '', ...env },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

const serverEnv = () => ({ SWITCHBOARD_URL: s.baseUrl, SWITCHBOARD_API_KEY: s.key });
const writeFile = (name: string, content: unknown) => {
  const file = path.join(dir, name);
  writeFileSync(file, typeof content === 'string' ? content : JSON.stringify(content));
  return file;
};
const counts = async () => ({
  assistants: (await s.api('GET', '/assistants')).json.assistants.length,
  workflows: (await s.api('GET', '/workflows')).json.workflows.length,
  suites: (await s.api('GET', '/test-suites')).json.test_suites.length,
});

describe('npm run test-suite', () => {
  it('runs the example suite (sandbox providers): every test passes, exit 0, and what it created is deleted', async () => {
    const before = await counts();
    const r = await runCommand(['--file', 'examples/test-suite-front-desk.json'], serverEnv());
    expect(r.stderr).toBe('');
    expect(r.code, r.stdout).toBe(0);
    expect(r.stdout).toMatch(/^suite [0-9a-f-]{36} "Front desk \(sandbox\)": \d+ tests \(assistant [0-9a-f-]{36}, workflow [0-9a-f-]{36}\)$/m);
    expect(r.stdout).toMatch(/^run [0-9a-f-]{36}$/m);
    expect(r.stdout).toMatch(/^ {2}PASS {2}books an appointment {2}\(\d+ ms\)$/m);
    expect(r.stdout).toMatch(/^ {2}PASS {2}a simulated caller books {2}\(\d+ ms\)$/m);
    expect(r.stdout).toMatch(/^ {2}PASS {2}books by voice \[voice\] {2}\(\d+ ms\)$/m);
    expect(r.stdout).not.toContain('FAIL');
    expect(r.stdout).toMatch(/^(\d+) tests: \1 passed, 0 failed in [\d.]+ s \(the run took [\d.]+ s on the server\)\n$/m);
    expect(await counts()).toEqual(before);
  }, 120_000);

  it('a stored suite by id: a failing test exits 1 with its first failed expectation and transcript; --test runs one; --json prints the run', async () => {
    const assistantId = await s.createAssistant(sandboxAssistant());
    const workflowId = await s.createWorkflow(frontDeskWorkflow());
    const created = await s.api('POST', '/test-suites', {
      name: 'Mixed',
      assistant_id: assistantId,
      workflow_id: workflowId,
      tests: [
        { name: 'good', script: [{ say: 'I want to book an appointment', expect_node: 'booking' }] },
        { name: 'bad', script: [{ say: 'I want to book an appointment', expect_node: 'bye' }] },
      ],
    });
    expect(created.status).toBe(201);
    const id = created.json.test_suite.id as string;

    const failed = await runCommand([id], serverEnv());
    expect(failed.code).toBe(1);
    expect(failed.stderr).toBe('');
    expect(failed.stdout).toMatch(/^ {2}PASS {2}good {2}\(\d+ ms\)$/m);
    expect(failed.stdout).toMatch(/^ {2}FAIL {2}bad {2}\(\d+ ms\)$/m);
    expect(failed.stdout).toContain('        script[0].expect_node: node is "booking", expected "bye"');
    expect(failed.stdout).toMatch(/^ {8}transcript \(chat [0-9a-f-]{36}\):$/m);
    expect(failed.stdout).toContain('          [greeting] customer : I want to book an appointment');
    expect(failed.stdout).toContain('          [booking] assistant: Let us book your appointment.');
    expect(failed.stdout).toMatch(/^2 tests: 1 passed, 1 failed in /m);

    const one = await runCommand([id, '--test', 'good', '--url', s.baseUrl, '--key', s.key]);
    expect(one.code).toBe(0);
    expect(one.stdout).toMatch(/^1 test: 1 passed, 0 failed in /m);
    expect(one.stdout).not.toMatch(/^ {2}(PASS|FAIL) {2}bad/m);

    const json = await runCommand([id, '--test', 'bad', '--json'], serverEnv());
    expect(json.code).toBe(1);
    const run = JSON.parse(json.stdout);
    expect(run).toMatchObject({ status: 'failed', summary: { total: 1, failed: 1 }, results: [{ name: 'bad', passed: false }] });
    // a suite it did not create it does not delete
    expect((await s.api('GET', `/test-suites/${id}`)).status).toBe(200);
  }, 120_000);

  it('a suite the API refuses: exit 1 with every problem; bad usage: exit 2; an unreachable server: exit 1', async () => {
    const before = await counts();
    const refused = writeFile('refused.json', {
      assistant: sandboxAssistant(),
      workflow: { name: 'Desk', definition: frontDeskWorkflow() },
      tests: [{ name: 'a', script: [{ expect_node: 'attic' }] }, { name: 'b' }],
    });
    const r = await runCommand(['--file', refused], serverEnv());
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(
      'test-suite: creating the suite: HTTP 400 Invalid request: The test suite is not valid.\n' +
        '  tests[0].script[0].expect_node: unknown node "attic" (nodes: "greeting", "booking", "bye")\n' +
        '  tests[1]: a test needs either `script` or `caller` (not both)\n',
    );
    // the assistant and workflow it made for the suite are gone again
    expect(await counts()).toEqual(before);

    const usage = await runCommand(['--file', 'examples/test-suite-front-desk.json']);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain('needs the API key');
    expect(usage.stderr).toContain('Usage: npm run test-suite');
    expect((await runCommand([], serverEnv())).code).toBe(2);
    expect((await runCommand(['a', 'b'], serverEnv())).code).toBe(2);
    expect((await runCommand(['--nope'], serverEnv())).code).toBe(2);

    const notJson = await runCommand(['--file', writeFile('x.json', 'tests: []')], serverEnv());
    expect(notJson.code).toBe(1);
    expect(notJson.stderr).toMatch(/^test-suite: .*x\.json: /);

    const unknown = await runCommand(['00000000-0000-4000-8000-000000000000'], serverEnv());
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/^test-suite: reading the suite: HTTP 404 Not found/);

    const down = await runCommand(['--file', 'examples/test-suite-front-desk.json', '--url', 'http://127.0.0.1:9', '--key', 'sk_live_x']);
    expect(down.code).toBe(1);
    expect(down.stderr).toMatch(/cannot reach http:\/\/127\.0\.0\.1:9/);
  }, 120_000);
});
