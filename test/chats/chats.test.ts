/**
 * Chats through the API of a real listening server (real HTTP, the sandbox providers, a real tool
 * server; Redis and PostgreSQL when REDIS_URL / DATABASE_URL are set): every kind of node, global
 * nodes, the model's own tools, the assistant alone, realtime assistants, the call-start checks,
 * bad bodies, other organizations, and that a chat sends `tool-calls` and nothing else.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyWebhook } from '../../src/webhooks/verify.js';
import {
  frontDeskWorkflow,
  realtimeSandboxAssistant,
  receivedMessages,
  sandboxAssistant,
  startCallingServer,
  transferFlow,
  type CallingServer,
} from '../helpers/calls.js';
import { startReceiver, type Receiver, type ReceiverScript, type RecordedRequest } from '../helpers/receiver.js';
import { REFUSED_PORT } from '../helpers/faults.js';

/** The account webhook's secret as `startCallingServer` sets it. */
const ACCOUNT_SECRET = 'whsec_dGVzdC1zZWNyZXQtdGVzdC1zZWNyZXQtdGVzdA==';

let s: CallingServer;
let tools: Receiver;
let otherKey: string;

beforeAll(async () => {
  tools = await startReceiver();
  s = await startCallingServer();
  otherKey = (await s.store.keys.createKey('Other chats org')).key;
}, 120_000);
afterAll(async () => {
  await s?.close();
  await tools?.close();
});

