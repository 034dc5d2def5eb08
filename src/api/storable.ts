/**
 * What PostgreSQL cannot store, refused as a 400 before a write rather than failing inside the
 * database as a 500: the NUL character and unpaired UTF-16 surrogates (text and jsonb reject
 * both), and JSON nested so deep that jsonb and JSON.stringify run out of stack.
 */
import type { z } from 'zod';

/** Levels of nesting a request body may have (a JSON-Schema inside an assistant is ~60 deep at most). */
export const MAX_JSON_DEPTH = 64;
/** Problems reported at most (a body full of NUL characters need not list each). */
const MAX_PROBLEMS = 20;

const UNSTORABLE = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

function textProblem(text: string): string | null {
  const match = UNSTORABLE.exec(text);
  if (!match) return null;
  return match[0] === '\u0000'
    ? 'must not contain the NUL character (\\u0000)'
    : 'must not contain an unpaired UTF-16 surrogate (not valid Unicode)';
}

export interface StorableProblem {
  path: (string | number)[];
  message: string;
}

/** Every unstorable string, field name or nesting in a parsed JSON value (iterative: no recursion). */
export function storableProblems(value: unknown): StorableProblem[] {
  const problems: StorableProblem[] = [];
  const stack: [unknown, (string | number)[]][] = [[value, []]];
  while (stack.length > 0 && problems.length < MAX_PROBLEMS) {
    const [item, path] = stack.pop()!;
    if (typeof item === 'string') {
      const problem = textProblem(item);
      if (problem) problems.push({ path, message: problem });
      continue;
    }
    if (typeof item !== 'object' || item === null) continue;
    if (path.length >= MAX_JSON_DEPTH) {
      problems.push({ path, message: `nested deeper than ${MAX_JSON_DEPTH} levels` });
      continue;
    }
    if (Array.isArray(item)) {
      for (let i = item.length - 1; i >= 0; i--) stack.push([item[i], [...path, i]]);
      continue;
    }
    const entries = Object.entries(item);
    for (let i = entries.length - 1; i >= 0; i--) {
      const [key, child] = entries[i]!;
      const problem = textProblem(key);
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
