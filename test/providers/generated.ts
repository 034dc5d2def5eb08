/**
 * The files written from the provider declarations (src/providers/registry.ts): the engine's
 * catalog entries (`engine/catalog-providers.ts`; the engine reads nothing from src/) and the
 * providers' table of the docs (`docs/vendors.md`). registry.test.ts compares them with the files
 * and writes them with `-u`.
 */
import { urlFieldOf, type CatalogProvider } from '../../engine/catalog.js';
import { apiBaseVariable, apiKeyVariable, type ProviderDeclaration } from '../../src/providers/declare.js';

const WIDTH = 100;

const quote = (s: string) => `'${JSON.stringify(s).slice(1, -1).replaceAll('\\"', '"').replaceAll("'", "\\'")}'`;
const key = (k: string) => (/^[A-Za-z_$][\w$]*$/.test(k) ? k : quote(k));

/** A list of strings packed into lines of at most WIDTH characters, each indented by `indent`. */
function packed(items: readonly string[], indent: string): string {
  const lines: string[] = [];
  let line = '';
  for (const item of items.map(quote)) {
    const next = line ? `${line} ${item},` : `${indent}${item},`;
    if (line && next.length > WIDTH) {
      lines.push(line);
      line = `${indent}${item},`;
    } else line = next;
  }
  if (line) lines.push(line);
  return lines.join('\n');
}

function value(v: unknown, indent: string): string {
  if (v === null || typeof v === 'number' || typeof v === 'boolean') return String(v);
  if (typeof v === 'string') return quote(v);
  if (Array.isArray(v)) {
    if (v.length === 0) return '[]';
    if (v.every((x) => typeof x === 'string')) return `[\n${packed(v as string[], `${indent}  `)}\n${indent}]`;
    return `[\n${v.map((x) => `${indent}  ${value(x, `${indent}  `)},`).join('\n')}\n${indent}]`;
  }
  const entries = Object.entries(v as Record<string, unknown>).filter(([, x]) => x !== undefined);
  return `{\n${entries.map(([k, x]) => `${indent}  ${key(k)}: ${value(x, `${indent}  `)},`).join('\n')}\n${indent}}`;
}

export function catalogModule(entries: readonly CatalogProvider[]): string {
  return `/**
 * The catalog's providers, written from their declarations in src/providers/ (the \`catalog\` of
 * each \`provider\` that src/providers/registry.ts lists, in its order). Do not edit: change the
 * declaration, then \`npx vitest run --project unit test/providers/registry.test.ts -u\` writes this
 * file again (the test fails while it differs). The engine reads nothing from src/, so the data
 * lives here too.
 */
import type { CatalogProvider } from './catalog.js';

export const CATALOG_PROVIDERS: CatalogProvider[] = ${value(entries, '')};
`;
}

const code = (s: string) => `\`${s}\``;
const KINDS = { llm: 'LLM', realtime: 'Realtime', stt: 'STT', tts: 'TTS' } as const;

function models(p: CatalogProvider): string {
  if (p.models === null) return 'any (`model` required)';
  return p.models.map((m) => (m === p.default_model ? `**${code(m)}**` : code(m))).join(', ');
}

function extras(p: CatalogProvider): string {
  const out: string[] = [];
  if (p.languages) out.push(`languages per model (${Object.entries(p.languages).map(([m, l]) => `${m}: ${l.length}`).join(', ')})`);
  if (p.default_language) out.push(`default language ${code(p.default_language)}`);
  if (p.voices === null) out.push('voices not listed (`voice_id` required)');
  else if (p.voices) out.push(`voices ${p.voices.map(code).join(', ')}${p.default_voice ? ` (default ${code(p.default_voice)})` : ''}`);
  if (p.requires_url) out.push(`${code(urlFieldOf(p.kind))} required`);
  return out.join('; ');
}

export function vendorsDoc(providers: readonly ProviderDeclaration[]): string {
  const rows = providers.map(({ catalog: p, account, needs }) => {
    const what = account ? `${code(apiKeyVariable(account))}; ${code(apiBaseVariable(account))} (default ${account.baseUrl})` : (needs ?? 'nothing');
    const more = extras(p);
    return `| ${KINDS[p.kind]} | ${code(p.id)} | ${p.description} | ${models(p)}${more ? `; ${more}` : ''} | ${what} |`;
  });
  return `# Providers and vendors

<!-- Written from the provider declarations (src/providers/registry.ts) by
test/providers/registry.test.ts: do not edit; \`npx vitest run --project unit test/providers/registry.test.ts -u\`. -->

Every provider a config block can name (\`llm_config.provider\`, \`stt_config.provider\`,
\`tts_config.provider\`; a realtime provider in an assistant's \`llm_config\`), as \`GET /catalog\`
serves it, and what the server needs to run it. The default model is in bold. A vendor's key and
base URL are read from \`<VENDOR>_API_KEY\` and \`<VENDOR>_API_BASE\`; an assistant that needs a
key the server lacks is saved with \`warnings\`, and its calls and chats are refused at start
(docs/providers.md, "Keys the server does not have"). An assistant without \`llm_config\` runs
\`openai\`'s \`gpt-4o-mini\`, one without \`stt_config\` listens through \`deepgram\`
(engine/assistant.ts). docs/providers.md describes each adapter, and how to add a vendor.

| Kind | \`provider\` | What it is | Models (default in bold), languages, voices | Needs |
|---|---|---|---|---|
${rows.join('\n')}
`;
}
