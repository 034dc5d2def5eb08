/**
 * How the OpenAPI document is made from the routes' zod schemas (docs/openapi.md): the
 * fastify-type-provider-zod transforms, then the repairs that OpenAPI 3.0 needs and that they do
 * not make, and the `servers` entry.
 */
import type { SwaggerTransform, SwaggerTransformObject } from '@fastify/swagger';
import { jsonSchemaTransform, jsonSchemaTransformObject } from 'fastify-type-provider-zod';
import type { Config } from '../config.js';

type Json = Record<string, unknown>;

const isObject = (value: unknown): value is Json => typeof value === 'object' && value !== null && !Array.isArray(value);

/** Keys whose values are data, not schemas: an example may well hold a `nullable` field of its own. */
const DATA_KEYS = new Set(['example', 'examples', 'default', 'enum', 'const']);

/**
 * OpenAPI 3.0 reads `nullable` only beside a `type` (3.0.3). zod writes a nullable union as
 * `{anyOf: [...], nullable: true}` and a nullable `unknown` as `{nullable: true}`: the first
 * becomes nullable branches, the second loses the keyword (a schema without a type already
 * takes any value, null included). Returns a repaired copy.
 */
export function typedNullable<T>(value: T): T {
  if (Array.isArray(value)) return value.map(typedNullable) as T;
  if (!isObject(value)) return value;
  const out: Json = {};
  for (const [key, child] of Object.entries(value)) out[key] = DATA_KEYS.has(key) ? child : typedNullable(child);
  if (out.nullable !== true || '$ref' in out) return out as T;
  // an enum lists null itself (3.0.3): `nullable` does not add it there
  if (Array.isArray(out.enum) && !out.enum.includes(null)) out.enum = [...out.enum, null];
  if ('type' in out) return out as T;
  delete out.nullable;
  for (const keyword of ['anyOf', 'oneOf'] as const) {
    const branches = out[keyword];
    if (!Array.isArray(branches)) continue;
    const typed = branches.filter((b): b is Json => isObject(b) && 'type' in b);
    out[keyword] =
      typed.length > 0
        ? branches.map((b) => (typed.includes(b) ? { ...b, nullable: true } : b))
        : [...branches, { type: 'string', nullable: true, enum: [null] }];
  }
  return out as T;
}

/** Each route's schemas, from zod, repaired. */
export const openApiTransform: SwaggerTransform = (route) => {
  const { schema, url } = jsonSchemaTransform(route as Parameters<typeof jsonSchemaTransform>[0]);
  return { schema: typedNullable(schema), url };
};

const SCHEMA_REF = '#/components/schemas/';

/** Every `#/components/schemas/…` name that `value` refers to. */
function schemaRefs(value: unknown, into = new Set<string>()): Set<string> {
  if (Array.isArray(value)) for (const item of value) schemaRefs(item, into);
  else if (isObject(value)) {
    for (const [key, child] of Object.entries(value)) {
      if (key === '$ref' && typeof child === 'string' && child.startsWith(SCHEMA_REF)) into.add(child.slice(SCHEMA_REF.length));
      else if (!DATA_KEYS.has(key)) schemaRefs(child, into);
    }
  }
  return into;
}

/**
 * The named schemas that the operations use, and those they use in turn. The zod transform adds
 * every named schema twice (`X` as answered, `XInput` as sent) whether a route uses it or not.
 */
export function withoutUnusedSchemas<T extends Json>(document: T): T {
  const components = isObject(document.components) ? document.components : {};
  const schemas = isObject(components.schemas) ? components.schemas : {};
  const used = schemaRefs({ ...document, components: { ...components, schemas: {} } });
  for (const pending = [...used]; pending.length > 0; ) {
    for (const name of schemaRefs(schemas[pending.pop()!])) {
      if (!used.has(name)) {
        used.add(name);
        pending.push(name);
      }
    }
  }
  const kept = Object.fromEntries(Object.entries(schemas).filter(([name]) => used.has(name)));
  return { ...document, components: { ...components, schemas: kept } };
}

/** The whole document: the named schemas (zod `.meta({ id })`) that are used, as components, repaired. */
export const openApiTransformObject: SwaggerTransformObject = (document) =>
  withoutUnusedSchemas(typedNullable(jsonSchemaTransformObject(document)) as Json);

/**
 * Where the API is: PUBLIC_URL when the deployment sets one, else relative to the document
 * (the default PUBLIC_URL is the listening address, often 0.0.0.0 and not a place to call).
 */
export function apiServers(config: Pick<Config, 'PUBLIC_URL' | 'HOST' | 'PORT'>): { url: string; description: string }[] {
  if (config.PUBLIC_URL === `http://${config.HOST}:${config.PORT}`) return [{ url: '/', description: 'This server' }];
  return [{ url: config.PUBLIC_URL.replace(/\/+$/, '') || '/', description: 'This deployment (PUBLIC_URL)' }];
}
