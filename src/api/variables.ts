/**
 * `variables` of a request (DECISIONS 12): the values for `{{name}}` placeholders that
 * `POST /chats`, `POST /calls` and `POST /calls/web` take. One schema, so that every way in
 * refuses the same things with the same details (docs/variables.md).
 */
import { z } from 'zod';
import { VARIABLE_NAME_PATTERN } from '../../engine/variables.js';
import { wellFormed } from '../../engine/text.js';

export const MAX_VARIABLES = 100;
export const MAX_VARIABLE_NAME_LENGTH = 64;
export const MAX_VARIABLE_VALUE_LENGTH = 2_000;

const NAME_RULE = `a variable name is 1 to ${MAX_VARIABLE_NAME_LENGTH} of A-Z, a-z, 0-9, _, . and -, not starting with a digit, . or -`;

/** What a value that is none of the three is, for the 400 detail. */
function kindOf(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'object' ? 'an object' : `a ${typeof value}`;
}

export const VariableValue = z.union([wellFormed().max(MAX_VARIABLE_VALUE_LENGTH), z.number(), z.boolean()], {
  error: (issue) => `must be a string, a number or a boolean, not ${kindOf(issue.input)}`,
});

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

export const Variables = z
  .record(wellFormed(), VariableValue)
  .superRefine(
    (vars, ctx) => {
      const names = Object.keys(vars);
      if (names.length > MAX_VARIABLES) {
        ctx.addIssue({ code: 'custom', message: `at most ${MAX_VARIABLES} variables (${names.length} given)`, input: vars });
      }
      for (const name of names) {
        if (!VARIABLE_NAME_PATTERN.test(name)) ctx.addIssue({ code: 'custom', path: [name], message: NAME_RULE, input: name });
      }
    },
    // names are checked even when a value is wrong too: every problem in one answer
    { when: (payload) => isObject(payload.value) },
  )
  .describe(
    `values for {{name}} placeholders in what the assistant says and is told (DECISIONS 12, docs/variables.md): ` +
      `at most ${MAX_VARIABLES}; names 1 to ${MAX_VARIABLE_NAME_LENGTH} of A-Z, a-z, 0-9, _, . and - (not starting with a digit, . or -); ` +
      `values a string of at most ${MAX_VARIABLE_VALUE_LENGTH.toLocaleString('en-US')} characters, a number or a boolean (said as written: 42, true). ` +
      'They win over built-ins of the same name (business_name, customer.number, customer.name, phone_number.number, call.id, call.type, now, today).',
  );
export type Variables = z.infer<typeof Variables>;
