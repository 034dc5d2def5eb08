/**
 * Write-time validation of a workflow definition (SPEC 4.1, DECISIONS 3): an unknown JSON value
 * in, the typed definition or every problem out, each problem a sentence that starts with its
 * JSON path, nodes and edges named (`edges[3] (greet → billing).to: unknown node "billing"`;
 * paths.ts writes every path).
 *
 * The zod schema does the type checks; the graph and catalog rules run on a best-effort view of
 * the raw input, so a type problem in one place never hides a graph problem in another.
 */
import type { z } from 'zod';
import { catalogProblems, defaultCatalog, type Catalog, type ConfigBlockKind } from './catalog.js';
import { formatPath, own, quote, type Path } from './paths.js';
import {
  ConversationNode,
  EndNode,
  LIMITS,
  ToolNode,
  TransferNode,
  WARM_ONLY_MESSAGE,
  WARM_TRANSFER_FIELDS,
  WorkflowDefinition,
  WorkflowEdge,
  type NodeType,
} from './schema.js';

export type ValidationResult =
  | { ok: true; definition: WorkflowDefinition }
  | { ok: false; details: string[] };

/** At most this many entries in `details`; the last one then says how many were left out. */
export const MAX_DETAILS = 200;
/** Problems kept in memory before only counting the rest (pathological inputs). */
const MAX_COLLECTED = 5_000;
/** Deepest nesting accepted in opaque JSON (a tool's parameter schema). */
const MAX_JSON_DEPTH = 32;
/** How the definition itself is named in a detail about the whole value. */
const ROOT_LABEL = 'definition';

type Issue = z.core.$ZodIssue;

// ---------------------------------------------------------------------------------------------
// Public API

export function validateDefinition(input: unknown, catalog: Catalog = defaultCatalog): ValidationResult {
  const problems = new ProblemList(input);
  let parsed: WorkflowDefinition | undefined;
  try {
    parsed = collectProblems(input, catalog, problems);
  } catch (err) {
    // Only exotic non-JSON values (throwing getters, hostile proxies) get here.
    problems.add([], `could not be read as JSON (${err instanceof Error ? err.name : typeof err})`);
    parsed = undefined;
  }
  if (problems.isEmpty() && parsed !== undefined) return { ok: true, definition: parsed };
  const details = problems.details(MAX_DETAILS);
  return { ok: false, details: details.length > 0 ? details : [`${ROOT_LABEL}: is not valid`] };
}

/**
 * zod issues as path-first sentences for people (`name: must not be empty`), de-duplicated, in
 * order. `prefix` is put in front of every path (`body`, `query`, …); a problem with the value as
 * a whole is reported on `prefix` itself, or on `(root)`. `input`, the value the issues' paths
 * point into, names the nodes and edges on the way (`definition.nodes[2] (desk).destination: …`).
 */
