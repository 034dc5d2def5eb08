/** `npm run chat`: a chat script run as a command against a listening server, as CI runs it. */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { frontDeskWorkflow, sandboxAssistant, startCallingServer, type CallingServer } from '../helpers/calls.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';
import { buildDist, ROOT, scriptCommand } from '../helpers/built.js';

/** `npm run chat`'s command, on the compiled build (built once a run). */
const CHAT = scriptCommand('chat');
let s: CallingServer;
let tools: Receiver;
let dir: string;
beforeAll(async () => {
  [s] = await Promise.all([startCallingServer(), buildDist()]);
  tools = await startReceiver();
  dir = mkdtempSync(path.join(tmpdir(), 'sb-chat-'));
}, 300_000);
afterAll(async () => {
  await s?.close();
  await tools?.close();
  rmSync(dir, { recursive: true, force: true });
});

function runChat(args: string[], env: Record<string, string> = {}, input = '') {
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    const child = spawn(CHAT.cmd, [...CHAT.args, ...args], {
      cwd: ROOT,
      env: { ...process.env, SWITCHBOARD_URL: '', SWITCHBOARD_API_KEY: '', ...env },
    });
    child.stdin.end(input);
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

const writeScript = (name: string, script: unknown) => {
  const file = path.join(dir, name);
  writeFileSync(file, typeof script === 'string' ? script : JSON.stringify(script));
  return file;
};

const serverEnv = () => ({ SWITCHBOARD_URL: s.baseUrl, SWITCHBOARD_API_KEY: s.key });

describe('npm run chat', () => {
  it('runs the example script (sandbox providers) and cleans up what it created', async () => {
    const before = { assistants: (await s.api('GET', '/assistants')).json.assistants.length, workflows: (await s.api('GET', '/workflows')).json.workflows.length };
    const r = await runChat(['--script', 'examples/chat-front-desk.json'], serverEnv());
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^chat [0-9a-f-]{36} \(assistant [0-9a-f-]{36}, workflow [0-9a-f-]{36}\)$/m);
    expect(r.stdout).toContain('[greeting] assistant: Hello, this is Acme Dental.');
    expect(r.stdout).toContain('[greeting] customer:  I would like to book an appointment');
    expect(r.stdout).toContain('[booking] assistant: Let us book your appointment.');
    expect(r.stdout).toContain('[billing] assistant: I can help with your invoice.');
    expect(r.stdout).toContain('  ok    ended assistant-ended-call');
    expect(r.stdout).toMatch(/chat over: ended \(assistant-ended-call\); 10 expectations met\n$/);
    expect((await s.api('GET', '/assistants')).json.assistants.length).toBe(before.assistants);
    expect((await s.api('GET', '/workflows')).json.workflows.length).toBe(before.workflows);
  }, 60_000);

  it('existing assistant and workflow by flag, tool calls expected, and the first unmet expectation fails the run', async () => {
    const assistant = await s.api('POST', '/assistants', sandboxAssistant());
    const definition = {
      version: 1,
      entry_node: 'greeting',
      nodes: [
        { id: 'greeting', type: 'conversation', first_line: 'Acme parcels.' },
        { id: 'lookup', type: 'tool', tool_name: 'crm_fetch', url: tools.url, arguments: { order: 'A1' } },
        { id: 'shipped', type: 'conversation', first_line: 'Your parcel shipped.' },
      ],
      edges: [
        { from: 'greeting', to: 'lookup', description: 'the caller asks where their parcel is' },
        { from: 'lookup', to: 'shipped' },
        { from: 'shipped', to: 'greeting', description: 'the caller has another question' },
      ],
    };
    const workflow = await s.api('POST', '/workflows', { name: 'Parcels', definition });
    tools.setDefault((req) => ({ body: { results: [{ tool_call_id: JSON.parse(req.body).message.tool_calls[0].id, result: { status: 'shipped' } }] } }));
    const ids = ['--assistant', assistant.json.assistant.id, '--workflow', workflow.json.workflow.id, '--url', s.baseUrl, '--key', s.key];
    const good = writeScript('good.json', {
      start: { expect_node: 'greeting', expect_status: 'active' },
      turns: [{ say: 'Where is my parcel?', expect_tool_call: 'crm_fetch', expect_node: 'shipped', expect_reply_contains: 'shipped' }],
    });
    const ok = await runChat(['--script', good, ...ids]);
    expect(ok.stderr).toBe('');
    expect(ok.code).toBe(0);
    expect(ok.stdout).toContain('[lookup] tool crm_fetch: {"status":"shipped"}');
    expect(ok.stdout).toContain('  ok    tool crm_fetch called');

    const bad = writeScript('bad.json', {
      turns: [
        { say: 'Where is my parcel?', expect_node: 'greeting' },
        { say: 'never sent', expect_status: 'ended' },
      ],
    });
    const failed = await runChat(['--script', bad, ...ids]);
    expect(failed.code).toBe(1);
    expect(failed.stdout).toContain('  FAIL  node is "shipped", expected "greeting"');
    expect(failed.stdout).not.toContain('never sent');
    expect(failed.stderr).toBe('chat: turn 1: node is "shipped", expected "greeting"\n');
    // what it did not create, it does not delete
    expect((await s.api('GET', `/assistants/${assistant.json.assistant.id}`)).status).toBe(200);
  }, 60_000);

  it('expect_tool_call and expect_status unmet; an ended chat; API errors', async () => {
    const script = writeScript('ends.json', {
      assistant: sandboxAssistant(),
      workflow: { name: 'Front desk', definition: frontDeskWorkflow() },
      turns: [
        { say: 'I want to book an appointment', expect_tool_call: 'crm_fetch' },
      ],
    });
    const r = await runChat(['--script', script], serverEnv());
    expect(r.code).toBe(1);
    expect(r.stderr).toBe('chat: turn 1: tool crm_fetch not called\n');

    const refused = writeScript('refused.json', { assistant: { name: 'No voice', llm_config: { provider: 'sandbox' } }, turns: [{ say: 'hi' }] });
    const api = await runChat(['--script', refused], serverEnv());
    expect(api.code).toBe(1);
    expect(api.stderr).toMatch(/^chat: creating the assistant: HTTP 400 .*tts_config/);
  }, 60_000);

  it('with no script, chats interactively: the lines typed, the replies with their node, until the chat ends', async () => {
    const assistantId = await s.createAssistant(sandboxAssistant());
    const workflowId = await s.createWorkflow(frontDeskWorkflow());
    const r = await runChat(['--assistant', assistantId, '--workflow', workflowId], serverEnv(), 'I would like to book an appointment\n\nGoodbye, I am finished\nthis line comes after the end\n');
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout.split('\n')).toEqual([
      expect.stringMatching(/^chat [0-9a-f-]{36} \(assistant [0-9a-f-]{36}, workflow [0-9a-f-]{36}\): type the customer's lines$/),
      '[greeting] assistant: Hello, this is Acme Dental.',
      '[greeting] customer:  I would like to book an appointment',
      '[greeting] assistant: Sure thing.',
      '[booking] assistant: Let us book your appointment.',
      '[booking] customer:  Goodbye, I am finished',
      '[bye] assistant: Thank you for calling, goodbye.',
      'chat over: ended (assistant-ended-call)',
      '',
    ]);
    // Ctrl-D (the end of the input) leaves a chat that goes on
    const left = await runChat(['--assistant', assistantId, '--workflow', workflowId], serverEnv(), 'I would like to book an appointment\n');
    expect(left.code).toBe(0);
    expect(left.stdout).toMatch(/chat over: active\n$/);
    // a refused chat says why, each detail on its line
    const keyed = await s.createAssistant({ name: 'Needs a key', llm_config: { provider: 'openai' }, stt_config: { provider: 'sandbox' }, tts_config: { provider: 'sandbox', voice_id: 'sandbox' } });
    const refused = await runChat(['--assistant', keyed], serverEnv());
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/^chat: starting the chat: HTTP 400 Chat rejected: .*\n  - llm_config\.provider: provider "openai" .*needs OPENAI_API_KEY/);
    // no assistant named, and several to choose from: they are listed
    const which = await runChat([], serverEnv());
    expect(which.code).toBe(2);
    expect(which.stderr).toContain('give --assistant <id>');
    expect(which.stderr).toContain(`  ${assistantId}  Sandbox receptionist`);
  }, 60_000);

  it('bad usage and bad scripts are refused plainly', async () => {
    const usage = await runChat(['--script', 'examples/chat-front-desk.json']);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain('Usage: npm run chat');
    const notJson = await runChat(['--script', writeScript('x.json', 'turns: []')], serverEnv());
    expect(notJson.code).toBe(1);
    expect(notJson.stderr).toContain('x.json: ');
    const wrong = await runChat(['--script', writeScript('w.json', { turns: [{ say: 'hi', expect_nod: 'x' }] })], serverEnv());
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toContain('turns[0].expect_nod: unknown field');
    const down = await runChat(['--script', 'examples/chat-front-desk.json', '--url', 'http://127.0.0.1:9', '--key', 'sk_live_x']);
    expect(down.code).toBe(1);
    expect(down.stderr).toMatch(/cannot reach http:\/\/127\.0\.0\.1:9/);
    expect(JSON.parse(readFileSync(path.join(ROOT, 'examples/chat-front-desk.json'), 'utf8')).turns.length).toBeGreaterThan(0);
  }, 60_000);
});
