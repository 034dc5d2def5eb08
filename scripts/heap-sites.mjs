#!/usr/bin/env node
/**
 * Sums a V8 sampling heap profile (`npm run bench:calls -- --heap-profile FILE`) by allocating
 * function and by file, with the function's caller beside it: where the bytes are allocated.
 *
 *   node scripts/heap-sites.mjs FILE [rows] [seconds]
 *
 * With `seconds` (the window the profile covers), the figures are also given per second.
 */
import { readFileSync } from 'node:fs';

const [file, rowsArg, secondsArg] = process.argv.slice(2);
if (!file) {
  console.error('usage: node scripts/heap-sites.mjs FILE [rows] [seconds]');
  process.exit(2);
}
const rows = Number(rowsArg ?? 40);
const seconds = secondsArg ? Number(secondsArg) : null;
const { head } = JSON.parse(readFileSync(file, 'utf8'));

/** A script's URL from the project's folders on (`src/…`, `node_modules/…`); Node's own as is. */
const short = (url) => url.replace(/^(?:file:\/\/)?\/.*?\/(src|engine|node_modules|test)\//, '$1/');
const where = (cf) => {
  const url = short(cf.url);
  return `${cf.functionName || '(anonymous)'} ${url || '(native)'}${url ? `:${cf.lineNumber + 1}` : ''}`;
};
const bySite = new Map();
const byFile = new Map();
let total = 0;
const walk = (node, parent) => {
  if (node.selfSize > 0) {
    total += node.selfSize;
    const key = `${where(node.callFrame)}  ← ${parent ? where(parent.callFrame) : '(root)'}`;
    bySite.set(key, (bySite.get(key) ?? 0) + node.selfSize);
    const f = short(node.callFrame.url) || '(native)';
    byFile.set(f, (byFile.get(f) ?? 0) + node.selfSize);
  }
  for (const c of node.children) walk(c, node);
};
walk(head, null);

const mb = (b) => (b / 1048576).toFixed(1).padStart(7) + ' MB' + (seconds ? ` ${(b / 1048576 / seconds).toFixed(2).padStart(6)} MB/s` : '');
const show = (title, m) => {
  console.log(`\n${title}`);
  for (const [k, b] of [...m].sort((a, c) => c[1] - a[1]).slice(0, rows)) {
    console.log(`${mb(b)} ${((100 * b) / total).toFixed(1).padStart(5)}%  ${k}`);
  }
};
console.log(`sampled allocations: ${mb(total)}`);
show('by site (allocating function ← its caller)', bySite);
show('by file', byFile);
