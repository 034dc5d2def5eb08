import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { LIMITS, WorkflowDefinition } from '../../engine/schema.js';
import { formatPath } from '../../engine/paths.js';
import { formatZodIssues, MAX_DETAILS, validateDefinition, type ValidationResult } from '../../engine/validate.js';
import {
  conversation,
  definition,
  edge,
  end,
  largeDefinition,
  tool,
  transfer,
  validDefinition,
  validDefinitionWithOverrides,
} from './fixtures.js';

type Loose = Record<string, any>;

function detailsOf(result: ValidationResult): string[] {
  if (result.ok) throw new Error('expected the definition to be rejected');
  return result.details;
}

/** The details about `path` itself or anything under it. */
function about(details: string[], path: string): string[] {
  return details.filter((d) => d.startsWith(`${path}:`) || d.startsWith(`${path}.`) || d.startsWith(`${path}[`));
}

function rejects(input: unknown, path: string, fragment?: string | RegExp): string[] {
  const details = detailsOf(validateDefinition(input));
  const found = about(details, path);
  expect(found, `no detail about ${path} in:\n${details.join('\n')}`).not.toHaveLength(0);
  if (fragment !== undefined) {
    const matches = found.filter((d) => (typeof fragment === 'string' ? d.includes(fragment) : fragment.test(d)));
    expect(matches, `no detail about ${path} matching ${String(fragment)} in:\n${details.join('\n')}`).not.toHaveLength(0);
  }
  return details;
}

function accepts(input: unknown): WorkflowDefinition {
  const result = validateDefinition(input);
  if (!result.ok) throw new Error(`expected the definition to be accepted:\n${result.details.join('\n')}`);
  return result.definition;
}

/** a (conversation) → b (conversation) → c (end), every edge described. */
function small(): Loose {
  return definition(
    [conversation('a'), conversation('b'), end('c')],
    [edge('a', 'b', 'The caller wants b.'), edge('b', 'c', 'The caller is done.')],
  );
}

describe('validateDefinition: valid definitions', () => {
  it('accepts the realistic example, with and without per-node overrides', () => {
    expect(accepts(validDefinition())).toEqual(validDefinition());
    expect(accepts(validDefinitionWithOverrides())).toEqual(validDefinitionWithOverrides());
  });

  it('accepts a single end node and a single transfer node', () => {
    accepts(definition([end('bye')], []));
    accepts(definition([transfer('human')], []));
  });

  it('accepts the 500-node / 2,000-edge definition', () => {
    const def = largeDefinition();
    expect(def.nodes).toHaveLength(LIMITS.nodes);
    expect(def.edges).toHaveLength(LIMITS.edges);
    accepts(def);
  });

  it('accepts node ids that are names of Object.prototype members', () => {
    const ids = ['__proto__', 'constructor', 'toString', 'hasOwnProperty'];
    const def = JSON.parse(
      JSON.stringify(
        definition(
          [...ids.map((id) => conversation(id)), end('valueOf')],
          [...ids.map((id, i) => edge(id, ids[i + 1] ?? 'valueOf', 'next'))],
        ),
      ),
    );
    expect(accepts(def)).toEqual(def);
  });

  it('needs no description on the only edge out of a tool node', () => {
    accepts(definition([tool('t'), end('e')], [edge('t', 'e')]));
  });

  it('lets a conversation node have no edges when another node is global', () => {
    accepts(
      definition(
        [
          conversation('a'),
          conversation('human', { global: true, global_description: 'The caller wants a person.' }),
          transfer('desk'),
        ],
        [edge('human', 'desk', 'The caller confirmed.')],
      ),
    );
  });

  it('counts a global node as reachable from every reachable conversation node', () => {
    accepts(
      definition(
        [
          tool('lookup'),
          conversation('talk'),
          conversation('faq', { global: true, global_description: 'The caller has a question.' }),
          end('bye'),
        ],
        [edge('lookup', 'talk'), edge('talk', 'bye', 'Done.'), edge('faq', 'bye', 'Done.')],
      ),
    );
  });
});

