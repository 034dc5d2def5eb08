/**
 * A realistic 8-node workflow run from the first line to the hang-up, with a stand-in service
 * (plays every line at once, answers tool calls from a table) and a deterministic stand-in model:
 * it calls the transition whose description shares the most words with what it was given (the
 * caller's last words, or the tool's result), and otherwise replies with a fixed line.
 */
import { describe, expect, it } from 'vitest';
import {
  createCallSession,
  restoreCallSession,
  WorkflowDefinition,
  type CallEvent,
  type CallSession,
  type Command,
  type RunModelCommand,
} from '../../engine/index.js';

const energyLine = (): WorkflowDefinition =>
  WorkflowDefinition.parse({
    version: 1,
    entry_node: 'greeting',
    global_prompt: 'You are the phone assistant of Acme Energy. Be brief and friendly.',
    nodes: [
      {
        id: 'greeting',
        type: 'conversation',
        first_line: 'Thanks for calling Acme Energy. How can I help you today?',
        instructions: 'Find out why the customer is calling.',
      },
      {
        id: 'identify',
        type: 'conversation',
        first_line: 'Sure. What is your account number?',
        instructions: 'Get the account number.',
      },
      {
        id: 'lookup',
        type: 'tool',
        tool_name: 'lookup_account',
        url: 'https://crm.example.com/tools/lookup',
        arguments: { source: 'phone' },
      },
      {
        id: 'balance',
        type: 'conversation',
        instructions: 'Tell the caller their balance, then ask if there is anything else.',
      },
      {
        id: 'not_found',
        type: 'conversation',
        first_line: 'I could not find that account. Could you repeat the number?',
        instructions: 'Get the account number again.',
      },
      {
        id: 'agent_request',
        type: 'conversation',
        global: true,
        global_description: 'caller asks to speak to a human agent or a real person',
        first_line: 'Would you like me to transfer you to an agent?',
        instructions: 'Confirm the transfer.',
        tts_config: { provider: 'sandbox', voice_id: 'sandbox' },
      },
      {
        id: 'transfer_to_agent',
        type: 'transfer',
        destination: '+14155550123',
        first_line: 'Please hold while I transfer you.',
      },
      { id: 'goodbye', type: 'end', first_line: 'Thanks for calling Acme Energy. Goodbye!' },
    ],
    edges: [
      { from: 'greeting', to: 'identify', description: 'caller wants to check a bill or account balance' },
      {
        from: 'identify',
        to: 'lookup',
        description: 'caller gave their account number',
        message: 'Thanks, let me look that up.',
      },
      { from: 'lookup', to: 'balance', description: 'status found: the account exists' },
      { from: 'lookup', to: 'not_found', description: 'status missing: no account matches' },
      { from: 'not_found', to: 'lookup', description: 'caller repeated the account number digits' },
      { from: 'balance', to: 'goodbye', description: 'caller has no more questions, thanks, goodbye' },
      { from: 'agent_request', to: 'transfer_to_agent', description: 'caller confirms: yes, transfer me' },
      { from: 'agent_request', to: 'greeting', description: 'caller changed their mind: no thanks' },
    ],
  });

const STOP = new Set(['the', 'a', 'an', 'to', 'or', 'and', 'is', 'my', 'i', 'of', 'for', 'their', 'caller', 'it']);
const words = (text: string) =>
  new Set(text.toLowerCase().split(/[^a-z0-9]+/).filter((w) => w !== '' && !STOP.has(w)));

/** The model stand-in: best word overlap wins; no overlap means it just talks. */
function standInModel(run: RunModelCommand): CallEvent {
  const last = [...run.messages].reverse().find((m) => m.role === (run.reason === 'tool_result' ? 'tool' : 'user'));
  if (run.reason !== 'node_entered' && last) {
    const said = words(last.content);
    let best: { name: string; score: number } | null = null;
    for (const f of run.transition_functions) {
      const score = [...words(f.description)].filter((w) => said.has(w)).length;
      if (score > 0 && (best === null || score > best.score)) best = { name: f.name, score };
    }
    if (best) return { type: 'model.chose_transition', function_name: best.name, node_id: run.node_id };
  }
  const tool = [...run.messages].reverse().find((m) => m.role === 'tool');
  const balance = tool ? (JSON.parse(tool.content) as { balance?: string }).balance : undefined;
  return {
    type: 'model.replied',
    text: run.node_id === 'balance' && balance ? `Your balance is ${balance} dollars. Anything else?` : 'Could you say that again?',
  };
}

interface Transcript {
  lines: string[];
  commands: Command[];
  toolCalls: Array<{ name: string; arguments: unknown }>;
}

/** The service stand-in: carries out commands until the call waits for the caller (or ends). */
function carryOut(session: CallSession, commands: Command[], t: Transcript, toolResults: unknown[]): void {
  const queue = [...commands];
  while (queue.length > 0) {
    const command = queue.shift()!;
    t.commands.push(command);
    switch (command.type) {
      case 'say':
        t.lines.push(`assistant: ${command.text}`);
        queue.push(...session.send({ type: 'assistant.done_speaking', say_id: command.say_id }));
        break;
      case 'run_model': {
        const answer = standInModel(command);
        if (answer.type === 'model.replied') t.lines.push(`assistant: ${answer.text}`);
        queue.push(...session.send(answer));
        break;
      }
      case 'call_tool':
        t.toolCalls.push({ name: command.tool_name, arguments: command.arguments });
        queue.push(
          ...session.send({ type: 'tool.result', tool_call_id: command.tool_call_id, result: toolResults.shift() }),
        );
        break;
      case 'transfer':
        t.lines.push(`(transfer to ${command.destination})`);
        break;
      case 'hang_up':
        t.lines.push(`(hang up: ${command.reason})`);
        break;
      case 'event_rejected':
        throw new Error(`engine rejected an event: ${command.message}`);
      case 'set_provider_overrides':
        break;
    }
  }
}

