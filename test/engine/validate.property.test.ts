/**
 * Property tests of validateDefinition: it never throws, it accepts every valid graph, and it
 * rejects a valid graph with one injected fault with a detail about the fault's place.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { WorkflowDefinition, type NodeType, type WorkflowEdge, type WorkflowNode } from '../../engine/schema.js';
import { MAX_DETAILS, validateDefinition } from '../../engine/validate.js';

type Loose = Record<string, any>;

/** A detail is about `path` itself or something under it. */
const isAbout = (detail: string, path: string) =>
  detail.startsWith(`${path}:`) || detail.startsWith(`${path}.`) || detail.startsWith(`${path}[`);

/**
 * Every detail starts with a JSON path (or is the final "... and N more problems"); a node or an
 * edge in it may be named: `nodes[2] (booking)`, `edges[0] (a → "has space")`.
 */
const QUOTED_KEY = String.raw`\["(?:[^"\\]|\\.)*"\]`;
const ID = String.raw`(?:[A-Za-z0-9_-]{1,64}|"(?:[^"\\]|\\.)*")`;
const NAME = String.raw`(?: \((${ID}(?: → ${ID})?)\))?`;
const PATH_FIRST = new RegExp(
  String.raw`^(?:definition|\(root\)|(?:[A-Za-z_$][\w$]*|${QUOTED_KEY})(?:\[\d+\]${NAME}|\.[A-Za-z_$][\w$]*|${QUOTED_KEY})*): \S|^\.\.\. and \d+ more problems?$`,
);
/** The element a detail starts with, and the name it gives it (undefined: none). */
const ELEMENT_FIRST = new RegExp(String.raw`^(nodes|edges)\[(\d+)\]${NAME}[.:[]`);

/** How a detail must name `nodes[i]` or `edges[j]` of `input`: by its id, or by its from → to. */
function expectedName(input: unknown, list: 'nodes' | 'edges', index: number): string | undefined {
  const own = (value: unknown, key: PropertyKey): unknown =>
    typeof value === 'object' && value !== null && Object.hasOwn(value, key) ? (value as Loose)[key as string] : undefined;
  const show = (id: string) =>
    /^[A-Za-z0-9_-]{1,64}$/.test(id) ? id : JSON.stringify(id.length > 64 ? `${id.slice(0, 64)}…` : id);
  const array = own(input, list);
  const element = Array.isArray(array) ? own(array, index) : undefined;
  if (Array.isArray(element)) return undefined;
  if (list === 'nodes') {
    const id = own(element, 'id');
    return typeof id === 'string' ? show(id) : undefined;
  }
  const [from, to] = [own(element, 'from'), own(element, 'to')];
  return typeof from === 'string' && typeof to === 'string' ? `${show(from)} → ${show(to)}` : undefined;
}

function checkShape(input: unknown): void {
  const result = validateDefinition(input);
  if (result.ok) {
    expect(WorkflowDefinition.safeParse(result.definition).success).toBe(true);
    return;
  }
  expect(result.details.length).toBeGreaterThan(0);
  expect(result.details.length).toBeLessThanOrEqual(MAX_DETAILS);
  expect(new Set(result.details).size).toBe(result.details.length);
  for (const detail of result.details) {
    expect(detail).toMatch(PATH_FIRST);
    expect(detail).not.toMatch(/Invalid input|Invalid option|Too big|Too small|Unrecognized key/);
    const element = ELEMENT_FIRST.exec(detail);
    if (element) {
      const [, list, index, name] = element;
      expect(name, detail).toBe(expectedName(input, list as 'nodes' | 'edges', Number(index)));
    }
  }
}

// ---------------------------------------------------------------------------------------------
// (a) Arbitrary values