describe('validateDefinition: one rule at a time', () => {
  it('is about the whole value when it is not an object', () => {
    for (const input of [null, 42, 'definition', [], true]) {
      expect(detailsOf(validateDefinition(input))[0]).toMatch(/^definition: must be an object/);
    }
    expect(detailsOf(validateDefinition(undefined))).toEqual(['definition: required']);
  });

  it('requires version 1', () => {
    rejects({ ...small(), version: 2 }, 'version', 'version: must be 1, not 2');
    rejects({ ...small(), version: '1' }, 'version', 'must be 1');
    const { version: _, ...noVersion } = small();
    rejects(noVersion, 'version', 'version: required');
  });

  it('requires entry_node to name an existing node', () => {
    rejects({ ...small(), entry_node: 'nope' }, 'entry_node', 'entry_node: unknown node "nope"');
    rejects({ ...small(), entry_node: 'not valid!' }, 'entry_node', 'must be 1 to 64 of');
  });

  it('requires node ids of 1 to 64 of [A-Za-z0-9_-]', () => {
    const def = small();
    def.nodes[1].id = 'has space';
    rejects(def, 'nodes[1] ("has space").id', 'nodes[1] ("has space").id: must be 1 to 64');
    const long = small();
    long.nodes[2].id = 'x'.repeat(65);
    rejects(long, `nodes[2] ("${'x'.repeat(64)}…").id`);
    const empty = small();
    empty.nodes[2].id = '';
    rejects(empty, 'nodes[2] ("").id');
  });

  it('requires unique node ids', () => {
    const def = small();
    def.nodes.push(end('b'));
    rejects(def, 'nodes[3] (b).id', 'nodes[3] (b).id: duplicate node id "b" (already used by nodes[1])');
  });

  it('requires every edge to name existing nodes', () => {
    const def = small();
    def.edges.push(edge('a', 'c', 'x'), edge('b', 'billing', 'Billing question.'));
    def.edges.push(edge('ghost', 'c', 'x'));
    rejects(def, 'edges[3] (b → billing).to', 'edges[3] (b → billing).to: unknown node "billing"');
    rejects(def, 'edges[4] (ghost → c).from', 'edges[4] (ghost → c).from: unknown node "ghost"');
  });

  it('refuses an edge from a node to itself', () => {
    const def = small();
    def.edges.push(edge('b', 'b', 'Again.'));
    rejects(def, 'edges[2] (b → b)', /^edges\[2\] \(b → b\): leads from "b" back to itself/);
  });

  it('refuses two edges with the same from and to', () => {
    const def = small();
    def.edges.push(edge('a', 'b', 'Also b.'));
    rejects(def, 'edges[2] (a → b)', 'edges[2] (a → b): duplicate of edges[0] (same from "a" and to "b")');
  });

  it('requires a description on every edge leaving a conversation node', () => {
    const def = small();
    delete def.edges[1].description;
    rejects(def, 'edges[1] (b → c).description', 'edges[1] (b → c).description: required on an edge leaving a conversation node ("b")');
    const blank = small();
    blank.edges[0].description = '   ';
    rejects(blank, 'edges[0] (a → b).description', 'required');
  });

  it('requires a description on every edge leaving a node with more than one way out', () => {
    const def = definition([tool('t'), end('e1'), end('e2')], [edge('t', 'e1'), edge('t', 'e2', 'Not found.')]);
    const details = rejects(def, 'edges[0] (t → e1).description', 'more than one outgoing edge ("t" has 2)');
    expect(about(details, 'edges[1] (t → e2)')).toEqual([]);
  });

  it('refuses outgoing edges from end and transfer nodes', () => {
    const def = small();
    def.nodes.push(transfer('desk'));
    def.edges.push(edge('a', 'desk', 'Human.'), edge('c', 'a', 'Restart.'), edge('desk', 'b', 'Back.'));
    rejects(def, 'edges[3] (c → a).from', 'edges[3] (c → a).from: "c" is an end node, which cannot have outgoing edges');
    rejects(def, 'edges[4] (desk → b).from', '"desk" is a transfer node');
  });

  it('requires at least one way out of a tool node', () => {
    const def = small();
    def.nodes.push(tool('t'));
    def.edges.push(edge('b', 't', 'Look up.'));
    rejects(def, 'nodes[3] (t)', 'nodes[3] (t): a tool node needs at least one outgoing edge');
  });

  it('requires at least one way out of a conversation node unless there is a global node', () => {
    const def = small();
    def.nodes.push(conversation('stuck'));
    def.edges.push(edge('b', 'stuck', 'Stuck.'));
    rejects(def, 'nodes[3] (stuck)', 'nodes[3] (stuck): a conversation node needs at least one outgoing edge');
    // A global node is no way out of itself.
    const lonely = definition(
      [conversation('a', { global: true, global_description: 'Always.' })],
      [],
    );
    rejects(lonely, 'nodes[0] (a)', 'needs at least one outgoing edge');
  });

  it('requires every node to be reachable from entry_node', () => {
    const def = small();
    def.nodes.push(end('island'));
    rejects(def, 'nodes[3] (island)', 'nodes[3] (island): unreachable from entry_node "a"');
    // Only a reachable conversation node makes global nodes reachable.
    const noConversation = definition(
      [tool('t'), end('e'), conversation('g', { global: true, global_description: 'Help.' })],
      [edge('t', 'e'), edge('g', 'e', 'Done.')],
    );
    rejects(noConversation, 'nodes[2] (g)', 'unreachable');
  });

  it('allows global only on conversation nodes, with a non-empty global_description', () => {
    const def = small();
    def.nodes.push({ ...tool('t'), global: true });
    def.edges.push(edge('b', 't', 'Look up.'), edge('t', 'c'));
    rejects(def, 'nodes[3] (t).global', 'nodes[3] (t).global: not allowed on a tool node (only conversation nodes may be global)');
    const noDescription = small();
    noDescription.nodes[1].global = true;
    rejects(noDescription, 'nodes[1] (b).global_description', 'required on a global node');
    const blank = small();
    blank.nodes[1].global = true;
    blank.nodes[1].global_description = '';
    rejects(blank, 'nodes[1] (b).global_description', 'required on a global node');
  });

  it('requires an E.164 destination on a transfer node', () => {
    const def = small();
    def.nodes.push(transfer('desk', '415-555-0123'));
    def.edges.push(edge('a', 'desk', 'Human.'));
    rejects(def, 'nodes[3] (desk).destination', 'nodes[3] (desk).destination: must be an E.164 number such as +14155550123');
    const missing = small();
    missing.nodes.push({ id: 'desk', type: 'transfer' });
    missing.edges.push(edge('a', 'desk', 'Human.'));
    rejects(missing, 'nodes[3] (desk).destination', 'nodes[3] (desk).destination: required');
  });

  it('checks a tool node: tool_name, url and arguments', () => {
    const withTool = (extra: Loose) => {
      const def = small();
      def.nodes.push({ ...tool('t'), ...extra });
      def.edges.push(edge('b', 't', 'Look up.'), edge('t', 'c'));
      return def;
    };
    rejects(withTool({ tool_name: '' }), 'nodes[3] (t).tool_name', 'must be 1 to 64 of');
    rejects(withTool({ tool_name: 'look up' }), 'nodes[3] (t).tool_name', 'must be 1 to 64 of');
    rejects(withTool({ tool_name: undefined }), 'nodes[3] (t).tool_name', 'required');
    for (const url of ['ftp://example.com/x', '/relative/path', 'not a url', '']) {
      rejects(withTool({ url }), 'nodes[3] (t).url', 'must be an absolute http(s) URL');
    }
    rejects(withTool({ arguments: { ok: 'yes', nested: { a: 1 } } }), 'nodes[3] (t).arguments.nested', 'must be a string, number, boolean or null, not an object');
    rejects(withTool({ arguments: { list: [1] } }), 'nodes[3] (t).arguments.list', 'not an array');
    rejects(withTool({ arguments: JSON.parse('{"__proto__": "x"}') }), 'nodes[3] (t).arguments.__proto__', 'not allowed as an argument name');
    rejects(withTool({ arguments: 'a=1' }), 'nodes[3] (t).arguments', 'must be an object');
  });

  it('checks node config blocks against the catalog', () => {
    const withBlock = (key: string, block: unknown) => {
      const def = small();
      def.nodes[1][key] = block;
      return def;
    };
    rejects(withBlock('llm_config', { model: 'gpt-4o' }), 'nodes[1] (b).llm_config.provider', 'required (one of "openai"');
    rejects(withBlock('llm_config', { provider: 'acme-llm' }), 'nodes[1] (b).llm_config.provider', 'unknown llm provider "acme-llm"');
    rejects(withBlock('llm_config', { provider: 'openai', model: 'gpt-3' }), 'nodes[1] (b).llm_config.model', 'unknown model "gpt-3"');
    rejects(withBlock('llm_config', { provider: 'custom-llm' }), 'nodes[1] (b).llm_config.url', 'required for provider "custom-llm"');
    rejects(withBlock('stt_config', { provider: 'deepgram', language: 'xx' }), 'nodes[1] (b).stt_config.language', 'unknown language "xx"');
    // a model named like a prototype property has no language list: refused as an unknown model, never a crash
    for (const model of ['constructor', 'toString', '__proto__']) {
      rejects(withBlock('stt_config', { provider: 'deepgram', model, language: 'en' }), 'nodes[1] (b).stt_config.model', `unknown model "${model}"`);
    }
    rejects(withBlock('tts_config', { provider: 'openai', voice_id: 'rachel' }), 'nodes[1] (b).tts_config.voice_id', 'unknown voice "rachel"');
    rejects(withBlock('tts_config', 'openai'), 'nodes[1] (b).tts_config', 'must be an object');
    accepts(withBlock('tts_config', { provider: 'elevenlabs', voice_id: 'any-voice-id' }));
  });

  it('refuses a realtime provider in a node llm_config', () => {
    const def = small();
    def.nodes[0].llm_config = { provider: 'openai-realtime' };
    rejects(def, 'nodes[0] (a).llm_config.provider', 'realtime models cannot be set per node');
  });

  it('refuses speech_config on a node', () => {
    const def = small();
    def.nodes[2].speech_config = { end_call_message: 'Bye' };
    const details = rejects(def, 'nodes[2] (c).speech_config');
    expect(details).toContain('nodes[2] (c).speech_config: not allowed on a node (speech settings belong to the assistant)');
  });

  it('refuses fields that do not belong to the node type', () => {
    const def = small();
    def.nodes[2].destination = '+14155550123';
    def.nodes[0].tool_name = 'x';
    def.nodes[1].colour = 'blue';
    const details = rejects(def, 'nodes[2] (c).destination', 'nodes[2] (c).destination: not allowed on an end node (it belongs to transfer nodes)');
    expect(about(details, 'nodes[0] (a).tool_name')[0]).toMatch(/^nodes\[0\] \(a\)\.tool_name: not allowed on a conversation node/);
    expect(about(details, 'nodes[1] (b).colour')[0]).toMatch(/^nodes\[1\] \(b\)\.colour: unknown field/);
    const onTool = small();
    onTool.nodes.push({ ...tool('t'), instructions: 'Be nice.' });
    onTool.edges.push(edge('b', 't', 'Look up.'), edge('t', 'c'));
    rejects(onTool, 'nodes[3] (t).instructions', 'not allowed on a tool node (it belongs to conversation nodes)');
  });

  it('requires a known node type', () => {
    const def = small();
    def.nodes[2].type = 'hangup';
    rejects(def, 'nodes[2] (c).type', 'must be one of "conversation", "tool", "transfer", "end", not "hangup"');
    delete def.nodes[2].type;
    rejects(def, 'nodes[2] (c).type', 'nodes[2] (c).type: required (one of');
  });

  it('names unknown top-level and edge fields', () => {
    const def: Loose = { ...small(), name: 'x' };
    def.edges[0].condition = 'always';
    const details = rejects(def, 'name', /^name: unknown field/);
    expect(about(details, 'edges[0] (a → b).condition')[0]).toMatch(/unknown field \(an edge takes from, to, description, message\)/);
    rejects(JSON.parse(`{"__proto__": {"polluted": true}, ${JSON.stringify(small()).slice(1)}`), '__proto__', 'unknown field');
    expect(({} as Loose).polluted).toBeUndefined();
  });

  it('requires at least one node', () => {
    rejects(definition([], [], { entry_node: 'a' }), 'nodes', 'nodes: must not be empty');
  });

  it('reports type problems in the words of the field', () => {
    const def = small();
    def.nodes[0].first_line = 5;
    def.edges[0].message = ['hi'];
    def.global_prompt = { text: 'x' };
    const details = detailsOf(validateDefinition(def));
    expect(details).toContain('nodes[0] (a).first_line: must be a string, not 5');
    expect(details).toContain('edges[0] (a → b).message: must be a string, not an array');
    expect(details).toContain('global_prompt: must be a string, not an object');
    expect(details.join('\n')).not.toMatch(/Invalid input|Too big|Too small/);
  });

  it('enforces the limits: 500 nodes, 2,000 edges, 20,000 characters per text field', () => {
    const tooMany = largeDefinition(501, 10);
    rejects(tooMany, 'nodes', 'nodes: too many nodes (501); the limit is 500');
    const tooManyEdges = largeDefinition(500, 2000) as Loose;
    tooManyEdges.edges.push(edge('n0', 'n499', 'One more.'));
    rejects(tooManyEdges, 'edges', 'edges: too many edges (2001); the limit is 2000');
    const long = small();
    long.nodes[0].instructions = 'x'.repeat(LIMITS.textLength + 1);
    long.edges[1].message = 'y'.repeat(LIMITS.textLength + 1);
    long.global_prompt = 'z'.repeat(LIMITS.textLength + 1);
    rejects(long, 'nodes[0] (a).instructions', 'must be at most 20000 characters long');
    rejects(long, 'edges[1] (b → c).message', 'at most 20000 characters');
    rejects(long, 'global_prompt', 'at most 20000 characters');
    const longArgument = definition([tool('t'), end('e')], [edge('t', 'e')]) as Loose;
    longArgument.nodes[0].arguments = { note: 'n'.repeat(LIMITS.textLength + 1) };
    rejects(longArgument, 'nodes[0] (t).arguments.note', 'at most 20000 characters');
    accepts({ ...small(), global_prompt: 'z'.repeat(LIMITS.textLength) });
  });
});

