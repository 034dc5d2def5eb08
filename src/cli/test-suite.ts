/**
 * `npm run test-suite -- <suite id>` or `-- --file suite.json`: runs a test suite through the API
 * of any running deployment (DECISIONS 20), prints each test's result as it finishes (with the
 * first failed expectation and the transcript of a failed test) and a summary, and exits non-zero
 * when a test failed — for CI. A file is a `POST /test-suites` body that may create its assistant
 * and workflow (`assistant`, `workflow`); what the command creates it deletes afterwards.
 * Format: docs/test-suites.md.
 */
import { readFileSync } from 'node:fs';
import { basename } from 'node:path';
import { parseArgs } from 'node:util';
import { ErrorCodes, SwitchboardError } from '../../engine/errors.js';

const USAGE = `Usage: npm run test-suite -- <suite id> | --file <suite.json>
  [--url <server>]        default $SWITCHBOARD_URL, else http://127.0.0.1:3000
  [--key <API key>]       default $SWITCHBOARD_API_KEY
  [--test <name>]         run only this test (repeat for several)
  [--json]                print the finished run as JSON instead of the summary
Exits 0 when every test passed, 1 when one failed (or on an API error), 2 on bad usage.`;

class ApiFailure extends SwitchboardError {
  static override readonly codes = [ErrorCodes.CLI_API_FAILURE] as const;
  constructor(message: string) {
    super(ErrorCodes.CLI_API_FAILURE, message);
  }
}

interface Line {
  role: string;
  content: string;
  node_id: string | null;
  tool_name?: string;
}
interface Result {
  name: string;
  mode: string;
  status: string;
  passed: boolean | null;
  failure: string | null;
  transcript: Line[];
  judge: { passed: boolean; reason: string } | null;
  duration_ms: number | null;
  chat_id: string | null;
  call_id: string | null;
}
interface Run {
  id: string;
  status: string;
  summary: { total: number; passed: number; failed: number };
  results: Result[];
  duration_ms: number | null;
}