const NODE_TYPES: NodeType[] = ['conversation', 'tool', 'transfer', 'end'];
const FIELD_NAMES = [
  'id', 'type', 'first_line', 'instructions', 'global', 'global_description', 'tool_name', 'url',
  'arguments', 'destination', 'llm_config', 'tts_config', 'stt_config', 'speech_config', 'from',
  'to', 'description', 'message', '__proto__', 'constructor', 'toString', 'provider', 'voice_id',
];
const smallId = fc.oneof(
  fc.constantFrom('a', 'b', 'c', '__proto__', 'constructor', 'toString'),
  fc.string({ maxLength: 6 }),
);
const garbage = fc.oneof(
  { depthSize: 'small' },
  fc.anything({ maxDepth: 3, withBigInt: true, withDate: true, withMap: true, withSet: true, withNullPrototype: true, withSparseArray: true, withTypedArray: true, withBoxedValues: true }),
  fc.constantFrom(null, undefined, '', ' ', 0, -1, 1.5, true, 'https://x.example', '+14155550123', 'openai', 'sandbox'),
);
const withGarbageKeys = (base: fc.Arbitrary<Record<string, unknown>>) =>
  fc.tuple(base, fc.dictionary(fc.constantFrom(...FIELD_NAMES), garbage, { maxKeys: 3 })).map(([record, extra]) => {
    const out: Record<string, unknown> = { ...record };
    for (const [key, value] of Object.entries(extra)) Object.defineProperty(out, key, { value, enumerable: true, writable: true, configurable: true });
    return out;
  });
const nodeish = fc.oneof(
  garbage,
  withGarbageKeys(
    fc.record(
      {
        id: fc.oneof(smallId, garbage),
        type: fc.oneof(fc.constantFrom(...NODE_TYPES), garbage),
        llm_config: fc.oneof(fc.record({ provider: fc.oneof(fc.constantFrom('openai', 'openai-realtime', 'nope'), garbage), model: garbage }, { requiredKeys: [] }), garbage),
        tts_config: fc.record({ provider: fc.constantFrom('openai', 'elevenlabs', 'sandbox'), voice_id: fc.oneof(fc.constantFrom('alloy', 'x'), garbage) }, { requiredKeys: [] }),
        destination: fc.oneof(fc.constantFrom('+14155550123', '123'), garbage),
        global: garbage,
      },
      { requiredKeys: [] },
    ),
  ),
);
const edgeish = fc.oneof(
  garbage,
  withGarbageKeys(fc.record({ from: fc.oneof(smallId, garbage), to: fc.oneof(smallId, garbage), description: garbage }, { requiredKeys: [] })),
);
const definitionish = withGarbageKeys(
  fc.record(
    {
      version: fc.oneof(fc.constant(1), garbage),
      entry_node: fc.oneof(smallId, garbage),
      global_prompt: garbage,
      nodes: fc.oneof(fc.array(nodeish, { maxLength: 8 }), garbage),
      edges: fc.oneof(fc.array(edgeish, { maxLength: 10 }), garbage),
    },
    { requiredKeys: [] },
  ),
);

describe('validateDefinition on arbitrary values', () => {
  it('never throws on arbitrary JSON', () => {
    fc.assert(fc.property(fc.jsonValue({ maxDepth: 6 }), checkShape), { numRuns: 150 });
  });

  it('never throws on arbitrary JavaScript values', () => {
    fc.assert(fc.property(fc.anything({ withBigInt: true, withDate: true, withMap: true, withSet: true, withNullPrototype: true, withObjectString: true, withSparseArray: true, withTypedArray: true, withBoxedValues: true }), checkShape), { numRuns: 150 });
  });

  it('never throws on definition-shaped values full of garbage', () => {
    fc.assert(fc.property(definitionish, checkShape), { numRuns: 200 });
  });
});

// ---------------------------------------------------------------------------------------------
// (b) Valid graphs

const MAX_NODES = 16;
const validId = fc.oneof(
  { weight: 8, arbitrary: fc.stringMatching(/^[A-Za-z0-9_-]{1,12}$/) },
  { weight: 1, arbitrary: fc.constantFrom('__proto__', 'constructor', 'toString', 'hasOwnProperty', 'valueOf') },
);
const llmBlock = fc.constantFrom(
  { provider: 'openai', model: 'gpt-4o' },
  { provider: 'openai' },
  { provider: 'sandbox', temperature: 0.2 },
  { provider: 'custom-llm', model: 'llama3.1:8b', url: 'http://localhost:11434/v1' },
);
const ttsBlock = fc.constantFrom(
  { provider: 'openai', voice_id: 'alloy' },
  { provider: 'elevenlabs', voice_id: 'JBFqnCBsd6RMkjVDRZzb', model: 'eleven_flash_v2_5' },
  { provider: 'sandbox' },
);
const sttBlock = fc.constantFrom(
  { provider: 'deepgram', language: 'fr' },
  { provider: 'deepgram', model: 'nova-2', language: 'zh-CN' },
  { provider: 'sandbox' },
);
const argumentValue = fc.oneof(fc.string({ maxLength: 20 }), fc.double({ noNaN: true, noDefaultInfinity: true }), fc.boolean(), fc.constant(null));
const text = fc.string({ maxLength: 30 });
const nonBlank = fc.string({ minLength: 1, maxLength: 30 }).filter((s) => s.trim() !== '');

