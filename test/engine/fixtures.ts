/**
 * Valid workflow definitions and small builders, shared by the engine's tests and benchmarks.
 * Every function returns a fresh object: tests may mutate what they get.
 */
import type {
  ConversationNode,
  EndNode,
  ToolNode,
  TransferNode,
  WorkflowDefinition,
  WorkflowEdge,
  WorkflowNode,
} from '../../engine/schema.js';

export function conversation(id: string, extra: Partial<ConversationNode> = {}): ConversationNode {
  return { id, type: 'conversation', instructions: `You are in step ${id}.`, ...extra };
}

export function tool(id: string, extra: Partial<ToolNode> = {}): ToolNode {
  return {
    id,
    type: 'tool',
    tool_name: `tool_${id}`.slice(0, 64),
    url: 'https://tools.example.com/run',
    ...extra,
  };
}

export function transfer(id: string, destination = '+14155550123', extra: Partial<TransferNode> = {}): TransferNode {
  return { id, type: 'transfer', destination, ...extra };
}

export function end(id: string, extra: Partial<EndNode> = {}): EndNode {
  return { id, type: 'end', first_line: 'Goodbye!', ...extra };
}

export function edge(from: string, to: string, description?: string, extra: Partial<WorkflowEdge> = {}): WorkflowEdge {
  return { from, to, ...(description === undefined ? {} : { description }), ...extra };
}

/** A definition whose entry node is the first node, unless `extra.entry_node` says otherwise. */
export function definition(
  nodes: WorkflowNode[],
  edges: WorkflowEdge[],
  extra: Partial<WorkflowDefinition> = {},
): WorkflowDefinition {
  return { version: 1, entry_node: nodes[0]?.id ?? 'start', nodes, edges, ...extra };
}

/**
 * A realistic 8-node dental-clinic workflow: greeting, identify the caller, a tool lookup with two
 * ways out (found / not found), booking, a global "speak to a human" node that leads to a
 * transfer, and an end node. No per-node provider overrides.
 */
export function validDefinition(): WorkflowDefinition {
  return {
    version: 1,
    entry_node: 'greeting',
    global_prompt:
      'You are Ava, the friendly receptionist of Acme Dental. Keep answers short; this is a phone call.',
    nodes: [
      {
        id: 'greeting',
        type: 'conversation',
        first_line: 'Thanks for calling Acme Dental, this is Ava. How can I help you today?',
        instructions: 'Find out whether the caller wants to book, change or cancel an appointment.',
      },
      {
        id: 'identify_caller',
        type: 'conversation',
        first_line: 'Sure. Could I have your full name and date of birth, please?',
        instructions: 'Collect the caller\'s full name and date of birth. Spell back the name.',
      },
      {
        id: 'lookup_patient',
        type: 'tool',
        tool_name: 'lookup_patient',
        url: 'https://api.example.com/tools/lookup-patient',
        arguments: { clinic_id: 'acme-01', include_history: false, max_results: 3, referrer: null },
      },
      {
        id: 'booking',
        type: 'conversation',
        first_line: 'I found your record. What day works best for you?',
        instructions: 'Offer the next free slots and book the one the caller picks.',
      },
      {
        id: 'not_found',
        type: 'conversation',
        first_line: 'I could not find a record with those details.',
        instructions: 'Offer to try again with different details, or to end the call.',
      },
      {
        id: 'human',
        type: 'conversation',
        global: true,
        global_description: 'The caller asks to speak to a person at the front desk.',
        first_line: 'Of course.',
        instructions: 'Confirm that the caller wants to be transferred to the front desk.',
      },
      {
        id: 'front_desk',
        type: 'transfer',
        destination: '+14155550123',
        first_line: 'Connecting you to the front desk now.',
      },
      {
        id: 'goodbye',
        type: 'end',
        first_line: 'Thanks for calling Acme Dental. Goodbye!',
      },
    ],
    edges: [
      { from: 'greeting', to: 'identify_caller', description: 'The caller wants to book, change or cancel an appointment.' },
      { from: 'greeting', to: 'goodbye', description: 'The caller has no further questions.' },
      {
        from: 'identify_caller',
        to: 'lookup_patient',
        description: 'The caller gave their full name and date of birth.',
        message: 'One moment while I look you up.',
      },
      { from: 'lookup_patient', to: 'booking', description: 'A patient record was found.' },
      { from: 'lookup_patient', to: 'not_found', description: 'No patient record matches.' },
      { from: 'booking', to: 'goodbye', description: 'The appointment is booked, or the caller is done.' },
      { from: 'not_found', to: 'identify_caller', description: 'The caller wants to try different details.' },
      { from: 'not_found', to: 'goodbye', description: 'The caller wants to end the call.' },
      {
        from: 'human',
        to: 'front_desk',
        description: 'The caller confirmed they want to be transferred.',
        message: 'Sure, transferring you now.',
      },
      { from: 'human', to: 'greeting', description: 'The caller changed their mind.' },
    ],
  };
}

/** validDefinition() with per-node model, voice and transcriber overrides (pipeline assistants only). */
export function validDefinitionWithOverrides(): WorkflowDefinition {
  const def = validDefinition();
  const booking = def.nodes.find((n) => n.id === 'booking')!;
  booking.llm_config = { provider: 'openai', model: 'gpt-4.1', temperature: 0.3 };
  const notFound = def.nodes.find((n) => n.id === 'not_found')!;
  notFound.tts_config = { provider: 'openai', voice_id: 'nova' };
  const identify = def.nodes.find((n) => n.id === 'identify_caller')!;
  identify.stt_config = { provider: 'deepgram', model: 'nova-3', language: 'en-US', keyterms: ['Acme'] };
  return def;
}

/**
 * A valid definition of `nodeCount` nodes and (up to) `edgeCount` edges, every one with a
 * description: a chain of conversation and tool nodes, ten end/transfer nodes hanging off it, and
 * extra forward edges. 500 / 2,000 is the size the benchmark validates.
 */
export function largeDefinition(nodeCount = 500, edgeCount = 2000): WorkflowDefinition {
  const terminals = Math.max(1, Math.min(10, Math.floor(nodeCount / 10)));
  const body = nodeCount - terminals;
  if (body < 1) throw new Error('largeDefinition needs at least 2 nodes');
  const id = (i: number) => `n${i}`;
  const nodes: WorkflowNode[] = [];
  for (let i = 0; i < body; i++) {
    nodes.push(i % 10 === 5 ? tool(id(i), { arguments: { step: i } }) : conversation(id(i), { first_line: `Step ${i}.` }));
  }
  for (let j = 0; j < terminals; j++) {
    const i = body + j;
    nodes.push(j % 2 === 0 ? end(id(i)) : transfer(id(i), `+1415555${String(1000 + j).slice(-4)}`));
  }
  const edges: WorkflowEdge[] = [];
  const seen = new Set<string>();
  const add = (from: number, to: number) => {
    const key = `${from}>${to}`;
    if (from === to || seen.has(key) || edges.length >= edgeCount) return;
    seen.add(key);
    edges.push(edge(id(from), id(to), `The caller is done with step ${from} and wants step ${to}.`));
  };
  for (let i = 0; i + 1 < body; i++) add(i, i + 1);
  for (let j = 0; j < terminals; j++) add(j % body, body + j);
  for (let k = 2; k <= body && edges.length < edgeCount; k++) {
    for (let i = 0; i < body; i++) add(i, (i + k) % body);
  }
  return definition(nodes, edges);
}
