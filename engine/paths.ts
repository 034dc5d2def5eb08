/**
 * JSON paths at the front of details (`nodes[2] (booking).llm_config.model: …`): the one place
 * that writes them, for workflow validation, the call-start checks, the compiler and request
 * bodies alike.
 *
 * Given the value a path points into, an element of a `nodes` array is named by its `id` and an
 * element of an `edges` array by its `from → to`, so that a person fixing a 500-node definition
 * need not count: `nodes[6] (orphan)`, `edges[3] (greet → booking)`. An element without a string
 * `id` (or without string `from` and `to`) keeps the bare index. An id that is not a valid node id
 * (`[A-Za-z0-9_-]{1,64}`) is shown JSON-quoted and cut short: `nodes[4] ("has space")`.
 */
import { NODE_ID_PATTERN } from './schema.js';

export type Path = readonly PropertyKey[];

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

/**
 * `nodes[2].llm_config.model`, `arguments["first name"]`; with `root`, the value the path points
 * into, `nodes[2] (booking).llm_config.model` and `edges[3] (greet → booking).to`.
 */
export function formatPath(path: Path, root?: unknown): string {
  let out = '';
  // The value at the path so far; `undefined` once the path leaves what `root` holds.
  let current: unknown = root;
  let parentKey: PropertyKey | undefined;
  for (const segment of path) {
    if (typeof segment === 'number') out += `[${segment}]`;
    else if (typeof segment === 'symbol') out += `[${segment.description ?? 'symbol'}]`;
    else if (IDENTIFIER.test(segment)) out += out === '' ? segment : `.${segment}`;
    else out += `[${quote(segment)}]`;
    const list = typeof segment === 'number' && (parentKey === 'nodes' || parentKey === 'edges') ? parentKey : undefined;
    const array = current;
    current = child(current, segment);
    const name = list === undefined ? undefined : nameOf(list, array, current);
    if (name !== undefined) out += ` (${name})`;
    parentKey = segment;
  }
  return out;
}

/** `greet` for an element of a `nodes` array, `greet → booking` for one of an `edges` array. */
function nameOf(list: 'nodes' | 'edges', array: unknown, element: unknown): string | undefined {
  try {
    if (!Array.isArray(array) || typeof element !== 'object' || element === null || Array.isArray(element)) {
      return undefined;
    }
    if (list === 'nodes') {
      const id = child(element, 'id');
      return typeof id === 'string' ? showId(id) : undefined;
    }
    const from = child(element, 'from');
    const to = child(element, 'to');
    return typeof from === 'string' && typeof to === 'string' ? `${showId(from)} → ${showId(to)}` : undefined;
  } catch {
    return undefined; // a revoked proxy: no name, only the path
  }
}

/** An own property only: never `constructor`, `__proto__` or anything else from a prototype. */
export function own<T>(record: Readonly<Record<string, T>>, key: string): T | undefined {
  return Object.hasOwn(record, key) ? record[key] : undefined;
}

/** A well-formed node id as it is; anything else quoted. */
function showId(id: string): string {
  return NODE_ID_PATTERN.test(id) ? id : quote(id);
}

/** An own property of an object or array; undefined for anything else, or if reading throws. */
function child(value: unknown, key: PropertyKey): unknown {
  if (typeof value !== 'object' || value === null) return undefined;
  try {
    return Object.hasOwn(value, key) ? (value as Record<PropertyKey, unknown>)[key] : undefined;
  } catch {
    return undefined; // a hostile value (throwing getter, proxy): no name, only the path
  }
}

/** A user-supplied string inside a message: JSON-quoted, cut short. */
export function quote(value: string): string {
  return JSON.stringify(value.length > 64 ? `${value.slice(0, 64)}…` : value);
}