const perNode = <T>(arb: fc.Arbitrary<T>) => fc.array(arb, { minLength: MAX_NODES, maxLength: MAX_NODES });

interface GraphOptions {
  minNodes: number;
  /** Node 0 (the entry) is a conversation node, so it has at least one way out. */
  conversationEntry: boolean;
}

function validGraph({ minNodes, conversationEntry }: GraphOptions): fc.Arbitrary<WorkflowDefinition> {
  return fc
    .record({
      n: fc.integer({ min: minNodes, max: MAX_NODES }),
      ids: fc.uniqueArray(validId, { minLength: MAX_NODES, maxLength: MAX_NODES }),
      types: perNode(fc.constantFrom<NodeType>(...NODE_TYPES)),
      parents: perNode(fc.nat()),
      global: perNode(fc.boolean()),
      globalDescription: perNode(nonBlank),
      orphan: perNode(fc.boolean()),
      extra: fc.array(fc.tuple(fc.nat(), fc.nat()), { maxLength: 30 }),
      toolEdgeDescribed: perNode(fc.boolean()),
      firstLine: perNode(fc.option(text, { nil: undefined })),
      instructions: perNode(fc.option(text, { nil: undefined })),
      llm: perNode(fc.option(llmBlock, { nil: undefined, freq: 4 })),
      tts: perNode(fc.option(ttsBlock, { nil: undefined, freq: 4 })),
      stt: perNode(fc.option(sttBlock, { nil: undefined, freq: 4 })),
      args: perNode(fc.option(fc.dictionary(fc.stringMatching(/^[a-z_]{1,8}$/), argumentValue, { maxKeys: 3 }), { nil: undefined })),
      destination: perNode(fc.stringMatching(/^\+[1-9]\d{1,14}$/)),
      url: perNode(fc.webUrl({ validSchemes: ['http', 'https'] })),
      message: fc.array(fc.option(text, { nil: undefined }), { minLength: 200, maxLength: 200 }),
      globalPrompt: fc.option(text, { nil: undefined }),
    })
    .map((r) => {
      const n = r.n;
      const types = r.types.slice(0, n);
      if (n === 1) types[0] = types[0] === 'conversation' || types[0] === 'end' ? 'end' : 'transfer';
      else if (conversationEntry) types[0] = 'conversation';
      else if (types[0] === 'end' || types[0] === 'transfer') types[0] = types[0] === 'end' ? 'conversation' : 'tool';
      const ids = r.ids.slice(0, n);
      const isGlobal = types.map((t, i) => t === 'conversation' && r.global[i]! && i % 3 === 1);
      const globalCount = isGlobal.filter(Boolean).length;
      const canLeave = (i: number) => types[i] === 'conversation' || types[i] === 'tool';

      const pairs: Array<[number, number]> = [];
      const seen = new Set<string>();
      const out = new Array<number>(n).fill(0);
      const link = (from: number, to: number) => {
        if (from === to || !canLeave(from) || seen.has(`${from}>${to}`)) return;
        seen.add(`${from}>${to}`);
        pairs.push([from, to]);
        out[from]!++;
      };
      for (let i = 1; i < n; i++) {
        // A global node may hang off nothing: node 0 is a reachable conversation node.
        if (isGlobal[i] && r.orphan[i] && types[0] === 'conversation') continue;
        const candidates = [...Array(i).keys()].filter(canLeave);
        link(candidates[r.parents[i]! % candidates.length]!, i);
      }
      for (const [a, b] of r.extra) link(a % n, b % n);
      for (let i = 0; i < n; i++) {
        const needsWayOut =
          types[i] === 'tool' || (types[i] === 'conversation' && globalCount - (isGlobal[i] ? 1 : 0) === 0);
        if (needsWayOut && out[i] === 0) link(i, (i + 1) % n);
      }

      const nodes: WorkflowNode[] = ids.map((id, i) => {
        const common = {
          id,
          ...(r.firstLine[i] === undefined ? {} : { first_line: r.firstLine[i] }),
          ...(r.llm[i] === undefined ? {} : { llm_config: { ...r.llm[i]! } }),
          ...(r.tts[i] === undefined ? {} : { tts_config: { ...r.tts[i]! } }),
          ...(r.stt[i] === undefined ? {} : { stt_config: { ...r.stt[i]! } }),
        };
        switch (types[i]!) {
          case 'conversation':
            return {
              ...common,
              type: 'conversation' as const,
              ...(r.instructions[i] === undefined ? {} : { instructions: r.instructions[i] }),
              ...(isGlobal[i] ? { global: true, global_description: r.globalDescription[i]! } : {}),
            };
          case 'tool':
            return {
              ...common,
              type: 'tool' as const,
              tool_name: `tool_${i}`,
              url: r.url[i]!,
              ...(r.args[i] === undefined ? {} : { arguments: r.args[i] }),
            };
          case 'transfer':
            return { ...common, type: 'transfer' as const, destination: r.destination[i]! };
          case 'end':
            return { ...common, type: 'end' as const };
        }
      });
      const edges: WorkflowEdge[] = pairs.map(([from, to], k) => {
        const described = types[from] === 'conversation' || out[from]! > 1 || r.toolEdgeDescribed[from]!;
        const message = r.message[k % 200];
        return {
          from: ids[from]!,
          to: ids[to]!,
          ...(described ? { description: `Take this when the caller wants ${ids[to]}.` } : {}),
          ...(message === undefined ? {} : { message }),
        };
      });
      const def: WorkflowDefinition = { version: 1, entry_node: ids[0]!, nodes, edges };
      if (r.globalPrompt !== undefined) def.global_prompt = r.globalPrompt;
      // What a client sends is JSON: no prototype tricks, no undefined fields.
      return JSON.parse(JSON.stringify(def)) as WorkflowDefinition;
    });
}

