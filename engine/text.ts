/**
 * Text as it may enter: well-formed Unicode. An unpaired UTF-16 surrogate (`"\ud800"` in JSON) is
 * no character at all; PostgreSQL refuses it in text and jsonb, and Redis's cjson refuses to read
 * a record holding one, so it is a 400 naming its field wherever text comes in (DECISIONS 22).
 */
import { z } from 'zod';

const UNPAIRED_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

export const UNPAIRED_SURROGATE_PROBLEM = 'must not contain an unpaired UTF-16 surrogate (not valid Unicode)';

/** False when the text holds an unpaired surrogate (astral characters, as pairs, are fine). */
export function isWellFormed(text: string): boolean {
  return !UNPAIRED_SURROGATE.test(text);
}

/** A string schema that refuses unpaired surrogates: every string a client or webhook sends is one. */
export function wellFormed() {
  return z.string().refine(isWellFormed, UNPAIRED_SURROGATE_PROBLEM);
}

const UNPAIRED_SURROGATES = new RegExp(UNPAIRED_SURROGATE.source, 'g');

/** The text with each unpaired surrogate replaced by U+FFFD (String.prototype.toWellFormed). */
export function toWellFormed(text: string): string {
  return text.replace(UNPAIRED_SURROGATES, '\ufffd');
}

/** A copy of a JSON value with every string, field names too, made well-formed. */
export function wellFormedCopy<T>(value: T): T {
  return JSON.parse(JSON.stringify(value), function (this: unknown, _key, v: unknown) {
    if (typeof v === 'string') return toWellFormed(v);
    if (typeof v !== 'object' || v === null || Array.isArray(v)) return v;
    return Object.fromEntries(Object.entries(v).map(([k, child]) => [toWellFormed(k), child]));
  }) as T;
}