/** A request over the server's real HTTP port. */
async function http(method: string, path: string, body?: unknown, key: string = s.key): Promise<{ status: number; json: any }> {
  const res = await fetch(`${s.baseUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }),
  });
  const text = await res.text();
  return { status: res.status, json: text ? JSON.parse(text) : null };
}

async function newAssistant(fields: Record<string, unknown> = sandboxAssistant()): Promise<string> {
  const r = await http('POST', '/assistants', fields);
  expect(r.status, JSON.stringify(r.json)).toBe(201);
  return r.json.assistant.id;
}

async function newWorkflow(definition: unknown, isActive = true): Promise<string> {
  const r = await http('POST', '/workflows', { name: 'Chat flow', definition, is_active: isActive });
  expect(r.status, JSON.stringify(r.json)).toBe(201);
  return r.json.workflow.id;
}

async function startChat(body: Record<string, unknown>) {
  const r = await http('POST', '/chats', body);
  expect(r.status, JSON.stringify(r.json)).toBe(201);
  return r.json.chat;
}

async function say(chatId: string, text: string) {
  const r = await http('POST', `/chats/${chatId}/messages`, { text });
  expect(r.status, JSON.stringify(r.json)).toBe(200);
  return r.json as { chat: any; reply: { role: string; content: string; node_id: string | null }[] };
}

const lines = (reply: { content: string }[]) => reply.map((m) => m.content);
const toolCallId = (r: RecordedRequest) => JSON.parse(r.body).message.tool_calls[0].id as string;
const answerWith = (outcome: { result: unknown } | { error: string }, delayMs = 0): ReceiverScript => (r) => ({
  delayMs,
  body: { results: [{ tool_call_id: toolCallId(r), ...outcome }] },
});

const TOOL_ARGUMENTS = { order: 'A-1234', priority: 2, rush: false, note: null };

/** A tool node first; one way out (`shipped`), or two the model chooses from (`shipped`, `problem`). */
function lookupFlow(ways: 'one' | 'two', entry: 'lookup' | 'greeting' = 'lookup') {
  const nodes: Record<string, unknown>[] = [
    { id: 'lookup', type: 'tool', first_line: 'One moment while I check that.', tool_name: 'crm_fetch', url: tools.url, arguments: TOOL_ARGUMENTS },
    { id: 'shipped', type: 'conversation', first_line: 'Good news, your parcel shipped already.', instructions: 'Answer questions.' },
    { id: 'bye', type: 'end', first_line: 'Goodbye.' },
  ];
  const edges: Record<string, unknown>[] = [
    { from: 'lookup', to: 'shipped', ...(ways === 'two' ? { description: 'the parcel shipped already' } : {}) },
    { from: 'shipped', to: 'bye', description: 'the caller is finished' },
  ];
  if (ways === 'two') {
    nodes.push({ id: 'problem', type: 'conversation', first_line: 'Sorry, I could not check your parcel right now.' });
    edges.push(
      { from: 'lookup', to: 'problem', description: 'the tool reported an error or did not answer' },
      { from: 'problem', to: 'bye', description: 'the caller is finished' },
    );
  }
  if (entry === 'greeting') {
    nodes.unshift({ id: 'greeting', type: 'conversation', first_line: 'Acme parcels, hello.' });
    edges.unshift({ from: 'greeting', to: 'lookup', description: 'the caller asks where their parcel is', message: 'Let me look.' });
  }
  return { version: 1, entry_node: entry, global_prompt: 'You are the order desk of Acme Parts.', nodes, edges };
}

describe('a chat through a workflow', () => {
  it('opens with the first line, moves on with the edge message and first line, and ends at the end node', async () => {
    const assistantId = await newAssistant();
    const workflowId = await newWorkflow(frontDeskWorkflow());
    const chat = await startChat({ assistant_id: assistantId, workflow_id: workflowId, variables: { customer_name: 'Ada' } });
    expect(chat).toMatchObject({
      status: 'active',
      assistant_id: assistantId,
      workflow_id: workflowId,
      workflow_note: null,
      node_id: 'greeting',
      nodes_visited: ['greeting'],
      ended_reason: null,
      errors: [],
      variables: { customer_name: 'Ada' },
      messages: [{ role: 'assistant', content: 'Hello, this is Acme Dental.', node_id: 'greeting', time: expect.any(String) }],
    });
    expect(Date.parse(chat.created_at)).toBeGreaterThan(0);

    const unclear = await say(chat.id, 'What colour is the sky on Tuesdays?');
    expect(unclear.reply).toEqual([{ role: 'assistant', content: 'Okay, I understand: What colour is the sky on Tuesdays.', node_id: 'greeting' }]);
    expect(unclear.chat.node_id).toBe('greeting');

    const booking = await say(chat.id, 'I would like to book an appointment');
    expect(lines(booking.reply)).toEqual(['Sure thing.', 'Let us book your appointment.']);
    expect(booking.reply.map((m) => m.node_id)).toEqual(['greeting', 'booking']);
    expect(booking.chat).toMatchObject({ status: 'active', node_id: 'booking', nodes_visited: ['greeting', 'booking'] });

    const bye = await say(chat.id, 'That is all, I am finished, goodbye');
    expect(lines(bye.reply)).toEqual(['Thank you for calling, goodbye.']);
    expect(bye.chat).toMatchObject({ status: 'ended', ended_reason: 'assistant-ended-call', node_id: 'bye' });
    expect(bye.chat.messages.map((m: any) => `${m.role}: ${m.content}`)).toEqual([
      'assistant: Hello, this is Acme Dental.',
      'user: What colour is the sky on Tuesdays?',
      'assistant: Okay, I understand: What colour is the sky on Tuesdays.',
      'user: I would like to book an appointment',
      'assistant: Sure thing.',
      'assistant: Let us book your appointment.',
      'user: That is all, I am finished, goodbye',
      'assistant: Thank you for calling, goodbye.',
    ]);

    const late = await http('POST', `/chats/${chat.id}/messages`, { text: 'Hello?' });
    expect(late.status).toBe(409);
    expect(late.json).toEqual({ error: 'Chat ended', message: expect.stringContaining('assistant-ended-call') });

    const got = await http('GET', `/chats/${chat.id}`);
    expect(got.status).toBe(200);
    expect(got.json.chat).toEqual(bye.chat);
  });

  it('a global node is reachable from any conversation node', async () => {
    const definition = {
      version: 1,
      entry_node: 'greeting',
      nodes: [
        { id: 'greeting', type: 'conversation', first_line: 'Hello, Acme.' },
        { id: 'billing', type: 'conversation', global: true, global_description: 'the caller has a question about an invoice', first_line: 'Billing here.' },
        { id: 'bye', type: 'end', first_line: 'Bye now.' },
      ],
      edges: [
        { from: 'greeting', to: 'bye', description: 'the caller is finished' },
        { from: 'billing', to: 'bye', description: 'the caller is finished' },
      ],
    };
    const chat = await startChat({ assistant_id: await newAssistant(), workflow_id: await newWorkflow(definition) });
    const billing = await say(chat.id, 'I have a question about my invoice');
    expect(lines(billing.reply)).toEqual(['Billing here.']);
    expect(billing.chat.node_id).toBe('billing');
    const bye = await say(chat.id, 'Thanks, I am finished');
    expect(bye.chat).toMatchObject({ status: 'ended', ended_reason: 'assistant-ended-call', nodes_visited: ['greeting', 'billing', 'bye'] });
  });

  it('a conversation node without a first line: the model speaks on entering it', async () => {
    const definition = {
      version: 1,
      entry_node: 'greeting',
      nodes: [
        { id: 'greeting', type: 'conversation', first_line: 'Hello, Acme.' },
        { id: 'helpdesk', type: 'conversation', instructions: 'Help with the printer.' },
      ],
      edges: [
        { from: 'greeting', to: 'helpdesk', description: 'the caller has a printer problem', message: 'Let me get the help desk.' },
        { from: 'helpdesk', to: 'greeting', description: 'the caller wants to start over' },
      ],
    };
    const chat = await startChat({ assistant_id: await newAssistant(), workflow_id: await newWorkflow(definition) });
    const turn = await say(chat.id, 'My printer has a problem');
    expect(turn.reply).toEqual([
      { role: 'assistant', content: 'Let me get the help desk.', node_id: 'greeting' },
      { role: 'assistant', content: 'Okay, I understand: My printer has a problem.', node_id: 'helpdesk' },
    ]);
  });

  it('a transfer node ends the chat call-transferred, and nothing is dialled', async () => {
    const chat = await startChat({ assistant_id: await newAssistant(), workflow_id: await newWorkflow(transferFlow) });
    const twilioBefore = s.twilio.requests.length;
    const turn = await say(chat.id, 'I want to speak to a human agent please');
    expect(lines(turn.reply)).toEqual(['Of course.', 'Connecting you to an agent now.']);
    expect(turn.chat).toMatchObject({ status: 'ended', ended_reason: 'call-transferred', node_id: 'agent' });
    expect(s.twilio.requests.length).toBe(twilioBefore);
  });

  it('an end node at the entry ends the chat at once', async () => {
    const definition = { version: 1, entry_node: 'closed', nodes: [{ id: 'closed', type: 'end', first_line: 'We are closed today.' }], edges: [] };
    const chat = await startChat({ assistant_id: await newAssistant(), workflow_id: await newWorkflow(definition) });
    expect(chat).toMatchObject({ status: 'ended', ended_reason: 'assistant-ended-call', messages: [{ content: 'We are closed today.' }] });
  });

  it('an end node without a first line says end_call_message', async () => {
    const definition = {
      version: 1,
      entry_node: 'greeting',
      nodes: [
        { id: 'greeting', type: 'conversation', first_line: 'Hi.' },
        { id: 'bye', type: 'end' },
      ],
      edges: [{ from: 'greeting', to: 'bye', description: 'the caller is finished' }],
    };
    const assistantId = await newAssistant(sandboxAssistant({ speech_config: { end_call_message: 'Take care!' } }));
    const chat = await startChat({ assistant_id: assistantId, workflow_id: await newWorkflow(definition) });
    const turn = await say(chat.id, 'I am finished');
    expect(lines(turn.reply)).toEqual(['Take care!']);
    expect(turn.chat.status).toBe('ended');
  });

  it('a chat sends no status-update and no end-of-call-report', async () => {
    const chat = await startChat({ assistant_id: await newAssistant(), workflow_id: await newWorkflow(transferFlow) });
    await say(chat.id, 'I want to speak to a human agent please');
    await new Promise((r) => setTimeout(r, 300));
    expect(receivedMessages(s.receiver).filter((m) => m.call?.id === chat.id)).toEqual([]);
  });
});

describe('a tool node', () => {
  async function atTheToolNode(ways: 'one' | 'two', answer: ReceiverScript) {
    tools.script(answer);
    const before = tools.requests.length;
    const chat = await startChat({ assistant_id: await newAssistant(), workflow_id: await newWorkflow(lookupFlow(ways)) });
    expect(tools.requests.length).toBe(before + 1);
    return { chat, request: tools.requests[before]! };
  }

  it('sends a signed tool-calls request naming the chat; one edge: follows it with the result', async () => {
    const { chat, request } = await atTheToolNode('one', answerWith({ result: { parcel: 'shipped', carrier: 'UPS' } }));
    const message = verifyWebhook<{ message: any }>(request.body, request.headers, ACCOUNT_SECRET).payload.message;
    expect(message).toEqual({
      type: 'tool-calls',
      timestamp: expect.any(String),
      call: { id: chat.id, type: 'chat', status: 'in-progress' },
      phone_number: null,
      customer: null,
      node_id: 'lookup',
      tool_calls: [{ id: expect.stringMatching(/^tool_/), name: 'crm_fetch', arguments: TOOL_ARGUMENTS }],
    });
    expect(chat).toMatchObject({ status: 'active', node_id: 'shipped', nodes_visited: ['lookup', 'shipped'] });
    expect(chat.messages.map((m: any) => [m.role, m.content, m.node_id, m.tool_name])).toEqual([
      ['assistant', 'One moment while I check that.', 'lookup', undefined],
      ['tool', '{"parcel":"shipped","carrier":"UPS"}', 'lookup', 'crm_fetch'],
      ['assistant', 'Good news, your parcel shipped already.', 'shipped', undefined],
    ]);
  });

  it('two edges: the model chooses from the result', async () => {
    const { chat } = await atTheToolNode('two', answerWith({ result: { parcel: 'shipped already' } }));
    expect(chat.node_id).toBe('shipped');
  });

  it.each([
    ['an HTTP 500', { status: 500, body: { message: 'boom' } }],
    ['an error result', answerWith({ error: 'database unavailable' })],
  ] as [string, ReceiverScript][])('%s: the model takes the error edge and the chat goes on', async (_name, answer) => {
    const { chat } = await atTheToolNode('two', answer);
    expect(chat).toMatchObject({ status: 'active', node_id: 'problem' });
    expect(chat.messages[1]).toMatchObject({ role: 'tool', content: expect.stringContaining('"error"'), tool_name: 'crm_fetch' });
    const next = await say(chat.id, 'Thanks, I am finished');
    expect(next.chat.status).toBe('ended');
  });

  it('reached mid-chat: the message is answered once the tool has answered', async () => {
    tools.script(answerWith({ result: 'out for delivery' }, 300));
    const chat = await startChat({ assistant_id: await newAssistant(), workflow_id: await newWorkflow(lookupFlow('one', 'greeting')) });
    const turn = await say(chat.id, 'Where is my parcel?');
    expect(lines(turn.reply)).toEqual(['Let me look.', 'One moment while I check that.', 'Good news, your parcel shipped already.']);
    expect(turn.chat.messages.filter((m: any) => m.role === 'tool')).toEqual([
      { role: 'tool', content: 'out for delivery', node_id: 'lookup', time: expect.any(String), tool_name: 'crm_fetch' },
    ]);
  });

  it('a second message while the first is being answered is 409 Chat busy', async () => {
    const chat = await startChat({ assistant_id: await newAssistant(), workflow_id: await newWorkflow(lookupFlow('one', 'greeting')) });
    tools.script(answerWith({ result: 'out for delivery' }, 1_500));
    const first = http('POST', `/chats/${chat.id}/messages`, { text: 'Where is my parcel?' });
    await tools.waitForRequests(tools.requests.length + 1, 5_000);
    const second = await http('POST', `/chats/${chat.id}/messages`, { text: 'Hello?' });
    expect(second.status).toBe(409);
    expect(second.json.error).toBe('Chat busy');
    expect((await first).status).toBe(200);
    expect((await say(chat.id, 'Thanks, I am finished')).chat.status).toBe('ended');
  });
});

describe("the assistant's own tools", () => {
  it('the model calls a tool: tool-calls without node_id, its result in the reply', async () => {
    const assistantId = await newAssistant(
      sandboxAssistant({
        first_message: 'Weather desk, go ahead.',
        llm_config: {
          provider: 'sandbox',
          tools: [
            {
              name: 'weather_lookup',
              description: 'the weather forecast for a city',
              url: tools.url,
              parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
            },
          ],
        },
      }),
    );
    tools.script(answerWith({ result: 'sunny and warm' }));
    const before = tools.requests.length;
    const chat = await startChat({ assistant_id: assistantId });
    expect(chat.messages).toEqual([{ role: 'assistant', content: 'Weather desk, go ahead.', node_id: 'assistant', time: expect.any(String) }]);
    const turn = await say(chat.id, 'What is the weather forecast for Paris?');
    expect(lines(turn.reply)).toEqual(['Thanks for waiting. The result is: sunny and warm.']);
    const message = JSON.parse(tools.requests[before]!.body).message;
    expect(message).toMatchObject({ type: 'tool-calls', call: { id: chat.id, type: 'chat' } });
    expect(message.node_id).toBeUndefined();
    expect(message.tool_calls).toEqual([{ id: expect.any(String), name: 'weather_lookup', arguments: { city: expect.stringContaining('Paris') } }]);
    expect(turn.chat.messages.map((m: any) => m.role)).toEqual(['assistant', 'user', 'tool', 'assistant']);
    expect(turn.chat.messages[2]).toMatchObject({ content: 'sunny and warm', tool_name: 'weather_lookup' });
  });
});

describe('the assistant alone', () => {
  it('no workflow: first_message, then the model', async () => {
    const chat = await startChat({ assistant_id: await newAssistant(sandboxAssistant({ first_message: 'Hi, I am Ada.' })), workflow_id: null });
    expect(chat).toMatchObject({ workflow_id: null, workflow_note: null, node_id: 'assistant', messages: [{ content: 'Hi, I am Ada.' }] });
    const turn = await say(chat.id, 'Tell me a story');
    expect(lines(turn.reply)).toEqual(['Okay, I understand: Tell me a story.']);
    expect(turn.chat.status).toBe('active');
  });

  it('no first message: the chat opens with no messages and waits for the customer', async () => {
    const chat = await startChat({ assistant_id: await newAssistant() });
    expect(chat).toMatchObject({ status: 'active', messages: [], node_id: 'assistant' });
    expect(lines((await say(chat.id, 'Hello')).reply)).toEqual(['Okay, I understand: Hello.']);
  });

  it('an inactive workflow: the assistant alone, and why', async () => {
    const workflowId = await newWorkflow(frontDeskWorkflow(), false);
    const chat = await startChat({ assistant_id: await newAssistant(sandboxAssistant({ first_message: 'Hi there.' })), workflow_id: workflowId });
    expect(chat).toMatchObject({
      workflow_id: null,
      workflow_note: `workflow ${workflowId} is inactive; the assistant ran alone`,
      node_id: 'assistant',
      messages: [{ content: 'Hi there.' }],
    });
  });
});

describe('a realtime assistant (sandbox-realtime)', () => {
  it('chats through the same vendor\'s text model, with the same workflow', async () => {
    const chat = await startChat({ assistant_id: await newAssistant(realtimeSandboxAssistant()), workflow_id: await newWorkflow(frontDeskWorkflow()) });
    expect(chat.messages[0].content).toBe('Hello, this is Acme Dental.');
    expect(lines((await say(chat.id, 'I would like to book an appointment')).reply)).toEqual(['Sure thing.', 'Let us book your appointment.']);
    const bye = await say(chat.id, 'That is all, goodbye');
    expect(bye.chat).toMatchObject({ status: 'ended', ended_reason: 'assistant-ended-call' });
  });

  it('a chat a call would refuse at start is refused with every reason', async () => {
    const definition = {
      version: 1,
      entry_node: 'greeting',
      nodes: [
        { id: 'greeting', type: 'conversation', first_line: 'Hi.', llm_config: { provider: 'openai', model: 'gpt-4o' } },
        { id: 'bye', type: 'end', first_line: 'Bye.', tts_config: { provider: 'openai', voice_id: 'alloy' } },
      ],
      edges: [{ from: 'greeting', to: 'bye', description: 'the caller is finished' }],
    };
    const r = await http('POST', '/chats', { assistant_id: await newAssistant(realtimeSandboxAssistant()), workflow_id: await newWorkflow(definition) });
    expect(r.status).toBe(400);
    expect(r.json).toEqual({
      error: 'Chat rejected',
      message: expect.any(String),
      details: [
        expect.stringMatching(/^nodes\[0\] \(greeting\)\.llm_config: per-node model overrides are not possible .*\(CALL_REJECTED_REALTIME_OVERRIDE\)$/),
        expect.stringMatching(/^nodes\[1\] \(bye\)\.tts_config: per-node voice overrides are not possible .*\(CALL_REJECTED_REALTIME_OVERRIDE\)$/),
        // and this server has no OPENAI_API_KEY for the node's model
        'nodes[0] (greeting).llm_config.provider: provider "openai" needs OPENAI_API_KEY, which is not set on this server (CALL_REJECTED_MISSING_PROVIDER_KEY)',
      ],
    });
  });
});

describe('a model that fails', () => {
  it('ends the chat pipeline-error-<provider> with the reason, as it would end a call', async () => {
    // a custom-llm server nothing listens at: every request fails (a provider without its key is refused at start instead)
    const nowhere = `http://127.0.0.1:${REFUSED_PORT}/v1`;
    const chat = await startChat({
      assistant_id: await newAssistant({ name: 'Unreachable', llm_config: { provider: 'custom-llm', model: 'house-model', url: nowhere }, tts_config: { provider: 'sandbox', voice_id: 'sandbox' } }),
      workflow_id: await newWorkflow(frontDeskWorkflow()),
    });
    const turn = await say(chat.id, 'Hello');
    expect(turn.reply).toEqual([]);
    expect(turn.chat).toMatchObject({ status: 'ended', ended_reason: 'pipeline-error-custom-llm', errors: [expect.objectContaining({ message: expect.stringMatching(/^custom-llm: /), provider: 'custom-llm' })] });
  });
});