describe('validateDefinition: details name the node or edge they are about', () => {
  /** greet → booking → bye, and an orphan end node at index 3. */
  const withOrphan = (): Loose =>
    definition(
      [conversation('greet'), conversation('booking'), end('bye'), end('orphan')],
      [edge('greet', 'booking', 'The caller wants to book.'), edge('booking', 'bye', 'Booked.')],
    );

  it('names a node by its id', () => {
    expect(detailsOf(validateDefinition(withOrphan()))).toEqual(['nodes[3] (orphan): unreachable from entry_node "greet"']);
  });

  it('names the node on a path deeper than the node', () => {
    const def = withOrphan();
    def.nodes[1].llm_config = { provider: 'openai', model: 'gpt-3' };
    def.nodes[1].first_line = 5;
    const details = detailsOf(validateDefinition(def));
    expect(details).toContain('nodes[1] (booking).first_line: must be a string, not 5');
    expect(details.some((d) => d.startsWith('nodes[1] (booking).llm_config.model: unknown model "gpt-3" for provider "openai"'))).toBe(true);
  });

  it('names an edge by its from → to', () => {
    const def = withOrphan();
    def.edges.push(edge('greet', 'billing', 'Billing.'), edge('booking', 'greet'));
    const details = detailsOf(validateDefinition(def));
    expect(details).toContain('edges[2] (greet → billing).to: unknown node "billing"');
    expect(details).toContain('edges[3] (booking → greet).description: required on an edge leaving a conversation node ("booking")');
  });

  it('keeps the bare index for an element without a string id, or without string from and to', () => {
    const def = withOrphan();
    def.nodes.push({ type: 'end' }, { id: 7, type: 'end' }, 'bye');
    def.edges.push({ from: 'greet' }, { from: 'greet', to: 3, description: 'x' });
    const details = detailsOf(validateDefinition(def));
    expect(details).toContain('nodes[4].id: required');
    expect(details).toContain('nodes[5].id: must be a string, not 7');
    expect(details).toContain('nodes[6]: must be an object, not "bye"');
    expect(details).toContain('edges[2].to: required');
    expect(details).toContain('edges[3].to: must be a string, not 3');
  });

  it('quotes an id that is not a valid node id, cut short', () => {
    const def = withOrphan();
    def.nodes[3].id = 'the (odd) one';
    def.edges.push(edge('greet', 'x'.repeat(100), 'Far.'));
    const details = detailsOf(validateDefinition(def));
    expect(details).toContain('nodes[3] ("the (odd) one").id: must be 1 to 64 of A-Z, a-z, 0-9, _ and -');
    expect(details).toContain(`edges[2] (greet → "${'x'.repeat(64)}…").to: unknown node "${'x'.repeat(64)}…"`);
  });
});

