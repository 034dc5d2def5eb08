/**
 * `npm run chat -- --script <file.json>`: chats with an assistant through the API of any running
 * deployment, turn by turn from a script with expectations, and exits non-zero at the first one
 * not met — a workflow's test for CI. The script may create its assistant and workflow (they are
 * deleted afterwards) or name existing ones. Format: docs/chats.md.
 *
 * `npm run chat` with no script is interactive: each line typed is the customer's message, and
 * the assistant's replies come back with the node they were said in, until the chat ends (or
 * Ctrl-D). It chats with --assistant (the organization's only assistant when it has one) and
 * --workflow when given.
 */
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import { z } from 'zod';
import { formatZodIssues } from '../../engine/validate.js';
import { ErrorCodes, SwitchboardError } from '../../engine/errors.js';

const USAGE = `Usage: npm run chat -- --script <file.json>
  [--url <server>]            default $SWITCHBOARD_URL, else http://127.0.0.1:3000
  [--key <API key>]           default $SWITCHBOARD_API_KEY
  [--assistant <id>] [--workflow <id>]   instead of the script's own
Exits 0 when every expectation is met, 1 at the first one that is not (or an API error), 2 on bad usage.

       npm run chat [-- --assistant <id>] [--workflow <id>] [--url <server>] [--key <API key>]
Interactive: type the customer's lines; the replies come with their node. Ctrl-D leaves.`;

const OneOrMore = z.union([z.string().min(1), z.array(z.string().min(1)).min(1)]);

const Expectations = {
  expect_node: z.string().min(1).optional().describe('the current node after the turn'),
  expect_reply_contains: OneOrMore.optional().describe("words in the assistant's reply (any case)"),
  expect_tool_call: OneOrMore.optional().describe('tools called during the turn (tool node or assistant tool)'),
  expect_status: z.enum(['active', 'ended']).optional(),
  expect_ended_reason: z.string().min(1).optional(),
};

const ChatScript = z.strictObject({
  assistant_id: z.uuid().optional(),
  assistant: z.record(z.string(), z.unknown()).optional().describe('a POST /assistants body: created for the run, deleted after'),
  workflow_id: z.uuid().nullable().optional(),
  workflow: z.record(z.string(), z.unknown()).optional().describe('a POST /workflows body: created for the run, deleted after'),
  variables: z.record(z.string(), z.string()).optional(),
  start: z.strictObject(Expectations).optional().describe('expectations of the opening lines'),
  turns: z.array(z.strictObject({ say: z.string().min(1).max(4_000), ...Expectations })).min(1),
});
type ChatScript = z.infer<typeof ChatScript>;

type Expect = Omit<ChatScript['turns'][number], 'say'>;

interface ChatMessage {
  role: string;
  content: string;
  node_id: string | null;
  tool_name?: string;
}
interface Chat {
  id: string;
  status: string;
  node_id: string | null;
  ended_reason: string | null;
  /** Entries `{code, message, provider?}`; an older server sent plain strings. */
  errors: Array<string | { message: string }>;
  messages: ChatMessage[];
}

class ApiFailure extends SwitchboardError {
  static override readonly codes = [ErrorCodes.CLI_API_FAILURE] as const;
  constructor(message: string) {
    super(ErrorCodes.CLI_API_FAILURE, message);
  }
}
class Unmet extends SwitchboardError {
  static override readonly codes = [ErrorCodes.CLI_UNMET] as const;
  constructor(message: string) {
    super(ErrorCodes.CLI_UNMET, message);
  }
}

function out(line: string) {
  process.stdout.write(`${line}\n`);
}