describe('validateDefinition on valid graphs', () => {
  it('accepts every generated valid graph, unchanged', () => {
    fc.assert(
      fc.property(validGraph({ minNodes: 1, conversationEntry: false }), (def) => {
        const result = validateDefinition(def);
        if (!result.ok) throw new Error(`rejected a valid graph:\n${result.details.join('\n')}\n${JSON.stringify(def)}`);
        expect(result.definition).toEqual(def);
      }),
      { numRuns: 200 },
    );
  });
});

// ---------------------------------------------------------------------------------------------
// (c) One injected fault

const FAULTS = [
  'unknown-edge-target',
  'self-loop',
  'duplicate-edge',
  'missing-description',
  'bad-e164',
  'end-outgoing',
  'unreachable-node',
  'bad-tool-url',
  'realtime-on-node',
  'speech-config-on-node',
  'unknown-field-on-node',
  'duplicate-node-id',
  'bad-version',
] as const;
type Fault = (typeof FAULTS)[number];

/** `nodes[2].url` as details write it for a valid graph's ids: `nodes[2] (lookup).url`. */
function named(def: Loose, path: string): string {
  return path.replace(/^(nodes|edges)\[(\d+)\]/, (whole, list: string, index: string) => {
    const element = def[list][Number(index)];
    return `${whole} (${list === 'nodes' ? element.id : `${element.from} → ${element.to}`})`;
  });
}