describe('validateDefinition: many problems at once', () => {
  it('returns every problem in one pass: types, graph and catalog together', () => {
    const def: Loose = {
      version: 3,
      entry_node: 'greeting',
      colour: 'blue',
      nodes: [
        conversation('greeting', { llm_config: { provider: 'openai-realtime' } as never }),
        transfer('desk', 'call me'),
        end('bye', { speech_config: {} } as never),
        { ...end('bye') },
        tool('lookup', { url: 'file:///etc/passwd' }),
        conversation('island'),
        { id: 'weird', type: 'hangup' },
      ],
      edges: [
        edge('greeting', 'desk', 'Human.'),
        edge('greeting', 'billing', 'Billing.'),
        edge('greeting', 'lookup'),
        edge('greeting', 'greeting', 'Again.'),
        edge('greeting', 'desk', 'Human again.'),
        edge('bye', 'greeting', 'Restart.'),
      ],
    };
    const details = detailsOf(validateDefinition(def));
    const expected = [
      'version',
      'entry_node',
      'colour',
      'nodes[0] (greeting).llm_config.provider',
      'nodes[1] (desk).destination',
      'nodes[2] (bye).speech_config',
      'nodes[3] (bye).id',
      'nodes[4] (lookup).url',
      'nodes[4] (lookup)', // no way out of the tool node
      'nodes[5] (island)', // unreachable (and no way out)
      'nodes[6] (weird).type',
      'edges[1] (greeting → billing).to',
      'edges[2] (greeting → lookup).description',
      'edges[3] (greeting → greeting)',
      'edges[4] (greeting → desk)',
      'edges[5] (bye → greeting).from',
    ];
    for (const path of expected) {
      if (path === 'entry_node') continue; // entry_node is fine here
      expect(about(details, path), `${path} in:\n${details.join('\n')}`).not.toHaveLength(0);
    }
    expect(details).toContain('edges[1] (greeting → billing).to: unknown node "billing"');
    expect(details).toContain('nodes[1] (desk).destination: must be an E.164 number such as +14155550123');
    expect(new Set(details).size).toBe(details.length);
  });

  it('keeps details grouped in the order of the definition', () => {
    const def = small();
    def.edges[1].to = 'nowhere';
    def.nodes[2].colour = 1;
    def.version = 9;
    def.nodes[0].first_line = 1;
    const details = detailsOf(validateDefinition(def));
    const firstIndex = (prefix: string) => details.findIndex((d) => d.startsWith(prefix));
    expect(firstIndex('version')).toBeLessThan(firstIndex('nodes[0]'));
    expect(firstIndex('nodes[0]')).toBeLessThan(firstIndex('nodes[2]'));
    expect(firstIndex('nodes[2]')).toBeLessThan(firstIndex('edges[1]'));
  });

  it('caps the list and says how many more there were', () => {
    const def = largeDefinition() as Loose;
    for (const e of def.edges) {
      e.to = `${e.to}_gone`;
      delete e.description;
    }
    const details = detailsOf(validateDefinition(def));
    expect(details).toHaveLength(MAX_DETAILS);
    expect(details[MAX_DETAILS - 1]).toMatch(/^\.\.\. and \d+ more problems$/);
  });
});

