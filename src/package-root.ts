/**
 * The package's own folder (where package.json and assets/ are), whether the code runs from its
 * sources (src/) or compiled (dist/src/): the nearest folder above this file with a package.json.
 */
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

function find(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    if (existsSync(join(dir, 'package.json'))) return dir;
    const up = dirname(dir);
    if (up === dir) throw new Error('package.json not found above the code');
    dir = up;
  }
}

export const PACKAGE_ROOT = find();