/** Applies the fault to `def` (a copy) and returns the path a detail must be about. */
function inject(def: Loose, fault: Fault, pick: number, badValue: number): string {
  const nodes = def.nodes as Loose[];
  const edges = def.edges as Loose[];
  const ids = new Set(nodes.map((n) => n.id as string));
  const freshId = (base: string) => {
    let id = base;
    while (ids.has(id)) id += '_';
    ids.add(id);
    return id;
  };
  const entry = nodes[0]!; // a conversation node
  const r = pick % nodes.length;
  const addNode = (node: Loose) => nodes.push(node) - 1;
  const addEdge = (e: Loose) => edges.push(e) - 1;
  const firstOfType = (type: NodeType) => nodes.findIndex((node) => node.type === type);

  switch (fault) {
    case 'unknown-edge-target':
      return `edges[${addEdge({ from: entry.id, to: freshId('billing'), description: 'Billing.' })}].to`;
    case 'self-loop': {
      const id = nodes[r]!.id;
      return `edges[${addEdge({ from: id, to: id, description: 'Again.' })}]`;
    }
    case 'duplicate-edge': {
      const original = edges[pick % edges.length]!;
      return `edges[${addEdge({ ...original })}]`;
    }
    case 'missing-description': {
      const fromConversation = edges
        .map((e, k) => [e, k] as const)
        .filter(([e]) => nodes.find((node) => node.id === e.from)?.type === 'conversation');
      if (fromConversation.length > 0) {
        const [e, k] = fromConversation[pick % fromConversation.length]!;
        delete e.description;
        return `edges[${k}].description`;
      }
      // Node 0 has no ways out (every other node is global): give it one without a description.
      return `edges[${addEdge({ from: entry.id, to: nodes[1]!.id })}].description`;
    }
    case 'bad-e164': {
      const bad = ['4155550123', '+0123456', '+1 415 555 0123', '', '+1234567890123456'][badValue % 5]!;
      const existing = firstOfType('transfer');
      if (existing >= 0) {
        nodes[existing]!.destination = bad;
        return `nodes[${existing}].destination`;
      }
      const m = addNode({ id: freshId('desk'), type: 'transfer', destination: bad });
      addEdge({ from: entry.id, to: nodes[m]!.id, description: 'Human.' });
      return `nodes[${m}].destination`;
    }
    case 'end-outgoing': {
      let m = firstOfType('end');
      if (m < 0) {
        m = addNode({ id: freshId('bye'), type: 'end' });
        addEdge({ from: entry.id, to: nodes[m]!.id, description: 'Done.' });
      }
      return `edges[${addEdge({ from: nodes[m]!.id, to: entry.id, description: 'Restart.' })}].from`;
    }
    case 'unreachable-node':
      return `nodes[${addNode({ id: freshId('island'), type: 'end' })}]`;
    case 'bad-tool-url': {
      const bad = ['ftp://example.com/x', '/relative', 'not a url', '', 'mailto:a@b.c'][badValue % 5]!;
      const existing = firstOfType('tool');
      if (existing >= 0) {
        nodes[existing]!.url = bad;
        return `nodes[${existing}].url`;
      }
      const m = addNode({ id: freshId('lookup'), type: 'tool', tool_name: 'lookup', url: bad });
      addEdge({ from: entry.id, to: nodes[m]!.id, description: 'Look up.' });
      addEdge({ from: nodes[m]!.id, to: entry.id });
      return `nodes[${m}].url`;
    }
    case 'realtime-on-node':
      nodes[r]!.llm_config = { provider: ['openai-realtime', 'sandbox-realtime'][badValue % 2] };
      return `nodes[${r}].llm_config`;
    case 'speech-config-on-node':
      nodes[r]!.speech_config = badValue % 2 === 0 ? {} : { end_call_message: 'Bye.' };
      return `nodes[${r}].speech_config`;
    case 'unknown-field-on-node': {
      const type = nodes[r]!.type as NodeType;
      const candidates = ['colour', '__proto__', ...(type === 'transfer' ? ['instructions', 'url'] : ['destination']), ...(type === 'conversation' ? ['tool_name'] : ['global'])];
      const field = candidates[badValue % candidates.length]!;
      Object.defineProperty(nodes[r], field, { value: 'x', enumerable: true, writable: true, configurable: true });
      return `nodes[${r}].${field}`;
    }
    case 'duplicate-node-id':
      return `nodes[${addNode({ id: nodes[r]!.id, type: 'end' })}].id`;
    case 'bad-version':
      def.version = [2, 0, '1', null, 1.5, undefined][badValue % 6];
      return 'version';
  }
}

describe('validateDefinition on valid graphs with one fault', () => {
  it('rejects the graph with a detail about the fault', () => {
    fc.assert(
      fc.property(
        validGraph({ minNodes: 2, conversationEntry: true }),
        fc.constantFrom(...FAULTS),
        fc.nat(),
        fc.nat(),
        (valid, fault, pick, badValue) => {
          const def = structuredClone(valid) as Loose;
          const path = named(def, inject(def, fault, pick, badValue));
          const result = validateDefinition(def);
          if (result.ok) throw new Error(`accepted a graph with fault ${fault} at ${path}`);
          const found = result.details.some((d) => isAbout(d, path));
          if (!found) {
            throw new Error(`fault ${fault}: no detail about ${path} in:\n${result.details.join('\n')}`);
          }
        },
      ),
      { numRuns: 200 },
    );
  });
});
