/** The package version: in the OpenAPI document and the webhook `User-Assistant` header. */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { PACKAGE_ROOT } from './package-root.js';

const pkg = JSON.parse(readFileSync(join(PACKAGE_ROOT, 'package.json'), 'utf8')) as {
  name: string;
  version: string;
};

export const VERSION = pkg.version;
export const USER_AGENT = `switchboard/${pkg.version}`;
