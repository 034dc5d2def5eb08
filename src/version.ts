/** The package version: in the OpenAPI document and the webhook `User-Assistant` header. */
import { readFileSync } from 'node:fs';

const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
  name: string;
  version: string;
};

export const VERSION = pkg.version;
export const USER_AGENT = `switchboard/${pkg.version}`;