describe('gdpr_mode', () => {
  it('an ended chat keeps no messages; the last reply still carries its lines', async () => {
    const chat = await startChat({ assistant_id: await newAssistant(sandboxAssistant({ gdpr_mode: true })), workflow_id: await newWorkflow(transferFlow) });
    expect(chat.messages).toHaveLength(1);
    const turn = await say(chat.id, 'I want to speak to a human agent please');
    expect(lines(turn.reply)).toEqual(['Of course.', 'Connecting you to an agent now.']);
    expect(turn.chat).toMatchObject({ status: 'ended', messages: [] });
    expect((await http('GET', `/chats/${chat.id}`)).json.chat.messages).toEqual([]);
  });
});

describe('{{variables}} (DECISIONS 12)', () => {
  it('the first message: given values, built-ins, and an unknown name left as written; the chat shows the values as given', async () => {
    const assistantId = await newAssistant(
      sandboxAssistant({ business_name: 'Acme Dental', first_message: 'Hi {{ customer_name }}, this is {{business_name}} ({{call.type}} {{call.id}}), visit {{visits}}, vip {{vip}}. {{nobody}}' }),
    );
    const chat = await startChat({ assistant_id: assistantId, variables: { customer_name: 'Ada', visits: 3, vip: true } });
    expect(chat.variables).toEqual({ customer_name: 'Ada', visits: 3, vip: true });
    expect(lines(chat.messages)).toEqual([`Hi Ada, this is Acme Dental (chat ${chat.id}), visit 3, vip true. {{nobody}}`]);
    expect((await http('GET', `/chats/${chat.id}`)).json.chat.variables).toEqual({ customer_name: 'Ada', visits: 3, vip: true });
  });

  it('a given value wins over the built-in of the same name; a built-in with no value stays as written', async () => {
    const assistantId = await newAssistant(sandboxAssistant({ business_name: 'Acme Dental', first_message: '{{business_name}} here. {{customer.name}}? {{customer.number}}?' }));
    const given = await startChat({ assistant_id: assistantId, variables: { business_name: 'Acme Night Desk', 'customer.name': 'Ada' } });
    expect(lines(given.messages)).toEqual(['Acme Night Desk here. Ada? {{customer.number}}?']);
    const plain = await startChat({ assistant_id: assistantId });
    expect(lines(plain.messages)).toEqual(['Acme Dental here. {{customer.name}}? {{customer.number}}?']);
    const noName = await startChat({ assistant_id: await newAssistant(sandboxAssistant({ first_message: 'Welcome to {{business_name}}, on {{today}}.' })) });
    expect(lines(noName.messages)).toEqual([`Welcome to {{business_name}}, on ${noName.created_at.slice(0, 10)}.`]);
  });

  it('first lines and edge messages of the workflow, at the start and in later turns (the session restored each time)', async () => {
    const definition = {
      version: 1,
      entry_node: 'greeting',
      global_prompt: 'You are the front desk of {{business_name}}.',
      nodes: [
        { id: 'greeting', type: 'conversation', first_line: 'Hello {{customer_name}}, this is {{business_name}}.', instructions: 'Help {{customer_name}}.' },
        { id: 'booking', type: 'conversation', first_line: 'Let us book your {{treatment}}, {{customer_name}}.', instructions: 'Book it.' },
        { id: 'bye', type: 'end', first_line: 'Goodbye {{customer_name}}, see you {{ when }}.' },
      ],
      edges: [
        { from: 'greeting', to: 'booking', description: 'the caller wants to book an appointment', message: 'Sure thing, {{customer_name}}.' },
        { from: 'booking', to: 'bye', description: 'the caller says goodbye or is finished' },
      ],
    };
    const assistantId = await newAssistant(sandboxAssistant({ business_name: 'Acme Dental' }));
    const workflowId = await newWorkflow(definition);
    const chat = await startChat({ assistant_id: assistantId, workflow_id: workflowId, variables: { customer_name: 'Ada', treatment: 'cleaning' } });
    expect(lines(chat.messages)).toEqual(['Hello Ada, this is Acme Dental.']);
    const booking = await say(chat.id, 'I would like to book an appointment');
    expect(lines(booking.reply)).toEqual(['Sure thing, Ada.', 'Let us book your cleaning, Ada.']);
    const bye = await say(chat.id, 'That is all, I am finished, goodbye');
    expect(lines(bye.reply)).toEqual(['Goodbye Ada, see you {{ when }}.']);
    expect(bye.chat).toMatchObject({ status: 'ended', ended_reason: 'assistant-ended-call', nodes_visited: ['greeting', 'booking', 'bye'] });

    // the workflow itself is the template still: the next chat runs it with its own values
    expect((await http('GET', `/workflows/${workflowId}`)).json.workflow.definition.nodes[0].first_line).toBe('Hello {{customer_name}}, this is {{business_name}}.');
    const other = await startChat({ assistant_id: assistantId, workflow_id: workflowId, variables: { customer_name: 'Grace', business_name: 'Acme Kids' } });
    expect(lines(other.messages)).toEqual(['Hello Grace, this is Acme Kids.']);
  });

  it('tool-node arguments reach the tool server substituted (strings only; numbers, booleans and null as they were)', async () => {
    const definition = {
      version: 1,
      entry_node: 'greeting',
      nodes: [
        { id: 'greeting', type: 'conversation', first_line: 'Acme parcels, hello.' },
        {
          id: 'lookup',
          type: 'tool',
          first_line: 'Checking order {{order}}.',
          tool_name: 'crm_fetch',
          url: tools.url,
          arguments: { order: '{{order}}', who: '{{ customer_name }} ({{call.id}})', priority: 2, rush: false, note: null, missing: '{{nobody}}' },
        },
        { id: 'shipped', type: 'conversation', first_line: 'Good news, your parcel shipped already.' },
        { id: 'bye', type: 'end', first_line: 'Goodbye.' },
      ],
      edges: [
        { from: 'greeting', to: 'lookup', description: 'the caller asks where their parcel is', message: 'Let me look.' },
        { from: 'lookup', to: 'shipped' },
        { from: 'shipped', to: 'bye', description: 'the caller is finished' },
      ],
    };
    tools.script(answerWith({ result: 'shipped' }));
    const chat = await startChat({ assistant_id: await newAssistant(), workflow_id: await newWorkflow(definition), variables: { order: 'A-77', customer_name: 'Ada' } });
    const before = tools.requests.length;
    const turn = await say(chat.id, 'Where is my parcel?');
    expect(lines(turn.reply)).toEqual(['Let me look.', 'Checking order A-77.', 'Good news, your parcel shipped already.']);
    expect(tools.requests.length).toBe(before + 1);
    const message = verifyWebhook<{ message: any }>(tools.requests[before]!.body, tools.requests[before]!.headers, ACCOUNT_SECRET).payload.message;
    expect(message.tool_calls).toEqual([
      {
        id: expect.any(String),
        name: 'crm_fetch',
        arguments: { order: 'A-77', who: `Ada (${chat.id})`, priority: 2, rush: false, note: null, missing: '{{nobody}}' },
      },
    ]);
  });

  it('the silence and end-call lines of the assistant are substituted too (an end node without a first line)', async () => {
    const definition = {
      version: 1,
      entry_node: 'greeting',
      nodes: [
        { id: 'greeting', type: 'conversation', first_line: 'Hi.' },
        { id: 'bye', type: 'end' },
      ],
      edges: [{ from: 'greeting', to: 'bye', description: 'the caller is finished' }],
    };
    const assistantId = await newAssistant(sandboxAssistant({ speech_config: { end_call_message: 'Take care, {{customer_name}}!' } }));
    const chat = await startChat({ assistant_id: assistantId, workflow_id: await newWorkflow(definition), variables: { customer_name: 'Ada' } });
    expect(lines((await say(chat.id, 'I am finished')).reply)).toEqual(['Take care, Ada!']);
  });

  it('bad variables are 400 with every problem, path first', async () => {
    const assistantId = await newAssistant();
    const cases: [unknown, string[]][] = [
      [{ v: null }, ['variables.v: must be a string, a number or a boolean, not null']],
      [{ v: ['x'] }, ['variables.v: must be a string, a number or a boolean, not an array']],
      [{ v: 'x'.repeat(2_001) }, ['variables.v: must be at most 2000 characters long']],
      [{ ['a'.repeat(65)]: 'x' }, [`variables.${'a'.repeat(65)}: a variable name is 1 to 64 of A-Z, a-z, 0-9, _, . and -, not starting with a digit, . or -`]],
      [{ 'has space': 'x' }, ['variables["has space"]: a variable name is 1 to 64 of A-Z, a-z, 0-9, _, . and -, not starting with a digit, . or -']],
      [{ '': 'x' }, ['variables[""]: a variable name is 1 to 64 of A-Z, a-z, 0-9, _, . and -, not starting with a digit, . or -']],
      [Object.fromEntries(Array.from({ length: 101 }, (_, i) => [`v${i}`, i])), ['variables: at most 100 variables (101 given)']],
      [
        { '-x': { a: 1 }, ok: 'fine' },
        [
          'variables["-x"]: must be a string, a number or a boolean, not an object',
          'variables["-x"]: a variable name is 1 to 64 of A-Z, a-z, 0-9, _, . and -, not starting with a digit, . or -',
        ],
      ],
      [{ nul: 'a\u0000b' }, ['variables.nul: must not contain the NUL character (\\u0000)']],
    ];
    for (const [variables, details] of cases) {
      const r = await http('POST', '/chats', { assistant_id: assistantId, variables });
      expect(r.status, JSON.stringify(variables).slice(0, 200)).toBe(400);
      expect(r.json).toEqual({ error: 'Invalid request', message: expect.any(String), details });
    }
    const huge = await http('POST', '/chats', `{"assistant_id":"${assistantId}","variables":{"big":1e400}}`);
    expect(huge.status).toBe(400);
    expect(huge.json.details).toEqual([expect.stringMatching(/^variables\.big: must be a finite number/)]);

    const limits = Object.fromEntries(Array.from({ length: 100 }, (_, i) => [`v${i}`, 'x'.repeat(2_000)]));
    const atTheLimits = await http('POST', '/chats', { assistant_id: assistantId, variables: { ...limits, ['a'.repeat(64)]: 1 } });
    expect(atTheLimits.status).toBe(400); // 101 names
    delete limits.v0;
    expect((await http('POST', '/chats', { assistant_id: assistantId, variables: { ...limits, ['a'.repeat(64)]: 1 } })).status).toBe(201);
  });

  it('the OpenAPI document describes the variables and their limits', async () => {
    const doc = (await http('GET', '/openapi.json')).json;
    const body = doc.paths['/chats'].post.requestBody.content['application/json'].schema;
    const variables = body.properties?.variables ?? doc.components?.schemas?.[body.$ref?.split('/').pop()]?.properties?.variables;
    expect(JSON.stringify(variables)).toContain('at most 100');
  });
});