async function main(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      script: { type: 'string' },
      url: { type: 'string' },
      key: { type: 'string' },
      assistant: { type: 'string' },
      workflow: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    out(USAGE);
    return 0;
  }
  const baseUrl = (values.url || process.env.SWITCHBOARD_URL || 'http://127.0.0.1:3000').replace(/\/+$/, '');
  const key = values.key || process.env.SWITCHBOARD_API_KEY;
  if (!key) {
    process.stderr.write(`chat: needs the API key: --key, or SWITCHBOARD_API_KEY (npm start prints one on its first start)\n\n${USAGE}\n`);
    return 2;
  }

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
    if (r.status !== status) throw new ApiFailure(`${what}: HTTP ${r.status} ${JSON.stringify(r.json)}`);
    return r.json;
  };
  if (!values.script) {
    try {
      return await interactive(api, expectStatus, { assistant: values.assistant, workflow: values.workflow });
    } catch (err) {
      if (err instanceof ApiFailure) {
        process.stderr.write(`chat: ${err.message}\n`);
        return 1;
      }
      throw err;
    }
  }
  const script = readScript(values.script);

  const created: string[] = [];
  let met = 0;
  try {
    let assistantId = values.assistant ?? script.assistant_id;
    if (!assistantId && script.assistant) {
      assistantId = expectStatus('creating the assistant', await api('POST', '/assistants', script.assistant), 201).assistant.id as string;
      created.unshift(`/assistants/${assistantId}`);
    }
    if (!assistantId) throw new ApiFailure('no assistant: give --assistant, or assistant_id or assistant in the script');
    let workflowId: string | null | undefined = values.workflow ?? script.workflow_id;
    if (workflowId === undefined && script.workflow) {
      workflowId = expectStatus('creating the workflow', await api('POST', '/workflows', script.workflow), 201).workflow.id as string;
      created.unshift(`/workflows/${workflowId}`);
    }

    const started = expectStatus(
      'starting the chat',
      await api('POST', '/chats', {
        assistant_id: assistantId,
        ...(workflowId !== undefined ? { workflow_id: workflowId } : {}),
        ...(script.variables ? { variables: script.variables } : {}),
      }),
      201,
    );
    let chat = started.chat as Chat;
    out(`chat ${chat.id} (assistant ${assistantId}, workflow ${workflowId ?? 'none'})`);
    const check = (label: string, expect: Expect, before: number, reply: string[]) => {
      const now = chat.messages.slice(before);
      for (const m of now) {
        const where = `[${m.node_id ?? '-'}]`;
        if (m.role === 'assistant') out(`${where} assistant: ${m.content}`);
        else if (m.role === 'tool') out(`${where} tool ${m.tool_name ?? '?'}: ${m.content}`);
      }
      for (const e of chat.errors) out(`  error: ${typeof e === 'string' ? e : e.message}`);
      const ok = (what: string) => {
        met++;
        out(`  ok    ${what}`);
      };
      const fail = (what: string) => {
        out(`  FAIL  ${what}`);
        throw new Unmet(`${label}: ${what}`);
      };
      if (expect.expect_node !== undefined) {
        if (chat.node_id === expect.expect_node) ok(`node is ${expect.expect_node}`);
        else fail(`node is ${JSON.stringify(chat.node_id)}, expected ${JSON.stringify(expect.expect_node)}`);
      }
      if (expect.expect_reply_contains !== undefined) {
        const said = reply.join(' ').toLowerCase();
        for (const words of ([] as string[]).concat(expect.expect_reply_contains)) {
          if (said.includes(words.toLowerCase())) ok(`reply contains ${JSON.stringify(words)}`);
          else fail(`reply does not contain ${JSON.stringify(words)}`);
        }
      }
      if (expect.expect_tool_call !== undefined) {
        const called = now.filter((m) => m.role === 'tool').map((m) => m.tool_name);
        for (const tool of ([] as string[]).concat(expect.expect_tool_call)) {
          if (called.includes(tool)) ok(`tool ${tool} called`);
          else fail(`tool ${tool} not called${called.length > 0 ? ` (called: ${called.join(', ')})` : ''}`);
        }
      }
      if (expect.expect_status !== undefined) {
        if (chat.status === expect.expect_status) ok(`status is ${expect.expect_status}`);
        else fail(`status is ${chat.status}${chat.ended_reason ? ` (${chat.ended_reason})` : ''}, expected ${expect.expect_status}`);
      }
      if (expect.expect_ended_reason !== undefined) {
        if (chat.ended_reason === expect.expect_ended_reason) ok(`ended ${expect.expect_ended_reason}`);
        else fail(`ended_reason is ${JSON.stringify(chat.ended_reason)}, expected ${JSON.stringify(expect.expect_ended_reason)}`);
      }
    };
    check('start', script.start ?? {}, 0, chat.messages.filter((m) => m.role === 'assistant').map((m) => m.content));

    for (const [i, turn] of script.turns.entries()) {
      const before = chat.messages.length;
      out(`[${chat.node_id ?? '-'}] customer:  ${turn.say}`);
      const answered = expectStatus(`turn ${i + 1}`, await api('POST', `/chats/${chat.id}/messages`, { text: turn.say }), 200);
      chat = answered.chat as Chat;
      // the customer's own message is the first of the turn's new ones
      check(`turn ${i + 1}`, turn, before + 1, (answered.reply as { content: string }[]).map((m) => m.content));
    }
    out(`chat over: ${chat.status}${chat.ended_reason ? ` (${chat.ended_reason})` : ''}; ${met} expectation${met === 1 ? '' : 's'} met`);
    return 0;
  } catch (err) {
    if (err instanceof Unmet || err instanceof ApiFailure) {
      process.stderr.write(`chat: ${err.message}\n`);
      return 1;
    }
    throw err;
  } finally {
    for (const path of created) {
      const r = await api('DELETE', path).catch(() => null);
      if (r && r.status !== 204) process.stderr.write(`chat: could not delete ${path}: HTTP ${r.status}\n`);
    }
  }
}

