/**
 * `npm run call`: the caller simulator as a command, against a running server; and with
 * `--standin`, the Twilio stand-in as a long-lived command that a server dials through.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ACCOUNT_SID, AUTH_TOKEN, eventually, sandboxAssistant, startCallingServer, type CallingServer } from '../helpers/calls.js';
import { freePort } from '../../src/net.js';

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
    // no key or address from the environment: each case gives its own
    const env = { ...process.env, SWITCHBOARD_API_KEY: '', SWITCHBOARD_URL: '' };
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/call.ts', ...args], { cwd: ROOT, env });
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
    // without the API key it cannot ask the server why the call ended, and says how to
    expect(r.stdout).toMatch(/call over: \(give the API key, --key or SWITCHBOARD_API_KEY, to see why it ended\)/);
  }, 60_000);

  it('with the API key, prints why the call ended as the server recorded it', async () => {
    const { number } = await s.setUpNumber({ definition: frontDesk });
    const script = path.join(dir, 'ended.txt');
    writeFileSync(script, 'expect: Acme Dental\nquiet\nsay: That is all, goodbye.\nexpect: goodbye\n');
    const r = await runCall(['--number', number, '--script', script, '--url', s.baseUrl, '--auth-token', AUTH_TOKEN, '--account-sid', ACCOUNT_SID, '--key', s.key]);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/call over: ended assistant-ended-call\n/);
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
    // what is missing, said first: the script, and the auth token
    expect(usage.stderr.split('\n')[0]).toBe('missing: --script <file> (what the caller says); --auth-token <the Twilio auth token set on the account>, or TWILIO_AUTH_TOKEN');
    const noToken = await runCall(['--number', number, '--script', wrong]);
    expect(noToken.code).toBe(2);
    expect(noToken.stderr.split('\n')[0]).toBe('missing: --auth-token <the Twilio auth token set on the account>, or TWILIO_AUTH_TOKEN');
    const refused = await runCall(['--number', number, '--script', wrong, ...base.slice(0, 2), '--auth-token', 'wrong-token']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('403');
  }, 60_000);

  it('--web: a web call played from the terminal, and the API\'s refusal shown as it is', async () => {
    const { assistantId, workflowId } = await s.setUpNumber({ definition: frontDesk });
    const script = path.join(dir, 'web.txt');
    writeFileSync(script, 'expect: Acme Dental\nsay: That is all, goodbye.\nexpect: goodbye\n');
    const web = ['--web', '--assistant', assistantId, '--workflow', workflowId!, '--script', script, '--url', s.baseUrl];
    const r = await runCall([...web, '--key', s.key]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/connected \(web call [0-9a-f-]{36}\)/);
    // what satisfied an expect: is printed before the next step's line
    const lines = r.stdout.split('\n');
    const heard = lines.findIndex((l) => l.includes('assistant: Hello, this is Acme Dental.'));
    const said = lines.findIndex((l) => l.includes('caller:    That is all, goodbye.'));
    expect(heard).toBeGreaterThan(-1);
    expect(said).toBeGreaterThan(heard);
    expect(r.stdout).toContain('assistant: Thank you for calling, goodbye.');
    const refused = await runCall([...web, '--key', 'sk_live_not-a-key']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('POST /calls/web: 401');
    const noKey = await runCall(web);
    expect(noKey.code).toBe(2);
    expect(noKey.stderr).toContain('--web needs the API key');
  }, 60_000);
});

/** `npm run call -- --standin …` as a long-lived child process. */
function startStandInCli(args: string[]) {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/call.ts', '--standin', ...args], { cwd: ROOT });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => (stdout += d));
  child.stderr.on('data', (d) => (stderr += d));
  const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  return {
    get stdout() {
      return stdout;
    },
    get stderr() {
      return stderr;
    },
    printed: (what: string, pattern: RegExp, timeoutMs = 20_000) => eventually(what, () => pattern.exec(stdout), timeoutMs),
    /** Ctrl-C's twin: SIGTERM, then the exit code. */
    async stop() {
      if (child.exitCode === null) child.kill('SIGTERM');
      return exited;
    },
  };
}