describe('requests', () => {
  it('bad bodies are 400 with path-first details', async () => {
    const assistantId = await newAssistant();
    const cases: [unknown, string[]][] = [
      [{}, ['assistant_id: required']],
      [{ assistant_id: 'nope' }, ['assistant_id: must be a UUID']],
      [{ assistant_id: assistantId, colour: 'red' }, ['colour: unknown field']],
      [{ assistant_id: assistantId, workflow_id: 7 }, ['workflow_id: must be a string, not a number']],
      [{ assistant_id: assistantId, variables: { name: { first: 'Ada' } } }, ['variables.name: must be a string, a number or a boolean, not an object']],
      [{ assistant_id: assistantId, variables: ['a'] }, ['variables: must be an object, not an array']],
      [
        { assistant_id: assistantId, variables: { '1st': 'x' } },
        ['variables["1st"]: a variable name is 1 to 64 of A-Z, a-z, 0-9, _, . and -, not starting with a digit, . or -'],
      ],
    ];
    for (const [body, details] of cases) {
      const r = await http('POST', '/chats', body);
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.json).toEqual({ error: 'Invalid request', message: expect.any(String), details });
    }
    expect((await http('POST', '/chats', '{"assistant_id":')).json).toMatchObject({ error: 'Invalid request', details: ['body: malformed JSON'] });

    const chat = await startChat({ assistant_id: assistantId });
    for (const [body, detail] of [
      [{}, 'text: '],
      [{ text: '' }, 'text: '],
      [{ text: '   ' }, 'text: must not be blank'],
      [{ text: 'x'.repeat(4_001) }, 'text: '],
      [{ text: 'hi', extra: true }, 'extra'],
      [{ text: 'nul \u0000' }, 'text: must not contain the NUL character'],
    ] as [unknown, string][]) {
      const r = await http('POST', `/chats/${chat.id}/messages`, body);
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.json.details.some((d: string) => d.startsWith(detail) || d.includes(detail)), JSON.stringify(r.json)).toBe(true);
    }
    expect((await http('POST', `/chats/${chat.id}/messages`, { text: 'x'.repeat(4_000) })).status).toBe(200);
  });

  it('an unknown assistant or workflow, or another organization\'s, is a 400 naming the field', async () => {
    const unknown = '00000000-0000-4000-8000-000000000000';
    const r = await http('POST', '/chats', { assistant_id: unknown, workflow_id: unknown });
    expect(r.status).toBe(400);
    expect(r.json).toEqual({
      error: 'Invalid request',
      message: expect.any(String),
      details: [`assistant_id: no assistant with id "${unknown}"`, `workflow_id: no workflow with id "${unknown}"`],
    });
    const mine = await newAssistant();
    const theirs = await http('POST', '/assistants', sandboxAssistant(), otherKey);
    const other = await http('POST', '/chats', { assistant_id: theirs.json.assistant.id }, s.key);
    expect(other.status).toBe(400);
    expect(other.json.details).toEqual([`assistant_id: no assistant with id "${theirs.json.assistant.id}"`]);
    const theirFlow = await http('POST', '/workflows', { name: 'Theirs', definition: frontDeskWorkflow() }, otherKey);
    const flow = await http('POST', '/chats', { assistant_id: mine, workflow_id: theirFlow.json.workflow.id });
    expect(flow.json.details).toEqual([`workflow_id: no workflow with id "${theirFlow.json.workflow.id}"`]);
  });

  it("another organization's chat, an unknown id and a non-UUID id are 404", async () => {
    const chat = await startChat({ assistant_id: await newAssistant() });
    expect((await http('GET', `/chats/${chat.id}`, undefined, otherKey)).status).toBe(404);
    const post = await http('POST', `/chats/${chat.id}/messages`, { text: 'hi' }, otherKey);
    expect(post.status).toBe(404);
    expect(post.json.error).toBe('Not found');
    expect((await http('GET', '/chats', undefined, otherKey)).json.chats.map((c: any) => c.id)).not.toContain(chat.id);
    expect((await http('GET', '/chats/00000000-0000-4000-8000-000000000000')).status).toBe(404);
    expect((await http('GET', '/chats/not-a-uuid')).status).toBe(404);
    expect((await http('POST', '/chats/not-a-uuid/messages', { text: 'hi' })).status).toBe(404);
    expect((await http('GET', `/chats/${chat.id}`, undefined, 'sk_live_wrong')).status).toBe(401);
  });

  it('GET /chats lists the newest first, limit 1 to 100', async () => {
    const assistantId = await newAssistant();
    const a = await startChat({ assistant_id: assistantId });
    await new Promise((r) => setTimeout(r, 5));
    const b = await startChat({ assistant_id: assistantId });
    const list = await http('GET', '/chats?limit=2');
    expect(list.status).toBe(200);
    expect(list.json.chats.map((c: any) => c.id)).toEqual([b.id, a.id]);
    const all = (await http('GET', '/chats')).json.chats;
    const created = all.map((c: any) => c.created_at);
    expect(created).toEqual([...created].sort().reverse());
    expect((await http('GET', '/chats?limit=0')).json.details).toEqual([expect.stringMatching(/^query\.limit: /)]);
    expect((await http('GET', '/chats?limit=101')).status).toBe(400);
  });

  it('the chat endpoints are in the OpenAPI document', async () => {
    const doc = await http('GET', '/openapi.json');
    expect(Object.keys(doc.json.paths)).toEqual(expect.arrayContaining(['/chats', '/chats/{id}', '/chats/{id}/messages']));
  });
});