describe('validateDefinition: never throws', () => {
  it('survives hostile values', () => {
    const throwingGetter = Object.defineProperty({}, 'version', {
      enumerable: true,
      get() {
        throw new Error('boom');
      },
    });
    const hostileProxy = new Proxy({}, {
      ownKeys() {
        throw new Error('boom');
      },
      get() {
        throw new Error('boom');
      },
    });
    let deep: unknown = 'bottom';
    for (let i = 0; i < 100_000; i++) deep = { a: deep };
    let deepArray: unknown = [];
    for (let i = 0; i < 100_000; i++) deepArray = [deepArray];
    const deepArgument = { ...small(), nodes: [...small().nodes, { ...tool('t'), arguments: { deep } }] };
    const deepTools = small();
    deepTools.nodes[0].llm_config = {
      provider: 'openai',
      tools: [{ name: 'x', parameters: { type: 'object', properties: { p: deep } } }],
    };
    const inputs = [
      throwingGetter,
      hostileProxy,
      deep,
      deepArray,
      deepArgument,
      deepTools,
      Object.create(null),
      new Date(),
      new Map([['version', 1]]),
      new Uint8Array(4),
      Symbol('x'),
      10n,
      () => small(),
      { ...small(), nodes: new Array(5) },
      { ...small(), nodes: Array.from({ length: 50_000 }, () => ({})) },
      { ...small(), edges: Array.from({ length: 50_000 }, (_, i) => ({ from: `n${i}`, to: 'a' })) },
    ];
    for (const input of inputs) {
      const result = validateDefinition(input);
      if (result.ok) throw new Error(`should not be accepted: input #${inputs.indexOf(input)}`);
      expect(result.details.length).toBeGreaterThan(0);
      expect(result.details.length).toBeLessThanOrEqual(MAX_DETAILS);
    }
    // A null-prototype object is still a plain JSON object.
    accepts(Object.assign(Object.create(null), small()));
    rejects(deepTools, 'nodes[0] (a).llm_config.tools[0].parameters', 'nested more than 32 levels deep');
    delete deepTools.nodes[0].llm_config.tools[0].parameters.properties;
    accepts(deepTools);
    const protoParameter = small();
    protoParameter.nodes[0].llm_config = {
      provider: 'openai',
      tools: [{ name: 'x', parameters: JSON.parse('{"type":"object","properties":{"__proto__":{"type":"string"}}}') }],
    };
    rejects(protoParameter, 'nodes[0] (a).llm_config.tools[0].parameters.properties.__proto__', 'not allowed as a parameter name');
  });
});