export function formatZodIssues(issues: readonly Issue[], prefix = '', input?: unknown): string[] {
  const seen = new Set<string>();
  const out: string[] = [];
  for (const issue of issues) {
    for (const { path, message } of describeIssue(issue)) {
      const text = `${joinPath(prefix, formatPath(path, input)) || '(root)'}: ${message}`;
      if (!seen.has(text)) {
        seen.add(text);
        out.push(text);
      }
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// The one pass

const NODE_BLOCKS: ReadonlyArray<readonly [key: string, kind: ConfigBlockKind]> = [
  ['llm_config', 'llm'],
  ['tts_config', 'tts'],
  ['stt_config', 'stt'],
];
const BLOCK_KEYS = new Set(NODE_BLOCKS.map(([key]) => key));

/** The fields of each node type, `id` and `type` first (the order messages list them in). */
const fieldsOf = (shape: object) => new Set(['id', 'type', ...Object.keys(shape)]);
const NODE_SHAPES: Record<NodeType, ReadonlySet<string>> = {
  conversation: fieldsOf(ConversationNode.shape),
  tool: fieldsOf(ToolNode.shape),
  transfer: fieldsOf(TransferNode.shape),
  end: fieldsOf(EndNode.shape),
};
const NODE_TYPE_LIST = Object.keys(NODE_SHAPES) as NodeType[];
const ANY_NODE_FIELD = new Set(NODE_TYPE_LIST.flatMap((t) => [...NODE_SHAPES[t]]));
const DEFINITION_FIELDS = Object.keys(WorkflowDefinition.shape);
const EDGE_FIELDS = Object.keys(WorkflowEdge.shape);

interface NodeView {
  index: number;
  id: string | undefined;
  type: NodeType | undefined;
  record: Record<string, unknown> | undefined;
  global: boolean;
}

function collectProblems(
  input: unknown,
  catalog: Catalog,
  problems: ProblemList,
): WorkflowDefinition | undefined {
  const root = asRecord(input);
  const rawNodes = root ? asArray(own(root, 'nodes')) : undefined;
  const rawEdges = root ? asArray(own(root, 'edges')) : undefined;

  // 1. Types, by the schema. Oversized arrays are cut to the limit first, so that a huge
  //    array of garbage costs no more than a full-size one; the size itself is reported here.
  let forSchema: unknown = input;
  if (root && rawNodes && rawNodes.length > LIMITS.nodes) {
    problems.add(['nodes'], `too many nodes (${rawNodes.length}); the limit is ${LIMITS.nodes}`);
    forSchema = { ...(forSchema as object), nodes: rawNodes.slice(0, LIMITS.nodes) };
  }
  if (root && rawEdges && rawEdges.length > LIMITS.edges) {
    problems.add(['edges'], `too many edges (${rawEdges.length}); the limit is ${LIMITS.edges}`);
    forSchema = { ...(forSchema as object), edges: rawEdges.slice(0, LIMITS.edges) };
  }
  const result = WorkflowDefinition.safeParse(forSchema, { reportInput: true });
  if (!result.success) {
    for (const issue of result.error.issues) addSchemaIssue(issue, problems);
  }
  if (!root) return undefined;

  // 2. Nodes: ids, fields by type, config blocks against the catalog.
  const nodes: NodeView[] = [];
  const firstIndexById = new Map<string, number>();
  let globalCount = 0;
  for (let i = 0; i < (rawNodes?.length ?? 0); i++) {
    const record = asRecord(rawNodes![i]);
    const id = record && typeof own(record, 'id') === 'string' ? (own(record, 'id') as string) : undefined;
    const rawType = record ? own(record, 'type') : undefined;
    const type = NODE_TYPE_LIST.includes(rawType as NodeType) ? (rawType as NodeType) : undefined;
    const global = type === 'conversation' && own(record!, 'global') === true;
    const node: NodeView = { index: i, id, type, record, global };
    nodes.push(node);
    if (!record) continue;
    if (global) globalCount++;

    if (id !== undefined) {
      const first = firstIndexById.get(id);
      if (first === undefined) firstIndexById.set(id, i);
      else problems.add(['nodes', i, 'id'], `duplicate node id ${quote(id)} (already used by nodes[${first}])`);
    }
    checkNodeFields(node, problems);
    for (const [key, kind] of NODE_BLOCKS) {
      const block = own(record, key);
      if (asRecord(block)) {
        const path = problems.format(['nodes', i, key]);
        problems.addText(['nodes', i], catalogProblems(kind, block, path, { allowRealtime: false }, catalog));
      }
    }
    if (global) {
      const description = own(record, 'global_description');
      if (description === undefined || isBlank(description)) {
        problems.add(
          ['nodes', i, 'global_description'],
          'required on a global node: say when the caller should be taken here',
        );
      }
    }
    if (type === 'tool') checkToolArguments(record, i, problems);
    checkToolParameters(record, i, problems);
  }
  const nodeById = (id: string): NodeView | undefined => {
    const index = firstIndexById.get(id);
    return index === undefined ? undefined : nodes[index];
  };

  // 3. Edges: references, self-loops, duplicates; collect each node's ways out.
  const outgoing = new Map<string, number[]>();
  const adjacency = new Map<string, string[]>();
  const edgeIndexByPair = new Map<string, number>();
  for (let k = 0; k < (rawEdges?.length ?? 0); k++) {
    const record = asRecord(rawEdges![k]);
    const from = record && typeof own(record, 'from') === 'string' ? (own(record, 'from') as string) : undefined;
    const to = record && typeof own(record, 'to') === 'string' ? (own(record, 'to') as string) : undefined;
    const fromKnown = from !== undefined && firstIndexById.has(from);
    const toKnown = to !== undefined && firstIndexById.has(to);
    if (from !== undefined && !fromKnown) problems.add(['edges', k, 'from'], `unknown node ${quote(from)}`);
    if (to !== undefined && !toKnown) problems.add(['edges', k, 'to'], `unknown node ${quote(to)}`);
    if (from !== undefined && from === to) {
      problems.add(['edges', k], `leads from ${quote(from)} back to itself; an edge must lead to another node`);
    } else if (from !== undefined && to !== undefined) {
      const pair = `${from}\u0000${to}`;
      const first = edgeIndexByPair.get(pair);
      if (first === undefined) edgeIndexByPair.set(pair, k);
      else problems.add(['edges', k], `duplicate of edges[${first}] (same from ${quote(from)} and to ${quote(to)})`);
      if (fromKnown && toKnown) push(adjacency, from, to);
    }
    if (fromKnown) push(outgoing, from, k);
  }

  // 4. Ways out by node type, and edge descriptions.
  for (const node of nodes) {
    if (node.id === undefined || node.type === undefined) continue;
    if (firstIndexById.get(node.id) !== node.index) continue; // a duplicate; reported above
    const out = outgoing.get(node.id) ?? [];
    const path = ['nodes', node.index];
    const warm = node.type === 'transfer' && own(node.record!, 'mode') === 'warm';
    switch (node.type) {
      case 'transfer':
        if (!warm) {
          for (const k of out) {
            problems.add(['edges', k, 'from'], `${quote(node.id)} is a transfer node, which cannot have outgoing edges (a warm one, "mode": "warm", may have one)`);
          }
          break;
        }
        // a warm transfer's one way out: taken when the transfer does not complete
        for (const k of out.slice(1)) {
          problems.add(
            ['edges', k, 'from'],
            `${quote(node.id)} is a warm transfer node, which may have one outgoing edge (the way taken when the transfer does not complete); it has ${out.length}`,
          );
        }
        break;
      case 'end':
        for (const k of out) {
          problems.add(
            ['edges', k, 'from'],
            `${quote(node.id)} is ${article(node.type)} node, which cannot have outgoing edges`,
          );
        }
        break;
      case 'tool':
        if (out.length === 0) problems.add(path, 'a tool node needs at least one outgoing edge');
        break;
      case 'conversation': {
        const otherGlobals = globalCount - (node.global ? 1 : 0);
        if (out.length === 0 && otherGlobals === 0) {
          problems.add(
            path,
            'a conversation node needs at least one outgoing edge (or the workflow needs a global node to go to)',
          );
        }
        break;
      }
    }
    // A description tells the model when to take an edge (a warm transfer's: when the transfer
    // fails, for people reading the workflow); a tool node's only way out needs none.
    if (node.type === 'conversation' || (node.type === 'tool' && out.length > 1) || warm) {
      for (const k of out) {
        const description = own(asRecord(rawEdges![k])!, 'description');
        if (description !== undefined && !isBlank(description)) continue;
        problems.add(
          ['edges', k, 'description'],
          node.type === 'conversation'
            ? `required on an edge leaving a conversation node (${quote(node.id)})`
            : warm
              ? `required on the edge leaving a warm transfer node (${quote(node.id)}): say when it is taken (the transfer did not complete)`
              : `required when a node has more than one outgoing edge (${quote(node.id)} has ${out.length})`,
        );
      }
    }
  }

  // 5. Reachability from entry_node; a global node is reachable from every reachable
  //    conversation node.
  const entry = own(root, 'entry_node');
  if (typeof entry === 'string') {
    if (!firstIndexById.has(entry)) {
      problems.add(['entry_node'], `unknown node ${quote(entry)}`);
    } else {
      const reached = reachableFrom(entry, adjacency, nodes, nodeById);
      for (const node of nodes) {
        if (node.id === undefined || firstIndexById.get(node.id) !== node.index) continue;
        if (!reached.has(node.id)) {
          problems.add(['nodes', node.index], `unreachable from entry_node ${quote(entry)}`);
        }
      }
    }
  }

  return result.success ? result.data : undefined;
}

function reachableFrom(
  entry: string,
  adjacency: Map<string, string[]>,
  nodes: readonly NodeView[],
  nodeById: (id: string) => NodeView | undefined,
): Set<string> {
  const globals: string[] = [];
  for (const node of nodes) if (node.global && node.id !== undefined) globals.push(node.id);
  const reached = new Set<string>([entry]);
  const queue: string[] = [entry];
  let globalsAdded = false;
  for (let head = 0; head < queue.length; head++) {
    const id = queue[head]!;
    const next = adjacency.get(id) ?? [];
    const reachesGlobals = !globalsAdded && nodeById(id)?.type === 'conversation';
    if (reachesGlobals) globalsAdded = true;
    for (const to of reachesGlobals ? [...next, ...globals] : next) {
      if (!reached.has(to)) {
        reached.add(to);
        queue.push(to);
      }
    }
  }
  return reached;
}

/** DECISIONS 3 rule 10: every field of a node must belong to its type. */
function checkNodeFields(node: NodeView, problems: ProblemList): void {
  const record = node.record!;
  for (const key of Object.keys(record)) {
    const path = ['nodes', node.index, key];
    if (key === 'speech_config') {
      problems.add(path, 'not allowed on a node (speech settings belong to the assistant)');
      continue;
    }
    if (node.type === undefined) {
      if (!ANY_NODE_FIELD.has(key)) problems.add(path, 'unknown field');
      continue;
    }
    if (NODE_SHAPES[node.type].has(key)) {
      if (node.type === 'transfer' && (WARM_TRANSFER_FIELDS as readonly string[]).includes(key) && own(record, 'mode') !== 'warm') {
        problems.add(path, WARM_ONLY_MESSAGE);
      }
      continue;
    }
    if (key === 'global' || key === 'global_description') {
      problems.add(path, `not allowed on ${article(node.type)} node (only conversation nodes may be global)`);
      continue;
    }
    const owners = NODE_TYPE_LIST.filter((t) => NODE_SHAPES[t].has(key));
    problems.add(
      path,
      owners.length > 0
        ? `not allowed on ${article(node.type)} node (it belongs to ${owners.join(' and ')} nodes)`
        : `unknown field (${article(node.type)} node takes ${[...NODE_SHAPES[node.type]].join(', ')})`,
    );
  }
}

/** A record key `__proto__` would be silently dropped by parsing; refuse it by name. */
function checkToolArguments(record: Record<string, unknown>, i: number, problems: ProblemList): void {
  const args = asRecord(own(record, 'arguments'));
  if (args && Object.hasOwn(args, '__proto__')) {
    problems.add(['nodes', i, 'arguments', '__proto__'], 'not allowed as an argument name');
  }
}

/**
 * Tool parameter schemas in a node's llm_config are opaque JSON to the schema. Bound their depth
 * (JSON.stringify overflows the stack on a deep value, and storing the definition needs it) and
 * refuse a `__proto__` parameter name, which parsing would silently drop.
 */
function checkToolParameters(record: Record<string, unknown>, i: number, problems: ProblemList): void {
  const llm = asRecord(own(record, 'llm_config'));
  const tools = llm ? asArray(own(llm, 'tools')) : undefined;
  for (let j = 0; j < (tools?.length ?? 0); j++) {
    const parameters = asRecord(tools![j]) ? asRecord(own(asRecord(tools![j])!, 'parameters')) : undefined;
    if (!parameters) continue;
    const path = ['nodes', i, 'llm_config', 'tools', j, 'parameters'];
    if (nestedDeeperThan(parameters, MAX_JSON_DEPTH)) {
      problems.add(path, `nested more than ${MAX_JSON_DEPTH} levels deep`);
    }
    const properties = asRecord(own(parameters, 'properties'));
    if (properties && Object.hasOwn(properties, '__proto__')) {
      problems.add([...path, 'properties', '__proto__'], 'not allowed as a parameter name');
    }
  }
}

/** Depth of objects and arrays, without recursion (the value may be arbitrarily deep). */
function nestedDeeperThan(value: unknown, max: number): boolean {
  const stack: Array<[unknown, number]> = [[value, 1]];
  while (stack.length > 0) {
    const [current, depth] = stack.pop()!;
    if (typeof current !== 'object' || current === null) continue;
    if (depth > max) return true;
    for (const child of Object.values(current)) {
      if (typeof child === 'object' && child !== null) stack.push([child, depth + 1]);
    }
  }
  return false;
}

// ---------------------------------------------------------------------------------------------
// Schema issues

function addSchemaIssue(issue: Issue, problems: ProblemList): void {
  const path = issue.path;
  // Unknown fields of a node are reported by checkNodeFields, with the node type in mind.
  if (issue.code === 'unrecognized_keys' && path.length === 2 && path[0] === 'nodes') return;
  // A missing provider is reported by catalogProblems, which lists the allowed ones.
  if (
    issue.code === 'invalid_type' &&
    path.length === 4 &&
    path[0] === 'nodes' &&
    BLOCK_KEYS.has(path[2] as string) &&
    path[3] === 'provider' &&
    (issue.input === undefined || issue.input === null)
  ) {
    return;
  }
  for (const detail of describeIssue(issue)) {
    let message = detail.message;
    if (issue.code === 'unrecognized_keys') {
      if (path.length === 0) message = `unknown field (a definition takes ${DEFINITION_FIELDS.join(', ')})`;
      else if (path.length === 2 && path[0] === 'edges') message = `unknown field (an edge takes ${EDGE_FIELDS.join(', ')})`;
    }
    problems.add(detail.path, message);
  }
}

interface Detail {
  path: Path;
  message: string;
}

const DEFAULT_MESSAGE = /^(Invalid |Too big: |Too small: |Unrecognized key)/;
const isCustomMessage = (issue: Issue) => issue.message !== '' && !DEFAULT_MESSAGE.test(issue.message);

function describeIssue(issue: Issue): Detail[] {
  const path = issue.path;
  const one = (message: string): Detail[] => [{ path, message }];
  switch (issue.code) {
    case 'invalid_type': {
      if (isCustomMessage(issue)) return one(issue.message);
      const received = receivedOf(issue);
      if (received === 'missing') return one('required');
      const expected = typeName(issue.expected, true);
      // "must be an integer, not a number" would be wrong: 1.5 is a number.
      const vague = received === undefined || (issue.expected === 'int' && received === 'a number');
      return one(vague ? `must be ${expected}` : `must be ${expected}, not ${received}`);
    }
    case 'invalid_value': {
      if (isCustomMessage(issue)) return one(issue.message);
      const values = issue.values.map(showPrimitive);
      const wanted = values.length === 1 ? values[0]! : `one of ${values.join(', ')}`;
      const got = 'input' in issue ? describeValue(issue.input, true) : undefined;
      if (got === 'missing') return one(`required (must be ${wanted})`);
      return one(got ? `must be ${wanted}, not ${got}` : `must be ${wanted}`);
    }
    case 'too_big': {
      if (isCustomMessage(issue)) return one(issue.message);
      const max = String(issue.maximum);
      if (issue.origin === 'string') return one(`must be at most ${max} characters long`);
      if (issue.origin === 'array' || issue.origin === 'set') return one(`must have at most ${max} items`);
      return one(issue.inclusive === false ? `must be less than ${max}` : `must be at most ${max}`);
    }
    case 'too_small': {
      if (isCustomMessage(issue)) return one(issue.message);
      const min = String(issue.minimum);
      if (issue.origin === 'string') {
        return one(min === '1' ? 'must not be empty' : `must be at least ${min} characters long`);
      }
      if (issue.origin === 'array' || issue.origin === 'set') {
        return one(min === '1' ? 'must not be empty' : `must have at least ${min} items`);
      }
      return one(issue.inclusive === false ? `must be greater than ${min}` : `must be at least ${min}`);
    }
    case 'invalid_format': {
      if (isCustomMessage(issue)) return one(issue.message);
      if (issue.format === 'regex' && issue.pattern) return one(`must match the pattern ${issue.pattern}`);
      if (issue.format === 'email') return one('must be an e-mail address');
      if (issue.format === 'url') return one('must be a URL');
      if (issue.format === 'uuid') return one('must be a UUID');
      return one(`must be a valid ${issue.format}`);
    }
    case 'not_multiple_of':
      return one(isCustomMessage(issue) ? issue.message : `must be a multiple of ${issue.divisor}`);
    case 'unrecognized_keys':
      return issue.keys.map((key) => ({ path: [...path, key], message: 'unknown field' }));
    case 'invalid_union': {
      if (isCustomMessage(issue)) return one(issue.message);
      if (issue.discriminator !== undefined && 'options' in issue && issue.options) {
        const options = issue.options.map(showPrimitive).join(', ');
        const got = discriminatorValue(issue);
        if (got === 'missing') return one(`required (one of ${options})`);
        return one(got ? `must be one of ${options}, not ${got}` : `must be one of ${options}`);
      }
      if (issue.inclusive === false) return one('matches more than one of the allowed forms');
      const expected = simpleUnionTypes(issue.errors);
      if (expected) {
        const got = 'input' in issue ? describeValue(issue.input, true) : undefined;
        if (got === 'missing') return one('required');
        const list = `${expected.slice(0, -1).join(', ')} or ${expected[expected.length - 1]}`;
        return one(got ? `must be ${list}, not ${got}` : `must be ${list}`);
      }
      return one('does not match any of the allowed forms');
    }
    case 'invalid_key': {
      // a field name refused for what it holds (an unpaired surrogate) says so
      const own = issue.issues.find((i) => isCustomMessage(i as Issue));
      return one(own ? `field name ${own.message}` : 'has an invalid key');
    }
    case 'invalid_element':
      return one('has an invalid item');
    default:
      return one(isCustomMessage(issue) ? issue.message : 'is not valid');
  }
}

/** `a string`, `an object`, … for the value an issue was about; `missing` for undefined. */
function receivedOf(issue: z.core.$ZodIssueInvalidType): string | undefined {
  if ('input' in issue) return describeValue(issue.input, true);
  // Issues parsed without `reportInput` still name the received type in zod's default message.
  const match = / received (\w+)$/.exec(issue.message);
  if (!match) return undefined;
  return match[1] === 'undefined' ? 'missing' : typeName(match[1]!, true);
}

function discriminatorValue(issue: z.core.$ZodIssueInvalidUnion): string | undefined {
  if (!('input' in issue)) return undefined;
  const record = asRecord(issue.input);
  if (!record) return undefined; // the object itself is wrong; its type is reported as such
  return describeValue(own(record, issue.discriminator as string), true);
}

/** For unions of plain types (`string | number | boolean | null`): the list of type names. */
function simpleUnionTypes(branches: readonly (readonly Issue[])[]): string[] | undefined {
  if (branches.length < 2) return undefined;
  const names: string[] = [];
  for (const branch of branches) {
    const only = branch[0];
    if (branch.length !== 1 || !only || only.code !== 'invalid_type' || only.path.length !== 0) return undefined;
    names.push(typeName(only.expected, names.length === 0));
  }
  return names;
}

const TYPE_NAMES: Record<string, string> = {
  string: 'a string',
  number: 'a number',
  int: 'an integer',
  boolean: 'a boolean',
  object: 'an object',
  array: 'an array',
  null: 'null',
  bigint: 'a bigint',
  symbol: 'a symbol',
  function: 'a function',
  date: 'a date',
  nan: 'NaN',
  record: 'an object',
  map: 'a map',
  set: 'a set',
  undefined: 'undefined',
};

function typeName(type: string, withArticle: boolean): string {
  const name = TYPE_NAMES[type] ?? `a ${type}`;
  return withArticle ? name : name.replace(/^an? /, '');
}

/** What a value is, for "must be X, not Y". Never prints an object or a long string. */
function describeValue(value: unknown, short: boolean): string {
  if (value === undefined) return 'missing';
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  switch (typeof value) {
    case 'string':
      return short ? quote(value) : 'a string';
    case 'number':
      return Number.isFinite(value) ? String(value) : 'a non-finite number';
    case 'boolean':
      return String(value);
    case 'object':
      return 'an object';
    default:
      return typeName(typeof value, true);
  }
}

function showPrimitive(value: unknown): string {
  if (typeof value === 'string') return quote(value);
  if (typeof value === 'number' || typeof value === 'boolean' || value === null) return String(value);
  return typeName(typeof value, true);
}

// ---------------------------------------------------------------------------------------------
// Problems: de-duplicated, grouped by where they are, capped

const TOP_LEVEL_ORDER = ['version', 'entry_node', 'global_prompt', 'nodes', 'edges'];

interface Entry {
  text: string;
  section: number;
  index: number;
  seq: number;
}

class ProblemList {
  private readonly seen = new Set<string>();
  private readonly entries: Entry[] = [];
  private uncounted = 0;

  /** `input`: the definition as given, which names the nodes and edges in paths. */
  constructor(private readonly input: unknown) {}

  /** `nodes[2] (booking).llm_config`: a path into the definition, for a detail. */
  format(path: Path): string {
    return formatPath(path, this.input) || ROOT_LABEL;
  }

  add(path: Path, message: string): void {
    if (this.entries.length >= MAX_COLLECTED) {
      this.uncounted++;
      return;
    }
    this.push(path, `${this.format(path)}: ${message}`);
  }

  /** Already formatted details (`nodes[2] (booking).llm_config.model: …`) about the place `where`. */
  addText(where: Path, texts: readonly string[]): void {
    for (const text of texts) this.push(where, text);
  }

  isEmpty(): boolean {
    return this.entries.length === 0 && this.uncounted === 0;
  }

  details(max: number): string[] {
    const sorted = [...this.entries].sort(
      (a, b) => a.section - b.section || a.index - b.index || a.seq - b.seq,
    );
    const total = sorted.length + this.uncounted;
    if (total <= max) return sorted.map((e) => e.text);
    const shown = sorted.slice(0, max - 1).map((e) => e.text);
    const more = total - shown.length;
    shown.push(`... and ${more} more problem${more === 1 ? '' : 's'}`);
    return shown;
  }

  private push(where: Path, text: string): void {
    if (this.seen.has(text)) return;
    if (this.entries.length >= MAX_COLLECTED) {
      this.uncounted++;
      return;
    }
    this.seen.add(text);
    const top = where[0];
    const order = typeof top === 'string' ? TOP_LEVEL_ORDER.indexOf(top) : -1;
    this.entries.push({
      text,
      section: where.length === 0 ? -1 : order === -1 ? TOP_LEVEL_ORDER.length : order,
      index: typeof where[1] === 'number' ? where[1] : -1,
      seq: this.entries.length,
    });
  }
}

// ---------------------------------------------------------------------------------------------
// Small helpers

function joinPath(prefix: string, path: string): string {
  if (prefix === '') return path;
  if (path === '') return prefix;
  return path.startsWith('[') ? `${prefix}${path}` : `${prefix}.${path}`;
}

function article(type: string): string {
  return /^[aeiou]/.test(type) ? `an ${type}` : `a ${type}`;
}

function asRecord(value: unknown): Record<string, unknown> | undefined {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : undefined;
}

function asArray(value: unknown): readonly unknown[] | undefined {
  return Array.isArray(value) ? value : undefined;
}

function isBlank(value: unknown): boolean {
  return typeof value === 'string' && value.trim() === '';
}

function push<K, V>(map: Map<K, V[]>, key: K, value: V): void {
  const list = map.get(key);
  if (list) list.push(value);
  else map.set(key, [value]);
}