function caller(session: CallSession, text: string, t: Transcript, toolResults: unknown[]): void {
  t.lines.push(`caller: ${text}`);
  carryOut(session, session.send({ type: 'caller.said', text }), t, toolResults);
}

describe('a scripted call on an 8-node workflow', () => {
  it('balance enquiry: greeting → identify → lookup (missing, then found) → balance → goodbye', () => {
    const toolResults: unknown[] = [{ status: 'missing' }, { status: 'found', balance: '42.10' }];
    const t: Transcript = { lines: [], commands: [], toolCalls: [] };
    let session = createCallSession(energyLine());
    carryOut(session, session.start(), t, toolResults);
    caller(session, 'Hi, I want to check my bill balance', t, toolResults);
    caller(session, 'My account number is 4412', t, toolResults);

    // The call moves to another process between two turns.
    session = restoreCallSession(energyLine(), JSON.parse(JSON.stringify(session.snapshot())));
    expect(session.state().node_id).toBe('not_found');

    caller(session, 'Sorry, the digits are 4413', t, toolResults);
    caller(session, 'Great, no more questions, thanks', t, toolResults);

    expect(t.lines).toEqual([
      'assistant: Thanks for calling Acme Energy. How can I help you today?',
      'caller: Hi, I want to check my bill balance',
      'assistant: Sure. What is your account number?',
      'caller: My account number is 4412',
      'assistant: Thanks, let me look that up.',
      'assistant: I could not find that account. Could you repeat the number?',
      'caller: Sorry, the digits are 4413',
      'assistant: Your balance is 42.10 dollars. Anything else?',
      'caller: Great, no more questions, thanks',
      'assistant: Thanks for calling Acme Energy. Goodbye!',
      '(hang up: assistant-ended-call)',
    ]);
    expect(t.toolCalls).toEqual([
      { name: 'lookup_account', arguments: { source: 'phone' } },
      { name: 'lookup_account', arguments: { source: 'phone' } },
    ]);
    expect(session.state()).toMatchObject({ status: 'ended', ended_reason: 'assistant-ended-call' });
    expect(session.nodesVisited()).toEqual([
      'greeting',
      'identify',
      'lookup',
      'not_found',
      'lookup',
      'balance',
      'goodbye',
    ]);
    const history = session.history();
    expect(history.filter((m) => m.role === 'tool').map((m) => m.content)).toEqual([
      '{"status":"missing"}',
      '{"status":"found","balance":"42.10"}',
    ]);
    expect(history.find((m) => m.content.startsWith('Your balance'))).toMatchObject({ node_id: 'balance' });
    // Every model turn saw the global prompt and its own node's instructions, nothing else.
    for (const run of t.commands.filter((c): c is RunModelCommand => c.type === 'run_model')) {
      expect(run.system.startsWith('You are the phone assistant of Acme Energy.')).toBe(true);
      if (run.node_id !== 'identify') expect(run.system).not.toContain('Get the account number.');
    }
  });

  it('"speak to a human" from the middle of the call: global node → transfer', () => {
    const t: Transcript = { lines: [], commands: [], toolCalls: [] };
    const session = createCallSession(energyLine());
    carryOut(session, session.start(), t, []);
    caller(session, 'I need to check my account', t, []);
    caller(session, 'Actually, can I speak to a real person?', t, []);
    caller(session, 'Yes, transfer me please', t, []);

    expect(t.lines).toEqual([
      'assistant: Thanks for calling Acme Energy. How can I help you today?',
      'caller: I need to check my account',
      'assistant: Sure. What is your account number?',
      'caller: Actually, can I speak to a real person?',
      'assistant: Would you like me to transfer you to an agent?',
      'caller: Yes, transfer me please',
      'assistant: Please hold while I transfer you.',
      '(transfer to +14155550123)',
      '(hang up: call-transferred)',
    ]);
    expect(t.commands.filter((c) => c.type === 'set_provider_overrides')).toEqual([
      { type: 'set_provider_overrides', node_id: 'agent_request', tts_config: { provider: 'sandbox', voice_id: 'sandbox' } },
      { type: 'set_provider_overrides', node_id: 'transfer_to_agent' },
    ]);
    expect(session.state()).toMatchObject({ status: 'ended', ended_reason: 'call-transferred' });
    expect(session.nodesVisited()).toEqual(['greeting', 'identify', 'agent_request', 'transfer_to_agent']);
  });

  it('the caller changes their mind and is brought back to the greeting', () => {
    const t: Transcript = { lines: [], commands: [], toolCalls: [] };
    const session = createCallSession(energyLine());
    carryOut(session, session.start(), t, []);
    caller(session, 'Let me talk to a human agent', t, []);
    caller(session, 'No thanks, never mind', t, []);
    caller(session, 'Hmm', t, []);
    expect(session.state().node_id).toBe('greeting');
    expect(t.lines.slice(-3)).toEqual([
      'assistant: Thanks for calling Acme Energy. How can I help you today?',
      'caller: Hmm',
      'assistant: Could you say that again?',
    ]);
    expect(session.send({ type: 'hangup' })).toEqual([]);
    expect(session.state().ended_reason).toBe('customer-ended-call');
  });
});