describe('validateDefinition: speed', () => {
  it('validates a 500-node / 2,000-edge definition well under 20 ms', () => {
    const json = JSON.stringify(largeDefinition());
    const inputs = Array.from({ length: 25 }, () => JSON.parse(json));
    const times: number[] = [];
    for (const [i, input] of inputs.entries()) {
      const start = performance.now();
      const result = validateDefinition(input);
      if (i >= 5) times.push(performance.now() - start);
      expect(result.ok).toBe(true);
    }
    times.sort((a, b) => a - b);
    const median = times[Math.floor(times.length / 2)]!;
    console.log(`validation of 500 nodes / 2,000 edges: median ${median.toFixed(2)} ms over ${times.length} runs`);
    expect(median).toBeLessThan(20);
  });
});

describe('formatPath', () => {
  const def = definition([conversation('greet'), end('bye')], [edge('greet', 'bye', 'Done.')]);

  it('writes the path alone without the value it points into', () => {
    expect(formatPath(['nodes', 0, 'llm_config', 'model'])).toBe('nodes[0].llm_config.model');
    expect(formatPath(['arguments', 'first name'])).toBe('arguments["first name"]');
  });

  it('names nodes and edges wherever the path meets them', () => {
    expect(formatPath(['nodes', 1], def)).toBe('nodes[1] (bye)');
    expect(formatPath(['edges', 0, 'description'], def)).toBe('edges[0] (greet → bye).description');
    expect(formatPath(['definition', 'nodes', 0, 'instructions'], { definition: def })).toBe('definition.nodes[0] (greet).instructions');
    // Past the end of the array, or not an array at all: the bare index.
    expect(formatPath(['nodes', 5, 'id'], def)).toBe('nodes[5].id');
    expect(formatPath(['nodes', 0], { nodes: { 0: { id: 'x' } } })).toBe('nodes[0]');
  });

  it('gives no name, and does not throw, for a value that throws when read', () => {
    const hostile = { nodes: [Object.defineProperty({}, 'id', { enumerable: true, get: () => { throw new Error('boom'); } })] };
    expect(formatPath(['nodes', 0, 'id'], hostile)).toBe('nodes[0].id');
  });
});

