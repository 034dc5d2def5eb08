/**
 * What PostgreSQL cannot store, refused as a 400 before a write rather than failing inside the
 * database as a 500: the NUL character and unpaired UTF-16 surrogates (text and jsonb reject
 * both), and JSON nested so deep that jsonb and JSON.stringify run out of stack. And what it
 * would store wrongly: a number too large for a double (`1e400` parses as Infinity, which
 * JSON.stringify, and so jsonb, would keep as `null`).
 */
import type { z } from 'zod';
import { formatPath } from '../../engine/paths.js';
import { isWellFormed, UNPAIRED_SURROGATE_PROBLEM } from '../../engine/text.js';

/** Levels of nesting a request body may have (a JSON-Schema inside an assistant is ~60 deep at most). */
export const MAX_JSON_DEPTH = 64;
/** Problems reported at most (a body full of NUL characters need not list each). */
const MAX_PROBLEMS = 20;

function textProblem(text: string): string | null {
  if (text.includes('\u0000')) return 'must not contain the NUL character (\\u0000)';
  return isWellFormed(text) ? null : UNPAIRED_SURROGATE_PROBLEM;
}

export const NON_FINITE_PROBLEM = 'must be a finite number (at most about ±1.8e308 in size)';

export interface StorableProblem {
  path: (string | number)[];
  message: string;
}

/**
 * Every unstorable string, field name, number or nesting in a parsed JSON value (iterative: no
 * recursion). `numbersOnly`: non-finite numbers alone, within the depth limit.
 */
export function storableProblems(value: unknown, { numbersOnly = false } = {}): StorableProblem[] {
  const problems: StorableProblem[] = [];
  const stack: [unknown, (string | number)[]][] = [[value, []]];
  while (stack.length > 0 && problems.length < MAX_PROBLEMS) {
    const [item, path] = stack.pop()!;
    if (typeof item === 'number') {
      if (!Number.isFinite(item)) problems.push({ path, message: NON_FINITE_PROBLEM });
      continue;
    }
    if (typeof item === 'string') {
      const problem = numbersOnly ? null : textProblem(item);
      if (problem) problems.push({ path, message: problem });
      continue;
    }
    if (typeof item !== 'object' || item === null) continue;
    if (path.length >= MAX_JSON_DEPTH) {
      if (!numbersOnly) problems.push({ path, message: `nested deeper than ${MAX_JSON_DEPTH} levels` });
      continue;
    }
    if (Array.isArray(item)) {
      for (let i = item.length - 1; i >= 0; i--) stack.push([item[i], [...path, i]]);
      continue;
    }
    const entries = Object.entries(item);
    for (let i = entries.length - 1; i >= 0; i--) {
      const [key, child] = entries[i]!;
      const problem = numbersOnly ? null : textProblem(key);
      if (problem) problems.push({ path: [...path, key], message: `field name ${problem}` });
      stack.push([child, [...path, key]]);
    }
  }
  return problems;
}

/** The body schema, refusing what the database cannot store (each problem at its JSON path). */
export function storable<T extends z.ZodType>(schema: T): T {
  return schema.superRefine((value, ctx) => {
    for (const { path, message } of storableProblems(value)) {
      ctx.addIssue({ code: 'custom', message, path, input: value });
    }
  }) as T;
}

/**
 * The JSON parser's check (src/app.ts): numbers that do not fit a double, as path-first details
 * (`llm_config.temperature: must be a finite number …`), before any schema sees them as Infinity.
 * The nodes and edges of a definition in `value` are named (`definition.nodes[2] (booking).…`).
 */
export function nonFiniteNumberDetails(value: unknown): string[] {
  return storableProblems(value, { numbersOnly: true }).map(
    ({ path, message }) => `${formatPath(path, value) || 'body'}: ${message}`,
  );
}