/** A calling server whose TWILIO_API_BASE is the stand-in at `port`, with credentials it accepts. */
async function serverDialingThrough(port: number) {
  const server = await startCallingServer({ TWILIO_API_BASE: `http://127.0.0.1:${port}` });
  // without `accounts` the stand-in takes any credentials and signs callbacks with the token
  const account = await server.api('PATCH', '/account', {
    telephony: { twilio: { account_sid: `AC${'0'.repeat(32)}`, auth_token: 'any-token-1234' } },
  });
  expect(account.status).toBe(200);
  return server;
}

const callSidOf = async (server: CallingServer, callId: string) => {
  const logged = await eventually('the call to end in the log', async () => {
    const c = await server.store.calls.get(server.orgId, callId);
    return c?.status === 'ended' ? c : null;
  });
  return { sid: logged.transport_ids.call_sid!, ended_reason: logged.ended_reason, answered_by: logged.answered_by };
};

describe('npm run call -- --standin', () => {
  it('runs the Twilio stand-in that a server dials through, and prints each call: placed, heard, ended', async () => {
    const port = await freePort();
    const cli = startStandInCli(['--port', String(port)]);
    let server: CallingServer | null = null;
    try {
      await cli.printed('the startup line', new RegExp(`TWILIO_API_BASE=http://127\\.0\\.0\\.1:${port}\\b`));
      server = await serverDialingThrough(port);
      const { numberId, number } = await server.setUpNumber({
        assistant: sandboxAssistant({ speech_config: { first_message_outbound: 'Hi {{customer.name}}, a reminder of your visit on {{appointment}}.' } }),
      });
      const placed = await server.api('POST', '/calls', {
        number_id: numberId,
        customer: { number: '+14155550123', name: 'Ada' },
        variables: { appointment: 'Tuesday at 3 pm' },
      });
      expect(placed.status).toBe(201);
      const { sid, ended_reason } = await callSidOf(server, placed.json.call.id);
      expect(sid).toMatch(/^CA[0-9a-f]{32}$/);
      // the callee listened, said goodbye, listened and hung up
      expect(ended_reason).toBe('customer-ended-call');
      await cli.printed('the end of the call', new RegExp(`call ${sid} to \\+14155550123 answered by a person; ended completed after \\d+ s, the callee hung up`));
      await cli.printed('the conversation', /said: +Thank you, goodbye\.\n.*heard: +Okay, I understand/);
      expect(cli.stdout).toContain(`call ${sid} to +14155550123 from ${number}\n`);
      expect(cli.stdout).toMatch(/heard: +Hi Ada, a reminder of your visit on Tuesday at 3 pm\.\n/);
    } finally {
      await server?.close();
      const code = await cli.stop();
      expect(cli.stderr).toBe('');
      expect(code).toBe(0);
      expect(cli.stdout).toContain('SIGTERM: stopping the stand-in');
    }
  }, 60_000);

  it('plays a voicemail (greeting, beep, recording) and a person\'s script', async () => {
    const port = await freePort();
    const voicemail = startStandInCli(['--port', String(port), '--callee', 'voicemail', '--greeting', 'This is Sam, leave a message.']);
    let server: CallingServer | null = null;
    try {
      await voicemail.printed('the startup line', /every number it calls: a voicemail/);
      server = await serverDialingThrough(port);
      const { numberId } = await server.setUpNumber({
        assistant: sandboxAssistant({ first_message: 'Hello, this is Acme Dental.', voicemail_detection: true, voicemail_message: 'Please call Acme Dental back.' }),
      });
      const placed = await server.api('POST', '/calls', { number_id: numberId, customer: { number: '+14155550177' } });
      expect(placed.status).toBe(201);
      const { sid, ended_reason, answered_by } = await callSidOf(server, placed.json.call.id);
      expect([ended_reason, answered_by]).toEqual(['voicemail', 'machine']);
      await voicemail.printed('the end of the call', new RegExp(`call ${sid} to \\+14155550177 answered by a voicemail \\(AnsweredBy machine_end_beep\\); ended completed`));
      await voicemail.printed('the recording', /played: +This is Sam, leave a message\.\n(.*\n)*? +played: +\(beep\)\n(.*\n)*? +recorded: +Please call Acme Dental back\./);
      expect(await voicemail.stop()).toBe(0);

      // the same server, now through a stand-in whose person plays a script
      const script = path.join(dir, 'callee.txt');
      writeFileSync(script, 'expect: Hello\nquiet\npress: 1\nsay: I will be there\nexpect: understand\nhangup\n');
      const person = startStandInCli(['--port', String(port), '--script', script]);
      try {
        await person.printed('the startup line', /every number it calls: a person playing/);
        const again = await server.api('POST', '/calls', { number_id: numberId, customer: { number: '+14155550188' } });
        expect(again.status).toBe(201);
        const { sid: sid2 } = await callSidOf(server, again.json.call.id);
        await person.printed('the end of the call', new RegExp(`call ${sid2} to \\+14155550188 answered by a person \\(AnsweredBy human\\); ended completed after \\d+ s, the callee hung up`));
        expect(person.stdout).toMatch(/pressed: +1\n +said: +I will be there\n +heard: +Okay, I understand/);
      } finally {
        expect(await person.stop()).toBe(0);
      }
    } finally {
      await server?.close();
      await voicemail.stop();
    }
  }, 90_000);

  it('--carrier telnyx: the Telnyx stand-in prints its public key; a server with it in its account dials through it', async () => {
    const port = await freePort();
    const cli = startStandInCli(['--carrier', 'telnyx', '--port', String(port)]);
    let server: CallingServer | null = null;
    try {
      const startup = await cli.printed('the startup line', /"public_key": "([A-Za-z0-9+/]{43}=)"/);
      expect(cli.stdout).toContain(`TELNYX_API_BASE=http://127.0.0.1:${port}`);
      server = await startCallingServer({ TELNYX_API_BASE: `http://127.0.0.1:${port}` });
      const account = await server.api('PATCH', '/account', { telnyx: { api_key: 'KEY_any_key_at_all', public_key: startup[1], connection_id: 'any-connection' } });
      expect(account.status).toBe(200);
      const { numberId, number } = await server.setUpNumber({
        provider: 'telnyx',
        assistant: sandboxAssistant({ speech_config: { first_message_outbound: 'Hi {{customer.name}}, this is Acme.' } }),
      });
      const placed = await server.api('POST', '/calls', { number_id: numberId, customer: { number: '+14155550166', name: 'Bo' } });
      expect(placed.status).toBe(201);
      const logged = await eventually('the call to end in the log', async () => {
        const c = await server!.store.calls.get(server!.orgId, placed.json.call.id);
        return c?.status === 'ended' ? c : null;
      });
      expect(logged.ended_reason).toBe('customer-ended-call');
      const ccid = logged.transport_ids.call_control_id!;
      expect(ccid).toMatch(/^v3:/);
      expect(cli.stdout).toContain(`call ${ccid} to +14155550166 from ${number}\n`);
      await cli.printed('the end of the call', new RegExp(`call ${ccid} to \\+14155550166 answered by a person; ended normal_clearing after \\d+ s, the callee hung up`));
      await cli.printed('the conversation', /heard: +Hi Bo, this is Acme\.\n.*said: +Thank you, goodbye\./);
    } finally {
      await server?.close();
      expect(await cli.stop()).toBe(0);
      expect(cli.stderr).toBe('');
    }
  }, 60_000);

  it('refuses a callee it does not know, and a script for a voicemail', async () => {
    const unknown = await runCall(['--standin', '--callee', 'martian']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('--callee must be one of person, voicemail, busy, no-answer, failed');
    const misplaced = await runCall(['--standin', '--callee', 'voicemail', '--script', 'call.txt']);
    expect(misplaced.code).toBe(2);
    expect(misplaced.stderr).toContain('--script is for a person callee');
    const carrier = await runCall(['--standin', '--carrier', 'vonage']);
    expect(carrier.code).toBe(2);
    expect(carrier.stderr).toContain('--carrier must be twilio or telnyx, not vonage');
  }, 30_000);
});