type Api = (method: string, path: string, body?: unknown) => Promise<{ status: number; json: any }>;

/** A refused request in a person's words: the API's phrase, its message and each detail. */
function refusal(what: string, r: { status: number; json: any }): ApiFailure {
  const j = r.json ?? {};
  const details = Array.isArray(j.details) ? j.details.map((d: string) => `\n  - ${d}`).join('') : '';
  return new ApiFailure(`${what}: HTTP ${r.status} ${j.error ?? ''}${j.message && j.message !== j.error ? `: ${j.message}` : ''}${details}`);
}

/** The interactive chat: lines in from the terminal (or a pipe), replies out with their node. */
async function interactive(
  api: Api,
  expectStatus: (what: string, r: { status: number; json: any }, status: number) => any,
  chosen: { assistant: string | undefined; workflow: string | undefined },
): Promise<number> {
  let assistantId = chosen.assistant;
  if (!assistantId) {
    const { assistants } = expectStatus('listing the assistants', await api('GET', '/assistants'), 200) as { assistants: { id: string; name: string }[] };
    if (assistants.length !== 1) {
      process.stderr.write(
        assistants.length === 0
          ? 'chat: the organization has no assistant yet: make one (the dashboard at /console, or POST /assistants), or give --script\n'
          : `chat: which assistant? give --assistant <id>:\n${assistants.map((a) => `  ${a.id}  ${a.name}`).join('\n')}\n`,
      );
      return 2;
    }
    assistantId = assistants[0]!.id;
  }
  const started = await api('POST', '/chats', { assistant_id: assistantId, ...(chosen.workflow ? { workflow_id: chosen.workflow } : {}) });
  if (started.status !== 201) throw refusal('starting the chat', started);
  let chat = started.json.chat as Chat;
  const tty = process.stdin.isTTY === true;
  out(`chat ${chat.id} (assistant ${assistantId}, workflow ${chosen.workflow ?? 'none'}): type the customer's lines${tty ? '; Ctrl-D leaves' : ''}`);
  const show = (messages: ChatMessage[]) => {
    for (const m of messages) {
      const where = `[${m.node_id ?? '-'}]`;
      if (m.role === 'assistant') out(`${where} assistant: ${m.content}`);
      else if (m.role === 'tool') out(`${where} tool ${m.tool_name ?? '?'}: ${m.content}`);
    }
  };
  show(chat.messages);
  const lines = createInterface({ input: process.stdin, output: tty ? process.stdout : undefined, terminal: tty });
  const prompt = () => {
    if (!tty) return;
    lines.setPrompt(`[${chat.node_id ?? '-'}] you: `);
    lines.prompt();
  };
  prompt();
  for await (const line of lines) {
    const text = line.trim();
    if (!text) {
      prompt();
      continue;
    }
    if (!tty) out(`[${chat.node_id ?? '-'}] customer:  ${text}`);
    const before = chat.messages.length;
    const answered = await api('POST', `/chats/${chat.id}/messages`, { text });
    if (answered.status !== 200) throw refusal('the message', answered);
    chat = answered.json.chat as Chat;
    show(chat.messages.slice(before + 1));
    if (chat.status === 'ended') break;
    prompt();
  }
  lines.close();
  out(`chat over: ${chat.status}${chat.ended_reason ? ` (${chat.ended_reason})` : ''}`);
  return 0;
}

function readScript(file: string): ChatScript {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    throw new Error(`${file}: ${(err as Error).message}`);
  }
  const parsed = ChatScript.safeParse(raw);
  if (!parsed.success) throw new Error(`${file}: not a chat script\n  ${formatZodIssues(parsed.error.issues).join('\n  ')}`);
  const s = parsed.data;
  if (s.assistant_id && s.assistant) throw new Error(`${file}: assistant_id and assistant: give one`);
  if (s.workflow_id !== undefined && s.workflow) throw new Error(`${file}: workflow_id and workflow: give one`);
  return s;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`chat: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