const out = (line = '') => process.stdout.write(`${line}\n`);
const seconds = (ms: number) => `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;

async function main(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        file: { type: 'string' },
        url: { type: 'string' },
        key: { type: 'string' },
        test: { type: 'string', multiple: true },
        json: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
    });
  } catch (err) {
    process.stderr.write(`test-suite: ${(err as Error).message}\n\n${USAGE}\n`);
    return 2;
  }
  const { values, positionals } = parsed;
  if (values.help) {
    out(USAGE);
    return 0;
  }
  const baseUrl = (values.url ?? process.env.SWITCHBOARD_URL ?? 'http://127.0.0.1:3000').replace(/\/+$/, '');
  const key = values.key ?? process.env.SWITCHBOARD_API_KEY;
  const suiteArg = positionals[0];
  const problem =
    positionals.length > 1
      ? `one suite at a time (got ${positionals.length})`
      : !suiteArg && !values.file
        ? 'a suite: its id, or --file <suite.json>'
        : suiteArg && values.file
          ? 'a suite id or --file, not both'
          : !key
            ? 'the API key: --key, or SWITCHBOARD_API_KEY'
            : null;
  if (problem) {
    process.stderr.write(`test-suite: needs ${problem}\n\n${USAGE}\n`);
    return 2;
  }
  const file = values.file ? readSuiteFile(values.file) : null;

  const api = async (method: string, path: string, body?: unknown): Promise<{ status: number; json: any }> => {
    let res: Response;
    try {
      res = await fetch(`${baseUrl}${path}`, {
        method,
        headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
    } catch (err) {
      throw new ApiFailure(`${method} ${path}: cannot reach ${baseUrl} (${(err as Error).message})`);
    }
    const text = await res.text();
    let json: any = null;
    try {
      json = text ? JSON.parse(text) : null;
    } catch {
      json = text;
    }
    return { status: res.status, json };
  };
  const expectStatus = (what: string, r: { status: number; json: any }, status: number) => {
    if (r.status !== status) {
      const details: string[] = Array.isArray(r.json?.details) ? r.json.details : [];
      const head = `${what}: HTTP ${r.status} ${r.json?.error ?? ''}${r.json?.message ? `: ${r.json.message}` : ''}`.trim();
      throw new ApiFailure(details.length > 0 ? `${head}\n  ${details.join('\n  ')}` : head);
    }
    return r.json;
  };

  const created: string[] = [];
  const started = Date.now();
  try {
    let suiteId = suiteArg;
    if (file) {
      const { assistant, workflow, ...body } = file.suite;
      if (assistant !== undefined) {
        body.assistant_id = expectStatus('creating the assistant', await api('POST', '/assistants', assistant), 201).assistant.id;
        created.unshift(`/assistants/${body.assistant_id as string}`);
      }
      if (workflow !== undefined) {
        body.workflow_id = expectStatus('creating the workflow', await api('POST', '/workflows', workflow), 201).workflow.id;
        created.unshift(`/workflows/${body.workflow_id as string}`);
      }
      body.name ??= file.name;
      suiteId = expectStatus('creating the suite', await api('POST', '/test-suites', body), 201).test_suite.id as string;
      created.unshift(`/test-suites/${suiteId}`);
    }
    const suite = expectStatus('reading the suite', await api('GET', `/test-suites/${suiteId}`), 200).test_suite;
    const only = values.test;
    const body = only && only.length > 0 ? { tests: only } : undefined;
    let run = expectStatus('starting the run', await api('POST', `/test-suites/${suiteId}/runs`, body), 202).run as Run;
    if (!values.json) {
      out(`suite ${suite.id} "${suite.name}": ${run.results.length} test${run.results.length === 1 ? '' : 's'} (assistant ${suite.assistant_id}, workflow ${suite.workflow_id ?? 'none'})`);
      out(`run ${run.id}`);
    }
    const shown = new Set<string>();
    const showFinished = () => {
      for (const r of run.results) {
        if (shown.has(r.name) || (r.status !== 'passed' && r.status !== 'failed')) continue;
        shown.add(r.name);
        if (!values.json) printResult(r);
      }
    };
    for (let wait = 50; run.status === 'running'; wait = Math.min(wait * 2, 1_000)) {
      showFinished();
      await new Promise((resolve) => setTimeout(resolve, wait));
      run = expectStatus('reading the run', await api('GET', `/test-suites/${suiteId}/runs/${run.id}`), 200).run as Run;
    }
    showFinished();
    if (values.json) out(JSON.stringify(run, null, 2));
    else {
      const { total, passed, failed } = run.summary;
      out(
        `${total} test${total === 1 ? '' : 's'}: ${passed} passed, ${failed} failed in ${seconds(Date.now() - started)}` +
          (run.duration_ms !== null ? ` (the run took ${seconds(run.duration_ms)} on the server)` : ''),
      );
    }
    return run.status === 'passed' ? 0 : 1;
  } catch (err) {
    if (err instanceof ApiFailure) {
      process.stderr.write(`test-suite: ${err.message}\n`);
      return 1;
    }
    throw err;
  } finally {
    for (const path of created) {
      const r = await api('DELETE', path).catch(() => null);
      if (r && r.status !== 204) process.stderr.write(`test-suite: could not delete ${path}: HTTP ${r.status}\n`);
    }
  }
}

/** A finished test: PASS or FAIL, and for a failure what failed, the judge's reason and the transcript. */
function printResult(r: Result) {
  const took = r.duration_ms === null ? '' : `  (${r.duration_ms} ms)`;
  out(`  ${r.passed ? 'PASS' : 'FAIL'}  ${r.name}${r.mode === 'voice' ? ' [voice]' : ''}${took}`);
  if (r.passed) return;
  if (r.failure) out(`        ${r.failure}`);
  if (r.judge && r.failure?.startsWith('judge:') !== true) out(`        judge: ${r.judge.passed ? 'pass' : 'fail'}: ${r.judge.reason}`);
  if (r.transcript.length > 0) {
    out(`        transcript (${r.chat_id ? `chat ${r.chat_id}` : r.call_id ? `call ${r.call_id}` : 'none kept'}):`);
    for (const l of r.transcript) {
      const who = l.role === 'assistant' ? 'assistant' : l.role === 'user' ? 'customer ' : `tool ${l.tool_name ?? '?'}`;
      out(`          [${l.node_id ?? '-'}] ${who}: ${l.content}`);
    }
  }
}

interface SuiteFile {
  name: string;
  suite: Record<string, unknown>;
}

function readSuiteFile(path: string): SuiteFile {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new Error(`${path}: ${(err as Error).message}`);
  }
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new Error(`${path}: not a test suite (a JSON object)`);
  const suite = raw as Record<string, unknown>;
  if (suite.assistant_id !== undefined && suite.assistant !== undefined) throw new Error(`${path}: assistant_id and assistant: give one`);
  if (suite.workflow_id !== undefined && suite.workflow !== undefined) throw new Error(`${path}: workflow_id and workflow: give one`);
  return { name: basename(path).replace(/\.json$/i, ''), suite };
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`test-suite: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