describe('formatZodIssues', () => {
  const Body = z.strictObject({
    name: z.string().min(1).max(5),
    count: z.number().int().min(0),
    kind: z.enum(['a', 'b']),
    phone: z.string().regex(/^\+\d+$/, 'must be an E.164 number'),
    tags: z.array(z.string()).max(1),
  });

  it('turns zod issues into path-first sentences, keeping custom messages', () => {
    const result = Body.safeParse({ name: '', count: 1.5, kind: 'c', phone: '12', tags: ['x', 'y'], extra: 1, 'two words': 2 });
    expect(result.success).toBe(false);
    expect(formatZodIssues(result.error!.issues)).toEqual([
      'name: must not be empty',
      'count: must be an integer',
      'kind: must be one of "a", "b"',
      'phone: must be an E.164 number',
      'tags: must have at most 1 items',
      'extra: unknown field',
      '["two words"]: unknown field',
    ]);
  });

  it('says required for missing fields, and puts a prefix in front', () => {
    const result = Body.safeParse({});
    const details = formatZodIssues(result.error!.issues, 'query');
    expect(details).toContain('query.name: required');
    expect(details.every((d) => d.startsWith('query.'))).toBe(true);
    expect(formatZodIssues(Body.safeParse('x').error!.issues, 'body')).toEqual(['body: must be an object, not a string']);
    expect(formatZodIssues(Body.safeParse(7).error!.issues)).toEqual(['(root): must be an object, not a number']);
  });

  it('names the nodes and edges of the value the issues are about', () => {
    const Body = z.object({ definition: z.object({ nodes: z.array(z.object({ id: z.string(), prompt: z.string() })) }) });
    const body = { definition: { nodes: [{ id: 'greet', prompt: 'Hi.' }, { id: 'bye', prompt: 7 }] } };
    const issues = Body.safeParse(body).error!.issues;
    expect(formatZodIssues(issues, '', body)).toEqual(['definition.nodes[1] (bye).prompt: must be a string, not a number']);
    expect(formatZodIssues(issues)).toEqual(['definition.nodes[1].prompt: must be a string, not a number']);
  });

  it('de-duplicates', () => {
    const issues = Body.safeParse({}).error!.issues;
    expect(formatZodIssues([...issues, ...issues])).toEqual(formatZodIssues(issues));
  });
});
